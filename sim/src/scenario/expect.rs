//! The expectation evaluator: every field of a step's `expect:` becomes one pass/fail check
//! with what was wanted and what was got, in words a user reads (`got "true"`, `got no reply`).

use crate::audio::measure::{Measurement, perceived_change};
use crate::device::DeviceSnapshot;
use crate::device::Receipt;
use crate::scenario::record::{Check, Record};
use crate::scenario::reply::{is_valid_json, lossy, reply_error, reply_id, reply_text};
use crate::scenario::runner::{Runner, StepOutcome};
use crate::scenario::{Approx, Expect, quoted_or};
use crate::time::SimTime;

/// What stood in place of a reply text: no reply at all, or a reply that is no text result.
pub(crate) fn no_text(replied: bool) -> &'static str {
    if replied {
        "a reply without a result text"
    } else {
        "no reply"
    }
}

/// Reply ids as a list: `[1, 2]`.
pub(super) fn ids(ids: &[i64]) -> String {
    let shown: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// What happened to the payloads on receipt, in words.
pub(super) fn describe_receipts(receipts: &[Receipt]) -> String {
    if receipts.is_empty() {
        return "nothing was delivered".into();
    }
    let shown: Vec<String> = receipts.iter().map(Receipt::to_string).collect();
    shown.join("; ")
}

impl Runner<'_> {
    pub(super) fn evaluate(&mut self, n: usize, line: u64, e: &Expect, out: &StepOutcome) {
        let mut checks = Vec::new();
        let mut check = |what: String, passed: bool, detail: String| {
            checks.push(Check {
                step: n,
                line,
                what,
                passed,
                detail,
            });
        };
        let primary = out.id.and_then(|id| out.reply_for(id)).or(out.replies.first());
        let shown = |p: Option<&(Vec<u8>, SimTime)>| p.map_or_else(|| "no reply".to_string(), |(b, _)| lossy(b));
        if let Some(want) = &e.reply {
            let got = primary.map(|(p, _)| lossy(p));
            check(
                format!("reply is {want}"),
                got.as_deref() == Some(want.as_str()),
                shown(primary),
            );
        }
        if let Some(want) = &e.text {
            let got = primary.and_then(|(p, _)| reply_text(p));
            check(
                format!("text is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(primary.is_some()))),
            );
        }
        if let Some(want) = &e.text_contains {
            let got = primary.and_then(|(p, _)| reply_text(p));
            check(
                format!("text contains {}", quoted_or(Some(want), "")),
                got.as_deref().unwrap_or_default().contains(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(primary.is_some()))),
            );
        }
        if let Some(want) = &e.error {
            let got = primary.and_then(|(p, _)| reply_error(p)).map(|m| lossy(&m));
            check(
                format!("error is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", shown(primary)),
            );
        }
        if let Some(want) = e.valid_json {
            let got = primary.map(|(p, _)| is_valid_json(p));
            check(
                format!("reply is {}valid JSON", if want { "" } else { "not " }),
                got == Some(want),
                shown(primary),
            );
        }
        if let Some(want) = e.reply_id {
            let got = primary.and_then(|(p, _)| reply_id(p));
            check(
                format!("reply id is {want}"),
                got == Some(want),
                match (got, primary) {
                    (Some(id), _) => format!("got {id}"),
                    (None, Some(_)) => "got a reply without an integer id".into(),
                    (None, None) => "got no reply".into(),
                },
            );
        }
        if let Some(d) = e.no_reply_within {
            let limit = out.started + d.0;
            let found = out.id.and_then(|id| out.reply_for(id)).filter(|(_, t)| *t <= limit);
            check(format!("no reply within {}", d.0), found.is_none(), shown(found));
        }
        if let Some(d) = e.reply_within {
            let limit = out.started + d.0;
            let found = primary.filter(|(_, t)| *t <= limit);
            check(
                format!("reply within {}", d.0),
                found.is_some(),
                primary.map_or("no reply".into(), |(_, t)| {
                    format!("reply after {}", t.saturating_since(out.started))
                }),
            );
        }
        if let Some(want) = e.dropped {
            let got = out.receipts.iter().any(|r| matches!(r, Receipt::Dropped { .. }));
            check(
                format!("dropped on receipt: {want}"),
                got == want,
                describe_receipts(&out.receipts),
            );
        }
        if let Some(order) = &e.reply_order {
            let got: Vec<i64> = out.replies.iter().filter_map(|(p, _)| reply_id(p)).collect();
            check(
                format!("replies leave in the order {}", ids(order)),
                &got == order,
                format!("got {}", if got.is_empty() { "no reply".into() } else { ids(&got) }),
            );
        }
        if let Some(want) = &e.value {
            let got = out.readback.clone().unwrap_or(serde_json::Value::Null);
            check(format!("readback is {want}"), &got == want, format!("got {got}"));
        }
        if let Some((names, pages, _)) = &out.listed {
            for t in &e.contains {
                check(
                    format!("list contains {t}"),
                    names.contains(t),
                    format!("{} tools listed", names.len()),
                );
            }
            for t in &e.absent {
                check(
                    format!("list lacks {t}"),
                    !names.contains(t),
                    format!("{} tools listed", names.len()),
                );
            }
            if let Some(p) = e.pages {
                check(format!("{p} page(s)"), *pages == p, format!("got {pages}"));
            }
        }
        let m = out.measurement.as_ref();
        if let Some(want) = e.audible {
            let got = m.map(|m| m.verdict.is_audible());
            check(format!("audible: {want}"), got == Some(want), describe_measurement(m));
        }
        if let Some(want) = &e.verdict {
            let got = m.map(|m| m.verdict.name());
            check(
                format!("verdict {want}"),
                got == Some(want.as_str()),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.spl_db {
            check(
                format!("level {} ± {} dB SPL", a.value, a.tolerance),
                approx(m.and_then(|m| m.spl_db), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.i2s_dbfs {
            check(
                format!("I2S {} ± {} dBFS", a.value, a.tolerance),
                approx(m.and_then(|m| m.i2s_dbfs), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.change_db {
            let change = match (out.previous.as_ref().and_then(|p| p.spl_db), m.and_then(|m| m.spl_db)) {
                (Some(x), Some(y)) => Some(y - x),
                _ => None,
            };
            check(
                format!("level change {:+} ± {} dB", a.value, a.tolerance),
                approx(change, a),
                change.map_or("no level to compare".into(), |c| format!("changed {c:+.2} dB")),
            );
        }
        if let Some(want) = e.perceived_change {
            let got = match (&out.previous, m) {
                (Some(a), Some(b)) => Some(perceived_change(a, b)),
                _ => None,
            };
            check(
                format!("perceived change: {want}"),
                got == Some(want),
                got.map_or("no measurement to compare".into(), |g| format!("got {g}")),
            );
        }
        if let Some(want) = e.record_complete {
            let record = self.records.iter().rev().find(|r| r.step == n);
            let got = record.map(Record::is_complete);
            let detail = record.map_or("no record for this step".to_string(), |r| {
                if r.missing.is_empty() {
                    "every row has evidence".to_string()
                } else {
                    format!("missing {}", r.missing.join(", "))
                }
            });
            self.checks.push(Check {
                step: n,
                line,
                what: format!("record complete: {want}"),
                passed: got == Some(want),
                detail,
            });
        }
        for name in &e.events {
            check(
                format!("event {name}"),
                out.has(*name),
                format!("{} events in the step", out.events.len()),
            );
        }
        for name in &e.no_events {
            check(
                format!("no event {name}"),
                !out.has(*name),
                format!("{} events in the step", out.events.len()),
            );
        }
        self.checks.extend(checks);
    }
}

pub(super) fn approx(v: Option<f64>, a: Approx) -> bool {
    v.is_some_and(|x| (x - a.value).abs() <= a.tolerance)
}

pub(super) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

pub(super) fn level(m: &Measurement) -> String {
    match m.spl_db {
        Some(l) => format!("{l:.1} dB SPL"),
        None => "silence".to_string(),
    }
}

pub(super) fn describe_measurement(m: Option<&Measurement>) -> String {
    match m {
        None => "nothing measured".to_string(),
        Some(m) => format!(
            "{} ({}; I2S {}; playing {:.2}, i2s_running {:.2}, amp_enabled {:.2})",
            m.verdict.name(),
            level(m),
            m.i2s_dbfs.map_or("null".into(), |x| format!("{x:.2} dBFS")),
            m.playing,
            m.i2s_running,
            m.amp_enabled
        ),
    }
}

pub(super) fn describe_snapshot(s: &DeviceSnapshot) -> String {
    if !s.running {
        return "device not running".to_string();
    }
    let mut parts = vec![format!("volume {}", opt(s.volume))];
    if let Some(b) = s.brightness {
        parts.push(format!("brightness {b}"));
    }
    if let Some(t) = &s.theme {
        parts.push(format!("theme {t}"));
    }
    for (g, on) in &s.gpio {
        parts.push(format!("GPIO {g} {}", if *on { "on" } else { "off" }));
    }
    parts.join(", ")
}
