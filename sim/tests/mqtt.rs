//! The MQTT wire's first pieces on a device (docs/reference/mqtt.md §1, §3): the OTA answer's
//! blocks written to NVS as `Ota::CheckVersion` writes them, and the protocol they lead to.

use std::sync::Arc;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::provisioning::{Broker, Choice, MqttSettings};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::trace::Event;
use xiaozhi_sim::world::WorldSpec;

fn device() -> Device {
    let spec = BoardSpec::from_yaml("b.yaml", include_str!("../../boards/bread-compact-wifi.yaml")).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::conformance(), 9);
    d.power_on(SimTime::ZERO);
    d.run_until(SimTime::from_millis(100));
    let _ = d.drain_events();
    d
}

fn nvs_writes(d: &mut Device) -> Vec<String> {
    d.drain_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            Event::NvsSet { namespace, key, .. } => Some(format!("{namespace}/{key}")),
            _ => None,
        })
        .collect()
}

const GATEWAY: &str = r#"{"server_time":{"timestamp":1},"firmware":{"version":"2.4.2","url":""},
  "mqtt":{"endpoint":"127.0.0.1:1883","client_id":"GID_test@@@f4_12_fa_00_00_01@@@f4_12_fa_00_00_01",
          "username":"eyJpcCI6InVua25vd24ifQ==","password":"c2ln","publish_topic":"device-server",
          "subscribe_topic":"devices/p2p/f4_12_fa_00_00_01"},
  "websocket":{"url":"ws://127.0.0.1:8000/xiaozhi/v1/","token":""}}"#;

#[test]
fn an_answer_with_an_mqtt_block_is_stored_and_leads_to_mqtt() {
    let mut d = device();
    let t = SimTime::from_millis(200);
    assert_eq!(
        d.apply_ota_answer(t, GATEWAY.as_bytes()),
        Some(Choice::Mqtt),
        "mqtt wins beside websocket"
    );
    assert_eq!(
        nvs_writes(&mut d),
        [
            "mqtt/endpoint",
            "mqtt/client_id",
            "mqtt/username",
            "mqtt/password",
            "mqtt/publish_topic",
            "mqtt/subscribe_topic",
            "websocket/url"
        ],
        "the empty token over nothing is not written"
    );
    let s = MqttSettings::from_nvs(d.nvs(), 240);
    assert_eq!(
        s.broker(),
        Broker::At {
            host: "127.0.0.1".into(),
            port: 1883
        }
    );
    assert_eq!((s.publish_topic.as_str(), s.keepalive), ("device-server", 240));
    // The same answer again changes nothing.
    assert_eq!(d.apply_ota_answer(t, GATEWAY.as_bytes()), Some(Choice::Mqtt));
    assert!(nvs_writes(&mut d).is_empty());
}

#[test]
fn a_key_nvs_refuses_aborts_the_device() {
    let mut d = device();
    let boots = d.boots();
    let answer = r#"{"mqtt":{"endpoint":"h:1883","subscribe_topics":"x"}}"#;
    assert_eq!(d.apply_ota_answer(SimTime::from_millis(200), answer.as_bytes()), None);
    let events = d.drain_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, Event::Panicked { reason } if reason.contains("mqtt/subscribe_topics"))),
        "a 16-byte key: ESP_ERROR_CHECK aborts"
    );
    d.run_until(SimTime::from_millis(10_000));
    assert_eq!(d.boots(), boots + 1, "the device restarted");
    assert!(
        d.nvs().get_str("mqtt", "endpoint").is_some(),
        "the writes before it stay"
    );
}

#[test]
fn an_answer_that_is_not_json_changes_nothing() {
    let mut d = device();
    assert_eq!(d.apply_ota_answer(SimTime::from_millis(200), b"<html>"), None);
    let log: Vec<String> = d.drain_events().iter().map(|e| e.to_string()).collect();
    assert!(
        log.iter().any(|l| l.contains("Failed to parse JSON response")),
        "{log:?}"
    );
    assert_eq!(
        d.apply_ota_answer(SimTime::from_millis(300), b"{}"),
        Some(Choice::MqttByDefault)
    );
}
