//! The MQTT protocol's data (docs/reference/mqtt.md §1, §3): which protocol an OTA answer leads
//! to, the NVS writes its `mqtt` and `websocket` blocks cause, and the client settings the MQTT
//! protocol reads back from NVS namespace `mqtt`, with the firmware's endpoint rule. Knows
//! nothing of sockets or the device; the datagrams are `voice::udp`.

use crate::cjson::Item;
use crate::hw::nvs::{Nvs, names};
use crate::trace::NvsValue;

/// The protocol `Application` makes after the OTA check (`application.cc:502-508`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The answer has an `mqtt` block (with or without a `websocket` one).
    Mqtt,
    /// A `websocket` block and no `mqtt` block.
    WebSocket,
    /// Neither: MQTT, with a warning.
    MqttByDefault,
}

impl Choice {
    /// `HasMqttConfig` → MQTT; else `HasWebsocketConfig` → WebSocket; else MQTT.
    pub fn of(has_mqtt: bool, has_websocket: bool) -> Choice {
        match (has_mqtt, has_websocket) {
            (true, _) => Choice::Mqtt,
            (false, true) => Choice::WebSocket,
            (false, false) => Choice::MqttByDefault,
        }
    }

    /// The warning the firmware logs for the choice, if any.
    pub fn warning(self) -> Option<&'static str> {
        (self == Choice::MqttByDefault).then_some("No protocol specified in the OTA config, using MQTT")
    }
}

/// One NVS write an OTA answer causes: `(namespace, key, value)`.
pub type Write = (&'static str, String, NvsValue);

/// What `Ota::CheckVersion` does with the answer's `mqtt` and `websocket` objects
/// (`ota.cc:146-185`): every string and number member, in order, is written to the namespace of
/// its block (a number as its `valueint`), skipped when NVS already holds that value; other
/// members are ignored. Returns whether each block was an object, and the writes. Each write is
/// `ESP_ERROR_CHECK`ed by `Settings` (`settings.cc:40-63`): a key NVS refuses (over 15 bytes) or a
/// string it cannot hold aborts the device — the caller applies them in order and stops there.
pub fn ota_blocks(root: Item<'_>, nvs: &Nvs) -> (bool, bool, Vec<Write>) {
    let mut writes = Vec::new();
    let mut block = |name: &'static str| -> bool {
        let Some(obj) = root.get(name.as_bytes()).filter(Item::is_object) else {
            return false;
        };
        for item in obj.children() {
            let key = String::from_utf8_lossy(item.key().unwrap_or_default()).into_owned();
            let value = if let Some(s) = item.c_string().filter(|_| item.is_string()) {
                NvsValue::Str(s.to_vec())
            } else if item.is_number() {
                NvsValue::I32(item.valueint())
            } else {
                continue;
            };
            let unchanged = match &value {
                NvsValue::Str(s) => nvs.get_str(name, &key).unwrap_or_default() == s.as_slice(),
                // `GetInt(key)` defaults to 0: writing 0 over nothing is skipped.
                NvsValue::I32(v) => nvs.get_i32(name, &key, 0) == *v,
                _ => false,
            };
            if !unchanged {
                writes.push((name, key, value));
            }
        }
        true
    };
    let has_mqtt = block("mqtt");
    let has_websocket = block("websocket");
    (has_mqtt, has_websocket, writes)
}

/// The OTA answer's `mqtt` block as a world gives it (a backend's answer, as data): the
/// members xiaozhi-esp32-server and the official cloud send (`ota_handler.py`), each written to
/// NVS namespace `mqtt` under its own name when the device boots.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttBlock {
    /// `endpoint`: `host` or `host:port` (8883, TLS, without a port).
    pub endpoint: String,
    /// `client_id`.
    #[serde(default)]
    pub client_id: String,
    /// `username`.
    #[serde(default)]
    pub username: String,
    /// `password`.
    #[serde(default)]
    pub password: String,
    /// `publish_topic`.
    #[serde(default)]
    pub publish_topic: String,
    /// `subscribe_topic` (stored; the firmware never subscribes).
    #[serde(default)]
    pub subscribe_topic: String,
    /// `keepalive`, seconds (240 when absent).
    #[serde(default)]
    pub keepalive: Option<i32>,
}

