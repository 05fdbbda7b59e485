//! Scenarios over the wire: a scenario's MCP steps run by a backend ([`crate::backend`]) against
//! a device on a real connection, and its expectations judged from what that backend saw.
//!
//! Over the wire only what crosses the connection is evidence: the tools the backend discovered,
//! each reply with its arrival time, connections closing and opening again. What happens inside
//! the device (dropped replies, NVS writes, what a listener hears) is not, and the report says
//! so instead of counting it as passed (`ScenarioReport::unobserved`). Steps that need the
//! device's insides (play, press, faults, power, bursts, raw sends) are refused when planning,
//! at their line.
//!
//! Connections: a call to `self.reboot`, or a step expecting `device_rebooted`, ends the
//! device's connection; the steps after it run on the next one (script lines carry `@N`).
//!
//! Knows nothing about sockets: the binary runs the [`Script`] and hands back the reports.

use serde_json::Value;

use crate::backend::script::{Line, Script, Step as ScriptStep};
use crate::backend::{BackendSpec, Exchange, Outcome, SessionReport};
use crate::scenario::expect::no_text;
use crate::scenario::record::{Check, Record, ScenarioReport, StepReport, Trace};
use crate::scenario::reply::{is_valid_json, reply_error, reply_id, reply_text};
use crate::scenario::step_key as step_kind;
use crate::scenario::{EventName, Expect, ScenarioSpec, Step, located, quoted_or};
use crate::spec::SpecError;
use crate::time::SimDuration;

/// The status tool a `readback` step calls.
const STATUS_TOOL: &str = crate::mcp::wire::TOOL_GET_DEVICE_STATUS;

/// A scenario turned into a backend script.
#[derive(Clone, Debug)]
pub struct WirePlan {
    /// The steps as the backend performs them, one script line each.
    pub script: Script,
    /// How many connections of the device the steps span (1 + the reboots they cause).
    pub connections: u32,
    steps: Vec<Planned>,
}

#[derive(Clone, Debug)]
struct Planned {
    n: usize,
    line: u64,
    connection: u32,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    /// A `tools/call` (a `call`, or a `readback` through the status tool): the `index`th call
    /// of its connection.
    Call {
        tool: String,
        args: Value,
        index: usize,
        decision: Option<String>,
        readback: Option<String>,
        expect: Expect,
    },
    /// Judged against the backend's own `initialize` exchange on that connection.
    Initialize {
        expect: Expect,
    },
    /// Judged against the backend's own discovery on that connection.
    List {
        with_user_tools: bool,
        follow: bool,
        expect: Expect,
    },
    Wait(SimDuration),
    Note(String),
}

