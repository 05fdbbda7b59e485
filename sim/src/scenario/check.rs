//! The expectation checker: every field of a step's `expect:` becomes one pass/fail check with
//! what was wanted and what was got, in words a user reads (`got "true"`, `got no reply`) — or,
//! when whoever observed the step cannot see that field, a line saying why it was not judged.
//!
//! Pure: what a step showed comes in as [`Observed`], filled by the virtual-time runner (the
//! device's outputs, trace and room: [`Vantage::Device`]) or by the over-the-wire judge (what a
//! backend saw on its connection: [`Vantage::Backend`]). The checks are the same for both; where
//! the two see differently, the difference is in the data: a backend chose the request id, it
//! knows a missing reply only as far as it waited, it sees a reboot as its connection ending and
//! a new one opening, and it sees nothing of the device's insides.
//!
//! Runs nothing and knows nothing about sockets.

use std::fmt;

use serde_json::Value;

use crate::audio::measure::Measurement;
use crate::device::Receipt;
use crate::scenario::expect::{EventName, Expect};
use crate::scenario::record::{Check, Claim, Expectation, Record};
use crate::scenario::reply::{is_valid_json, lossy, reply_error, reply_id, reply_text};
use crate::time::{SimDuration, SimTime};
use crate::trace::TraceEvent;
use crate::voice::log::Counts;

/// How long after its request (or its step's start) a reply came.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReplyLatency {
    /// Virtual time (the runner).
    Virtual(SimDuration),
    /// Milliseconds on a backend's clock (over the wire).
    Millis(f64),
}

impl ReplyLatency {
    /// At most `limit`.
    fn within(self, limit: SimDuration) -> bool {
        match self {
            ReplyLatency::Virtual(d) => d <= limit,
            ReplyLatency::Millis(ms) => ms <= millis(limit),
        }
    }
}

impl fmt::Display for ReplyLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyLatency::Virtual(d) => write!(f, "{d}"),
            ReplyLatency::Millis(ms) => write!(f, "{ms:.1} ms"),
        }
    }
}

fn millis(d: SimDuration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// The step's own request and what came back for it.
pub(crate) struct Answer<'a> {
    /// The reply judged: the one paired with the request by id, else the step's first.
    pub reply: Option<&'a [u8]>,
    /// How long after the step began (offline) or its request left (over the wire) `reply` came.
    pub after: Option<ReplyLatency>,
    /// The reply paired with the request by id, and how long after: what `no_reply_within`
    /// looks for.
    pub paired: Option<(&'a [u8], ReplyLatency)>,
    /// What a check line shows for a missing reply: `no reply`, or over the wire how the
    /// request ended.
    pub missing: std::borrow::Cow<'static, str>,
    /// The value a `readback` step read.
    pub readback: Option<&'a Value>,
}

/// The tools a step's listing saw.
pub(crate) struct Listing<'a> {
    /// The tool names, in order.
    pub names: Vec<&'a str>,
    /// How many pages they came on.
    pub pages: usize,
    /// How the listing was seen, shown with every listing check (over the wire: the backend's
    /// own discovery); none: the counts are shown.
    pub how: Option<String>,
    /// Why the listing cannot judge the step's listing expectations (the backend lists in
    /// another way than the step asks); none: it can.
    pub unlike: Option<String>,
}

/// What a `speak` step measured.
#[derive(Clone, Debug)]
pub(crate) struct Speech {
    /// What the listener heard of the sentence (after the start-up guard).
    pub measurement: Option<Measurement>,
    /// Frames of the sentence (or of its session).
    pub counts: Counts,
    /// Its level against the previous measured speech, dB.
    pub change_db: Option<f64>,
}

/// What only the device's insides show; the virtual-time runner sees all of it.
pub(crate) struct Inside<'a> {
    /// What happened to each payload on receipt.
    pub receipts: &'a [Receipt],
    /// Every reply of the step, in transmission order, with its time.
    pub replies: &'a [(Vec<u8>, SimTime)],
    /// The step's acoustic measurement.
    pub measurement: Option<&'a Measurement>,
    /// The measurement it compares against (the one before a call, or the last one).
    pub previous: Option<&'a Measurement>,
    /// The acceptance record of this step's call.
    pub record: Option<&'a Record>,
    /// The device's trace events of the step.
    pub events: &'a [TraceEvent],
    /// The device state after the step (`off` when the application is not running).
    pub state: &'a str,
    /// The control messages the device sent during the step, described.
    pub controls: &'a [String],
    /// What a `speak` step measured.
    pub speech: Option<&'a Speech>,
    /// The last claim recorded so far.
    pub claim: Option<&'a Claim>,
}

