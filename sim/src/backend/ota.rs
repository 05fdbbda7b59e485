//! The OTA endpoint of a xiaozhi server as xiaozhi-esp32-server answers a device's activation
//! request (`core/api/ota_handler.py` `handle_post`, 7475ea2b; docs/reference/mqtt.md §7): a
//! `mqtt` block for the MQTT gateway when `server.mqtt_gateway` is set, else a `websocket`
//! block. Sans-IO: the HTTP layer hands in the headers and the body, and sends back the text.

use base64::Engine;
use serde_json::{Value, json};

use super::gateway::password_signature;
use crate::provisioning::MqttBlock;

/// What the server's config says about its endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtaConfig {
    /// The WebSocket URL handed out without a gateway (`server.websocket`).
    pub websocket_url: String,
    /// `server.mqtt_gateway`: the gateway's `host:port`; when set, the answer is MQTT.
    pub mqtt_gateway: Option<String>,
    /// `server.mqtt_signature_key`: signs the MQTT password (empty password without it).
    pub signature_key: Option<String>,
    /// `server.timezone_offset`, hours (8 by default).
    pub timezone_offset_hours: i64,
}

/// The server's username for every MQTT device: base64 of Python's `json.dumps({"ip": "unknown"})`
/// (its default separators put a space after the colon).
pub const MQTT_USERNAME_JSON: &str = r#"{"ip": "unknown"}"#;

/// A request the handler refuses (it catches its own exception and answers
/// `{"success":false,"message":"request error."}`, still HTTP 200).
pub const REFUSED: &str = r#"{"success":false,"message":"request error."}"#;

