//! The device side of MQTT + UDP (docs/reference/mqtt.md §4), driven by hand in virtual time:
//! the client started at activation, MCP before any hello, the hello v3 and every refusal of
//! the server's, the UDP channel both ways with its drop rules, goodbye both ways, a publish
//! that fails, and the reconnect timers (esp-mqtt's 10 s, the firmware's 60 s while idle).

use std::sync::Arc;
use xiaozhi_sim::device::Input;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState, Output};
use xiaozhi_sim::provisioning::MqttBlock;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::Encoder;
use xiaozhi_sim::voice::udp::{UdpChannel, UdpParams};
use xiaozhi_sim::world::WorldSpec;

mod common;

use common::{logs, outputs, published};

const KEY: &str = "00112233445566778899aabbccddeeff";
const NONCE: &str = "01000000deadbeef0000000000000000";

fn block() -> MqttBlock {
    MqttBlock {
        endpoint: "127.0.0.1:1883".into(),
        client_id: "GID_test@@@f4_12_fa_00_00_01@@@f4_12_fa_00_00_01".into(),
        username: "u".into(),
        password: "p".into(),
        publish_topic: "device-server".into(),
        subscribe_topic: "devices/p2p/f4_12_fa_00_00_01".into(),
        keepalive: None,
    }
}

fn booted() -> Device {
    let spec = BoardSpec::from_yaml("b.yaml", include_str!("../../boards/bread-compact-wifi.yaml")).unwrap();
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block()), 3);
    d.power_on(SimTime::ZERO);
    d
}

/// One 60 ms Opus packet of a 24 kHz tone, as a TTS encoder makes it.
fn tts_packet() -> Vec<u8> {
    let mut enc = Encoder::tts(24_000);
    let pcm: Vec<i16> = (0..enc.frame_len())
        .map(|i| ((i as f32 * 0.1).sin() * 8000.0) as i16)
        .collect();
    enc.encode(&pcm)
}

fn ms(n: u64) -> SimTime {
    SimTime::from_millis(n)
}

/// Boots and accepts the client at 50 ms; the device is idle.
fn connected() -> Device {
    let mut d = booted();
    d.run_until(ms(10));
    let out = outputs(&mut d);
    let Some(Output::MqttConnect { dial, .. }) = out.first() else {
        panic!("the activation task connects the client first: {out:?}")
    };
    assert_eq!(
        (dial.host.as_str(), dial.port, dial.keepalive),
        ("127.0.0.1", 1883, 240)
    );
    assert_eq!(dial.client_id, block().client_id);
    assert_eq!(
        d.state(),
        Some(DeviceState::Activating),
        "activation waits in Connect()"
    );
    d.handle(ms(50), Input::MqttConnack { accepted: true });
    d.run_until(ms(50));
    assert_eq!(d.state(), Some(DeviceState::Idle));
    let _ = outputs(&mut d);
    d
}

fn hello(session: &str) -> String {
    format!(
        r#"{{"type":"hello","transport":"udp","session_id":"{session}","audio_params":{{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}},"udp":{{"server":"127.0.0.1","port":8884,"key":"{KEY}","nonce":"{NONCE}"}}}}"#
    )
}

fn server_channel() -> UdpChannel {
    let hex = |s: &str| -> [u8; 16] {
        let v: Vec<u8> = (0..16)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        v.try_into().unwrap()
    };
    UdpChannel::new(&UdpParams {
        server: "127.0.0.1".into(),
        port: 8884,
        key: hex(KEY),
        nonce: hex(NONCE),
    })
}

/// Toggles at `t` and answers the hello at `t`+20 ms; returns the outputs of the open.
fn open(d: &mut Device, t: SimTime) -> Vec<Output> {
    d.toggle_chat(t);
    d.run_until(t);
    let mut out = outputs(d);
    assert_eq!(
        published(&out),
        [
            r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true,"glyph_push":true},"text_font":{"bundle":"font_puhui_basic_14_1","charset":"basic","size":14,"bpp":1},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        ]
    );
    let at = t + SimDuration::from_millis(20);
    d.handle(at, Input::MqttMessage(hello("s-1").as_bytes()));
    d.run_until(at);
    out.extend(outputs(d));
    out
}

