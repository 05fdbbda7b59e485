//! Runs a [`ScenarioSpec`] on a simulated board in virtual time and builds the report: one
//! acceptance record per tool call, one check per expectation, the full device trace, and the
//! audio signals of every measurement when asked. Same scenario + seed ⇒ same report, byte for
//! byte.

use crate::firmware::CallPath;
use std::sync::Arc;

use crate::audio::measure::{Measurement, perceived_change};
use crate::audio::render::Signals;
use crate::audio::source::Source;
use crate::board::{BoardSpec, ButtonAction};
use crate::device::{Board, Device, DeviceSnapshot, Output, Receipt};
use crate::harness::{Harness, PROBE_GUARD};
use crate::mcp::{ToolAction, wire};
use crate::scenario::discovery::Discovery;
use crate::scenario::expect::{describe_snapshot, level, opt};
use crate::scenario::record::{Check, Record, ScenarioReport, StepReport, Trace};
use crate::scenario::reply::{call_request, coerced, is_valid_json, lossy, reply_error, reply_id, reply_text};
use crate::scenario::{
    BurstStep, CallStep, EventName, Expect, FaultStep, InitializeStep, ListStep, ListenStep, PlayStep, PressStep,
    ReadbackStep, ScenarioSpec, SendStep, Step,
};
use crate::time::Duration;
use crate::time::{SimDuration, SimTime};
use crate::trace::{Event, TraceEvent};
/// What the runner needs from the outside world (file access lives in the binary).
pub trait Resources {
    /// Loads a WAV file named in a `play` step as mono int16 PCM: `(rate, samples)`.
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String>;
}

/// No files: `play: {wav: …}` fails with a clear message.
pub struct NoFiles;

impl Resources for NoFiles {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        Err(format!("{path}: WAV files are not available here"))
    }
}

/// Run options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Keep the sample streams of every measurement (for WAV evidence).
    pub keep_signals: bool,
}

/// Signals of one measurement, labelled.
pub struct Evidence {
    /// What was measured, e.g. `step5-before`, `step7-play` (used in the WAV file names).
    pub label: String,
    /// Sample rate of both streams, Hz (the board's output rate).
    pub rate: u32,
    /// The I2S words and the sound pressure at the listener.
    pub signals: Signals,
}

/// The reference probe of the acoustic checks: 1 kHz at −6 dBFS for 1 s (ACOUSTICS.md §5).
fn reference_probe() -> (Source, SimDuration) {
    (
        Source::probe(1000.0, -6.0),
        SimDuration::from_millis(1000) + PROBE_GUARD,
    )
}

pub(super) struct StepOutcome {
    pub(super) sent: Vec<Vec<u8>>,
    pub(super) started: SimTime,
    pub(super) replies: Vec<(Vec<u8>, SimTime)>,
    /// The step's trace events, in the chunks they were drained in (lengths in `chunks`).
    pub(super) events: Vec<TraceEvent>,
    pub(super) chunks: Vec<usize>,
    pub(super) receipts: Vec<Receipt>,
    pub(super) measurement: Option<Measurement>,
    pub(super) previous: Option<Measurement>,
    pub(super) readback: Option<serde_json::Value>,
    pub(super) listed: Option<(Vec<String>, usize, Option<String>)>,
    pub(super) id: Option<i64>,
    /// Control messages (`listen`, `abort`) the device sent during the step, described.
    pub(super) controls: Vec<String>,
    /// What a `speak` step measured.
    pub(super) speech: Option<crate::scenario::voice::SpeechOutcome>,
}

impl StepOutcome {
    pub(super) fn new(started: SimTime) -> Self {
        StepOutcome {
            sent: Vec::new(),
            started,
            replies: Vec::new(),
            events: Vec::new(),
            chunks: Vec::new(),
            receipts: Vec::new(),
            measurement: None,
            previous: None,
            readback: None,
            listed: None,
            id: None,
            controls: Vec::new(),
            speech: None,
        }
    }