/// The device's connection around a step, as a backend sees it.
pub(crate) struct Connection<'a> {
    /// The device's connection count (0 when it never opened).
    pub number: u32,
    /// How it ended (`shutdown`, `tcp_closed_without_close_frame`, …); none: it never opened.
    pub ending: Option<&'a str>,
    /// When it closed, ms on the backend's clock (0 when it never opened).
    pub closed_ms: f64,
    /// The next connection of the device, and when it opened (ms, same clock).
    pub next: Option<(u32, f64)>,
}

/// What a backend knows of a step from its side of the connection.
pub(crate) struct Outside<'a> {
    /// The request left the backend (a backend refuses tools it did not register).
    pub sent: bool,
    /// The connection closed, or the request was still pending, when the backend stopped
    /// waiting: a reply cannot arrive on a later connection.
    pub closed: bool,
    /// How long the backend waited for the reply, ms.
    pub waited_ms: Option<f64>,
    /// The step's connection; none for a step with no request of its own.
    pub connection: Option<Connection<'a>>,
}

/// Who observed a step, and what only they could see.
pub(crate) enum Vantage<'a> {
    /// The runner: inside the device, in virtual time.
    Device(Inside<'a>),
    /// A backend at the other end of a connection.
    Backend(Outside<'a>),
}

/// Everything a step showed that its expectations are judged against.
pub(crate) struct Observed<'a> {
    /// The step's own request and reply; none when it sent none (over the wire, a `list_tools`
    /// is judged from the backend's own discovery).
    pub answer: Option<Answer<'a>>,
    /// The listing of a `list_tools` step.
    pub listing: Option<Listing<'a>>,
    /// Who saw it.
    pub vantage: Vantage<'a>,
}

/// The verdicts on one step's expectations.
pub(crate) struct Verdicts {
    n: usize,
    line: u64,
    /// The checks, in report order.
    pub checks: Vec<Check>,
    /// The expectations not judged, each `step N (line L): what: why`.
    pub unobserved: Vec<String>,
}

const UNOBSERVABLE_EVENT: &str = "happens inside the device; the backend sees only the connection";

/// Judges step `n` (at `line`)'s expectations `e` against what was seen.
pub(crate) fn check(n: usize, line: u64, e: &Expect, seen: &Observed<'_>) -> Verdicts {
    let mut v = Verdicts {
        n,
        line,
        checks: Vec::new(),
        unobserved: Vec::new(),
    };
    if let (Some(want), Vantage::Device(inside)) = (e.record_complete, &seen.vantage) {
        // The record's check leads its step's checks.
        v.record_complete(want, inside.record);
    }
    if let Some(a) = &seen.answer {
        v.answer(e, a, &seen.vantage);
    }
    if let Some(l) = &seen.listing {
        v.listing(e, l);
    }
    match &seen.vantage {
        Vantage::Device(inside) => {
            v.sound(e, inside);
            v.events(e, inside);
            v.voice(e, inside);
        }
        Vantage::Backend(outside) => {
            if let Some(c) = &outside.connection {
                v.reconnection(e, c);
            }
            v.unobservable(e);
        }
    }
    v
}

impl Verdicts {
    pub(super) fn check(&mut self, kind: Expectation, what: String, passed: bool, detail: String) {
        self.checks.push(Check {
            step: self.n,
            line: self.line,
            what,
            passed,
            detail,
            kind,
        });
    }

    fn skip(&mut self, what: &str, why: &str) {
        self.unobserved
            .push(format!("step {} (line {}): {what}: {why}", self.n, self.line));
    }

    fn record_complete(&mut self, want: bool, record: Option<&Record>) {
        let detail = record.map_or("no record for this step".to_string(), |r| {
            if r.missing.is_empty() {
                "every row has evidence".to_string()
            } else {
                format!("missing {}", r.missing.join(", "))
            }
        });
        let got = record.map(Record::is_complete);
        self.check(
            Expectation::RecordComplete,
            format!("record complete: {want}"),
            got == Some(want),
            detail,
        );
    }

