//! One simulated board: boot, the receive task, the main task, timers, reboot and power
//! (`main/application.cc`, `main/boards/common/*`; docs/reference/firmware.md §4–§6, §9–§11).
//!
//! The device is **sans-IO** (quinn-proto style): it is handed `now` and what a transport
//! delivers, through one entry ([`Device::handle`] with an [`Input`]: MCP payloads, WebSocket
//! and MQTT frames, datagrams, connection events), and user actions, and hands back outbound
//! frames ([`Device::poll_output`]), trace events ([`Device::drain_events`]) and its next deadline
//! ([`Device::poll_timeout`]). It never reads a clock and never sleeps; whoever drives it owns
//! time. [`Device`] is the only public face of the folder; every `impl Device` is here, but for
//! what the user does and hears (buttons, wake word, speech, the listener's measurements: `user.rs`).
//!
//! Inside, files point one way (no file imports one that imports it back):
//!
//! * leaves — `platform` (what survives a reboot: identity, NVS, clock, trace, outputs),
//!   `output` (what leaves the device, and the receipt of a payload), `incoming` (what an
//!   incoming text was to the device), `io` (narrow views of the platform for the subsystems),
//!   `url`, `state`, `listening`, `main_loop`, `status`, `catalogue`, `otto`, `button` (the
//!   button component's polling);
//! * subsystems — `protocol/` (the firmware's `Protocol` base in `base.rs`, the WebSocket
//!   transport in `websocket.rs`, the dispatch per transport in `mod.rs`), `audio` (output power and codec), `playback` (received speech), `mic` (the
//!   microphone), `peripherals` + `builtin` (the board's objects and their tool callbacks),
//!   `upgrade` (the firmware upgrade flow), `task` (what the main task runs);
//! * the hub — `application` (what `Application` holds, with its voice interaction in
//!   `application/conversation.rs`, its receive tasks in `application/inbound.rs`; the buttons'
//!   polling and callbacks are `button.rs`), called from here and from `user.rs`.

mod application;
mod audio;
mod builtin;
mod button;
mod catalogue;
mod heard;
mod incoming;
mod io;
mod listening;
mod main_loop;
mod mic;
mod otto;
mod output;
mod peripherals;
mod platform;
mod playback;
mod protocol;
mod status;
mod task;
mod upgrade;
pub mod url;
mod user;

use std::sync::Arc;

use crate::audio::source::Source;
use crate::audio::{AudioChange, AudioLog, ChainFault};
use crate::board::BoardSpec;
use crate::cjson::{Parser, Terminator};
use crate::fault::Fault;
use crate::hw::nvs::{EspErr, Nvs};
use crate::mcp::McpServer;
use crate::time::{SimDuration, SimTime, earliest};
use crate::trace::{BootReason, Event, TraceEvent};
use crate::world::WorldSpec;
use application::{Application, inbound};
use platform::{Platform, Power};
use task::TaskEnd;

pub use crate::firmware::state::DeviceState;
pub use button::NoSuchButton;
pub use heard::AsPlayed;
pub use incoming::{Incoming, Input, MessageType, Request, TtsState};
pub use io::HttpUpload;
pub use listening::{AbortReason, ListeningMode};
pub use mic::Utterance;
pub use platform::{BadMac, Board, DeviceSnapshot, Faults, Fired, Output, Receipt, Sent};

/// A simulated board.
pub struct Device {
    platform: Platform,
    app: Option<Box<Application>>,
    parser: Parser,
    terminator: Terminator,
    /// Speech windows measured as they play (`measure_as_played`), else `None`.
    heard: Option<Box<heard::HeardMeters>>,
}

impl Device {
    /// A freshly flashed board (empty NVS), powered off; identity (MAC, build hash, UUID) from `seed`.
    pub fn new(board: impl Into<Board>, world: WorldSpec, seed: u64) -> Self {
        Device {
            platform: Platform::new(board.into(), world, seed),
            app: None,
            parser: Parser::new(),
            terminator: Terminator::Length,
            heard: None,
        }
    }