impl WirePlan {
    /// Plans `spec` for a backend; a step that cannot run over a connection is an error at its
    /// line.
    /// `text` is the scenario file's text (for the position of a refused fault timeline).
    pub fn of(spec: &ScenarioSpec, origin: &str, text: &str) -> Result<WirePlan, SpecError> {
        if !spec.faults.is_empty() {
            let (line, column) = crate::spec::find_field(text, "faults");
            return Err(SpecError::Invalid {
                origin: origin.to_string(),
                line,
                column,
                field: "faults".into(),
                message: "cannot run over the wire: a fault timeline acts on the device itself (run without --wire)"
                    .into(),
            });
        }
        let mut lines = Vec::new();
        let mut steps = Vec::new();
        let mut connection = 1u32;
        let mut calls_on_connection = 0usize;
        for (i, spanned) in spec.steps.iter().enumerate() {
            let n = i + 1;
            let at = &spanned.referenced;
            let line = at.line();
            let refuse = |why: &str| {
                Err(located(
                    origin,
                    at,
                    step_kind(&spanned.value),
                    &format!("cannot run over the wire: {why} (run without --wire)"),
                ))
            };
            let script_line = |step: ScriptStep, connection: u32| Line {
                line: line as usize,
                only_on: Some(connection),
                step,
            };
            let kind = match &spanned.value {
                Step::Call(c) => {
                    if c.id.is_some() {
                        return refuse("the backend personality chooses request ids");
                    }
                    if c.acoustic {
                        return refuse("an acoustic measurement needs the simulated room");
                    }
                    let args = c.args.clone().unwrap_or_else(|| Value::Object(Default::default()));
                    lines.push(script_line(
                        ScriptStep::Call {
                            tool: c.tool.value.clone(),
                            args: args.clone(),
                            wait: true,
                        },
                        connection,
                    ));
                    calls_on_connection += 1;
                    Kind::Call {
                        tool: c.tool.value.clone(),
                        args,
                        index: calls_on_connection - 1,
                        decision: c.decision.clone(),
                        readback: None,
                        expect: c.expect.clone(),
                    }
                }
                Step::Readback(r) => {
                    let args = Value::Object(Default::default());
                    lines.push(script_line(
                        ScriptStep::Call {
                            tool: STATUS_TOOL.into(),
                            args: args.clone(),
                            wait: true,
                        },
                        connection,
                    ));
                    calls_on_connection += 1;
                    Kind::Call {
                        tool: STATUS_TOOL.into(),
                        args,
                        index: calls_on_connection - 1,
                        decision: None,
                        readback: Some(r.path.clone()),
                        expect: r.expect.clone(),
                    }
                }
                Step::ListTools(l) => {
                    if l.cursor.is_some() {
                        return refuse("the backend personality pages by itself");
                    }
                    Kind::List {
                        with_user_tools: l.with_user_tools,
                        follow: l.follow,
                        expect: l.expect.clone(),
                    }
                }
                Step::Wait(d) => {
                    lines.push(script_line(ScriptStep::Wait(d.0), connection));
                    Kind::Wait(d.0)
                }
                Step::Note(t) => Kind::Note(t.clone()),
                Step::Initialize(i) => {
                    if i.id.is_some() || i.vision_url.is_some() || i.vision_token.is_some() {
                        return refuse(
                            "the backend personality sends initialize itself, with its own id and capabilities",
                        );
                    }
                    Kind::Initialize {
                        expect: i.expect.clone(),
                    }
                }
                Step::Send(_) | Step::Burst(_) => {
                    return refuse("replies to raw payloads cannot be paired over the wire");
                }
                Step::Play(_) | Step::Listen(_) => return refuse("it measures the simulated room"),
                Step::Speak(_) | Step::Wake(_) | Step::Say(_) | Step::Abort(_) => {
                    return refuse("voice steps run in virtual time only (use `connect --script` for a real backend)");
                }
                Step::Press(_) | Step::Reboot | Step::CutPower | Step::PowerOn | Step::Fault(_) | Step::Busy(_) => {
                    return refuse("it acts on the device itself, not through the backend");
                }
            };
            let ends_connection = match &kind {
                Kind::Call { tool, expect, .. } => {
                    tool == crate::mcp::wire::TOOL_REBOOT || expect.events.contains(&EventName::DeviceRebooted)
                }
                _ => false,
            };
            steps.push(Planned {
                n,
                line,
                connection,
                kind,
            });
            if ends_connection {
                connection += 1;
                calls_on_connection = 0;
            }
        }
        // Steps after the last reboot may be none: the device must still come back to show it.
        Ok(WirePlan {
            script: Script { lines },
            connections: connection,
            steps,
        })
    }
}

/// One connection of the device as the backend reported it.
#[derive(Clone, Copy, Debug)]
pub struct WireConnection<'a> {
    /// The device's connection count (1 = first, 2 = after a reboot, …).
    pub number: u32,
    /// What the backend recorded on this connection (discovery, exchanges, notes).
    pub session: &'a SessionReport,
    /// How it ended, in words (`tcp_closed_without_close_frame`, `shutdown`, …).
    pub ending: &'a str,
    /// When the connection opened, in ms on the backend's clock.
    pub opened_ms: f64,
    /// When it closed, in ms on the same clock.
    pub closed_ms: f64,
}

/// Where the run took place, for the report's header.
#[derive(Clone, Debug)]
pub struct WireRun<'a> {
    /// The scenario file's path.
    pub origin: &'a str,
    /// The board's name.
    pub board: &'a str,
    /// The board's firmware version.
    pub firmware: &'a str,
    /// The seed of the device identity.
    pub seed: u64,
    /// `ws://…` and the personality, e.g. `ws://127.0.0.1:8000/xiaozhi/v1/ (backend xinnan-py)`.
    pub over: String,
    /// The personality that ran the steps (its discovery decides what `list_tools` can judge).
    pub backend: &'a BackendSpec,
}

const UNOBSERVABLE_EVENT: &str = "happens inside the device; the backend sees only the connection";

