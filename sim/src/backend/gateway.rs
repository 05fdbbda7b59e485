//! A stand-in for xiaozhi-mqtt-gateway (xinnan-tech/xiaozhi-mqtt-gateway 93f026a, `app.js`,
//! `mqtt-protocol.js`, `utils/mqtt_config_v2.js`; docs/reference/mqtt.md §5): one device's MQTT
//! connection and UDP channel on one side, a WebSocket "bridge" to a chat server on the other,
//! with the gateway's own quirks. Sans-IO: the caller carries MQTT packets, datagrams and
//! bridge frames and reports back; nothing here knows a socket.
//!
//! What it does, in the gateway's order: CONNACK 0 before anything is checked; the client id
//! split at `@@@` (three parts: the password must be base64 HMAC-SHA256 of `client_id|username`
//! under the signature key and the username base64 JSON; two parts: a MAC); replies go to
//! `devices/p2p/<second part>` without any SUBSCRIBE. At CONNECT it runs MCP itself
//! (`initialize` id 10000, `notifications/initialized`, `tools/list` from 10001, paged up to 32
//! tools) and caches the tools; the chat server's later `tools/list` is answered from that cache.
//! A device hello (version 3 only) opens the bridge with `protocol-version: 2`; the server's
//! hello comes back as a hello with a `udp` block (a fresh key, the nonce `01 00 0000 <ssrc> 0…`,
//! the server's `audio_params`). Server audio (v2 frames) goes out as datagrams once the device
//! has sent one (its address is learned from, and re-pointed by, every datagram with its ssrc);
//! device audio goes to the server as v2 frames. A closed bridge sends the device a goodbye.

use std::collections::{BTreeMap, VecDeque};

use base64::Engine;
use hmac::{Hmac, Mac};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::time::{SimDuration, SimTime};
use crate::voice::udp::{HEADER, UdpChannel, UdpParams};

/// The gateway's settings (its `.env`: `MQTT_SIGNATURE_KEY`, `PUBLIC_IP`, `UDP_PORT`;
/// `mqtt.json`'s `mcp_client.max_tools_count`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    /// `MQTT_SIGNATURE_KEY`: without one the password is not checked.
    pub signature_key: Option<String>,
    /// `PUBLIC_IP`: the `udp.server` of the hello.
    pub public_ip: String,
    /// `UDP_PORT`.
    pub udp_port: u16,
    /// `mcp_client.max_tools_count` (32 when the config has none).
    pub max_tools: usize,
    /// The `chat_servers` entry the bridge dials; xiaozhi-esp32-server's docs have it end in
    /// `?from=mqtt_gateway`, which makes that server frame its audio for the gateway.
    pub chat_server: String,
    /// A plain broker in front of the server instead of the gateway (mosquitto, EMQX without
    /// auto-subscribe): a publish reaches the device only on a topic it subscribed to, and the
    /// firmware subscribes to nothing (docs/reference/mqtt.md §5).
    pub needs_subscribe: bool,
}

impl GatewayConfig {
    /// A gateway on loopback: no signature key, UDP at 127.0.0.1:`udp_port`, 32 tools, in front
    /// of `chat_server`.
    pub fn local(udp_port: u16, chat_server: &str) -> Self {
        GatewayConfig {
            signature_key: None,
            public_ip: "127.0.0.1".into(),
            udp_port,
            max_tools: 32,
            chat_server: chat_server.into(),
            needs_subscribe: false,
        }
    }
}

/// What the gateway does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayAction {
    /// CONNACK with this return code.
    ConnAck(u8),
    /// PUBLISH (QoS 0) to the device's `devices/p2p/…` topic.
    Publish {
        /// The topic.
        topic: String,
        /// The JSON text (`JSON.stringify`).
        payload: String,
    },
    /// A datagram to the device's last UDP address (the one [`GatewayConn::datagram`] gave).
    Datagram {
        /// The datagram.
        bytes: Vec<u8>,
        /// The address it goes to (the caller's token for it).
        to: u64,
    },
    /// Close the MQTT connection (no DISCONNECT from a server).
    Close,
    /// Open the WebSocket bridge to the chat server with these headers; report with
    /// [`GatewayConn::bridge_opened`].
    BridgeOpen {
        /// The chat server's URL (`chat_servers`).
        url: String,
        /// The handshake headers, in the gateway's order.
        headers: Vec<(String, String)>,
    },
    /// A text frame to the chat server.
    BridgeText(String),
    /// A binary frame (protocol v2) to the chat server.
    BridgeBinary(Vec<u8>),
    /// Close the bridge; the caller reports [`GatewayConn::bridge_closed`] when it is closed.
    BridgeClose,
}

