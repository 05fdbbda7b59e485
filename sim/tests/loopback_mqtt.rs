//! A device an OTA answer sent to MQTT, against a built-in backend behind the gateway stand-in
//! (xiaozhi-mqtt-gateway's behaviour, docs/reference/mqtt.md §5), in virtual time: discovery
//! through the gateway's cached tool list, a tool call, a spoken turn over UDP heard 9.7 dB
//! quieter after `set_volume 40`, goodbye both ways, a bad password, a forged datagram.

use std::sync::Arc;
use xiaozhi_sim::device::Input;

mod common;

use common::{reply, utter};

use serde_json::json;
use xiaozhi_sim::backend::gateway::{GatewayConfig, password_signature};
use xiaozhi_sim::backend::{BackendSpec, Outcome, Phase};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState};
use xiaozhi_sim::fault::UdpFaults;
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::provisioning::MqttBlock;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::speak::Timbre;
use xiaozhi_sim::world::WorldSpec;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const CLIENT: &str = "GID_test@@@f4_12_fa_00_00_01@@@f4_12_fa_00_00_01";
/// base64 of `{"ip": "unknown"}`, as xiaozhi-esp32-server's OTA hands it out.
const USERNAME: &str = "eyJpcCI6ICJ1bmtub3duIn0=";

fn block(password: &str) -> MqttBlock {
    MqttBlock {
        endpoint: "127.0.0.1:1883".into(),
        client_id: CLIENT.into(),
        username: USERNAME.into(),
        password: password.into(),
        publish_topic: "device-server".into(),
        subscribe_topic: "devices/p2p/f4_12_fa_00_00_01".into(),
        keepalive: None,
    }
}

/// The bread board on MQTT, xinnan-py behind a gateway whose signature key is `key`, booted
/// and run 1 s.
fn pair(password: &str) -> Loopback {
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block(password)), 5);
    d.power_on(SimTime::ZERO);
    let backend = BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.set_gateway_config(GatewayConfig {
        signature_key: Some("key".into()),
        ..GatewayConfig::local(8884, "ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway")
    });
    lb.tap();
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    lb
}

fn good_password() -> String {
    password_signature(&format!("{CLIENT}|{USERNAME}"), "key")
}

/// Paired, and the user opened the channel 3 s ago.
fn opened() -> Loopback {
    let mut lb = pair(&good_password());
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(3)).unwrap();
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    lb
}

