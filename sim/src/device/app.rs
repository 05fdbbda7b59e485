//! The running application: what `Application` and the board objects hold between boots, the
//! tasks the main loop runs, and every tool callback (`main/application.cc`,
//! `main/mcp_server.cc` lambdas, `main/audio/audio_codec.cc`, `lamp_controller.h`,
//! `backlight.cc`, `esp32_camera.cc`; FIRMWARE.md §5, §6, §11).
//!
//! Everything here is volatile: it is rebuilt at every boot from the board spec and NVS.

use crate::hw::nvs::names;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::audio::ChainFault;
use crate::audio::source::{Prompt, Source};
use crate::board::{BoardTool, DisplayKind};
use crate::device::audio::AudioService;
use crate::device::catalogue::{self, BoardObjects};
use crate::device::channel::{Link, OpenStage, Socket, WsLink};
use crate::device::main_loop::MainLoop;
use crate::device::otto::{self, Otto};
use crate::device::report::{self, StatusFacts, SystemFacts};
use crate::device::state::DeviceState;
use crate::device::tools::Callback;
use crate::device::upgrade::UpgradeStage;
use crate::device::voice::{ListeningMode, Voice};
use crate::device::{Core, Output, Receipt};
use crate::firmware::{CallPath, ThemeTool};
use crate::hw::backlight::Backlight;
use crate::hw::camera::Camera;
use crate::hw::display::Display;
use crate::mcp::server::call_result_payload;
use crate::mcp::{McpServer, PropertyValue, Received, ReturnValue, wire};
use crate::time::SimDuration;
use crate::trace::{BootReason, Event, LogLevel, NvsValue};

/// Work on the main task's queue.
#[derive(Debug)]
pub enum Task {
    /// `SendMcpMessage`'s lambda: send if a protocol object exists.
    Send {
        /// The JSON-RPC message to send.
        payload: Vec<u8>,
    },
    /// `DoToolCall`'s lambda: run the callback, then reply (scheduled again).
    Call {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// Index of the tool in this boot's `McpServer` registry.
        tool: usize,
        /// One coerced value per property, in property order.
        args: Vec<PropertyValue>,
    },
    /// A callback that blocked (HTTP, camera upload) finishing.
    FinishCall {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The callback's return value, or the text of the exception it threw.
        outcome: Result<ReturnValue, Vec<u8>>,
    },
    /// `self.reboot`'s lambda: log, wait 1000 ms, `Reboot()`.
    UserReboot,
    /// `Application::Reboot()` (after its first step) and its 1000 ms before `esp_restart`.
    Reboot {
        /// Where `Reboot()` resumes.
        stage: RebootStage,
    },
    /// `self.upgrade_firmware`'s lambda: `UpgradeFirmware(url)`.
    Upgrade {
        /// The firmware URL from the tool's `url` argument.
        url: Vec<u8>,
        /// Where `UpgradeFirmware` resumes.
        stage: UpgradeStage,
    },
    /// `audio_service_.PlaySound(...)` scheduled on the main task (e.g. the success prompt).
    PlayPrompt(Prompt),
    /// Work elsewhere that keeps the main task busy (e.g. opening the audio channel).
    Busy(SimDuration),
    /// `MAIN_EVENT_TOGGLE_CHAT` (BOOT click, wake word).
    ToggleChat,
    /// `ContinueOpenAudioChannel(mode)` (or `ContinueWakeWordInvoke(word)`) and its waits.
    OpenChannel {
        /// The listening mode to enter once the channel is open (`auto` for a toggle).
        mode: ListeningMode,
        /// Where the open resumes.
        stage: OpenStage,
        /// The wake word whose `listen detect` goes out once the channel is open.
        wake: Option<String>,
    },
    /// A state change the firmware schedules (`on_audio_channel_closed`).
    SetState(DeviceState),
    /// The lambda `tts start` schedules: `aborted_ = false`, speaking.
    TtsStart,
    /// The lambda `tts stop` schedules: idle (manual mode) or listening, if still speaking.
    TtsStop,
    /// `MAIN_EVENT_STATE_CHANGED`: `HandleStateChangedEvent`.
    StateChanged,
    /// `MAIN_EVENT_PLAYBACK_DRAINED`: a deferred `listen start`.
    PlaybackDrained,
    /// `MAIN_EVENT_START_LISTENING` (push-to-talk pressed).
    StartListening,
    /// `MAIN_EVENT_STOP_LISTENING` (push-to-talk released).
    StopListening,
    /// `MAIN_EVENT_WAKE_WORD_DETECTED` for this word.
    WakeWord(String),
    /// `MAIN_EVENT_SEND_AUDIO`: microphone packets go out.
    SendAudio,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where `Application::Reboot` is when the main task resumes it.
pub enum RebootStage {
    /// Log `Rebooting...`, destroy the protocol, stop audio, then wait 1000 ms.
    Enter,
    /// `esp_restart()`.
    Restart,
}

impl Task {
    /// A short description for evidence.
    pub fn describe(&self) -> String {
        match self {
            Task::Send { payload } => format!("send {}", String::from_utf8_lossy(payload)),
            Task::Call { id, tool, .. } => format!("call tool #{tool} for id {id}"),
            Task::FinishCall { id, .. } => format!("finish call for id {id}"),
            Task::UserReboot => "reboot (user requested)".into(),
            Task::Reboot { .. } => "reboot".into(),
            Task::Upgrade { .. } => "firmware upgrade".into(),
            Task::PlayPrompt(p) => format!("play {}", p.name()),
            Task::Busy(d) => format!("busy for {d}"),
            Task::ToggleChat => "toggle chat".into(),
            Task::OpenChannel { .. } => "open the audio channel".into(),
            Task::SetState(s) => format!("set state {}", s.name()),
            Task::TtsStart => "tts start".into(),
            Task::TtsStop => "tts stop".into(),
            Task::StateChanged => "state changed event".into(),
            Task::PlaybackDrained => "playback drained event".into(),
            Task::StartListening => "start listening".into(),
            Task::StopListening => "stop listening".into(),
            Task::WakeWord(w) => format!("wake word {w}"),
            Task::SendAudio => "send audio event".into(),
        }
    }