/// What the gateway's own MCP requests asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Initialize,
    ToolsList,
}

/// The bridge to the chat server.
#[derive(Clone, Debug, PartialEq)]
enum Bridge {
    /// No bridge.
    None,
    /// Opening: the device hello's `audio_params` and `features` go out once it is open.
    Opening(Value, Value),
    /// Open; the server's hello has (or has not yet) come back.
    Open {
        /// The server hello arrived (later hellos are dropped: the promise resolved once).
        answered: bool,
    },
}

/// One device connection of the gateway.
#[derive(Clone, Debug)]
pub struct GatewayConn {
    config: GatewayConfig,
    /// `connectionId`: the ssrc of every datagram.
    pub connection_id: u32,
    reply_to: Option<String>,
    mac: String,
    uuid: Option<String>,
    keepalive: SimDuration,
    last_activity: SimTime,
    bridge: Bridge,
    /// The channel of the current hello (key, nonce, both sequences), and its session id.
    channel: Option<(UdpChannel, String)>,
    /// `udp.remoteAddress`: learned from every datagram.
    remote: Option<u64>,
    next_mcp_id: i64,
    asked: BTreeMap<i64, Asked>,
    cached_initialize: Option<Value>,
    cached_tools: Vec<Value>,
    out: VecDeque<GatewayAction>,
    /// The device subscribed to its reply topic (what a plain broker needs to deliver).
    subscribed: bool,
    /// Publishes for the device that a plain broker did not deliver.
    undelivered: u64,
    rng: ChaCha8Rng,
    closed: bool,
}

