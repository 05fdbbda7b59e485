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
//!
//! The application's side lives here too: `OpenAudioChannel` split where it blocks (connect,
//! device hello, the 10 s wait for the server hello), the server hello, incoming JSON, the peer
//! closing, and destroying the socket object.

use crate::board::TextFontSpec;
use crate::cjson;
use crate::device::app::RebootStage;
use crate::device::app::{Running, Step, Task};
use crate::device::state::DeviceState;
use crate::device::voice::{AbortReason, ListeningMode};
use crate::device::{Core, Output};
use crate::mcp::Received;
use crate::trace::{Event, LogLevel};
use crate::world::WsConfig;

/// `Protocol::server_sample_rate_` before a server hello sets it (Hz; `protocol.h`).
pub const DEFAULT_SERVER_SAMPLE_RATE: i32 = 24_000;
/// `Protocol::server_frame_duration_` before a server hello sets it (ms; `protocol.h`).
pub const DEFAULT_SERVER_FRAME_DURATION: i32 = 60;

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
    /// `websocket/url` from the OTA answer.
    pub url: String,
    /// `websocket/token`; empty means no `Authorization` header.
    pub token: String,
    /// `Protocol-Version` (1 when the config says 0).
    pub version: i32,
    /// Where the socket object is.
    pub socket: Socket,
    /// `session_id_` from the server hello (raw bytes; empty before one).
    pub session_id: Vec<u8>,
    /// `error_occurred_`: a failed connect or missing hello; cleared by the next open.
    pub error: bool,
    /// The server hello arrived since the last open (the event-group bit).
    pub hello_received: bool,
    /// `server_sample_rate_` from the hello's `audio_params` (Hz; 24000 until then).
    pub server_sample_rate: i32,
    /// `server_frame_duration_` from the hello's `audio_params` (ms; 60 until then).
    pub server_frame_duration: i32,
    /// `last_incoming_time_`: the last inbound frame, for the 120 s channel timeout.
    pub last_incoming: crate::time::SimTime,
}

