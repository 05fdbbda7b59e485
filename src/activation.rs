//! `connect --ota URL`: the firmware's activation request (`Ota::CheckVersion`, `ota.cc`), made
//! by the driver before the device is started: the same headers, the same body
//! (`Board::GetSystemInfoJson`, built by the device model), POST because the body is not
//! empty. The answer's blocks go to NVS through the device model, and the protocol is chosen
//! as `application.cc` chooses it (docs/reference/mqtt.md §1): MQTT + UDP when there is an
//! `mqtt` block or neither, WebSocket for a `websocket` block alone.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use xiaozhi_sim::device::{Board, Device};
use xiaozhi_sim::hw::nvs::{Nvs, names};
use xiaozhi_sim::provisioning::{Choice, MqttBlock};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::{WorldSpec, WsConfig};

/// What an OTA answer configures.
#[derive(Clone, Debug, PartialEq)]
pub struct Activation {
    /// The protocol the firmware makes after it (`application.cc:502-508`).
    pub choice: Choice,
    /// The `websocket` block's URL, token and version, when it has one.
    pub websocket: Option<WsAnswer>,
    /// The `activation` object (a code to read out), if the server wants the user to bind.
    pub activation_code: Option<String>,
}

/// An OTA answer's `websocket` block.
#[derive(Clone, Debug, PartialEq)]
pub struct WsAnswer {
    pub url: String,
    pub token: String,
    pub version: Option<i32>,
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

/// Reads an OTA answer: the protocol it leads to and its `websocket` block (the device model
/// writes the blocks to NVS itself: `Device::apply_ota_answer`).
pub fn parse_answer(body: &str) -> Result<Activation> {
    let v: Value = serde_json::from_str(body).context("the OTA answer is not JSON")?;
    let has = |k: &str| v.get(k).is_some_and(Value::is_object);
    let choice = Choice::of(has("mqtt"), has("websocket"));
    let websocket = match v.get("websocket").and_then(Value::as_object) {
        Some(ws) => Some(WsAnswer {
            url: ws
                .get("url")
                .and_then(Value::as_str)
                .context("`websocket.url` missing")?
                .to_string(),
            token: ws.get("token").and_then(Value::as_str).unwrap_or_default().to_string(),
            version: ws.get("version").and_then(Value::as_i64).map(|n| n as i32),
        }),
        None => None,
    };
    Ok(Activation {
        choice,
        websocket,
        activation_code: v
            .pointer("/activation/code")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The wire an OTA answer sends a device to.
#[derive(Clone, Debug)]
pub enum Wire {
    /// The `websocket` block's URL and token.
    WebSocket(WsAnswer),
    /// MQTT + UDP with the settings NVS now holds (the answer's writes on top of the device's
    /// own NVS), and that NVS.
    Mqtt(MqttBlock, Box<Nvs>),
}

/// The answer `body` taken by `probe` (a running device with the identity and NVS of the one
/// that will boot) at `at`, as `Ota::CheckVersion` and `application.cc` take it: the blocks
/// written to NVS, then the wire chosen.
pub fn apply(probe: &mut Device, at: SimTime, body: &str) -> Result<(Activation, Wire)> {
    let activation = parse_answer(body)?;
    let Some(choice) = probe.apply_ota_answer(at, body.as_bytes()) else {
        bail!("the device could not take the OTA answer (see its log: a key NVS refuses aborts the firmware)");
    };
    let wire = if choice == Choice::WebSocket {
        let ws = activation
            .websocket
            .clone()
            .context("`websocket` block without a URL")?;
        Wire::WebSocket(ws)
    } else {
        Wire::Mqtt(block_of(probe.nvs()), Box::new(probe.nvs().clone()))
    };
    Ok((activation, wire))
}

/// The `mqtt` block that NVS holds (a world with it writes it again at boot: nothing changes).
pub fn block_of(nvs: &Nvs) -> MqttBlock {
    let s = |key: &str| String::from_utf8_lossy(nvs.get_str(names::MQTT, key).unwrap_or_default()).into_owned();
    MqttBlock {
        endpoint: s("endpoint"),
        client_id: s("client_id"),
        username: s("username"),
        password: s("password"),
        publish_topic: s("publish_topic"),
        subscribe_topic: s("subscribe_topic"),
        keepalive: nvs
            .get(names::MQTT, "keepalive")
            .map(|_| nvs.get_i32(names::MQTT, "keepalive", 240)),
    }
}

/// A device of board `board` and seed `seed` (its MAC and UUID) activates at `ota_url`: the
/// world it boots in and the NVS to boot with (`None`: its own). What a fleet device does
/// before it powers on (blocking: one HTTP request).
pub fn activate_device(board: &Board, seed: u64, ota_url: &str) -> Result<(WorldSpec, Option<Nvs>)> {
    answered_device(board, seed, |probe| activate(ota_url, probe))
}

/// [`activate_device`] without an OTA server: the answer xiaozhi-esp32-server's OTA gives for a
/// gateway at `endpoint` ([`gateway_answer`]).
pub fn gateway_device(board: &Board, seed: u64, endpoint: &str, key: Option<&str>) -> Result<(WorldSpec, Option<Nvs>)> {
    answered_device(board, seed, |probe| gateway_answer(endpoint, key, probe))
}

/// The answer xiaozhi-esp32-server's OTA gives `probe` for a gateway at `endpoint`, its MQTT
/// password signed with `key` (`connect --mqtt`, `audit --mqtt`).
pub fn gateway_answer(endpoint: &str, key: Option<&str>, probe: &Device) -> Result<String> {
    let config = xiaozhi_sim::backend::ota::OtaConfig {
        websocket_url: String::new(),
        mqtt_gateway: Some(endpoint.to_string()),
        signature_key: key.map(str::to_string),
        timezone_offset_hours: 8,
    };
    let headers: Vec<(String, String)> = headers(probe).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let info = probe.system_info_json().context("the device is not running")?;
    Ok(xiaozhi_sim::backend::ota::answer(&config, &headers, &info, 0))
}

/// The world and NVS of a device of `board` and `seed` once `ask` has given it an OTA answer.
fn answered_device(
    board: &Board,
    seed: u64,
    ask: impl FnOnce(&Device) -> Result<String>,
) -> Result<(WorldSpec, Option<Nvs>)> {
    let mut probe = Device::new(board, WorldSpec::conformance(), seed);
    probe.set_trace(false);
    probe.power_on(SimTime::ZERO);
    let at = SimTime::from_millis(100);
    probe.run_until(at);
    let body = ask(&probe)?;
    Ok(match apply(&mut probe, at, &body)?.1 {
        Wire::WebSocket(ws) => (
            WorldSpec::dialling(WsConfig {
                url: ws.url,
                token: ws.token,
                version: ws.version.unwrap_or(1),
            }),
            None,
        ),
        Wire::Mqtt(block, nvs) => (WorldSpec::over_mqtt(block), Some(*nvs)),
    })
}

/// POSTs the device's system info to `ota_url`; the answer's text.
pub fn activate(ota_url: &str, device: &Device) -> Result<String> {
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
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_chooses_the_protocol_as_the_firmware_does() {
        let a = parse_answer(
            r#"{"server_time":{"timestamp":1},"websocket":{"url":"ws://10.0.0.2:8000/xiaozhi/v1/","token":"t0k","version":3},"activation":{"code":"123456","message":"x"}}"#,
        )
        .unwrap();
        assert_eq!(a.choice, Choice::WebSocket);
        let ws = a.websocket.unwrap();
        assert_eq!(ws.url, "ws://10.0.0.2:8000/xiaozhi/v1/");
        assert_eq!(ws.token, "t0k");
        assert_eq!(ws.version, Some(3));
        assert_eq!(a.activation_code.as_deref(), Some("123456"));
        let mqtt_only = parse_answer(r#"{"mqtt":{"endpoint":"x"}}"#).unwrap();
        assert_eq!((mqtt_only.choice, mqtt_only.websocket), (Choice::Mqtt, None));
        let neither = parse_answer(r#"{"firmware":{}}"#).unwrap();
        assert_eq!(neither.choice, Choice::MqttByDefault);
        // Both blocks: MQTT, even though the websocket block is read.
        let both = parse_answer(r#"{"mqtt":{"endpoint":"x"},"websocket":{"url":"ws://h:1/x"}}"#).unwrap();
        assert_eq!(both.choice, Choice::Mqtt);
        assert!(both.websocket.is_some());
        // A block that is not an object does not count.
        assert_eq!(
            parse_answer(r#"{"mqtt":"x","websocket":{"url":"ws://h:1/x"}}"#)
                .unwrap()
                .choice,
            Choice::WebSocket
        );
        assert!(parse_answer("<html>").is_err());
    }
}
