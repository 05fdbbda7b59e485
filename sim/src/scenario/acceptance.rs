//! The acceptance record of one tool call, built once from what the call showed (the seed
//! article's rows, docs/reference/architecture.md §7: discovery → decision → parameters → response → (claim) →
//! effect): by the virtual-time runner from inside the device ([`SeenFrom::Device`]), or by the
//! over-the-wire judge from what a backend saw ([`SeenFrom::Backend`]). Each row says only what its
//! evidence shows, and the record lists the evidence it lacks.
//!
//! Pure: runs nothing and knows nothing about sockets.

use serde_json::Value;

use crate::audio::measure::{Measurement, perceived_change};
use crate::backend::{Exchange, SessionReport};
use crate::device::{DeviceSnapshot, Receipt};
use crate::firmware::CallPath;
use crate::hw::screen::ScreenState;
use crate::mcp::{McpTool, PropertyValue, ToolAction};
use crate::scenario::check::{ReplyLatency, level};
use crate::scenario::expect::EventName;
use crate::scenario::record::{Claim, Record};
use crate::scenario::reply::{coerced, is_valid_json, lossy, reply_error, reply_id, reply_text};
use crate::scenario::runner_voice::PendingClaim;
use crate::time::SimTime;
use crate::trace::{Event, TraceEvent};

/// What one call showed: the inputs of its record.
pub(crate) struct CallSeen<'a> {
    /// The step number of the call.
    pub step: usize,
    /// The tool called.
    pub tool: &'a str,
    /// The request id (over the wire, the one the backend chose; -1 when it sent none).
    pub id: i64,
    /// How the user's request became this call, as the scenario says.
    pub decision: Option<&'a str>,
    /// The reply to the call, and how long after the request it came.
    pub reply: Option<(&'a [u8], ReplyLatency)>,
    /// Who saw it, and what only they could see.
    pub seen: SeenFrom<'a>,
}

/// Who saw a call.
pub(crate) enum SeenFrom<'a> {
    /// The runner, inside the device.
    Device(DeviceCall<'a>),
    /// A backend, at the other end of the connection.
    Backend(BackendCall<'a>),
}

/// A call seen from inside the device, in virtual time.
pub(crate) struct DeviceCall<'a> {
    /// How the tool was discoverable (the device's own listings).
    pub discovery: String,
    /// When the request was delivered.
    pub at: SimTime,
    /// The device before the request and after the call.
    pub before: &'a DeviceSnapshot,
    pub after: &'a DeviceSnapshot,
    /// How this firmware runs a `tools/call`.
    pub call_path: CallPath,
    /// What the receive task did with the request.
    pub receipt: Option<&'a Receipt>,
    /// The tool as the device registered it (none: it has no such tool, or is not running).
    pub registered: Option<&'a McpTool>,
    /// The trace events of the call.
    pub events: &'a [TraceEvent],
    /// The reference probe before and after the call (`acoustic: true`).
    pub probe_before: Option<&'a Measurement>,
    pub probe_after: Option<&'a Measurement>,
    /// The screen just before the request and after the call (none: the board has no display).
    pub screen: Option<Box<ScreenSeen<'a>>>,
}

/// The screen around a call, seen from inside the device.
pub(crate) struct ScreenSeen<'a> {
    /// The board (to draw the screen).
    pub spec: &'a crate::board::BoardSpec,
    /// The state and the instant just before the request.
    pub before: (ScreenState, SimTime),
    /// The state and the instant after the call.
    pub after: (ScreenState, SimTime),
}

/// A call seen by a backend on its connection.
pub(crate) struct BackendCall<'a> {
    /// The arguments the backend sent.
    pub args: &'a Value,
    /// What the backend discovered on the call's connection (none: it never opened).
    pub session: Option<&'a SessionReport>,
    /// The backend's exchange for the call (none: it never got to it).
    pub exchange: Option<&'a Exchange>,
    /// How the request ended when no reply came, in words.
    pub ended: String,
    /// The first later software readback: its step, path and value.
    pub readback: Option<(usize, &'a str, &'a Value)>,
}

