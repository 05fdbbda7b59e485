//! The device's side of the voice channel as firmware 2.4.2 wires it, seen on the wire of a
//! loopback pairing with xinnan-py (docs/reference/voice.md §3, §4): the v2 microphone header,
//! the microphone's warm-up after `listen start`, and when a wake word is detected at all.

use std::sync::Arc;

use serde_json::Value;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState};
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::resample_clip;
use xiaozhi_sim::voice::speak::Timbre;
use xiaozhi_sim::world::WorldSpec;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const C3: &str = include_str!("../../boards/lckfb/szpi-esp32c3.yaml");

/// `yaml`'s board over WebSocket protocol `version`, paired with xinnan-py, idle.
fn pair(yaml: &str, version: i32) -> Loopback {
    let mut world = WorldSpec::conformance();
    world.websocket = Some(xiaozhi_sim::world::WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version,
    });
    let spec = BoardSpec::from_yaml("b.yaml", yaml).unwrap();
    let mut d = Device::new(Arc::new(spec), world, 5);
    d.power_on(SimTime::ZERO);
    let backend = xiaozhi_sim::backend::BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    lb
}

/// Runs `lb` for `ms` more milliseconds.
fn run(lb: &mut Loopback, ms: u64) {
    let t = lb.now() + SimDuration::from_millis(ms);
    lb.run_until(t).unwrap();
}

/// BOOT click from idle: the channel opens and the device listens.
fn listening(lb: &mut Loopback) {
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(lb, 3000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
}

/// The text frames among `frames`, parsed.
fn texts(frames: &[(SimTime, bool, Vec<u8>)]) -> Vec<(SimTime, Value)> {
    frames
        .iter()
        .filter(|f| !f.1)
        .map(|(t, _, b)| (*t, serde_json::from_slice(b).unwrap()))
        .collect()
}

fn is(v: &Value, kind: &str, state: &str) -> bool {
    v["type"] == kind && (state.is_empty() || v["state"] == state)
}

#[test]
fn every_v2_microphone_frame_has_timestamp_0_without_server_aec() {
    let mut lb = pair(BREAD, 2);
    lb.tap();
    listening(&mut lb);
    let pcm = Timbre::default().render(SimDuration::from_secs(1), 24_000);
    let now = lb.now();
    lb.device.say(now, &resample_clip(&pcm, 24_000, 16_000));
    run(&mut lb, 2000);
    let binary: Vec<Vec<u8>> = lb.tapped().into_iter().filter(|f| f.1).map(|f| f.2).collect();
    assert!(binary.len() > 30, "{} frames", binary.len());
    for f in &binary {
        assert_eq!(&f[0..2], &[0, 2], "version 2");
        assert_eq!(&f[8..12], &[0, 0, 0, 0], "timestamp 0 (audio_service.cc:547-549)");
    }
    assert!(binary.iter().any(|f| f.len() > 16 + 1), "speech, not only DTX frames");
}

#[test]
fn the_first_microphone_frame_leaves_a_120_ms_warm_up_and_a_frame_after_listen_start() {
    let mut lb = pair(BREAD, 1);
    lb.tap();
    listening(&mut lb);
    let frames = lb.tapped();
    let start = texts(&frames)
        .into_iter()
        .find(|(_, v)| is(v, "listen", "start"))
        .expect("listen start")
        .0;
    let first = frames
        .iter()
        .find(|f| f.1 && f.0 >= start)
        .expect("a microphone frame")
        .0;
    let gap = first.saturating_since(start);
    assert!(
        (180..240).contains(&gap.as_millis()),
        "first frame {} ms after listen start",
        gap.as_millis()
    );
}

#[test]
fn a_wake_word_while_listening_is_not_detected_unless_the_build_says_so() {
    for (yaml, detected) in [
        (BREAD.to_string(), false),
        (
            BREAD.replace("audio:\n", "audio:\n  wake_word_in_listening: true\n"),
            true,
        ),
    ] {
        let mut lb = pair(&yaml, 1);
        listening(&mut lb);
        lb.tap();
        let now = lb.now();
        lb.device.wake_word(now, "你好小智");
        run(&mut lb, 1000);
        let sent = texts(&lb.tapped());
        let aborted = sent
            .iter()
            .any(|(_, v)| is(v, "abort", "") && v["reason"] == "wake_word_detected");
        let restarted = sent.iter().any(|(_, v)| is(v, "listen", "start"));
        assert_eq!((aborted, restarted), (detected, detected), "{sent:?}");
        let noted = lb
            .device
            .drain_events()
            .iter()
            .any(|e| e.to_string().contains("WAKE_WORD_DETECTION_IN_LISTENING is n"));
        assert_eq!(noted, !detected, "the trace says why nothing happened");
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    }
}

#[test]
fn a_wake_word_interrupts_speech_with_the_afe_wake_word_only() {
    // ESP32-S3: the AFE engine detects while speaking; ESP32-C3: the lite engine does not.
    for (yaml, detected) in [(BREAD, true), (C3, false)] {
        let mut lb = pair(yaml, 1);
        listening(&mut lb);
        let now = lb.now();
        let s = lb.session().unwrap();
        s.speak(now, "好的", &Timbre::default(), SimDuration::from_secs(3));
        run(&mut lb, 500);
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Speaking));
        lb.tap();
        let now = lb.now();
        lb.device.wake_word(now, "你好小智");
        run(&mut lb, 300);
        let sent = texts(&lb.tapped());
        let aborted = sent
            .iter()
            .any(|(_, v)| is(v, "abort", "") && v["reason"] == "wake_word_detected");
        assert_eq!(aborted, detected, "{sent:?}");
    }
}

#[test]
fn a_wake_word_from_idle_is_detected_and_then_detection_waits_for_idle_again() {
    let mut lb = pair(BREAD, 1);
    lb.tap();
    let now = lb.now();
    lb.device.wake_word(now, "你好小智");
    run(&mut lb, 3000);
    let sent = texts(&lb.tapped());
    let detect = sent
        .iter()
        .position(|(_, v)| is(v, "listen", "detect") && v["text"] == "你好小智");
    let start = sent.iter().position(|(_, v)| is(v, "listen", "start"));
    assert!(detect.is_some() && start > detect, "detect, then start: {sent:?}");
    // xinnan-py answers the detect with a turn (`stt`, `tts start`; this session is driven by
    // hand, so the test ends it); once the device listens again, the same word changes nothing
    // (detection is off while listening).
    let now = lb.now();
    lb.session().unwrap().end_turn(now);
    run(&mut lb, 2000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    lb.tapped();
    let now = lb.now();
    lb.device.wake_word(now, "你好小智");
    run(&mut lb, 1000);
    assert!(texts(&lb.tapped()).iter().all(|(_, v)| !is(v, "abort", "")));
}