#[test]
fn an_mqtt_block_boots_a_client_that_connects_before_activation_ends() {
    let mut d = connected();
    let nvs = d.nvs();
    assert_eq!(nvs.get_str("mqtt", "publish_topic"), Some(b"device-server".as_slice()));
    assert_eq!(
        nvs.get_str("mqtt", "subscribe_topic"),
        Some(b"devices/p2p/f4_12_fa_00_00_01".as_slice())
    );
    let lines = logs(&mut d);
    assert!(
        lines.contains(&"I MQTT: Connecting to endpoint 127.0.0.1:1883".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"I MQTT: Connected to endpoint".to_string()),
        "{lines:?}"
    );
}

#[test]
fn a_refused_connect_ends_activation_with_the_error_and_esp_mqtt_retries_after_ten_seconds() {
    let mut d = booted();
    d.run_until(ms(10));
    let _ = outputs(&mut d);
    d.handle(ms(200), Input::MqttConnack { accepted: false });
    d.run_until(ms(200));
    assert_eq!(
        d.state(),
        Some(DeviceState::Idle),
        "the refusal wakes the activation task at once"
    );
    let lines = logs(&mut d);
    assert!(
        lines.contains(&"E MQTT: Failed to connect to endpoint, code=0".to_string()),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Alert [cancel] 错误: 无法连接服务，请稍后再试")),
        "MAIN_EVENT_ERROR alerts SERVER_NOT_CONNECTED: {lines:?}"
    );
    d.run_until(ms(10_199));
    assert!(outputs(&mut d).is_empty(), "nothing before esp-mqtt's 10 s");
    d.run_until(ms(10_200));
    assert!(matches!(outputs(&mut d).as_slice(), [Output::MqttConnect { .. }]));
}

#[test]
fn activation_gives_up_after_ten_seconds_without_a_connack() {
    let mut d = booted();
    d.run_until(ms(9_999));
    assert_eq!(d.state(), Some(DeviceState::Activating));
    d.run_until(ms(10_000));
    assert_eq!(d.state(), Some(DeviceState::Idle));
}

