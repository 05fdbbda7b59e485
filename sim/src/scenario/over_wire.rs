//! Scenarios over the wire: a scenario's MCP steps run by a backend ([`crate::backend`]) against
//! a device on a real connection, and its expectations judged from what that backend saw.
//!
//! Over the wire only what crosses the connection is evidence: the tools the backend discovered,
//! each reply with its arrival time, connections closing and opening again. What happens inside
//! the device (dropped replies, NVS writes, what a listener hears) is not, and the report says
//! so instead of counting it as passed (`ScenarioReport::unobserved`). Steps that need the
//! device's insides (play, press, faults, power, bursts, raw sends) are refused when planning
//! (`wire_plan.rs`, which also says which connection each step runs on), at their line.
//!
//! The expectations are judged by the runner's checker (`check.rs`) and the records built by its
//! record builder (`acceptance.rs`), fed with what the backend saw.
//!
//! Knows nothing about sockets: the binary runs the plan's
//! [`Script`](crate::backend::script::Script) and hands back the reports.

use serde_json::Value;

use crate::backend::{BackendSpec, Exchange, Outcome, SessionReport};
use crate::scenario::ScenarioSpec;
use crate::scenario::StepKind;
use crate::scenario::acceptance::{self, BackendCall, CallSeen, SeenFrom};
use crate::scenario::check::{self, Answer, Connection, Listing, Observed, Outside, ReplyLatency, Vantage};
use crate::scenario::expect::Expect;
use crate::scenario::record::{Record, ScenarioReport, StepReport, Trace};
use crate::scenario::reply::reply_text;
use crate::scenario::wire_plan::{Kind, Planned, STATUS_TOOL, WirePlan};

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
    let evidence = Reported::of(plan, connections, run.backend);
    for (i, p) in plan.steps.iter().enumerate() {
        if let Some((expect, seen)) = evidence.step(i, p, &mut report) {
            let verdicts = check::check(p.n, p.line, expect, &seen);
            report.checks.extend(verdicts.checks);
            report.unobserved.extend(verdicts.unobserved);
        }
    }
    report.passed = report.checks.iter().all(|c| c.passed);
    report
}

/// What the backend's reports hold for the planned steps, found once.
struct Reported<'a> {
    connections: &'a [WireConnection<'a>],
    backend: &'a BackendSpec,
    /// Each call step's exchange: the `index`th call of its connection, for the same tool.
    exchanges: Vec<Option<&'a Exchange>>,
    /// Each readback step's number, path and value.
    readbacks: Vec<Option<(usize, &'a str, Value)>>,
}

impl<'a> Reported<'a> {
    fn of(plan: &'a WirePlan, connections: &'a [WireConnection<'a>], backend: &'a BackendSpec) -> Reported<'a> {
        let conn = |k: u32| connections.iter().find(|c| c.number == k);
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
        let readbacks = plan
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
        Reported {
            connections,
            backend,
            exchanges,
            readbacks,
        }
    }

    /// Reports the `i`th planned step; what it expects and what the backend saw of it, unless
    /// it expects nothing (`wait`, `note`).
    fn step<'p>(&self, i: usize, p: &'p Planned, report: &mut ScenarioReport) -> Option<(&'p Expect, Observed<'_>)> {
        let c = self.connections.iter().find(|c| c.number == p.connection);
        let row = |kind: StepKind, at_ms: f64, summary: String, replies: Vec<String>| StepReport {
            n: p.n,
            line: p.line,
            kind,
            at_ms,
            summary,
            sent: Vec::new(),
            replies,
            measurement: None,
        };
        let replies = |e: Option<&Exchange>| e.and_then(|e| e.reply.clone()).into_iter().collect();
        match &p.kind {
            Kind::Call {
                tool,
                args,
                decision,
                readback,
                expect,
                ..
            } => {
                let exchange = self.exchanges[i];
                let value = self.readbacks[i].as_ref().map(|(_, _, v)| v);
                let summary = match (exchange, value) {
                    (Some(e), Some(v)) => format!(
                        "readback {} = {v} (tools/call {STATUS_TOOL} id {})",
                        readback.as_deref().unwrap_or_default(),
                        e.id
                    ),
                    (Some(e), None) => format!("tools/call {tool} id {}", e.id),
                    (None, _) => not_run(c, p.connection),
                };
                let kind = if readback.is_some() {
                    StepKind::Readback
                } else {
                    StepKind::Call
                };
                let at_ms = exchange.map_or(0.0, |e| e.sent_ms);
                report.steps.push(row(kind, at_ms, summary, replies(exchange)));
                if readback.is_none() {
                    report
                        .records
                        .push(self.record(i, p.n, tool, args, decision.as_deref(), c));
                }
                Some((expect, answered(exchange, c, self.connections, value)))
            }
            Kind::Initialize { expect } => {
                let exchange = c.and_then(|c| c.session.exchanges.iter().find(|e| e.method == "initialize"));
                let summary = exchange.map_or_else(
                    || not_run(c, p.connection),
                    |e| format!("initialize id {} (sent by the backend during its discovery)", e.id),
                );
                let at_ms = exchange.map_or(0.0, |e| e.sent_ms);
                report
                    .steps
                    .push(row(StepKind::Initialize, at_ms, summary, replies(exchange)));
                Some((expect, answered(exchange, c, self.connections, None)))
            }
            Kind::List {
                with_user_tools,
                follow,
                expect,
            } => {
                let listing = discovered(self.backend, c, *with_user_tools, *follow);
                let summary = listing.how.clone().unwrap_or_default();
                let at_ms = c.map_or(0.0, |c| c.opened_ms);
                report.steps.push(row(StepKind::ListTools, at_ms, summary, Vec::new()));
                let outside = Outside {
                    sent: false,
                    closed: false,
                    waited_ms: None,
                    connection: None,
                };
                let seen = Observed {
                    answer: None,
                    listing: Some(listing),
                    vantage: Vantage::Backend(outside),
                };
                Some((expect, seen))
            }
            Kind::Wait(d) => {
                report
                    .steps
                    .push(row(StepKind::Wait, 0.0, format!("waited {d} (wall clock)"), Vec::new()));
                None
            }
            Kind::Note(text) => {
                report.steps.push(row(StepKind::Note, 0.0, text.clone(), Vec::new()));
                None
            }
        }
    }

    /// The acceptance record of the `i`th planned step, a call, as the backend saw it; its
    /// effect is the first later readback.
    fn record(
        &self,
        i: usize,
        n: usize,
        tool: &str,
        args: &Value,
        decision: Option<&str>,
        c: Option<&WireConnection<'_>>,
    ) -> Record {
        let exchange = self.exchanges[i];
        let later = self.readbacks[i + 1..].iter().flatten().next();
        acceptance::record(&CallSeen {
            step: n,
            tool,
            id: exchange.map_or(-1, |x| x.id),
            decision,
            reply: exchange.and_then(|x| {
                let after = ReplyLatency::Millis(x.reply_ms.map_or(0.0, |t| t - x.sent_ms));
                x.reply.as_deref().map(|r| (r.as_bytes(), after))
            }),
            seen: SeenFrom::Backend(BackendCall {
                args,
                session: c.map(|c| c.session),
                exchange,
                ended: ended(exchange, c),
                readback: later.map(|(n, path, v)| (*n, *path, v)),
            }),
        })
    }
}