impl WsLink {
    /// The `WebsocketProtocol` built from `config`, with no socket yet.
    pub fn new(config: &WsConfig) -> Self {
        WsLink {
            url: config.url.clone(),
            token: config.token.clone(),
            version: if config.version != 0 { config.version } else { 1 },
            socket: Socket::None,
            session_id: Vec::new(),
            error: false,
            hello_received: false,
            server_sample_rate: DEFAULT_SERVER_SAMPLE_RATE,
            server_frame_duration: DEFAULT_SERVER_FRAME_DURATION,
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

/// `WebsocketProtocol::GetHelloMessage` (cJSON, key order as built). `glyph_push`: the 2.4.0
/// features (`glyph_push`, `text_font`); earlier tags send `"features":{"mcp":true}` alone.
pub fn device_hello(version: i32, font: Option<&TextFontSpec>, glyph_push: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"hello\",\"version\":");
    cjson::write_int(&mut out, version);
    if !glyph_push {
        out.extend_from_slice(b",\"features\":{\"mcp\":true}");
        out.extend_from_slice(
            b",\"transport\":\"websocket\",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,\"channels\":1,\"frame_duration\":60}}",
        );
        return out;
    }
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
    /// `wss://` or `https://`.
    pub tls: bool,
    /// Host name or address, without the port.
    pub host: String,
    /// Port (explicit, else 443 for `wss`, 80 otherwise).
    pub port: u16,
    /// Request path (`/` when the URL has none).
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

/// The protocol object (`protocol_`): how replies leave the device.
#[derive(Clone, Debug)]
pub enum Link {
    /// Replies go straight out while the protocol object exists (the conformance recorder's
    /// stand-in; behaves like MQTT: nothing to close, nothing to open).
    Direct,
    /// The on-demand WebSocket audio channel.
    WebSocket(Box<WsLink>),
}

/// `ContinueOpenAudioChannel` / `OpenAudioChannel`, split where it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenStage {
    /// Check the state, replace the socket and start the connect.
    Begin,
    /// Woken by the connect result (or after 10 s): send the device hello or give up.
    AwaitConnect,
    /// Woken by the server hello (or after 10 s): start listening or give up.
    AwaitHello,
}

impl Running {
    /// Destroys the WebSocket object if there is one (the peer sees TCP close, no close frame).
    pub(super) fn drop_socket(&mut self, core: &mut Core, why: &'static str) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && ws.socket != Socket::None
        {
            ws.socket = Socket::None;
            core.emit(|| Event::Note {
                text: format!("websocket destroyed ({why}): TCP closed without a close frame"),
            });
            core.push_output(Output::WsClose { at: core.now });
        }
    }

    pub(super) fn channel_open(&self, now: crate::time::SimTime) -> bool {
        matches!(&self.protocol, Some(Link::WebSocket(ws)) if ws.is_audio_channel_opened(now))
    }

    /// `HandleToggleChatEvent`.
    pub(super) fn toggle_chat(&mut self, core: &mut Core) {
        match self.state {
            DeviceState::Activating => {
                self.set_state(core, DeviceState::Idle);
                return;
            }
            DeviceState::WifiConfiguring | DeviceState::AudioTesting => return,
            _ => {}
        }
        if self.protocol.is_none() {
            core.log(LogLevel::Error, "Application", || "Protocol not initialized");
            return;
        }
        match self.state {
            DeviceState::Idle => {
                if !self.channel_open(core.now) && matches!(self.protocol, Some(Link::WebSocket(_))) {
                    self.set_state(core, DeviceState::Connecting);
                    self.main.schedule(Task::OpenChannel {
                        mode: ListeningMode::Auto,
                        stage: OpenStage::Begin,
                        wake: None,
                    });
                } else {
                    self.set_listening_mode(core, ListeningMode::Auto);
                }
            }
            DeviceState::Listening => {
                // CloseAudioChannel: the socket goes; its disconnect callback schedules idle.
                self.drop_socket(core, "user closed the channel");
                self.main.schedule(Task::SetState(DeviceState::Idle));
            }
            DeviceState::Speaking => self.abort_speaking(core, AbortReason::None),
            _ => {}
        }
    }

    /// `ContinueOpenAudioChannel` → `OpenAudioChannel`, which blocks the main task while it
    /// connects (esp-ml307: up to 10 s) and while it waits for the server hello (10 s).
    pub(super) fn open_channel(
        &mut self,
        core: &mut Core,
        mode: ListeningMode,
        stage: OpenStage,
        wake: Option<String>,
    ) -> Step {
        let now = core.now;
        let timeout = core.delay(10_000);
        match stage {
            OpenStage::Begin => {
                if self.state != DeviceState::Connecting {
                    return Step::Done;
                }
                if self.channel_open(now) {
                    self.after_open(core, mode, wake);
                    return Step::Done;
                }
                // A new socket object replaces the old one (which closes its TCP connection).
                self.drop_socket(core, "replaced by a new connection");
                let uuid = self.uuid.clone();
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                ws.error = false;
                ws.hello_received = false;
                let Some(endpoint) = parse_url(&ws.url).filter(|e| !e.tls) else {
                    let url = ws.url.clone();
                    core.log(LogLevel::Error, "WS", || {
                        format!("Failed to connect to websocket server: {url} (the twin dials ws:// only)")
                    });
                    ws.error = true;
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                };
                let mut headers = Vec::new();
                if let Some(a) = ws.authorization() {
                    headers.push(("Authorization".to_string(), a));
                }
                headers.push(("Protocol-Version".to_string(), ws.version.to_string()));
                headers.push(("Device-Id".to_string(), core.mac.clone()));
                headers.push(("Client-Id".to_string(), uuid));
                let key = {
                    use rand_core::RngCore;
                    let mut k = [0u8; 16];
                    core.rng.fill_bytes(&mut k);
                    base64_key(&k)
                };
                let request = handshake_request(&endpoint, &headers, &key);
                ws.socket = Socket::Connecting;
                let url = ws.url.clone();
                let version = ws.version;
                core.log(LogLevel::Info, "WS", || {
                    format!("Connecting to websocket server: {url} with version: {version}")
                });
                core.push_output(Output::WsOpen {
                    endpoint,
                    request,
                    at: now,
                });
                Step::Block(
                    timeout,
                    Task::OpenChannel {
                        mode,
                        stage: OpenStage::AwaitConnect,
                        wake,
                    },
                )
            }
            OpenStage::AwaitConnect => {
                let font = core.spec.text_font();
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                if ws.socket != Socket::Connected {
                    ws.error = true;
                    core.log(LogLevel::Error, "WS", || "Failed to connect to websocket server");
                    core.emit(|| Event::Note {
                        text: "audio channel failed: server not connected".into(),
                    });
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                }
                let hello = device_hello(ws.version, font.as_ref(), core.firmware.glyph_push);
                core.push_output(Output::WsText { text: hello, at: now });
                Step::Block(
                    timeout,
                    Task::OpenChannel {
                        mode,
                        stage: OpenStage::AwaitHello,
                        wake,
                    },
                )
            }
            OpenStage::AwaitHello => {
                let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
                    return Step::Done;
                };
                if !ws.hello_received {
                    ws.error = true;
                    core.log(LogLevel::Error, "WS", || "Failed to receive server hello");
                    core.emit(|| Event::Note {
                        text: "audio channel failed: no server hello within 10 s".into(),
                    });
                    self.set_state(core, DeviceState::Idle);
                    return Step::Done;
                }
                ws.last_incoming = now;
                core.emit(|| Event::Note {
                    text: "audio channel opened".into(),
                });
                if self.state == DeviceState::Connecting {
                    self.after_open(core, mode, wake);
                }
                Step::Done
            }
        }
    }

    /// The channel is open: listening in `mode`, or the wake word's `listen detect` first.
    fn after_open(&mut self, core: &mut Core, mode: ListeningMode, wake: Option<String>) {
        match wake {
            Some(word) => self.continue_wake_word(core, &word),
            None => self.set_listening_mode(core, mode),
        }
    }

    /// The driver finished (or failed) the TCP connect and handshake.
    pub fn ws_open_result(&mut self, core: &mut Core, ok: bool) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && ws.socket == Socket::Connecting
        {
            ws.socket = if ok { Socket::Connected } else { Socket::Disconnected };
            let now = core.now;
            self.main.wake(now);
        }
    }

