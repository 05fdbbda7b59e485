//! The seed article's 5-row acceptance record (discovery → decision → parameters → response →
//! effect, DESIGN.md §7) and the report of a scenario run, as data (serde) and as text.

use std::fmt::Write as _;

use serde::{Serialize, Serializer};

use crate::audio::measure::Measurement;
use crate::harness::render_event;
use crate::trace::TraceEvent;

/// One tool call's acceptance record.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Record {
    pub step: usize,
    pub tool: String,
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
}

impl Record {
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }
}

/// One expectation's verdict.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Check {
    pub step: usize,
    pub line: u64,
    pub what: String,
    pub passed: bool,
    pub detail: String,
}

/// What one step did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepReport {
    pub n: usize,
    pub line: u64,
    pub kind: String,
    pub at_ms: f64,
    pub summary: String,
    pub sent: Vec<String>,
    pub replies: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
}

/// The whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ScenarioReport {
    pub name: String,
    pub file: String,
    pub board: String,
    pub firmware: String,
    pub seed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<u32>,
    pub description: String,
    pub passed: bool,
    pub steps: Vec<StepReport>,
    pub records: Vec<Record>,
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

    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

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
            for (row, text) in [
                ("discovery", &r.discovery),
                ("decision", &r.decision),
                ("parameters", &r.parameters),
                ("response", &r.response),
                ("effect", &r.effect),
            ] {
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
