//! Model-based state test (the sled / proptest-state-machine pattern): random sequences of
//! calls, bursts, waits, busy main tasks, reboots, resets, power cuts, button presses and
//! malformed frames are applied to the twin (bread-compact-wifi) and to a small reference model
//! written from docs/reference/firmware.md (§4.2 drops, §4.5–4.7 replies, §6 batches and hops, §9.1 volume,
//! §10.5 NVS, §11.1 reboot). After every step:
//!
//! * the bytes the twin sent during the step are the model's, in the model's order (1-hop
//!   replies overtake 2-hop ones; replies queued behind a reboot never leave);
//! * every request with a numeric id got at most one reply, ever;
//! * volume is within 0..=100 (10 after a boot from a stored value ≤ 0) and equals the model's,
//!   as do the lamp flag, the stored NVS volume and the boot count;
//! * between `Application::Reboot()` and the next boot nothing runs on the main task.
//!
//! `PROPTEST_CASES=N` runs N sequences, `PROPTEST_RNG_SEED=S` draws them from seed S.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::bounds::{self, expected_valueint, json_number, json_string};
use xiaozhi_sim::device::{Device, Receipt};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::scenario::reply::reply_id;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::trace::{Event, NvsValue};
use xiaozhi_sim::world::WorldSpec;

const BOARD: &str = include_str!("../boards/bread-compact-wifi.yaml");
const LAMP_GPIO: u32 = 18;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// A request as the backend sends it (the id is given when it is applied).
#[derive(Clone, Debug)]
enum Req {
    /// `set_volume` with this JSON number token (in range: 2 hops; out of range: 1-hop error).
    SetVolume(String),
    /// `set_volume` with `"volume":"50"`: `Missing valid argument: volume`.
    SetVolumeAsString,
    LampOn,
    LampOff,
    LampState,
    Status,
    /// `set_theme`: the OLED registers only `dark` (true, nothing persisted); anything else false.
    SetTheme(&'static str),
    Initialize,
    Ping,
    ListTools,
    /// `tools/call` of an unknown tool whose name carries JSON into the unescaped error.
    UnknownTool(&'static str),
    Reboot,
    /// `self.upgrade_firmware` without url: fails after 7 s of main-task time, then `true`.
    Upgrade,
    Malformed(Malformed),
}

/// Frames the device drops without a reply (docs/reference/firmware.md §4.2, quirk 6).
#[derive(Clone, Debug)]
enum Malformed {
    /// `x` followed by anything: not JSON.
    Garbage(Vec<u8>),
    /// A valid request cut before its closing brace.
    Truncated(usize),
    Notification,
    StringId,
    NullParams,
    BadVersion,
}

#[derive(Clone, Debug)]
enum Op {
    /// Requests parsed back to back by the receive task, then the device runs until idle.
    Deliver(Vec<(Req, bool)>),
    /// Requests parsed back to back, then the device runs for this many ms (work may stay queued).
    DeliverThenWait(Vec<(Req, bool)>, u64),
    Wait(u64),
    /// The main task is kept busy for this many ms (requests pile up).
    Busy(u64),
    /// Hardware reset (EN pin).
    Reset,
    CutPower,
    PowerOn,
    Press {
        up: bool,
        long: bool,
    },
}

const INJECTIONS: &[&str] = &[
    "x\"}},\"injected\":{\"a\":\"",
    "a\\b",
    "line\nbreak",
    "quote\"",
    "\u{4e2d}\u{6587}",
];

fn req() -> impl Strategy<Value = Req> {
    let malformed = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Malformed::Garbage),
        (0usize..200).prop_map(Malformed::Truncated),
        Just(Malformed::Notification),
        Just(Malformed::StringId),
        Just(Malformed::NullParams),
        Just(Malformed::BadVersion),
    ];
    prop_oneof![
        5 => json_number(Some((0, 100))).prop_map(Req::SetVolume),
        1 => Just(Req::SetVolumeAsString),
        2 => Just(Req::LampOn),
        1 => Just(Req::LampOff),
        2 => Just(Req::LampState),
        3 => Just(Req::Status),
        1 => proptest::sample::select(&["dark", "light", "Dark", ""][..]).prop_map(Req::SetTheme),
        1 => Just(Req::Initialize),
        1 => Just(Req::Ping),
        1 => Just(Req::ListTools),
        1 => proptest::sample::select(INJECTIONS).prop_map(Req::UnknownTool),
        1 => Just(Req::Reboot),
        1 => Just(Req::Upgrade),
        2 => malformed.prop_map(Req::Malformed),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let burst = || proptest::collection::vec((req(), any::<bool>()), 1..5);
    prop_oneof![
        8 => burst().prop_map(Op::Deliver),
        3 => (burst(), 0u64..2500).prop_map(|(r, ms)| Op::DeliverThenWait(r, ms)),
        2 => (0u64..20_000).prop_map(Op::Wait),
        1 => (1u64..3000).prop_map(Op::Busy),
        1 => Just(Op::Reset),
        1 => Just(Op::CutPower),
        1 => Just(Op::PowerOn),
        2 => (any::<bool>(), any::<bool>()).prop_map(|(up, long)| Op::Press { up, long }),
    ]
}

/// The payload bytes of a request with numeric id `n` (`n.5` when `fractional`).
fn payload(r: &Req, n: i64, fractional: bool) -> Vec<u8> {
    let id = if fractional { format!("{n}.5") } else { n.to_string() };
    let call = |name: &str, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{args}}}}}"#,
            json_string(name)
        )
    };
    let text = match r {
        Req::SetVolume(v) => call("self.audio_speaker.set_volume", &format!(r#"{{"volume":{v}}}"#)),
        Req::SetVolumeAsString => call("self.audio_speaker.set_volume", r#"{"volume":"50"}"#),
        Req::LampOn => call("self.lamp.turn_on", "{}"),
        Req::LampOff => call("self.lamp.turn_off", "{}"),
        Req::LampState => call("self.lamp.get_state", "{}"),
        Req::Status => call("self.get_device_status", "{}"),
        Req::SetTheme(name) => call(
            "self.screen.set_theme",
            &format!(r#"{{"theme":{}}}"#, json_string(name)),
        ),
        Req::Initialize => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2024-11-05","capabilities":{{}}}}}}"#
        ),
        Req::Ping => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        Req::ListTools => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#),
        Req::UnknownTool(tail) => call(&format!("self.nope.{tail}"), "{}"),
        Req::Reboot => call("self.reboot", "{}"),
        Req::Upgrade => call("self.upgrade_firmware", "{}"),
        Req::Malformed(m) => {
            return match m {
                Malformed::Garbage(bytes) => [&b"x"[..], bytes].concat(),
                Malformed::Truncated(cut) => {
                    let full = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).into_bytes();
                    full[..cut % full.len()].to_vec()
                }
                Malformed::Notification => {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"notifications/initialized"}}"#).into_bytes()
                }
                Malformed::StringId => format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#).into_bytes(),
                Malformed::NullParams => {
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":null}}"#).into_bytes()
                }
                Malformed::BadVersion => format!(r#"{{"jsonrpc":"2.0 ","id":{id},"method":"ping"}}"#).into_bytes(),
            };
        }
    };
    text.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// The reference model, from docs/reference/firmware.md
// ---------------------------------------------------------------------------------------------

/// What a reply must be: these exact bytes, or (tools/list) starting with these bytes.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    Exact(Vec<u8>),
    Prefix(Vec<u8>),
}