    /// Records that this task will never run.
    pub fn record_drop(self, core: &mut Core, why: &'static str) {
        match self {
            Task::Send { payload } => core.emit(|| Event::ReplyDropped { payload, why }),
            Task::Call { .. } | Task::FinishCall { .. } => core.emit(|| Event::TaskDropped { what: "call", why }),
            Task::UserReboot | Task::Reboot { .. } => core.emit(|| Event::TaskDropped { what: "reboot", why }),
            Task::Upgrade { .. } => core.emit(|| Event::TaskDropped { what: "upgrade", why }),
            Task::PlayPrompt(_) => core.emit(|| Event::TaskDropped { what: "sound", why }),
            Task::Busy(_) => core.emit(|| Event::TaskDropped { what: "busy", why }),
            Task::ToggleChat
            | Task::OpenChannel { .. }
            | Task::SetState(_)
            | Task::TtsStart
            | Task::TtsStop
            | Task::StartListening
            | Task::StopListening
            | Task::WakeWord(_) => core.emit(|| Event::TaskDropped { what: "state", why }),
            // Event bits die with the task that would have read them; nothing was promised.
            Task::StateChanged | Task::PlaybackDrained | Task::SendAudio => {}
        }
    }
}

/// What running one task did to the main loop.
pub enum Step {
    /// The task returned; the main loop takes the next one.
    Done,
    /// `vTaskDelay`: the main task is busy for this long, then runs the continuation.
    Block(SimDuration, Task),
    /// `esp_restart()` or a panic.
    Restart(BootReason),
}

/// The application and board objects of one boot.
pub struct Running {
    /// `McpServer::GetInstance()`: this boot's registry, shared by boots of the same construction.
    pub(crate) mcp: Arc<McpServer>,
    /// The main task's queue (`Application::Schedule`, `Run`).
    pub(crate) main: MainLoop<Task>,
    /// `Application::device_state_` (`DeviceStateMachine`).
    pub(crate) state: DeviceState,
    /// `AudioCodec::output_volume_`.
    pub(crate) volume: i32,
    /// The display object (`NoDisplay` when the board has none or its init failed).
    pub(crate) display: Display,
    /// The backlight, on boards with one.
    pub(crate) backlight: Option<Backlight>,
    /// `Esp32Camera`, on boards with one (also when its init failed).
    pub(crate) camera: Option<Camera>,
    /// Software flags of lamps and board GPIO tools (the `power_` of `LampController`).
    pub(crate) gpio_flags: BTreeMap<u32, bool>,
    /// `Application::protocol_`: `None` after `Reboot()` destroyed it.
    pub(crate) protocol: Option<Link>,
    /// `Board::uuid_`: NVS `board/uuid`, generated at first boot (`Client-Id`).
    pub(crate) uuid: String,
    /// `Application::audio_service_`: output power and codec state.
    pub(crate) audio: AudioService,
    /// otto-robot's controller, on boards that use it.
    pub(crate) otto: Option<Otto>,
    /// Listening mode, abort flag, pending events and the decoder (`device::voice`).
    pub(crate) voice: Voice,
    /// 1.7.5–1.9.1 `tool_call` threads blocked in a callback: when each resumes, its request id
    /// and what the callback ends with.
    pub(crate) threads: Vec<(crate::time::SimTime, i32, Result<ReturnValue, Vec<u8>>)>,
    /// A `tool_call` thread or the receive path aborted: the device restarts after the receive.
    pub(crate) abort_pending: bool,
}

fn uuid_v4(core: &mut Core) -> String {
    use rand_core::RngCore;
    let mut b = [0u8; 16];
    core.rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    // 8-4-4-4-12 lowercase hex digits.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut uuid = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            uuid.push('-');
        }
        uuid.push(char::from(HEX[usize::from(x >> 4)]));
        uuid.push(char::from(HEX[usize::from(x & 0x0f)]));
    }
    uuid
}

