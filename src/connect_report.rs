//! The JSON report of `connect --report`: what a live device did with its voice channel —
//! connections, state transitions, the `listen`/`abort` messages it sent, and per TTS session
//! the frames, the decoded duration, what a listener heard (I2S dBFS, Leq dB SPL, verdict), the
//! sentences and the MCP calls that arrived during the turn.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use xiaozhi_sim::audio::measure::Measurement;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::fault::Fault;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::voice::log::{Counts, Window};

use crate::live::DeviceStats;

/// How the device was run, for the report's head.
pub struct Dialled<'a> {
    /// The backend URL given (`--url`), if any.
    pub url: Option<&'a str>,
    /// The Protocol-Version header and hello version.
    pub protocol_version: i32,
    /// The faults injected from power-on.
    pub faults: &'a [Fault],
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}

/// What the listener heard of each speech window, rendered once however often it is asked for
/// (a sentence is shown in its session and again in its claim).
struct Heard<'a> {
    device: &'a Device,
    memo: RefCell<BTreeMap<(SimTime, SimTime), Measurement>>,
}

impl<'a> Heard<'a> {
    fn new(device: &'a Device) -> Self {
        Heard {
            device,
            memo: RefCell::new(BTreeMap::new()),
        }
    }

    /// What the listener heard of `w` ([`Device::heard`]).
    fn of(&self, w: Option<Window>) -> Option<Measurement> {
        let w = w?;
        let key = (w.start, w.end);
        if let Some(m) = self.memo.borrow().get(&key) {
            return Some(m.clone());
        }
        let (m, _) = self.device.heard(&w, false);
        self.memo.borrow_mut().insert(key, m.clone());
        Some(m)
    }

    fn json(&self, w: Option<Window>) -> Value {
        self.of(w)
            .and_then(|m| serde_json::to_value(m).ok())
            .unwrap_or(Value::Null)
    }
}

fn window(w: Option<Window>) -> Value {
    w.map_or(Value::Null, |w| json!({"from_ms": ms(w.start), "to_ms": ms(w.end)}))
}

#[derive(Serialize)]
struct Frames<'a> {
    #[serde(flatten)]
    counts: &'a Counts,
    dropped: u64,
    /// Frames that reached the speaker (decoded, not discarded): with `received`, how much of
    /// what the server sent was heard.
    played: u64,
}

fn frames(c: &Counts) -> Value {
    serde_json::to_value(Frames {
        counts: c,
        dropped: c.dropped(),
        played: c.played(),
    })
    .unwrap_or(Value::Null)
}

/// The report as JSON.
pub fn build(run: &Dialled<'_>, device: &Device, stats: &DeviceStats) -> Value {
    let log = device.speech_log();
    let heard = Heard::new(device);
    let snapshot = device.snapshot();
    let sessions: Vec<Value> = log
        .sessions
        .iter()
        .map(|s| {
            let until = s.stopped.map_or(f64::INFINITY, ms);
            let calls: Vec<Value> = stats
                .requests_in
                .iter()
                .filter(|r| r.method == "tools/call" && r.at_ms >= ms(s.started) && r.at_ms <= until)
                .map(|r| json!({"at_ms": r.at_ms, "tool": r.tool, "arguments": r.arguments}))
                .collect();
            let sentences: Vec<Value> = s
                .sentences
                .iter()
                .map(|x| {
                    json!({
                        "text": x.text,
                        "at_ms": ms(x.at),
                        "frames": frames(&x.counts),
                        "decoded_ms": x.decoded.as_micros() as f64 / 1000.0,
                        "window": window(x.window),
                        "heard": heard.json(x.window),
                    })
                })
                .collect();
            json!({
                "n": s.n,
                "started_ms": ms(s.started),
                "speaking_ms": s.speaking_at.map(ms),
                "stopped_ms": s.stopped.map(ms),
                "decode_rate": s.rates.map(|r| r.0),
                "output_rate": s.rates.map(|r| r.1),
                "frames": frames(&s.counts),
                "before_first_sentence": frames(&s.unsentenced),
                "decoded_ms": s.decoded.as_micros() as f64 / 1000.0,
                "window": window(s.window),
                "heard": heard.json(s.window),
                "sentences": sentences,
                "mcp_calls": calls,
            })
        })
        .collect();
    json!({
        "board": device.spec().name,
        "wire": if device.world().mqtt.is_some() { "mqtt+udp" } else { "websocket" },
        "url": run.url,
        "mqtt_endpoint": device.world().mqtt.as_ref().map(|m| m.endpoint.as_str()),
        "device_id": device.mac(),
        "protocol_version": run.protocol_version,
        "faults": run.faults.iter().map(|f| f.name()).collect::<Vec<_>>(),
        "connections": {
            "connects": stats.connects,
            "connect_failures": stats.connect_failures,
            "frames_in": stats.frames_in,
            "frames_out": stats.frames_out,
            "binary_in": stats.binary_in,
            "binary_out": stats.binary_out,
            "boots": stats.boots,
            "device_side_closes": stats.closes,
        },
        "transitions": stats.transitions.iter().map(|(at, f, t)| json!({"at_ms": at, "from": f, "to": t})).collect::<Vec<_>>(),
        "sent": stats.control_out.iter().map(|(at, t)| json!({"at_ms": at, "text": t})).collect::<Vec<_>>(),
        "user": stats.user.iter().map(|(at, l, a)| json!({"at_ms": at, "line": l, "action": a})).collect::<Vec<_>>(),
        "buttons": device.gestures().iter().map(|g| json!({
            "at_ms": ms(g.at),
            "button": g.button,
            "gesture": g.gesture.name(),
            "callback": g.action.map(|a| a.describe()),
        })).collect::<Vec<_>>(),
        "mcp_requests": stats.requests_in.iter().map(|r| json!({"at_ms": r.at_ms, "method": r.method, "tool": r.tool, "arguments": r.arguments, "id": r.id})).collect::<Vec<_>>(),
        "claims": claims(device, stats, &heard),
        "microphone": {"packets_sent": snapshot.mic_packets_sent, "packets_dropped": snapshot.mic_packets_dropped},
        "tts_sessions": sessions,
        "frames_outside_sessions": frames(&log.outside),
        "volume_at_exit": snapshot.volume,
    })
}

