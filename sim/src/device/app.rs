//! The running application: what `Application` and the board objects hold between boots, the
//! tasks the main loop runs, and every tool callback (`main/application.cc`,
//! `main/mcp_server.cc` lambdas, `main/audio/audio_codec.cc`, `lamp_controller.h`,
//! `backlight.cc`, `esp32_camera.cc`; FIRMWARE.md §5, §6, §11).
//!
//! Everything here is volatile: it is rebuilt at every boot from the board spec and NVS.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::audio::ChainFault;
use crate::audio::source::{Prompt, Source};
use crate::board::{Behavior, BoardTool, DisplayKind, ReturnSpec};
use crate::device::audio::AudioService;
use crate::device::catalogue::{self, BoardObjects};
use crate::device::link::{Socket, WsLink, device_hello, handshake_request, parse_url};
use crate::device::main_loop::MainLoop;
use crate::device::otto::{self, Otto};
use crate::device::report::{self, StatusFacts, SystemFacts};
use crate::device::state::DeviceState;
use crate::device::{Core, Output, Receipt};
use crate::hw::backlight::{Backlight, SetOutcome};
use crate::hw::camera::Camera;
use crate::hw::display::Display;
use crate::mcp::server::call_result_payload;
use crate::mcp::{McpServer, PropertyValue, Received, ReturnValue, ToolAction, wire};
use crate::time::SimDuration;
use crate::trace::{BootReason, Event, NvsValue};
use crate::world::HttpOutcome;

/// The protocol object (`protocol_`): how replies leave the device.
#[derive(Clone, Debug)]
pub enum Link {
    /// Replies go straight out while the protocol object exists (the conformance recorder's
    /// stand-in; behaves like MQTT: nothing to close, nothing to open).
    Direct,
    /// The on-demand WebSocket audio channel.
    WebSocket(Box<WsLink>),
}

/// `ContinueOpenAudioChannel` / `OpenAudioChannel`, split where it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenStage {
    Begin,
    AwaitConnect,
    AwaitHello,
}