#[test]
fn mcp_before_any_hello_is_answered_with_an_empty_session_id() {
    let mut d = connected();
    let init =
        r#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"initialize","id":10000,"params":{"capabilities":{}}}}"#;
    d.handle(ms(100), Input::MqttMessage(init.as_bytes()));
    d.run_until(ms(200));
    let replies = published(&outputs(&mut d));
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(
        replies[0].starts_with(r#"{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":10000,"result":"#),
        "{}",
        replies[0]
    );
}

#[test]
fn a_turn_goes_over_udp_both_ways() {
    let mut d = connected();
    let out = open(&mut d, ms(1000));
    let udp: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::UdpOpen { host, port, .. } => Some((host.clone(), *port)),
            _ => None,
        })
        .collect();
    assert_eq!(udp, [("127.0.0.1".to_string(), 8884)]);
    assert!(
        published(&out)
            .iter()
            .any(|m| m.starts_with(r#"{"session_id":"s-1","type":"listen","state":"start""#)),
        "{out:?}"
    );
    assert_eq!(d.state(), Some(DeviceState::Listening));
    // The microphone's packets: sealed with the server's nonce, sequence 1, 2, ...
    d.run_until(ms(1600));
    let mut server = server_channel();
    let seqs: Vec<u32> = outputs(&mut d)
        .iter()
        .filter_map(|o| match o {
            Output::UdpSend { datagram, .. } => Some(datagram.clone()),
            _ => None,
        })
        .map(|dg| {
            assert_eq!(&dg[4..8], &[0xde, 0xad, 0xbe, 0xef], "the ssrc of the server's nonce");
            server.open(&dg).expect("the server opens what the device sealed");
            u32::from_be_bytes([dg[12], dg[13], dg[14], dg[15]])
        })
        .collect();
    assert!(seqs.len() >= 5, "{seqs:?}");
    assert_eq!(seqs, (1..=seqs.len() as u32).collect::<Vec<_>>());
    // The reply: tts start over MQTT, Opus over UDP, decoded at the hello's 24 kHz.
    d.handle(
        ms(1700),
        Input::MqttMessage(br#"{"session_id":"s-1","type":"tts","state":"start"}"#),
    );
    d.run_until(ms(1710));
    assert_eq!(d.state(), Some(DeviceState::Speaking));
    let packet = tts_packet();
    let mut t = 1720;
    for _ in 0..5 {
        let dg = server.seal(&packet, 0).unwrap();
        d.handle(ms(t), Input::Udp(&dg));
        t += 60;
    }
    d.run_until(ms(t));
    let c = &d.speech_log().sessions[0].counts;
    assert_eq!((c.received, c.decoded, c.dropped()), (5, 5, 0), "{c:?}");
}

#[test]
fn each_refusal_of_the_server_hello_lets_the_open_time_out() {
    let cases = [
        (
            r#"{"type":"hello","session_id":"s"}"#,
            "E MQTT: Unsupported or missing transport",
        ),
        (
            r#"{"type":"hello","transport":"websocket"}"#,
            "E MQTT: Unsupported or missing transport",
        ),
        (r#"{"type":"hello","transport":"udp"}"#, "E MQTT: UDP is not specified"),
        (
            r#"{"type":"hello","transport":"udp","udp":{"server":"h","port":0,"key":"00","nonce":"00"}}"#,
            "E MQTT: Invalid UDP server, port, key, or nonce",
        ),
        (
            r#"{"type":"hello","transport":"udp","udp":{"server":"h","port":9,"key":"0011","nonce":"00112233445566778899aabbccddeeff"}}"#,
            "E MQTT: Invalid AES key or nonce length",
        ),
    ];
    for (hello, line) in cases {
        let mut d = connected();
        let _ = logs(&mut d);
        d.toggle_chat(ms(1000));
        d.handle(ms(1100), Input::MqttMessage(hello.as_bytes()));
        d.run_until(ms(10_999));
        assert_eq!(d.state(), Some(DeviceState::Connecting), "{hello}");
        d.run_until(ms(11_000));
        assert_eq!(d.state(), Some(DeviceState::Idle), "{hello}");
        let lines = logs(&mut d);
        assert!(lines.contains(&line.to_string()), "{hello}: {lines:?}");
        assert!(
            lines.contains(&"E MQTT: Failed to receive server hello".to_string()),
            "{lines:?}"
        );
        assert!(!outputs(&mut d).iter().any(|o| matches!(o, Output::UdpOpen { .. })));
    }
}

#[test]
fn udp_datagrams_are_dropped_by_the_firmware_rules() {
    let mut d = connected();
    open(&mut d, ms(1000));
    d.handle(
        ms(1100),
        Input::MqttMessage(br#"{"session_id":"s-1","type":"tts","state":"start"}"#),
    );
    d.run_until(ms(1110));
    let _ = logs(&mut d);
    let mut server = server_channel();
    let packet = tts_packet();
    let first = server.seal(&packet, 0).unwrap();
    let _lost = server.seal(&packet, 0).unwrap();
    let third = server.seal(&packet, 0).unwrap();
    d.handle(ms(1120), Input::Udp(&first));
    d.handle(ms(1130), Input::Udp(&first)); // duplicate
    d.handle(ms(1140), Input::Udp(&third)); // after a gap
    d.handle(ms(1150), Input::Udp(&first[..10])); // short
    let mut wrong_type = third.clone();
    wrong_type[0] = 2;
    d.handle(ms(1160), Input::Udp(&wrong_type));
    d.handle(ms(1170), Input::Udp(&third[..third.len() - 1])); // length mismatch
    d.run_until(ms(1500));
    let lines = logs(&mut d);
    for want in [
        "W MQTT: Received duplicate/old audio sequence: 1, last: 1".to_string(),
        "W MQTT: Received audio packet with wrong sequence: 3, expected: 2".to_string(),
        "E MQTT: Invalid audio packet size: 10".to_string(),
        "E MQTT: Invalid audio packet type: 2".to_string(),
        format!(
            "E MQTT: Audio payload length mismatch: header={}, datagram={}",
            packet.len(),
            packet.len() - 1
        ),
    ] {
        assert!(lines.contains(&want), "{want}: {lines:?}");
    }
    let c = &d.speech_log().sessions[0].counts;
    assert_eq!(
        (c.received, c.decoded, c.dropped_refused, c.gaps),
        (6, 2, 4, 1),
        "{c:?}"
    );
}

#[test]
fn a_new_hello_resets_both_sequences() {
    let mut d = connected();
    open(&mut d, ms(1000));
    d.run_until(ms(1500));
    assert!(outputs(&mut d).iter().any(|o| matches!(o, Output::UdpSend { .. })));
    // Closed by the device, opened again: the new hello starts the counters at 0 again.
    d.toggle_chat(ms(2000));
    d.run_until(ms(2000));
    let _ = outputs(&mut d);
    let out = open(&mut d, ms(3000));
    assert!(out.iter().any(|o| matches!(o, Output::UdpOpen { .. })));
    d.run_until(ms(3300));
    let first = outputs(&mut d)
        .into_iter()
        .find_map(|o| match o {
            Output::UdpSend { datagram, .. } => Some(datagram),
            _ => None,
        })
        .expect("audio after the second open");
    assert_eq!(&first[12..16], &1u32.to_be_bytes());
}

#[test]
fn goodbye_goes_both_ways() {
    // The device closes: the socket goes and a goodbye is published.
    let mut d = connected();
    open(&mut d, ms(1000));
    d.toggle_chat(ms(2000));
    d.run_until(ms(2000));
    let out = outputs(&mut d);
    assert!(out.iter().any(|o| matches!(o, Output::UdpClose { .. })), "{out:?}");
    assert_eq!(published(&out), [r#"{"session_id":"s-1","type":"goodbye"}"#]);
    d.run_until(ms(2100));
    assert_eq!(d.state(), Some(DeviceState::Idle));

    // The server closes: the socket goes, nothing is published back.
    let mut d = connected();
    open(&mut d, ms(1000));
    d.handle(
        ms(2000),
        Input::MqttMessage(br#"{"type":"goodbye","session_id":"other"}"#),
    );
    d.run_until(ms(2100));
    assert!(
        outputs(&mut d).iter().all(|o| !matches!(o, Output::UdpClose { .. })),
        "another session's goodbye is ignored"
    );
    assert_eq!(d.state(), Some(DeviceState::Listening));
    d.handle(
        ms(2200),
        Input::MqttMessage(br#"{"type":"goodbye","session_id":"s-1"}"#),
    );
    d.run_until(ms(2300));
    let out = outputs(&mut d);
    assert!(out.iter().any(|o| matches!(o, Output::UdpClose { .. })), "{out:?}");
    assert!(published(&out).is_empty(), "no goodbye back: {out:?}");
    assert_eq!(d.state(), Some(DeviceState::Idle));
    let lines = logs(&mut d);
    assert!(
        lines.contains(&"I MQTT: Received goodbye message, session_id: s-1".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"I MQTT: Closing audio channel, send_goodbye: 0".to_string()),
        "{lines:?}"
    );
}

#[test]
fn a_publish_on_a_broken_connection_is_a_server_error() {
    let mut d = connected();
    open(&mut d, ms(1000));
    d.handle(ms(1500), Input::MqttClosed);
    // The UDP channel stays: the device keeps listening until something fails.
    assert_eq!(d.state(), Some(DeviceState::Listening));
    let _ = logs(&mut d);
    d.toggle_chat(ms(2000));
    d.run_until(ms(2100));
    let lines = logs(&mut d);
    assert!(
        lines.contains(&r#"E MQTT: Failed to publish message: {"session_id":"s-1","type":"goodbye"}"#.to_string()),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("错误: 发送失败，请检查网络")),
        "{lines:?}"
    );
    assert_eq!(d.state(), Some(DeviceState::Idle));
}

#[test]
fn a_broken_connection_is_retried_by_esp_mqtt_and_by_the_firmware_timer_when_idle() {
    let mut d = connected();
    let _ = logs(&mut d);
    d.handle(ms(1000), Input::MqttClosed);
    d.run_until(ms(1000));
    assert!(logs(&mut d).contains(&"I MQTT: MQTT disconnected, schedule reconnect in 60 seconds".to_string()));
    // esp-mqtt: 10 s later, with the same settings; the broker refuses again.
    d.run_until(ms(10_999));
    assert!(outputs(&mut d).is_empty());
    d.run_until(ms(11_000));
    assert!(matches!(outputs(&mut d).as_slice(), [Output::MqttConnect { .. }]));
    d.handle(ms(11_100), Input::MqttConnack { accepted: false });
    // The firmware's timer at 61 s: idle, so the client is made anew.
    d.run_until(ms(60_999));
    let _ = outputs(&mut d);
    let _ = logs(&mut d);
    d.run_until(ms(61_000));
    let lines = logs(&mut d);
    assert!(
        lines.contains(&"I MQTT: Reconnecting to MQTT server".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"W MQTT: Mqtt client already started".to_string()),
        "{lines:?}"
    );
    let out = outputs(&mut d);
    assert!(
        matches!(
            out.as_slice(),
            [Output::MqttClose { disconnect: false, .. }, Output::MqttConnect { .. }]
        ),
        "{out:?}"
    );
}

#[test]
fn the_reconnect_timer_does_nothing_unless_idle() {
    let mut d = connected();
    open(&mut d, ms(1000));
    d.handle(ms(1500), Input::MqttClosed);
    d.run_until(ms(30_000));
    let _ = logs(&mut d);
    d.run_until(ms(61_500));
    let lines = logs(&mut d);
    assert!(
        !lines.iter().any(|l| l.contains("Reconnecting to MQTT server")),
        "{lines:?}"
    );
}