/// Judges `plan`'s steps from the backend's reports of the device's connections.
pub fn judge(
    spec: &ScenarioSpec,
    plan: &WirePlan,
    run: WireRun<'_>,
    connections: &[WireConnection<'_>],
) -> ScenarioReport {
    let mut report = ScenarioReport {
        name: spec.name.clone(),
        file: run.origin.to_string(),
        board: run.board.to_string(),
        firmware: run.firmware.to_string(),
        seed: run.seed,
        card: spec.card,
        description: spec.description.clone(),
        passed: false,
        steps: Vec::new(),
        records: Vec::new(),
        checks: Vec::new(),
        trace: Trace::default(),
        files: Vec::new(),
        over: Some(run.over),
        unobserved: Vec::new(),
        timeline: Default::default(),
    };
    let conn = |k: u32| connections.iter().find(|c| c.number == k);
    // Each call step's exchange (the `index`th call of its connection, for the same tool) and
    // each readback's value, found once.
    let exchanges: Vec<Option<&Exchange>> = plan
        .steps
        .iter()
        .map(|p| match &p.kind {
            Kind::Call { tool, index, .. } => conn(p.connection).and_then(|c| {
                c.session
                    .exchanges
                    .iter()
                    .filter(|e| e.method == "tools/call")
                    .nth(*index)
                    .filter(|e| e.tool.as_deref() == Some(tool.as_str()))
            }),
            _ => None,
        })
        .collect();
    let readbacks: Vec<Option<(usize, &str, Value)>> = plan
        .steps
        .iter()
        .zip(&exchanges)
        .map(|(p, exchange)| match &p.kind {
            Kind::Call {
                readback: Some(path), ..
            } => Some((p.n, path.as_str(), status_value(*exchange, path))),
            _ => None,
        })
        .collect();
    for (i, p) in plan.steps.iter().enumerate() {
        let mut judge = Judge {
            n: p.n,
            line: p.line,
            checks: &mut report.checks,
            unobserved: &mut report.unobserved,
        };
        let c = conn(p.connection);
        match &p.kind {
            Kind::Call {
                tool,
                args,
                decision,
                readback,
                expect,
                ..
            } => {
                let exchange = exchanges[i];
                let value = readbacks[i].as_ref().map(|(_, _, v)| v);
                let summary = match (exchange, value) {
                    (Some(e), Some(v)) => format!(
                        "readback {} = {v} (tools/call {STATUS_TOOL} id {})",
                        readback.as_deref().unwrap_or_default(),
                        e.id
                    ),
                    (Some(e), None) => format!("tools/call {tool} id {}", e.id),
                    (None, _) => not_run(c, p.connection),
                };
                judge.call(expect, exchange, c, connections, value);
                report.steps.push(StepReport {
                    n: p.n,
                    line: p.line,
                    kind: if readback.is_some() { "readback" } else { "call" }.into(),
                    at_ms: exchange.map_or(0.0, |e| e.sent_ms),
                    summary,
                    sent: Vec::new(),
                    replies: exchange.and_then(|e| e.reply.clone()).into_iter().collect(),
                    measurement: None,
                });
                if readback.is_none() {
                    let later = readbacks[i + 1..].iter().flatten().next();
                    report.records.push(record(
                        p.n,
                        tool,
                        args,
                        decision.as_deref(),
                        exchange,
                        c,
                        later.map(|(n, path, v)| (*n, *path, v)),
                    ));
                }
            }
            Kind::Initialize { expect } => {
                let exchange = c.and_then(|c| c.session.exchanges.iter().find(|e| e.method == "initialize"));
                judge.call(expect, exchange, c, connections, None);
                report.steps.push(StepReport {
                    n: p.n,
                    line: p.line,
                    kind: "initialize".into(),
                    at_ms: exchange.map_or(0.0, |e| e.sent_ms),
                    summary: exchange.map_or_else(
                        || not_run(c, p.connection),
                        |e| format!("initialize id {} (sent by the backend during its discovery)", e.id),
                    ),
                    sent: Vec::new(),
                    replies: exchange.and_then(|e| e.reply.clone()).into_iter().collect(),
                    measurement: None,
                });
            }
            Kind::List {
                with_user_tools,
                follow,
                expect,
            } => {
                let names: Vec<&str> = c.map_or(Vec::new(), |c| {
                    c.session.tools.iter().map(|t| t.name.as_str()).collect()
                });
                let pages = c.map_or(0, |c| c.session.pages);
                let how = format!(
                    "the backend's own discovery ({}: {} tools on {pages} page(s)); the step asked for{} {}",
                    c.map_or("no connection", |c| c.session.personality.as_str()),
                    names.len(),
                    if *with_user_tools { " withUserTools," } else { "" },
                    if *follow { "all pages" } else { "the first page" }
                );
                let b = run.backend;
                let capped = b.tool_cap.is_some_and(|cap| names.len() >= cap);
                if b.with_user_tools == *with_user_tools && b.follow_cursor == *follow && !capped {
                    for t in &expect.contains {
                        judge.check(format!("list contains {t}"), names.contains(&t.as_str()), how.clone());
                    }
                    for t in &expect.absent {
                        judge.check(format!("list lacks {t}"), !names.contains(&t.as_str()), how.clone());
                    }
                    if let Some(want) = expect.pages {
                        judge.check(format!("{want} page(s)"), pages == want, how.clone());
                    }
                } else {
                    let why = format!(
                        "this backend lists {}withUserTools, {}{}; the step asks {}withUserTools, {}",
                        if b.with_user_tools { "with " } else { "without " },
                        if b.follow_cursor {
                            "all pages"
                        } else {
                            "the first page only"
                        },
                        if capped { ", capped" } else { "" },
                        if *with_user_tools { "with " } else { "without " },
                        if *follow { "all pages" } else { "the first page only" },
                    );
                    for t in &expect.contains {
                        judge.skip(&format!("list contains {t}"), &why);
                    }
                    for t in &expect.absent {
                        judge.skip(&format!("list lacks {t}"), &why);
                    }
                    if let Some(want) = expect.pages {
                        judge.skip(&format!("{want} page(s)"), &why);
                    }
                }
                judge.unobservable(expect);
                report.steps.push(StepReport {
                    n: p.n,
                    line: p.line,
                    kind: "list_tools".into(),
                    at_ms: c.map_or(0.0, |c| c.opened_ms),
                    summary: how,
                    sent: Vec::new(),
                    replies: Vec::new(),
                    measurement: None,
                });
            }
            Kind::Wait(d) => report.steps.push(StepReport {
                n: p.n,
                line: p.line,
                kind: "wait".into(),
                at_ms: 0.0,
                summary: format!("waited {d} (wall clock)"),
                sent: Vec::new(),
                replies: Vec::new(),
                measurement: None,
            }),
            Kind::Note(text) => report.steps.push(StepReport {
                n: p.n,
                line: p.line,
                kind: "note".into(),
                at_ms: 0.0,
                summary: text.clone(),
                sent: Vec::new(),
                replies: Vec::new(),
                measurement: None,
            }),
        }
    }
    report.passed = report.checks.iter().all(|c| c.passed);
    report
}

/// The value at the dotted `path` in the status JSON a `self.get_device_status` reply carries
/// (`null` when there is no such reply or value).
fn status_value(exchange: Option<&Exchange>, path: &str) -> Value {
    exchange
        .and_then(|e| e.reply.as_deref())
        .and_then(|r| reply_text(r.as_bytes()))
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .map_or(Value::Null, |s| path.split('.').fold(&s, |v, k| &v[k]).clone())
}

fn not_run(c: Option<&WireConnection<'_>>, k: u32) -> String {
    match c {
        None => format!("not run: connection {k} of the device never opened"),
        Some(c) => format!("not run: connection {k} ended ({}) before this step", c.ending),
    }
}

struct Judge<'a> {
    n: usize,
    line: u64,
    checks: &'a mut Vec<Check>,
    unobserved: &'a mut Vec<String>,
}

