//! `connect --ota URL`: the firmware's activation request (`Ota::CheckVersion`, `ota.cc`), made
//! by the driver before the device is started: the same headers, the same body
//! (`Board::GetSystemInfoJson`, built by the device model), POST because the body is not
//! empty; the answer's `websocket` object gives the URL and token, as the firmware stores them in
//! NVS namespace `websocket`.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::hw::nvs::names;
use xiaozhi_sim::mqtt::Choice;

/// What the OTA answer configured.
#[derive(Clone, Debug, PartialEq)]
pub struct Activation {
    pub url: String,
    pub token: String,
    pub version: Option<i32>,
    /// The `activation` object (a code to read out), if the server wants the user to bind.
    pub activation_code: Option<String>,
    /// The answer has an `mqtt` block too: the firmware would use MQTT, not this WebSocket.
    pub mqtt_too: bool,
}

/// The headers `Ota::SetupHttp` sets, in order (`Serial-Number` is absent: no eFuse serial).
pub fn headers(device: &Device) -> Vec<(&'static str, String)> {
    let uuid = device
        .nvs()
        .get_str(names::BOARD, names::UUID)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    vec![
        ("Activation-Version", "1".to_string()),
        ("Device-Id", device.mac().to_string()),
        ("Client-Id", uuid),
        (
            "User-Agent",
            format!("{}/{}", device.spec().name, device.spec().firmware.project_ver()),
        ),
        ("Accept-Language", device.spec().firmware.language.clone()),
        ("Content-Type", "application/json".to_string()),
    ]
}

/// Reads the `websocket` object of an OTA answer.
pub fn parse_answer(body: &str) -> Result<Activation> {
    let v: Value = serde_json::from_str(body).context("the OTA answer is not JSON")?;
    let has = |k: &str| v.get(k).is_some_and(Value::is_object);
    let choice = Choice::of(has("mqtt"), has("websocket"));
    let Some(ws) = v.get("websocket").and_then(Value::as_object) else {
        if choice == Choice::Mqtt {
            bail!(
                "the OTA answer configures MQTT only: the firmware would connect over MQTT + UDP \
                 (docs/reference/mqtt.md §1), which the twin does not speak yet; give --url to dial WebSocket"
            );
        }
        bail!(
            "the OTA answer has no `websocket` object: the firmware would log \"{}\" and use MQTT + UDP, which the twin does not speak yet",
            choice.warning().unwrap_or_default()
        );
    };
    let url = ws
        .get("url")
        .and_then(Value::as_str)
        .context("`websocket.url` missing")?
        .to_string();
    Ok(Activation {
        url,
        token: ws.get("token").and_then(Value::as_str).unwrap_or_default().to_string(),
        version: ws.get("version").and_then(Value::as_i64).map(|n| n as i32),
        activation_code: v
            .pointer("/activation/code")
            .and_then(Value::as_str)
            .map(str::to_string),
        mqtt_too: choice == Choice::Mqtt,
    })
}

/// POSTs the device's system info to `ota_url` and returns the WebSocket configuration.
pub fn activate(ota_url: &str, device: &Device) -> Result<Activation> {
    let body = device.system_info_json().context("the device is not running")?;
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut req = agent.post(ota_url);
    for (k, v) in headers(device) {
        req = req.header(k, v);
    }
    let mut resp = req
        .send(&body[..])
        .with_context(|| format!("OTA request to {ota_url}"))?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().context("reading the OTA answer")?;
    if status != 200 {
        bail!("OTA server answered HTTP {status} (the firmware retries after 10, 20, 40 … s)");
    }
    parse_answer(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_websocket_object_configures_the_connection() {
        let a = parse_answer(
            r#"{"server_time":{"timestamp":1},"websocket":{"url":"ws://10.0.0.2:8000/xiaozhi/v1/","token":"t0k","version":3},"activation":{"code":"123456","message":"x"}}"#,
        )
        .unwrap();
        assert_eq!(a.url, "ws://10.0.0.2:8000/xiaozhi/v1/");
        assert_eq!(a.token, "t0k");
        assert_eq!(a.version, Some(3));
        assert_eq!(a.activation_code.as_deref(), Some("123456"));
        assert!(!a.mqtt_too);
        let mqtt_only = parse_answer(r#"{"mqtt":{"endpoint":"x"}}"#).unwrap_err().to_string();
        assert!(mqtt_only.contains("MQTT only"), "{mqtt_only}");
        let neither = parse_answer(r#"{"firmware":{}}"#).unwrap_err().to_string();
        assert!(
            neither.contains("No protocol specified in the OTA config, using MQTT"),
            "{neither}"
        );
        let both = parse_answer(r#"{"mqtt":{"endpoint":"x"},"websocket":{"url":"ws://h:1/x"}}"#).unwrap();
        assert!(both.mqtt_too, "the firmware would choose MQTT here");
        assert!(parse_answer("<html>").is_err());
    }
}