    pub(super) fn reply_for(&self, id: i64) -> Option<&(Vec<u8>, SimTime)> {
        let want = coerced(id);
        self.replies.iter().find(|(p, _)| reply_id(p) == Some(want))
    }

    pub(super) fn has(&self, name: EventName) -> bool {
        self.events.iter().any(|e| match (&e.kind, name) {
            (Event::ReplyDropped { .. }, EventName::ReplyDropped) => true,
            (Event::Booted { .. }, EventName::DeviceRebooted) => true,
            (Event::MessageDropped { .. }, EventName::MessageDropped) => true,
            (Event::Panicked { .. }, EventName::Panicked) => true,
            (Event::Note { text }, EventName::OutputPoweredDown) => text.starts_with("audio output powered down"),
            (Event::NvsSet { .. }, EventName::NvsWritten) => true,
            (Event::GpioSet { .. }, EventName::GpioChanged) => true,
            _ => false,
        })
    }
}

pub(super) struct Runner<'a> {
    pub(super) board: Arc<BoardSpec>,
    pub(super) resources: &'a dyn Resources,
    pub(super) h: Harness,
    pub(super) discovery: Discovery,
    pub(super) next_id: i64,
    pub(super) last: Option<Measurement>,
    pub(super) faults: Vec<(SimTime, crate::fault::Fault, bool)>,
    /// Windows and fault changes for the report's timeline.
    pub(super) timeline: crate::scenario::record::Timeline,
    pub(super) fault_cursor: usize,
    pub(super) records: Vec<Record>,
    pub(super) checks: Vec<Check>,
    pub(super) steps: Vec<StepReport>,
    pub(super) trace: Trace,
    pub(super) keep_signals: bool,
    pub(super) evidence: Vec<Evidence>,
    pub(super) voice: crate::scenario::voice::RunnerVoice,
}

/// Runs `spec` on `board`.
pub fn run(
    spec: &ScenarioSpec,
    board: impl Into<Board>,
    origin: &str,
    opts: &RunOptions,
    resources: &dyn Resources,
) -> (ScenarioReport, Vec<Evidence>) {
    let shared: Board = board.into();
    let board = shared.spec().clone();
    let seed = spec.seed(opts.seed);
    let world = spec.world();
    let world_margin = world.room.margin_db;
    let mut device = Device::new(&shared, world, seed);
    device.set_trace(true);
    let mut faults: Vec<(SimTime, crate::fault::Fault, bool)> = spec
        .faults
        .iter()
        .filter_map(|f| {
            let at = SimTime::ZERO + f.at.0;
            f.set.map(|x| (at, x, true)).or(f.clear.map(|x| (at, x, false)))
        })
        .collect();
    faults.sort_by_key(|(t, f, on)| (*t, *f, *on));
    // Construction faults due at power-on apply before the first boot.
    let mut fault_cursor = 0;
    let mut initial_faults = Vec::new();
    while fault_cursor < faults.len() && faults[fault_cursor].0 == SimTime::ZERO {
        let (_, f, on) = faults[fault_cursor];
        device.set_fault(f, SimTime::ZERO, on);
        initial_faults.push((SimTime::ZERO, f.name(), on));
        fault_cursor += 1;
    }
    let mut h = Harness::new(device);
    h.power_on();
    let _ = h.run_until_idle();
    let discovery = Discovery::of(&h.device);
    let mut runner = Runner {
        board: board.clone(),
        resources,
        h,
        discovery,
        next_id: 1,
        last: None,
        faults,
        fault_cursor,
        timeline: crate::scenario::record::Timeline {
            faults: initial_faults,
            margin_db: world_margin,
            ..Default::default()
        },
        records: Vec::new(),
        checks: Vec::new(),
        steps: Vec::new(),
        trace: Trace::default(),
        keep_signals: opts.keep_signals,
        evidence: Vec::new(),
        voice: Default::default(),
    };
    let booted = runner.h.device.drain_events();
    runner.trace.push_chunk(booted);
    for (i, step) in spec.steps.iter().enumerate() {
        runner.step(i + 1, step.referenced.line(), &step.value);
    }
    let finished = runner.h.device.drain_events();
    runner.trace.push_chunk(finished);
    let passed = runner.checks.iter().all(|c| c.passed);
    let report = ScenarioReport {
        name: spec.name.clone(),
        file: origin.to_string(),
        board: board.name.clone(),
        firmware: board.firmware.version.clone(),
        seed,
        card: spec.card,
        description: spec.description.clone(),
        passed,
        steps: runner.steps,
        records: runner.records,
        checks: runner.checks,
        trace: runner.trace,
        files: Vec::new(),
        over: None,
        unobserved: Vec::new(),
        timeline: runner.timeline,
    };
    (report, runner.evidence)
}

