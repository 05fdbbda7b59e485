//! MQTT + UDP across firmware versions (docs/reference/mqtt.md §8), driven by hand in virtual
//! time: the keepalive default, the connect failure's line, the reconnect timer (1.9.0), the
//! hello without `glyph_push` before 2.4.0, the unchecked server hello and datagrams before
//! 2.4.0 (and where they crash), and the server goodbye's three rules (≤ 2.1.0, 2.2.x, 2.3.0+).

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

fn ms(n: u64) -> SimTime {
    SimTime::from_millis(n)
}

/// The bread board on `firmware`, on MQTT, powered on.
fn booted(firmware: &str) -> Device {
    let spec = BoardSpec::from_yaml("b.yaml", include_str!("../../boards/bread-compact-wifi.yaml"))
        .unwrap()
        .with_firmware(firmware)
        .unwrap();
    let block = MqttBlock {
        endpoint: "127.0.0.1:1883".into(),
        client_id: "GID_test@@@f4_12_fa_00_00_01@@@f4_12_fa_00_00_01".into(),
        publish_topic: "device-server".into(),
        ..MqttBlock::default()
    };
    let mut d = Device::new(Arc::new(spec), WorldSpec::over_mqtt(block), 3);
    d.set_trace(true);
    d.power_on(SimTime::ZERO);
    d
}

/// The client's dial at boot, and the device after its CONNACK at 50 ms (idle).
fn connected(firmware: &str) -> (Device, i32) {
    let mut d = booted(firmware);
    d.run_until(ms(10));
    let keepalive = outputs(&mut d)
        .into_iter()
        .find_map(|o| match o {
            Output::MqttConnect { dial, .. } => Some(dial.keepalive),
            _ => None,
        })
        .expect("the activation task connects");
    d.handle(ms(50), Input::MqttConnack { accepted: true });
    d.run_until(ms(60));
    assert_eq!(d.state(), Some(DeviceState::Idle));
    let _ = outputs(&mut d);
    let _ = logs(&mut d);
    (d, keepalive)
}

fn hello(session: &str, udp: &str) -> String {
    format!(
        r#"{{"type":"hello","transport":"udp","session_id":"{session}","audio_params":{{"sample_rate":24000,"frame_duration":60}},"udp":{udp}}}"#
    )
}

