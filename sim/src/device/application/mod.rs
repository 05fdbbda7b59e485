//! The running application (`main/application.cc`, docs/reference/firmware.md §5, §6, §11):
//! what `Application` holds between boots, its construction at boot, the receive path's
//! hand-over, the main task's dispatch of every [`Task`], the `tool_call` threads of 1.x,
//! timers, state transitions and the tool-call dispatcher. The channel's events (open, close,
//! the server hello, incoming JSON) are with the voice interaction in `conversation.rs`.
//!
//! The application is the hub that owns the subsystems and calls each with the pieces it needs:
//! the protocol object ([`Protocol`]), the audio service ([`AudioService`], [`Playback`],
//! [`Microphone`]), the board's objects ([`Peripherals`]), the conversation's members
//! ([`Listening`]) and the upgrade flow ([`Upgrade`]). Its voice interaction (toggle chat, opening
//! the channel, listening, speaking, abort) is the second file of its impl, `conversation.rs`; the
//! buttons ([`Buttons`], polled on the timer task) hand it their callbacks' effects. Volatile:
//! rebuilt at every boot from the board spec and NVS.

mod conversation;
pub(crate) mod inbound;

use std::sync::Arc;

use crate::audio::ChainFault;
use crate::audio::source::Prompt;
use crate::board::DisplayKind;
use crate::cjson::{self, Limits, Parser, Terminator};
use crate::device::audio::AudioService;
use crate::device::button::{Buttons, Effect};
use crate::device::catalogue::{self, BoardObjects};
use crate::device::listening::Listening;
use crate::device::main_loop::MainLoop;
use crate::device::mic::Microphone;
use crate::device::peripherals::{Callback, Peripherals, panic};
use crate::device::platform::{Platform, Receipt, Sent};
use crate::device::playback::Playback;
use crate::device::protocol::Protocol;
use crate::device::status::{self, StatusFacts, SystemFacts};
use crate::device::task::{EventBit, RebootStage, Task, TaskEnd};
use crate::device::upgrade::{Upgrade, UpgradeHost, UpgradeNext};
use crate::firmware::CallPath;
use crate::firmware::state::DeviceState;
use crate::hw::backlight::Backlight;
use crate::hw::nvs::{EspErr, names};
use crate::hw::screen::{self, NetworkIcon, ScreenCall, StatusIcons};
use crate::mcp::server::call_result_payload;
use crate::mcp::{DropReason, McpServer, PropertyValue, Received, ReturnValue, ToolAction, strings};
use crate::time::{SimDuration, SimTime, earliest};
use crate::trace::{BootReason, Event, LogLevel, LogRecord, NvsValue};

/// The application and board objects of one boot.
pub(crate) struct Application {
    /// `McpServer::GetInstance()`: this boot's registry, shared by boots of the same construction.
    pub(crate) mcp: Arc<McpServer>,
    /// The main task's queue (`Application::Schedule`, `Run`).
    pub(crate) main: MainLoop<Task, EventBit>,
    /// `Application::device_state_` (`DeviceStateMachine`).
    pub(crate) state: DeviceState,
    /// `AudioCodec::output_volume_`.
    pub(crate) volume: i32,
    /// The board constructor's objects and their tool callbacks.
    pub(crate) board: Peripherals,
    /// `Application::protocol_`: `None` after `Reboot()` destroyed it.
    pub(crate) protocol: Option<Protocol>,
    /// `Board::uuid_`: NVS `board/uuid`, generated at first boot (`Client-Id`).
    pub(crate) uuid: String,
    /// `Application::audio_service_`: output power and codec state.
    pub(crate) audio: AudioService,
    /// The audio service's decode side: received speech on its way to the codec.
    pub(crate) playback: Playback,
    /// The audio service's microphone side: capture, encoder, send queue.
    pub(crate) mic: Microphone,
    /// Listening mode, abort flag, a deferred listen start, the popup owed.
    pub(crate) listening: Listening,
    /// 1.7.5–1.9.1 `tool_call` threads blocked in a callback: when each resumes, its request id
    /// and what the callback ends with.
    threads: Vec<(SimTime, i32, Result<ReturnValue, Vec<u8>>)>,
    /// A `tool_call` thread or the receive path aborted: the device restarts after the receive.
    pub(crate) abort_pending: bool,
    /// The board's buttons as the button component polls them (made in the board constructor).
    pub(crate) buttons: Buttons,
}