/// Work on the main task's queue.
#[derive(Debug)]
pub enum Task {
    /// `SendMcpMessage`'s lambda: send if a protocol object exists.
    Send { payload: Vec<u8> },
    /// `DoToolCall`'s lambda: run the callback, then reply (scheduled again).
    Call {
        id: i32,
        tool: usize,
        args: Vec<PropertyValue>,
    },
    /// A callback that blocked (HTTP, camera upload) finishing.
    FinishCall {
        id: i32,
        outcome: Result<ReturnValue, Vec<u8>>,
    },
    /// `self.reboot`'s lambda: log, wait 1000 ms, `Reboot()`.
    UserReboot,
    /// `Application::Reboot()` (after its first step) and its 1000 ms before `esp_restart`.
    Reboot { stage: RebootStage },
    /// `self.upgrade_firmware`'s lambda: `UpgradeFirmware(url)`.
    Upgrade { url: Vec<u8>, stage: UpgradeStage },
    /// `audio_service_.PlaySound(...)` scheduled on the main task (e.g. the success prompt).
    PlayPrompt(Prompt),
    /// Work elsewhere that keeps the main task busy (e.g. opening the audio channel).
    Busy(SimDuration),
    /// `MAIN_EVENT_TOGGLE_CHAT` (BOOT click, wake word).
    ToggleChat,
    /// `ContinueOpenAudioChannel(mode)` and its waits.
    OpenChannel { mode: &'static str, stage: OpenStage },
    /// A state change the firmware schedules (`on_audio_channel_closed`, `tts` start/stop).
    SetState(DeviceState),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebootStage {
    Enter,
    Restart,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeStage {
    Start,
    AfterAlert,
    Download,
    Failed,
    FailedDone,
    Succeeded,
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
            Task::ToggleChat | Task::OpenChannel { .. } | Task::SetState(_) => {
                core.emit(|| Event::TaskDropped { what: "state", why })
            }
        }
    }
}

/// What running one task did to the main loop.
pub enum Step {
    Done,
    /// `vTaskDelay`: the main task is busy for this long, then runs the continuation.
    Block(SimDuration, Task),
    /// `esp_restart()` or a panic.
    Restart(BootReason),
}

/// What a callback did.
enum Callback {
    Return(ReturnValue),
    Throw(Vec<u8>),
    /// The callback blocks the main task (network) and then returns or throws.
    Blocked(SimDuration, Result<ReturnValue, Vec<u8>>),
    /// `ESP_ERROR_CHECK` failed (or similar abort) inside the callback.
    Panic(String),
}

/// The application and board objects of one boot.
pub struct Running {
    pub mcp: Arc<McpServer>,
    pub main: MainLoop<Task>,
    pub state: DeviceState,
    /// `AudioCodec::output_volume_`.
    pub volume: i32,
    pub display: Display,
    pub backlight: Option<Backlight>,
    pub camera: Option<Camera>,
    /// Software flags of lamps and board GPIO tools (the `power_` of `LampController`).
    pub gpio_flags: BTreeMap<u32, bool>,
    pub protocol: Option<Link>,
    pub uuid: String,
    pub audio: AudioService,
    /// otto-robot's controller, on boards that use it.
    pub otto: Option<Otto>,
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
        let uuid = match core.nvs.get_str("board", "uuid") {
            Some(u) => String::from_utf8_lossy(u).into_owned(),
            None => {
                let u = uuid_v4(core);
                // A failure here would abort the boot; the partition is empty at first boot.
                let _ = core.nvs_set("board", "uuid", NvsValue::Str(u.clone().into_bytes()));
                u
            }
        };
        core.log('I', "Board", || format!("UUID={uuid} SKU={}", spec.name));
        let stored_theme = core
            .nvs
            .get_str("display", "theme")
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let display = Display::new(&spec.display, core.faults.display_init_fails, stored_theme.as_deref());
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
        };
        let builtins = spec.board_tools.iter().filter_map(|t| match t {
            BoardTool::Tool(t) => match &t.behavior {
                Behavior::Builtin { name } => Some(name.as_str()),
                _ => None,
            },
            BoardTool::Lamp { .. } => None,
        });
        if crate::device::builtin::needs_otto(builtins) {
            let trims = otto::TRIM_KEYS.map(|k| core.nvs.get_i32(otto::TRIM_NAMESPACE, k, 0));
            core.log('I', "OttoController", || {
                format!(
                    "从NVS加载微调设置: 左腿={}, 右腿={}, 左脚={}, 右脚={}, 左手={}, 右手={}",
                    trims[0], trims[1], trims[2], trims[3], trims[4], trims[5]
                )
            });
            let o = Otto::new(trims, core.world.board_tasks_run, core.now);
            core.log('I', "OttoController", || {
                otto::Item::new(otto::kind::HOME, 1, 1000, 1, 0).log_line()
            });
            run.otto = Some(o);
        }
        if let Some(bl) = spec.backlight.as_ref() {
            run.backlight = Some(Backlight::new());
            let stored = if bl.restore {
                core.nvs
                    .get_i32("display", "brightness", i32::from(bl.default_brightness))
            } else {
                i32::from(bl.boot_brightness)
            };
            let restored = if stored <= 0 {
                core.log('W', "Backlight", || {
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
        let stored = core.nvs.get_i32("audio", "output_volume", run.volume);
        run.volume = if stored <= 0 {
            core.log('W', "AudioCodec", || {
                format!("Output volume value ({stored}) is too small, setting to default (10)")
            });
            10
        } else {
            stored
        };
        core.log('I', "AudioCodec", || "Audio codec started");
        let now = core.now;
        let dummy = core.faults.codec_dummy;
        core.audio
            .record(now, crate::audio::AudioChange::Fault(ChainFault::DummyCodec, dummy));
        run.audio.start(&mut core.audio, now, run.volume);
        if spec.audio.wake_word {
            run.audio.enable_input(&mut core.audio, now, true, run.volume);
        }
        let catalogue = catalogue::catalogue(&BoardObjects {
            spec: &spec,
            display: &run.display,
            has_backlight: run.backlight.is_some(),
            has_camera: run.camera.is_some(),
        });
        run.mcp = catalogue.server.clone();
        for (level, line) in &catalogue.log {
            core.log(*level, "MCP", || line.clone());
        }
        run.protocol = Some(match core.world.websocket.clone() {
            // The OTA answer carried a `websocket` object: its members land in NVS and the
            // protocol is WebsocketProtocol (InitializeProtocol).
            Some(cfg) => {
                let _ = core.nvs_set("websocket", "url", NvsValue::Str(cfg.url.clone().into_bytes()));
                if !cfg.token.is_empty() {
                    let _ = core.nvs_set("websocket", "token", NvsValue::Str(cfg.token.clone().into_bytes()));
                }
                if cfg.version != 0 {
                    let _ = core.nvs_set("websocket", "version", NvsValue::I32(cfg.version));
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
    fn play_prompt(&mut self, core: &mut Core, prompt: Prompt) {
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
        if !from.can_go_to(to) {
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
                self.main.schedule(Task::Send { payload });
                Receipt::Answered { id, is_error }
            }
            Received::Call { id, tool, args } => {
                let name = self.mcp.tool(tool).name().to_string();
                let receipt = Receipt::Scheduled {
                    id,
                    tool: name,
                    args: args.clone(),
                };
                self.main.schedule(Task::Call { id, tool, args });
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
                core.log('W', "MCP", || "User requested reboot");
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
                core.log('I', "Application", || "Rebooting...");
                core.emit(|| Event::RebootEntered);
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
            Task::OpenChannel { mode, stage } => self.open_channel(core, mode, stage),
            Task::SetState(s) => {
                self.set_state(core, s);
                Step::Done
            }
        }
    }

    /// Destroys the WebSocket object if there is one (the peer sees TCP close, no close frame).
    pub(super) fn drop_socket(&mut self, core: &mut Core, why: &'static str) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && ws.socket != Socket::None
        {
            ws.socket = Socket::None;
            core.emit(|| Event::Note {
                text: format!("websocket destroyed ({why}): TCP closed without a close frame"),
            });
            core.push_output(Output::WsClose { at: core.now });
        }
    }

    fn channel_open(&self, now: crate::time::SimTime) -> bool {
        matches!(&self.protocol, Some(Link::WebSocket(ws)) if ws.is_audio_channel_opened(now))
    }

    /// `HandleToggleChatEvent`.
    fn toggle_chat(&mut self, core: &mut Core) {
        match self.state {
            DeviceState::Activating => {
                self.set_state(core, DeviceState::Idle);
                return;
            }
            DeviceState::WifiConfiguring | DeviceState::AudioTesting => return,
            _ => {}
        }
        if self.protocol.is_none() {
            core.log('E', "Application", || "Protocol not initialized");
            return;
        }
        match self.state {
            DeviceState::Idle => {
                if !self.channel_open(core.now) && matches!(self.protocol, Some(Link::WebSocket(_))) {
                    self.set_state(core, DeviceState::Connecting);
                    self.main.schedule(Task::OpenChannel {
                        mode: "auto",
                        stage: OpenStage::Begin,
                    });
                } else {
                    self.set_listening(core, "auto");
                }
            }
            DeviceState::Listening => {
                // CloseAudioChannel: the socket goes; its disconnect callback schedules idle.
                self.drop_socket(core, "user closed the channel");
                self.main.schedule(Task::SetState(DeviceState::Idle));
            }
            DeviceState::Speaking => core.log('I', "Application", || "Abort speaking"),
            _ => {}
        }
    }

    /// `SetListeningMode(mode)`: listening, and `listen start` goes out.
    fn set_listening(&mut self, core: &mut Core, mode: &str) {
        if self.set_state(core, DeviceState::Listening)
            && let Some(Link::WebSocket(ws)) = &self.protocol
            && ws.socket == Socket::Connected
        {
            let frame = ws.listen_start(mode);
            core.push_output(Output::WsText {
                text: frame,
                at: core.now,
            });
        }
    }

    /// `ContinueOpenAudioChannel` → `OpenAudioChannel`, which blocks the main task while it
    /// connects (esp-ml307: up to 10 s) and while it waits for the server hello (10 s).
    fn open_channel(&mut self, core: &mut Core, mode: &'static str, stage: OpenStage) -> Step {
        let now = core.now;
        let timeout = core.delay(10_000);
        match stage {
            OpenStage::Begin => {
                if self.state != DeviceState::Connecting {
                    return Step::Done;
                }
                if self.channel_open(now) {
                    self.set_listening(core, mode);
                    return Step::Done;
                }
                // A new socket object replaces the old one (which closes its TCP connection).
                self.drop_socket(core, "replaced by a new connection");
                let uuid = self.uuid.clone();
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                ws.error = false;
                ws.hello_received = false;
                let Some(endpoint) = parse_url(&ws.url).filter(|e| !e.tls) else {
                    let url = ws.url.clone();
                    core.log('E', "WS", || {
                        format!("Failed to connect to websocket server: {url} (the twin dials ws:// only)")
                    });
                    ws.error = true;
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                };
                let mut headers = Vec::new();
                if let Some(a) = ws.authorization() {
                    headers.push(("Authorization".to_string(), a));
                }
                headers.push(("Protocol-Version".to_string(), ws.version.to_string()));
                headers.push(("Device-Id".to_string(), core.mac.clone()));
                headers.push(("Client-Id".to_string(), uuid));
                let key = {
                    use rand_core::RngCore;
                    let mut k = [0u8; 16];
                    core.rng.fill_bytes(&mut k);
                    base64_key(&k)
                };
                let request = handshake_request(&endpoint, &headers, &key);
                ws.socket = Socket::Connecting;
                let url = ws.url.clone();
                let version = ws.version;
                core.log('I', "WS", || {
                    format!("Connecting to websocket server: {url} with version: {version}")
                });
                core.push_output(Output::WsOpen {
                    endpoint,
                    request,
                    at: now,
                });
                Step::Block(
                    timeout,
                    Task::OpenChannel {
                        mode,
                        stage: OpenStage::AwaitConnect,
                    },
                )
            }
            OpenStage::AwaitConnect => {
                let font = core.spec.text_font();
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                if ws.socket != Socket::Connected {
                    ws.error = true;
                    core.log('E', "WS", || "Failed to connect to websocket server");
                    core.emit(|| Event::Note {
                        text: "audio channel failed: server not connected".into(),
                    });
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                }
                let hello = device_hello(ws.version, font.as_ref());
                core.push_output(Output::WsText { text: hello, at: now });
                Step::Block(
                    timeout,
                    Task::OpenChannel {
                        mode,
                        stage: OpenStage::AwaitHello,
                    },
                )
            }
            OpenStage::AwaitHello => {
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                if !ws.hello_received {
                    ws.error = true;
                    core.log('E', "WS", || "Failed to receive server hello");
                    core.emit(|| Event::Note {
                        text: "audio channel failed: no server hello within 10 s".into(),
                    });
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                }
                ws.last_incoming = now;
                core.emit(|| Event::Note {
                    text: "audio channel opened".into(),
                });
                if self.state == DeviceState::Connecting {
                    self.set_listening(core, mode);
                }
                Step::Done
            }
        }
    }

    /// The driver finished (or failed) the TCP connect and handshake.
    pub fn ws_open_result(&mut self, core: &mut Core, ok: bool) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && ws.socket == Socket::Connecting
        {
            ws.socket = if ok { Socket::Connected } else { Socket::Disconnected };
            let now = core.now;
            self.main.wake(now);
        }
    }

    /// The peer closed or the TCP connection broke: `on_audio_channel_closed` schedules idle.
    ///
    /// A close during the connect ends esp-ml307's `Connect()` early (it fails). A close while
    /// `OpenAudioChannel` waits for the server hello does not: that wait is an event-group wait
    /// on the hello bit alone, so the device reports `Failed to receive server hello` only when
    /// the full 10 s have passed (a server that refuses the token with `认证失败` and closes).
    pub fn ws_closed(&mut self, core: &mut Core) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && matches!(ws.socket, Socket::Connected | Socket::Connecting)
        {
            let was_connecting = ws.socket == Socket::Connecting;
            ws.socket = Socket::Disconnected;
            core.log('I', "WS", || "Websocket disconnected");
            self.main.schedule(Task::SetState(DeviceState::Idle));
            if was_connecting {
                let now = core.now;
                self.main.wake(now);
            }
        }
    }

    /// The server hello (`ParseServerHello`). `Err` is the firmware's crash on a missing or
    /// non-string `transport` (a null pointer dereference: panic, reboot).
    pub fn server_hello(&mut self, core: &mut Core, root: crate::cjson::Item<'_>) -> Result<(), String> {
        let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
            return Ok(());
        };
        let transport = root.get(b"transport");
        let Some(t) = transport.and_then(|t| t.c_string()) else {
            return Err("server hello without a string `transport`: NULL dereference in ParseServerHello".into());
        };
        if t != b"websocket" {
            let shown = String::from_utf8_lossy(t).into_owned();
            core.log('E', "WS", || format!("Unsupported transport: {shown}"));
            return Ok(());
        }
        if let Some(sid) = root.get(b"session_id").and_then(|s| s.c_string()) {
            ws.session_id = sid.to_vec();
        }
        if let Some(ap) = root.get(b"audio_params").filter(crate::cjson::Item::is_object) {
            if let Some(r) = ap.get(b"sample_rate").filter(crate::cjson::Item::is_number) {
                ws.server_sample_rate = r.valueint();
            }
            if let Some(f) = ap.get(b"frame_duration").filter(crate::cjson::Item::is_number) {
                ws.server_frame_duration = f.valueint();
            }
        }
        ws.hello_received = true;
        let sid = String::from_utf8_lossy(&ws.session_id).into_owned();
        core.emit(|| Event::Note {
            text: format!("server hello, session {sid}"),
        });
        let now = core.now;
        self.main.wake(now);
        Ok(())
    }

    /// The application dispatcher for a non-hello JSON frame (`OnIncomingJson`).
    pub fn incoming_json(&mut self, core: &mut Core, root: crate::cjson::Item<'_>) -> Option<Received> {
        let kind = root.get(b"type").and_then(|t| t.c_string())?;
        match kind {
            b"mcp" => {
                let payload = root.get(b"payload").filter(crate::cjson::Item::is_object)?;
                Some(self.mcp.receive(payload))
            }
            b"system" => {
                if root.get(b"command").and_then(|c| c.c_string()) == Some(b"reboot") {
                    core.log('I', "Application", || "System command: reboot");
                    self.main.schedule(Task::Reboot {
                        stage: RebootStage::Enter,
                    });
                }
                None
            }
            b"tts" => {
                match root.get(b"state").and_then(|s| s.c_string()) {
                    Some(b"start") => self.main.schedule(Task::SetState(DeviceState::Speaking)),
                    Some(b"stop") if self.state == DeviceState::Speaking => {
                        self.main.schedule(Task::SetState(DeviceState::Listening))
                    }
                    _ => {}
                }
                None
            }
            _ => None,
        }
    }

    /// A user action: BOOT click / wake word (`MAIN_EVENT_TOGGLE_CHAT`).
    pub fn request_toggle_chat(&mut self) {
        self.main.schedule(Task::ToggleChat);
    }

    /// The second hop: `ReplyResult`/`ReplyError` schedule the send.
    fn reply_later(&mut self, core: &mut Core, id: i32, outcome: Result<ReturnValue, Vec<u8>>) -> Step {
        let payload = match outcome {
            Ok(value) => call_result_payload(id, &value),
            Err(message) => {
                core.log('E', "MCP", || {
                    format!("tools/call: {}", String::from_utf8_lossy(&message))
                });
                wire::reply_error(id, &message)
            }
        };
        self.main.schedule(Task::Send { payload });
        Step::Done
    }

    /// `Application::UpgradeFirmware` (FIRMWARE.md §11.2).
    fn upgrade(&mut self, core: &mut Core, url: Vec<u8>, stage: UpgradeStage) -> Step {
        let next = |stage| Task::Upgrade {
            url: url.clone(),
            stage,
        };
        match stage {
            UpgradeStage::Start => {
                if self.channel_open(core.now) {
                    core.log('I', "Application", || {
                        "Closing audio channel before firmware upgrade".to_string()
                    });
                    self.drop_socket(core, "firmware upgrade");
                    self.main.schedule(Task::SetState(DeviceState::Idle));
                }
                core.log('I', "Application", || {
                    format!("Starting firmware upgrade from URL: {}", String::from_utf8_lossy(&url))
                });
                self.play_prompt(core, Prompt::Upgrade);
                Step::Block(core.delay(3000), next(UpgradeStage::AfterAlert))
            }
            UpgradeStage::AfterAlert => {
                self.set_state(core, DeviceState::Upgrading);
                let now = core.now;
                self.audio.stop_playback(&mut core.audio, now);
                Step::Block(core.delay(1000), next(UpgradeStage::Download))
            }
            UpgradeStage::Download => {
                core.emit(|| Event::OtaStarted { url: url.clone() });
                let ota = core.world.ota.clone();
                let then = if ota.succeeds {
                    UpgradeStage::Succeeded
                } else {
                    UpgradeStage::Failed
                };
                Step::Block(ota.download_time, next(then))
            }
            UpgradeStage::Failed => {
                core.emit(|| Event::OtaFinished { ok: false });
                core.log('E', "Application", || {
                    "Firmware upgrade failed, restarting audio service and continuing operation...".to_string()
                });
                self.play_prompt(core, Prompt::Exclamation);
                Step::Block(core.delay(3000), next(UpgradeStage::FailedDone))
            }
            UpgradeStage::FailedDone => {
                core.log('E', "MCP", || "Firmware upgrade failed");
                Step::Done
            }
            UpgradeStage::Succeeded => {
                core.emit(|| Event::OtaFinished { ok: true });
                core.log('I', "Application", || {
                    "Firmware upgrade successful, rebooting...".to_string()
                });
                Step::Block(
                    core.delay(1000),
                    Task::Reboot {
                        stage: RebootStage::Enter,
                    },
                )
            }
        }
    }

    /// The earliest esp_timer deadline.
    pub fn timer_deadline(&self) -> Option<crate::time::SimTime> {
        let backlight = self.backlight.as_ref().and_then(Backlight::next_deadline);
        let power = self.audio.timer_deadline();
        let otto = self.otto.as_ref().and_then(Otto::deadline);
        let earlier = |a: Option<crate::time::SimTime>, b: Option<crate::time::SimTime>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        earlier(earlier(backlight, power), otto)
    }

    /// Fires every esp_timer due at `core.now` (timer task outranks the main task).
    pub fn fire_timers(&mut self, core: &mut Core) {
        let now = core.now;
        if let Some(b) = self.backlight.as_mut() {
            while let Some(step) = b.on_tick(now) {
                core.emit(|| Event::BacklightStep {
                    brightness: step.brightness,
                    duty: step.duty,
                });
            }
        }
        if let Some(note) = self.otto.as_mut().and_then(|o| o.on_tick(now)) {
            core.log('I', "OttoController", || note);
        }
        if self.audio.on_power_tick(&mut core.audio, now, self.volume) {
            core.emit(|| Event::Note {
                text: "audio output powered down (15 s without output)".to_string(),
            });
        }
    }

    /// `Backlight::SetBrightness(b, permanent)`.
    fn set_brightness(&mut self, core: &mut Core, brightness: u8, permanent: bool) -> Option<&'static str> {
        let now = core.now;
        let backlight = self.backlight.as_mut()?;
        let clamped = brightness.min(100);
        if clamped == backlight.brightness() {
            return None;
        }
        if permanent && let Err(e) = core.nvs_set("display", "brightness", NvsValue::I32(i32::from(clamped))) {
            return Some(e);
        }
        if let SetOutcome::Fading { target, .. } = backlight.set_brightness(now, clamped) {
            core.emit(|| Event::BacklightTarget { target });
            core.log('I', "Backlight", || format!("Set brightness to {target}"));
        }
        None
    }

    /// `display->SetTheme(theme)` for a registered name; persists on LCD. Returns whether the
    /// name was found, or the NVS error that aborts.
    fn apply_theme(&mut self, core: &mut Core, name: &[u8]) -> Result<bool, &'static str> {
        let Some(theme) = self.display.set_theme(name) else {
            return Ok(false);
        };
        core.emit(|| Event::ThemeApplied { theme: theme.clone() });
        if self.display.persists_theme() {
            core.nvs_set("display", "theme", NvsValue::Str(theme.into_bytes()))?;
        }
        Ok(true)
    }

    /// `AudioCodec::SetOutputVolume`: store, log, persist.
    fn set_volume(&mut self, core: &mut Core, volume: i32) -> Result<(), &'static str> {
        self.volume = volume;
        let now = core.now;
        self.audio.set_volume(&mut core.audio, now, volume);
        core.emit(|| Event::VolumeChanged { volume });
        core.log('I', "AudioCodec", || format!("Set output volume to {volume}"));
        core.nvs_set("audio", "output_volume", NvsValue::I32(volume))
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

    fn http(&self, core: &mut Core, method: &'static str, url: &[u8]) -> HttpOutcome {
        let outcome = core.world.http_open(url);
        core.emit(|| Event::HttpOpened {
            method,
            url: url.to_vec(),
            outcome: match &outcome {
                HttpOutcome::Unreachable { .. } => "fail".to_string(),
                HttpOutcome::Answered { status, .. } => format!("status {status}"),
            },
        });
        outcome
    }

    /// The callbacks (main task).
    fn call(&mut self, core: &mut Core, tool: usize, args: &[PropertyValue]) -> Callback {
        let action = self.mcp.tool(tool).action().clone();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(PropertyValue::Int(0));
        let panic = |e: &'static str| Callback::Panic(format!("ESP_ERROR_CHECK failed: {e}"));
        match action {
            ToolAction::GetDeviceStatus => Callback::Return(ReturnValue::Text(self.device_status(core))),
            ToolAction::SetVolume => match self.set_volume(core, arg(0).as_int()) {
                Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                Err(e) => panic(e),
            },
            ToolAction::SetBrightness => {
                // `static_cast<uint8_t>(value)`.
                let b = arg(0).as_int() as u8;
                match self.set_brightness(core, b, true) {
                    None => Callback::Return(ReturnValue::Bool(true)),
                    Some(e) => panic(e),
                }
            }
            ToolAction::SetTheme => match self.apply_theme(core, arg(0).as_bytes()) {
                Ok(found) => Callback::Return(ReturnValue::Bool(found)),
                Err(e) => panic(e),
            },
            ToolAction::TakePhoto => self.take_photo(core, arg(0).as_bytes()),
            ToolAction::LampGetState { gpio } => {
                let on = self.gpio_flags.get(&gpio).copied().unwrap_or(false);
                Callback::Return(ReturnValue::Text(
                    if on { wire::LAMP_POWER_ON } else { wire::LAMP_POWER_OFF }
                        .as_bytes()
                        .to_vec(),
                ))
            }
            ToolAction::LampTurnOn { gpio } => {
                self.drive_gpio(core, gpio, true);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::LampTurnOff { gpio } => {
                self.drive_gpio(core, gpio, false);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::GetSystemInfo => Callback::Return(ReturnValue::Text(self.system_info(core))),
            ToolAction::Reboot => {
                self.main.schedule(Task::UserReboot);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::UpgradeFirmware => {
                let url = arg(0).as_bytes().to_vec();
                core.log('I', "MCP", || {
                    format!(
                        "User requested firmware upgrade from URL: {}",
                        String::from_utf8_lossy(&url)
                    )
                });
                self.main.schedule(Task::Upgrade {
                    url,
                    stage: UpgradeStage::Start,
                });
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::ScreenGetInfo => {
                let mut json = Vec::with_capacity(64);
                json.extend_from_slice(b"{\"width\":");
                crate::cjson::write_int(&mut json, self.display.width() as i32);
                json.extend_from_slice(b",\"height\":");
                crate::cjson::write_int(&mut json, self.display.height() as i32);
                json.extend_from_slice(if self.display.is_monochrome() {
                    b",\"monochrome\":true}"
                } else {
                    b",\"monochrome\":false}"
                });
                Callback::Return(ReturnValue::Json(json))
            }
            ToolAction::ScreenSnapshot => self.snapshot(core, arg(0).as_bytes(), arg(1).as_int()),
            ToolAction::ScreenPreviewImage => self.preview_image(core, arg(0).as_bytes()),
            ToolAction::AssetsSetDownloadUrl => {
                match core.nvs_set("assets", "download_url", NvsValue::Str(arg(0).as_bytes().to_vec())) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            ToolAction::Board(index) => self.board_tool(core, index, tool, args),
        }
    }

    fn drive_gpio(&mut self, core: &mut Core, gpio: u32, on: bool) {
        self.gpio_flags.insert(gpio, on);
        core.emit(|| Event::GpioSet {
            gpio,
            level: u8::from(on),
        });
    }

    fn take_photo(&mut self, core: &mut Core, question: &[u8]) -> Callback {
        let Some(camera) = self.camera.as_mut() else {
            return Callback::Throw(wire::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        };
        if !camera.capture() {
            return Callback::Throw(wire::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        }
        let (w, h, len) = (camera.width, camera.height, camera.frame_len());
        core.emit(|| Event::CameraCaptured { width: w, height: h });
        core.log('I', "Esp32Camera", || {
            format!("Captured frame: {w}x{h}, len={len}, format=0")
        });
        if camera.explain_url.is_empty() {
            return Callback::Throw(wire::ERR_EXPLAIN_URL_NOT_SET.into());
        }
        let url = camera.explain_url.clone();
        let asked = String::from_utf8_lossy(question).into_owned();
        core.emit(|| Event::Note {
            text: format!("camera_explain question={}", crate::trace::quote(asked.as_bytes())),
        });
        match self.http(core, "POST", &url) {
            HttpOutcome::Unreachable { after } => {
                core.log('E', "Esp32Camera", || "Failed to connect to explain URL");
                Callback::Blocked(after, Err(wire::ERR_CONNECT_EXPLAIN_URL.into()))
            }
            HttpOutcome::Answered { status, body, latency } => {
                if status != 200 {
                    core.log('E', "Esp32Camera", || {
                        format!("Failed to upload photo, status code: {status}")
                    });
                    Callback::Blocked(latency, Err(wire::ERR_UPLOAD_PHOTO.into()))
                } else {
                    Callback::Blocked(latency, Ok(ReturnValue::Text(body)))
                }
            }
        }
    }

    fn snapshot(&mut self, core: &mut Core, url: &[u8], quality: i32) -> Callback {
        // SnapshotToJpeg: a tiny deterministic JPEG whose size grows with quality.
        let bytes = 16 + (quality.max(0) as usize) * 7 / 80;
        core.emit(|| Event::Note {
            text: format!("display_snapshot quality={quality} bytes={bytes}"),
        });
        core.log('I', "MCP", || {
            format!("Upload snapshot {bytes} bytes to {}", String::from_utf8_lossy(url))
        });
        match self.http(core, "POST", url) {
            HttpOutcome::Unreachable { after } => Callback::Blocked(after, Err(wire::concat(wire::ERR_OPEN_URL, url))),
            HttpOutcome::Answered { status, latency, .. } if status != 200 => Callback::Blocked(
                latency,
                Err(wire::concat(wire::ERR_UNEXPECTED_STATUS, status.to_string().as_bytes())),
            ),
            HttpOutcome::Answered { latency, .. } => Callback::Blocked(latency, Ok(ReturnValue::Bool(true))),
        }
    }

    fn preview_image(&mut self, core: &mut Core, url: &[u8]) -> Callback {
        match self.http(core, "GET", url) {
            HttpOutcome::Unreachable { after } => Callback::Blocked(after, Err(wire::concat(wire::ERR_OPEN_URL, url))),
            HttpOutcome::Answered { status, latency, .. } if status != 200 => Callback::Blocked(
                latency,
                Err(wire::concat(wire::ERR_UNEXPECTED_STATUS, status.to_string().as_bytes())),
            ),
            HttpOutcome::Answered { body, latency, .. } => {
                // heap_caps_malloc(0) returns NULL; so does a body larger than the free heap.
                if body.is_empty() || body.len() > core.spec.target.free_heap {
                    Callback::Blocked(latency, Err(wire::concat(wire::ERR_ALLOCATE_IMAGE, url)))
                } else {
                    Callback::Blocked(latency, Ok(ReturnValue::Bool(true)))
                }
            }
        }
    }

    /// A board-file tool's behaviour.
    fn board_tool(&mut self, core: &mut Core, index: usize, tool: usize, args: &[PropertyValue]) -> Callback {
        let spec = core.spec.clone();
        let BoardTool::Tool(t) = &spec.board_tools[index] else {
            return Callback::Throw(b"not a board tool".to_vec());
        };
        let names: Vec<String> = self
            .mcp
            .tool(tool)
            .properties()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        let arg_named = |name: &str| names.iter().position(|n| n == name).and_then(|i| args.get(i).cloned());
        match &t.behavior {
            Behavior::Gpio { gpio, level, from } => {
                let on = match (level, from) {
                    (Some(l), _) => *l != 0,
                    (None, Some(f)) => match arg_named(f) {
                        Some(PropertyValue::Bool(b)) => b,
                        Some(PropertyValue::Int(i)) => i != 0,
                        _ => false,
                    },
                    (None, None) => false,
                };
                self.drive_gpio(core, *gpio, on);
                Callback::Return(ReturnValue::Bool(true))
            }
            Behavior::GpioState { gpio, key } => {
                let on = self.gpio_flags.get(gpio).copied().unwrap_or(false);
                Callback::Return(ReturnValue::Text(format!("{{\"{key}\": {on}}}").into_bytes()))
            }
            Behavior::NvsSet { namespace, key, from } => {
                let value = match arg_named(from) {
                    Some(PropertyValue::Int(i)) => NvsValue::I32(i),
                    Some(PropertyValue::Bool(b)) => NvsValue::U8(u8::from(b)),
                    Some(PropertyValue::Str(s)) => NvsValue::Str(s),
                    None => NvsValue::I32(0),
                };
                match core.nvs_set(namespace, key, value) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            Behavior::Returns { value } => Callback::Return(match value {
                ReturnSpec::Bool(b) => ReturnValue::Bool(*b),
                ReturnSpec::Int(i) => ReturnValue::Int(*i),
                ReturnSpec::Text(s) => ReturnValue::Text(s.as_bytes().to_vec()),
            }),
            Behavior::Builtin { name } => self.builtin(core, name, &arg_named),
        }
    }

    /// Built-in behaviours (otto-robot's controller).
    fn builtin(&mut self, core: &mut Core, name: &str, arg: &dyn Fn(&str) -> Option<PropertyValue>) -> Callback {
        let int = |n: &str| arg(n).map_or(0, |v| v.as_int());
        let bytes = |n: &str| arg(n).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
        let now = core.now;
        let text = |s: &str| Callback::Return(ReturnValue::Text(s.as_bytes().to_vec()));
        match name {
            "battery.get_level" => {
                let (level, charging) = core
                    .spec
                    .battery
                    .as_ref()
                    .map_or((100, false), |b| (b.level, b.charging));
                text(&format!("{{\"level\":{level},\"charging\":{charging}}}"))
            }
            "otto.get_ip" => {
                let w = &core.world.wifi;
                if w.connected && !w.ip.is_empty() {
                    text(&format!("{{\"ip\":\"{}\",\"connected\":true}}", w.ip))
                } else {
                    text("{\"ip\":\"\",\"connected\":false}")
                }
            }
            "otto.get_trims" => {
                let t = otto::TRIM_KEYS.map(|k| core.nvs.get_i32(otto::TRIM_NAMESPACE, k, 0));
                let body: Vec<String> = otto::TRIM_KEYS
                    .iter()
                    .zip(t)
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                let json = format!("{{{}}}", body.join(","));
                core.log('I', "OttoController", || format!("获取微调设置: {json}"));
                text(&json)
            }
            _ => {
                let Some(o) = self.otto.as_mut() else {
                    return Callback::Throw(
                        format!("built-in behaviour {name} needs the otto controller").into_bytes(),
                    );
                };
                match name {
                    "otto.get_status" => text(if o.is_moving() {
                        otto::STATUS_MOVING
                    } else {
                        otto::STATUS_IDLE
                    }),
                    "otto.stop" => {
                        o.stop(now);
                        Callback::Return(ReturnValue::Bool(true))
                    }
                    "otto.servo_sequences" => {
                        let seq = bytes("sequence");
                        if seq.len() >= otto::SEQUENCE_MAX {
                            core.log('E', "OttoController", || {
                                format!(
                                    "JSON字符串太长！输入长度={}，最大允许={}",
                                    seq.len(),
                                    otto::SEQUENCE_MAX - 1
                                )
                            });
                        } else if seq.is_empty() {
                            core.log('W', "OttoController", || "序列JSON为空字符串");
                        } else {
                            let item = otto::Item {
                                sequence: Some(seq),
                                ..otto::Item::new(otto::kind::SERVO_SEQUENCE, 0, 0, 0, 0)
                            };
                            return Self::queue_otto(o, core, item, Ok(ReturnValue::Bool(true)));
                        }
                        Callback::Return(ReturnValue::Bool(true))
                    }
                    "otto.action" => {
                        let action = bytes("action");
                        match otto::action_item(
                            &action,
                            int("steps"),
                            int("speed"),
                            int("direction"),
                            int("amount"),
                            int("arm_swing"),
                        ) {
                            Some(item) => Self::queue_otto(o, core, item, Ok(ReturnValue::Bool(true))),
                            None => text(otto::ERR_INVALID_ACTION),
                        }
                    }
                    "otto.set_trim" => {
                        let servo = bytes("servo_type");
                        let trim = int("trim_value");
                        core.log('I', "OttoController", || {
                            format!("设置舵机微调: {} = {}度", String::from_utf8_lossy(&servo), trim)
                        });
                        let Some(i) = otto::TRIM_KEYS.iter().position(|k| k.as_bytes() == servo.as_slice()) else {
                            return text(otto::ERR_INVALID_SERVO);
                        };
                        if let Err(e) = core.nvs_set(otto::TRIM_NAMESPACE, otto::TRIM_KEYS[i], NvsValue::I32(trim)) {
                            return panic(e);
                        }
                        o.trims[i] = trim;
                        let reply = ReturnValue::Text(otto::trim_saved(&servo, trim));
                        Self::queue_otto(o, core, otto::Item::new(otto::kind::JUMP, 1, 500, 0, 0), Ok(reply))
                    }
                    other => Callback::Throw(format!("unknown built-in behaviour {other}").into_bytes()),
                }
            }
        }
    }

    /// `QueueAction`: log, queue; a full queue blocks the caller until the task frees a slot.
    fn queue_otto(o: &mut Otto, core: &mut Core, item: otto::Item, reply: Result<ReturnValue, Vec<u8>>) -> Callback {
        let line = item.log_line();
        core.log('I', "OttoController", || line);
        let now = core.now;
        let wait = if o.is_full() {
            o.busy_until().map(|t| t.saturating_since(now))
        } else {
            None
        };
        o.enqueue(item, now);
        match wait {
            Some(d) if !d.is_zero() => Callback::Blocked(d, reply),
            _ => Callback::Return(reply.unwrap_or(ReturnValue::Bool(true))),
        }
    }
}

fn panic(e: &'static str) -> Callback {
    Callback::Panic(format!("ESP_ERROR_CHECK failed: {e}"))
}

/// `Sec-WebSocket-Key`: 16 random bytes, base64.
fn base64_key(bytes: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Records a firmware log line given as `"<L> <TAG>: <text>"`.
fn log_line(core: &mut Core, line: String) {
    let (level, rest) = line.split_at(1);
    let level = level.chars().next().unwrap_or('I');
    let rest = rest.trim_start();
    let (tag, text) = rest.split_once(": ").unwrap_or(("MCP", rest));
    let tag: &'static str = match tag {
        "MCP" => "MCP",
        _ => "App",
    };
    let text = text.to_string();
    core.log(level, tag, || text);
}
