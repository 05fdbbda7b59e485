//! What a backend session records of its connection: each request and its reply paired by id
//! ([`Exchange`], how it ended and where its outcome went), the tools the backend registered,
//! where the session is, and the whole report ([`SessionReport`]).

use serde::Serialize;
use serde_json::Value;

use crate::backend::spec::Delivery;
use crate::backend::{ms, voice_side};
use crate::time::SimTime;

/// How one request ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Sent, no reply yet.
    Pending,
    /// A `result` reply arrived.
    Replied,
    /// A JSON-RPC `error` reply arrived, or the call was refused without traffic (unknown tool).
    Error,
    /// No reply within the personality's timeout.
    TimedOut,
    /// The connection closed while it waited.
    ConnectionClosed,
}

/// One request and its reply, paired by id.
#[derive(Clone, Debug, Serialize)]
pub struct Exchange {
    /// The JSON-RPC id (`-1` for a call refused without traffic).
    pub id: i64,
    /// The JSON-RPC method (`initialize`, `tools/list`, `tools/call`).
    pub method: String,
    /// The device tool's original name (`tools/call` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The arguments as sent (`tools/call` only; `null` for a personality that sends an empty
    /// object as null).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// When the request was sent, in ms on the clock the socket layer passes as `now`.
    pub sent_ms: f64,
    /// When the reply (or the close) arrived, in ms on the same clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_ms: Option<f64>,
    /// How the request ended.
    pub outcome: Outcome,
    /// The raw reply payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Where the outcome's text went (`llm`, spoken to the `user`, the `console` caller);
    /// absent while pending, and when this backend does nothing with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_to: Option<Delivery>,
    /// The text the LLM is handed as the tool result (only when `result_to` is `llm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_sees: Option<String>,
    /// The text spoken to the user through TTS, the LLM bypassed (only when `result_to` is `user`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoken: Option<String>,
    /// What the console's HTTP caller gets (only when `result_to` is `console`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console_gets: Option<String>,
}

impl Exchange {
    pub(super) fn new(id: i64, method: &str, tool: Option<String>, now: SimTime) -> Exchange {
        Exchange {
            id,
            method: method.into(),
            tool,
            args: None,
            sent_ms: ms(now),
            reply_ms: None,
            outcome: Outcome::Pending,
            reply: None,
            result_to: None,
            llm_sees: None,
            spoken: None,
            console_gets: None,
        }
    }

    /// Hands the outcome's text to where this backend sends it.
    pub(super) fn deliver(&mut self, to: Delivery, text: String) {
        self.result_to = Some(to);
        let slot = match to {
            Delivery::Llm => &mut self.llm_sees,
            Delivery::User => &mut self.spoken,
            Delivery::Console => &mut self.console_gets,
        };
        *slot = Some(text);
    }

    /// Where the outcome went, in words (for acceptance records), if anywhere yet.
    pub fn fate(&self) -> Option<String> {
        match self.result_to? {
            Delivery::Llm => Some(format!(
                "the LLM is handed {:?} as the tool result",
                self.llm_sees.as_deref()?
            )),
            Delivery::User => Some(format!(
                "spoken to the user as {:?} (not handed to the LLM)",
                self.spoken.as_deref()?
            )),
            Delivery::Console => Some(format!("the console caller gets {}", self.console_gets.as_deref()?)),
        }
    }
}

/// Where the session is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Connected; waiting for the device hello.
    AwaitingHello,
    /// `initialize` sent; waiting for its result.
    Initializing,
    /// Walking the `tools/list` pages.
    Listing,
    /// Discovery done: tools are registered and calls go out.
    Ready,
    /// Discovery failed (an error or garbage for `initialize`/`tools/list`): the client never
    /// becomes ready on this connection.
    Stuck,
    /// The connection is gone.
    Closed,
}

/// A tool the backend registered for its LLM.
#[derive(Clone, Debug, Serialize)]
pub struct KnownTool {
    /// The device's own tool name (as in `tools/list`).
    pub name: String,
    /// The name this backend's LLM sees (after the personality's sanitising).
    pub llm_name: String,
}

/// The report of one connection.
#[derive(Clone, Debug, Serialize)]
pub struct SessionReport {
    /// The personality's name (`BackendSpec::name`).
    pub personality: String,
    /// The `Device-Id` from the handshake (empty when absent).
    pub device_id: String,
    /// The session id this backend put in its hello.
    pub session_id: String,
    /// Where discovery ended up.
    pub phase: Phase,
    /// The tools registered for the LLM, in registration order.
    pub tools: Vec<KnownTool>,
    /// How many `tools/list` pages were accepted (discarded pages not counted).
    pub pages: usize,
    /// Every request sent and its reply, in sending order.
    pub exchanges: Vec<Exchange>,
    /// Things worth knowing in words (reused ids, late replies, discarded pages, closes).
    pub notes: Vec<String>,
    /// Microphone audio received, utterances found, `listen`/`abort` messages, speech sent.
    pub voice: voice_side::VoiceReport,
}