/// For every `tools/call`: the first sentence the backend spoke after its reply (the claim),
/// whether the listener heard it, its level against the last sentence before the call, and
/// whether a readback (`self.get_device_status`) came between. Judged from facts, never from
/// the meaning of the text.
fn claims(device: &Device, stats: &DeviceStats, heard: &Heard<'_>) -> Vec<Value> {
    let sentences: Vec<(f64, &str, Option<Window>)> = device
        .speech_log()
        .sessions
        .iter()
        .flat_map(|s| s.sentences.iter().map(|x| (ms(x.at), x.text.as_str(), x.window)))
        .collect();
    let level =
        |w: Option<Window>| -> (Option<f64>, bool) { heard.of(w).map_or((None, false), |m| (m.spl_db, m.audible)) };
    let mut out = Vec::new();
    for r in stats.requests_in.iter().filter(|r| r.method == "tools/call") {
        let (at, tool, args, id) = (r.at_ms, &r.tool, &r.arguments, r.id);
        if tool.as_deref() == Some(xiaozhi_sim::mcp::strings::TOOL_GET_DEVICE_STATUS) {
            continue;
        }
        let reply = stats.replies_out.iter().find(|(t, i, _)| *i == id && *t >= at);
        let after = reply.map_or(at, |r| r.0);
        let Some(&(said_at, text, w)) = sentences.iter().find(|(t, _, _)| *t >= after) else {
            continue;
        };
        let before = sentences
            .iter()
            .rev()
            .find(|(t, _, _)| *t < at)
            .and_then(|s| level(s.2).0);
        let (spl, heard) = level(w);
        let readback = stats.requests_in.iter().any(|r| {
            r.tool.as_deref() == Some(xiaozhi_sim::mcp::strings::TOOL_GET_DEVICE_STATUS)
                && r.at_ms >= after
                && r.at_ms <= said_at
        });
        let reply_text = reply.and_then(|r| r.2.clone());
        let mut judgements = Vec::new();
        if !readback && reply_text.as_deref() == Some("true") {
            judgements.push("unverified claim: it followed a bare `true` and nothing read the value back");
        }
        if !heard {
            judgements.push("claim not heard: the speech that carried it was not audible");
        }
        out.push(json!({
            "tool": tool,
            "arguments": args,
            "call_ms": at,
            "reply": reply_text,
            "text": text,
            "at_ms": said_at,
            "readback": readback,
            "heard": heard,
            "spl_db": spl,
            "before_db": before,
            "change_db": match (spl, before) { (Some(a), Some(b)) => Some(a - b), _ => None },
            "judgements": judgements,
        }));
    }
    out
}

/// A few lines for stderr: one per TTS session.
pub fn summary(report: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for s in report["tts_sessions"].as_array().into_iter().flatten() {
        let h = &s["heard"];
        let texts: Vec<&str> = s["sentences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["text"].as_str())
            .collect();
        out.push(format!(
            "tts session {}: {} frames received, {} decoded, {} dropped; {:.0} ms decoded; listener {} ({}); said {:?}",
            s["n"],
            s["frames"]["received"],
            s["frames"]["decoded"],
            s["frames"]["dropped"],
            s["decoded_ms"].as_f64().unwrap_or(0.0),
            h["spl_db"]
                .as_f64()
                .map_or("no sound".to_string(), |l| format!("{l:.1} dB SPL")),
            h["verdict"].as_str().unwrap_or("nothing played"),
            texts
        ));
    }
    for c in report["claims"].as_array().into_iter().flatten() {
        out.push(format!(
            "claim after {} {}: said {} at {:.0} ms; {}; {}",
            c["tool"].as_str().unwrap_or("?"),
            c["arguments"],
            c["text"],
            c["at_ms"].as_f64().unwrap_or(0.0),
            match (c["spl_db"].as_f64(), c["change_db"].as_f64()) {
                (Some(l), Some(d)) => format!("heard at {l:.1} dB SPL ({d:+.1} dB against the speech before the call)"),
                (Some(l), None) => format!("heard at {l:.1} dB SPL"),
                _ => "no sound of it reached the listener".into(),
            },
            c["judgements"].as_array().filter(|j| !j.is_empty()).map_or(
                "heard, and a readback backs it".to_string(),
                |j| j.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join("; ")
            )
        ));
    }
    out
}
