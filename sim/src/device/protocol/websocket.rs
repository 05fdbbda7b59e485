//! The WebSocket transport (`main/protocols/websocket_protocol.cc`, esp-ml307 `web_socket.cc`;
//! docs/reference/firmware.md §8): what `WebsocketProtocol` adds to the base class.
//!
//! The device dials the server itself (the driver only carries bytes): `OpenAudioChannel` makes
//! a socket, writes esp-ml307's exact handshake (headers in sorted key order), sends the device
//! hello and waits 10 s for the server hello; `ParseServerHello` takes the session id and the
//! server's audio parameters. The blocking open is split where it blocks
//! ([`WebsocketProtocol::begin_open`], [`WebsocketProtocol::send_hello`],
//! [`WebsocketProtocol::hello_arrived`]); `protocol/mod.rs` runs those steps for the
//! application, which only decides what the device state does around them. Knows nothing about
//! real sockets.

use crate::board::TextFontSpec;
use crate::cjson;
use crate::device::io::WireIo;
use crate::device::platform::{Output, Sent};
use crate::device::protocol::base::{ProtocolBase, SERVER_NOT_CONNECTED, SERVER_TIMEOUT};
use crate::device::url::{Endpoint, parse_url};
use crate::trace::{ChannelFailure, Event, LogLevel};
use crate::world::WsConfig;

/// Where the socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Socket {
    /// `websocket_ == nullptr`.
    None,
    /// `Connect()` in progress (the driver is dialling).
    Connecting,
    /// Handshake done (`IsConnected()`).
    Connected,
    /// The connect failed, or the peer closed: the object exists, `IsConnected()` is false.
    Disconnected,
}

/// `WebsocketProtocol`'s own members.
#[derive(Clone, Debug)]
pub(crate) struct WebsocketProtocol {
    /// `websocket/url` from the OTA answer.
    pub(crate) url: String,
    /// `websocket/token`; empty means no `Authorization` header.
    pub(crate) token: String,
    /// `Protocol-Version` (1 when the config says 0).
    pub(crate) version: i32,
    /// Where the socket object is.
    pub(crate) socket: Socket,
    /// The server hello arrived since the last open (the event-group bit).
    pub(crate) hello_received: bool,
}

/// How `ParseServerHello` takes the device down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HelloCrash {
    /// `transport->valuestring` of a missing or non-string `transport` (a null pointer).
    #[error("server hello without a string `transport`: NULL dereference in ParseServerHello")]
    TransportNotAString,
    /// MQTT before 2.4.0: the `udp` block read without checks.
    #[error("{0}")]
    OldUdp(crate::voice::udp::OldUdp),
    /// MQTT before 2.3.0: a `goodbye` whose `session_id` is not a string is compared as a NULL
    /// C string.
    #[error("goodbye with a `session_id` that is not a string: NULL dereference in OnMessage")]
    GoodbyeSessionNotAString,
}

impl WebsocketProtocol {
    /// The `WebsocketProtocol` built from `config`, with no socket yet.
    pub(crate) fn new(config: &WsConfig) -> Self {
        WebsocketProtocol {
            url: config.url.clone(),
            token: config.token.clone(),
            version: if config.version != 0 { config.version } else { 1 },
            socket: Socket::None,
            hello_received: false,
        }
    }

    /// `websocket_->IsConnected()`.
    pub(crate) fn is_connected(&self) -> bool {
        self.socket == Socket::Connected
    }

    /// The `Authorization` value: the token, `Bearer `-prefixed when it has no space; none when empty.
    pub(crate) fn authorization(&self) -> Option<String> {
        if self.token.is_empty() {
            None
        } else if self.token.contains(' ') {
            Some(self.token.clone())
        } else {
            Some(format!("Bearer {}", self.token))
        }
    }

    /// Destroys the socket object if there is one (the peer sees TCP close, no close frame).
    pub(crate) fn drop_socket(&mut self, io: &mut WireIo<'_>, why: &'static str) {
        if self.socket != Socket::None {
            self.socket = Socket::None;
            io.trace.emit(|| Event::WebSocketDestroyed { why });
            let at = io.now;
            io.outputs.push_back(Output::WsClose { at });
        }
    }