    /// The peer closed or the TCP connection broke: `on_audio_channel_closed` schedules idle.
    ///
    /// A close during the connect ends esp-ml307's `Connect()` early (it fails). A close while
    /// `OpenAudioChannel` waits for the server hello does not: that wait is an event-group wait
    /// on the hello bit alone, so the device reports `Failed to receive server hello` only when
    /// the full 10 s have passed (a server that refuses the token with `认证失败` and closes).
    pub fn ws_closed(&mut self, core: &mut Core) {
        if let Some(Link::WebSocket(ws)) = self.protocol.as_mut()
            && matches!(ws.socket, Socket::Connected | Socket::Connecting)
        {
            let was_connecting = ws.socket == Socket::Connecting;
            ws.socket = Socket::Disconnected;
            core.log(LogLevel::Info, "WS", || "Websocket disconnected");
            self.main.schedule(Task::SetState(DeviceState::Idle));
            if was_connecting {
                let now = core.now;
                self.main.wake(now);
            }
        }
    }

    /// The server hello (`ParseServerHello`). `Err` is the firmware's crash on a missing or
    /// non-string `transport` (a null pointer dereference: panic, reboot).
    pub fn server_hello(&mut self, core: &mut Core, root: crate::cjson::Item<'_>) -> Result<(), String> {
        let Some(Link::WebSocket(ws)) = self.protocol.as_mut() else {
            return Ok(());
        };
        let transport = root.get(b"transport");
        let Some(t) = transport.and_then(|t| t.c_string()) else {
            return Err("server hello without a string `transport`: NULL dereference in ParseServerHello".into());
        };
        if t != b"websocket" {
            let shown = String::from_utf8_lossy(t).into_owned();
            core.log(LogLevel::Error, "WS", || format!("Unsupported transport: {shown}"));
            return Ok(());
        }
        if let Some(sid) = root.get(b"session_id").and_then(|s| s.c_string()) {
            ws.session_id = sid.to_vec();
        }
        if let Some(ap) = root.get(b"audio_params").filter(crate::cjson::Item::is_object) {
            if let Some(r) = ap.get(b"sample_rate").filter(crate::cjson::Item::is_number) {
                ws.server_sample_rate = r.valueint();
            }
            if let Some(f) = ap.get(b"frame_duration").filter(crate::cjson::Item::is_number) {
                ws.server_frame_duration = f.valueint();
            }
        }
        ws.hello_received = true;
        let sid = String::from_utf8_lossy(&ws.session_id).into_owned();
        core.emit(|| Event::Note {
            text: format!("server hello, session {sid}"),
        });
        let now = core.now;
        self.main.wake(now);
        Ok(())
    }

    /// The application dispatcher for a non-hello JSON frame (`OnIncomingJson`).
    pub fn incoming_json(&mut self, core: &mut Core, root: crate::cjson::Item<'_>) -> Option<Received> {
        let kind = root.get(b"type").and_then(|t| t.c_string())?;
        match kind {
            b"mcp" => {
                let payload = root.get(b"payload").filter(crate::cjson::Item::is_object)?;
                Some(self.mcp.receive(payload))
            }
            b"system" => {
                if root.get(b"command").and_then(|c| c.c_string()) == Some(b"reboot") {
                    core.log(LogLevel::Info, "Application", || "System command: reboot");
                    self.main.schedule(Task::Reboot {
                        stage: RebootStage::Enter,
                    });
                }
                None
            }
            b"tts" | b"stt" | b"llm" => {
                self.incoming_voice_json(core, kind, root);
                None
            }
            _ => None,
        }
    }

    /// A user action: BOOT click / wake word (`MAIN_EVENT_TOGGLE_CHAT`).
    pub fn request_toggle_chat(&mut self) {
        self.main.schedule(Task::ToggleChat);
    }
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
