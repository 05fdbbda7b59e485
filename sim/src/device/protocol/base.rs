//! The members of the firmware's `Protocol` base class (`main/protocols/protocol.h:41-86`,
//! `protocol.cc:51-111`) — `session_id_`, the server's audio parameters, `error_occurred_`,
//! `last_incoming_time_` — and the text messages the base builds for every transport
//! (`SendStartListening`, `SendStopListening`, `SendAbortSpeaking`, `SendWakeWordDetected`,
//! `SendMcpMessage`'s envelope), byte for byte as the firmware concatenates them (nothing is
//! escaped). Every transport file imports this one; it imports none of them.

use crate::device::listening::{AbortReason, ListeningMode};
use crate::time::{SimDuration, SimTime};

/// `Protocol::server_sample_rate_` before a server hello sets it (Hz; `protocol.h:77`).
pub(crate) const DEFAULT_SERVER_SAMPLE_RATE: i32 = 24_000;
/// `Protocol::server_frame_duration_` before a server hello sets it (ms; `protocol.h:78`).
pub(crate) const DEFAULT_SERVER_FRAME_DURATION: i32 = 60;
/// `IsTimeout`'s `kTimeoutSeconds` (`protocol.cc:100-111`): a channel with no inbound frame for
/// longer counts as closed.
pub(crate) const CHANNEL_TIMEOUT: SimDuration = SimDuration::from_secs(120);

/// The members of the firmware's `Protocol` base class (`protocol.h:77-81`).
#[derive(Clone, Debug)]
pub(crate) struct ProtocolBase {
    /// `session_id_` from the server hello (raw bytes; empty before one).
    pub(crate) session_id: Vec<u8>,
    /// `server_sample_rate_` from the hello's `audio_params` (Hz).
    pub(crate) server_sample_rate: i32,
    /// `server_frame_duration_` from the hello's `audio_params` (ms).
    pub(crate) server_frame_duration: i32,
    /// `error_occurred_`: a failed connect or missing hello; cleared by the next open.
    pub(crate) error_occurred: bool,
    /// The message of the last `SetError`, not yet alerted (`MAIN_EVENT_ERROR`).
    pub(crate) error_message: Option<&'static str>,
    /// `last_incoming_time_`: the last inbound frame, for the 120 s channel timeout.
    pub(crate) last_incoming: SimTime,
}

impl Default for ProtocolBase {
    fn default() -> Self {
        ProtocolBase {
            session_id: Vec::new(),
            server_sample_rate: DEFAULT_SERVER_SAMPLE_RATE,
            server_frame_duration: DEFAULT_SERVER_FRAME_DURATION,
            error_occurred: false,
            error_message: None,
            last_incoming: SimTime::ZERO,
        }
    }
}

/// `Lang::Strings::ERROR` and the protocol's error messages, zh-CN
/// (`main/assets/locales/zh-CN/language.json:8, 27-30`; docs/reference/voice.md §4).
pub(crate) const LANG_ERROR: &str = "错误";
/// `SERVER_NOT_CONNECTED`: the connect failed (`websocket_protocol.cc:171`).
pub(crate) const SERVER_NOT_CONNECTED: &str = "无法连接服务，请稍后再试";
/// `SERVER_TIMEOUT`: no server hello within 10 s (`websocket_protocol.cc:187`).
pub(crate) const SERVER_TIMEOUT: &str = "等待响应超时";
/// `SERVER_NOT_FOUND`: an MQTT open with no endpoint in NVS (`mqtt_protocol.cc:85-90`).
pub(crate) const SERVER_NOT_FOUND: &str = "正在寻找可用服务";
/// `SERVER_ERROR`: an MQTT publish failed (`mqtt_protocol.cc:172-176`).
pub(crate) const SERVER_ERROR: &str = "发送失败，请检查网络";

impl ProtocolBase {
    /// `SetError(message)` (`protocol.cc:51-56`): `error_occurred_`, and the application is
    /// told (`on_network_error_` → `MAIN_EVENT_ERROR`, `application.cc:513-516`).
    pub(crate) fn set_error(&mut self, message: &'static str) {
        self.error_occurred = true;
        self.error_message = Some(message);
    }

    /// `IsTimeout`: no inbound frame for more than 120 s.
    pub(crate) fn is_timeout(&self, now: SimTime) -> bool {
        now.saturating_since(self.last_incoming) > CHANNEL_TIMEOUT
    }