impl Expect {
    fn matches(&self, got: &[u8]) -> bool {
        match self {
            Expect::Exact(b) => got == b.as_slice(),
            Expect::Prefix(b) => got.starts_with(b),
        }
    }
}

#[derive(Clone, Debug)]
enum CallKind {
    SetVolume(i32),
    LampOn,
    LampOff,
    LampState,
    Status,
    SetTheme(bool),
    Reboot,
    Upgrade,
}

#[derive(Clone, Debug)]
enum Task {
    Send(Expect),
    Call {
        id: i64,
        kind: CallKind,
    },
    /// `self.reboot`'s task: 1000 ms, then `Reboot()`.
    UserReboot,
    /// `Reboot()`: protocol gone, 1000 ms, then `esp_restart()`.
    RebootEnter,
    Restart,
    /// A blocking task: the main task is busy until it resumes with this continuation.
    Block(u64),
    Nothing,
    /// `UpgradeFirmware` of an unreachable URL: 3000 + 1000 + 3000 ms of delays, then returns.
    Upgrade,
}

/// What the receive task makes of a request.
#[derive(Debug, PartialEq)]
enum Classified {
    Dropped,
    OneHop(Expect),
    TwoHop,
}

#[derive(Clone, Debug)]
struct App {
    volume: i32,
    lamp: bool,
    protocol: bool,
}