    /// Turns event recording on or off (off for throughput runs).
    pub fn set_trace(&mut self, on: bool) {
        self.platform.trace = on;
    }

    /// Received speech is not decoded (a fleet's `--decode none`): each packet plays for the
    /// length its TOC byte gives, as silence, so queues, drops, drain timing and power-down are
    /// kept but levels are not measured.
    pub fn set_durations_only(&mut self, on: bool) {
        self.platform.durations_only = on;
    }

    /// Whether received speech is timed from TOC bytes only ([`Device::set_durations_only`]).
    pub fn durations_only(&self) -> bool {
        self.platform.durations_only
    }

    /// Does this device's Opus work in `pool` (shared by many devices; every output is the one
    /// the device's own codec would give: `voice::memo`). Takes effect for the next codec made.
    pub fn share_codecs(&mut self, pool: Arc<dyn crate::voice::memo::CodecPool>) {
        self.platform.codecs = Some(pool);
    }

    /// Which cJSON entry point inbound payloads go through: `Length` for WebSocket frames,
    /// `Nul` for C strings (MQTT, `ParseMessage(std::string)`, the conformance recorder).
    pub fn set_terminator(&mut self, terminator: Terminator) {
        self.terminator = terminator;
    }

    /// Construction faults; a change takes effect at the next boot.
    pub fn faults_mut(&mut self) -> &mut Faults {
        &mut self.platform.faults
    }

    /// The NVS partition.
    pub fn nvs(&self) -> &Nvs {
        &self.platform.nvs
    }

    /// The NVS partition, e.g. to pre-seed settings or make writes fail.
    pub fn nvs_mut(&mut self) -> &mut Nvs {
        &mut self.platform.nvs
    }

    /// The board file.
    pub fn spec(&self) -> &BoardSpec {
        &self.platform.spec
    }

    /// The world the board lives in.
    pub fn world(&self) -> &WorldSpec {
        &self.platform.world
    }

    /// The world, mutable; a change takes effect when the firmware next reads that part.
    pub fn world_mut(&mut self) -> &mut WorldSpec {
        &mut self.platform.world
    }

    /// The device's clock.
    pub fn now(&self) -> SimTime {
        self.platform.now
    }

    /// The Wi-Fi STA MAC (`Device-Id`).
    pub fn mac(&self) -> &str {
        &self.platform.mac
    }

