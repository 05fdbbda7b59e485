//! One simulated board: boot, the receive task, the main task, timers, reboot and power
//! (`main/application.cc`, `main/boards/common/*`; FIRMWARE.md §4–§6, §9–§11).
//!
//! The device is **sans-IO** (quinn-proto style): it is handed `now` and inbound MCP payloads
//! ([`Device::handle_mcp`]), and hands back outbound payloads ([`Device::poll_output`]), trace
//! events ([`Device::drain_events`]) and its next deadline ([`Device::poll_timeout`]). It never
//! reads a clock and never sleeps; whoever drives it owns time.

pub(crate) mod app;
pub(crate) mod audio;
pub(crate) mod builtin;
pub(crate) mod catalogue;
pub mod channel;
pub(crate) mod main_loop;
pub(crate) mod mic;
pub(crate) mod otto;
pub(crate) mod report;
pub mod state;
pub(crate) mod tools;
pub(crate) mod upgrade;
pub mod voice;

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::audio::render::{ChainSetup, Signals};
use crate::audio::source::Source;
use crate::audio::{AudioChange, AudioLog, ChainFault, measure::Measurement};
use crate::board::{BoardSpec, ButtonAction, CodecKind};
use crate::cjson::{self, Limits, Parser, Terminator};
use crate::fault::Fault;
use crate::hw::nvs::{EspErr, Nvs};
use crate::mcp::{DropReason, McpServer, PropertyValue, Received};
use crate::time::{SimDuration, SimTime};
use crate::trace::{BootReason, Event, LogLevel, LogText, NvsValue, TraceEvent};
use crate::voice::log::SpeechLog;
use crate::world::WorldSpec;

pub use app::Running;
pub use catalogue::Board;
pub use state::DeviceState;

/// Faults that change what the board constructs at its next boot (FIRMWARE.md §7.4, §9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The OLED panel does not answer: `NoDisplay` fallback (tools disappear).
    pub display_init_fails: bool,
    /// `esp_camera_init` fails: the tool stays, every call says `Failed to capture photo`.
    pub camera_init_fails: bool,
    /// The board's codec is replaced by `DummyAudioCodec` (everything succeeds, nothing plays).
    pub codec_dummy: bool,
}

/// What leaves the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// An MCP payload the direct link transmitted (the inner JSON-RPC payload, raw bytes).
    Mcp {
        /// The JSON-RPC payload bytes.
        payload: Vec<u8>,
        /// When the device transmitted it.
        at: SimTime,
    },
    /// Dial `endpoint` and write `request` (the exact handshake bytes); report with
    /// [`Device::handle_ws_open_result`].
    WsOpen {
        /// Where to dial (split from `websocket/url`).
        endpoint: channel::Endpoint,
        /// The handshake request to write once the TCP connection is up.
        request: Vec<u8>,
        /// When the device started the connect.
        at: SimTime,
    },
    /// Send one text frame (masked, as a client does).
    WsText {
        /// The frame's payload (device hello, `listen`, or an MCP envelope), unmasked.
        text: Vec<u8>,
        /// When the device sent it.
        at: SimTime,
    },
    /// A control message (`listen`, `abort`) on the direct link, as MQTT publishes it.
    Control {
        /// The JSON text, as the firmware builds it.
        text: Vec<u8>,
        /// When the device sent it.
        at: SimTime,
    },
    /// One binary frame of microphone audio (the frame as the protocol version packs it).
    WsBinary {
        /// The frame's bytes.
        frame: Vec<u8>,
        /// When the device sent it.
        at: SimTime,
    },
    /// Drop the TCP connection without a WebSocket close frame.
    WsClose {
        /// When the socket object was destroyed.
        at: SimTime,
    },
}

impl Output {
    /// The inner MCP payload of a direct-link reply.
    pub fn mcp(&self) -> Option<(&[u8], SimTime)> {
        match self {
            Output::Mcp { payload, at } => Some((payload, *at)),
            _ => None,
        }
    }
}