/// The call's acceptance record.
pub(crate) fn record(c: &CallSeen<'_>) -> Record {
    let (discovery, sent) = match &c.seen {
        SeenFrom::Device(d) => (
            d.discovery.clone(),
            format!(
                "state before: {}; request id {} at {}",
                describe_snapshot(d.before),
                c.id,
                d.at
            ),
        ),
        SeenFrom::Backend(b) => (discovered(c.tool, b.session), sent(b.exchange)),
    };
    let (effect, missing) = match &c.seen {
        SeenFrom::Device(d) => effect(d),
        SeenFrom::Backend(b) => readback(b),
    };
    Record {
        step: c.step,
        tool: c.tool.to_string(),
        id: c.id,
        discovery,
        decision: format!("{}; {sent}", c.decision.unwrap_or("(no decision recorded)")),
        parameters: match &c.seen {
            SeenFrom::Device(d) => received(c, d),
            SeenFrom::Backend(b) => arguments(c, b.args),
        },
        response: response(c),
        effect,
        missing,
        claim: None,
        screen: match &c.seen {
            SeenFrom::Device(d) => d
                .screen
                .as_ref()
                .map(|s| screen_row(s, d.before.brightness, d.after.brightness)),
            SeenFrom::Backend(_) => None,
        },
        screen_shown: match &c.seen {
            SeenFrom::Device(d) => d.screen.as_ref().map(|s| crate::scenario::record::ScreenShown {
                at: s.after.1,
                state: s.after.0.clone(),
                brightness: d.after.brightness.unwrap_or(100),
            }),
            SeenFrom::Backend(_) => None,
        },
    }
}

/// The screen row: what the screen showed after the call, and whether the call changed what a
/// person sees (the drawn panels before and after compared pixel for pixel when the display's
/// state or the backlight changed).
fn screen_row(s: &ScreenSeen<'_>, light_before: Option<u8>, light_after: Option<u8>) -> String {
    let ((before, t0), (after, t1)) = (&s.before, &s.after);
    let shown = describe_screen(after, *t1, light_after, s.spec);
    let mut changed = Vec::new();
    let field = |name: &str, a: String, b: String, changed: &mut Vec<String>| {
        if a != b {
            changed.push(format!("{name} {a} → {b}"));
        }
    };
    field("status", quoted(&before.status), quoted(&after.status), &mut changed);
    field("emotion", before.emotion.clone(), after.emotion.clone(), &mut changed);
    let chat = |st: &ScreenState| st.last_message().map_or("none".to_string(), |m| quoted(&m.1));
    field("chat line", chat(before), chat(after), &mut changed);
    let note = |st: &ScreenState, t: SimTime| st.notification_at(t).map_or("none".to_string(), quoted);
    field("notification", note(before, *t0), note(after, *t1), &mut changed);
    let preview = |st: &ScreenState, t: SimTime| {
        st.preview_at(t)
            .map_or("none".to_string(), |p| format!("{}x{} image", p.width, p.height))
    };
    field("preview", preview(before, *t0), preview(after, *t1), &mut changed);
    let theme = |st: &ScreenState| st.theme.clone().unwrap_or_else(|| "none".into());
    field("theme", theme(before), theme(after), &mut changed);
    let mute = |st: &ScreenState| if st.muted { "shown" } else { "hidden" }.to_string();
    field("mute icon", mute(before), mute(after), &mut changed);
    let light = |b: Option<u8>| b.map_or("none".to_string(), |b| format!("{b} %"));
    field("backlight", light(light_before), light(light_after), &mut changed);
    if changed.is_empty() {
        return format!("{shown}; nothing on it had changed when the call returned");
    }
    let draw = |st: &ScreenState, t: SimTime, b: Option<u8>| {
        crate::hw::picture::panel(&crate::hw::picture::Frame {
            spec: s.spec,
            state: st,
            at: t,
            brightness: b.unwrap_or(100),
        })
    };
    let seen = match (draw(before, *t0, light_before), draw(after, *t1, light_after)) {
        (Some(a), Some(b)) if a == b => {
            "but the picture is the same pixels as before: nothing visible changed".to_string()
        }
        (Some(a), Some(b)) => {
            let moved = a
                .rgba()
                .chunks_exact(4)
                .zip(b.rgba().chunks_exact(4))
                .filter(|(x, y)| x != y)
                .count();
            let all = (a.width() * a.height()).max(1) as f64;
            format!(
                "the picture changed ({:.1} % of its pixels)",
                moved as f64 * 100.0 / all
            )
        }
        _ => "not drawn".to_string(),
    };
    format!("{shown}; by the time the call returned: {}; {seen}", changed.join(", "))
}