/// `generatePasswordSignature`: base64 HMAC-SHA256 of `content` under `key`.
pub fn password_signature(content: &str, key: &str) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    mac.update(content.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

impl GatewayConn {
    /// A new TCP connection (`connection_id`: the gateway's random 32-bit id; `seed` for the
    /// channel keys).
    pub fn new(config: GatewayConfig, connection_id: u32, seed: u64) -> Self {
        GatewayConn {
            config,
            connection_id,
            reply_to: None,
            mac: String::new(),
            uuid: None,
            keepalive: SimDuration::ZERO,
            last_activity: SimTime::ZERO,
            bridge: Bridge::None,
            channel: None,
            remote: None,
            next_mcp_id: 10_000,
            asked: BTreeMap::new(),
            cached_initialize: None,
            cached_tools: Vec::new(),
            out: VecDeque::new(),
            subscribed: false,
            undelivered: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            closed: false,
        }
    }

    /// The next action, if any.
    pub fn poll_action(&mut self) -> Option<GatewayAction> {
        self.out.pop_front()
    }

    /// The connection is closed (it asked to be, or the peer went).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The session id of the current hello, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.channel.as_ref().map(|(_, s)| s.as_str())
    }

    /// The topic the device's messages go to (`devices/p2p/<mac_>`), once CONNECT named it.
    pub fn reply_topic(&self) -> Option<&str> {
        self.reply_to.as_deref()
    }

    /// The device subscribed to a filter that matches [`GatewayConn::reply_topic`] (the caller
    /// matches, with MQTT's wildcard rules): a plain broker delivers from now on.
    pub fn subscribed(&mut self) {
        self.subscribed = true;
    }

    /// Publishes for the device that a plain broker did not deliver (nobody subscribed).
    pub fn undelivered(&self) -> u64 {
        self.undelivered
    }

    /// The tools cached at CONNECT.
    pub fn cached_tools(&self) -> &[Value] {
        &self.cached_tools
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            if self.bridge != Bridge::None {
                self.out.push_back(GatewayAction::BridgeClose);
            }
            self.out.push_back(GatewayAction::Close);
        }
    }

    fn publish(&mut self, now: SimTime, payload: Value) {
        // `sendPublish` counts as activity (`mqtt-protocol.js:433`).
        self.last_activity = now;
        if self.config.needs_subscribe && !self.subscribed {
            self.undelivered += 1;
            return;
        }
        if let Some(topic) = self.reply_to.clone() {
            self.out.push_back(GatewayAction::Publish {
                topic,
                payload: payload.to_string(),
            });
        }
    }

    /// CONNECT (`mqtt-protocol.js:195-262`, `app.js` `handleConnect`): CONNACK 0 first, then the
    /// client id, the credentials, and the gateway's own MCP session.
    pub fn connect(&mut self, now: SimTime, client_id: &str, username: &str, password: &str, keepalive_s: u16) {
        self.last_activity = now;
        self.keepalive = SimDuration::from_millis(u64::from(keepalive_s) * 1500);
        self.out.push_back(GatewayAction::ConnAck(0));
        let parts: Vec<&str> = client_id.split("@@@").collect();
        match parts.as_slice() {
            [_, mac, uuid] => {
                if let Some(key) = &self.config.signature_key
                    && password != password_signature(&format!("{client_id}|{username}"), key)
                {
                    return self.close();
                }
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(username)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
                if username.is_empty() || decoded.is_none() {
                    return self.close();
                }
                self.mac = mac.replace('_', ":");
                self.uuid = Some((*uuid).to_string());
            }
            [_, mac] => {
                self.mac = mac.replace('_', ":");
                let ok = self.mac.len() == 17
                    && self
                        .mac
                        .split(':')
                        .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
                if !ok {
                    return self.close();
                }
            }
            _ => return self.close(),
        }
        self.reply_to = Some(format!("devices/p2p/{}", parts[1]));
        let id = self.ask(Asked::Initialize);
        let init = json!({"type":"mcp","payload":{"jsonrpc":"2.0","method":"initialize","id":id,
            "params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"xiaozhi-mqtt-client","version":"1.0.0"}}}});
        self.publish(now, init);
    }

    fn ask(&mut self, what: Asked) -> i64 {
        let id = self.next_mcp_id;
        self.next_mcp_id += 1;
        self.asked.insert(id, what);
        id
    }

    /// Any packet from the device (PINGREQ included) counts as activity.
    pub fn activity(&mut self, now: SimTime) {
        self.last_activity = now;
    }

    /// When the keepalive check closes the connection: the gateway checks every connection once
    /// a second, on one server-wide interval (`app.js:766-795`, taken here as the whole seconds
    /// of the clock), and closes one idle for *more* than 1.5 × the CONNECT's keepalive
    /// (`:360-371`): the first whole second strictly after that.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        (!self.closed && !self.keepalive.is_zero()).then(|| {
            let due = (self.last_activity + self.keepalive).as_micros();
            SimTime::from_micros((due / 1_000_000 + 1) * 1_000_000)
        })
    }

    /// The keepalive check ([`GatewayConn::poll_timeout`] is the first check that closes).
    pub fn handle_timeout(&mut self, now: SimTime) {
        if self.poll_timeout().is_some_and(|t| now >= t) {
            self.close();
        }
    }

    /// A PUBLISH from the device (`handlePublish`).
    pub fn publish_in(&mut self, now: SimTime, qos: u8, payload: &[u8]) {
        self.last_activity = now;
        if self.closed {
            return;
        }
        if qos != 0 {
            return self.close();
        }
        let Ok(json) = serde_json::from_slice::<Value>(payload) else {
            return self.close();
        };
        if json["type"] == "hello" {
            if json["version"] != 3 {
                return self.close();
            }
            return self.hello(json);
        }
        self.other(now, json);
    }

    /// `parseHelloMessage`: a fresh key and nonce, the bridge (re)opened.
    fn hello(&mut self, json: Value) {
        let mut key = [0u8; 16];
        self.rng.fill_bytes(&mut key);
        let mut nonce = [0u8; 16];
        nonce[0] = 1;
        nonce[4..8].copy_from_slice(&self.connection_id.to_be_bytes());
        let params = UdpParams {
            server: self.config.public_ip.clone(),
            port: self.config.udp_port,
            key,
            nonce,
        };
        self.channel = Some((UdpChannel::new(&params), String::new()));
        if self.bridge != Bridge::None {
            self.out.push_back(GatewayAction::BridgeClose);
        }
        let mut headers = vec![
            ("device-id".to_string(), self.mac.clone()),
            ("protocol-version".to_string(), "2".to_string()),
            ("authorization".to_string(), "Bearer test-token".to_string()),
        ];
        if let Some(uuid) = &self.uuid {
            headers.push(("client-id".to_string(), uuid.clone()));
        }
        self.bridge = Bridge::Opening(json["audio_params"].clone(), json["features"].clone());
        let url = self.config.chat_server.clone();
        self.out.push_back(GatewayAction::BridgeOpen { url, headers });
    }

    /// `parseOtherMessage`: the gateway's own MCP answers, then (with no bridge) a goodbye,
    /// `goodbye` closing the bridge, anything else forwarded.
    fn other(&mut self, now: SimTime, json: Value) {
        if json["type"] == "mcp"
            && let Some(asked) = json["payload"]["id"].as_i64().and_then(|id| self.asked.remove(&id))
        {
            let result = json["payload"]["result"].clone();
            if json["payload"].get("error").is_some() {
                return;
            }
            match asked {
                Asked::Initialize => {
                    self.cached_initialize = Some(result);
                    self.publish(
                        now,
                        json!({"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/initialized"}}),
                    );
                    self.list_tools(now, None);
                }
                Asked::ToolsList => {
                    let tools = result["tools"].as_array().cloned().unwrap_or_default();
                    if tools.is_empty() || self.cached_tools.len() + tools.len() > self.config.max_tools {
                        return;
                    }
                    self.cached_tools.extend(tools);
                    if let Some(cursor) = result.get("nextCursor").filter(|c| !c.is_null()) {
                        self.list_tools(now, Some(cursor.clone()));
                    }
                }
            }
            return;
        }
        if self.bridge == Bridge::None {
            if json["type"] != "goodbye" {
                let sid = json.get("session_id").cloned().unwrap_or(Value::Null);
                let mut bye = json!({"type":"goodbye"});
                if !sid.is_null() {
                    bye["session_id"] = sid;
                }
                self.publish(now, bye);
            }
            return;
        }
        if json["type"] == "goodbye" || json["type"] == "udp_timeout" {
            self.out.push_back(GatewayAction::BridgeClose);
            return;
        }
        self.out.push_back(GatewayAction::BridgeText(json.to_string()));
    }

    fn list_tools(&mut self, now: SimTime, cursor: Option<Value>) {
        let id = self.ask(Asked::ToolsList);
        // `{ cursor: undefined }` stringifies to `{}`.
        let params = match cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        self.publish(
            now,
            json!({"type":"mcp","payload":{"jsonrpc":"2.0","method":"tools/list","id":id,"params":params}}),
        );
    }

    /// The bridge's WebSocket is open: the hello goes to the chat server as version 2.
    pub fn bridge_opened(&mut self) {
        if let Bridge::Opening(audio_params, features) =
            std::mem::replace(&mut self.bridge, Bridge::Open { answered: false })
        {
            let mut hello = json!({"type":"hello","version":2,"transport":"websocket"});
            if !audio_params.is_null() {
                hello["audio_params"] = audio_params;
            }
            if !features.is_null() {
                hello["features"] = features;
            }
            self.out.push_back(GatewayAction::BridgeText(hello.to_string()));
        }
    }

    /// A text frame from the chat server.
    pub fn bridge_text(&mut self, now: SimTime, text: &str) {
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if message["type"] == "hello" {
            if self.bridge == (Bridge::Open { answered: false }) {
                self.bridge = Bridge::Open { answered: true };
                self.server_hello(now, &message);
            }
            return;
        }
        let method = message["payload"]["method"].as_str();
        if message["type"] == "mcp" && matches!(method, Some("notifications/initialized" | "tools/list")) {
            if method == Some("tools/list") {
                let id = message["payload"]["id"].clone();
                let reply =
                    json!({"type":"mcp","payload":{"jsonrpc":"2.0","id":id,"result":{"tools":self.cached_tools}}});
                self.out.push_back(GatewayAction::BridgeText(reply.to_string()));
            }
            return;
        }
        self.publish(now, message);
    }

    fn server_hello(&mut self, now: SimTime, message: &Value) {
        let session = message["session_id"].as_str().unwrap_or_default().to_string();
        let Some((channel, sid)) = self.channel.as_mut() else {
            return;
        };
        *sid = session.clone();
        let (key, nonce) = channel.secrets();
        let hex = |b: &[u8; 16]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut hello = json!({"type":"hello","version":3,"session_id":session,"transport":"udp",
            "udp":{"server":self.config.public_ip,"port":self.config.udp_port,"encryption":"aes-128-ctr",
                   "key":hex(&key),"nonce":hex(&nonce)}});
        if let Some(ap) = message.get("audio_params") {
            hello["audio_params"] = ap.clone();
        }
        self.publish(now, hello);
    }

    /// A binary frame (v2) from the chat server: its Opus, as a datagram, once the device's
    /// address is known (`sendUdpMessage`).
    pub fn bridge_binary(&mut self, frame: &[u8]) {
        if frame.len() < 16 {
            return;
        }
        let be = |at: usize| u32::from_be_bytes([frame[at], frame[at + 1], frame[at + 2], frame[at + 3]]);
        let (timestamp, len) = (be(8), be(12) as usize);
        let opus = &frame[16..frame.len().min(16 + len)];
        let (Some(to), Some((channel, _))) = (self.remote, self.channel.as_mut()) else {
            return;
        };
        if let Some(bytes) = channel.seal(opus, timestamp) {
            self.out.push_back(GatewayAction::Datagram { bytes, to });
        }
    }

    /// The bridge closed: a goodbye to the device (`bridge.on('close')`).
    pub fn bridge_closed(&mut self, now: SimTime) {
        if self.bridge == Bridge::None {
            return;
        }
        self.bridge = Bridge::None;
        let sid = self.session_id().map_or(Value::Null, |s| Value::String(s.to_string()));
        let mut bye = json!({"type":"goodbye"});
        if !sid.is_null() {
            bye["session_id"] = sid;
        }
        if !self.closed {
            self.publish(now, bye);
        }
    }

    /// A datagram with this connection's ssrc from address `from` (`onUdpMessage`; the server
    /// already dropped one shorter than the header, not type 1, or shorter than its length).
    pub fn datagram(&mut self, from: u64, datagram: &[u8]) {
        if self.bridge == Bridge::None || datagram.len() < HEADER {
            return;
        }
        self.remote = Some(from);
        let Some((channel, _)) = self.channel.as_mut() else {
            return;
        };
        let Some(opened) = channel.open_lenient(datagram) else {
            return;
        };
        let mut frame = vec![0u8; 16];
        frame[8..12].copy_from_slice(&opened.timestamp.to_be_bytes());
        frame[12..16].copy_from_slice(&(opened.payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&opened.payload);
        self.out.push_back(GatewayAction::BridgeBinary(frame));
    }

    /// A packet the gateway cannot take (longer than `max_mqtt_payload_size`, not a CONNECT
    /// first, a type it does not handle, malformed): `protocolError`, and the connection closes
    /// without a word (`app.js` `close()`).
    pub fn protocol_error(&mut self) {
        self.close();
    }

    /// The gateway drops the device's connection (a restart, a network fault: the script's
    /// `disconnect`): the bridge closes and the TCP connection with it, without a word.
    pub fn drop_connection(&mut self) {
        self.close();
    }

    /// The device's TCP connection is gone.
    pub fn disconnected(&mut self) {
        self.close();
        self.out.retain(|a| !matches!(a, GatewayAction::Close));
    }
}

/// The connection id (the ssrc of its datagrams) the twin gives the gateway's `n`th connection:
/// the gateway draws a random 32-bit one; the twin scrambles the count so runs repeat.
pub fn connection_id(n: u64) -> u32 {
    (n as u32).wrapping_mul(0x9E37_79B9) | 1
}

/// The ssrc (connection id) of a datagram, as the gateway's server routes it: `None` for one it
/// drops before any connection sees it (shorter than the header, not type 1, shorter than the
/// length it announces).
pub fn route(datagram: &[u8]) -> Option<u32> {
    if datagram.len() < HEADER || datagram[0] != 1 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([datagram[2], datagram[3]]));
    if datagram.len() < HEADER + len {
        return None;
    }
    Some(u32::from_be_bytes([datagram[4], datagram[5], datagram[6], datagram[7]]))
}