/// What the receive task did with one inbound payload (the "parameters" evidence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receipt {
    /// The device was off or still booting: nobody received it.
    NotRunning,
    /// Dropped without any reply, ever.
    Dropped {
        /// Why `McpServer::ParseMessage` dropped it.
        reason: DropReason,
    },
    /// Parsing needed more heap than the device has: dropped (a device event, not a twin crash).
    OutOfMemory,
    /// A reply was built on the receive task and queued (1 hop).
    Answered {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The reply is a JSON-RPC `error`, not a `result`.
        is_error: bool,
    },
    /// Nothing caught what the receive path threw: the device aborts and reboots, no reply
    /// (the L1–L2 range error, [`crate::firmware::Firmware::range_error_aborts`]).
    Aborted {
        /// What was thrown.
        reason: String,
    },
    /// A valid `tools/call` was queued for the main task (2 hops), with the coerced arguments.
    Scheduled {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The tool's name.
        tool: String,
        /// One value per property of the tool, in property order.
        args: Vec<PropertyValue>,
    },
}

impl std::fmt::Display for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Receipt::NotRunning => f.write_str("not received (the device was not running)"),
            Receipt::Dropped { reason } => write!(f, "dropped without a reply ({})", reason.as_str()),
            Receipt::OutOfMemory => f.write_str("dropped (parsing needed more heap than the device has)"),
            Receipt::Answered { id, is_error: false } => write!(f, "answered on the receive task (id {id})"),
            Receipt::Answered { id, is_error: true } => {
                write!(f, "answered with an error on the receive task (id {id})")
            }
            Receipt::Aborted { reason } => write!(f, "the device aborted ({reason}): no reply, reboot"),
            Receipt::Scheduled { id, tool, .. } => write!(f, "{tool} queued for the main task (id {id})"),
        }
    }
}

/// What [`Device::snapshot`] reads: the software state, as a readback sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSnapshot {
    /// Boots since the simulation started.
    pub boots: u32,
    /// The application is up (not off, not booting).
    pub running: bool,
    /// `GetDeviceState()`, while the application exists.
    pub state: Option<DeviceState>,
    /// `AudioCodec::output_volume_`.
    pub volume: Option<i32>,
    /// The backlight's current brightness (mid-fade values included), 0–100.
    pub brightness: Option<u8>,
    /// Where the backlight is fading to, 0–100.
    pub backlight_target: Option<u8>,
    /// The display's current theme, on boards that have themes.
    pub theme: Option<String>,
    /// Software flags of lamps and board GPIO tools, by GPIO.
    pub gpio: std::collections::BTreeMap<u32, bool>,
    /// The audio service has the codec output enabled (`EnableOutput(true)`).
    pub output_enabled: bool,
    /// The codec is open (ES8311 boards: the chip answers register writes).
    pub codec_open: bool,
    /// The amplifier's PA pin is high.
    pub pa_on: bool,
    /// An Opus decoder exists (made at the first received packet; codec state is lazy).
    pub decoder_allocated: bool,
    /// An Opus encoder exists (made when the microphone first streams).
    pub encoder_allocated: bool,
    /// Microphone packets sent this boot.
    pub mic_packets_sent: u64,
    /// Microphone packets dropped from the full send queue this boot.
    pub mic_packets_dropped: u64,
}

/// Power state of the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Power {
    Off,
    Booting { ready_at: SimTime, reason: BootReason },
    On,
}

