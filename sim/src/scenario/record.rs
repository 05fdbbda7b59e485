//! The seed article's 5-row acceptance record (discovery → decision → parameters → response →
//! effect, docs/reference/architecture.md §7) and the report of a scenario run, as data (serde) and as text.

use std::fmt::Write as _;

use serde::{Serialize, Serializer};

use crate::audio::measure::Measurement;
use crate::trace::TraceEvent;
use crate::trace::render_event;

/// One tool call's acceptance record.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Record {
    /// The step number (1-based) of the call.
    pub step: usize,
    /// The tool called.
    pub tool: String,
    /// The request id.
    pub id: i64,
    /// Is the tool registered and listed (all pages)?
    pub discovery: String,
    /// How the user's request became a target.
    pub decision: String,
    /// Did the value reach the callback, or was it rejected first?
    pub parameters: String,
    /// What came back for this id, and when.
    pub response: String,
    /// Did the product-level effect happen: software readback *and* measured effect.
    pub effect: String,
    /// Evidence the effect row lacks (e.g. `acoustic measurement`).
    pub missing: Vec<String>,
    /// What the backend then said about it (voice turns), and what the twin can judge of that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// What the screen showed after the call, and whether the call changed what a person sees
    /// (none: no display, or seen from a backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<String>,
    /// The screen the row describes, to draw it (not serialized): the instant, the state then
    /// (later calls at the same instant excluded) and the backlight.
    #[serde(skip)]
    pub screen_shown: Option<ScreenShown>,
}

/// A screen as it was at an instant.
#[derive(Clone, Debug, PartialEq)]
pub struct ScreenShown {
    /// The instant.
    pub at: crate::time::SimTime,
    /// What the display had been told by then.
    pub state: crate::hw::screen::ScreenState,
    /// The backlight in percent (100 without one).
    pub brightness: u8,
}

/// The backend's spoken claim after a call: the `sentence_start` text, when it was said, and
/// judgements from facts the twin holds (never from the meaning of the text).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Claim {
    /// The sentence the backend spoke after the call.
    pub text: String,
    /// When its `sentence_start` arrived, ms of virtual time.
    pub at_ms: f64,
    /// The call's reply text (`"true"` for a bare true).
    pub after_reply: Option<String>,
    /// A readback happened between the call and the claim.
    pub readback: bool,
    /// The listener heard the speech that carried the claim.
    pub heard: bool,
    /// Its level at the listener, dB SPL.
    pub spl_db: Option<f64>,
    /// The level of the backend's speech before the call, dB SPL.
    pub before_db: Option<f64>,
    /// After minus before, dB.
    pub change_db: Option<f64>,
    /// `unverified claim`, `claim not heard` (none: heard, and backed by a readback).
    pub judgements: Vec<String>,
}

impl Claim {
    /// The claim row in words.
    pub fn row(&self) -> String {
        let level = match (self.spl_db, self.change_db, self.before_db) {
            (Some(l), Some(c), Some(b)) => {
                format!("heard at {l:.1} dB SPL, {c:+.1} dB against the speech before the call ({b:.1} dB)")
            }
            (Some(l), _, _) => format!("heard at {l:.1} dB SPL"),
            (None, _, _) => "no sound of it reached the listener".into(),
        };
        let verdict = if self.judgements.is_empty() {
            "heard, and a readback backs it".to_string()
        } else {
            self.judgements.join("; ")
        };
        format!("said {:?} at {:.0} ms; {level} — {verdict}", self.text, self.at_ms)
    }
}

impl Record {
    /// True when no evidence is missing.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }
}

/// One expectation's verdict.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    /// The step number (1-based).
    pub step: usize,
    /// The step's line in the scenario file.
    pub line: u64,
    /// The expectation, in words (e.g. `text is "true"`).
    pub what: String,
    /// Whether it held.
    pub passed: bool,
    /// What was observed instead (or as well).
    pub detail: String,
    /// Which expectation it judges, as data (not in the report: `what` says it in words).
    #[serde(skip)]
    pub kind: Expectation,
}

