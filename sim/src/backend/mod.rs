//! A xiaozhi backend as the MCP *client* (docs/reference/architecture.md §8,
//! docs/reference/backends.md): one sans-IO state machine per device connection, driven by a
//! [`BackendSpec`] — a *personality* written as data that reproduces how a real server drives
//! devices (ids, delays, paging, caps, timeouts, what the LLM receives for a `true`, what happens
//! to pending calls on close). Handed `now`, the headers and the frames by the socket layer (in
//! the binary), it hands back frames to send and a report. [`scripted::ScriptedBackend`] wraps a
//! session with its script and fault, for the server and [`crate::loopback::Loopback`].
pub mod gateway;
pub mod ota;
pub mod report;
pub mod result;
pub mod script;
pub mod scripted;
pub mod spec;
pub mod vad;
pub mod voice_side;
pub mod wire;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::time::SimTime;
pub use report::{Exchange, KnownTool, Outcome, Phase, SessionReport};
pub use spec::{BackendSpec, CallOnClose, Delivery, EnvelopeStyle, InitAt, NameMapping, ResultToLlm};
pub use wire::{frame_type, is_abort, python_json};

/// What the socket layer must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send one text frame.
    Send(String),
    /// Send one binary frame (speech).
    Binary(Vec<u8>),
    /// Close the connection (a WebSocket close frame).
    Close,
}

#[derive(Clone, Debug)]
struct Pending {
    index: usize,
    deadline: SimTime,
}

/// One device connection.
pub struct Session {
    spec: Arc<BackendSpec>,
    phase: Phase,
    device_id: String,
    session_id: String,
    device_audio_params: Option<Value>,
    hello_seen: bool,
    tools: Vec<KnownTool>,
    pages: usize,
    exchanges: Vec<Exchange>,
    pending: BTreeMap<i64, Pending>,
    init_id: i64,
    list_id: i64,
    next_list_id: i64,
    next_call_id: i64,
    list_at: Option<SimTime>,
    heartbeat_at: Option<SimTime>,
    queued_calls: VecDeque<(String, Value)>,
    notes: Vec<String>,
    /// Actions decided but not yet taken by the socket layer.
    outbox: VecDeque<Action>,
    /// The ear and the voice (`backend::voice_side`).
    voice: voice_side::VoiceSide,
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}

impl Session {
    /// A device connected. `headers` are the handshake headers (any case); `seed` makes the
    /// session id deterministic.
    pub fn accept(spec: Arc<BackendSpec>, now: SimTime, headers: &[(String, String)], seed: u64) -> Session {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let device_id = header("device-id").unwrap_or_default();
        let version = header("protocol-version")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        let session_id = match spec.session_id {
            spec::SessionIdScheme::Uuid => {
                let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let y = x.rotate_left(17) ^ 0x5851_F42D_4C95_7F2D;
                format!(
                    "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
                    (x >> 32) as u32,
                    (x >> 16) as u16,
                    x as u16 & 0xfff,
                    0x8000 | (y >> 48) as u16 & 0x3fff,
                    y & 0xffff_ffff_ffff
                )
            }
            spec::SessionIdScheme::DeviceMac => format!("device-{}", device_id.replace(':', "_")),
        };
        let mut s = Session {
            phase: Phase::AwaitingHello,
            device_id,
            session_id,
            device_audio_params: None,
            hello_seen: false,
            tools: Vec::new(),
            pages: 0,
            exchanges: Vec::new(),
            pending: BTreeMap::new(),
            init_id: spec.init_id,
            list_id: 0,
            next_list_id: spec.list_id_from,
            next_call_id: spec.call_id_from,
            list_at: None,
            heartbeat_at: None,
            queued_calls: VecDeque::new(),
            notes: Vec::new(),
            outbox: VecDeque::new(),
            voice: voice_side::VoiceSide::default(),
            spec,
        };
        s.voice = voice_side::VoiceSide::new(&s.session_id, version);
        if s.spec.init_at == InitAt::Accept {
            let mut actions = Vec::new();
            s.send_initialize(now, &mut actions);
            s.outbox.extend(actions);
        }
        s
    }