/// The screen in words: status, emotion, chat line, notification, preview, theme, backlight.
fn describe_screen(st: &ScreenState, t: SimTime, light: Option<u8>, spec: &crate::board::BoardSpec) -> String {
    let mut parts = vec![format!("status {}", quoted(&st.status))];
    if !st.emotion.is_empty() {
        parts.push(format!("emotion {}", st.emotion));
    }
    if let Some((role, text)) = st.last_message() {
        parts.push(format!("{role} line {}", quoted(text)));
    }
    if let Some(n) = st.notification_at(t) {
        parts.push(format!("notification {}", quoted(n)));
    }
    if let Some(p) = st.preview_at(t) {
        parts.push(format!("preview {}x{} image", p.width, p.height));
    }
    if st.muted {
        parts.push("mute icon".to_string());
    }
    if let Some(theme) = &st.theme {
        parts.push(format!("theme {theme}"));
    }
    if let Some(b) = light {
        parts.push(format!("backlight {b} %"));
    }
    let shown = [
        Some(st.status.as_str()),
        st.last_message().map(|m| m.1.as_str()),
        st.notification_at(t),
    ];
    let missing = crate::hw::layout::missing_letters(spec, shown.into_iter().flatten());
    if !missing.is_empty() {
        parts.push(format!("no glyph for {} (drawn as nothing)", quoted(&missing)));
    }
    let d = &spec.display;
    let kind = match d.kind {
        crate::board::DisplayKind::Oled => "OLED, white on black whatever the theme",
        crate::board::DisplayKind::Emote => "emote display",
        _ if d.round => "round LCD",
        _ => "LCD",
    };
    format!("{} ({}x{} {kind})", parts.join(", "), d.width, d.height)
}

fn quoted(text: &str) -> String {
    format!("\u{201c}{text}\u{201d}")
}