impl Application {
    /// Board constructor + `Application::Initialize` (docs/reference/firmware.md §11.3, §10.5).
    pub(crate) fn boot(platform: &mut Platform) -> Application {
        let spec = platform.spec.clone();
        // Board constructor: UUID, display, camera, board tools, backlight.
        let uuid = match platform.nvs.get_str(names::BOARD, names::UUID) {
            Some(u) => String::from_utf8_lossy(u).into_owned(),
            None => {
                let u = platform.uuid_v4();
                // A failure here would abort the boot; the partition is empty at first boot.
                let _ = platform.nvs_set(names::BOARD, names::UUID, NvsValue::Str(u.clone().into_bytes()));
                u
            }
        };
        platform.log(LogLevel::Info, "Board", || format!("UUID={uuid} SKU={}", spec.name));
        let faults = platform.faults.clone();
        let board = Peripherals::construct(&mut platform.board_io(), &faults);
        if board.display.kind() != DisplayKind::None {
            let theme = board.display.current_theme().map(str::to_string);
            platform.screen.record(platform.now, ScreenCall::Constructed { theme });
        }
        // Application::Initialize: audio codec start (volume restore), then tools.
        let stored = platform
            .nvs
            .get_i32(names::AUDIO, names::OUTPUT_VOLUME, spec.audio.default_volume);
        let volume = if stored <= 0 {
            platform.log(LogLevel::Warn, "AudioCodec", || {
                format!("Output volume value ({stored}) is too small, setting to default (10)")
            });
            10
        } else {
            stored
        };
        platform.log(LogLevel::Info, "AudioCodec", || "Audio codec started");
        let now = platform.now;
        let dummy = platform.faults.codec_dummy;
        platform
            .audio
            .record(now, crate::audio::AudioChange::Fault(ChainFault::DummyCodec, dummy));
        let mut audio = AudioService::new(&spec.audio);
        audio.start(&mut platform.audio, now, volume);
        if board.display.kind() != DisplayKind::None {
            // What the status bar's clock tick reads, and `UpdateStatusBar(true)` at the end of
            // `Initialize` (the network was started just before).
            let w = &platform.world.wifi;
            let icons = StatusIcons {
                network: NetworkIcon::for_wifi(w.connected, w.rssi),
                battery: spec
                    .battery
                    .as_ref()
                    .map(|b| (StatusIcons::battery_index(b.level), b.charging)),
            };
            platform.screen.record(now, ScreenCall::OutputVolume(volume));
            platform.screen.record(now, ScreenCall::StatusIcons(icons));
        }
        if spec.audio.wake_word {
            audio.enable_input(&mut platform.audio, now, true, volume);
        }
        let catalogue = catalogue::catalogue(
            &BoardObjects {
                spec: &spec,
                display: &board.display,
                has_backlight: board.backlight.is_some(),
                has_camera: board.camera.is_some(),
            },
            &platform.catalogues,
        );
        for (level, line) in &catalogue.log {
            platform.log(*level, "MCP", || line.clone());
        }
        let mut app = Application {
            mcp: catalogue.server.clone(),
            main: MainLoop::default(),
            state: DeviceState::Starting,
            volume,
            board,
            protocol: Some(Protocol::initialize(platform)),
            uuid,
            audio,
            playback: Playback::default(),
            mic: Microphone::default(),
            listening: Listening::default(),
            threads: Vec::new(),
            abort_pending: false,
            buttons: Buttons::new(&spec, now, &platform.held),
        };
        app.set_state(platform, DeviceState::Activating);
        app.activate(platform);
        match app.protocol.as_mut().map(|p| p.start(platform)) {
            // The activation task waits in the MQTT client's `Connect()`.
            Some(Ok(true)) => {}
            Some(Err(what)) => {
                platform.emit(|| Event::Panicked {
                    reason: format!("{what} (the MQTT endpoint's port)"),
                });
                app.abort_pending = true;
            }
            _ => app.activation_done(platform),
        }
        app
    }