/// What the backend saw of a request it sent (a call, or its own `initialize`).
fn answered<'a>(
    exchange: Option<&'a Exchange>,
    c: Option<&WireConnection<'a>>,
    all: &[WireConnection<'a>],
    readback: Option<&'a Value>,
) -> Observed<'a> {
    let reply = exchange.and_then(|x| x.reply.as_deref()).map(str::as_bytes);
    let after = exchange.and_then(|x| {
        x.reply
            .as_ref()
            .and(x.reply_ms)
            .map(|r| ReplyLatency::Millis(r - x.sent_ms))
    });
    let this = c.map_or(0, |c| c.number);
    Observed {
        answer: Some(Answer {
            reply,
            after,
            paired: reply.zip(after),
            missing: ended(exchange, c).into(),
            readback,
        }),
        listing: None,
        vantage: Vantage::Backend(Outside {
            sent: exchange.is_some_and(|x| x.id >= 0),
            closed: matches!(
                exchange.map(|x| &x.outcome),
                Some(Outcome::ConnectionClosed | Outcome::Pending)
            ),
            waited_ms: exchange.map(|x| match (x.reply_ms, c) {
                (Some(t), _) => t - x.sent_ms,
                (None, Some(c)) => c.closed_ms - x.sent_ms,
                (None, None) => 0.0,
            }),
            connection: Some(Connection {
                number: this,
                ending: c.map(|c| c.ending),
                closed_ms: c.map_or(0.0, |c| c.closed_ms),
                next: all
                    .iter()
                    .find(|k| k.number == this + 1)
                    .map(|k| (k.number, k.opened_ms)),
            }),
        }),
    }
}

/// The backend's own discovery on connection `c`, as the listing of a `list_tools` step that
/// asked for `with_user_tools` and `follow`: judged only when the backend lists that way.
fn discovered<'a>(
    backend: &BackendSpec,
    c: Option<&WireConnection<'a>>,
    with_user_tools: bool,
    follow: bool,
) -> Listing<'a> {
    let names: Vec<&str> = c.map_or(Vec::new(), |c| {
        c.session.tools.iter().map(|t| t.name.as_str()).collect()
    });
    let pages = c.map_or(0, |c| c.session.pages);
    let how = format!(
        "the backend's own discovery ({}: {} tools on {pages} page(s)); the step asked for{} {}",
        c.map_or("no connection", |c| c.session.personality.as_str()),
        names.len(),
        if with_user_tools { " withUserTools," } else { "" },
        if follow { "all pages" } else { "the first page" }
    );
    let b = backend;
    let capped = b.tool_cap.is_some_and(|cap| names.len() >= cap);
    let unlike = (b.with_user_tools != with_user_tools || b.follow_cursor != follow || capped).then(|| {
        format!(
            "this backend lists {}withUserTools, {}{}; the step asks {}withUserTools, {}",
            if b.with_user_tools { "with " } else { "without " },
            if b.follow_cursor {
                "all pages"
            } else {
                "the first page only"
            },
            if capped { ", capped" } else { "" },
            if with_user_tools { "with " } else { "without " },
            if follow { "all pages" } else { "the first page only" },
        )
    });
    Listing {
        names,
        pages,
        how: Some(how),
        unlike,
    }
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