    /// Sets the Wi-Fi STA MAC (`Device-Id`), e.g. to impersonate a known board.
    pub fn set_mac(&mut self, mac: &str) -> Result<(), BadMac> {
        let parts: Vec<&str> = mac.split(':').collect();
        if parts.len() != 6
            || !parts
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(BadMac(mac.to_string()));
        }
        self.platform.mac = mac.to_ascii_lowercase();
        Ok(())
    }

    /// Boots since the simulation started.
    pub fn boots(&self) -> u32 {
        self.platform.boots
    }

    /// When the device last finished booting.
    pub fn last_boot_at(&self) -> Option<SimTime> {
        self.platform.last_boot_at
    }

    /// The software state a readback would see (the twin's one snapshot type, for evidence).
    pub fn snapshot(&self) -> DeviceSnapshot {
        let app = self.app.as_deref();
        DeviceSnapshot {
            boots: self.boots(),
            running: self.is_running(),
            state: app.map(|a| a.state),
            volume: app.map(|a| a.volume),
            brightness: app.and_then(|a| a.board.backlight.as_ref().map(|b| b.brightness())),
            backlight_target: app.and_then(|a| a.board.backlight.as_ref().map(|b| b.target())),
            theme: app.and_then(|a| a.board.display.current_theme().map(str::to_string)),
            gpio: app.map(|a| a.board.gpio_flags.clone()).unwrap_or_default(),
            output_enabled: app.is_some_and(|a| a.audio.output_enabled),
            codec_open: app.is_some_and(|a| a.audio.codec_open),
            pa_on: app.is_some_and(|a| a.audio.pa_on),
            decoder_allocated: app.is_some_and(|a| a.playback.has_decoder()),
            encoder_allocated: app.is_some_and(|a| a.mic.has_encoder()),
            mic_packets_sent: app.map_or(0, |a| a.mic.sent()),
            mic_packets_dropped: app.map_or(0, |a| a.mic.dropped()),
        }
    }

    /// The device state while the board runs (cheaper than [`Device::snapshot`]).
    pub fn state(&self) -> Option<DeviceState> {
        self.app.as_deref().map(|a| a.state)
    }

    /// The MCP server (this boot's tool registry), while the board runs.
    pub fn mcp(&self) -> Option<&McpServer> {
        self.app.as_deref().map(|r| &*r.mcp)
    }

    /// `Board::GetSystemInfoJson` as the device would build it now (the OTA request body).
    pub fn system_info_json(&self) -> Option<Vec<u8>> {
        self.app.as_deref().map(|app| app.system_info(&self.platform))
    }

    /// Booted and running the application.
    pub fn is_running(&self) -> bool {
        self.platform.power == Power::On && self.app.is_some()
    }

    /// True while the main task has queued or blocked work.
    pub fn is_busy(&self) -> bool {
        matches!(self.platform.power, Power::Booting { .. }) || self.app.as_deref().is_some_and(|r| !r.main.is_idle())
    }

    /// Everything recorded since the last call.
    pub fn drain_events(&mut self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.platform.events)
    }

    /// The next output, oldest first (taking it out of the queue); `None` when there is none.
    ///
    /// Its answer can change after every call that is handed a `now` (`handle`, `run_until`,
    /// `run_before`, `power_on`, `cut_power`, `reset`, `toggle_chat`, `button`,
    /// `press_volume`, `wake_word`, `type_text`, `say`, `play`, `busy`, `apply_ota_answer`,
    /// `set_fault`, `set_chain_fault`: each runs the work due by its `now` first), and after each
    /// `poll_output` itself.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.platform.outputs.pop_front()
    }

    /// The earliest time at which the device has something to do (a boot finishing, main-task
    /// work, an esp_timer), never earlier than [`Device::now`]; `None` when nothing is scheduled.
    ///
    /// Its answer can change after every call that is handed a `now` (the list at
    /// [`Device::poll_output`]).
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let now = self.platform.now;
        let next = match self.platform.power {
            Power::Off => None,
            Power::Booting { ready_at, .. } => Some(ready_at),
            Power::On => self
                .app
                .as_deref()
                .and_then(|app| earliest(app.main.deadline(now), app.timer_deadline())),
        };
        next.map(|t| t.max(now))
    }

    /// Runs everything due at or before `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: SimTime) {
        self.advance(t, true);
    }

    /// Runs everything due strictly before `t` (work queued at `t` waits), then sets the clock to `t`.
    pub fn run_before(&mut self, t: SimTime) {
        self.advance(t, false);
    }

    fn advance(&mut self, limit: SimTime, inclusive: bool) {
        let limit = limit.max(self.platform.now);
        while let Some(at) = self.poll_timeout() {
            if at > limit || (!inclusive && at == limit) {
                break;
            }
            self.platform.now = at;
            self.step();
        }
        self.platform.now = limit;
        if let Some(h) = self.heard.as_deref_mut().filter(|h| h.due(limit)) {
            let p = &mut self.platform;
            h.step(
                &p.speech,
                &mut p.audio,
                &audio::chain_setup(&p.spec.audio, &p.world.room),
                limit,
            );
        }
    }

    /// One instant: finish a boot, fire due timers, then let the main task run.
    fn step(&mut self) {
        let now = self.platform.now;
        if let Power::Booting { ready_at, reason } = self.platform.power {
            if ready_at <= now {
                self.boot(reason);
            }
            return;
        }
        if let Some(app) = self.app.as_deref_mut() {
            app.fire_timers(&mut self.platform);
        }
        self.run_main_loop();
    }

    fn run_main_loop(&mut self) {
        loop {
            let Some(app) = self.app.as_deref_mut() else { return };
            let now = self.platform.now;
            match app.main.next(now) {
                main_loop::Next::Idle | main_loop::Next::BusyUntil(_) => return,
                main_loop::Next::BatchTaken(tasks) => self.platform.emit(|| Event::BatchStarted { tasks }),
                main_loop::Next::Event(bit) => {
                    let end = app.run_event(&mut self.platform, bit);
                    if self.task_ended(now, end) {
                        return;
                    }
                }
                main_loop::Next::Run(task) => {
                    let end = app.run_task(&mut self.platform, task);
                    if self.task_ended(now, end) {
                        return;
                    }
                }
            }
        }
    }

    /// What a task (or an event handler) ended with; true when the device restarted.
    fn task_ended(&mut self, now: SimTime, end: TaskEnd) -> bool {
        match end {
            TaskEnd::Done => false,
            TaskEnd::Block(d, continuation) => {
                if let Some(app) = self.app.as_deref_mut() {
                    app.main.block(now + d, continuation);
                }
                self.platform.emit(|| Event::TaskDelayed { ms: d.as_millis() });
                false
            }
            TaskEnd::Restart(reason) => {
                self.restart(reason);
                true
            }
        }
    }

    /// Power on (no-op when already powered).
    pub fn power_on(&mut self, now: SimTime) {
        self.run_until(now);
        if self.platform.power != Power::Off {
            return;
        }
        self.start_boot(BootReason::PowerOn);
    }

    /// Pulls the plug: volatile state and every queued task are gone; NVS stays.
    pub fn cut_power(&mut self, now: SimTime) {
        self.run_until(now);
        if self.platform.power == Power::Off {
            return;
        }
        self.platform.emit(|| Event::PowerCut);
        self.drop_everything("power cut");
        self.platform.power = Power::Off;
    }

    fn start_boot(&mut self, reason: BootReason) {
        let boot_time = self.platform.world.boot_time;
        if boot_time.is_zero() {
            self.boot(reason);
        } else {
            self.platform.power = Power::Booting {
                ready_at: self.platform.now + boot_time,
                reason,
            };
        }
    }

    fn boot(&mut self, reason: BootReason) {
        self.platform.boots += 1;
        let n = self.platform.boots;
        self.platform.emit(|| Event::Booted { n, reason });
        self.platform.power = Power::On;
        self.platform.last_boot_at = Some(self.platform.now);
        self.app = Some(Box::new(Application::boot(&mut self.platform)));
        if self.app.as_ref().is_some_and(|a| a.abort_pending) {
            // An abort in the activation task happens at every boot: a boot loop, which the
            // twin ends by leaving the board off (it would spin in zero virtual time).
            self.platform.emit(|| Event::BootLoop);
            self.drop_everything("boot loop");
            self.platform.power = Power::Off;
        }
    }

    fn drop_everything(&mut self, why: &'static str) {
        if let Some(mut app) = self.app.take() {
            // A reset of any kind ends TCP without a close frame (the peer sees the socket go),
            // MQTT without DISCONNECT.
            if let Some(p) = app.protocol.as_mut() {
                p.reset(&mut self.platform, why);
            }
            let now = self.platform.now;
            app.playback.stop(&mut self.platform.playback_io());
            app.audio.shut_down(&mut self.platform.audio, now);
            for task in app.main.drain() {
                task.record_drop(&mut self.platform, why);
            }
        }
    }

    /// `esp_restart()` (or a panic): everything queued dies, then the board boots again.
    fn restart(&mut self, reason: BootReason) {
        self.platform.emit(|| Event::Restarted);
        let why = match reason {
            BootReason::Panic => "panic",
            _ => "esp_restart",
        };
        self.drop_everything(why);
        self.start_boot(reason);
    }

    /// Everything a driver delivers, one entry: runs what is due before `now`, then hands
    /// `input` to the receive task or the protocol it belongs to. Work it schedules waits for
    /// the main task (see [`Device::run_until`]). What the device read of a text frame, an MQTT
    /// message or an MCP payload; `Incoming::default()` (not read) for the rest and whenever
    /// no application runs (audio then counts as lost for want of a channel).
    pub fn handle(&mut self, now: SimTime, input: Input<'_>) -> Incoming {
        self.run_before(now);
        let Some(app) = self.app.as_deref_mut() else {
            return self.not_running(input);
        };
        let p = &mut self.platform;
        // `None`: a delivery that reads no message (and needs no after-care).
        let handled = match input {
            Input::WsOpened { ok } => {
                app.ws_open_result(p, ok);
                None
            }
            Input::WsClosed => {
                app.ws_closed(p);
                None
            }
            Input::MqttConnack { accepted } => {
                app.mqtt_link(p, Some(accepted));
                None
            }
            Input::MqttClosed => {
                app.mqtt_link(p, None);
                None
            }
            Input::Udp(datagram) => {
                inbound::udp_datagram(app, p, datagram);
                None
            }
            Input::Audio(packet) => {
                app.incoming_audio(p, packet, false);
                None
            }
            Input::WsBinary(frame) => inbound::ws_binary(app, p, frame).err().map(|announced| {
                let reason = format!(
                    "std::bad_alloc: a binary frame's header announced {announced} payload bytes (more than the heap)"
                );
                (Incoming::default(), Err(reason))
            }),
            Input::WsText(frame) => Some(crashed(inbound::ws_text(app, p, &mut self.parser, frame))),
            Input::MqttMessage(payload) => Some(crashed(inbound::mqtt_message(app, p, &mut self.parser, payload))),
            Input::Json(frame) => Some((inbound::json(app, p, &mut self.parser, frame), Ok(()))),
            Input::Mcp(payload) => {
                let receipt = app.receive_mcp(p, &mut self.parser, self.terminator, payload);
                let read = Incoming {
                    message: MessageType::Mcp,
                    request: None,
                    receipt: Some(receipt),
                };
                Some((read, Ok(())))
            }
        };
        match handled {
            Some(handled) => self.after_receive(handled),
            None => Incoming::default(),
        }
    }

    /// `input` found no application (the board is off or booting): an MCP payload is dropped
    /// unread, audio is lost for want of a channel, the rest is not read.
    fn not_running(&mut self, input: Input<'_>) -> Incoming {
        if let Input::Mcp(_) = input {
            self.platform.emit(|| Event::MessageDropped {
                reason: crate::mcp::DropReason::NotRunning,
            });
            return Incoming {
                receipt: Some(Receipt::NotRunning),
                ..Incoming::default()
            };
        }
        if input.is_audio() {
            self.platform.speech.no_channel();
        }
        Incoming::default()
    }

    /// A `tool_call` thread (1.7.5–1.9.1) or a receive path that aborted takes the device down.
    pub(crate) fn after_thread(&mut self) {
        if let Some(app) = self.app.as_deref_mut()
            && std::mem::take(&mut app.abort_pending)
        {
            self.restart(BootReason::Panic);
        }
    }

    /// After a receive task handled a message: the work it scheduled, or the firmware's crash
    /// (a panic, and the device boots again).
    fn after_receive(&mut self, (read, handled): (Incoming, Result<(), String>)) -> Incoming {
        match handled {
            Ok(()) => self.after_thread(),
            Err(reason) => {
                self.platform.emit(|| Event::Panicked { reason });
                self.restart(BootReason::Panic);
            }
        }
        read
    }

    /// Everything scheduled but not yet run, described (for evidence).
    pub fn pending_tasks(&self) -> Vec<String> {
        self.app
            .as_deref()
            .map(|r| {
                r.main
                    .pending()
                    .map(|p| match p {
                        main_loop::Pending::Task(t) => t.describe(),
                        main_loop::Pending::Event(e) => e.describe().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Plays a sound through the audio path as server audio would: output on if needed, queued
    /// behind what plays. When it starts and ends, or `None` when the device is not running.
    pub fn play(&mut self, now: SimTime, source: Source, duration: SimDuration) -> Option<(SimTime, SimTime)> {
        self.run_until(now);
        let app = self.app.as_deref_mut()?;
        let volume = app.volume;
        Some(app.audio.play(&mut self.platform.audio, now, source, duration, volume))
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
        self.platform.audio.record(now, AudioChange::Fault(fault, on));
    }

    /// Everything that happened to the audio path (evidence; survives reboots).
    pub fn audio_log(&self) -> &AudioLog {
        &self.platform.audio
    }

    /// The newest (8) request bodies sent to a host that answered: the snapshot's POSTs.
    pub fn http_uploads(&self) -> impl Iterator<Item = &HttpUpload> {
        self.platform.uploads.iter()
    }

    /// Every call the display was given (survives reboots; `screen_log().at(t)`: the screen at t).
    pub fn screen_log(&self) -> &crate::hw::screen::ScreenLog {
        &self.platform.screen
    }

    /// The OTA server's answer, as `Ota::CheckVersion` takes it (`ota.cc:116-185`; the driver
    /// made the request): parsed as a C string, its `mqtt` and `websocket` blocks written to NVS
    /// (`provisioning::ota_blocks`, docs/reference/mqtt.md §3). A write NVS refuses aborts the device
    /// (`ESP_ERROR_CHECK`) and it restarts. The protocol the answer leads to, or `None` when the
    /// device is not running, the answer is not JSON, or the device aborted.
    pub fn apply_ota_answer(&mut self, now: SimTime, body: &[u8]) -> Option<crate::provisioning::Choice> {
        self.run_until(now);
        if !self.is_running() {
            return None;
        }
        let parsed = match self
            .parser
            .parse(body, Terminator::Nul, crate::cjson::Limits::default())
        {
            Ok(doc) => Some(crate::provisioning::ota_blocks(doc.root(), &self.platform.nvs)),
            Err(_) => None,
        };
        let Some((has_mqtt, has_websocket, writes)) = parsed else {
            self.platform
                .log(crate::trace::LogLevel::Error, "Ota", || "Failed to parse JSON response");
            return None;
        };
        for (namespace, key, value) in writes {
            if let Err(e) = self.platform.nvs_set(namespace, &key, value) {
                self.platform.emit(|| Event::Panicked {
                    reason: format!("ESP_ERROR_CHECK failed: {e} (Settings, {namespace}/{key})"),
                });
                self.restart(BootReason::Panic);
                return None;
            }
        }
        Some(crate::provisioning::Choice::of(has_mqtt, has_websocket))
    }

    /// Hardware reset (EN pin): `esp_restart` now; queued work is lost, NVS kept.
    pub fn reset(&mut self, now: SimTime) {
        self.run_until(now);
        if self.platform.power == Power::On {
            self.restart(BootReason::EspRestart);
        }
    }

    /// Keeps the main task busy for `d` from `now` (a slow callback): what arrives meanwhile waits.
    pub fn busy(&mut self, now: SimTime, d: SimDuration) {
        self.schedule(now, task::Task::Busy(d));
    }
}

/// The voice path, seen from outside: frames from a backend, what the user does and says.
impl Device {
    /// Runs to `now`, then queues `task` for the main task (nothing when the board is off).
    fn schedule(&mut self, now: SimTime, task: task::Task) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.main.schedule(task);
        }
    }
}

/// A receive task's result, its crash (a server hello the firmware dereferences without a
/// check) as the panic's reason.
fn crashed((read, handled): (Incoming, Result<(), protocol::websocket::HelloCrash>)) -> (Incoming, Result<(), String>) {
    (read, handled.map_err(|crash| crash.to_string()))
}

#[cfg(test)]
mod tests;