/// How the backend discovered the tool.
fn discovered(tool: &str, session: Option<&SessionReport>) -> String {
    let Some(s) = session else {
        return "no connection".to_string();
    };
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

/// When the backend sent the request.
fn sent(exchange: Option<&Exchange>) -> String {
    match exchange {
        Some(x) if x.id >= 0 => format!("request id {} sent {:.1} ms after the backend started", x.id, x.sent_ms),
        Some(_) => "the backend refused to send it".to_string(),
        None => "the request was never sent".to_string(),
    }
}

/// The parameters row from inside: what the receive task did with the request.
fn received(c: &CallSeen<'_>, d: &DeviceCall<'_>) -> String {
    let (queued, runs) = match d.call_path {
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
    match d.receipt {
        Some(Receipt::Scheduled { args, .. }) => {
            let props = d.registered.map_or(&[][..], McpTool::properties);
            if props.is_empty() {
                return format!("no parameters; {queued}");
            }
            let shown: Vec<String> = props
                .iter()
                .zip(args)
                .map(|(p, v)| {
                    let value = match v {
                        PropertyValue::Bool(b) => b.to_string(),
                        PropertyValue::Int(i) => i.to_string(),
                        PropertyValue::Str(s) => format!("{:?}", lossy(s)),
                    };
                    let range = p.range().map(|(a, b)| format!(" (range {a}..{b})")).unwrap_or_default();
                    format!("{} = {value}{range}", p.name())
                })
                .collect();
            format!("accepted: {}; {runs}", shown.join(", "))
        }
        Some(Receipt::Answered { is_error: true, .. }) => {
            let msg = c
                .reply
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
    }
}

/// The parameters row from outside: the arguments sent, and what the reply tells of them.
fn arguments(c: &CallSeen<'_>, args: &Value) -> String {
    match c.reply {
        Some((r, _)) => match reply_error(r) {
            Some(e) => format!("arguments {args}; rejected before the callback: \"{}\"", lossy(&e)),
            None => format!("arguments {args}; a result came back, so the callback ran to its return"),
        },
        None => format!("arguments {args}; unknown whether the callback ran (no reply)"),
    }
}

/// The response row: what came back for the id, and when; or why nothing did.
fn response(c: &CallSeen<'_>) -> String {
    let Some((r, after)) = c.reply else {
        return match &c.seen {
            SeenFrom::Device(d) => format!("never sent: {}", unanswered(c.id, d)),
            SeenFrom::Backend(b) => format!("never arrived: {}", b.ended),
        };
    };
    let shape = match (reply_text(r), reply_error(r)) {
        (Some(text), _) => format!("result text {text:?} (isError false)"),
        (None, Some(e)) => format!("error \"{}\"", lossy(&e)),
        _ => format!("raw {:?}", lossy(r)),
    };
    let fate = match &c.seen {
        SeenFrom::Backend(b) => b.exchange.and_then(Exchange::fate),
        SeenFrom::Device(_) => None,
    };
    format!(
        "id {} → {shape}, {after} after the request{}{}",
        reply_id(r).map_or("?".into(), |i| i.to_string()),
        if is_valid_json(r) { "" } else { "; NOT valid JSON" },
        fate.map_or(String::new(), |f| format!("; {f}"))
    )
}

/// Why the device never sent a reply to request `id`.
fn unanswered(id: i64, d: &DeviceCall<'_>) -> String {
    d.events
        .iter()
        .find_map(|e| match &e.kind {
            Event::ReplyDropped { payload, why } if reply_id(payload) == Some(coerced(id)) => {
                Some(format!("queued, then dropped ({why})"))
            }
            _ => None,
        })
        .or_else(|| match d.receipt {
            Some(Receipt::Dropped { reason }) => Some(format!("dropped on receipt ({})", reason.as_str())),
            _ => None,
        })
        .unwrap_or_else(|| "no reply while the device ran to idle".to_string())
}

/// The effect row from inside: software readback after the call and the measured physical
/// effect; and the evidence it lacks.
fn effect(d: &DeviceCall<'_>) -> (String, Vec<String>) {
    let (before, after) = (d.before, d.after);
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    let acoustic = |parts: &mut Vec<String>, missing: &mut Vec<String>| match (d.probe_before, d.probe_after) {
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
    match d.registered.map(McpTool::action) {
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
            let level = |s: &DeviceSnapshot| s.gpio.get(gpio).map_or("-".to_string(), |on| u8::from(*on).to_string());
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
    if EventName::Panicked.in_trace(d.events) {
        parts.push("the device PANICKED and rebooted during the call".to_string());
    }
    (parts.join("; "), missing)
}

/// The effect row from outside: at best a later software readback, never a measured effect.
fn readback(b: &BackendCall<'_>) -> (String, Vec<String>) {
    let mut missing = vec!["measured effect (nothing is heard over the wire)".to_string()];
    let effect = match b.readback {
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
    (effect, missing)
}

/// Adds the claim row: the first speech after the call, `text` said at `at`, of which the
/// listener heard `heard`. Judged from facts, never from the meaning of the text.
pub(crate) fn add_claim(
    record: &mut Record,
    pending: PendingClaim,
    text: &str,
    at: SimTime,
    heard: Option<&Measurement>,
) {
    let spl = heard.and_then(|m| m.spl_db);
    let audible = heard.is_some_and(|m| m.audible);
    let before = pending.before_db;
    let mut judgements = Vec::new();
    if !pending.readback && pending.reply.as_deref() == Some("true") {
        judgements.push("unverified claim: it followed a bare `true` and nothing read the value back".into());
    }
    if !audible {
        let why = heard.map_or("nothing of it was played".to_string(), |m| {
            format!("verdict {}", m.verdict.name())
        });
        judgements.push(format!(
            "claim not heard: the speech that carried it was not audible ({why})"
        ));
    }
    if let (Some(a), Some(b)) = (spl, before) {
        // The backend's own speech before and after the call is a measured effect.
        record.effect.push_str(&format!(
            "; the backend's own speech at the listener {b:.1} → {a:.1} dB SPL ({:+.1} dB)",
            a - b
        ));
        record.missing.retain(|m| !m.starts_with("acoustic measurement"));
    }
    record.claim = Some(Claim {
        text: text.to_string(),
        at_ms: at.as_micros() as f64 / 1000.0,
        after_reply: pending.reply,
        readback: pending.readback,
        heard: audible,
        spl_db: spl,
        before_db: before,
        change_db: match (spl, before) {
            (Some(a), Some(b)) => Some(a - b),
            _ => None,
        },
        judgements,
    });
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

fn describe_snapshot(s: &DeviceSnapshot) -> String {
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