/// Which expectation a check judges: the scenario file's key, with what a reader of the
/// verdict needs beside it (the version matrix explains a changed cell from this, never from
/// the words of `what`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Expectation {
    /// Not an expectation of the file: a step that could not run (a WAV that does not read, a
    /// run over the wire that ran out of time).
    #[default]
    StepRan,
    /// `record_complete`.
    RecordComplete,
    /// `reply`, `error`, `valid_json`, `reply_id`.
    Reply,
    /// `no_reply_within`.
    NoReplyWithin,
    /// `reply_within`.
    ReplyWithin,
    /// `value`: the readback.
    Readback,
    /// `text`, `text_contains`.
    Text,
    /// `dropped`.
    Dropped,
    /// `order`: replies leave in an order.
    Order,
    /// `contains`: this tool is listed.
    Listed(String),
    /// `absent`, `pages`.
    Listing,
    /// `audible`, `verdict`, `level`, `i2s`, `level_change`, `perceived`: the step's sound.
    Sound,
    /// `events`, `no_events`.
    Event,
    /// `state`.
    State,
    /// `listen_sent`: what the device sent, as the runner describes each control
    /// (`start auto`, `stop`, `detect …`, `abort …`).
    ListenSent(Vec<String>),
    /// `heard`: the level of the speech, or its change against the speech before.
    Heard,
    /// `claim`.
    Claim,
    /// `frames`: one of the TTS session's counts.
    Frames(FrameCount),
}

/// Which count of a TTS session's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameCount {
    /// Received on the socket.
    Received,
    /// Decoded.
    Decoded,
    /// Dropped by the device's rules.
    Dropped,
    /// Played through the codec.
    Played,
    /// Queued but cut (a reset, an abort).
    Discarded,
}

/// What one step did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepReport {
    /// The step number (1-based).
    pub n: usize,
    /// The step's line in the scenario file.
    pub line: u64,
    /// The step's kind: its YAML key (`call`, `list_tools`, `wait`, …).
    pub kind: crate::scenario::StepKind,
    /// When the step started, in ms of virtual time since power-on.
    pub at_ms: f64,
    /// What the step did, in words.
    pub summary: String,
    /// The payloads delivered to the device, as (lossy UTF-8) text.
    pub sent: Vec<String>,
    /// The replies the device sent during the step, as text.
    pub replies: Vec<String>,
    /// The acoustic measurement taken by the step, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
}

/// The whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ScenarioReport {
    /// The scenario's `name`.
    pub name: String,
    /// Where the scenario came from (its path as given).
    pub file: String,
    /// The board's name.
    pub board: String,
    /// The board's firmware version.
    pub firmware: String,
    /// The seed of the device identity: `--seed`, else the file's, else the default.
    pub seed: u64,
    /// The error-card row the scenario reproduces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<u32>,
    /// The scenario's `description`.
    pub description: String,
    /// True when every expectation held.
    pub passed: bool,
    /// One report per step, in order.
    pub steps: Vec<StepReport>,
    /// One acceptance record per `call` step.
    pub records: Vec<Record>,
    /// Every expectation's verdict, in step order.
    pub checks: Vec<Check>,
    /// Every trace event of the device; serialized as lines in the recorder's style.
    pub trace: Trace,
    /// Evidence files written for this run (filled in by whoever writes them).
    pub files: Vec<String>,
    /// Over the wire: the backend URL and personality the steps ran through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// Over the wire: expectations that cannot be judged from outside the device, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unobserved: Vec<String>,
    /// What the HTML timeline draws besides the trace (not serialized: the JSON report stays).
    #[serde(skip)]
    pub timeline: Timeline,
}

/// Measurement windows and fault changes of a run, in virtual time (for the HTML report).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Every acoustic window measured, in order (probes before/after calls, plays, listens,
    /// speech).
    pub windows: Vec<Measurement>,
    /// Every fault set (`true`) or cleared (`false`), with its time.
    pub faults: Vec<(crate::time::SimTime, &'static str, bool)>,
    /// Every payload delivered to the device, with its time.
    pub requests: Vec<(crate::time::SimTime, Vec<u8>)>,
    /// The audibility margin over ambient the verdicts used, dB.
    pub margin_db: f64,
    /// What the display was told over the run, to draw it (none: the board has no display).
    pub screen: Option<ScreenTimeline>,
}