impl Judge<'_> {
    fn check(&mut self, what: String, passed: bool, detail: String) {
        self.checks.push(Check {
            step: self.n,
            line: self.line,
            what,
            passed,
            detail,
        });
    }

    fn skip(&mut self, what: &str, why: &str) {
        self.unobserved
            .push(format!("step {} (line {}): {what}: {why}", self.n, self.line));
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

    fn call(
        &mut self,
        e: &Expect,
        exchange: Option<&Exchange>,
        c: Option<&WireConnection<'_>>,
        all: &[WireConnection<'_>],
        readback: Option<&Value>,
    ) {
        let reply = exchange.and_then(|x| x.reply.as_deref());
        let shown = || reply.map_or_else(|| ended(exchange, c), str::to_string);
        if let Some(want) = &e.reply {
            let (passed, detail) = match reply {
                Some(got) if got == want => (true, shown()),
                // The backend chose the id: the rest of the reply must be byte for byte the same.
                Some(got) => match (after_id(got), after_id(want)) {
                    (Some(a), Some(b)) if a == b => (
                        true,
                        format!(
                            "{got} (id {} chosen by the backend in place of the scenario's)",
                            reply_id(got.as_bytes()).unwrap_or(-1)
                        ),
                    ),
                    _ => (false, shown()),
                },
                None => (false, shown()),
            };
            self.check(format!("reply is {want}"), passed, detail);
        }
        if let Some(want) = &e.text {
            let got = reply.and_then(|r| reply_text(r.as_bytes()));
            self.check(
                format!("text is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(reply.is_some()))),
            );
        }
        if let Some(want) = &e.text_contains {
            let got = reply.and_then(|r| reply_text(r.as_bytes()));
            self.check(
                format!("text contains {}", quoted_or(Some(want), "")),
                got.as_deref().unwrap_or_default().contains(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(reply.is_some()))),
            );
        }
        if let Some(want) = &e.error {
            let got = reply.and_then(|r| reply_error(r.as_bytes()));
            self.check(
                format!("error is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_bytes()),
                format!("got {}", shown()),
            );
        }
        if let Some(want) = e.valid_json {
            let got = reply.map(|r| is_valid_json(r.as_bytes()));
            self.check(
                format!("reply is {}valid JSON", if want { "" } else { "not " }),
                got == Some(want),
                shown(),
            );
        }
        let latency = exchange.and_then(|x| x.reply.as_ref().and(x.reply_ms).map(|r| r - x.sent_ms));
        if let Some(d) = e.no_reply_within {
            let limit = d.0.as_micros() as f64 / 1000.0;
            let passed = latency.is_none_or(|l| l > limit);
            // Without a reply, the wait must have lasted the whole window, or the connection
            // closed (a reply cannot arrive on a later connection).
            let waited = exchange.map(|x| match (x.reply_ms, c) {
                (Some(t), _) => t - x.sent_ms,
                (None, Some(c)) => c.closed_ms - x.sent_ms,
                (None, None) => 0.0,
            });
            let closed = matches!(
                exchange.map(|x| &x.outcome),
                Some(Outcome::ConnectionClosed | Outcome::Pending)
            );
            let conclusive = latency.is_some() || closed || waited.is_some_and(|w| w >= limit);
            // A request the backend refused to send says nothing about the device.
            let sent = exchange.is_some_and(|x| x.id >= 0);
            self.check(
                format!("no reply within {}", d.0),
                passed && sent && conclusive,
                match (latency, exchange) {
                    (Some(l), _) => format!("reply after {l:.1} ms"),
                    (None, Some(_)) => ended(exchange, c),
                    (None, None) => "the request was never sent".into(),
                },
            );
        }
        if let Some(d) = e.reply_within {
            let limit = d.0.as_micros() as f64 / 1000.0;
            self.check(
                format!("reply within {}", d.0),
                latency.is_some_and(|l| l <= limit),
                latency.map_or_else(|| ended(exchange, c), |l| format!("reply after {l:.1} ms")),
            );
        }
        if let Some(want) = &e.value {
            let got = readback.cloned().unwrap_or(Value::Null);
            self.check(format!("readback is {want}"), &got == want, format!("got {got}"));
        }
        let this = c.map_or(0, |c| c.number);
        if e.events.contains(&EventName::DeviceRebooted) {
            let next = all.iter().find(|k| k.number == this + 1);
            self.check(
                "event device_rebooted".into(),
                next.is_some(),
                next.map_or("the device did not connect again".into(), |k| {
                    format!(
                        "connection {this} ended ({}); connection {} opened {:.0} ms later with a new hello",
                        c.map_or("?", |c| c.ending),
                        k.number,
                        k.opened_ms - c.map_or(0.0, |c| c.closed_ms)
                    )
                }),
            );
        }
        if e.no_events.contains(&EventName::DeviceRebooted) {
            let same = c.is_some_and(|c| c.ending == "shutdown");
            self.check(
                "no event device_rebooted".into(),
                same,
                c.map_or("no connection".into(), |c| {
                    format!("connection {this} ended: {}", c.ending)
                }),
            );
        }
        self.unobservable(e);
    }
}

/// A reply after its `{"jsonrpc":"2.0","id":<int>` head.
fn after_id(reply: &str) -> Option<&str> {
    let rest = reply.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    let digits = rest.trim_start_matches('-');
    let end = digits.find(|c: char| !c.is_ascii_digit())?;
    (end > 0).then(|| &digits[end..])
}

/// How a request without a reply ended, in words.
fn ended(exchange: Option<&Exchange>, c: Option<&WireConnection<'_>>) -> String {
    match (exchange, c) {
        (None, _) => "the request was never sent".into(),
        (Some(x), _) if x.id < 0 => {
            let why = format!(
                "no traffic: {} is not among the tools this backend registered",
                x.tool.as_deref().unwrap_or("the tool")
            );
            match x.fate() {
                Some(f) => format!("{why}; {f}"),
                None => why,
            }
        }
        (Some(x), Some(c)) => match x.outcome {
            Outcome::TimedOut => format!(
                "no reply: the backend gave up (timeout) {:.0} ms after the request",
                x.reply_ms.map_or(0.0, |t| t - x.sent_ms)
            ),
            _ => format!(
                "no reply: the connection ended ({}) {:.0} ms after the request; a reply cannot arrive on a later connection",
                c.ending,
                c.closed_ms - x.sent_ms
            ),
        },
        (Some(_), None) => "no reply".into(),
    }
}

/// The acceptance record as the backend can write it: everything up to the response is on the
/// wire; the effect is at best a later software readback, never a measured one.
fn record(
    n: usize,
    tool: &str,
    args: &Value,
    decision: Option<&str>,
    exchange: Option<&Exchange>,
    c: Option<&WireConnection<'_>>,
    readback: Option<(usize, &str, &Value)>,
) -> Record {
    let discovery = match c {
        None => "no connection".to_string(),
        Some(c) => {
            let s = c.session;
            match s.tools.iter().find(|t| t.name == tool) {
                Some(t) => format!(
                    "discovered by the backend ({}: {} tools on {} page(s)), offered to its LLM as {}",
                    s.personality,
                    s.tools.len(),
                    s.pages,
                    t.llm_name
                ),
                None => format!(
                    "NOT among the {} tools the backend ({}) discovered on {} page(s): its LLM cannot pick it; sent by name all the same",
                    s.tools.len(),
                    s.personality,
                    s.pages
                ),
            }
        }
    };
    let decision = format!(
        "{}; {}",
        decision.unwrap_or("(no decision recorded)"),
        match exchange {
            Some(x) if x.id >= 0 => format!("request id {} sent {:.1} ms after the backend started", x.id, x.sent_ms),
            Some(_) => "the backend refused to send it".to_string(),
            None => "the request was never sent".to_string(),
        }
    );
    let reply = exchange.and_then(|x| x.reply.as_deref());
    let parameters = match reply {
        Some(r) if reply_error(r.as_bytes()).is_some() => format!(
            "arguments {args}; rejected before the callback: \"{}\"",
            String::from_utf8_lossy(&reply_error(r.as_bytes()).unwrap_or_default())
        ),
        Some(_) => format!("arguments {args}; a result came back, so the callback ran to its return"),
        None => format!("arguments {args}; unknown whether the callback ran (no reply)"),
    };
    let response = match (exchange, reply) {
        (Some(x), Some(r)) => {
            let shape = match (reply_text(r.as_bytes()), reply_error(r.as_bytes())) {
                (Some(text), _) => format!("result text {text:?} (isError false)"),
                (None, Some(e)) => format!("error \"{}\"", String::from_utf8_lossy(&e)),
                _ => format!("raw {r:?}"),
            };
            format!(
                "id {} → {shape}, {:.1} ms after the request{}{}",
                reply_id(r.as_bytes()).map_or("?".into(), |i| i.to_string()),
                x.reply_ms.map_or(0.0, |t| t - x.sent_ms),
                if is_valid_json(r.as_bytes()) {
                    ""
                } else {
                    "; NOT valid JSON"
                },
                x.fate().map_or(String::new(), |f| format!("; {f}"))
            )
        }
        (x, _) => format!("never arrived: {}", ended(x, c)),
    };
    let mut missing = vec!["measured effect (nothing is heard over the wire)".to_string()];
    let effect = match readback {
        Some((k, path, Value::Null)) => {
            format!("software readback at step {k} ({path}) got no value; the physical effect is not observable here")
        }
        Some((k, path, v)) => {
            format!("software readback at step {k}: {path} = {v}; the physical effect is not observable here")
        }
        None => {
            missing.insert(0, "software readback (add a `readback` step)".into());
            "the backend saw only the reply".into()
        }
    };
    Record {
        step: n,
        tool: tool.to_string(),
        id: exchange.map_or(-1, |x| x.id),
        discovery,
        decision,
        parameters,
        response,
        effect,
        missing,
        claim: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<WirePlan, String> {
        let spec = ScenarioSpec::from_yaml("s.yaml", text).map_err(|e| e.to_string())?;
        WirePlan::of(&spec, "s.yaml", text).map_err(|e| e.to_string())
    }

    #[test]
    fn steps_after_a_reboot_run_on_the_next_connection() {
        let p = plan(
            "name: n\nboard: b\nsteps:\n  - call: { tool: self.audio_speaker.set_volume, args: { volume: 0 } }\n  - wait: 1s\n  - call: { tool: self.reboot }\n  - readback: { path: audio_speaker.volume, expect: { value: 10 } }\n  - call: { tool: self.x, expect: { events: [device_rebooted] } }\n  - note: done\n",
        )
        .unwrap();
        let lines: Vec<(usize, Option<u32>, String)> = p
            .script
            .lines
            .iter()
            .map(|l| {
                let what = match &l.step {
                    ScriptStep::Call { tool, args, wait } => format!("call {tool} {args} {wait}"),
                    ScriptStep::Wait(d) => format!("wait {d}"),
                    other => format!("{other:?}"),
                };
                (l.line, l.only_on, what)
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                (
                    4,
                    Some(1),
                    r#"call self.audio_speaker.set_volume {"volume":0} true"#.to_string()
                ),
                (5, Some(1), "wait 1s".to_string()),
                (6, Some(1), "call self.reboot {} true".to_string()),
                (7, Some(2), "call self.get_device_status {} true".to_string()),
                (8, Some(2), "call self.x {} true".to_string()),
            ]
        );
        assert_eq!(p.connections, 3, "two steps end a connection");
    }

    #[test]
    fn steps_that_act_on_the_device_are_refused_at_their_line() {
        let head = "name: n\nboard: b\nsteps:\n  - note: first\n";
        for (step, why) in [
            (
                "  - play: { tone: { hz: 1000 } }\n",
                "s.yaml:5:5: play: cannot run over the wire: it measures the simulated room",
            ),
            (
                "  - call: { tool: t, id: 7 }\n",
                "s.yaml:5:5: call: cannot run over the wire: the backend personality chooses request ids",
            ),
            (
                "  - call: { tool: t, acoustic: true }\n",
                "s.yaml:5:5: call: cannot run over the wire: an acoustic measurement",
            ),
            (
                "  - send: { payload: x }\n",
                "s.yaml:5:5: send: cannot run over the wire: replies to raw payloads",
            ),
            (
                "  - reboot\n",
                "s.yaml:5:5: reboot: cannot run over the wire: it acts on the device itself",
            ),
            (
                "  - list_tools: { cursor: abc }\n",
                "s.yaml:5:5: list_tools: cannot run over the wire: the backend personality pages",
            ),
            (
                "  - initialize: { vision_url: http://x }\n",
                "s.yaml:5:5: initialize: cannot run over the wire",
            ),
        ] {
            let err = plan(&format!("{head}{step}")).unwrap_err();
            assert!(err.starts_with(why), "{err}\nwanted {why}");
        }
        let err = plan("name: n\nboard: b\nfaults:\n  - { at: 1s, set: codec_dummy }\nsteps: []\n").unwrap_err();
        assert!(err.starts_with("s.yaml:3:1: faults: cannot run over the wire"), "{err}");
    }

    #[test]
    fn replies_compare_after_the_id_the_backend_chose() {
        assert_eq!(
            after_id(r#"{"jsonrpc":"2.0","id":20001,"result":{}}"#),
            Some(r#","result":{}}"#)
        );
        assert_eq!(
            after_id(r#"{"jsonrpc":"2.0","id":-3,"error":{}}"#),
            Some(r#","error":{}}"#)
        );
        assert_eq!(after_id(r#"{"jsonrpc":"2.0","id":"7","result":{}}"#), None);
        assert_eq!(after_id(r#"{"jsonrpc":"2.0","id":,"result":{}}"#), None);
        assert_eq!(after_id("garbage"), None);
    }
}