fn sent(lb: &mut Loopback) -> Vec<String> {
    lb.tapped()
        .into_iter()
        .filter(|(_, binary, _)| !binary)
        .map(|(_, _, b)| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

#[test]
fn the_gateway_runs_mcp_at_connect_and_the_backend_discovers_from_its_cache() {
    let mut lb = opened();
    let out = sent(&mut lb);
    let ids: Vec<i64> = out
        .iter()
        .filter_map(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .filter(|v| v["type"] == "mcp")
        .filter_map(|v| v["payload"]["id"].as_i64())
        .collect();
    // The gateway's initialize and tools/list (10000, 10001), before any hello; then the
    // server's initialize (xinnan-py: id 1) through the bridge. Its tools/list never reaches
    // the device: the gateway answers it from the cache.
    assert_eq!(&ids[..2], &[10_000, 10_001], "{out:?}");
    assert!(out[0].starts_with(r#"{"session_id":"","type":"mcp""#), "{}", out[0]);
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(lb.gateway().unwrap().cached_tools().len(), 6);
    let r = lb.reports().pop().unwrap();
    assert_eq!(r.phase, Phase::Ready);
    assert_eq!(r.tools.len(), 6);
    lb.call("self.audio_speaker.set_volume", json!({"volume": 40}));
    let t = lb.now() + SimDuration::from_secs(1);
    lb.run_until(t).unwrap();
    let r = lb.reports().pop().unwrap();
    let call = r.exchanges.iter().find(|e| e.method == "tools/call").unwrap();
    assert_eq!(call.outcome, Outcome::Replied);
    assert_eq!(call.llm_sees.as_deref(), Some("true"));
    assert_eq!(lb.device.snapshot().volume, Some(40));
}

#[test]
fn a_spoken_turn_over_udp_is_heard_9_7_db_quieter_after_set_volume_40() {
    let mut lb = opened();
    lb.call("self.audio_speaker.set_volume", json!({"volume": 70}));
    utter(&mut lb);
    let before = reply(&mut lb, "好的");
    utter(&mut lb);
    lb.call("self.audio_speaker.set_volume", json!({"volume": 40}));
    let t = lb.now() + SimDuration::from_millis(200);
    lb.run_until(t).unwrap();
    let after = reply(&mut lb, "音量已经调小了");
    let change = after - before;
    assert!((change + 9.7).abs() <= 0.1, "change {change:.2} dB");
    let r = lb.reports().pop().unwrap();
    assert_eq!(r.voice.utterances.len(), 2);
}

#[test]
fn the_device_says_goodbye_and_the_gateway_echoes_one() {
    let mut lb = opened();
    let sid = lb.gateway().unwrap().session_id().unwrap().to_string();
    assert!(!sid.is_empty());
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(1)).unwrap();
    let out = sent(&mut lb);
    assert!(
        out.contains(&format!(r#"{{"session_id":"{sid}","type":"goodbye"}}"#)),
        "{out:?}"
    );
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
    let events = lb.device.drain_events();
    let echoed = events.iter().any(|e| {
        e.to_string()
            .contains(&format!("Received goodbye message, session_id: {sid}"))
    });
    assert!(echoed, "the bridge's close sends the device a goodbye of its own");
    let r = lb.reports();
    assert_eq!(r.len(), 1, "the backend session ended with the bridge");
}

#[test]
fn a_bad_password_gets_connack_0_then_the_connection_drops() {
    let mut lb = pair("wrong");
    let events: Vec<String> = lb.device.drain_events().iter().map(|e| e.to_string()).collect();
    assert!(
        events.iter().any(|e| e.contains("Connected to endpoint")),
        "CONNACK 0 came first"
    );
    assert!(
        events
            .iter()
            .any(|e| e.contains("MQTT disconnected, schedule reconnect in 60 seconds")),
        "{events:?}"
    );
    assert!(lb.reports().is_empty(), "no bridge, no backend session");
}

#[test]
fn a_forged_datagram_with_the_right_ssrc_takes_over_the_downlink() {
    let mut lb = opened();
    utter(&mut lb);
    // Someone else sends one datagram with this connection's ssrc: garbage, any sequence.
    let ssrc = lb.gateway().unwrap().connection_id;
    let mut forged = vec![1u8, 0, 0, 4];
    forged.extend_from_slice(&ssrc.to_be_bytes());
    forged.extend_from_slice(&[0; 4]);
    forged.extend_from_slice(&u32::MAX.to_be_bytes());
    forged.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    lb.inject_datagram(2, &forged);
    let now = lb.now();
    let s = lb.session().unwrap();
    s.speak(now, "好的", &Timbre::default(), SimDuration::from_secs(2));
    s.end_turn(now);
    lb.run_until(now + SimDuration::from_secs(5)).unwrap();
    let r = lb.reports().pop().unwrap();
    let counts = &lb.device.speech_log().sessions.last().unwrap().counts;
    assert!(r.voice.frames_out > 0);
    assert_eq!(counts.received, 0, "the reply went to the forger's address: {counts:?}");
}

/// xiaozhi-esp32-server frames audio for the gateway only when the gateway's `chat_servers`
/// URL ends in `?from=mqtt_gateway`; without it the gateway reads a length from inside the raw
/// Opus and the device gets noise (its docs ask for the suffix; nothing checks it).
#[test]
fn a_chat_server_url_without_from_mqtt_gateway_turns_the_reply_into_noise() {
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block("")), 5);
    d.power_on(SimTime::ZERO);
    let mut lb = Loopback::new(d, Arc::new(BackendSpec::shipped("xinnan-py").unwrap()));
    lb.set_gateway_config(GatewayConfig::local(8884, "ws://127.0.0.1:8000/xiaozhi/v1/"));
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(3)).unwrap();
    let now = lb.now();
    lb.device
        .handle(now, Input::MqttMessage(br#"{"type":"tts","state":"start"}"#));
    let s = lb.session().unwrap();
    s.speak(now, "好的", &Timbre::default(), SimDuration::from_secs(2));
    s.end_turn(now);
    lb.run_until(now + SimDuration::from_secs(5)).unwrap();
    let r = lb.reports().pop().unwrap();
    let c = &lb.device.speech_log().sessions.last().unwrap().counts;
    assert!(r.voice.frames_out > 0);
    assert!(c.dropped_undecodable > 0, "{c:?}");
}

/// One reply of 3 s through a downlink with `faults`; the device's counts for it.
fn reply_through(faults: UdpFaults) -> (u64, xiaozhi_sim::voice::log::Counts) {
    let mut lb = opened();
    utter(&mut lb);
    lb.set_downlink_faults(faults);
    let now = lb.now();
    let s = lb.session().unwrap();
    s.speak(now, "好的", &Timbre::default(), SimDuration::from_secs(3));
    s.end_turn(now);
    lb.run_until(now + SimDuration::from_secs(6)).unwrap();
    let sent = lb.reports().pop().unwrap().voice.frames_out;
    (sent, lb.device.speech_log().sessions.last().unwrap().counts.clone())
}

#[test]
fn udp_faults_meet_the_firmware_rules() {
    let (sent, clean) = reply_through(UdpFaults::default());
    assert_eq!((clean.received, clean.dropped(), clean.gaps), (sent, 0, 0), "{clean:?}");

    // Loss: fewer arrive, each hole is a `wrong sequence` gap, nothing is refused.
    let (sent, c) = reply_through(UdpFaults {
        loss: 200,
        seed: 1,
        ..UdpFaults::default()
    });
    assert!(
        c.received < sent && c.gaps > 0 && c.dropped_refused == 0,
        "{sent} {c:?}"
    );

    // Duplicates: every copy is refused as `duplicate/old`.
    let (sent, c) = reply_through(UdpFaults {
        duplicate: 300,
        seed: 2,
        ..UdpFaults::default()
    });
    assert_eq!(c.received - c.dropped_refused, sent, "{c:?}");
    assert!(c.dropped_refused > 0);

    // Reordering: the overtaken datagram is late, refused; its place shows as a gap.
    let (_, c) = reply_through(UdpFaults {
        reorder: 200,
        seed: 3,
        ..UdpFaults::default()
    });
    assert!(c.dropped_refused > 0 && c.gaps > 0, "{c:?}");
    assert_eq!(
        c.dropped_refused, c.gaps,
        "each overtaking leaves one gap and one late packet: {c:?}"
    );

    // Corruption: accepted (no integrity check) and decoded into whatever it decodes to.
    let (sent, c) = reply_through(UdpFaults {
        corrupt: 1000,
        seed: 4,
        ..UdpFaults::default()
    });
    assert_eq!((c.received, c.dropped_refused), (sent, 0), "{c:?}");
}

#[test]
fn the_keepalive_check_closes_at_the_first_whole_second_past_one_and_a_half_keepalives() {
    use xiaozhi_sim::backend::gateway::{GatewayAction, GatewayConn};
    let mut g = GatewayConn::new(GatewayConfig::local(8884, "ws://h/"), 1, 1);
    g.connect(SimTime::from_millis(300), CLIENT, USERNAME, "", 240);
    while g.poll_action().is_some() {}
    // Idle for *more* than 360 s, seen by the once-a-second check: at 361 s, not at 360.3 s.
    let due = g.poll_timeout().unwrap();
    assert_eq!(due, SimTime::from_millis(361_000));
    g.handle_timeout(SimTime::from_millis(360_300));
    assert!(!g.is_closed());
    // A PINGREQ at 200 s moves it on.
    g.activity(SimTime::from_millis(200_000));
    assert_eq!(g.poll_timeout(), Some(SimTime::from_millis(561_000)));
    g.handle_timeout(SimTime::from_millis(561_000));
    assert!(g.is_closed());
    assert_eq!(g.poll_action(), Some(GatewayAction::Close));
    assert_eq!(g.poll_timeout(), None);
}

#[test]
fn behind_a_plain_broker_the_device_never_hears_its_server_and_the_open_times_out() {
    // mosquitto, or EMQX without auto-subscribe: CONNACK, but nothing reaches a client that
    // subscribed to nothing, and the firmware subscribes to nothing.
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block("")), 5);
    d.set_trace(true);
    d.power_on(SimTime::ZERO);
    let backend = BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.set_gateway_config(GatewayConfig {
        needs_subscribe: true,
        ..GatewayConfig::local(8884, "ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway")
    });
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    assert_eq!(
        lb.device.snapshot().state,
        Some(DeviceState::Idle),
        "connected: CONNACK came"
    );
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(12)).unwrap();
    let logged: Vec<String> = lb
        .device
        .drain_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            xiaozhi_sim::trace::Event::Logged { tag, text, .. } => Some(format!("{tag}: {text}")),
            _ => None,
        })
        .collect();
    assert!(
        logged.contains(&"MQTT: Failed to receive server hello".to_string()),
        "{logged:?}"
    );
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
    // The gateway's MCP at CONNECT, the server hello and the server's initialize: none delivered.
    let g = lb.gateway().unwrap();
    assert!(g.undelivered() >= 3, "{}", g.undelivered());
    assert!(g.cached_tools().is_empty());
    // The same run with the gateway's delivery hears the hello.
    let mut lb = pair(&good_password());
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(3)).unwrap();
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    assert_eq!(lb.gateway().unwrap().undelivered(), 0);
}