    /// The activation task ends (`MAIN_EVENT_ACTIVATION_DONE` → `HandleActivationDoneEvent`):
    /// idle, the success sound scheduled on the main task.
    pub(crate) fn activation_done(&mut self, platform: &mut Platform) {
        if let Some(p) = self.protocol.as_mut() {
            p.finish_activation(platform);
        }
        self.raise_error();
        self.set_state(platform, DeviceState::Idle);
        self.main.schedule(Task::PlayPrompt(Prompt::Success));
    }

    /// The activation task's assets step: a stored `assets/download_url` is consumed (erased)
    /// and downloaded at this boot.
    fn activate(&mut self, platform: &mut Platform) {
        if let Some(url) = platform
            .nvs
            .get_str(names::ASSETS, names::DOWNLOAD_URL)
            .map(<[u8]>::to_vec)
            && !url.is_empty()
        {
            platform.nvs.erase(names::ASSETS, names::DOWNLOAD_URL);
            platform.emit(|| Event::NvsErased {
                namespace: names::ASSETS.into(),
                key: names::DOWNLOAD_URL.into(),
            });
            let _ = platform.http("GET", &url);
        }
    }

    /// `audio_service_.PlaySound(prompt)`.
    pub(crate) fn play_prompt(&mut self, platform: &mut Platform, prompt: Prompt) {
        self.audio.play_sound(platform, prompt, self.volume);
    }

    /// `DeviceStateMachine::TransitionTo`; false (and a warning) when the table refuses. A
    /// change sets `MAIN_EVENT_STATE_CHANGED` (one bit, however many changes).
    pub(crate) fn set_state(&mut self, platform: &mut Platform, to: DeviceState) -> bool {
        let from = self.state;
        if from == to {
            return true;
        }
        if platform.firmware.state_table && !from.can_go_to(to) {
            platform.emit(|| Event::StateRejected { from, to });
            return false;
        }
        self.state = to;
        platform.emit(|| Event::StateChanged { from, to });
        self.main.signal(EventBit::StateChanged);
        true
    }

    /// The receive task, one inbound MCP payload on the direct link (`ParseMessage`): parsed
    /// with the heap's limit, then handed to the MCP server; nothing runs on the main task yet.
    pub(crate) fn receive_mcp(
        &mut self,
        platform: &mut Platform,
        parser: &mut Parser,
        terminator: Terminator,
        payload: &[u8],
    ) -> Receipt {
        let limits = Limits {
            heap_bytes: Some(platform.spec.target.free_heap),
        };
        let received = match parser.parse(payload, terminator, limits) {
            Ok(doc) => self.mcp.receive(doc.root()),
            Err(cjson::ParseError::OutOfMemory { .. }) => {
                platform.log(LogLevel::Error, "MCP", || "Failed to parse MCP message: out of memory");
                platform.emit(|| Event::MessageDropped {
                    reason: DropReason::OutOfMemory,
                });
                return Receipt::OutOfMemory;
            }
            Err(_) => Received::Dropped {
                reason: DropReason::Unparseable,
                log: platform.is_tracing().then(|| {
                    let shown = String::from_utf8_lossy(cjson::c_str(payload));
                    LogRecord::mcp_error(format!("Failed to parse MCP message: {shown}"))
                }),
            },
        };
        self.receive(platform, received)
    }