    /// The next thing the socket layer must do (send a frame, close), in order. Its answer can
    /// change after every `accept`, `handle_*`, `call`, `raw` and `frame`.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.outbox.pop_front()
    }

    /// Whether [`Session::poll_action`] has something.
    pub fn has_actions(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Where the session is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Whether discovery finished and calls go out at once.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    fn envelope(&self, payload: &Value) -> String {
        match self.spec.envelope {
            EnvelopeStyle::Python => format!("{{\"type\": \"mcp\", \"payload\": {}}}", python_json(payload)),
            EnvelopeStyle::Plain => json!({"type": "mcp", "payload": payload}).to_string(),
            EnvelopeStyle::SessionId => {
                json!({"session_id": self.session_id, "type": "mcp", "payload": payload}).to_string()
            }
            EnvelopeStyle::Java => {
                let mut p = Map::new();
                for k in ["jsonrpc", "method", "params", "id", "result", "error"] {
                    p.insert(k.into(), payload.get(k).cloned().unwrap_or(Value::Null));
                }
                json!({"type": "mcp", "sessionId": self.session_id, "payload": Value::Object(p)}).to_string()
            }
        }
    }

    fn request(
        &mut self,
        now: SimTime,
        id: i64,
        method: &str,
        params: Option<Value>,
        tool: Option<String>,
        out: &mut Vec<Action>,
    ) {
        let mut payload = Map::new();
        payload.insert("jsonrpc".into(), "2.0".into());
        payload.insert("id".into(), id.into());
        payload.insert("method".into(), method.into());
        if let Some(p) = params {
            payload.insert("params".into(), p);
        }
        let frame_payload = Value::Object(payload);
        let frame = self.envelope(&frame_payload);
        // A new request with an id already pending orphans the old one (ids are reused).
        if let Some(old) = self.pending.remove(&id) {
            self.notes
                .push(format!("id {id} reused while request #{} was pending", old.index));
        }
        let index = self.exchanges.len();
        let mut exchange = Exchange::new(id, method, tool, now);
        if method == "tools/call" {
            exchange.args = frame_payload.pointer("/params/arguments").cloned();
        }
        self.exchanges.push(exchange);
        let timeout = if method == "tools/call" {
            self.spec.call_timeout.0
        } else {
            self.spec.discovery_timeout.0
        };
        self.pending.insert(
            id,
            Pending {
                index,
                deadline: now + timeout,
            },
        );
        out.push(Action::Send(frame));
    }

    fn send_initialize(&mut self, now: SimTime, out: &mut Vec<Action>) {
        self.phase = Phase::Initializing;
        let params: Value = serde_json::from_str(&self.spec.initialize_params).unwrap_or_else(|_| json!({}));
        let id = self.init_id;
        self.request(now, id, "initialize", Some(params), None, out);
    }

    fn send_list(&mut self, now: SimTime, cursor: Option<String>, out: &mut Vec<Action>) {
        self.phase = Phase::Listing;
        let id = if self.spec.list_id_fixed {
            self.spec.list_id_from
        } else {
            self.next_list_id
        };
        self.next_list_id = id + 1;
        self.list_id = id;
        let mut params = match (&cursor, self.spec.list_first_params.as_deref()) {
            (None, None) => None,
            (None, Some(first)) => Some(serde_json::from_str(first).unwrap_or_else(|_| json!({}))),
            (Some(c), _) => Some(json!({ "cursor": c })),
        };
        if self.spec.with_user_tools {
            let p = params.get_or_insert_with(|| json!({}));
            p["withUserTools"] = Value::Bool(true);
        }
        self.request(now, id, "tools/list", params, None, out);
    }

    /// A text frame from the device.
    pub fn handle_text(&mut self, now: SimTime, text: &str) {
        let out = self.on_text(now, text);
        self.outbox.extend(out);
    }

    fn on_text(&mut self, now: SimTime, text: &str) -> Vec<Action> {
        let mut out = Vec::new();
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            let _ = now;
            self.notes.push(format!(
                "non-JSON frame ({} bytes): no request can be matched to it",
                text.len()
            ));
            if self.spec.echo_invalid_json {
                out.push(Action::Send(text.to_string()));
            }
            return out;
        };
        match frame_type(&v) {
            Some("hello") => self.on_device_hello(now, &v, &mut out),
            Some("listen" | "abort") => {
                out.extend(self.outbox.drain(..));
                self.on_voice_text(now, &v);
                out.extend(self.outbox.drain(..));
            }
            Some("mcp") => {
                if !self.hello_seen && self.spec.close_on_mcp_before_hello {
                    self.notes
                        .push("mcp frame before a hello with features.mcp: closing".into());
                    out.push(Action::Close);
                    return out;
                }
                if let Some(payload) = v.get("payload") {
                    self.on_payload(now, payload, &mut out);
                }
            }
            _ => {}
        }
        out
    }

    fn on_device_hello(&mut self, now: SimTime, v: &Value, out: &mut Vec<Action>) {
        let mcp = v["features"]["mcp"].as_bool().unwrap_or(false);
        self.device_audio_params = v.get("audio_params").cloned();
        let audio_params = if self.spec.echo_audio_params {
            self.device_audio_params
                .clone()
                .unwrap_or_else(|| json!({"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}))
        } else {
            serde_json::from_str(&self.spec.audio_params).unwrap_or_else(|_| json!({}))
        };
        let ap_text = match self.spec.envelope {
            EnvelopeStyle::Python => python_json(&audio_params),
            _ => audio_params.to_string(),
        };
        let hello = self
            .spec
            .hello
            .replace("{session_id}", &self.session_id)
            .replace("{audio_params}", &ap_text);
        out.push(Action::Send(hello));
        self.hello_seen = mcp || !self.spec.requires_mcp_feature;
        if (mcp || !self.spec.requires_mcp_feature) && self.spec.init_at == InitAt::AfterHello {
            // A repeated hello restarts MCP on the same socket (old pending orphaned).
            self.pending.clear();
            self.tools.clear();
            self.pages = 0;
            self.send_initialize(now, out);
        }
    }

    fn on_payload(&mut self, now: SimTime, payload: &Value, out: &mut Vec<Action>) {
        if payload.get("method").is_some() {
            self.notes.push("device-originated request ignored".into());
            return;
        }
        let Some(id) = payload.get("id").and_then(Value::as_i64) else {
            return;
        };
        let Some(p) = self.pending.remove(&id) else {
            // A late reply. xinnan-py matches ids 1/2 to its discovery handlers anyway.
            if self.spec.late_init_reply_relists && id == self.spec.init_id && payload.get("result").is_some() {
                self.notes.push(format!(
                    "late reply with id {id} taken for the initialize result: listing again"
                ));
                self.list_at = Some(now + self.spec.list_delay.0);
            } else {
                self.notes.push(format!("reply for id {id} that nothing waits for"));
            }
            return;
        };
        let is_error = payload.get("error").is_some();
        {
            let e = &mut self.exchanges[p.index];
            e.reply_ms = Some(ms(now));
            e.outcome = if is_error { Outcome::Error } else { Outcome::Replied };
            e.reply = Some(payload.to_string());
        }
        let method = self.exchanges[p.index].method.clone();
        match method.as_str() {
            "initialize" => {
                if is_error || payload.get("result").is_none() {
                    self.phase = Phase::Stuck;
                    self.notes
                        .push("initialize failed: the client never becomes ready on this connection".into());
                    return;
                }
                if let Some(n) = &self.spec.initialized_notification {
                    let v: Value = serde_json::from_str(n).unwrap_or_else(|_| json!({}));
                    out.push(Action::Send(self.envelope(&v)));
                }
                if self.spec.list_delay.0.is_zero() {
                    self.send_list(now, None, out);
                } else {
                    self.list_at = Some(now + self.spec.list_delay.0);
                }
            }
            "tools/list" => self.on_list_result(now, payload, out),
            "tools/call" => {
                if let Some((to, text)) = result::result_text(&self.spec, payload) {
                    self.exchanges[p.index].deliver(to, text);
                }
            }
            _ => {}
        }
    }

    fn on_list_result(&mut self, now: SimTime, payload: &Value, out: &mut Vec<Action>) {
        let Some(tools) = payload["result"]["tools"].as_array() else {
            self.phase = Phase::Stuck;
            let msg = payload["error"]["message"]
                .as_str()
                .unwrap_or("no tools array")
                .to_string();
            self.notes
                .push(format!("tools/list failed ({msg}): no device tool becomes visible"));
            return;
        };
        let names: Vec<String> = tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        if let Some(cap) = self.spec.tool_cap
            && (names.is_empty() || self.tools.len() + names.len() > cap)
        {
            self.notes.push(format!(
                "page of {} tools discarded: {} + {} would exceed the cap of {cap}",
                names.len(),
                self.tools.len(),
                names.len()
            ));
            self.finish_listing(now, out);
            return;
        }
        self.pages += 1;
        for n in names {
            let llm_name = spec::map_name(self.spec.name_mapping, &n);
            if self.spec.name_mapping == NameMapping::Python {
                // Keyed by sanitised name: a collision overwrites.
                self.tools.retain(|t| t.llm_name != llm_name);
            }
            self.tools.push(KnownTool { name: n, llm_name });
        }
        match payload["result"]["nextCursor"].as_str() {
            Some(c) if !c.is_empty() && self.spec.follow_cursor => self.send_list(now, Some(c.to_string()), out),
            Some(c) if !c.is_empty() => {
                self.notes
                    .push(format!("nextCursor {c} not followed: later pages stay invisible"));
                self.finish_listing(now, out);
            }
            _ => self.finish_listing(now, out),
        }
    }

    fn finish_listing(&mut self, now: SimTime, out: &mut Vec<Action>) {
        self.phase = Phase::Ready;
        if let Some(h) = self.spec.heartbeat {
            self.heartbeat_at = Some(now + h.0);
        }
        while let Some((tool, args)) = self.queued_calls.pop_front() {
            self.call_into(now, &tool, args, out);
        }
    }

    /// Calls a tool (queued until discovery is done). `args` is the LLM's arguments object.
    pub fn call(&mut self, now: SimTime, tool: &str, args: Value) {
        let mut out = Vec::new();
        self.call_into(now, tool, args, &mut out);
        self.outbox.extend(out);
    }

    fn call_into(&mut self, now: SimTime, tool: &str, args: Value, out: &mut Vec<Action>) {
        if self.phase != Phase::Ready {
            self.queued_calls.push_back((tool.to_string(), args));
            return;
        }
        let known = self.tools.iter().any(|t| t.name == tool);
        if !known && self.spec.refuse_unknown_tools {
            let mut refused = Exchange::new(-1, "tools/call", Some(tool.into()), now);
            refused.outcome = Outcome::Error;
            if let Some(template) = &self.spec.unknown_tool_text {
                let llm_name = spec::map_name(self.spec.name_mapping, tool);
                let text = template.replace("{name}", tool).replace("{llm_name}", &llm_name);
                refused.deliver(self.spec.failure_delivery(), text);
            }
            self.notes.push(format!(
                "no traffic: {tool} is not among the tools this backend registered"
            ));
            self.exchanges.push(refused);
            return;
        }
        let id = self.next_call_id;
        self.next_call_id += 1;
        if let Some(stt) = self.tool_call_stt(&spec::map_name(self.spec.name_mapping, tool)) {
            out.push(Action::Send(stt));
        }
        let empty = args.as_object().is_some_and(|m| m.is_empty());
        let mut params = Map::new();
        params.insert("name".into(), tool.into());
        if empty && self.spec.null_empty_arguments {
            params.insert("arguments".into(), Value::Null);
        } else {
            params.insert("arguments".into(), args);
        }
        self.request(
            now,
            id,
            "tools/call",
            Some(Value::Object(params)),
            Some(tool.into()),
            out,
        );
    }

    /// Sends a raw payload inside this backend's envelope (for scripts); text that is not JSON
    /// goes out as it is.
    pub fn raw(&mut self, payload: &str) {
        let frame = match serde_json::from_str::<Value>(payload) {
            Ok(v) => self.envelope(&v),
            Err(_) => payload.to_string(),
        };
        self.outbox.push_back(Action::Send(frame));
    }

    /// Sends a whole text frame exactly as given (no envelope).
    pub fn frame(&mut self, text: String) {
        self.outbox.push_back(Action::Send(text));
    }

    /// Closes the connection (a WebSocket close frame), after what is already queued.
    pub fn close(&mut self) {
        self.outbox.push_back(Action::Close);
    }

    /// The connection is gone.
    pub fn handle_closed(&mut self, now: SimTime) {
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        self.voice.agenda = crate::voice::speak::Agenda::default();
        if self.spec.pending_on_close == CallOnClose::Fail {
            for (_, p) in std::mem::take(&mut self.pending) {
                let e = &mut self.exchanges[p.index];
                e.outcome = Outcome::ConnectionClosed;
                e.reply_ms = Some(ms(now));
            }
        }
        self.notes.push(format!("connection closed at {:.0} ms", ms(now)));
    }

    /// The next time this session has something to do; pass it to [`Session::handle_timeout`]
    /// when it comes. Its answer can change after every `handle_*` and `call`.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let deadlines = self.pending.values().map(|p| p.deadline);
        deadlines
            .chain(self.list_at)
            .chain(self.heartbeat_at)
            .chain(self.voice.agenda.next_at())
            .min()
    }

    /// Timers due at `now`: call timeouts, delayed listing, heartbeat.
    pub fn handle_timeout(&mut self, now: SimTime) {
        let out = self.on_timeout(now);
        self.outbox.extend(out);
        if self.phase != Phase::Closed {
            self.drain_agenda(now);
        }
    }

    fn on_timeout(&mut self, now: SimTime) -> Vec<Action> {
        let mut out = Vec::new();
        let expired: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(p) = self.pending.remove(&id) {
                let e = &mut self.exchanges[p.index];
                e.outcome = Outcome::TimedOut;
                if e.method == "tools/call" {
                    e.deliver(self.spec.failure_delivery(), self.spec.timeout_text.clone());
                }
                if matches!(e.method.as_str(), "initialize" | "tools/list") {
                    self.phase = Phase::Stuck;
                }
            }
        }
        if self.phase == Phase::Closed {
            return out;
        }
        if self.list_at.is_some_and(|t| t <= now) {
            self.list_at = None;
            self.send_list(now, None, &mut out);
        }
        if self.heartbeat_at.is_some_and(|t| t <= now) {
            self.heartbeat_at = None;
            self.notes.push("heartbeat: listing tools again".into());
            self.tools.clear();
            self.pages = 0;
            self.send_list(now, None, &mut out);
        }
        out
    }

    /// A snapshot of this connection for the report.
    pub fn report(&self) -> SessionReport {
        SessionReport {
            personality: self.spec.name.clone(),
            device_id: self.device_id.clone(),
            session_id: self.session_id.clone(),
            phase: self.phase.clone(),
            tools: self.tools.clone(),
            pages: self.pages,
            exchanges: self.exchanges.clone(),
            notes: self.notes.clone(),
            voice: self.voice.report.clone(),
        }
    }

    /// The `i`th request of this connection and what became of it (requests in the order made).
    pub fn exchange(&self, i: usize) -> Option<&Exchange> {
        self.exchanges.get(i)
    }

    /// Requests made on this connection so far.
    pub fn exchanges_len(&self) -> usize {
        self.exchanges.len()
    }

    /// Whether the backend registered `tool` for its LLM.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.name == tool)
    }

    /// Requests still waiting for their reply.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The device id from the handshake (`Device-Id`).
    pub fn device_id(&self) -> &str {
        &self.device_id
    }

    /// Ids that never got a reply (so far).
    pub fn unanswered(&self) -> Vec<i64> {
        self.exchanges
            .iter()
            .filter(|e| {
                matches!(
                    e.outcome,
                    Outcome::Pending | Outcome::TimedOut | Outcome::ConnectionClosed
                )
            })
            .map(|e| e.id)
            .collect()
    }
}