impl MqttBlock {
    /// The block's members as `(key, value)`, in the order the answer lists them.
    pub fn nvs_writes(&self) -> Vec<(&'static str, NvsValue)> {
        let s = |v: &str| NvsValue::Str(v.as_bytes().to_vec());
        let mut out = vec![
            ("endpoint", s(&self.endpoint)),
            ("client_id", s(&self.client_id)),
            ("username", s(&self.username)),
            ("password", s(&self.password)),
            ("publish_topic", s(&self.publish_topic)),
            ("subscribe_topic", s(&self.subscribe_topic)),
        ];
        if let Some(k) = self.keepalive {
            out.push(("keepalive", NvsValue::I32(k)));
        }
        out
    }
}

/// What `StartMqttClient` reads from NVS namespace `mqtt` (`mqtt_protocol.cc:77-83`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MqttSettings {
    /// `endpoint`: `host` or `host:port`.
    pub endpoint: String,
    /// `client_id`.
    pub client_id: String,
    /// `username`.
    pub username: String,
    /// `password`.
    pub password: String,
    /// `keepalive`, seconds (240 when absent).
    pub keepalive: i32,
    /// `publish_topic`: where every message goes (the firmware subscribes to nothing).
    pub publish_topic: String,
}

impl MqttSettings {
    /// The settings as NVS holds them (missing strings are empty; `keepalive` defaults to
    /// `keepalive_default`, [`crate::firmware::MqttRules::keepalive_default`]).
    pub fn from_nvs(nvs: &Nvs, keepalive_default: i32) -> Self {
        let s = |key: &str| String::from_utf8_lossy(nvs.get_str(names::MQTT, key).unwrap_or_default()).into_owned();
        MqttSettings {
            endpoint: s("endpoint"),
            client_id: s("client_id"),
            username: s("username"),
            password: s("password"),
            keepalive: nvs.get_i32(names::MQTT, names::KEEPALIVE, keepalive_default),
            publish_topic: s("publish_topic"),
        }
    }

    /// Where the client connects, by the firmware's rule (`mqtt_protocol.cc:148-157`).
    pub fn broker(&self) -> Broker {
        split_endpoint(&self.endpoint)
    }
}

/// What the client connects with (esp-ml307 `EspMqtt::Connect`, `esp_mqtt.cc:18-47`): the
/// broker from the endpoint, the credentials and keepalive from NVS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MqttDial {
    /// The broker's host (before the endpoint's first `:`).
    pub host: String,
    /// The broker's port (`std::stoi` of the rest; not range-checked by the firmware).
    pub port: i32,
    /// `client_id`.
    pub client_id: String,
    /// `username`.
    pub username: String,
    /// `password`.
    pub password: String,
    /// Keepalive, seconds (esp-mqtt pings after half of it without traffic).
    pub keepalive: i32,
}

/// The broker an endpoint names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broker {
    /// Connect to `host:port`.
    At {
        /// Everything before the first `:`.
        host: String,
        /// `std::stoi` of what follows it, or 8883 without a `:` (not checked against 65535).
        port: i32,
    },
    /// An empty endpoint: `MQTT endpoint is not specified`, no connection.
    NotSpecified,
    /// `std::stoi` throws (`invalid_argument`: no digits after the `:`; `out_of_range`): nothing
    /// catches it, and the device aborts.
    Throws(&'static str),
}