/// The answer to one activation request: `headers` as sent (names matched without case, as
/// aiohttp does), `body` the device's system info, `now_ms` the server's clock (Unix ms).
pub fn answer(config: &OtaConfig, headers: &[(String, String)], body: &[u8], now_ms: u64) -> String {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let device_id = header("device-id").unwrap_or_default();
    let client_id = header("client-id").unwrap_or_default();
    // `raise Exception("OTA请求设备ID为空")` / `…ClientID为空`.
    if device_id.is_empty() || client_id.is_empty() {
        return REFUSED.to_string();
    }
    let info: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = ["device-model", "device_model", "model"]
        .iter()
        .find_map(|h| header(h).map(str::trim))
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .or_else(|| match info.get("board") {
            Some(Value::Object(b)) => b.get("type").and_then(Value::as_str).map(str::to_string),
            _ => info.get("model").and_then(Value::as_str).map(str::to_string),
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let version = info
        .pointer("/application/version")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .unwrap_or("0.0.0");
    let mut root = json!({
        "server_time": {"timestamp": now_ms, "timezone_offset": config.timezone_offset_hours * 60},
        "firmware": {"version": version, "url": ""},
    });
    match &config.mqtt_gateway {
        Some(endpoint) if !endpoint.is_empty() => {
            let b = mqtt_block(endpoint, &model, device_id, config.signature_key.as_deref());
            root["mqtt"] = json!({
                "endpoint": b.endpoint,
                "client_id": b.client_id,
                "username": b.username,
                "password": b.password,
                "publish_topic": b.publish_topic,
                "subscribe_topic": b.subscribe_topic,
            });
        }
        _ => root["websocket"] = json!({"url": config.websocket_url, "token": ""}),
    }
    root.to_string()
}

/// The `mqtt` block the server hands a device of board type `model` and MAC `device_id` for a
/// gateway at `endpoint`, its password signed with `key` (empty without one).
pub fn mqtt_block(endpoint: &str, model: &str, device_id: &str, key: Option<&str>) -> MqttBlock {
    let group = format!("GID_{model}").replace([':', ' '], "_");
    let mac = device_id.replace(':', "_");
    let client_id = format!("{group}@@@{mac}@@@{mac}");
    let username = base64::engine::general_purpose::STANDARD.encode(MQTT_USERNAME_JSON);
    let password = key
        .filter(|k| !k.is_empty())
        .map(|k| password_signature(&format!("{client_id}|{username}"), k))
        .unwrap_or_default();
    MqttBlock {
        endpoint: endpoint.to_string(),
        client_id,
        username,
        password,
        publish_topic: "device-server".into(),
        subscribe_topic: format!("devices/p2p/{mac}"),
        keepalive: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(mac: &str) -> Vec<(String, String)> {
        vec![("Device-Id".into(), mac.into()), ("Client-Id".into(), "uuid-1".into())]
    }

    fn config(gateway: Option<&str>, key: Option<&str>) -> OtaConfig {
        OtaConfig {
            websocket_url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
            mqtt_gateway: gateway.map(str::to_string),
            signature_key: key.map(str::to_string),
            timezone_offset_hours: 8,
        }
    }

    #[test]
    fn a_gateway_in_the_config_hands_out_mqtt_and_no_websocket() {
        let body = br#"{"application":{"version":"2.4.2"},"board":{"type":"bread-compact-wifi"}}"#;
        let a: Value = serde_json::from_str(&answer(
            &config(Some("10.0.0.2:1883"), Some("k")),
            &headers("aa:bb:cc:00:11:22"),
            body,
            7,
        ))
        .unwrap();
        let m = &a["mqtt"];
        assert_eq!(m["endpoint"], "10.0.0.2:1883");
        assert_eq!(
            m["client_id"],
            "GID_bread-compact-wifi@@@aa_bb_cc_00_11_22@@@aa_bb_cc_00_11_22"
        );
        // base64 of `{"ip": "unknown"}`, as Python's json.dumps writes it.
        assert_eq!(m["username"], "eyJpcCI6ICJ1bmtub3duIn0=");
        let signed = password_signature(
            &format!(
                "{}|{}",
                m["client_id"].as_str().unwrap(),
                m["username"].as_str().unwrap()
            ),
            "k",
        );
        assert_eq!(m["password"], signed.as_str());
        assert_eq!(m["publish_topic"], "device-server");
        assert_eq!(m["subscribe_topic"], "devices/p2p/aa_bb_cc_00_11_22");
        assert!(a.get("websocket").is_none());
        assert_eq!(a["firmware"]["version"], "2.4.2");
        assert_eq!(a["server_time"]["timezone_offset"], 480);
    }

    #[test]
    fn the_answer_is_byte_for_byte_what_the_real_server_sent() {
        // xiaozhi-esp32-server 7475ea2b (manual/real-server, `server.mqtt_gateway` 127.0.0.1:1883,
        // key TwinCheck2026Key) answered this request on 2026-12-03 with exactly these bytes.
        let seen = r#"{"server_time":{"timestamp":1796284581575,"timezone_offset":480},"firmware":{"version":"2.4.2","url":""},"mqtt":{"endpoint":"127.0.0.1:1883","client_id":"GID_bread-compact-wifi@@@02_00_00_00_00_09@@@02_00_00_00_00_09","username":"eyJpcCI6ICJ1bmtub3duIn0=","password":"MWcCiUoVbAAKCY8sEMKWNwX0mpFyqbJKBROeKGw2Uv0=","publish_topic":"device-server","subscribe_topic":"devices/p2p/02_00_00_00_00_09"}}"#;
        let headers = vec![
            ("Device-Id".to_string(), "02:00:00:00:00:09".to_string()),
            ("Client-Id".to_string(), "x".to_string()),
        ];
        let body = br#"{"board":{"type":"bread-compact-wifi"},"application":{"version":"2.4.2"}}"#;
        let config = config(Some("127.0.0.1:1883"), Some("TwinCheck2026Key"));
        assert_eq!(answer(&config, &headers, body, 1_796_284_581_575), seen);
    }

    #[test]
    fn no_gateway_means_websocket_and_no_key_means_an_empty_password() {
        let a: Value =
            serde_json::from_str(&answer(&config(None, None), &headers("aa:bb:cc:00:11:22"), b"{}", 7)).unwrap();
        assert_eq!(a["websocket"]["url"], "ws://127.0.0.1:8000/xiaozhi/v1/");
        assert!(a.get("mqtt").is_none());
        assert_eq!(a["firmware"]["version"], "0.0.0");
        let a: Value = serde_json::from_str(&answer(
            &config(Some("h:1"), None),
            &headers("aa:bb:cc:00:11:22"),
            b"not json",
            7,
        ))
        .unwrap();
        assert_eq!(a["mqtt"]["password"], "");
        assert_eq!(
            a["mqtt"]["client_id"],
            "GID_default@@@aa_bb_cc_00_11_22@@@aa_bb_cc_00_11_22"
        );
    }

    #[test]
    fn a_request_without_device_or_client_id_is_refused_as_the_handler_does() {
        let c = config(None, None);
        assert_eq!(answer(&c, &[], b"{}", 7), REFUSED);
        assert_eq!(answer(&c, &headers("")[..], b"{}", 7), REFUSED);
        let mut h = headers("aa:bb:cc:00:11:22");
        h.pop();
        assert_eq!(answer(&c, &h, b"{}", 7), REFUSED);
    }
}
