//! The protocol object (`protocol_`): how MCP payloads leave and arrive
//! (`main/protocols/protocol.cc`, `websocket_protocol.cc`, esp-ml307 `web_socket.cc`;
//! FIRMWARE.md §8).
//!
//! * [`Link::Direct`]: the conformance recorder's feed — `ParseMessage` is called directly and
//!   every reply leaves while the protocol object exists (as over MQTT).
//! * [`Link::WebSocket`]: the on-demand audio channel. The device dials the server itself (the
//!   driver only carries bytes), sends its hello, waits 10 s for the server hello, wraps MCP
//!   in `{"session_id":…,"type":"mcp","payload":…}`, and drops sends on a closed socket
//!   without a trace. Knows nothing about real sockets.

use crate::cjson;

/// The WebSocket settings the OTA server hands out (`websocket/url`, `token`, `version` in NVS).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsConfig {
    pub url: String,
    #[serde(default)]
    pub token: String,
    #[serde(default)]
    pub version: i32,
}

/// Where the socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socket {
    /// `websocket_ == nullptr`.
    None,
    /// `Connect()` in progress (the driver is dialling).
    Connecting,
    /// Handshake done (`IsConnected()`).
    Connected,
    /// The connect failed, or the peer closed: the object exists, `IsConnected()` is false.
    Disconnected,
}

/// `WebsocketProtocol` state.
#[derive(Clone, Debug)]
pub struct WsLink {
    pub url: String,
    pub token: String,
    pub version: i32,
    pub socket: Socket,
    pub session_id: Vec<u8>,
    pub error: bool,
    pub hello_received: bool,
    pub server_sample_rate: i32,
    pub server_frame_duration: i32,
    pub last_incoming: crate::time::SimTime,
}

impl WsLink {
    pub fn new(config: &WsConfig) -> Self {
        WsLink {
            url: config.url.clone(),
            token: config.token.clone(),
            version: if config.version != 0 { config.version } else { 1 },
            socket: Socket::None,
            session_id: Vec::new(),
            error: false,
            hello_received: false,
            server_sample_rate: 24000,
            server_frame_duration: 60,
            last_incoming: crate::time::SimTime::ZERO,
        }
    }

    /// `IsAudioChannelOpened`: connected, no error, an inbound frame within 120 s.
    pub fn is_audio_channel_opened(&self, now: crate::time::SimTime) -> bool {
        self.socket == Socket::Connected
            && !self.error
            && now.saturating_since(self.last_incoming) <= crate::time::SimDuration::from_secs(120)
    }

    /// `Protocol::SendMcpMessage`'s envelope: hand-built, the session id is not escaped.
    pub fn mcp_envelope(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() + 48 + self.session_id.len());
        out.extend_from_slice(b"{\"session_id\":\"");
        out.extend_from_slice(&self.session_id);
        out.extend_from_slice(b"\",\"type\":\"mcp\",\"payload\":");
        out.extend_from_slice(payload);
        out.push(b'}');
        out
    }

    /// `SendStartListening(mode)`.
    pub fn listen_start(&self, mode: &str) -> Vec<u8> {
        let mut out = b"{\"session_id\":\"".to_vec();
        out.extend_from_slice(&self.session_id);
        out.extend_from_slice(format!("\",\"type\":\"listen\",\"state\":\"start\",\"mode\":\"{mode}\"}}").as_bytes());
        out
    }

    /// The `Authorization` value: the token, `Bearer `-prefixed when it has no space; none when empty.
    pub fn authorization(&self) -> Option<String> {
        if self.token.is_empty() {
            None
        } else if self.token.contains(' ') {
            Some(self.token.clone())
        } else {
            Some(format!("Bearer {}", self.token))
        }
    }
}

/// The board's built-in font as the hello advertises it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextFontSpec {
    pub bundle: String,
    #[serde(default = "basic")]
    pub charset: String,
    pub size: i32,
    pub bpp: i32,
}

fn basic() -> String {
    "basic".into()
}

/// `WebsocketProtocol::GetHelloMessage` (cJSON, key order as built).
pub fn device_hello(version: i32, font: Option<&TextFontSpec>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"hello\",\"version\":");
    cjson::write_int(&mut out, version);
    out.extend_from_slice(b",\"features\":{\"mcp\":true,\"glyph_push\":");
    out.extend_from_slice(if font.is_some() { b"true" } else { b"false" });
    out.push(b'}');
    if let Some(f) = font {
        out.extend_from_slice(b",\"text_font\":{\"bundle\":");
        cjson::write_string(&mut out, f.bundle.as_bytes());
        out.extend_from_slice(b",\"charset\":");
        cjson::write_string(&mut out, f.charset.as_bytes());
        out.extend_from_slice(b",\"size\":");
        cjson::write_int(&mut out, f.size);
        out.extend_from_slice(b",\"bpp\":");
        cjson::write_int(&mut out, f.bpp);
        out.push(b'}');
    }
    out.extend_from_slice(
        b",\"transport\":\"websocket\",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,\"channels\":1,\"frame_duration\":60}}",
    );
    out
}

/// A parsed `ws://` URL as esp-ml307 splits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// esp-ml307's URL split: `wss://`/`https://` mean TLS; the default port is 443 for `wss` and
/// 80 for anything else (even `https`); the path defaults to `/`.
pub fn parse_url(url: &str) -> Option<Endpoint> {
    let (scheme, rest) = url.split_once("://")?;
    let tls = matches!(scheme, "wss" | "https");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (authority.to_string(), if scheme == "wss" { 443 } else { 80 }),
    };
    if host.is_empty() {
        return None;
    }
    Some(Endpoint { tls, host, port, path })
}

/// The handshake request esp-ml307 writes: request line, `Host`, then every header in
/// byte-wise sorted key order (they live in an ordered map).
pub fn handshake_request(endpoint: &Endpoint, headers: &[(String, String)], key: &str) -> Vec<u8> {
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
            String::from_utf8(device_hello(1, Some(&font))).unwrap(),
            r#"{"type":"hello","version":1,"features":{"mcp":true,"glyph_push":true},"text_font":{"bundle":"b","charset":"basic","size":14,"bpp":1},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
    }

    #[test]
    fn urls_split_like_esp_ml307() {
        assert_eq!(
            parse_url("ws://127.0.0.1:8000/xiaozhi/v1/"),
            Some(Endpoint {
                tls: false,
                host: "127.0.0.1".into(),
                port: 8000,
                path: "/xiaozhi/v1/".into()
            })
        );
        assert_eq!(parse_url("https://x").map(|e| (e.tls, e.port)), Some((true, 80)));
        assert_eq!(parse_url("wss://x").map(|e| (e.tls, e.port)), Some((true, 443)));
        assert_eq!(parse_url("nonsense"), None);
    }

    #[test]
    fn headers_come_in_sorted_key_order_and_the_session_id_is_raw() {
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
        let mut link = WsLink::new(&WsConfig {
            url: "ws://h/".into(),
            token: "a b".into(),
            version: 0,
        });
        assert_eq!(link.authorization().as_deref(), Some("a b"));
        link.session_id = b"s\"1".to_vec();
        assert_eq!(
            link.mcp_envelope(b"{}"),
            br#"{"session_id":"s"1","type":"mcp","payload":{}}"#.to_vec()
        );
    }
}