/// State that is not part of the application: identity, flash, time, trace, outputs.
pub struct Core {
    /// The board file the device was built from.
    pub(crate) spec: Arc<BoardSpec>,
    /// The firmware the board runs: its behaviour switches (`firmware.version`).
    pub(crate) firmware: crate::firmware::Firmware,
    /// The board's catalogue memo (shared by devices of one [`Board`]).
    pub(crate) catalogues: Arc<catalogue::CatalogueCache>,
    /// The world the board lives in (Wi-Fi, OTA, WebSocket server, room, timings).
    pub(crate) world: WorldSpec,
    /// Construction faults, read at the next boot.
    pub(crate) faults: Faults,
    /// The NVS partition (survives reboots and power cuts).
    pub(crate) nvs: Nvs,
    /// The device's clock (virtual time).
    pub(crate) now: SimTime,
    /// Boots since the simulation started.
    pub(crate) boots: u32,
    /// Seeded generator: MAC and build hash, then the UUID and `Sec-WebSocket-Key`s.
    pub(crate) rng: ChaCha8Rng,
    /// Wi-Fi STA MAC, lowercase `f4:12:fa:…` (`Device-Id`, `mac_address`).
    pub(crate) mac: String,
    /// The build's ELF SHA-256 (`application.elf_sha256` of the system info).
    pub(crate) elf_sha256: [u8; 32],
    /// Everything that happened to the audio path (evidence; survives reboots).
    pub(crate) audio: AudioLog,
    /// What became of the speech the device was sent (evidence; survives reboots).
    pub(crate) speech: SpeechLog,
    /// Where Opus work is done when many devices share it (`None`: codecs of its own).
    pub(crate) codecs: Option<Arc<dyn crate::voice::memo::CodecPool>>,
    /// Received speech is not decoded: packet lengths come from their TOC bytes.
    pub(crate) durations_only: bool,
    trace: bool,
    events: Vec<TraceEvent>,
    outputs: VecDeque<Output>,
    power: Power,
    last_boot_at: Option<SimTime>,
}

impl Core {
    /// Records an event (only when tracing; the closure is not evaluated otherwise).
    pub fn emit(&mut self, kind: impl FnOnce() -> Event) {
        if self.trace {
            let at = self.now;
            self.events.push(TraceEvent { at, kind: kind() });
        }
    }

    /// An `ESP_LOGx` line.
    pub fn log<T: Into<LogText>>(&mut self, level: LogLevel, tag: &'static str, text: impl FnOnce() -> T) {
        if self.trace {
            let at = self.now;
            self.events.push(TraceEvent {
                at,
                kind: Event::Logged {
                    level,
                    tag,
                    text: text().into(),
                },
            });
        }
    }

    /// Whether events are recorded ([`Device::set_trace`]).
    pub fn is_tracing(&self) -> bool {
        self.trace
    }

    /// `vTaskDelay(pdMS_TO_TICKS(ms))`.
    pub fn delay(&self, ms: u64) -> SimDuration {
        self.spec.target.tick_rate().delay(ms)
    }

    /// A `Settings::Set*` write with its event; the error name when NVS refuses it.
    pub fn nvs_set(&mut self, namespace: &str, key: &str, value: NvsValue) -> Result<(), EspErr> {
        let trace = self.trace;
        let shown = trace.then(|| value.clone());
        match self.nvs.set(namespace, key, value) {
            Ok(()) => {
                if let Some(value) = shown {
                    self.emit(|| Event::NvsSet {
                        namespace: namespace.to_string(),
                        key: key.to_string(),
                        value,
                    });
                }
                Ok(())
            }
            Err(error) => {
                self.emit(|| Event::NvsFailed {
                    namespace: namespace.to_string(),
                    key: key.to_string(),
                    error,
                });
                Err(error)
            }
        }
    }

    pub(crate) fn push_output(&mut self, output: Output) {
        self.outputs.push_back(output);
    }

    fn transmit(&mut self, payload: Vec<u8>) {
        if self.trace {
            let copy = payload.clone();
            self.emit(|| Event::ReplySent { payload: copy });
        }
        let at = self.now;
        self.outputs.push_back(Output::Mcp { payload, at });
    }
}

/// A simulated board.
pub struct Device {
    core: Core,
    run: Option<Box<Running>>,
    parser: Parser,
    terminator: Terminator,
}