    /// The reply's fields, its timing and the readback value.
    fn answer(&mut self, e: &Expect, a: &Answer<'_>, vantage: &Vantage<'_>) {
        let shown = |r: Option<&[u8]>| r.map_or_else(|| a.missing.to_string(), lossy);
        let inside = match vantage {
            Vantage::Device(inside) => Some(inside),
            Vantage::Backend(_) => None,
        };
        if let Some(want) = &e.reply {
            let (passed, detail) = match a.reply.map(lossy) {
                Some(got) if got == *want => (true, got),
                // The backend chose the id: the rest of the reply must be byte for byte the same.
                Some(got) if inside.is_none() && after_id(&got).is_some_and(|g| after_id(want) == Some(g)) => {
                    let id = reply_id(got.as_bytes()).unwrap_or(-1);
                    (
                        true,
                        format!("{got} (id {id} chosen by the backend in place of the scenario's)"),
                    )
                }
                _ => (false, shown(a.reply)),
            };
            self.check(Expectation::Reply, format!("reply is {want}"), passed, detail);
        }
        self.text(e, a.reply);
        if let Some(want) = &e.error {
            let got = a.reply.and_then(reply_error).map(|m| lossy(&m));
            self.check(
                Expectation::Reply,
                format!("error is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", shown(a.reply)),
            );
        }
        if let Some(want) = e.valid_json {
            self.check(
                Expectation::Reply,
                format!("reply is {}valid JSON", if want { "" } else { "not " }),
                a.reply.map(is_valid_json) == Some(want),
                shown(a.reply),
            );
        }
        if let (Some(want), Some(_)) = (e.reply_id, inside) {
            let got = a.reply.and_then(reply_id);
            let detail = match (got, a.reply) {
                (Some(id), _) => format!("got {id}"),
                (None, Some(_)) => "got a reply without an integer id".into(),
                (None, None) => "got no reply".into(),
            };
            self.check(
                Expectation::Reply,
                format!("reply id is {want}"),
                got == Some(want),
                detail,
            );
        }
        let after = || {
            a.after
                .map_or_else(|| a.missing.to_string(), |l| format!("reply after {l}"))
        };
        if let Some(d) = e.no_reply_within {
            let within = a.paired.filter(|(_, l)| l.within(d.0));
            let (conclusive, detail) = match vantage {
                Vantage::Device(_) => (true, shown(within.map(|(r, _)| r))),
                // Without a reply, the wait must have lasted the whole window, or the
                // connection closed; a request the backend refused to send says nothing.
                Vantage::Backend(o) => (
                    o.sent && (a.after.is_some() || o.closed || o.waited_ms.is_some_and(|w| w >= millis(d.0))),
                    after(),
                ),
            };
            self.check(
                Expectation::NoReplyWithin,
                format!("no reply within {}", d.0),
                within.is_none() && conclusive,
                detail,
            );
        }
        if let Some(d) = e.reply_within {
            let passed = a.after.is_some_and(|l| l.within(d.0));
            self.check(
                Expectation::ReplyWithin,
                format!("reply within {}", d.0),
                passed,
                after(),
            );
        }
        if let Some(inside) = inside {
            self.receipts(e, inside);
        }
        if let Some(want) = &e.value {
            let got = a.readback.cloned().unwrap_or(Value::Null);
            self.check(
                Expectation::Readback,
                format!("readback is {want}"),
                &got == want,
                format!("got {got}"),
            );
        }
    }