impl Running {
    /// Board constructor + `Application::Initialize` (FIRMWARE.md §11.3, §10.5).
    pub fn boot(core: &mut Core) -> Running {
        let spec = core.spec.clone();
        // Board constructor: UUID, display, camera, board tools, backlight.
        let uuid = match core.nvs.get_str(names::BOARD, names::UUID) {
            Some(u) => String::from_utf8_lossy(u).into_owned(),
            None => {
                let u = uuid_v4(core);
                // A failure here would abort the boot; the partition is empty at first boot.
                let _ = core.nvs_set(names::BOARD, names::UUID, NvsValue::Str(u.clone().into_bytes()));
                u
            }
        };
        core.log(LogLevel::Info, "Board", || format!("UUID={uuid} SKU={}", spec.name));
        let stored_theme = core
            .nvs
            .get_str(names::DISPLAY, names::THEME)
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let named = core.firmware.theme_tool == ThemeTool::Named;
        let display = Display::new(
            &spec.display,
            core.faults.display_init_fails,
            stored_theme.as_deref(),
            named,
        );
        let camera = spec
            .camera
            .as_ref()
            .map(|c| Camera::new(c, core.faults.camera_init_fails));
        let mut gpio_flags = BTreeMap::new();
        for gpio in spec.lamp_gpios().chain(spec.board_tools.iter().filter_map(|t| match t {
            BoardTool::Tool(t) => t.behavior.gpio(),
            BoardTool::Lamp { .. } => None,
        })) {
            if gpio_flags.insert(gpio, false).is_none() {
                core.emit(|| Event::GpioConfigured { gpio });
                core.emit(|| Event::GpioSet { gpio, level: 0 });
            }
        }
        let mut run = Running {
            // Replaced by the registered catalogue below, before anything can reach it.
            mcp: catalogue::unregistered(),
            main: MainLoop::default(),
            state: DeviceState::Starting,
            volume: spec.audio.default_volume,
            display,
            backlight: None,
            camera,
            gpio_flags,
            protocol: None,
            uuid,
            audio: AudioService::new(&spec.audio),
            otto: None,
            voice: Voice::default(),
            threads: Vec::new(),
            abort_pending: false,
        };
        if crate::device::builtin::needs_otto(&spec) {
            let trims = otto::TRIM_KEYS.map(|k| core.nvs.get_i32(otto::TRIM_NAMESPACE, k, 0));
            core.log(LogLevel::Info, "OttoController", || {
                format!(
                    "从NVS加载微调设置: 左腿={}, 右腿={}, 左脚={}, 右脚={}, 左手={}, 右手={}",
                    trims[0], trims[1], trims[2], trims[3], trims[4], trims[5]
                )
            });
            let o = Otto::new(trims, core.world.board_tasks_run, core.now);
            core.log(LogLevel::Info, "OttoController", || {
                otto::Item::new(otto::kind::HOME, 1, 1000, 1, 0).log_line()
            });
            run.otto = Some(o);
        }
        if let Some(bl) = spec.backlight.as_ref() {
            run.backlight = Some(Backlight::new());
            let stored = if bl.restore {
                core.nvs
                    .get_i32(names::DISPLAY, names::BRIGHTNESS, i32::from(bl.default_brightness))
            } else {
                i32::from(bl.boot_brightness)
            };
            let restored = if stored <= 0 {
                core.log(LogLevel::Warn, "Backlight", || {
                    format!("Brightness value ({stored}) is too small, setting to default (10)")
                });
                10
            } else {
                stored
            };
            run.set_brightness(core, restored.clamp(0, 255) as u8, false);
        }
        if let Some(theme) = spec.display.boot_theme.clone() {
            // A failed NVS write here would abort the boot; the board's own theme write is
            // never refused by a healthy partition, so the outcome is not modelled further.
            let _ = run.apply_theme(core, theme.as_bytes());
        }
        // Application::Initialize: audio codec start (volume restore), then tools.
        let stored = core.nvs.get_i32(names::AUDIO, names::OUTPUT_VOLUME, run.volume);
        run.volume = if stored <= 0 {
            core.log(LogLevel::Warn, "AudioCodec", || {
                format!("Output volume value ({stored}) is too small, setting to default (10)")
            });
            10
        } else {
            stored
        };
        core.log(LogLevel::Info, "AudioCodec", || "Audio codec started");
        let now = core.now;
        let dummy = core.faults.codec_dummy;
        core.audio
            .record(now, crate::audio::AudioChange::Fault(ChainFault::DummyCodec, dummy));
        run.audio.start(&mut core.audio, now, run.volume);
        if spec.audio.wake_word {
            run.audio.enable_input(&mut core.audio, now, true, run.volume);
        }
        let catalogue = catalogue::catalogue(
            &BoardObjects {
                spec: &spec,
                display: &run.display,
                has_backlight: run.backlight.is_some(),
                has_camera: run.camera.is_some(),
            },
            &core.catalogues,
        );
        run.mcp = catalogue.server.clone();
        for (level, line) in &catalogue.log {
            core.log(*level, "MCP", || line.clone());
        }
        run.protocol = Some(match core.world.websocket.clone() {
            // The OTA answer carried a `websocket` object: its members land in NVS and the
            // protocol is WebsocketProtocol (InitializeProtocol).
            Some(cfg) => {
                let _ = core.nvs_set(
                    names::WEBSOCKET,
                    names::URL,
                    NvsValue::Str(cfg.url.clone().into_bytes()),
                );
                if !cfg.token.is_empty() {
                    let _ = core.nvs_set(
                        names::WEBSOCKET,
                        names::TOKEN,
                        NvsValue::Str(cfg.token.clone().into_bytes()),
                    );
                }
                if cfg.version != 0 {
                    let _ = core.nvs_set(names::WEBSOCKET, names::VERSION, NvsValue::I32(cfg.version));
                }
                Link::WebSocket(Box::new(WsLink::new(&cfg)))
            }
            None => Link::Direct,
        });
        run.set_state(core, DeviceState::Activating);
        run.activate(core);
        run.set_state(core, DeviceState::Idle);
        // HandleActivationDoneEvent: the success sound, scheduled on the main task.
        run.main.schedule(Task::PlayPrompt(Prompt::Success));
        run
    }