fn format_mac(bytes: [u8; 6]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

impl Device {
    /// A freshly flashed board (empty NVS), powered off. Identity (MAC, build hash, and the UUID
    /// made at first boot) comes from `seed`.
    pub fn new(board: impl Into<Board>, world: WorldSpec, seed: u64) -> Self {
        let Board { spec, catalogues } = board.into();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut mac = [0u8; 6];
        rng.fill_bytes(&mut mac[3..]);
        mac[..3].copy_from_slice(&[0xf4, 0x12, 0xfa]);
        let mut elf_sha256 = [0u8; 32];
        rng.fill_bytes(&mut elf_sha256);
        Device {
            core: Core {
                firmware: spec.firmware(),
                spec,
                catalogues,
                world,
                faults: Faults::default(),
                nvs: Nvs::new(0x4000),
                now: SimTime::ZERO,
                boots: 0,
                rng,
                mac: format_mac(mac),
                elf_sha256,
                audio: AudioLog::default(),
                speech: SpeechLog::default(),
                codecs: None,
                durations_only: false,
                trace: true,
                events: Vec::new(),
                outputs: VecDeque::new(),
                power: Power::Off,
                last_boot_at: None,
            },
            run: None,
            parser: Parser::new(),
            terminator: Terminator::Length,
        }
    }

    /// Turns event recording on or off (off for throughput runs).
    pub fn set_trace(&mut self, on: bool) {
        self.core.trace = on;
    }

    /// Received speech is not decoded (a fleet's `--decode none`): each packet plays for the
    /// length its TOC byte gives, as silence, so queues, drops, drain timing and power-down are
    /// kept but levels are not measured.
    pub fn set_durations_only(&mut self, on: bool) {
        self.core.durations_only = on;
    }

    /// Does this device's Opus work in `pool` (shared by many devices; every output is the one
    /// the device's own codec would give: `voice::memo`). Takes effect for the next codec made.
    pub fn share_codecs(&mut self, pool: Arc<dyn crate::voice::memo::CodecPool>) {
        self.core.codecs = Some(pool);
    }

    /// Which cJSON entry point inbound payloads go through: `Length` for WebSocket frames,
    /// `Nul` for C strings (MQTT, `ParseMessage(std::string)`, the conformance recorder).
    pub fn set_terminator(&mut self, terminator: Terminator) {
        self.terminator = terminator;
    }

    /// Construction faults; a change takes effect at the next boot.
    pub fn faults_mut(&mut self) -> &mut Faults {
        &mut self.core.faults
    }

    /// The NVS partition.
    pub fn nvs(&self) -> &Nvs {
        &self.core.nvs
    }

    /// The NVS partition, e.g. to pre-seed settings or make writes fail.
    pub fn nvs_mut(&mut self) -> &mut Nvs {
        &mut self.core.nvs
    }

    /// The board file.
    pub fn spec(&self) -> &BoardSpec {
        &self.core.spec
    }

    /// The world the board lives in.
    pub fn world(&self) -> &WorldSpec {
        &self.core.world
    }

    /// The world, mutable; a change takes effect when the firmware next reads that part.
    pub fn world_mut(&mut self) -> &mut WorldSpec {
        &mut self.core.world
    }

    /// The device's clock.
    pub fn now(&self) -> SimTime {
        self.core.now
    }

    /// The Wi-Fi STA MAC (`Device-Id`).
    pub fn mac(&self) -> &str {
        &self.core.mac
    }

    /// Sets the Wi-Fi STA MAC (`Device-Id`), e.g. to impersonate a known board.
    pub fn set_mac(&mut self, mac: &str) -> Result<(), String> {
        let parts: Vec<&str> = mac.split(':').collect();
        if parts.len() != 6
            || !parts
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(format!("`{mac}` is not a MAC address like f4:12:fa:01:02:03"));
        }
        self.core.mac = mac.to_ascii_lowercase();
        Ok(())
    }

    /// Boots since the simulation started.
    pub fn boots(&self) -> u32 {
        self.core.boots
    }

    /// When the device last finished booting.
    pub fn last_boot_at(&self) -> Option<SimTime> {
        self.core.last_boot_at
    }

    /// The software state a readback would see, for before/after comparisons in evidence and
    /// property checks (the one snapshot type of the twin).
    pub fn snapshot(&self) -> DeviceSnapshot {
        let app = self.app();
        DeviceSnapshot {
            boots: self.boots(),
            running: self.is_running(),
            state: app.map(|a| a.state),
            volume: app.map(|a| a.volume),
            brightness: app.and_then(|a| a.backlight.as_ref().map(|b| b.brightness())),
            backlight_target: app.and_then(|a| a.backlight.as_ref().map(|b| b.target())),
            theme: app.and_then(|a| a.display.current_theme().map(str::to_string)),
            gpio: app.map(|a| a.gpio_flags.clone()).unwrap_or_default(),
            output_enabled: app.is_some_and(|a| a.audio.output_enabled),
            codec_open: app.is_some_and(|a| a.audio.codec_open),
            pa_on: app.is_some_and(|a| a.audio.pa_on),
            decoder_allocated: app.is_some_and(|a| a.voice.has_decoder()),
            encoder_allocated: app.is_some_and(|a| a.voice.has_encoder()),
            mic_packets_sent: app.map_or(0, |a| a.voice.mic_sent),
            mic_packets_dropped: app.map_or(0, |a| a.voice.mic_dropped),
        }
    }

    /// The device state while the board runs (cheaper than [`Device::snapshot`]).
    pub fn state(&self) -> Option<DeviceState> {
        self.app().map(|a| a.state)
    }

    /// The application, while the board runs.
    pub fn app(&self) -> Option<&Running> {
        self.run.as_deref()
    }

    /// The MCP server (this boot's tool registry), while the board runs.
    pub fn mcp(&self) -> Option<&McpServer> {
        self.run.as_deref().map(|r| &*r.mcp)
    }

    /// `Board::GetSystemInfoJson` as the device would build it now (the OTA request body).
    pub fn system_info_json(&self) -> Option<Vec<u8>> {
        self.run.as_deref().map(|run| run.system_info(&self.core))
    }

    /// Booted and running the application.
    pub fn is_running(&self) -> bool {
        self.core.power == Power::On && self.run.is_some()
    }

    /// Powered: booting or running.
    pub fn is_powered(&self) -> bool {
        self.core.power != Power::Off
    }

    /// True while the main task has queued or blocked work.
    pub fn is_busy(&self) -> bool {
        matches!(self.core.power, Power::Booting { .. }) || self.run.as_deref().is_some_and(|r| !r.main.is_idle())
    }

    /// Everything recorded since the last call.
    pub fn drain_events(&mut self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.core.events)
    }

    /// The next output, oldest first (taking it out of the queue); `None` when there is none.
    ///
    /// Its answer can change after every `handle_*`, `run_until`, `run_before`, `power_on`,
    /// `cut_power`, `reset`, `toggle_chat`, `play`, `busy`, `press_volume`, `set_fault` or
    /// `set_chain_fault` call (each runs the work due by its `now` first), and after each
    /// `poll_output` itself.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.core.outputs.pop_front()
    }

    /// The earliest time at which the device has something to do (a boot finishing, main-task
    /// work, an esp_timer), never earlier than [`Device::now`]; `None` when nothing is scheduled.
    ///
    /// Its answer can change after every `handle_*`, `run_until`, `run_before`, `power_on`,
    /// `cut_power`, `reset`, `toggle_chat`, `play`, `busy`, `press_volume`, `set_fault` or
    /// `set_chain_fault` call.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let now = self.core.now;
        let mut next: Option<SimTime> = None;
        let mut consider = |t: Option<SimTime>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        match self.core.power {
            Power::Off => {}
            Power::Booting { ready_at, .. } => consider(Some(ready_at)),
            Power::On => {
                if let Some(run) = self.run.as_deref() {
                    consider(run.main.deadline(now));
                    consider(run.timer_deadline());
                }
            }
        }
        next.map(|t| t.max(now))
    }

    /// Runs everything due at or before `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: SimTime) {
        self.advance(t, true);
    }

    /// Runs everything due strictly before `t` (work queued at `t` itself stays queued), then
    /// sets the clock to `t`.
    pub fn run_before(&mut self, t: SimTime) {
        self.advance(t, false);
    }

    fn advance(&mut self, limit: SimTime, inclusive: bool) {
        let limit = limit.max(self.core.now);
        while let Some(at) = self.poll_timeout() {
            if at > limit || (!inclusive && at == limit) {
                break;
            }
            self.core.now = at;
            self.step();
        }
        self.core.now = limit;
    }

    /// One instant: finish a boot, fire due timers, then let the main task run.
    fn step(&mut self) {
        let now = self.core.now;
        if let Power::Booting { ready_at, reason } = self.core.power {
            if ready_at <= now {
                self.boot(reason);
            }
            return;
        }
        if let Some(run) = self.run.as_deref_mut() {
            run.fire_timers(&mut self.core);
        }
        self.run_main_loop();
    }

    fn run_main_loop(&mut self) {
        loop {
            let Some(run) = self.run.as_deref_mut() else { return };
            let now = self.core.now;
            match run.main.next(now) {
                main_loop::Next::Idle | main_loop::Next::BusyUntil(_) => return,
                main_loop::Next::BatchTaken(tasks) => self.core.emit(|| Event::BatchStarted { tasks }),
                main_loop::Next::Run(task) => match run.run_task(&mut self.core, task) {
                    app::Step::Done => {}
                    app::Step::Block(d, continuation) => {
                        run.main.block(now + d, continuation);
                        self.core.emit(|| Event::TaskDelayed { ms: d.as_millis() });
                    }
                    app::Step::Restart(reason) => {
                        self.restart(reason);
                        return;
                    }
                },
            }
        }
    }

    /// Power on (no-op when already powered).
    pub fn power_on(&mut self, now: SimTime) {
        self.run_until(now);
        if self.core.power != Power::Off {
            return;
        }
        self.start_boot(BootReason::PowerOn);
    }

    /// Pulls the plug: volatile state and every queued task are gone; NVS stays.
    pub fn cut_power(&mut self, now: SimTime) {
        self.run_until(now);
        if self.core.power == Power::Off {
            return;
        }
        self.core.emit(|| Event::PowerCut);
        self.drop_everything("power cut");
        self.core.power = Power::Off;
    }

    fn start_boot(&mut self, reason: BootReason) {
        let boot_time = self.core.world.boot_time;
        if boot_time.is_zero() {
            self.boot(reason);
        } else {
            self.core.power = Power::Booting {
                ready_at: self.core.now + boot_time,
                reason,
            };
        }
    }

    fn boot(&mut self, reason: BootReason) {
        self.core.boots += 1;
        let n = self.core.boots;
        self.core.emit(|| Event::Booted { n, reason });
        self.core.power = Power::On;
        self.core.last_boot_at = Some(self.core.now);
        self.run = Some(Box::new(Running::boot(&mut self.core)));
    }

    fn drop_everything(&mut self, why: &'static str) {
        if let Some(mut run) = self.run.take() {
            // A reset of any kind ends TCP without a close frame (the peer sees the socket go).
            run.drop_socket(&mut self.core, why);
            let now = self.core.now;
            run.audio.shut_down(&mut self.core.audio, now);
            for task in run.main.drain() {
                task.record_drop(&mut self.core, why);
            }
        }
    }

    /// `esp_restart()` (or a panic): everything queued dies, then the board boots again.
    fn restart(&mut self, reason: BootReason) {
        self.core.emit(|| Event::Restarted);
        let why = match reason {
            BootReason::Panic => "panic",
            _ => "esp_restart",
        };
        self.drop_everything(why);
        self.start_boot(reason);
    }

    /// The receive task: one inbound MCP payload, processed synchronously as `ParseMessage`
    /// does. Work it schedules waits for the main task (see [`Device::run_until`]).
    pub fn handle_mcp(&mut self, now: SimTime, payload: &[u8]) -> Receipt {
        self.run_before(now);
        if !self.is_running() {
            self.core.emit(|| Event::MessageDropped {
                reason: "device not running",
            });
            return Receipt::NotRunning;
        }
        let run = self.run.as_deref_mut().expect("running");
        let limits = Limits {
            heap_bytes: Some(self.core.spec.target.free_heap),
        };
        let received = match self.parser.parse(payload, self.terminator, limits) {
            Ok(doc) => run.mcp.receive(doc.root()),
            Err(cjson::ParseError::OutOfMemory { .. }) => {
                self.core
                    .log(LogLevel::Error, "MCP", || "Failed to parse MCP message: out of memory");
                self.core.emit(|| Event::MessageDropped {
                    reason: "out of memory while parsing",
                });
                return Receipt::OutOfMemory;
            }
            Err(_) => Received::Dropped {
                reason: DropReason::Unparseable,
                log: self.core.is_tracing().then(|| {
                    let shown = String::from_utf8_lossy(cjson::c_str(payload));
                    format!("E MCP: Failed to parse MCP message: {shown}")
                }),
            },
        };
        let receipt = run.receive(&mut self.core, received);
        self.after_thread();
        receipt
    }

    /// A `tool_call` thread (1.7.5–1.9.1) or a receive path that aborted takes the device down.
    pub(crate) fn after_thread(&mut self) {
        if let Some(run) = self.run.as_deref_mut()
            && std::mem::take(&mut run.abort_pending)
        {
            self.restart(BootReason::Panic);
        }
    }

    /// The driver finished the TCP connect + handshake of the last [`Output::WsOpen`]
    /// (`ok`: the response contained `HTTP/1.1 101`).
    pub fn handle_ws_open_result(&mut self, now: SimTime, ok: bool) {
        self.run_before(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.ws_open_result(&mut self.core, ok);
        }
    }

    /// The peer closed the WebSocket or the TCP connection broke.
    pub fn handle_ws_closed(&mut self, now: SimTime) {
        self.run_before(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.ws_closed(&mut self.core);
        }
    }

    /// A text frame on the WebSocket receive task: envelope parse (length-bounded), then the
    /// server hello, the MCP server or the application dispatcher.
    pub fn handle_ws_text(&mut self, now: SimTime, frame: &[u8]) -> Option<Receipt> {
        self.run_before(now);
        let run = self.run.as_deref_mut()?;
        let limits = Limits {
            heap_bytes: Some(self.core.spec.target.free_heap),
        };
        let terminator = if self.core.firmware.ws_parse_with_length {
            Terminator::Length
        } else {
            Terminator::Nul
        };
        let outcome = match self.parser.parse(frame, terminator, limits) {
            Err(_) => {
                let shown = String::from_utf8_lossy(frame).into_owned();
                self.core
                    .log(LogLevel::Error, "WS", || format!("Missing message type, data: {shown}"));
                None
            }
            Ok(doc) => {
                let root = doc.root();
                match root.get(b"type").and_then(|t| t.c_string()) {
                    None => {
                        let shown = String::from_utf8_lossy(frame).into_owned();
                        self.core
                            .log(LogLevel::Error, "WS", || format!("Missing message type, data: {shown}"));
                        None
                    }
                    Some(b"hello") => match run.server_hello(&mut self.core, root) {
                        Ok(()) => None,
                        Err(reason) => {
                            self.core.emit(|| Event::Panicked { reason });
                            self.restart(BootReason::Panic);
                            return None;
                        }
                    },
                    Some(_) => run.incoming_json(&mut self.core, root),
                }
            }
        };
        let run = self.run.as_deref_mut()?;
        if let Some(channel::Link::WebSocket(ws)) = run.protocol.as_mut() {
            ws.last_incoming = now;
        }
        let receipt = outcome.map(|received| run.receive(&mut self.core, received));
        self.after_thread();
        receipt
    }

    /// A user action: BOOT click or wake word (toggle chat: open the channel when idle).
    pub fn toggle_chat(&mut self, now: SimTime) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.request_toggle_chat();
        }
    }

    /// Everything scheduled but not yet run, described (for evidence).
    pub fn pending_tasks(&self) -> Vec<String> {
        self.run
            .as_deref()
            .map(|r| r.main.pending().map(|t| t.describe()).collect())
            .unwrap_or_default()
    }

    /// Plays a sound through the device's audio path (as decoded server audio or a local sound
    /// would): output on if needed, queued behind what already plays. Returns when it starts and
    /// ends, or `None` when the device is not running.
    pub fn play(&mut self, now: SimTime, source: Source, duration: SimDuration) -> Option<(SimTime, SimTime)> {
        self.run_until(now);
        let run = self.run.as_deref_mut()?;
        let volume = run.volume;
        Some(run.audio.play(&mut self.core.audio, now, source, duration, volume))
    }

    /// Sets or clears `fault` at `now`: an analog-chain fault at once, a construction fault
    /// (codec, OLED, camera) for the next boot, NVS write failures from now on.
    pub fn set_fault(&mut self, fault: Fault, now: SimTime, on: bool) {
        let device = self;
        if let Some(chain) = fault.chain() {
            device.set_chain_fault(now, chain, on);
            return;
        }
        match fault {
            Fault::CodecDummy => device.faults_mut().codec_dummy = on,
            Fault::OledInitFailure => device.faults_mut().display_init_fails = on,
            Fault::CameraInitFailure => device.faults_mut().camera_init_fails = on,
            Fault::NvsWriteFailure => device.nvs_mut().fail_writes = on.then_some(EspErr::NvsNotEnoughSpace),
            _ => {}
        }
    }

    /// Sets or clears a fault of the analog chain at `now`.
    pub fn set_chain_fault(&mut self, now: SimTime, fault: ChainFault, on: bool) {
        self.run_until(now);
        self.core.audio.record(now, AudioChange::Fault(fault, on));
    }

    /// The board's chain in the current world, for rendering.
    pub fn chain_setup(&self) -> ChainSetup {
        let a = &self.core.spec.audio;
        let room = &self.core.world.room;
        let frames = 6 * 240; // AUDIO_CODEC_DMA_DESC_NUM × AUDIO_CODEC_DMA_FRAME_NUM
        ChainSetup {
            codec: a.codec,
            rate: a.output_sample_rate,
            amp: a.amplifier.clone(),
            speaker: a.speaker.clone(),
            dac: a.dac.clone(),
            distance_m: room.listener_distance_m,
            ambient_dba: room.ambient_dba,
            margin_db: room.margin_db,
            dma_latency: match a.codec {
                CodecKind::NoAudioCodecSimplex | CodecKind::NoAudioCodecDuplex => {
                    SimDuration::from_micros(frames * 1_000_000 / u64::from(a.output_sample_rate.max(1)))
                }
                _ => SimDuration::ZERO,
            },
        }
    }

    /// Renders `[from, to)` of the audio evidence (run the device past `to` first).
    pub fn render(&self, from: SimTime, to: SimTime, signals: bool) -> (Measurement, Option<Signals>) {
        crate::audio::render::render(&self.core.audio, &self.chain_setup(), from, to, signals)
    }

    /// Everything that happened to the audio path (evidence; survives reboots).
    pub fn audio_log(&self) -> &AudioLog {
        &self.core.audio
    }

    /// Hardware reset (EN pin): `esp_restart` now; queued work is lost, NVS kept.
    pub fn reset(&mut self, now: SimTime) {
        self.run_until(now);
        if self.core.power == Power::On {
            self.restart(BootReason::EspRestart);
        }
    }

    /// Keeps the main task busy for `d` from `now` (as a slow callback or a blocking channel
    /// open would): everything that arrives meanwhile waits.
    pub fn busy(&mut self, now: SimTime, d: SimDuration) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.main.schedule(app::Task::Busy(d));
        }
    }

    /// A button gesture as the board wires it (`buttons:` of the board file): a click, or a long
    /// press. Returns what it did, `None` when the board has no such button.
    pub fn press_button(&mut self, now: SimTime, name: &str, long: bool) -> Option<ButtonAction> {
        let action = self.core.spec.button_action(name, long)?;
        match action {
            ButtonAction::VolumeUp => self.press_volume(now, 10, false),
            ButtonAction::VolumeDown => self.press_volume(now, -10, false),
            ButtonAction::VolumeMax => self.press_volume(now, 1, true),
            ButtonAction::VolumeMin => self.press_volume(now, -1, true),
            ButtonAction::ToggleChat => self.toggle_chat(now),
            ButtonAction::StartListening => self.push_to_talk(now, true),
        }
        Some(action)
    }

    /// A volume button press (button callbacks run in the esp_timer context, not the main task).
    pub fn press_volume(&mut self, now: SimTime, delta: i32, long: bool) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.volume_button(&mut self.core, delta, long);
        }
    }

    /// The start of a speech window a listener's measurement leaves out: the decoder and
    /// resampler settling and the amplifier starting. One value for every report of speech (the
    /// scenario runner's `speak`, `connect --report`, the fleet's loudness).
    pub const HEARD_GUARD: SimDuration = SimDuration::from_millis(300);

    /// What the listener heard of a speech window (a session's or a sentence's): the window
    /// after [`Device::HEARD_GUARD`], rendered (run the device past its end first).
    pub fn heard(&self, window: &crate::voice::log::Window, signals: bool) -> (Measurement, Option<Signals>) {
        self.render((window.start + Self::HEARD_GUARD).min(window.end), window.end, signals)
    }
}

#[cfg(test)]
mod tests;