    /// Applies what the receive task decided.
    pub(super) fn receive(&mut self, platform: &mut Platform, received: Received) -> Receipt {
        match received {
            Received::Dropped { reason, log } => {
                if let Some(line) = log {
                    platform.log_record(*line);
                }
                platform.emit(|| Event::MessageDropped { reason });
                Receipt::Dropped { reason }
            }
            Received::Reply {
                id,
                payload,
                is_error,
                log,
                vision,
            } => {
                if let (Some(v), Some(camera)) = (vision, self.board.camera.as_mut()) {
                    camera.set_explain_url(&v.url, &v.token);
                }
                if let Some(line) = log {
                    platform.log_record(*line);
                }
                if platform.firmware.send_logs {
                    platform.log(LogLevel::Info, "Application", || "Send MCP message in sub thread");
                }
                self.main.schedule(Task::Send { payload, id, is_error });
                Receipt::Answered { id, is_error }
            }
            Received::Aborted { reason, log } => {
                platform.log_record(*log);
                let why = reason.clone();
                platform.emit(|| Event::Panicked { reason: why });
                self.abort_pending = true;
                Receipt::Aborted { reason }
            }
            Received::Call { id, tool, args, stack } => {
                let receipt = Receipt::Scheduled {
                    id,
                    tool: self.mcp.tool(tool).shared_name(),
                    args: args.clone(),
                };
                match stack {
                    // 1.7.5–1.9.1: a `tool_call` thread runs the tool now (the recorder's rule:
                    // to completion, before the next payload and any main-loop batch).
                    Some(stack) => self.call_in_thread(platform, id, tool, &args, stack),
                    None => self.main.schedule(Task::Call { id, tool, args }),
                }
                receipt
            }
        }
    }