    /// `OpenAudioChannel` up to the connect: a new socket object replaces the old one (which
    /// closes its TCP connection), the handshake request goes to the driver. False when the URL
    /// cannot be dialled (the error is logged and `error_occurred_` set).
    pub(crate) fn begin_open(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>, uuid: &str) -> bool {
        self.drop_socket(io, "replaced by a new connection");
        base.error_occurred = false;
        self.hello_received = false;
        let Some(endpoint) = parse_url(&self.url).filter(|e| !e.tls) else {
            let url = self.url.clone();
            io.trace.log(LogLevel::Error, "WS", || {
                format!("Failed to connect to websocket server: {url} (the twin dials ws:// only)")
            });
            base.set_error(SERVER_NOT_CONNECTED);
            return false;
        };
        let mut headers = Vec::new();
        if let Some(a) = self.authorization() {
            headers.push(("Authorization".to_string(), a));
        }
        headers.push(("Protocol-Version".to_string(), self.version.to_string()));
        headers.push(("Device-Id".to_string(), io.mac.to_string()));
        headers.push(("Client-Id".to_string(), uuid.to_string()));
        let key = {
            use rand_core::RngCore;
            let mut k = [0u8; 16];
            io.rng.fill_bytes(&mut k);
            base64_key(&k)
        };
        let request = handshake_request(&endpoint, &headers, &key);
        self.socket = Socket::Connecting;
        let url = self.url.clone();
        let version = self.version;
        io.trace.log(LogLevel::Info, "WS", || {
            format!("Connecting to websocket server: {url} with version: {version}")
        });
        let at = io.now;
        io.outputs.push_back(Output::WsOpen { endpoint, request, at });
        true
    }

    /// After the connect: the device hello goes out, or (not connected) the open fails.
    pub(crate) fn send_hello(
        &mut self,
        base: &mut ProtocolBase,
        io: &mut WireIo<'_>,
        font: Option<&TextFontSpec>,
        glyph_push: bool,
    ) -> bool {
        if self.socket != Socket::Connected {
            base.set_error(SERVER_NOT_CONNECTED);
            io.trace
                .log(LogLevel::Error, "WS", || "Failed to connect to websocket server");
            io.trace.emit(|| Event::AudioChannelFailed {
                why: ChannelFailure::ServerNotConnected,
            });
            return false;
        }
        let text = device_hello(self.version, font, glyph_push);
        let at = io.now;
        io.outputs.push_back(Output::WsText {
            text,
            sent: Sent::Hello,
            at,
        });
        true
    }

    /// After the wait for the server hello: the channel is open, or (no hello) the open fails.
    pub(crate) fn hello_arrived(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>) -> bool {
        if !self.hello_received {
            base.set_error(SERVER_TIMEOUT);
            io.trace.log(LogLevel::Error, "WS", || "Failed to receive server hello");
            io.trace.emit(|| Event::AudioChannelFailed {
                why: ChannelFailure::NoServerHello,
            });
            return false;
        }
        base.last_incoming = io.now;
        io.trace.emit(|| Event::AudioChannelOpened { udp: false });
        true
    }

    /// The driver finished (or failed) the TCP connect and handshake; true when a connect was
    /// in progress (the waiting main task wakes).
    pub(crate) fn open_result(&mut self, ok: bool) -> bool {
        if self.socket != Socket::Connecting {
            return false;
        }
        self.socket = if ok { Socket::Connected } else { Socket::Disconnected };
        true
    }

    /// The peer closed or the TCP connection broke. `None` when there was no live socket;
    /// otherwise whether a connect was in progress (esp-ml307's `Connect()` then fails early).
    pub(crate) fn closed(&mut self, io: &mut WireIo<'_>) -> Option<bool> {
        if !matches!(self.socket, Socket::Connected | Socket::Connecting) {
            return None;
        }
        let was_connecting = self.socket == Socket::Connecting;
        self.socket = Socket::Disconnected;
        io.trace.log(LogLevel::Info, "WS", || "Websocket disconnected");
        Some(was_connecting)
    }

    /// `ParseServerHello` (`websocket_protocol.cc:224-250`). `Err` is the firmware's crash on a
    /// missing or non-string `transport` (a null pointer dereference: panic, reboot); `Ok(true)`
    /// when the hello was taken (the waiting open wakes).
    pub(crate) fn parse_server_hello(
        &mut self,
        base: &mut ProtocolBase,
        io: &mut WireIo<'_>,
        root: cjson::Item<'_>,
    ) -> Result<bool, HelloCrash> {
        let Some(t) = root.get(b"transport").and_then(|t| t.c_string()) else {
            return Err(HelloCrash::TransportNotAString);
        };
        if t != b"websocket" {
            let shown = String::from_utf8_lossy(t).into_owned();
            io.trace
                .log(LogLevel::Error, "WS", || format!("Unsupported transport: {shown}"));
            return Ok(false);
        }
        if let Some(sid) = root.get(b"session_id").and_then(|s| s.c_string()) {
            base.session_id = sid.to_vec();
        }
        if let Some(ap) = root.get(b"audio_params").filter(cjson::Item::is_object) {
            if let Some(r) = ap.get(b"sample_rate").filter(cjson::Item::is_number) {
                base.server_sample_rate = r.valueint();
            }
            if let Some(f) = ap.get(b"frame_duration").filter(cjson::Item::is_number) {
                base.server_frame_duration = f.valueint();
            }
        }
        self.hello_received = true;
        let sid = String::from_utf8_lossy(&base.session_id).into_owned();
        io.trace.emit(|| Event::ServerHello {
            session: sid,
            udp: None,
        });
        Ok(true)
    }
}

