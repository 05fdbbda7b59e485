//! What crosses the device's edge, as the device says it: what leaves it ([`Output`], each text
//! saying what it is: [`Sent`]) and what the receive task made of an MCP payload ([`Receipt`]).

use std::sync::Arc;

use crate::device::listening::{AbortReason, ListeningMode};
use crate::device::url::Endpoint;
use crate::mcp::{Arguments, DropReason};
use crate::time::SimTime;

/// What a text the device sends is. The device built it, so it says so: drivers, the harness
/// and reports read this instead of parsing the text back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The client hello.
    Hello,
    /// `listen` `start`, with its mode.
    ListenStart(ListeningMode),
    /// `listen` `stop`.
    ListenStop,
    /// `listen` `detect` with its text (the wake word, or typed text).
    ListenDetect(Arc<str>),
    /// `abort`, with its reason (`None`: no `reason` key).
    Abort(AbortReason),
    /// `goodbye` (MQTT + UDP).
    Goodbye,
    /// An MCP reply: its id as the device wrote it, and whether it is an `error` reply.
    Reply {
        /// The reply's `id`.
        id: i32,
        /// An `error` reply (else a `result`).
        is_error: bool,
    },
}

impl Sent {
    /// The message in a few words, as scenarios name what the device sent (`listen_sent`):
    /// `start auto`, `stop`, `detect 你好小智`, `abort`, `abort wake_word_detected`.
    pub fn describe(&self) -> String {
        match self {
            Sent::Hello => "hello".into(),
            Sent::ListenStart(mode) => format!("start {}", mode.as_str()),
            Sent::ListenStop => "stop".into(),
            Sent::ListenDetect(text) => format!("detect {text}"),
            Sent::Abort(AbortReason::None) => "abort".into(),
            Sent::Abort(AbortReason::WakeWordDetected) => "abort wake_word_detected".into(),
            Sent::Goodbye => "goodbye".into(),
            Sent::Reply { .. } => "mcp".into(),
        }
    }
}

/// What leaves the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// An MCP payload the direct link transmitted (the inner JSON-RPC payload, raw bytes).
    Mcp {
        /// The JSON-RPC payload bytes.
        payload: Vec<u8>,
        /// When the device transmitted it.
        at: SimTime,
    },
    /// Dial `endpoint` and write `request` (the exact handshake bytes); report with
    /// [`Input::WsOpened`](crate::device::Input::WsOpened).
    WsOpen {
        /// Where to dial (split from `websocket/url`).
        endpoint: Endpoint,
        /// The handshake request to write once the TCP connection is up.
        request: Vec<u8>,
        /// When the device started the connect.
        at: SimTime,
    },
    /// Send one text frame (masked, as a client does).
    WsText {
        /// The frame's payload (device hello, `listen`, or an MCP envelope), unmasked.
        text: Vec<u8>,
        /// What it is (drivers read this, not the text).
        sent: Sent,
        /// When the device sent it.
        at: SimTime,
    },
    /// A control message (`listen`, `abort`) on the direct link, as MQTT publishes it.
    Control {
        /// The JSON text, as the firmware builds it.
        text: Vec<u8>,
        /// What it is.
        sent: Sent,
        /// When the device sent it.
        at: SimTime,
    },
    /// One binary frame of microphone audio (the frame as the protocol version packs it).
    WsBinary {
        /// The frame's bytes.
        frame: Vec<u8>,
        /// When the device sent it.
        at: SimTime,
    },
    /// Drop the TCP connection without a WebSocket close frame.
    WsClose {
        /// When the socket object was destroyed.
        at: SimTime,
    },
    /// Connect an MQTT 3.1.1 client (clean session, this keepalive) and report the CONNACK with
    /// [`Input::MqttConnack`](crate::device::Input::MqttConnack); a connection that breaks
    /// later, with [`Input::MqttClosed`](crate::device::Input::MqttClosed). The client
    /// subscribes to nothing (the broker delivers to the device's own topic, or nothing comes).
    MqttConnect {
        /// Where and as whom.
        dial: crate::provisioning::MqttDial,
        /// When the client started connecting.
        at: SimTime,
    },
    /// Publish `payload` at QoS 0, not retained.
    MqttPublish {
        /// `publish_topic` from NVS.
        topic: String,
        /// The JSON text, as the firmware builds it.
        payload: Vec<u8>,
        /// What it is.
        sent: Sent,
        /// When the device published it.
        at: SimTime,
    },
    /// The MQTT client is gone: DISCONNECT first when `disconnect` (the client was destroyed
    /// while connected), then the TCP connection closes (a reset sends nothing first).
    MqttClose {
        /// Send DISCONNECT before closing.
        disconnect: bool,
        /// When the client was destroyed.
        at: SimTime,
    },
    /// Make the audio channel's UDP socket, connected to `host:port` (the server hello's `udp`).
    UdpOpen {
        /// `udp.server`.
        host: String,
        /// `udp.port`.
        port: u16,
        /// When the socket was made.
        at: SimTime,
    },
    /// One datagram on the UDP socket (header + encrypted Opus).
    UdpSend {
        /// The datagram's bytes.
        datagram: Vec<u8>,
        /// When the device sent it.
        at: SimTime,
    },
    /// The UDP socket was closed.
    UdpClose {
        /// When the socket was closed.
        at: SimTime,
    },
}

impl Output {
    /// The inner MCP payload of a direct-link reply.
    pub fn mcp(&self) -> Option<(&[u8], SimTime)> {
        match self {
            Output::Mcp { payload, at } => Some((payload, *at)),
            _ => None,
        }
    }
}

/// What the receive task did with one inbound payload (the "parameters" evidence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receipt {
    /// The device was off or still booting: nobody received it.
    NotRunning,
    /// Dropped without any reply, ever.
    Dropped {
        /// Why `McpServer::ParseMessage` dropped it.
        reason: DropReason,
    },
    /// Parsing needed more heap than the device has: dropped (a device event, not a twin crash).
    OutOfMemory,
    /// A reply was built on the receive task and queued (1 hop).
    Answered {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The reply is a JSON-RPC `error`, not a `result`.
        is_error: bool,
    },
    /// Nothing caught what the receive path threw: the device aborts and reboots, no reply
    /// (the L1–L2 range error, [`crate::firmware::Firmware::range_error_aborts`]).
    Aborted {
        /// What was thrown.
        reason: String,
    },
    /// A valid `tools/call` was queued for the main task (2 hops), with the coerced arguments.
    Scheduled {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The tool's name.
        tool: std::sync::Arc<str>,
        /// One value per property of the tool, in property order.
        args: Arguments,
    },
}

impl std::fmt::Display for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Receipt::NotRunning => f.write_str("not received (the device was not running)"),
            Receipt::Dropped { reason } => write!(f, "dropped without a reply ({})", reason.as_str()),
            Receipt::OutOfMemory => f.write_str("dropped (parsing needed more heap than the device has)"),
            Receipt::Answered { id, is_error: false } => write!(f, "answered on the receive task (id {id})"),
            Receipt::Answered { id, is_error: true } => {
                write!(f, "answered with an error on the receive task (id {id})")
            }
            Receipt::Aborted { reason } => write!(f, "the device aborted ({reason}): no reply, reboot"),
            Receipt::Scheduled { id, tool, .. } => write!(f, "{tool} queued for the main task (id {id})"),
        }
    }
}