#[test]
fn a_script_that_disconnects_mid_reply_leaves_the_device_speaking_while_esp_mqtt_reconnects() {
    use xiaozhi_sim::backend::script::Script;
    use xiaozhi_sim::backend::scripted::BackendFault;
    use xiaozhi_sim::trace::Event;
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block("")), 5);
    d.set_trace(true);
    d.power_on(SimTime::ZERO);
    // 50 frames of reply, and 1 s into them the gateway drops the device's MQTT connection.
    let script = Script::parse(
        "s",
        "await utterance\nspeak \"好的，我在听\" for 3s\nwait 1s\ndisconnect\n",
    )
    .unwrap();
    let backend = Arc::new(BackendSpec::shipped("xinnan-py").unwrap());
    let mut lb = Loopback::scripted(d, backend, script, BackendFault::None);
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    let first = lb.gateway().unwrap().connection_id;
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(3)).unwrap();
    utter(&mut lb);
    let t = lb.now() + SimDuration::from_secs(4);
    lb.run_until(t).unwrap();
    let logged = |lb: &mut Loopback| -> Vec<String> {
        lb.device
            .drain_events()
            .into_iter()
            .filter_map(|e| match e.kind {
                Event::Logged { tag, text, .. } => Some(format!("{tag}: {text}")),
                _ => None,
            })
            .collect()
    };
    assert!(logged(&mut lb).contains(&"MQTT: MQTT disconnected, schedule reconnect in 60 seconds".to_string()));
    // The rest of the reply and its `tts stop` never come; the UDP channel stays open, and the
    // device stays speaking.
    let session = lb.device.speech_log().sessions.last().unwrap().clone();
    assert!(session.counts.received < 50, "{:?}", session.counts);
    assert_eq!(session.stopped, None);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Speaking));
    // esp-mqtt connects again on its own within 10 s: a new gateway connection runs its MCP.
    let t = lb.now() + SimDuration::from_secs(10);
    lb.run_until(t).unwrap();
    let g = lb.gateway().unwrap();
    assert_ne!(g.connection_id, first);
    assert_eq!(g.cached_tools().len(), 6);
    // Nothing ends the turn: two minutes on, the device is still speaking (a user's click would).
    let t = lb.now() + SimDuration::from_secs(120);
    lb.run_until(t).unwrap();
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Speaking));
}