    /// The activation task's assets step: a stored `assets/download_url` is consumed (erased)
    /// and downloaded at this boot.
    fn activate(&mut self, core: &mut Core) {
        if let Some(url) = core.nvs.get_str("assets", "download_url").map(<[u8]>::to_vec)
            && !url.is_empty()
        {
            core.nvs.erase("assets", "download_url");
            core.emit(|| Event::NvsErased {
                namespace: "assets".into(),
                key: "download_url".into(),
            });
            let _ = self.http(core, "GET", &url);
        }
    }

    /// `audio_service_.PlaySound(prompt)`.
    pub(super) fn play_prompt(&mut self, core: &mut Core, prompt: Prompt) {
        let (_, _, duration) = prompt.burst();
        let now = core.now;
        let (start, end) = self
            .audio
            .play(&mut core.audio, now, Source::Prompt(prompt), duration, self.volume);
        core.emit(|| Event::Note {
            text: format!("play sound={} from={} to={}", prompt.name(), start, end),
        });
    }

    /// `DeviceStateMachine::TransitionTo`; false (and a warning) when the table refuses.
    pub fn set_state(&mut self, core: &mut Core, to: DeviceState) -> bool {
        let from = self.state;
        if from == to {
            return true;
        }
        if core.firmware.state_table && !from.can_go_to(to) {
            core.emit(|| Event::StateRejected {
                from: from.name(),
                to: to.name(),
            });
            return false;
        }
        self.state = to;
        core.emit(|| Event::StateChanged {
            from: from.name(),
            to: to.name(),
        });
        self.state_changed();
        true
    }