impl Runner<'_> {
    pub(super) fn now(&self) -> SimTime {
        self.h.now()
    }

    /// Drains the device's trace events into the step's outcome, as one chunk.
    fn collect_trace(&mut self, out: &mut StepOutcome) {
        let events = self.h.device.drain_events();
        out.chunks.push(events.len());
        out.events.extend(events);
    }

    /// Advances to `t`, applying timeline faults on the way.
    pub(super) fn advance_to(&mut self, t: SimTime) {
        while self.fault_cursor < self.faults.len() && self.faults[self.fault_cursor].0 <= t {
            let (at, f, on) = self.faults[self.fault_cursor];
            let at = at.max(self.now());
            self.h.run_until(at);
            self.h.device.set_fault(f, at, on);
            self.timeline.faults.push((at, f.name(), on));
            self.fault_cursor += 1;
        }
        self.h.run_until(t);
    }

    pub(super) fn settle(&mut self) {
        let _ = self.h.run_until_idle();
        let now = self.now();
        self.advance_to(now);
    }

    fn take_replies(&mut self) -> Vec<(Vec<u8>, SimTime)> {
        let mut replies = Vec::new();
        for o in self.h.take_outputs() {
            match o {
                Output::Mcp { payload, at } => replies.push((payload, at)),
                Output::Control { text, .. } => {
                    self.voice
                        .controls
                        .push(crate::scenario::voice::describe_control(&text));
                }
                _ => {}
            }
        }
        replies
    }

    fn alloc_id(&mut self, given: Option<i64>) -> i64 {
        match given {
            Some(id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    fn deliver(&mut self, out: &mut StepOutcome, payload: Vec<u8>) {
        self.timeline.requests.push((self.now(), payload.clone()));
        let r = self.h.deliver(&payload);
        out.receipts.push(r);
        out.sent.push(payload);
    }

    fn measure_probe(&mut self, label: &str) -> Option<Measurement> {
        let (source, duration) = reference_probe();
        let l = self.h.play_and_measure(source, duration, self.keep_signals)?;
        self.keep(label, l.signals);
        Some(l.measurement)
    }

    pub(super) fn keep(&mut self, label: &str, signals: Option<Signals>) {
        if let Some(signals) = signals {
            self.evidence.push(Evidence {
                label: label.to_string(),
                rate: self.board.audio.output_sample_rate,
                signals,
            });
        }
    }

    fn step(&mut self, n: usize, line: u64, step: &Step) {
        let now = self.now();
        self.advance_to(now);
        let started = self.now();
        let mut out = StepOutcome::new(started);
        let (summary, expect) = match step {
            Step::Initialize(s) => self.step_initialize(s, &mut out),
            Step::ListTools(s) => self.step_list_tools(s, &mut out),
            Step::Call(c) => self.step_call(c, n, &mut out),
            Step::Send(s) => self.step_send(s, &mut out),
            Step::Burst(b) => self.step_burst(b, &mut out),
            Step::Wait(d) => self.step_wait(d),
            Step::Readback(r) => self.step_readback(r, &mut out),
            Step::Play(p) => self.step_play(p, n, line, &mut out),
            Step::Listen(l) => self.step_listen(l, n, &mut out),
            Step::Press(p) => self.step_press(p),
            Step::Reboot => self.step_reboot(),
            Step::CutPower => self.step_cut_power(),
            Step::PowerOn => self.step_power_on(),
            Step::Fault(f) => self.step_fault(f),
            Step::Busy(d) => self.step_busy(d),
            Step::Note(text) => self.step_note(text),
            Step::Speak(s) => self.step_speak(s, n, line, &mut out),
            Step::Wake(w) => self.step_wake(w),
            Step::Say(s) => self.step_say(s, n, line),
            Step::Abort(a) => self.step_abort(a),
        };
        if !matches!(step, Step::Call(_) | Step::ListTools(_) | Step::Readback(_)) {
            out.replies.extend(self.take_replies());
        }
        out.controls = std::mem::take(&mut self.voice.controls);
        self.collect_trace(&mut out);
        if let (Step::Call(_), Some(p)) = (step, &out.previous) {
            self.timeline.windows.push(p.clone());
        }
        if let Some(m) = &out.measurement {
            self.timeline.windows.push(m.clone());
            if !matches!(step, Step::Speak(_)) {
                self.last = Some(m.clone());
            }
        }
        if let Some(e) = expect {
            self.evaluate(n, line, e, &out);
            self.evaluate_voice(n, line, e, &out);
        }
        self.steps.push(StepReport {
            n,
            line,
            kind: crate::scenario::step_key(step).to_string(),
            at_ms: started.as_micros() as f64 / 1000.0,
            summary,
            sent: out.sent.iter().map(|p| lossy(p)).collect(),
            replies: out.replies.iter().map(|(p, _)| lossy(p)).collect(),
            measurement: out.measurement.take(),
        });
        let mut events = std::mem::take(&mut out.events).into_iter();
        for len in out.chunks {
            self.trace.push_chunk(events.by_ref().take(len));
        }
    }

    /// `initialize`, with the vision capability when the step gives one. Returns the step's summary
    /// and expectations.
    fn step_initialize<'s>(&mut self, s: &'s InitializeStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(s.id);
        out.id = Some(id);
        let caps = match &s.vision_url {
            Some(url) => {
                let mut vision = serde_json::Map::new();
                vision.insert("url".into(), url.clone().into());
                if let Some(t) = &s.vision_token {
                    vision.insert("token".into(), t.clone().into());
                }
                serde_json::json!({ "vision": vision })
            }
            None => serde_json::json!({}),
        };
        let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":caps}});
        self.deliver(out, payload.to_string().into_bytes());
        self.settle();
        let summary = format!("initialize id {id}");
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// `tools/list`, following `nextCursor` unless told not to; records what was discoverable.
    /// Returns the step's summary and expectations.
    fn step_list_tools<'s>(&mut self, s: &'s ListStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let mut names = Vec::new();
        let mut pages = 0;
        let mut cursor = s.cursor.clone();
        let mut last_cursor = None;
        loop {
            let id = self.alloc_id(None);
            let mut params = serde_json::Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), c.clone().into());
            }
            if s.with_user_tools {
                params.insert("withUserTools".into(), true.into());
            }
            let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params});
            self.deliver(out, payload.to_string().into_bytes());
            self.settle();
            let replies = self.take_replies();
            let page = replies
                .iter()
                .find(|(p, _)| reply_id(p) == Some(id))
                .map(|(p, _)| p.clone());
            out.replies.extend(replies);
            let Some(page) = page else { break };
            let v: serde_json::Value = serde_json::from_slice(&page).unwrap_or_default();
            let Some(tools) = v["result"]["tools"].as_array() else {
                break;
            };
            pages += 1;
            names.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_string)));
            last_cursor = v["result"]["nextCursor"].as_str().map(str::to_string);
            match (&last_cursor, s.follow) {
                (Some(c), true) if pages < 64 => cursor = Some(c.clone()),
                _ => break,
            }
        }
        let summary = format!(
            "tools/list{}: {} tools on {pages} page(s){}",
            if s.with_user_tools { " withUserTools" } else { "" },
            names.len(),
            last_cursor
                .as_ref()
                .map(|c| format!(", nextCursor {c} not followed"))
                .filter(|_| !s.follow)
                .unwrap_or_default()
        );
        out.listed = Some((names, pages, last_cursor));
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// `tools/call`: the request, its replies, the acceptance record and the software readback
    /// around it. Returns the step's summary and expectations.
    fn step_call<'s>(&mut self, c: &'s CallStep, n: usize, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(c.id);
        out.id = Some(id);
        let tool = c.tool.value.clone();
        let before = self.h.device.snapshot();
        if c.acoustic {
            out.previous = self.measure_probe(&format!("step{n}-before"));
            let now = self.now();
            self.advance_to(now + SimDuration::from_millis(200));
        }
        let at = self.now();
        self.deliver(out, call_request(id, &tool, c.args.as_ref()));
        self.settle();
        out.replies.extend(self.take_replies());
        if c.acoustic && self.h.device.is_running() {
            let now = self.now();
            self.advance_to(now + SimDuration::from_millis(200));
            out.measurement = self.measure_probe(&format!("step{n}-after"));
        }
        let after = self.h.device.snapshot();
        self.collect_trace(out);
        let record = self.record(n, &tool, id, at, c.decision.as_deref(), &before, &after, out);
        let summary = format!("tools/call {tool} id {id}");
        self.records.push(record);
        let text = out.reply_for(id).and_then(|(p, _)| reply_text(p));
        self.voice.after_call(self.records.len() - 1, &tool, text);
        let expect: Option<&'s Expect> = Some(&c.expect);
        (summary, expect)
    }

    /// A raw payload, exactly as written. Returns the step's summary and expectations.
    fn step_send<'s>(&mut self, s: &'s SendStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let payload = s.payload.clone().into_bytes();
        out.id = serde_json::from_slice::<serde_json::Value>(&payload)
            .ok()
            .and_then(|v| v["id"].as_f64())
            .map(|f| crate::cjson::valueint(f) as i64);
        self.deliver(out, payload);
        self.settle();
        let summary = format!("sent {} bytes", s.payload.len());
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// Several payloads parsed by the receive task before the main task runs. Returns the step's
    /// summary and expectations.
    fn step_burst<'s>(&mut self, b: &'s BurstStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        for p in &b.payloads {
            self.deliver(out, p.clone().into_bytes());
        }
        self.settle();
        let summary = format!("burst of {} payloads parsed before the main task ran", b.payloads.len());
        let expect: Option<&'s Expect> = Some(&b.expect);
        (summary, expect)
    }

    /// Lets virtual time pass. Returns the step's summary and expectations.
    fn step_wait<'s>(&mut self, d: &'s Duration) -> (String, Option<&'s Expect>) {
        let t = self.now() + d.0;
        self.advance_to(t);
        let summary = format!("waited {}", d.0);
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Reads a status value through `self.get_device_status`, as a backend would. Returns the
    /// step's summary and expectations.
    fn step_readback<'s>(&mut self, r: &'s ReadbackStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(None);
        out.id = Some(id);
        self.deliver(out, call_request(id, wire::TOOL_GET_DEVICE_STATUS, None));
        self.settle();
        out.replies.extend(self.take_replies());
        self.voice.after_readback();
        let status = out
            .reply_for(id)
            .and_then(|(p, _)| reply_text(p))
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        let value = status.as_ref().map(|s| r.path.split('.').fold(s, |v, k| &v[k]).clone());
        let summary = format!(
            "readback {} = {}",
            r.path,
            value
                .as_ref()
                .map_or_else(|| "(no status reply)".to_string(), |v| v.to_string())
        );
        out.readback = value;
        let expect: Option<&'s Expect> = Some(&r.expect);
        (summary, expect)
    }

    /// Plays a probe (tone, WAV or prompt) and measures what the listener hears. Returns the step's
    /// summary and expectations.
    fn step_play<'s>(
        &mut self,
        p: &'s PlayStep,
        n: usize,
        line: u64,
        out: &mut StepOutcome,
    ) -> (String, Option<&'s Expect>) {
        let mut summary;
        let (source, natural) = if let Some(wav) = &p.wav {
            match self.resources.load_wav(wav) {
                Ok((rate, samples)) => {
                    let s = Source::Pcm {
                        rate,
                        samples: samples.into(),
                    };
                    let d = s.natural_duration().unwrap_or(SimDuration::from_secs(1));
                    (Some(s), d)
                }
                Err(e) => {
                    self.checks.push(Check {
                        step: n,
                        line,
                        what: "play wav".into(),
                        passed: false,
                        detail: e,
                    });
                    (None, SimDuration::ZERO)
                }
            }
        } else {
            let t = p
                .tone
                .clone()
                .unwrap_or(crate::scenario::Tone { hz: 1000.0, dbfs: -6.0 });
            (Some(Source::probe(t.hz, t.dbfs)), SimDuration::from_millis(1000))
        };
        summary = "play: nothing".to_string();
        if let Some(source) = source {
            let d = p.duration.map_or(natural, |d| d.0) + PROBE_GUARD;
            summary = format!("played {} for {d}", source.describe());
            out.previous = self.last.clone();
            match self.h.play_and_measure(source, d, self.keep_signals) {
                Some(l) => {
                    self.keep(&format!("step{n}-play"), l.signals);
                    out.measurement = Some(l.measurement);
                }
                None => summary.push_str(" (the device is not running: nothing played)"),
            }
        }
        let expect: Option<&'s Expect> = Some(&p.expect);
        (summary, expect)
    }

    /// Measures what the listener hears for a while. Returns the step's summary and expectations.
    fn step_listen<'s>(&mut self, l: &'s ListenStep, n: usize, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        out.previous = self.last.clone();
        let listening = self.h.listen(l.duration.0, self.keep_signals);
        self.keep(&format!("step{n}-listen"), listening.signals);
        out.measurement = Some(listening.measurement);
        let summary = format!("listened for {}", l.duration.0);
        let expect: Option<&'s Expect> = Some(&l.expect);
        (summary, expect)
    }

    /// Presses a board button (click or long press). Returns the step's summary and expectations.
    fn step_press<'s>(&mut self, p: &'s PressStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        let mut summary = format!("pressed {}{}", p.button, if p.long { " (long)" } else { "" });
        if let Some(hold) = p.hold {
            let held = self.step_hold(hold.0);
            let expect: Option<&'s Expect> = Some(&p.expect);
            return (format!("{summary} {held}"), expect);
        }
        match self.h.device.press_button(now, &p.button, p.long) {
            Some(ButtonAction::ToggleChat) => {
                summary.push_str(": toggle chat (the direct link needs no channel: listening, or abort while speaking)")
            }
            Some(ButtonAction::StartListening) => summary.push_str(": start listening (manual mode)"),
            Some(_) => {}
            None => summary.push_str(": no such button"),
        }
        self.settle();
        let expect: Option<&'s Expect> = Some(&p.expect);
        (summary, expect)
    }

    /// Hardware reset (EN pin). Returns the step's summary and expectations.
    fn step_reboot<'s>(&mut self) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.reset(now);
        self.settle();
        let summary = "hardware reset".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Pulls the plug. Returns the step's summary and expectations.
    fn step_cut_power<'s>(&mut self) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.cut_power(now);
        let summary = "power cut".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Plugs it back in. Returns the step's summary and expectations.
    fn step_power_on<'s>(&mut self) -> (String, Option<&'s Expect>) {
        self.h.power_on();
        self.settle();
        let summary = "power on".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Sets or clears a fault now. Returns the step's summary and expectations.
    fn step_fault<'s>(&mut self, f: &'s FaultStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        let (fault, on) = match (f.set, f.clear) {
            (Some(x), _) => (x, true),
            (None, Some(x)) => (x, false),
            (None, None) => unreachable!("validated at load"),
        };
        self.h.device.set_fault(fault, now, on);
        self.timeline.faults.push((now, fault.name(), on));
        let summary = format!(
            "{} fault {}{}",
            if on { "set" } else { "cleared" },
            fault.name(),
            if fault.needs_boot() {
                " (takes effect at the next boot)"
            } else {
                ""
            }
        );
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Keeps the main task busy. Returns the step's summary and expectations.
    fn step_busy<'s>(&mut self, d: &'s Duration) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.busy(now, d.0);
        let summary = format!("main task busy for {}", d.0);
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// A note in the report; nothing happens. Returns the step's summary and expectations.
    fn step_note<'s>(&mut self, text: &str) -> (String, Option<&'s Expect>) {
        (text.to_string(), None)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        n: usize,
        tool: &str,
        id: i64,
        at: SimTime,
        decision: Option<&str>,
        before: &DeviceSnapshot,
        after: &DeviceSnapshot,
        out: &StepOutcome,
    ) -> Record {
        let discovery = self.discovery.describe(tool, &self.board);
        let decision = format!(
            "{}; state before: {}; request id {id} at {at}",
            decision.unwrap_or("(no decision recorded)"),
            describe_snapshot(before)
        );
        let (queued, runs) = match self.board.firmware().call_path {
            CallPath::MainTaskSchedules => (
                "queued for the main task (2 hops)",
                "the callback runs on the main task (2 hops)",
            ),
            CallPath::MainTaskSends => (
                "queued for the main task, which sends the reply itself (1 hop)",
                "the callback runs on the main task, which sends the reply itself (1 hop)",
            ),
            CallPath::Thread => (
                "run at once in a tool_call thread; its reply is scheduled (1 hop)",
                "the callback runs at once in a tool_call thread; its reply is scheduled (1 hop)",
            ),
        };
        let parameters = match out.receipts.first() {
            Some(Receipt::Scheduled { args, .. }) => {
                let props = self
                    .h
                    .device
                    .mcp()
                    .and_then(|m| m.find(tool.as_bytes()).map(|i| m.tool(i).properties().to_vec()))
                    .unwrap_or_default();
                if props.is_empty() {
                    format!("no parameters; {queued}")
                } else {
                    let shown: Vec<String> = props
                        .iter()
                        .zip(args)
                        .map(|(p, v)| {
                            let value = match v {
                                crate::mcp::PropertyValue::Bool(b) => b.to_string(),
                                crate::mcp::PropertyValue::Int(i) => i.to_string(),
                                crate::mcp::PropertyValue::Str(s) => format!("{:?}", lossy(s)),
                            };
                            let range = p.range().map(|(a, b)| format!(" (range {a}..{b})")).unwrap_or_default();
                            format!("{} = {value}{range}", p.name())
                        })
                        .collect();
                    format!("accepted: {}; {runs}", shown.join(", "))
                }
            }
            Some(Receipt::Answered { is_error: true, .. }) => {
                let msg = out
                    .reply_for(id)
                    .and_then(|(p, _)| reply_error(p))
                    .map(|m| lossy(&m))
                    .unwrap_or_default();
                format!("rejected before the callback: \"{msg}\" (1 hop); the callback never ran")
            }
            Some(Receipt::Answered { .. }) => "answered on the receive task (1 hop)".to_string(),
            Some(Receipt::Dropped { reason }) => format!("dropped silently on the receive task: {}", reason.as_str()),
            Some(Receipt::NotRunning) => "lost: the device was not running".to_string(),
            Some(Receipt::OutOfMemory) => "dropped: parsing ran out of heap".to_string(),
            Some(Receipt::Aborted { reason }) => format!("the device aborted on the receive task ({reason}); no reply"),
            None => "not sent".to_string(),
        };
        let response = match out.reply_for(id) {
            Some((p, t)) => {
                let shape = match (reply_text(p), reply_error(p)) {
                    (Some(text), _) => format!("result text {text:?} (isError false)"),
                    (None, Some(e)) => format!("error \"{}\"", lossy(&e)),
                    _ => format!("raw {:?}", lossy(p)),
                };
                let valid = is_valid_json(p);
                format!(
                    "id {} → {shape}, {} after the request{}",
                    coerced(id),
                    t.saturating_since(at),
                    if valid { "" } else { "; NOT valid JSON" }
                )
            }
            None => {
                let why = out
                    .events
                    .iter()
                    .find_map(|e| match &e.kind {
                        Event::ReplyDropped { payload, why } if reply_id(payload) == Some(coerced(id)) => {
                            Some(format!("queued, then dropped ({why})"))
                        }
                        _ => None,
                    })
                    .or_else(|| match out.receipts.first() {
                        Some(Receipt::Dropped { reason }) => Some(format!("dropped on receipt ({})", reason.as_str())),
                        _ => None,
                    })
                    .unwrap_or_else(|| "no reply while the device ran to idle".to_string());
                format!("never sent: {why}")
            }
        };
        let (effect, missing) = self.effect(tool, before, after, out);
        Record {
            step: n,
            tool: tool.to_string(),
            id,
            discovery,
            decision,
            parameters,
            response,
            effect,
            missing,
            claim: None,
        }
    }

    /// The effect row: software readback after the call and the measured physical effect.
    fn effect(
        &self,
        tool: &str,
        before: &DeviceSnapshot,
        after: &DeviceSnapshot,
        out: &StepOutcome,
    ) -> (String, Vec<String>) {
        let action = self
            .h
            .device
            .mcp()
            .and_then(|m| m.find(tool.as_bytes()).map(|i| m.tool(i).action().clone()));
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        let acoustic = |parts: &mut Vec<String>, missing: &mut Vec<String>| match (&out.previous, &out.measurement) {
            (Some(a), Some(b)) => parts.push(format!(
                "heard {} → {} ({}, {})",
                level(a),
                level(b),
                match (a.spl_db, b.spl_db) {
                    (Some(x), Some(y)) => format!("{:+.1} dB", y - x),
                    _ => "level change n/a".to_string(),
                },
                if perceived_change(a, b) {
                    "perceived change"
                } else {
                    "no perceived change"
                }
            )),
            _ => missing.push("acoustic measurement (add `acoustic: true`)".to_string()),
        };
        match action {
            Some(ToolAction::SetVolume) => {
                parts.push(format!(
                    "readback volume {} → {}",
                    opt(before.volume),
                    opt(after.volume)
                ));
                acoustic(&mut parts, &mut missing);
            }
            Some(ToolAction::SetBrightness) => {
                parts.push(format!(
                    "readback brightness {} → {} (in-flight value at reply time)",
                    opt(before.brightness),
                    opt(after.brightness)
                ));
            }
            Some(ToolAction::SetTheme) => {
                parts.push(format!(
                    "display theme {} → {}",
                    before.theme.clone().unwrap_or_else(|| "-".into()),
                    after.theme.clone().unwrap_or_else(|| "-".into())
                ));
            }
            Some(
                ToolAction::LampTurnOn { gpio } | ToolAction::LampTurnOff { gpio } | ToolAction::LampGetState { gpio },
            ) => {
                let level = |s: &DeviceSnapshot| {
                    s.gpio
                        .get(&gpio)
                        .map_or("-".to_string(), |on| u8::from(*on).to_string())
                };
                parts.push(format!(
                    "GPIO {gpio} level {} → {} (software flag = readback)",
                    level(before),
                    level(after)
                ));
            }
            Some(ToolAction::Reboot) => {
                if after.boots > before.boots {
                    parts.push(format!(
                        "device came back: boot {} → {}; volume after boot {}",
                        before.boots,
                        after.boots,
                        opt(after.volume)
                    ));
                } else {
                    parts.push("no reboot observed yet".to_string());
                    missing.push("evidence that the device came back".to_string());
                }
            }
            Some(_) => parts.push("no physical effect modelled for this tool; software state unchanged".to_string()),
            None => parts.push("no callback ran (unknown tool)".to_string()),
        }
        if out.has(EventName::Panicked) {
            parts.push("the device PANICKED and rebooted during the call".to_string());
        }
        (parts.join("; "), missing)
    }
}
