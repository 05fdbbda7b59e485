//! Where a firmware tag's MQTT + UDP protocol differs from 2.4.2's (docs/reference/mqtt.md §8),
//! as data the transport reads (`device::protocol::mqtt`).

/// Where a firmware tag's `MqttProtocol` differs from 2.4.2's (docs/reference/mqtt.md §8; read
/// at every modelled tag of 78/xiaozhi-esp32: `main/protocols/mqtt_protocol.{h,cc}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MqttRules {
    /// `OnDisconnected` arms the 60 s reconnect timer (1.9.0 onwards, v1.9.0 `mqtt_protocol.cc:78-79`);
    /// before, it logs `Disconnected from endpoint` (v1.7.5 `:60`) and nothing reconnects
    /// until the next open.
    pub reconnect_timer: bool,
    /// `Failed to connect to endpoint, code=%d` (2.0.5 onwards, v2.0.5 `:134`); before, the line
    /// has no code (v1.7.5 `:104`).
    pub connect_error_code: bool,
    /// The `keepalive` NVS default: 120 on 1.7.x (v1.7.5 `:45`), 240 from 1.8.0 (v1.8.0 `:43`).
    pub keepalive_default: i32,
    /// What a server `goodbye` does.
    pub goodbye: ServerGoodbye,
    /// 2.4.0's checks (PSA crypto): `ParseServerHello` validates every `udp` field and decodes
    /// key and nonce strictly, and a datagram needs a 16-byte header, its announced length and
    /// a sequence above the last. Before (mbedtls, v2.2.6 `:243-287, 322-366`): no validation,
    /// a datagram under 24 bytes (`sizeof(std::string)`) is dropped, the length is not read, only
    /// a sequence *below* the last is dropped.
    pub strict: bool,
}

/// What a server `goodbye` does, by tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerGoodbye {
    /// Up to 2.1.0: the channel closes when `session_id` is missing or equal, and
    /// `CloseAudioChannel()` publishes a goodbye back (v1.7.5 `:80-83, 151-164`); no `Closing
    /// audio channel` line.
    EchoedMissingOrEqual,
    /// 2.2.x: missing or equal, closed with `CloseAudioChannel(false)`: no goodbye back
    /// (v2.2.2 `:118-123`).
    MissingOrEqual,
    /// 2.3.0 onwards: only a string `session_id` equal to the current one (v2.3.0 `:118`).
    StringEqual,
}

impl MqttRules {
    /// The rules of the tag whose version key is `v` (major, minor, patch, suffix).
    pub(crate) fn of(v: (u32, u32, u32, u32)) -> MqttRules {
        let at_least = |major: u32, minor: u32, patch: u32| (v.0, v.1, v.2) >= (major, minor, patch);
        MqttRules {
            reconnect_timer: at_least(1, 9, 0),
            connect_error_code: at_least(2, 0, 5),
            keepalive_default: if at_least(1, 8, 0) { 240 } else { 120 },
            goodbye: if at_least(2, 3, 0) {
                ServerGoodbye::StringEqual
            } else if at_least(2, 2, 0) {
                ServerGoodbye::MissingOrEqual
            } else {
                ServerGoodbye::EchoedMissingOrEqual
            },
            strict: at_least(2, 4, 0),
        }
    }
}