struct Model {
    now: u64,
    app: Option<App>,
    nvs_volume: Option<i32>,
    boots: u32,
    queue: VecDeque<Task>,
    batch: VecDeque<Task>,
    blocked: Option<(u64, Task)>,
    sent: Vec<Expect>,
}

const RESULT_TRUE: &str = r#"{"content":[{"type":"text","text":"true"}],"isError":false}"#;

fn reply_result(id: i64, result: &str) -> Expect {
    Expect::Exact(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).into_bytes())
}

fn reply_text(id: i64, escaped_text: &str) -> Expect {
    reply_result(
        id,
        &format!(r#"{{"content":[{{"type":"text","text":"{escaped_text}"}}],"isError":false}}"#),
    )
}

fn reply_error(id: i64, message: &str) -> Expect {
    Expect::Exact(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"message":"{message}"}}}}"#).into_bytes())
}

impl Model {
    fn new() -> Model {
        Model {
            now: 0,
            app: None,
            nvs_volume: None,
            boots: 0,
            queue: VecDeque::new(),
            batch: VecDeque::new(),
            blocked: None,
            sent: Vec::new(),
        }
    }

    /// Boot (docs/reference/firmware.md §9.1, §10.5): volume from NVS (absent: 70; ≤ 0: 10, not written
    /// back); lamp off (RAM only); the success sound queued on the main task.
    fn boot(&mut self) {
        self.boots += 1;
        let stored = self.nvs_volume.unwrap_or(70);
        self.app = Some(App {
            volume: if stored <= 0 { 10 } else { stored },
            lamp: false,
            protocol: true,
        });
        self.queue.push_back(Task::Nothing);
    }

    fn drop_everything(&mut self) {
        self.queue.clear();
        self.batch.clear();
        self.blocked = None;
    }

    fn deadline(&self) -> Option<u64> {
        match &self.blocked {
            Some((until, _)) => Some(*until),
            None if !self.batch.is_empty() || !self.queue.is_empty() => Some(self.now),
            None => None,
        }
    }

    fn is_busy(&self) -> bool {
        self.deadline().is_some()
    }

    /// Runs everything due at or before (`inclusive`) / strictly before `limit`.
    fn advance(&mut self, limit: u64, inclusive: bool) {
        let limit = limit.max(self.now);
        while let Some(at) = self.deadline() {
            if at > limit || (!inclusive && at == limit) {
                break;
            }
            self.now = at;
            self.main_loop();
        }
        self.now = limit;
    }

    /// The main loop at `now` (docs/reference/firmware.md §6.2): a blocked task resumes when due; otherwise the
    /// batch runs in order; an empty batch takes the whole shared queue.
    fn main_loop(&mut self) {
        loop {
            if let Some((until, _)) = &self.blocked {
                if *until > self.now {
                    return;
                }
                let (_, task) = self.blocked.take().expect("checked");
                self.run(task);
                continue;
            }
            if let Some(task) = self.batch.pop_front() {
                self.run(task);
                continue;
            }
            if self.queue.is_empty() {
                return;
            }
            std::mem::swap(&mut self.queue, &mut self.batch);
        }
    }