/// `endpoint.find(':')`, then `std::stoi` of the rest: leading whitespace and a sign allowed,
/// digits up to the first non-digit (`1883x` is 1883), none at all throws.
pub fn split_endpoint(endpoint: &str) -> Broker {
    if endpoint.is_empty() {
        return Broker::NotSpecified;
    }
    let Some((host, rest)) = endpoint.split_once(':') else {
        return Broker::At {
            host: endpoint.to_string(),
            port: 8883,
        };
    };
    let t = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (sign, digits) = match t.as_bytes().first() {
        Some(b'-') => (-1i64, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    };
    let run: &str = &digits[..digits.bytes().take_while(u8::is_ascii_digit).count()];
    if run.is_empty() {
        return Broker::Throws("std::invalid_argument: stoi");
    }
    let value = run
        .bytes()
        .try_fold(0i64, |acc, d| acc.checked_mul(10)?.checked_add(i64::from(d - b'0')))
        .map(|v| sign * v)
        .and_then(|v| i32::try_from(v).ok());
    match value {
        Some(port) => Broker::At {
            host: host.to_string(),
            port,
        },
        None => Broker::Throws("std::out_of_range: stoi"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cjson::{Limits, Parser, Terminator};

    #[test]
    fn an_mqtt_block_wins_even_beside_a_websocket_one() {
        assert_eq!(Choice::of(true, true), Choice::Mqtt);
        assert_eq!(Choice::of(true, false), Choice::Mqtt);
        assert_eq!(Choice::of(false, true), Choice::WebSocket);
        assert_eq!(Choice::of(false, false), Choice::MqttByDefault);
        assert_eq!(
            Choice::of(false, false).warning(),
            Some("No protocol specified in the OTA config, using MQTT")
        );
        assert_eq!(Choice::Mqtt.warning(), None);
    }

    fn blocks(answer: &str, nvs: &Nvs) -> (bool, bool, Vec<Write>) {
        let mut p = Parser::new();
        let doc = p.parse(answer.as_bytes(), Terminator::Nul, Limits::default()).unwrap();
        ota_blocks(doc.root(), nvs)
    }

    #[test]
    fn the_answers_blocks_become_nvs_writes_of_strings_and_numbers_only_when_changed() {
        let mut nvs = Nvs::new(0x4000);
        nvs.set("mqtt", "endpoint", NvsValue::Str(b"old:1883".to_vec()))
            .unwrap();
        let answer = r#"{"mqtt":{"endpoint":"old:1883","client_id":"GID_x@@@a@@@a","keepalive":30.9,"tls":true,"extra":null},
            "websocket":{"url":"ws://h/x","version":0}}"#;
        let (m, w, writes) = blocks(answer, &nvs);
        assert!(m && w);
        let shown: Vec<(&str, &str, String)> = writes
            .iter()
            .map(|(n, k, v)| (*n, k.as_str(), format!("{v:?}")))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "mqtt",
                    "client_id",
                    format!("{:?}", NvsValue::Str(b"GID_x@@@a@@@a".to_vec()))
                ),
                ("mqtt", "keepalive", format!("{:?}", NvsValue::I32(30))),
                ("websocket", "url", format!("{:?}", NvsValue::Str(b"ws://h/x".to_vec()))),
            ],
            "the unchanged endpoint, the bool, the null and a 0 over nothing are not written"
        );
        let (m, w, _) = blocks(r#"{"mqtt":"x","websocket":[]}"#, &nvs);
        assert!(!m && !w, "blocks must be objects");
    }

    #[test]
    fn the_endpoint_is_split_as_stoi_reads_it() {
        let at = |host: &str, port: i32| Broker::At {
            host: host.into(),
            port,
        };
        assert_eq!(split_endpoint("mqtt.xiaozhi.me"), at("mqtt.xiaozhi.me", 8883));
        assert_eq!(split_endpoint("10.0.0.2:1883"), at("10.0.0.2", 1883));
        assert_eq!(
            split_endpoint("h: 1883x"),
            at("h", 1883),
            "whitespace, then digits up to the x"
        );
        assert_eq!(
            split_endpoint("h:99999"),
            at("h", 99999),
            "no range check before connecting"
        );
        assert_eq!(split_endpoint("h:-1"), at("h", -1));
        assert_eq!(split_endpoint(""), Broker::NotSpecified);
        assert!(matches!(split_endpoint("h:"), Broker::Throws(_)));
        assert!(matches!(split_endpoint("h:port"), Broker::Throws(_)));
        assert!(
            matches!(split_endpoint("::1:1883"), Broker::Throws(_)),
            "IPv6 splits at its first colon"
        );
        assert!(matches!(split_endpoint("h:99999999999"), Broker::Throws(m) if m.contains("out_of_range")));
    }

    #[test]
    fn the_settings_come_from_nvs_with_a_240_s_keepalive_by_default() {
        let mut nvs = Nvs::new(0x4000);
        let s = MqttSettings::from_nvs(&nvs, 240);
        assert_eq!((s.keepalive, s.broker()), (240, Broker::NotSpecified));
        nvs.set("mqtt", "endpoint", NvsValue::Str(b"gw:1883".to_vec())).unwrap();
        nvs.set("mqtt", "publish_topic", NvsValue::Str(b"device-server".to_vec()))
            .unwrap();
        nvs.set("mqtt", "keepalive", NvsValue::I32(60)).unwrap();
        let s = MqttSettings::from_nvs(&nvs, 240);
        assert_eq!(s.publish_topic, "device-server");
        assert_eq!(s.keepalive, 60);
        assert_eq!(
            s.broker(),
            Broker::At {
                host: "gw".into(),
                port: 1883
            }
        );
    }
}