    /// Runs one task on the main task.
    pub(crate) fn run_task(&mut self, platform: &mut Platform, task: Task) -> TaskEnd {
        match task {
            Task::Send { payload, id, is_error } => {
                match self.protocol.as_mut() {
                    Some(protocol) => protocol.send_mcp(platform, payload, Sent::Reply { id, is_error }),
                    None => platform.emit(|| Event::ReplyDropped {
                        payload,
                        why: "no protocol object",
                    }),
                }
                self.raise_error();
                TaskEnd::Done
            }
            Task::Call { id, tool, args } => match self.call(platform, tool, &args) {
                Callback::Return(value) => self.reply_later(platform, id, Ok(value)),
                Callback::Throw(message) => self.reply_later(platform, id, Err(message)),
                Callback::Blocked(d, outcome) => TaskEnd::Block(d, Task::FinishCall { id, outcome }),
                Callback::Panic(reason) => {
                    platform.emit(|| Event::Panicked { reason });
                    TaskEnd::Restart(BootReason::Panic)
                }
            },
            Task::FinishCall { id, outcome } => self.reply_later(platform, id, outcome),
            Task::UserReboot => {
                platform.log(LogLevel::Warn, "MCP", || "User requested reboot");
                TaskEnd::Block(
                    platform.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Enter,
                    },
                )
            }
            Task::Reboot { stage } => self.reboot(platform, stage),
            Task::Upgrade(upgrade) => match upgrade.resume(self, platform) {
                UpgradeNext::Wait(d, next) => TaskEnd::Block(d, Task::Upgrade(next)),
                UpgradeNext::Done => TaskEnd::Done,
                UpgradeNext::Reboot(d) => TaskEnd::Block(
                    d,
                    Task::Reboot {
                        stage: RebootStage::Enter,
                    },
                ),
            },
            Task::PlayPrompt(prompt) => {
                self.play_prompt(platform, prompt);
                TaskEnd::Done
            }
            Task::Busy(d) if !d.is_zero() => TaskEnd::Block(d, Task::Busy(SimDuration::ZERO)),
            Task::Busy(_) => TaskEnd::Done,
            Task::OpenChannel { mode, stage, wake } => self.open_channel(platform, mode, stage, wake),
            Task::SetState(s) => {
                self.set_state(platform, s);
                TaskEnd::Done
            }
            Task::Voice(task) => self.run_voice_task(platform, task),
            Task::Screen(call) => {
                self.show(platform, call);
                TaskEnd::Done
            }
            Task::RestartMqtt { waiting } => self.restart_mqtt(platform, waiting),
            Task::ServerGoodbye => {
                self.server_goodbye(platform);
                TaskEnd::Done
            }
        }
    }

    /// `Application::Reboot()`: log, destroy the protocol (the socket goes without a close
    /// frame), stop audio, wait 1000 ms, `esp_restart()`; 1.x restarts at once.
    fn reboot(&mut self, platform: &mut Platform, stage: RebootStage) -> TaskEnd {
        match stage {
            RebootStage::Enter => {
                platform.log(LogLevel::Info, "Application", || "Rebooting...");
                platform.emit(|| Event::RebootEntered);
                if !platform.firmware.reboot_closes_first {
                    // 1.x `Reboot()`: `esp_restart()` at once; the socket dies with the chip.
                    return TaskEnd::Restart(BootReason::EspRestart);
                }
                if let Some(mut protocol) = self.protocol.take() {
                    protocol.destroy(platform, "reboot");
                }
                let now = platform.now;
                self.audio.stop_playback(&mut platform.audio, now);
                TaskEnd::Block(
                    platform.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Restart,
                    },
                )
            }
            RebootStage::Restart => TaskEnd::Restart(BootReason::EspRestart),
        }
    }

    /// The second hop: `ReplyResult`/`ReplyError` schedule the send.
    fn reply_later(&mut self, platform: &mut Platform, id: i32, outcome: Result<ReturnValue, Vec<u8>>) -> TaskEnd {
        let is_error = outcome.is_err();
        let payload = match outcome {
            Ok(value) => call_result_payload(id, &value),
            Err(message) => {
                platform.log(LogLevel::Error, "MCP", || {
                    format!("tools/call: {}", String::from_utf8_lossy(&message))
                });
                strings::reply_error(id, &message)
            }
        };
        if platform.firmware.call_path == CallPath::MainTaskSends {
            // 1.9.2–1.9.4: `SendMcpMessage` on the main task sends at once.
            if platform.firmware.send_logs {
                platform.log(LogLevel::Info, "Application", || "Send MCP message in main thread");
            }
            return self.run_task(platform, Task::Send { payload, id, is_error });
        }
        self.main.schedule(Task::Send { payload, id, is_error });
        TaskEnd::Done
    }

    /// 1.7.5–1.9.1 `DoToolCall`: the tool runs in its own `tool_call` thread and its reply (or
    /// what it throws) goes through `SendMcpMessage`, which schedules it on the main task. A
    /// callback that blocks blocks only its thread: the reply is scheduled when it resumes.
    fn call_in_thread(&mut self, platform: &mut Platform, id: i32, tool: usize, args: &[PropertyValue], stack: i32) {
        platform.emit(|| Event::ToolThreadStarted { stack });
        match self.call(platform, tool, args) {
            Callback::Return(value) => {
                self.reply_later(platform, id, Ok(value));
            }
            Callback::Throw(message) => {
                self.reply_later(platform, id, Err(message));
            }
            Callback::Blocked(d, outcome) => {
                let at = platform.now + d;
                self.threads.push((at, id, outcome));
            }
            Callback::Panic(reason) => {
                platform.emit(|| Event::Panicked { reason });
                self.abort_pending = true;
            }
        }
        platform.emit(|| Event::ToolThreadExited);
    }

    /// The earliest esp_timer deadline.
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        let thread = self.threads.iter().map(|(at, _, _)| *at).min();
        let board = earliest(self.board.timer_deadline(), self.audio.timer_deadline());
        let voice = earliest(self.playback.timer_deadline(), self.mic.timer_deadline());
        let protocol = self.protocol.as_ref().and_then(Protocol::timer_deadline);
        earliest(
            earliest(earliest(board, voice), earliest(thread, protocol)),
            self.buttons.deadline(),
        )
    }

    /// Fires every esp_timer due at `platform.now` (timer task outranks the main task).
    pub(crate) fn fire_timers(&mut self, platform: &mut Platform) {
        let now = platform.now;
        while let Some(i) = self.threads.iter().position(|(at, _, _)| *at <= now) {
            let (_, id, outcome) = self.threads.remove(i);
            self.reply_later(platform, id, outcome);
        }
        self.board.fire_timers(&mut platform.board_io());
        for effect in self.buttons.fire(platform) {
            match effect {
                Effect::Signal(bit) => self.main.signal(bit),
                Effect::Volume(delta, long) => self.volume_button(platform, delta, long),
                Effect::Nothing => {}
            }
        }
        let reading = self.listening.wake_detection || self.mic.is_processing();
        let (output_off, input_off) = self.audio.on_power_tick(&mut platform.audio, now, self.volume, reading);
        if output_off {
            platform.emit(|| Event::AudioPoweredDown { output: true });
        }
        if input_off {
            platform.emit(|| Event::AudioPoweredDown { output: false });
        }
        if self
            .playback
            .on_drain_timer(&self.audio, now, self.listening.pending_start)
        {
            self.main.signal(EventBit::PlaybackDrained);
        }
        if self.mic.on_tick(platform) {
            self.main.signal(EventBit::SendAudio);
        }
        let idle = self.state == DeviceState::Idle;
        if let Some(p) = self.protocol.as_mut() {
            let fired = p.fire_timers(platform, idle);
            if fired.restart {
                self.main.schedule(Task::RestartMqtt { waiting: false });
            }
            if fired.activation {
                self.activation_done(platform);
            }
        }
    }

    /// `AudioCodec::SetOutputVolume`: store, log, persist.
    fn set_volume(&mut self, platform: &mut Platform, volume: i32) -> Result<(), EspErr> {
        self.volume = volume;
        let now = platform.now;
        self.audio.set_volume(&mut platform.audio, now, volume);
        self.show(platform, ScreenCall::OutputVolume(volume));
        platform.emit(|| Event::VolumeChanged { volume });
        platform.log(LogLevel::Info, "AudioCodec", || {
            format!("Set output volume to {volume}")
        });
        platform.nvs_set(names::AUDIO, names::OUTPUT_VOLUME, NvsValue::I32(volume))
    }

    /// A call of the display interface, when the board has a display (`NoDisplay`'s methods do
    /// nothing).
    pub(crate) fn show(&self, platform: &mut Platform, call: ScreenCall) {
        if self.board.display.kind() != DisplayKind::None {
            platform.screen.record(platform.now, call);
        }
    }

    /// VOL+/VOL− buttons (±10 clamped, long press = 100/0), and their notification
    /// (`compact_wifi_board.cc:120-147`: `音量 N`, or 最大音量 / 已静音 for a long press).
    pub(crate) fn volume_button(&mut self, platform: &mut Platform, delta: i32, long: bool) {
        let target = if long {
            if delta > 0 { 100 } else { 0 }
        } else {
            (self.volume + delta).clamp(0, 100)
        };
        if let Err(e) = self.set_volume(platform, target) {
            platform.emit(|| Event::Panicked {
                reason: format!("ESP_ERROR_CHECK failed: {e}"),
            });
            return;
        }
        let text = match (long, delta > 0) {
            (true, true) => screen::MAX_VOLUME.to_string(),
            (true, false) => screen::MUTED.to_string(),
            _ => format!("{}{target}", screen::VOLUME),
        };
        self.show(
            platform,
            ScreenCall::ShowNotification {
                text,
                duration_ms: screen::NOTIFICATION_MS,
            },
        );
    }

    /// The callbacks (main task): the application's own tools here, the board objects' in
    /// [`Peripherals`].
    fn call(&mut self, platform: &mut Platform, tool: usize, args: &[PropertyValue]) -> Callback {
        let action = self.mcp.tool(tool).action().clone();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(PropertyValue::Int(0));
        let board = &mut self.board;
        match action {
            ToolAction::GetDeviceStatus => Callback::Return(ReturnValue::Text(self.device_status(platform))),
            ToolAction::SetVolume => match self.set_volume(platform, arg(0).as_int()) {
                Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                Err(e) => panic(e),
            },
            ToolAction::SetBrightness => {
                // `static_cast<uint8_t>(value)`.
                let b = arg(0).as_int() as u8;
                match board.set_brightness(&mut platform.board_io(), b, true) {
                    None => Callback::Return(ReturnValue::Bool(true)),
                    Some(e) => panic(e),
                }
            }
            // 1.x ignores what `SetTheme` did and answers `true`.
            ToolAction::SetTheme => match board.apply_theme(&mut platform.board_io(), arg(0).as_bytes()) {
                Ok(found) => {
                    if found && let Some(t) = board.display.current_theme() {
                        let call = ScreenCall::SetTheme(t.to_string());
                        platform.screen.record(platform.now, call);
                    }
                    Callback::Return(ReturnValue::Bool(found || board.display.is_named()))
                }
                Err(e) => panic(e),
            },
            ToolAction::TakePhoto => board.take_photo(&mut platform.board_io(), arg(0).as_bytes()),
            ToolAction::LampGetState { gpio } => board.lamp_state(gpio),
            ToolAction::LampTurnOn { gpio } => {
                board.drive_gpio(&mut platform.board_io(), gpio, true);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::LampTurnOff { gpio } => {
                board.drive_gpio(&mut platform.board_io(), gpio, false);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::GetSystemInfo => Callback::Return(ReturnValue::Text(self.system_info(platform))),
            ToolAction::Reboot => {
                self.main.schedule(Task::UserReboot);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::UpgradeFirmware => {
                let url = arg(0).as_bytes().to_vec();
                platform.log(LogLevel::Info, "MCP", || {
                    format!(
                        "User requested firmware upgrade from URL: {}",
                        String::from_utf8_lossy(&url)
                    )
                });
                self.main.schedule(Task::Upgrade(Upgrade::start(url)));
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::ScreenGetInfo => board.screen_info(),
            ToolAction::ScreenSnapshot => board.snapshot(&mut platform.board_io(), arg(0).as_bytes(), arg(1).as_int()),
            ToolAction::ScreenPreviewImage => board.preview_image(&mut platform.board_io(), arg(0).as_bytes()),
            ToolAction::AssetsSetDownloadUrl => {
                match platform.nvs_set(
                    names::ASSETS,
                    names::DOWNLOAD_URL,
                    NvsValue::Str(arg(0).as_bytes().to_vec()),
                ) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            ToolAction::Board(index) => board.board_tool(&mut platform.board_io(), index, self.mcp.tool(tool), args),
        }
    }

    /// The software state `GetDeviceStatusJson` reads.
    pub(crate) fn device_status(&self, platform: &Platform) -> Vec<u8> {
        let display = &self.board.display;
        let mut out = Vec::with_capacity(160);
        status::device_status_json(
            &StatusFacts {
                volume: Some(self.volume),
                brightness: self.board.backlight.as_ref().map(Backlight::brightness),
                display: (display.kind() != DisplayKind::None).then(|| (display.height(), display.current_theme())),
                battery: platform.spec.battery.as_ref().map(|b| (b.level, b.charging)),
                wifi: &platform.world.wifi,
            },
            &mut out,
        );
        out
    }

    /// `Board::GetSystemInfoJson` as the device would build it now.
    pub(crate) fn system_info(&self, platform: &Platform) -> Vec<u8> {
        let display = &self.board.display;
        status::system_info_json(&SystemFacts {
            spec: &platform.spec,
            mac: &platform.mac,
            uuid: &self.uuid,
            elf_sha256: &platform.elf_sha256,
            display: (display.is_monochrome(), display.width(), display.height()),
            wifi: &platform.world.wifi,
        })
    }
}

impl UpgradeHost for Application {
    fn channel_is_open(&self, platform: &Platform) -> bool {
        self.channel_open(platform.now)
    }

    fn close_channel(&mut self, platform: &mut Platform) {
        self.drop_socket(platform, "firmware upgrade");
        self.main.schedule(Task::SetState(DeviceState::Idle));
    }

    fn play_sound(&mut self, platform: &mut Platform, prompt: Prompt) {
        self.play_prompt(platform, prompt);
    }

    fn enter_upgrading(&mut self, platform: &mut Platform) {
        self.set_state(platform, DeviceState::Upgrading);
        let now = platform.now;
        self.audio.stop_playback(&mut platform.audio, now);
    }
}
