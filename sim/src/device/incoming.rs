//! What comes in: an [`Input`] is what a driver hands the device (one variant per thing a
//! transport delivers, all taken by `Device::handle`); an [`Incoming`] is what an incoming text
//! frame or MQTT message was to the device, read off the device's own parse (the cJSON dialect,
//! as the firmware reads it: the first of two `type` keys, keys matched case-insensitively):
//! the `type` it dispatched on, a `tts` state, an MCP request's method, tool and arguments, and
//! the [`Receipt`] of what the MCP server did with it. Drivers and reports read this instead of
//! parsing the frame a second time with another parser that might read it otherwise.

use crate::cjson::Item;
use crate::device::output::Receipt;

/// What a driver hands the device: one event of a transport, or a payload for a receive task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// The driver finished the TCP connect + handshake of the last `Output::WsOpen` (`ok`: the
    /// response contained `HTTP/1.1 101`).
    WsOpened {
        /// The handshake succeeded.
        ok: bool,
    },
    /// The peer closed the WebSocket or the TCP connection broke.
    WsClosed,
    /// A text frame on the WebSocket receive task: envelope parse (length-bounded from 2.2.6),
    /// then the server hello, the MCP server or the application dispatcher.
    WsText(&'a [u8]),
    /// A binary frame (audio) on the WebSocket: unpacked as the protocol version says (trusting
    /// its size field, as the firmware does), then `OnIncomingAudio`.
    WsBinary(&'a [u8]),
    /// The last `Output::MqttConnect` ended: a CONNACK with return code 0 (`accepted`), or a
    /// refusal or connection failure (esp-mqtt retries 10 s later).
    MqttConnack {
        /// Return code 0.
        accepted: bool,
    },
    /// The MQTT connection broke (the broker closed it, TCP failed, no PINGRESP).
    MqttClosed,
    /// A PUBLISH the broker delivered (any topic: the client subscribed to nothing), on the
    /// MQTT task: a server hello, a goodbye, or a message for `OnIncomingJson`.
    MqttMessage(&'a [u8]),
    /// A datagram on the audio channel's UDP socket.
    Udp(&'a [u8]),
    /// One audio packet on the direct link (an MQTT device's UDP audio, already decrypted):
    /// the Opus packet itself, then `OnIncomingAudio`.
    Audio(&'a [u8]),
    /// A JSON message on the direct link (`OnIncomingJson` as MQTT delivers it: `tts`, `stt`,
    /// `llm`, `system`, `mcp`).
    Json(&'a [u8]),
    /// One MCP payload straight to the MCP server (the conformance recorder's feed), processed
    /// synchronously as `ParseMessage` does; work it schedules waits for the main task.
    Mcp(&'a [u8]),
}

impl Input<'_> {
    /// Audio for the speaker: counted as lost when no channel (no running application) takes it.
    pub(crate) fn is_audio(&self) -> bool {
        matches!(self, Input::WsBinary(_) | Input::Udp(_) | Input::Audio(_))
    }
}

/// An incoming text, as the device read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Incoming {
    /// The message's `type`, as the dispatcher saw it.
    pub message: MessageType,
    /// An MCP request (its payload has a string `method`), as the MCP server reads it.
    pub request: Option<Box<Request>>,
    /// What the MCP server did with an `mcp` message or an [`Input::Mcp`] payload.
    pub receipt: Option<Receipt>,
}

impl Incoming {
    /// The JSON-RPC id the device will answer with (`valueint` of the request's id), if it
    /// answers.
    pub fn reply_id(&self) -> Option<i32> {
        match self.receipt {
            Some(Receipt::Answered { id, .. } | Receipt::Scheduled { id, .. }) => Some(id),
            _ => None,
        }
    }
}

/// A message's `type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageType {
    /// The device was off or booting: nobody read it.
    #[default]
    NotRead,
    /// Not JSON to the device, or without a string `type` (logged, dropped).
    Untyped,
    /// The server's hello.
    Hello,
    /// A goodbye (MQTT: the server closes the channel).
    Goodbye,
    /// `mcp`: its payload went to the MCP server.
    Mcp,
    /// `tts`, with its `state` when it is a string.
    Tts(Option<TtsState>),
    /// `stt`: what the server heard the user say.
    Stt,
    /// `llm`: an emotion.
    Llm,
    /// `system` (a reboot command).
    System,
    /// `alert`.
    Alert,
    /// A type the firmware ignores.
    Other,
}

/// A `tts` message's `state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtsState {
    /// `start`: the server's speech begins.
    Start,
    /// `stop`: it ends.
    Stop,
    /// `sentence_start`: a sentence's text.
    SentenceStart,
    /// A state the firmware ignores.
    Other,
}

/// An MCP request as the MCP server reads its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `method`.
    pub method: String,
    /// `params.name` (`tools/call`), when it is a string.
    pub tool: Option<String>,
    /// `params.arguments`, printed unformatted as cJSON prints it (`None` without one).
    pub arguments: Option<String>,
}

/// The `type` and, for `mcp`, the request of a parsed message `root` whose type the transport
/// read as `kind` (`None`: no string type).
pub(crate) fn read(root: Item<'_>, kind: Option<&[u8]>) -> (MessageType, Option<Box<Request>>) {
    let Some(kind) = kind else {
        return (MessageType::Untyped, None);
    };
    let message = match kind {
        b"hello" => MessageType::Hello,
        b"goodbye" => MessageType::Goodbye,
        b"mcp" => MessageType::Mcp,
        b"tts" => MessageType::Tts(root.get(b"state").and_then(|s| s.c_string()).map(|s| match s {
            b"start" => TtsState::Start,
            b"stop" => TtsState::Stop,
            b"sentence_start" => TtsState::SentenceStart,
            _ => TtsState::Other,
        })),
        b"stt" => MessageType::Stt,
        b"llm" => MessageType::Llm,
        b"system" => MessageType::System,
        b"alert" => MessageType::Alert,
        _ => MessageType::Other,
    };
    let request = (message == MessageType::Mcp)
        .then(|| root.get(b"payload").filter(Item::is_object))
        .flatten()
        .and_then(request)
        .map(Box::new);
    (message, request)
}

fn request(payload: Item<'_>) -> Option<Request> {
    let text = |i: Item<'_>| String::from_utf8_lossy(i.c_string()?).into_owned().into();
    let method = payload.get(b"method").and_then(text)?;
    let params = payload.get(b"params").filter(Item::is_object);
    Some(Request {
        method,
        tool: params.and_then(|p| p.get(b"name")).and_then(text),
        arguments: params.and_then(|p| p.get(b"arguments")).map(|a| {
            let mut out = Vec::new();
            a.print_unformatted(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        }),
    })
}