    /// Applies what the receive task decided.
    pub fn receive(&mut self, core: &mut Core, received: Received) -> Receipt {
        match received {
            Received::Dropped { reason, log } => {
                if let Some(line) = log {
                    log_line(core, line);
                }
                let why = reason.as_str();
                core.emit(|| Event::MessageDropped { reason: why });
                Receipt::Dropped { reason }
            }
            Received::Reply {
                id,
                payload,
                is_error,
                log,
                vision,
            } => {
                if let (Some(v), Some(camera)) = (vision, self.camera.as_mut()) {
                    camera.set_explain_url(&v.url, &v.token);
                }
                if let Some(line) = log {
                    log_line(core, line);
                }
                if core.firmware.send_logs {
                    core.log(LogLevel::Info, "Application", || "Send MCP message in sub thread");
                }
                self.main.schedule(Task::Send { payload });
                Receipt::Answered { id, is_error }
            }
            Received::Aborted { reason, log } => {
                log_line(core, log);
                let why = reason.clone();
                core.emit(|| Event::Panicked { reason: why });
                self.abort_pending = true;
                Receipt::Aborted { reason }
            }
            Received::Call { id, tool, args, stack } => {
                let name = self.mcp.tool(tool).name().to_string();
                let receipt = Receipt::Scheduled {
                    id,
                    tool: name,
                    args: args.clone(),
                };
                match stack {
                    // 1.7.5–1.9.1: a `tool_call` thread runs the tool now (the recorder's rule:
                    // to completion, before the next payload and any main-loop batch).
                    Some(stack) => self.call_in_thread(core, id, tool, &args, stack),
                    None => self.main.schedule(Task::Call { id, tool, args }),
                }
                receipt
            }
        }
    }