    fn run(&mut self, task: Task) {
        let now = self.now;
        let Some(app) = self.app.as_mut() else { return };
        match task {
            Task::Send(e) => {
                if app.protocol {
                    self.sent.push(e);
                }
            }
            Task::Call { id, kind } => {
                let reply = match kind {
                    CallKind::SetVolume(v) => {
                        app.volume = v;
                        self.nvs_volume = Some(v);
                        reply_result(id, RESULT_TRUE)
                    }
                    CallKind::LampOn | CallKind::LampOff => {
                        app.lamp = matches!(kind, CallKind::LampOn);
                        reply_result(id, RESULT_TRUE)
                    }
                    CallKind::LampState => reply_text(id, &format!(r#"{{\"power\": {}}}"#, app.lamp)),
                    CallKind::Status => reply_text(
                        id,
                        &format!(
                            r#"{{\"audio_speaker\":{{\"volume\":{}}},\"screen\":{{}},\"network\":{{\"type\":\"wifi\",\"ssid\":\"twin-ssid\",\"signal\":\"strong\"}}}}"#,
                            app.volume
                        ),
                    ),
                    CallKind::SetTheme(found) => reply_text(id, &found.to_string()),
                    CallKind::Reboot => {
                        self.queue.push_back(Task::UserReboot);
                        reply_result(id, RESULT_TRUE)
                    }
                    CallKind::Upgrade => {
                        self.queue.push_back(Task::Upgrade);
                        reply_result(id, RESULT_TRUE)
                    }
                };
                self.queue.push_back(Task::Send(reply));
            }
            Task::UserReboot => self.blocked = Some((now + 1000, Task::RebootEnter)),
            Task::RebootEnter => {
                app.protocol = false;
                self.blocked = Some((now + 1000, Task::Restart));
            }
            Task::Restart => {
                self.drop_everything();
                self.boot();
            }
            Task::Block(ms) => self.blocked = Some((now + ms, Task::Nothing)),
            Task::Upgrade => self.blocked = Some((now + 7000, Task::Nothing)),
            Task::Nothing => {}
        }
    }

    /// The receive task (docs/reference/firmware.md §4.2, §4.5): drop, 1-hop reply, or a call for the main task.
    fn receive(&mut self, r: &Req, id: i64) -> Classified {
        self.advance(self.now, false);
        if self.app.is_none() {
            return Classified::Dropped;
        }
        let one_hop = |model: &mut Model, e: Expect| {
            model.queue.push_back(Task::Send(e.clone()));
            Classified::OneHop(e)
        };
        let call = |model: &mut Model, kind: CallKind| {
            model.queue.push_back(Task::Call { id, kind });
            Classified::TwoHop
        };
        match r {
            Req::SetVolume(text) => {
                let v = expected_valueint(text).expect("generated number tokens");
                if v < 0 {
                    one_hop(self, reply_error(id, "Value is below minimum allowed: 0"))
                } else if v > 100 {
                    one_hop(self, reply_error(id, "Value exceeds maximum allowed: 100"))
                } else {
                    call(self, CallKind::SetVolume(v))
                }
            }
            Req::SetVolumeAsString => one_hop(self, reply_error(id, "Missing valid argument: volume")),
            Req::LampOn => call(self, CallKind::LampOn),
            Req::LampOff => call(self, CallKind::LampOff),
            Req::LampState => call(self, CallKind::LampState),
            Req::Status => call(self, CallKind::Status),
            Req::SetTheme(name) => call(self, CallKind::SetTheme(*name == "dark")),
            Req::Reboot => call(self, CallKind::Reboot),
            Req::Upgrade => call(self, CallKind::Upgrade),
            Req::Initialize => one_hop(
                self,
                reply_result(
                    id,
                    r#"{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"bread-compact-wifi","version":"2.4.2"}}"#,
                ),
            ),
            Req::Ping => one_hop(self, reply_error(id, "Method not implemented: ping")),
            Req::ListTools => one_hop(
                self,
                Expect::Prefix(
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"self.get_device_status","#)
                        .into_bytes(),
                ),
            ),
            Req::UnknownTool(tail) => one_hop(self, reply_error(id, &format!("Unknown tool: self.nope.{tail}"))),
            Req::Malformed(_) => Classified::Dropped,
        }
    }

    fn run_until_idle(&mut self) {
        self.advance(self.now, true);
        while let Some(t) = self.deadline() {
            self.advance(t, true);
        }
    }

    fn reset(&mut self) {
        self.advance(self.now, true);
        if self.app.is_some() {
            self.drop_everything();
            self.boot();
        }
    }

    fn cut_power(&mut self) {
        self.advance(self.now, true);
        self.drop_everything();
        self.app = None;
    }

    fn power_on(&mut self) {
        self.advance(self.now, true);
        if self.app.is_none() {
            self.boot();
        }
    }

    /// VOL± (docs/reference/firmware.md §7.2): click ±10 clamped to 0..=100, long press 100 / 0; persisted.
    fn press(&mut self, up: bool, long: bool) {
        self.advance(self.now, true);
        if let Some(app) = self.app.as_mut() {
            let target = match (long, up) {
                (true, true) => 100,
                (true, false) => 0,
                (false, true) => (app.volume + 10).clamp(0, 100),
                (false, false) => (app.volume - 10).clamp(0, 100),
            };
            app.volume = target;
            self.nvs_volume = Some(target);
        }
    }

    fn busy(&mut self, ms: u64) {
        self.advance(self.now, true);
        if self.app.is_some() {
            self.queue.push_back(Task::Block(ms));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running a sequence on both
// ---------------------------------------------------------------------------------------------

struct Run {
    harness: Harness,
    model: Model,
    next_id: i64,
    replied: BTreeSet<i64>,
    /// Between `RebootEntered` and the next boot (or power cut).
    rebooting: bool,
}

impl Run {
    fn new() -> Run {
        let spec = Arc::new(BoardSpec::from_yaml("bread-compact-wifi.yaml", BOARD).expect("board"));
        let mut harness = Harness::new(Device::new(spec, WorldSpec::conformance(), 7));
        harness.power_on();
        let mut model = Model::new();
        model.power_on();
        Run {
            harness,
            model,
            next_id: 1,
            replied: BTreeSet::new(),
            rebooting: false,
        }
    }

    fn now(&self) -> SimTime {
        self.harness.now()
    }

    fn deliver(&mut self, reqs: &[(Req, bool)]) -> Result<(), String> {
        for (r, fractional) in reqs {
            let id = self.next_id;
            self.next_id += 1;
            let bytes = payload(r, id, *fractional);
            let receipt = self.harness.deliver(&bytes);
            let expected = self.model.receive(r, id);
            let agrees = match (&expected, &receipt) {
                (Classified::Dropped, Receipt::NotRunning | Receipt::Dropped { .. }) => true,
                (Classified::OneHop(_), Receipt::Answered { id: got, .. }) => i64::from(*got) == id,
                (Classified::TwoHop, Receipt::Scheduled { id: got, .. }) => i64::from(*got) == id,
                _ => false,
            };
            if !agrees {
                return Err(format!(
                    "request {:?}: the model expected {expected:?}, the receive task gave {receipt:?}",
                    String::from_utf8_lossy(&bytes)
                ));
            }
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Deliver(reqs) => {
                self.deliver(reqs)?;
                self.harness.run_until_idle().map_err(|e| e.to_string())?;
                self.model.run_until_idle();
            }
            Op::DeliverThenWait(reqs, ms) => {
                self.deliver(reqs)?;
                self.harness.sleep(SimDuration::from_millis(*ms));
                let t = self.model.now + ms;
                self.model.advance(t, true);
            }
            Op::Wait(ms) => {
                self.harness.sleep(SimDuration::from_millis(*ms));
                let t = self.model.now + ms;
                self.model.advance(t, true);
            }
            Op::Busy(ms) => {
                let now = self.now();
                self.harness.device.busy(now, SimDuration::from_millis(*ms));
                self.model.busy(*ms);
            }
            Op::Reset => {
                let now = self.now();
                self.harness.device.reset(now);
                self.model.reset();
            }
            Op::CutPower => {
                let now = self.now();
                self.harness.device.cut_power(now);
                self.model.cut_power();
            }
            Op::PowerOn => {
                self.harness.power_on();
                self.model.power_on();
            }
            Op::Press { up, long } => {
                let now = self.now();
                self.harness.device.press_volume(now, if *up { 10 } else { -10 }, *long);
                self.model.press(*up, *long);
            }
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<(), String> {
        if self.now().as_micros() != self.model.now * 1000 {
            return Err(format!(
                "virtual time: twin {} ms, model {} ms",
                self.now().as_millis(),
                self.model.now
            ));
        }
        // Replies: the model's bytes in the model's order.
        let sent: Vec<Vec<u8>> = self.harness.take_mcp_payloads();
        let expected = std::mem::take(&mut self.model.sent);
        let shown: Vec<String> = sent.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
        if sent.len() != expected.len() || !expected.iter().zip(&sent).all(|(e, s)| e.matches(s)) {
            return Err(format!("sent {shown:#?}\nthe model expected {expected:#?}"));
        }
        for s in &sent {
            let id = reply_id(s).ok_or_else(|| format!("a reply without a numeric id: {shown:?}"))?;
            if !self.replied.insert(id) {
                return Err(format!("a second reply for id {id}: {shown:?}"));
            }
        }
        // Nothing runs between Reboot() and the next boot.
        for e in self.harness.device.drain_events() {
            match e.kind {
                Event::RebootEntered => self.rebooting = true,
                Event::Booted { .. } | Event::PowerCut => self.rebooting = false,
                Event::BatchStarted { .. } | Event::ReplySent { .. } if self.rebooting => {
                    return Err(format!(
                        "after Reboot() was entered the main task still ran: {:?}",
                        e.kind
                    ));
                }
                _ => {}
            }
        }
        // State.
        let device = &self.harness.device;
        if device.boots() != self.model.boots {
            return Err(format!("boots: twin {}, model {}", device.boots(), self.model.boots));
        }
        let nvs = match device.nvs().get("audio", "output_volume") {
            None => None,
            Some(NvsValue::I32(v)) => Some(*v),
            Some(other) => return Err(format!("NVS audio/output_volume holds {other:?}")),
        };
        if nvs != self.model.nvs_volume {
            return Err(format!("NVS volume: twin {nvs:?}, model {:?}", self.model.nvs_volume));
        }
        let snap = device.snapshot();
        match (snap.volume, &self.model.app) {
            (None, None) => {}
            (Some(volume), Some(m)) => {
                if !(0..=100).contains(&volume) {
                    return Err(format!("volume {volume} is outside 0..=100"));
                }
                let lamp = snap.gpio.get(&LAMP_GPIO).copied();
                if volume != m.volume || lamp != Some(m.lamp) {
                    return Err(format!(
                        "state: twin volume {volume} lamp {lamp:?}, model volume {} lamp {}",
                        m.volume, m.lamp
                    ));
                }
            }
            (twin, _) => {
                return Err(format!(
                    "running: twin {}, model {}",
                    twin.is_some(),
                    self.model.app.is_some()
                ));
            }
        }
        if device.is_busy() != self.model.is_busy() {
            return Err(format!(
                "main task busy: twin {} ({:?}), model {}",
                device.is_busy(),
                device.pending_tasks(),
                self.model.is_busy()
            ));
        }
        Ok(())
    }
}

/// Runs `ops` on a fresh twin and model; the first disagreement, with the step that caused it.
fn check_sequence(ops: &[Op]) -> Result<(), String> {
    let mut run = Run::new();
    run.compare().map_err(|e| format!("after boot: {e}"))?;
    for (i, op) in ops.iter().enumerate() {
        run.apply(op).map_err(|e| format!("step {i} {op:?}: {e}"))?;
    }
    // Let everything pending finish and compare once more.
    run.harness.run_until_idle().map_err(|e| e.to_string())?;
    run.model.run_until_idle();
    run.compare().map_err(|e| format!("after the last step: {e}"))
}

#[test]
fn the_twin_follows_the_reference_model() {
    let cases = env_u64("PROPTEST_CASES").unwrap_or(1000) as u32;
    let seed = env_u64("PROPTEST_RNG_SEED").unwrap_or(6);
    let mut runner = bounds::test_runner(cases, &bounds::seed_bytes(seed));
    let strategy = proptest::collection::vec(op(), 1..40);
    if let Err(e) = runner.run(&strategy, |ops| check_sequence(&ops).map_err(TestCaseError::fail)) {
        panic!("seed {seed}: {e}");
    }
}

#[test]
fn the_model_itself_reorders_a_burst_as_the_firmware_does() {
    // docs/reference/firmware.md §12 reordering vector: lamp.get_state (13), initialize (16), ping (27) parsed
    // before the main task runs → transmitted 16, 27, 13. Guards the model against being wrong
    // in the same way as the twin.
    let mut m = Model::new();
    m.power_on();
    m.run_until_idle();
    assert_eq!(m.receive(&Req::LampState, 13), Classified::TwoHop);
    assert!(matches!(m.receive(&Req::Initialize, 16), Classified::OneHop(_)));
    assert!(matches!(m.receive(&Req::Ping, 27), Classified::OneHop(_)));
    m.run_until_idle();
    let ids: Vec<i64> = m
        .sent
        .iter()
        .map(|e| match e {
            Expect::Exact(b) | Expect::Prefix(b) => reply_id(b).unwrap(),
        })
        .collect();
    assert_eq!(ids, [16, 27, 13]);
}

#[test]
fn a_sequence_with_a_reboot_pins_the_model_timing() {
    // The reboot's `true` never leaves; the restart comes 2 s after the call; a status call
    // queued behind it dies with it; NVS volume survives and the lamp does not.
    let ops = vec![
        Op::Deliver(vec![(Req::SetVolume("0".into()), false), (Req::LampOn, false)]),
        Op::DeliverThenWait(vec![(Req::Reboot, false)], 500),
        Op::Deliver(vec![(Req::Status, false)]),
        Op::Deliver(vec![(Req::Status, true), (Req::LampState, false)]),
    ];
    check_sequence(&ops).unwrap();
    let mut run = Run::new();
    for op in &ops {
        run.apply(op).unwrap();
    }
    assert_eq!(run.harness.device.boots(), 2);
    assert_eq!(
        run.harness.device.snapshot().volume.unwrap(),
        10,
        "stored 0 comes back as 10"
    );
    assert!(run.replied.contains(&1) && !run.replied.contains(&3) && !run.replied.contains(&4));
}