fn good_udp() -> String {
    format!(r#"{{"server":"127.0.0.1","port":8884,"key":"{KEY}","nonce":"{NONCE}"}}"#)
}

/// The user opens the channel at `t`; the server answers `server_hello` 20 ms later. What the
/// device published for the open.
fn open_with(d: &mut Device, t: SimTime, server_hello: &str) -> Vec<String> {
    d.toggle_chat(t);
    d.run_until(t);
    let sent = published(&outputs(d));
    let at = t + SimDuration::from_millis(20);
    d.handle(at, Input::MqttMessage(server_hello.as_bytes()));
    d.run_until(at + SimDuration::from_millis(10));
    sent
}

fn server_channel() -> UdpChannel {
    let hex = |s: &str| -> [u8; 16] {
        (0..16)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<_>>()
            .try_into()
            .unwrap()
    };
    UdpChannel::new(&UdpParams {
        server: "127.0.0.1".into(),
        port: 8884,
        key: hex(KEY),
        nonce: hex(NONCE),
    })
}

#[test]
fn keepalive_and_the_connect_failure_line_follow_the_tag() {
    assert_eq!(connected("1.7.5").1, 120, "1.7.x reads keepalive with a default of 120");
    assert_eq!(connected("1.8.0").1, 240);
    assert_eq!(connected("2.4.2").1, 240);
    for (tag, line) in [
        ("2.0.4", "E MQTT: Failed to connect to endpoint"),
        ("2.0.5", "E MQTT: Failed to connect to endpoint, code=0"),
    ] {
        let mut d = booted(tag);
        d.run_until(ms(10));
        d.handle(ms(50), Input::MqttConnack { accepted: false });
        d.run_until(ms(100));
        let lines = logs(&mut d);
        assert!(lines.contains(&line.to_string()), "{tag}: {lines:?}");
    }
}

#[test]
fn the_sixty_second_reconnect_timer_comes_with_1_9_0() {
    for (tag, timer) in [("1.8.9", false), ("1.9.0", true), ("2.4.2", true)] {
        let (mut d, _) = connected(tag);
        d.handle(ms(1000), Input::MqttClosed);
        d.run_until(ms(1100));
        let lines = logs(&mut d);
        let line = if timer {
            "I MQTT: MQTT disconnected, schedule reconnect in 60 seconds"
        } else {
            "I MQTT: Disconnected from endpoint"
        };
        assert!(lines.contains(&line.to_string()), "{tag}: {lines:?}");
        // esp-mqtt retries at +10 s either way; refuse it, so only the firmware's timer is left.
        d.run_until(ms(11_000));
        d.handle(ms(11_050), Input::MqttConnack { accepted: false });
        d.run_until(ms(61_500));
        let restarted = logs(&mut d).contains(&"I MQTT: Reconnecting to MQTT server".to_string());
        assert_eq!(restarted, timer, "{tag}");
    }
}

#[test]
fn the_hello_advertises_glyph_push_only_from_2_4_0() {
    let (mut d, _) = connected("2.2.6");
    let sent = open_with(&mut d, ms(1000), &hello("s-1", &good_udp()));
    assert_eq!(
        sent,
        [
            r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        ]
    );
    assert_eq!(d.state(), Some(DeviceState::Listening), "the 2.2.6 hello is taken");
}

#[test]
fn before_2_4_0_the_server_hello_is_read_without_checks() {
    // Another transport: refused with the old line (the open then waits out its 10 s).
    let (mut d, _) = connected("2.2.6");
    open_with(
        &mut d,
        ms(1000),
        &hello("s-1", &good_udp()).replace(r#""transport":"udp""#, r#""transport":"websocket""#),
    );
    assert!(logs(&mut d).contains(&"E MQTT: Unsupported transport: websocket".to_string()));
    d.run_until(ms(12_000));
    assert!(logs(&mut d).contains(&"E MQTT: Failed to receive server hello".to_string()));

    // Key digits that are not hex decode as 0 and are taken; 2.4.2 refuses them.
    let odd_key = good_udp().replace(KEY, "zz112233445566778899aabbccddeeff");
    for (tag, taken) in [("2.3.0", true), ("2.4.2", false)] {
        let (mut d, _) = connected(tag);
        open_with(&mut d, ms(1000), &hello("s-1", &odd_key));
        assert_eq!(d.state() == Some(DeviceState::Listening), taken, "{tag}");
    }

    // Where the old parser crashes: a missing transport, a missing `udp` member, a key of 15
    // bytes. The device panics and boots again; 2.4.2 logs and goes on.
    let no_transport = hello("s-1", &good_udp()).replace(r#""transport":"udp","#, "");
    let no_server = hello("s-1", &good_udp().replace(r#""server":"127.0.0.1","#, ""));
    let short_key = hello("s-1", &good_udp().replace(KEY, &KEY[..30]));
    for (case, text) in [
        ("transport", &no_transport),
        ("server", &no_server),
        ("key", &short_key),
    ] {
        let (mut d, _) = connected("2.2.6");
        open_with(&mut d, ms(1000), text);
        let lines = logs(&mut d);
        assert!(lines.iter().any(|l| l.starts_with("panic: ")), "{case}: {lines:?}");
        assert_eq!(d.boots(), 2, "{case}: the device rebooted");
        let (mut d, _) = connected("2.4.2");
        open_with(&mut d, ms(1000), text);
        assert!(!logs(&mut d).iter().any(|l| l.starts_with("panic: ")), "{case}");
        assert_eq!(d.boots(), 1);
    }
}

#[test]
fn before_2_4_0_a_duplicate_datagram_plays_again_and_a_short_one_is_dropped() {
    let packet = {
        let mut enc = Encoder::tts(24_000);
        let pcm: Vec<i16> = (0..enc.frame_len())
            .map(|i| ((i as f32 * 0.1).sin() * 8000.0) as i16)
            .collect();
        enc.encode(&pcm)
    };
    for tag in ["2.2.6", "2.4.2"] {
        let (mut d, _) = connected(tag);
        open_with(&mut d, ms(1000), &hello("s-1", &good_udp()));
        d.handle(
            ms(1100),
            Input::MqttMessage(br#"{"session_id":"s-1","type":"tts","state":"start"}"#),
        );
        d.run_until(ms(1110));
        let _ = logs(&mut d);
        let mut server = server_channel();
        let first = server.seal(&packet, 0).unwrap();
        let tiny = server.seal(&[0xf8, 0xff, 0xfe], 0).unwrap(); // a 19-byte datagram (DTX-sized)
        d.handle(ms(1120), Input::Udp(&first));
        d.handle(ms(1130), Input::Udp(&first));
        d.handle(ms(1140), Input::Udp(&tiny));
        d.run_until(ms(1500));
        let lines = logs(&mut d);
        let c = d.speech_log().sessions[0].counts.clone();
        if tag == "2.2.6" {
            // Only a sequence *below* the last is old: the copy passes with the gap warning.
            assert!(
                lines.contains(&"W MQTT: Received audio packet with wrong sequence: 1, expected: 2".to_string()),
                "{lines:?}"
            );
            // Under sizeof(std::string), 24 bytes: dropped.
            assert!(
                lines.contains(&"E MQTT: Invalid audio packet size: 19".to_string()),
                "{lines:?}"
            );
            assert_eq!((c.received, c.decoded, c.dropped_refused), (3, 2, 1), "{c:?}");
        } else {
            assert!(
                lines.contains(&"W MQTT: Received duplicate/old audio sequence: 1, last: 1".to_string()),
                "{lines:?}"
            );
            assert_eq!((c.received, c.decoded, c.dropped_refused), (3, 2, 1), "{c:?}");
            assert!(
                !lines.iter().any(|l| l.contains("Invalid audio packet size")),
                "{lines:?}"
            );
        }
    }
}

#[test]
fn the_server_goodbye_has_three_rules_across_versions() {
    // (tag, goodbye without a session id closes?, a goodbye is published back?, close logged?)
    for (tag, closes, echoed, logged) in [
        ("2.1.0", true, true, false),
        ("2.2.6", true, false, true),
        ("2.3.0", false, false, false),
    ] {
        let (mut d, _) = connected(tag);
        open_with(&mut d, ms(1000), &hello("s-1", &good_udp()));
        let _ = outputs(&mut d);
        let _ = logs(&mut d);
        d.handle(ms(2000), Input::MqttMessage(br#"{"type":"goodbye"}"#));
        d.run_until(ms(2100));
        let out = outputs(&mut d);
        let lines = logs(&mut d);
        assert!(
            lines.contains(&"I MQTT: Received goodbye message, session_id: null".to_string()),
            "{tag}: {lines:?}"
        );
        assert_eq!(
            out.iter().any(|o| matches!(o, Output::UdpClose { .. })),
            closes,
            "{tag}: {out:?}"
        );
        assert_eq!(
            published(&out).contains(&r#"{"session_id":"s-1","type":"goodbye"}"#.to_string()),
            echoed,
            "{tag}: {out:?}"
        );
        assert_eq!(
            lines.iter().any(|l| l.starts_with("I MQTT: Closing audio channel")),
            logged,
            "{tag}: {lines:?}"
        );
    }
    // A session id that is not a string: compared as a NULL C string before 2.3.0.
    for (tag, crashes) in [("2.2.6", true), ("2.3.0", false)] {
        let (mut d, _) = connected(tag);
        open_with(&mut d, ms(1000), &hello("s-1", &good_udp()));
        d.handle(ms(2000), Input::MqttMessage(br#"{"type":"goodbye","session_id":7}"#));
        d.run_until(ms(2100));
        assert_eq!(d.boots() == 2, crashes, "{tag}");
    }
}