/// The display's calls over a run and the board that draws them.
#[derive(Clone, Debug)]
pub struct ScreenTimeline {
    /// The board (display kind, size, font).
    pub spec: std::sync::Arc<crate::board::BoardSpec>,
    /// Every call the display was given.
    pub log: crate::hw::screen::ScreenLog,
}

impl PartialEq for ScreenTimeline {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.spec, &other.spec) && self.log.calls() == other.log.calls()
    }
}

/// The device's trace of a run, kept as events and rendered only when read or serialized.
///
/// The events arrive in chunks (boot, then each step); batches are numbered from 1 within each
/// chunk, as the trace lines have always been.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    events: Vec<TraceEvent>,
    /// Where each chunk ends in `events`.
    ends: Vec<usize>,
}

impl Trace {
    /// Appends one chunk (nothing happens for an empty one).
    pub fn push_chunk(&mut self, events: impl IntoIterator<Item = TraceEvent>) {
        self.events.extend(events);
        if self.ends.last().copied().unwrap_or(0) != self.events.len() {
            self.ends.push(self.events.len());
        }
    }

    /// All events, in order.
    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when no event was recorded.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The trace lines (`#batch …`, `#event …`, `#log …`), rendered as they are read.
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        let mut start = 0;
        self.ends.iter().flat_map(move |&end| {
            let chunk = &self.events[start..end];
            start = end;
            let mut batch = 0;
            chunk.iter().map(move |e| render_event(e, &mut batch))
        })
    }
}

impl Serialize for Trace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.lines())
    }
}

impl ScenarioReport {
    /// The expectations that did not hold.
    pub fn failed_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// The human form: records, then one line per expectation.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let card = self.card.map(|c| format!(" [card {c}]")).unwrap_or_default();
        let _ = writeln!(out, "== {}{card}", self.name);
        let _ = writeln!(
            out,
            "   {} on {} (firmware {}), seed {}",
            self.file, self.board, self.firmware, self.seed
        );
        if let Some(over) = &self.over {
            let _ = writeln!(out, "   over the wire: {over}");
        }
        if !self.description.is_empty() {
            for line in wrap(&self.description, 92) {
                let _ = writeln!(out, "   {line}");
            }
        }
        for r in &self.records {
            let _ = writeln!(out, "\n   call {} (step {}, id {})", r.tool, r.step, r.id);
            let claim = r.claim.as_ref().map(Claim::row);
            let mut rows = vec![
                ("discovery", &r.discovery),
                ("decision", &r.decision),
                ("parameters", &r.parameters),
                ("response", &r.response),
            ];
            if let Some(c) = &claim {
                rows.push(("claim", c));
            }
            rows.push(("effect", &r.effect));
            if let Some(screen) = &r.screen {
                rows.push(("screen", screen));
            }
            for (row, text) in rows {
                let mut lines = wrap(text, 84).into_iter();
                let _ = writeln!(out, "   | {row:<10} | {}", lines.next().unwrap_or_default());
                for l in lines {
                    let _ = writeln!(out, "   | {:<10} | {l}", "");
                }
            }
            if !r.missing.is_empty() {
                let _ = writeln!(out, "   | {:<10} | INCOMPLETE: no {}", "", r.missing.join(", no "));
            }
        }
        if !self.checks.is_empty() {
            let _ = writeln!(out);
        }
        for c in &self.checks {
            let mark = if c.passed { "pass" } else { "FAIL" };
            let _ = writeln!(
                out,
                "   {mark}  step {} (line {}): {} — {}",
                c.step, c.line, c.what, c.detail
            );
        }
        for u in &self.unobserved {
            let _ = writeln!(out, "   not judged over the wire: {u}");
        }
        for f in &self.files {
            let _ = writeln!(out, "   wrote {f}");
        }
        let _ = writeln!(out, "   {}", if self.passed { "PASSED" } else { "FAILED" });
        out
    }
}

/// Greedy word wrap (never splits a word).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}