#[test]
fn a_1_9_4_device_answers_the_gateway_s_goodbye_echo_with_another_and_the_gateway_lets_it_be() {
    // Up to 2.1.0 a server goodbye for the session closes with `CloseAudioChannel()`, which
    // always publishes a goodbye; the gateway echoes every bridge close, but answers nothing to a
    // goodbye once its bridge is gone (`app.js:520-524`): two goodbyes from the device, no loop.
    for (tag, device_goodbyes) in [("1.9.4", 2), ("2.4.2", 1)] {
        let spec = BoardSpec::from_yaml("b.yaml", BREAD)
            .unwrap()
            .with_firmware(tag)
            .unwrap();
        let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block(&good_password())), 5);
        d.power_on(SimTime::ZERO);
        let mut lb = Loopback::new(d, Arc::new(BackendSpec::shipped("xinnan-py").unwrap()));
        lb.set_gateway_config(GatewayConfig {
            signature_key: Some("key".into()),
            ..GatewayConfig::local(8884, "ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway")
        });
        lb.tap();
        lb.run_until(SimTime::from_millis(1000)).unwrap();
        let now = lb.now();
        lb.device.toggle_chat(now);
        lb.run_until(now + SimDuration::from_secs(3)).unwrap();
        let now = lb.now();
        lb.device.toggle_chat(now);
        lb.run_until(now + SimDuration::from_secs(3)).unwrap();
        let goodbyes = sent(&mut lb)
            .iter()
            .filter(|m| m.contains(r#""type":"goodbye""#))
            .count();
        assert_eq!(goodbyes, device_goodbyes, "{tag}");
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle), "{tag}");
    }
}