    /// Runs one task on the main task.
    pub fn run_task(&mut self, core: &mut Core, task: Task) -> Step {
        match task {
            Task::Send { payload } => {
                match &self.protocol {
                    Some(Link::Direct) => core.transmit(payload),
                    Some(Link::WebSocket(ws)) if ws.socket == Socket::Connected => {
                        let frame = ws.mcp_envelope(&payload);
                        core.emit(|| Event::ReplySent { payload });
                        core.push_output(Output::WsText {
                            text: frame,
                            at: core.now,
                        });
                    }
                    // SendText on a missing or closed socket returns false without a log.
                    Some(Link::WebSocket(_)) => core.emit(|| Event::ReplyDropped {
                        payload,
                        why: "socket closed",
                    }),
                    None => core.emit(|| Event::ReplyDropped {
                        payload,
                        why: "no protocol object",
                    }),
                }
                Step::Done
            }
            Task::Call { id, tool, args } => match self.call(core, tool, &args) {
                Callback::Return(value) => self.reply_later(core, id, Ok(value)),
                Callback::Throw(message) => self.reply_later(core, id, Err(message)),
                Callback::Blocked(d, outcome) => Step::Block(d, Task::FinishCall { id, outcome }),
                Callback::Panic(reason) => {
                    core.emit(|| Event::Panicked { reason });
                    Step::Restart(BootReason::Panic)
                }
            },
            Task::FinishCall { id, outcome } => self.reply_later(core, id, outcome),
            Task::UserReboot => {
                core.log(LogLevel::Warn, "MCP", || "User requested reboot");
                Step::Block(
                    core.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Enter,
                    },
                )
            }
            Task::Reboot {
                stage: RebootStage::Enter,
            } => {
                core.log(LogLevel::Info, "Application", || "Rebooting...");
                core.emit(|| Event::RebootEntered);
                if !core.firmware.reboot_closes_first {
                    // 1.x `Reboot()`: `esp_restart()` at once; the socket dies with the chip.
                    return Step::Restart(BootReason::EspRestart);
                }
                // Close the channel if open; destroying the protocol destroys the socket anyway:
                // TCP is closed without a WebSocket close frame.
                self.drop_socket(core, "reboot");
                self.protocol = None;
                let now = core.now;
                self.audio.stop_playback(&mut core.audio, now);
                Step::Block(
                    core.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Restart,
                    },
                )
            }
            Task::Reboot {
                stage: RebootStage::Restart,
            } => Step::Restart(BootReason::EspRestart),
            Task::Upgrade { url, stage } => self.upgrade(core, url, stage),
            Task::PlayPrompt(prompt) => {
                self.play_prompt(core, prompt);
                Step::Done
            }
            Task::Busy(d) if !d.is_zero() => Step::Block(d, Task::Busy(SimDuration::ZERO)),
            Task::Busy(_) => Step::Done,
            Task::ToggleChat => {
                self.toggle_chat(core);
                Step::Done
            }
            Task::OpenChannel { mode, stage, wake } => self.open_channel(core, mode, stage, wake),
            Task::SetState(s) => {
                self.set_state(core, s);
                Step::Done
            }
            Task::TtsStart => {
                self.tts_start(core);
                Step::Done
            }
            Task::TtsStop => {
                self.tts_stop(core);
                Step::Done
            }
            Task::StateChanged => {
                self.on_state_changed(core);
                Step::Done
            }
            Task::PlaybackDrained => {
                self.on_playback_drained(core);
                Step::Done
            }
            Task::StartListening => {
                self.start_listening(core);
                Step::Done
            }
            Task::StopListening => {
                self.stop_listening(core);
                Step::Done
            }
            Task::WakeWord(word) => {
                self.wake_word(core, &word);
                Step::Done
            }
            Task::SendAudio => {
                self.send_audio(core);
                Step::Done
            }
        }
    }

    /// The second hop: `ReplyResult`/`ReplyError` schedule the send.
    fn reply_later(&mut self, core: &mut Core, id: i32, outcome: Result<ReturnValue, Vec<u8>>) -> Step {
        let payload = match outcome {
            Ok(value) => call_result_payload(id, &value),
            Err(message) => {
                core.log(LogLevel::Error, "MCP", || {
                    format!("tools/call: {}", String::from_utf8_lossy(&message))
                });
                wire::reply_error(id, &message)
            }
        };
        if core.firmware.call_path == CallPath::MainTaskSends {
            // 1.9.2–1.9.4: `SendMcpMessage` on the main task sends at once.
            if core.firmware.send_logs {
                core.log(LogLevel::Info, "Application", || "Send MCP message in main thread");
            }
            return self.run_task(core, Task::Send { payload });
        }
        self.main.schedule(Task::Send { payload });
        Step::Done
    }

    /// 1.7.5–1.9.1 `DoToolCall`: the tool runs in its own `tool_call` thread and its reply (or
    /// what it throws) goes through `SendMcpMessage`, which schedules it on the main task. A
    /// callback that blocks blocks only its thread: the reply is scheduled when it resumes.
    fn call_in_thread(&mut self, core: &mut Core, id: i32, tool: usize, args: &[PropertyValue], stack: i32) {
        core.emit(|| Event::Note {
            text: format!("tool_thread start name=tool_call stack={stack} prio=1"),
        });
        match self.call(core, tool, args) {
            Callback::Return(value) => {
                self.reply_later(core, id, Ok(value));
            }
            Callback::Throw(message) => {
                self.reply_later(core, id, Err(message));
            }
            Callback::Blocked(d, outcome) => {
                let at = core.now + d;
                self.threads.push((at, id, outcome));
            }
            Callback::Panic(reason) => {
                core.emit(|| Event::Panicked { reason });
                self.abort_pending = true;
            }
        }
        core.emit(|| Event::Note {
            text: "tool_thread exit".into(),
        });
    }

    /// The earliest esp_timer deadline.
    pub fn timer_deadline(&self) -> Option<crate::time::SimTime> {
        let backlight = self.backlight.as_ref().and_then(Backlight::next_deadline);
        let power = self.audio.timer_deadline();
        let otto = self.otto.as_ref().and_then(Otto::deadline);
        let drain = self.voice.timer_deadline();
        let earlier = |a: Option<crate::time::SimTime>, b: Option<crate::time::SimTime>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let thread = self.threads.iter().map(|(at, _, _)| *at).min();
        earlier(earlier(earlier(earlier(backlight, power), otto), drain), thread)
    }

    /// Fires every esp_timer due at `core.now` (timer task outranks the main task).
    pub fn fire_timers(&mut self, core: &mut Core) {
        let now = core.now;
        while let Some(i) = self.threads.iter().position(|(at, _, _)| *at <= now) {
            let (_, id, outcome) = self.threads.remove(i);
            self.reply_later(core, id, outcome);
        }
        if let Some(b) = self.backlight.as_mut() {
            while let Some(step) = b.on_tick(now) {
                core.emit(|| Event::BacklightStep {
                    brightness: step.brightness,
                    duty: step.duty,
                });
            }
        }
        if let Some(note) = self.otto.as_mut().and_then(|o| o.on_tick(now)) {
            core.log(LogLevel::Info, "OttoController", || note);
        }
        if self.audio.on_power_tick(&mut core.audio, now, self.volume) {
            core.emit(|| Event::Note {
                text: "audio output powered down (15 s without output)".to_string(),
            });
        }
        self.on_drain_timer(core);
        self.on_mic_tick(core);
    }

    /// VOL+/VOL− buttons (±10 clamped, long press = 100/0).
    pub fn volume_button(&mut self, core: &mut Core, delta: i32, long: bool) {
        let target = if long {
            if delta > 0 { 100 } else { 0 }
        } else {
            (self.volume + delta).clamp(0, 100)
        };
        if let Err(e) = self.set_volume(core, target) {
            core.emit(|| Event::Panicked {
                reason: format!("ESP_ERROR_CHECK failed: {e}"),
            });
        }
    }

    /// The software state `GetDeviceStatusJson` reads.
    pub fn device_status(&self, core: &Core) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        report::device_status_json(
            &StatusFacts {
                volume: Some(self.volume),
                brightness: self.backlight.as_ref().map(Backlight::brightness),
                display: (self.display.kind() != DisplayKind::None)
                    .then(|| (self.display.height(), self.display.current_theme())),
                battery: core.spec.battery.as_ref().map(|b| (b.level, b.charging)),
                wifi: &core.world.wifi,
            },
            &mut out,
        );
        out
    }

    pub(super) fn system_info(&self, core: &Core) -> Vec<u8> {
        report::system_info_json(&SystemFacts {
            spec: &core.spec,
            mac: &core.mac,
            uuid: &self.uuid,
            elf_sha256: &core.elf_sha256,
            display: (
                self.display.is_monochrome(),
                self.display.width(),
                self.display.height(),
            ),
            wifi: &core.world.wifi,
        })
    }
}

/// Records a firmware log line given as `"<L> <TAG>: <text>"`.
fn log_line(core: &mut Core, line: String) {
    let (level, rest) = line.split_at(1);
    let level = LogLevel::from_letter(level.chars().next().unwrap_or('I'));
    let rest = rest.trim_start();
    let (tag, text) = rest.split_once(": ").unwrap_or(("MCP", rest));
    let tag: &'static str = match tag {
        "MCP" => "MCP",
        _ => "App",
    };
    let text = text.to_string();
    core.log(level, tag, || text);
}