    /// `{"session_id":"<id>",` + `body` + `}`: how the base class opens every message.
    fn message(&self, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + 20 + self.session_id.len());
        out.extend_from_slice(b"{\"session_id\":\"");
        out.extend_from_slice(&self.session_id);
        out.extend_from_slice(b"\",");
        out.extend_from_slice(body);
        out.push(b'}');
        out
    }

    /// `SendMcpMessage`'s envelope (`protocol.cc:94-98`): the payload goes in as it is.
    pub(crate) fn mcp_envelope(&self, payload: &[u8]) -> Vec<u8> {
        let mut body = Vec::with_capacity(payload.len() + 28);
        body.extend_from_slice(b"\"type\":\"mcp\",\"payload\":");
        body.extend_from_slice(payload);
        self.message(&body)
    }

    /// `SendStartListening(mode)` (`protocol.cc:74-86`).
    pub(crate) fn start_listening(&self, mode: ListeningMode) -> Vec<u8> {
        self.message(format!("\"type\":\"listen\",\"state\":\"start\",\"mode\":\"{}\"", mode.as_str()).as_bytes())
    }

    /// `SendStopListening` (`protocol.cc:88-92`).
    pub(crate) fn stop_listening(&self) -> Vec<u8> {
        self.message(b"\"type\":\"listen\",\"state\":\"stop\"")
    }

    /// `SendAbortSpeaking(reason)` (`protocol.cc:58-65`).
    pub(crate) fn abort_speaking(&self, reason: AbortReason) -> Vec<u8> {
        match reason {
            AbortReason::None => self.message(b"\"type\":\"abort\""),
            AbortReason::WakeWordDetected => self.message(b"\"type\":\"abort\",\"reason\":\"wake_word_detected\""),
        }
    }

    /// `SendWakeWordDetected(word)` (`protocol.cc:67-72`): the word is concatenated as it is,
    /// not escaped.
    pub(crate) fn wake_word_detected(&self, word: &str) -> Vec<u8> {
        let mut body = b"\"type\":\"listen\",\"state\":\"detect\",\"text\":\"".to_vec();
        body.extend_from_slice(word.as_bytes());
        body.push(b'"');
        self.message(&body)
    }

    /// Typed input as py-xiaozhi sends it: `listen detect` with the text JSON-escaped. Not a
    /// firmware message (the firmware sends `detect` only for its wake word).
    pub(crate) fn typed_text(&self, text: &str) -> Vec<u8> {
        let mut body = b"\"type\":\"listen\",\"state\":\"detect\",\"text\":".to_vec();
        crate::cjson::write_string(&mut body, text.as_bytes());
        self.message(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_concatenated_with_the_raw_session_id() {
        let base = ProtocolBase {
            session_id: b"s\"1".to_vec(),
            ..Default::default()
        };
        assert_eq!(
            base.mcp_envelope(b"{}"),
            br#"{"session_id":"s"1","type":"mcp","payload":{}}"#.to_vec()
        );
        assert_eq!(
            base.start_listening(ListeningMode::Manual),
            br#"{"session_id":"s"1","type":"listen","state":"start","mode":"manual"}"#.to_vec()
        );
        assert_eq!(
            base.abort_speaking(AbortReason::WakeWordDetected),
            br#"{"session_id":"s"1","type":"abort","reason":"wake_word_detected"}"#.to_vec()
        );
        assert_eq!(
            base.wake_word_detected("你好\"小智"),
            "{\"session_id\":\"s\"1\",\"type\":\"listen\",\"state\":\"detect\",\"text\":\"你好\"小智\"}"
                .as_bytes()
                .to_vec()
        );
        assert_eq!(
            base.typed_text("a\"b"),
            br#"{"session_id":"s"1","type":"listen","state":"detect","text":"a\"b"}"#.to_vec()
        );
    }

    #[test]
    fn the_channel_times_out_after_120_seconds_without_an_inbound_frame() {
        let base = ProtocolBase::default();
        assert!(!base.is_timeout(SimTime::ZERO + CHANNEL_TIMEOUT));
        assert!(base.is_timeout(SimTime::ZERO + CHANNEL_TIMEOUT + SimDuration::from_micros(1)));
    }
}
