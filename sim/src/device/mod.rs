//! One simulated board: boot, the receive task, the main task, timers, reboot and power
//! (`main/application.cc`, `main/boards/common/*`; FIRMWARE.md §4–§6, §9–§11).
//!
//! The device is **sans-IO** (quinn-proto style): it is handed `now` and inbound MCP payloads
//! ([`Device::handle_mcp`]), and hands back outbound payloads ([`Device::poll_output`]), trace
//! events ([`Device::drain_events`]) and its next deadline ([`Device::poll_timeout`]). It never
//! reads a clock and never sleeps; whoever drives it owns time.

pub mod app;
pub mod audio;
pub mod builtin;
pub mod catalogue;
pub mod channel;
pub mod main_loop;
pub mod otto;
pub mod report;
pub mod state;
pub mod tools;
pub mod upgrade;

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::audio::render::{ChainSetup, Signals};
use crate::audio::source::Source;
use crate::audio::{AudioChange, AudioLog, ChainFault, measure::Measurement};
use crate::board::{BoardSpec, CodecKind};
use crate::cjson::{self, Limits, Parser, Terminator};
use crate::fault::Fault;
use crate::hw::nvs::Nvs;
use crate::mcp::{DropReason, McpServer, PropertyValue, Received};
use crate::time::{SimDuration, SimTime};
use crate::trace::{BootReason, Event, LogText, NvsValue, TraceEvent};
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
    Mcp { payload: Vec<u8>, at: SimTime },
    /// Dial `endpoint` and write `request` (the exact handshake bytes); report with
    /// [`Device::handle_ws_open_result`].
    WsOpen {
        endpoint: channel::Endpoint,
        request: Vec<u8>,
        at: SimTime,
    },
    /// Send one text frame (masked, as a client does).
    WsText { text: Vec<u8>, at: SimTime },
    /// Drop the TCP connection without a WebSocket close frame.
    WsClose { at: SimTime },
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
    Dropped { reason: DropReason },
    /// Parsing needed more heap than the device has: dropped (a device event, not a twin crash).
    OutOfMemory,
    /// A reply was built on the receive task and queued (1 hop).
    Answered { id: i32, is_error: bool },
    /// A valid `tools/call` was queued for the main task (2 hops), with the coerced arguments.
    Scheduled {
        id: i32,
        tool: String,
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
            Receipt::Scheduled { id, tool, .. } => write!(f, "{tool} queued for the main task (id {id})"),
        }
    }
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
    pub spec: Arc<BoardSpec>,
    /// The board's catalogue memo (shared by devices of one [`Board`]).
    pub catalogues: Arc<catalogue::CatalogueCache>,
    pub world: WorldSpec,
    pub faults: Faults,
    pub nvs: Nvs,
    pub now: SimTime,
    pub boots: u32,
    pub rng: ChaCha8Rng,
    pub mac: String,
    pub elf_sha256: [u8; 32],
    /// Everything that happened to the audio path (evidence; survives reboots).
    pub audio: AudioLog,
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
    pub fn log<T: Into<LogText>>(&mut self, level: char, tag: &'static str, text: impl FnOnce() -> T) {
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

    pub fn is_tracing(&self) -> bool {
        self.trace
    }

    /// `vTaskDelay(pdMS_TO_TICKS(ms))`.
    pub fn delay(&self, ms: u64) -> SimDuration {
        self.spec.target.tick_rate().delay(ms)
    }

    /// A `Settings::Set*` write with its event; the error name when NVS refuses it.
    pub fn nvs_set(&mut self, namespace: &str, key: &str, value: NvsValue) -> Result<(), &'static str> {
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

    /// Which cJSON entry point inbound payloads go through: `Length` for WebSocket frames,
    /// `Nul` for C strings (MQTT, `ParseMessage(std::string)`, the conformance recorder).
    pub fn set_terminator(&mut self, terminator: Terminator) {
        self.terminator = terminator;
    }

    pub fn faults_mut(&mut self) -> &mut Faults {
        &mut self.core.faults
    }

    pub fn nvs(&self) -> &Nvs {
        &self.core.nvs
    }

    pub fn nvs_mut(&mut self) -> &mut Nvs {
        &mut self.core.nvs
    }

    pub fn spec(&self) -> &BoardSpec {
        &self.core.spec
    }

    pub fn world(&self) -> &WorldSpec {
        &self.core.world
    }

    pub fn world_mut(&mut self) -> &mut WorldSpec {
        &mut self.core.world
    }

    pub fn now(&self) -> SimTime {
        self.core.now
    }

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

    /// The application, while the board runs.
    pub fn app(&self) -> Option<&Running> {
        self.run.as_deref()
    }

    pub fn mcp(&self) -> Option<&McpServer> {
        self.run.as_deref().map(|r| &*r.mcp)
    }

    /// `Board::GetSystemInfoJson` as the device would build it now (the OTA request body).
    pub fn system_info_json(&self) -> Option<Vec<u8>> {
        self.run.as_deref().map(|run| run.system_info(&self.core))
    }

    pub fn is_running(&self) -> bool {
        self.core.power == Power::On && self.run.is_some()
    }

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

    /// The next transmitted payload.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.core.outputs.pop_front()
    }

    /// The earliest time at which the device has something to do.
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
                    .log('E', "MCP", || "Failed to parse MCP message: out of memory");
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
        run.receive(&mut self.core, received)
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

    /// A binary frame (audio) arrived: counted, not decoded.
    pub fn handle_ws_binary(&mut self, now: SimTime, len: usize) {
        self.run_before(now);
        if let Some(run) = self.run.as_deref_mut()
            && let Some(channel::Link::WebSocket(ws)) = run.protocol.as_mut()
        {
            ws.last_incoming = now;
        }
        self.core.emit(|| Event::Note {
            text: format!("binary frame of {len} bytes"),
        });
    }

    /// A text frame on the WebSocket receive task: envelope parse (length-bounded), then the
    /// server hello, the MCP server or the application dispatcher.
    pub fn handle_ws_text(&mut self, now: SimTime, frame: &[u8]) -> Option<Receipt> {
        self.run_before(now);
        let run = self.run.as_deref_mut()?;
        let limits = Limits {
            heap_bytes: Some(self.core.spec.target.free_heap),
        };
        let outcome = match self.parser.parse(frame, Terminator::Length, limits) {
            Err(_) => {
                let shown = String::from_utf8_lossy(frame).into_owned();
                self.core
                    .log('E', "WS", || format!("Missing message type, data: {shown}"));
                None
            }
            Ok(doc) => {
                let root = doc.root();
                match root.get(b"type").and_then(|t| t.c_string()) {
                    None => {
                        let shown = String::from_utf8_lossy(frame).into_owned();
                        self.core
                            .log('E', "WS", || format!("Missing message type, data: {shown}"));
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
        outcome.map(|received| run.receive(&mut self.core, received))
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
            Fault::NvsWriteFailure => device.nvs_mut().fail_writes = on.then_some("ESP_ERR_NVS_NOT_ENOUGH_SPACE"),
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

    /// A volume button press (button callbacks run in the esp_timer context, not the main task).
    pub fn press_volume(&mut self, now: SimTime, delta: i32, long: bool) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.volume_button(&mut self.core, delta, long);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Harness;

    const BOARD: &str = include_str!("../../../boards/bread-compact-wifi.yaml");

    fn spec() -> Arc<BoardSpec> {
        Arc::new(BoardSpec::from_yaml("bread-compact-wifi.yaml", BOARD).unwrap())
    }

    fn booted() -> Harness {
        let mut h = Harness::new(Device::new(spec(), WorldSpec::conformance(), 1));
        h.power_on();
        h
    }

    fn replies(h: &mut Harness) -> Vec<String> {
        h.take_outputs()
            .into_iter()
            .filter_map(|o| o.mcp().map(|(p, _)| String::from_utf8(p.to_vec()).unwrap()))
            .collect()
    }

    fn call(id: i32, name: &str, args: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn one_hop_replies_overtake_two_hop_replies_in_a_burst() {
        let mut h = booted();
        h.deliver(&call(13, "self.lamp.get_state", "{}"));
        h.deliver(br#"{"jsonrpc":"2.0","id":16,"method":"initialize"}"#);
        h.deliver(br#"{"jsonrpc":"2.0","id":27,"method":"ping"}"#);
        h.run_until_idle().unwrap();
        let heads: Vec<String> = replies(&mut h).iter().map(|r| r[..30].to_string()).collect();
        assert_eq!(
            heads,
            [
                r#"{"jsonrpc":"2.0","id":16,"resu"#,
                r#"{"jsonrpc":"2.0","id":27,"erro"#,
                r#"{"jsonrpc":"2.0","id":13,"resu"#
            ]
        );
    }

    #[test]
    fn the_reply_to_self_reboot_is_never_sent() {
        let mut h = booted();
        let t0 = h.now();
        let receipt = h.deliver(&call(152, "self.reboot", "{}"));
        assert!(matches!(receipt, Receipt::Scheduled { id: 152, .. }));
        h.run_until_idle().unwrap();
        assert!(replies(&mut h).is_empty());
        assert_eq!(h.device.boots(), 2);
        assert_eq!(
            h.device.last_boot_at(),
            Some(t0 + SimDuration::from_millis(2000)),
            "1 s before Reboot(), 1 s inside it"
        );
        let events = h.device.drain_events();
        assert!(events.iter().any(|e| matches!(&e.kind, Event::ReplyDropped { payload, .. } if payload.starts_with(br#"{"jsonrpc":"2.0","id":152,"result""#))));
    }

    #[test]
    fn reboot_drops_everything_queued_after_it() {
        let mut h = booted();
        h.deliver(&call(1, "self.reboot", "{}"));
        h.deliver(&call(2, "self.lamp.turn_on", "{}"));
        h.run_until_idle().unwrap();
        // Batch 2 is [R, S1, S2]: the lamp's side effect happened, its reply never left.
        assert!(replies(&mut h).is_empty());
        assert_eq!(h.device.boots(), 2);
        assert_eq!(
            h.device.app().unwrap().gpio_flags.get(&18),
            Some(&false),
            "lamp state is RAM only"
        );
    }

    #[test]
    fn volume_zero_returns_as_ten_after_reboot() {
        let mut h = booted();
        h.deliver(&call(1, "self.audio_speaker.set_volume", r#"{"volume":0}"#));
        h.run_until_idle().unwrap();
        assert_eq!(h.device.app().unwrap().volume, 0);
        h.deliver(&call(2, "self.reboot", "{}"));
        h.run_until_idle().unwrap();
        assert_eq!(h.device.app().unwrap().volume, 10, "readback after reboot");
        assert_eq!(
            h.device.nvs().get_i32("audio", "output_volume", 70),
            0,
            "NVS still holds 0"
        );
    }

    #[test]
    fn nvs_survives_a_power_cut_and_volatile_state_does_not() {
        let mut h = booted();
        h.deliver(&call(1, "self.audio_speaker.set_volume", r#"{"volume":33}"#));
        h.deliver(&call(2, "self.lamp.turn_on", "{}"));
        h.run_until_idle().unwrap();
        let now = h.now();
        h.device.cut_power(now);
        assert!(!h.device.is_running());
        assert_eq!(h.deliver(&call(3, "self.get_device_status", "{}")), Receipt::NotRunning);
        h.power_on();
        let app = h.device.app().unwrap();
        assert_eq!(app.volume, 33);
        assert_eq!(app.gpio_flags.get(&18), Some(&false));
    }

    #[test]
    fn a_4000_byte_download_url_panics_and_reboots() {
        let mut h = booted();
        let url = "u".repeat(4000);
        h.deliver(&call(
            1,
            "self.assets.set_download_url",
            &format!(r#"{{"url":"{url}"}}"#),
        ));
        h.run_until_idle().unwrap();
        assert!(replies(&mut h).is_empty());
        assert_eq!(h.device.boots(), 2);
        assert_eq!(h.device.nvs().get_str("assets", "download_url"), None);
        h.deliver(&call(
            2,
            "self.assets.set_download_url",
            &format!(r#"{{"url":"{}"}}"#, &url[1..]),
        ));
        h.run_until_idle().unwrap();
        assert_eq!(replies(&mut h).len(), 1, "3999 bytes fit");
    }

    #[test]
    fn upgrade_answers_true_seven_seconds_later_when_the_ota_fails() {
        let mut h = booted();
        let t0 = h.now();
        h.deliver(&call(9, "self.upgrade_firmware", "{}"));
        h.run_until_idle().unwrap();
        let out = h.take_outputs();
        assert_eq!(out.len(), 1);
        let (payload, at) = out[0].mcp().unwrap();
        assert!(payload.ends_with(br#""text":"true"}],"isError":false}}"#));
        assert_eq!(at, t0 + SimDuration::from_millis(7000));
        assert_eq!(
            h.device.app().unwrap().state,
            DeviceState::Upgrading,
            "nothing brings it back to idle"
        );
    }

    #[test]
    fn boots_sharing_a_board_get_the_catalogue_of_their_own_construction() {
        // Every user-only tool too, page by page, as bytes.
        let listing = |d: &Device| d.mcp().unwrap().pages(true).collect::<Vec<_>>();
        let boot = |board: &Board, oled_fails: bool| {
            let mut h = Harness::new(Device::new(board, WorldSpec::conformance(), 1));
            h.device.faults_mut().display_init_fails = oled_fails;
            h.power_on();
            h
        };
        let shared = Board::new(spec());
        let healthy = boot(&shared, false);
        let broken = boot(&shared, true);
        let mut again = boot(&shared, false);
        for (h, oled_fails) in [(&healthy, false), (&broken, true), (&again, false)] {
            let alone = boot(&Board::new(spec()), oled_fails);
            assert_eq!(listing(&h.device), listing(&alone.device), "oled fails: {oled_fails}");
        }
        assert_ne!(listing(&healthy.device), listing(&broken.device));
        assert!(std::ptr::eq(healthy.device.mcp().unwrap(), again.device.mcp().unwrap()));
        // A reboot registers again, into the same shared catalogue.
        again.deliver(&call(1, "self.reboot", "{}"));
        again.run_until_idle().unwrap();
        assert_eq!(again.device.boots(), 2);
        assert!(std::ptr::eq(healthy.device.mcp().unwrap(), again.device.mcp().unwrap()));
    }

    #[test]
    fn a_failed_oled_init_removes_the_display_tools() {
        let mut h = Harness::new(Device::new(spec(), WorldSpec::conformance(), 1));
        h.device.faults_mut().display_init_fails = true;
        h.power_on();
        let names: Vec<&str> = h.device.mcp().unwrap().tools().iter().map(|t| t.name()).collect();
        assert!(!names.contains(&"self.screen.set_theme"));
        assert!(!names.contains(&"self.screen.get_info"));
        assert!(names.contains(&"self.lamp.turn_on"));
    }
}