/// `WebsocketProtocol::GetHelloMessage` (cJSON, key order as built). `glyph_push`: the 2.4.0
/// features (`glyph_push`, `text_font`); earlier tags send `"features":{"mcp":true}` alone.
pub(crate) fn device_hello(version: i32, font: Option<&TextFontSpec>, glyph_push: bool) -> Vec<u8> {
    const TAIL: &[u8] = b",\"transport\":\"websocket\",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,\"channels\":1,\"frame_duration\":60}}";
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"hello\",\"version\":");
    cjson::write_int(&mut out, version);
    if !glyph_push {
        out.extend_from_slice(b",\"features\":{\"mcp\":true}");
        out.extend_from_slice(TAIL);
        return out;
    }
    out.extend_from_slice(b",\"features\":{\"mcp\":true");
    text_font_capabilities(&mut out, font);
    out.extend_from_slice(TAIL);
    out
}

/// `AddTextFontCapabilities` (2.4.0+, `protocol.cc:8-24`) after the features object's last
/// member: `glyph_push` closes the features, then the `text_font` object when there is a font.
pub(crate) fn text_font_capabilities(out: &mut Vec<u8>, font: Option<&TextFontSpec>) {
    out.extend_from_slice(b",\"glyph_push\":");
    out.extend_from_slice(if font.is_some() { b"true" } else { b"false" });
    out.push(b'}');
    if let Some(f) = font {
        out.extend_from_slice(b",\"text_font\":{\"bundle\":");
        cjson::write_string(out, f.bundle.as_bytes());
        out.extend_from_slice(b",\"charset\":");
        cjson::write_string(out, f.charset.as_bytes());
        out.extend_from_slice(b",\"size\":");
        cjson::write_int(out, f.size);
        out.extend_from_slice(b",\"bpp\":");
        cjson::write_int(out, f.bpp);
        out.push(b'}');
    }
}

/// The handshake request esp-ml307 writes: request line, `Host`, then every header in
/// byte-wise sorted key order (they live in an ordered map).
pub(crate) fn handshake_request(endpoint: &Endpoint, headers: &[(String, String)], key: &str) -> Vec<u8> {
    let mut all: Vec<(String, String)> = headers.to_vec();
    all.push(("Connection".into(), "Upgrade".into()));
    all.push(("Sec-WebSocket-Key".into(), key.to_string()));
    all.push(("Sec-WebSocket-Version".into(), "13".into()));
    all.push(("Upgrade".into(), "websocket".into()));
    all.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let host = if endpoint.port == 80 || endpoint.port == 443 {
        endpoint.host.clone()
    } else {
        format!("{}:{}", endpoint.host, endpoint.port)
    };
    let mut out = format!("GET {} HTTP/1.1\r\nHost: {host}\r\n", endpoint.path);
    for (k, v) in all {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// `Sec-WebSocket-Key`: 16 random bytes, base64.
fn base64_key(bytes: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_matches_the_firmware_shape() {
        let font = TextFontSpec {
            bundle: "b".into(),
            charset: "basic".into(),
            size: 14,
            bpp: 1,
        };
        assert_eq!(
            String::from_utf8(device_hello(1, Some(&font), true)).unwrap(),
            r#"{"type":"hello","version":1,"features":{"mcp":true,"glyph_push":true},"text_font":{"bundle":"b","charset":"basic","size":14,"bpp":1},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
        // v1.8.0–v2.3.0 (websocket_protocol.cc of those tags): no glyph features, font or not.
        assert_eq!(
            String::from_utf8(device_hello(1, Some(&font), false)).unwrap(),
            r#"{"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
    }

    #[test]
    fn headers_come_in_sorted_key_order() {
        let e = parse_url("ws://h:1/p").unwrap();
        let req = String::from_utf8(handshake_request(
            &e,
            &[
                ("Protocol-Version".into(), "1".into()),
                ("Authorization".into(), "Bearer t".into()),
            ],
            "k",
        ))
        .unwrap();
        let keys: Vec<&str> = req
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once(':').map(|x| x.0))
            .collect();
        assert_eq!(
            keys,
            [
                "Authorization",
                "Connection",
                "Protocol-Version",
                "Sec-WebSocket-Key",
                "Sec-WebSocket-Version",
                "Upgrade"
            ]
        );
        let link = WebsocketProtocol::new(&WsConfig {
            url: "ws://h/".into(),
            token: "a b".into(),
            version: 0,
        });
        assert_eq!(link.authorization().as_deref(), Some("a b"));
        assert_eq!(link.version, 1, "version 0 in the config means 1");
    }
}