    /// `text` and `text_contains`: the reply's first text item.
    fn text(&mut self, e: &Expect, reply: Option<&[u8]>) {
        if e.text.is_none() && e.text_contains.is_none() {
            return;
        }
        let got = reply.and_then(reply_text);
        let shown = || format!("got {}", quoted_or(got.as_deref(), no_text(reply.is_some())));
        if let Some(want) = &e.text {
            self.check(
                Expectation::Text,
                format!("text is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                shown(),
            );
        }
        if let Some(want) = &e.text_contains {
            self.check(
                Expectation::Text,
                format!("text contains {}", quoted_or(Some(want), "")),
                got.as_deref().unwrap_or_default().contains(want.as_str()),
                shown(),
            );
        }
    }

    /// `dropped` and `reply_order`: what the receive task did with the payloads.
    fn receipts(&mut self, e: &Expect, i: &Inside<'_>) {
        if let Some(want) = e.dropped {
            let got = i.receipts.iter().any(|r| matches!(r, Receipt::Dropped { .. }));
            self.check(
                Expectation::Dropped,
                format!("dropped on receipt: {want}"),
                got == want,
                describe_receipts(i.receipts),
            );
        }
        if let Some(order) = &e.reply_order {
            let got: Vec<i64> = i.replies.iter().filter_map(|(p, _)| reply_id(p)).collect();
            self.check(
                Expectation::Order,
                format!("replies leave in the order {}", ids(order)),
                &got == order,
                format!("got {}", if got.is_empty() { "no reply".into() } else { ids(&got) }),
            );
        }
    }

    /// `contains`, `absent` and `pages` of a listing.
    fn listing(&mut self, e: &Expect, l: &Listing<'_>) {
        let counted = || {
            l.how
                .clone()
                .unwrap_or_else(|| format!("{} tools listed", l.names.len()))
        };
        let mut judge = |kind: Expectation, what: String, passed: bool, detail: String| match &l.unlike {
            Some(why) => self.skip(&what, why),
            None => self.check(kind, what, passed, detail),
        };
        for t in &e.contains {
            judge(
                Expectation::Listed(t.clone()),
                format!("list contains {t}"),
                l.names.contains(&t.as_str()),
                counted(),
            );
        }
        for t in &e.absent {
            judge(
                Expectation::Listing,
                format!("list lacks {t}"),
                !l.names.contains(&t.as_str()),
                counted(),
            );
        }
        if let Some(p) = e.pages {
            let got = l.how.clone().unwrap_or_else(|| format!("got {}", l.pages));
            judge(Expectation::Listing, format!("{p} page(s)"), l.pages == p, got);
        }
    }

    /// `events` and `no_events` against the device's trace.
    fn events(&mut self, e: &Expect, i: &Inside<'_>) {
        let counted = || format!("{} events in the step", i.events.len());
        for name in &e.events {
            self.check(
                Expectation::Event,
                format!("event {name}"),
                name.in_trace(i.events),
                counted(),
            );
        }
        for name in &e.no_events {
            self.check(
                Expectation::Event,
                format!("no event {name}"),
                !name.in_trace(i.events),
                counted(),
            );
        }
    }

    /// A reboot as a backend sees it: the connection ends and the device connects again.
    fn reconnection(&mut self, e: &Expect, c: &Connection<'_>) {
        let this = c.number;
        if e.events.contains(&EventName::DeviceRebooted) {
            self.check(
                Expectation::Event,
                "event device_rebooted".into(),
                c.next.is_some(),
                c.next
                    .map_or("the device did not connect again".into(), |(k, opened_ms)| {
                        format!(
                            "connection {this} ended ({}); connection {k} opened {:.0} ms later with a new hello",
                            c.ending.unwrap_or("?"),
                            opened_ms - c.closed_ms
                        )
                    }),
            );
        }
        if e.no_events.contains(&EventName::DeviceRebooted) {
            self.check(
                Expectation::Event,
                "no event device_rebooted".into(),
                c.ending == Some("shutdown"),
                c.ending.map_or("no connection".into(), |ending| {
                    format!("connection {this} ended: {ending}")
                }),
            );
        }
    }

    /// Expectations that never cross the connection.
    fn unobservable(&mut self, e: &Expect) {
        if e.reply_id.is_some() {
            self.skip("reply_id", "the backend personality chose the request id");
        }
        if e.dropped.is_some() {
            self.skip(
                "dropped",
                "a drop on the receive task looks like any missing reply from outside",
            );
        }
        if e.reply_order.is_some() {
            self.skip("reply_order", "bursts are not sent over the wire");
        }
        for (what, present) in [
            ("audible", e.audible.is_some()),
            ("verdict", e.verdict.is_some()),
            ("spl_db", e.spl_db.is_some()),
            ("i2s_dbfs", e.i2s_dbfs.is_some()),
            ("change_db", e.change_db.is_some()),
            ("perceived_change", e.perceived_change.is_some()),
        ] {
            if present {
                self.skip(what, "nothing is heard over the wire");
            }
        }
        if e.record_complete.is_some() {
            self.skip("record_complete", "over the wire a record never has a measured effect");
        }
        for name in e.events.iter().filter(|n| **n != EventName::DeviceRebooted) {
            self.skip(&format!("event {name}"), UNOBSERVABLE_EVENT);
        }
        for name in e.no_events.iter().filter(|n| **n != EventName::DeviceRebooted) {
            self.skip(&format!("no event {name}"), UNOBSERVABLE_EVENT);
        }
    }
}

/// A reply after its `{"jsonrpc":"2.0","id":<int>` head.
fn after_id(reply: &str) -> Option<&str> {
    let rest = reply.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    let digits = rest.trim_start_matches('-');
    let end = digits.find(|c: char| !c.is_ascii_digit())?;
    (end > 0).then(|| &digits[end..])
}

/// A text as a user reads it in a check line: JSON-quoted (`"true"`), or what stood in its
/// place (`no reply`, `no text`).
fn quoted_or(got: Option<&str>, missing: &str) -> String {
    match got {
        Some(t) => serde_json::to_string(t).unwrap_or_else(|_| format!("\"{t}\"")),
        None => missing.to_string(),
    }
}

/// What stood in place of a reply text: no reply at all, or a reply that is no text result.
fn no_text(replied: bool) -> &'static str {
    if replied {
        "a reply without a result text"
    } else {
        "no reply"
    }
}

/// Reply ids as a list: `[1, 2]`.
fn ids(ids: &[i64]) -> String {
    let shown: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// What happened to the payloads on receipt, in words.
fn describe_receipts(receipts: &[Receipt]) -> String {
    if receipts.is_empty() {
        return "nothing was delivered".into();
    }
    let shown: Vec<String> = receipts.iter().map(Receipt::to_string).collect();
    shown.join("; ")
}

/// A level at the listener: `62.3 dB SPL`, or `silence`.
pub(crate) fn level(m: &Measurement) -> String {
    match m.spl_db {
        Some(l) => format!("{l:.1} dB SPL"),
        None => "silence".to_string(),
    }
}

#[cfg(test)]
mod tests;
