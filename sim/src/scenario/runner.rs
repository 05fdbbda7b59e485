//! Runs a [`ScenarioSpec`] on a simulated board in virtual time and builds the report: one
//! acceptance record per tool call (`acceptance.rs`), one check per expectation (`check.rs`),
//! the full device trace, and the audio signals of every measurement when asked. The same
//! scenario and seed give the same report, byte for byte.
//!
//! This file holds the runner's state and its plumbing (time, faults, delivery, evidence);
//! how each kind of step is performed is in `steps.rs`.

use std::sync::Arc;

use crate::audio::measure::Measurement;
use crate::audio::render::Signals;
use crate::audio::source::Source;
use crate::board::BoardSpec;
use crate::device::{AsPlayed, Board, Device, Output, Receipt};
use crate::harness::{Harness, PROBE_GUARD};
use crate::scenario::ScenarioSpec;
use crate::scenario::check::{self, Answer, Inside, Listing, Observed, ReplyLatency, Speech, Vantage};
use crate::scenario::discovery::Discovery;
use crate::scenario::expect::Expect;
use crate::scenario::record::{Check, Record, ScenarioReport, StepReport, Timeline, Trace};
use crate::scenario::reply::{coerced, reply_id};
use crate::scenario::runner_voice::RunnerVoice;
use crate::time::{SimDuration, SimTime};
use crate::trace::TraceEvent;

pub use crate::spec::{NoFiles, Resources};

/// Run options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Keep the sample streams of every measurement (for WAV evidence).
    pub keep_signals: bool,
    /// Measure speech windows as they play and let decoded speech go
    /// ([`Device::measure_as_played`]); ignored with `keep_signals`. The report is the same.
    pub measure_as_played: bool,
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

/// The reference probe of the acoustic checks: 1 kHz at −6 dBFS for 1 s (docs/reference/acoustics.md §5).
fn reference_probe() -> (Source, SimDuration) {
    (
        Source::probe(1000.0, -6.0),
        SimDuration::from_millis(1000) + PROBE_GUARD,
    )
}

/// What one step showed, as the runner collects it (judged in [`Runner::evaluate`]).
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
    pub(super) speech: Option<Speech>,
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
}

/// A scenario run in progress: the device in its harness, the timeline, and the report so far.
pub(super) struct Runner<'a> {
    pub(super) board: Arc<BoardSpec>,
    pub(super) resources: &'a dyn Resources,
    pub(super) h: Harness,
    pub(super) discovery: Discovery,
    pub(super) next_id: i64,
    pub(super) last: Option<Measurement>,
    pub(super) faults: Vec<(SimTime, crate::fault::Fault, bool)>,
    /// Windows and fault changes for the report's timeline.
    pub(super) timeline: Timeline,
    pub(super) fault_cursor: usize,
    pub(super) records: Vec<Record>,
    pub(super) checks: Vec<Check>,
    pub(super) steps: Vec<StepReport>,
    pub(super) trace: Trace,
    pub(super) keep_signals: bool,
    pub(super) evidence: Vec<Evidence>,
    pub(super) voice: RunnerVoice,
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
    let as_played = opts.measure_as_played && !opts.keep_signals;
    device.measure_as_played(if as_played { AsPlayed::All } else { AsPlayed::Off });
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
        timeline: Timeline {
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
    if board.display.kind != crate::board::DisplayKind::None {
        runner.timeline.screen = Some(crate::scenario::record::ScreenTimeline {
            spec: board.clone(),
            log: runner.h.device.screen_log().clone(),
        });
    }
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
    pub(super) fn collect_trace(&mut self, out: &mut StepOutcome) {
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

    pub(super) fn take_replies(&mut self) -> Vec<(Vec<u8>, SimTime)> {
        let mut replies = Vec::new();
        for o in self.h.take_outputs() {
            match o {
                Output::Mcp { payload, at } => replies.push((payload, at)),
                Output::Control { sent, .. } => self.voice.controls.push(sent.describe()),
                _ => {}
            }
        }
        replies
    }

    pub(super) fn alloc_id(&mut self, given: Option<i64>) -> i64 {
        match given {
            Some(id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    pub(super) fn deliver(&mut self, out: &mut StepOutcome, payload: Vec<u8>) {
        self.timeline.requests.push((self.now(), payload.clone()));
        let r = self.h.deliver(&payload);
        out.receipts.push(r);
        out.sent.push(payload);
    }

    pub(super) fn measure_probe(&mut self, label: &str) -> Option<Measurement> {
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

    /// Judges step `n`'s expectations against what the device showed in `out`.
    pub(super) fn evaluate(&mut self, n: usize, line: u64, e: &Expect, out: &StepOutcome) {
        let started = out.started;
        let paired = out.id.and_then(|id| out.reply_for(id));
        let primary = paired.or(out.replies.first());
        let after = |(_, t): &(Vec<u8>, SimTime)| ReplyLatency::Virtual(t.saturating_since(started));
        let seen = Observed {
            answer: Some(Answer {
                reply: primary.map(|(p, _)| p.as_slice()),
                after: primary.map(after),
                paired: paired.map(|r| (r.0.as_slice(), after(r))),
                missing: "no reply".into(),
                readback: out.readback.as_ref(),
            }),
            listing: out.listed.as_ref().map(|(names, pages, _)| Listing {
                names: names.iter().map(String::as_str).collect(),
                pages: *pages,
                how: None,
                unlike: None,
            }),
            vantage: Vantage::Device(Inside {
                receipts: &out.receipts,
                replies: &out.replies,
                measurement: out.measurement.as_ref(),
                previous: out.previous.as_ref(),
                record: self.records.iter().rev().find(|r| r.step == n),
                events: &out.events,
                state: self.h.device.state().map_or("off", |s| s.name()),
                controls: &out.controls,
                speech: out.speech.as_ref(),
                claim: self.records.iter().rev().find_map(|r| r.claim.as_ref()),
            }),
        };
        let verdicts = check::check(n, line, e, &seen);
        self.checks.extend(verdicts.checks);
    }
}
