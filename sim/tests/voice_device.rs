//! The device's side of the voice channel as firmware 2.4.2 wires it, seen on the wire of a
//! loopback pairing with xinnan-py (docs/reference/voice.md §3, §4): the v2 microphone header,
//! the microphone's warm-up after `listen start`, and when a wake word is detected at all.

use std::sync::Arc;
use xiaozhi_sim::device::Input;

use serde_json::Value;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{AsPlayed, Device, DeviceState};
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::resample_clip;
use xiaozhi_sim::voice::speak::Timbre;
use xiaozhi_sim::world::WorldSpec;

mod common;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const C3: &str = include_str!("../../boards/lckfb/szpi-esp32c3.yaml");

/// `yaml`'s board over WebSocket protocol `version`, paired with xinnan-py, idle.
fn pair(yaml: &str, version: i32) -> Loopback {
    common::ws_pair(yaml, version)
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
    run(&mut lb, 3000);
    lb.tap();
    let now = lb.now();
    lb.device.wake_word(now, "你好小智");
    run(&mut lb, 3000);
    let frames = lb.tapped();
    let sent = texts(&frames);
    let detect = sent
        .iter()
        .position(|(_, v)| is(v, "listen", "detect") && v["text"] == "你好小智");
    let start = sent.iter().position(|(_, v)| is(v, "listen", "start"));
    assert!(detect.is_some() && start > detect, "detect, then start: {sent:?}");
    // Before the detect: the wake-word cache, 2 s in whole 60 ms frames (33), silence (DTX).
    let detect_at = frames
        .iter()
        .position(|f| !f.1 && f.2.windows(6).any(|w| w == b"detect"))
        .unwrap();
    let hello_at = frames
        .iter()
        .position(|f| !f.1 && f.2.windows(5).any(|w| w == b"hello"))
        .unwrap();
    let wake: Vec<&Vec<u8>> = frames[hello_at..detect_at]
        .iter()
        .filter(|f| f.1)
        .map(|f| &f.2)
        .collect();
    assert_eq!(
        wake.len(),
        33,
        "the wake word's packets between the hello and the detect"
    );
    assert!(wake.iter().all(|p| p.len() == 1), "silence: the TOC byte alone");
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

/// A device dialling a server that accepts the connection and never says hello: the open fails
/// at 10 s; the firmware's `MAIN_EVENT_ERROR` goes Idle and alerts, with its sound.
#[test]
fn a_missing_server_hello_alerts_at_10_s_and_the_exclamation_is_heard() {
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut world = WorldSpec::conformance();
    world.websocket = Some(xiaozhi_sim::world::WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version: 1,
    });
    let mut d = Device::new(Arc::new(spec), world, 5);
    d.power_on(SimTime::ZERO);
    let t0 = SimTime::from_millis(1000);
    d.run_until(t0);
    d.drain_events();
    d.toggle_chat(t0);
    let mut opened = false;
    let mut t = t0;
    while t < t0 + SimDuration::from_secs(13) {
        t += SimDuration::from_millis(10);
        d.run_until(t);
        while let Some(o) = d.poll_output() {
            if matches!(o, xiaozhi_sim::device::Output::WsOpen { .. }) {
                d.handle(t, Input::WsOpened { ok: true });
                opened = true;
            }
        }
    }
    assert!(opened, "the device dialled");
    assert_eq!(d.snapshot().state, Some(DeviceState::Idle));
    let events = d.drain_events();
    let alert = events
        .iter()
        .find(|e| e.to_string().contains("Alert [cancel] 错误: 等待响应超时"))
        .unwrap_or_else(|| {
            panic!(
                "no alert line in {:#?}",
                events.iter().map(|e| e.to_string()).collect::<Vec<_>>()
            )
        });
    let waited = alert.at.saturating_since(t0).as_millis();
    assert!(
        (10_000..10_200).contains(&waited),
        "alerted {waited} ms after the click"
    );
    let (m, _) = d.render(alert.at, alert.at + SimDuration::from_millis(500), false);
    assert!(m.audible, "the exclamation through the speaker: {m:?}");
}

/// A server's `alert` message: the warning line and the vibration sound; an incomplete one is
/// refused with the firmware's warning.
#[test]
fn a_server_alert_is_logged_and_sounded_and_an_incomplete_one_is_refused() {
    let mut lb = pair(BREAD, 1);
    listening(&mut lb);
    lb.device.drain_events();
    let now = lb.now();
    lb.device.handle(
        now,
        Input::WsText(r#"{"type":"alert","status":"提示","message":"电量低","emotion":"sad"}"#.as_bytes()),
    );
    lb.device
        .handle(now, Input::WsText(br#"{"type":"alert","status":"x","message":"y"}"#));
    run(&mut lb, 600);
    let lines: Vec<String> = lb.device.drain_events().iter().map(|e| e.to_string()).collect();
    let alert = lines.iter().any(|l| l.contains("Alert [sad] 提示: 电量低"));
    let refused = lines
        .iter()
        .any(|l| l.contains("Alert command requires status, message and emotion"));
    assert!(alert && refused, "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("vibration")),
        "the sound plays: {lines:#?}"
    );
}

#[test]
fn the_wake_words_audio_goes_before_the_detect_and_only_what_the_cache_held() {
    let mut lb = pair(BREAD, 1);
    run(&mut lb, 3000);
    lb.tap();
    let said = resample_clip(
        &Timbre::default().render(SimDuration::from_millis(900), 24_000),
        24_000,
        16_000,
    );
    let now = lb.now();
    lb.device.wake_word_saying(now, "你好小智", &said);
    run(&mut lb, 1000);
    let frames = lb.tapped();
    let detect_at = frames
        .iter()
        .position(|f| !f.1 && f.2.windows(6).any(|w| w == b"detect"))
        .unwrap();
    let wake: Vec<usize> = frames[..detect_at].iter().filter(|f| f.1).map(|f| f.2.len()).collect();
    assert_eq!(wake.len(), 33, "{wake:?}");
    // The last 900 ms are the word: encoded packets; the silence before it: TOC bytes.
    let voiced = wake.iter().filter(|&&n| n > 1).count();
    assert!((15..=17).contains(&voiced), "{voiced} voiced packets: {wake:?}");
    assert!(wake[..15].iter().all(|&n| n == 1), "{wake:?}");
    // The cache was cleared by the encode: the next wake from Idle sends only what came since.
    let now = lb.now();
    lb.session().unwrap().end_turn(now);
    run(&mut lb, 1000);
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(&mut lb, 1000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
    lb.tapped();
    run(&mut lb, 600);
    let now = lb.now();
    lb.device.wake_word(now, "你好小智");
    run(&mut lb, 500);
    let frames = lb.tapped();
    let detect_at = frames
        .iter()
        .position(|f| !f.1 && f.2.windows(6).any(|w| w == b"detect"))
        .unwrap();
    let n = frames[..detect_at].iter().filter(|f| f.1).count();
    // Idle (detection on, the cache filling) since the click, 1.6 s before the word: 26 frames.
    assert!((25..=27).contains(&n), "1.6 s of cache since Idle: {n} packets");
}

/// `OnAudioChannelOpened` warns when the server's sample rate is not the board's output rate:
/// xinnan-py's hello announces 16 kHz, bread-compact-wifi plays at 24 kHz.
#[test]
fn a_server_rate_other_than_the_output_rate_is_warned_of_when_the_channel_opens() {
    let warning =
        "Server sample rate 16000 does not match device output sample rate 24000, resampling may cause distortion";
    for (yaml, warned) in [
        (BREAD.to_string(), true),
        (
            BREAD.replace("output_sample_rate: 24000", "output_sample_rate: 16000"),
            false,
        ),
    ] {
        let mut lb = pair(&yaml, 1);
        lb.device.drain_events();
        listening(&mut lb);
        let lines: Vec<String> = lb.device.drain_events().iter().map(|e| e.to_string()).collect();
        assert_eq!(lines.iter().any(|l| l.contains(warning)), warned, "{lines:#?}");
        assert!(
            !warned
                || lines
                    .iter()
                    .all(|l| !l.contains("does not match") || l.contains(warning))
        );
    }
}

/// The input powers down 15 s after the input task last read the microphone: never in Idle
/// with a wake word (detection reads all the time), 15 s after listening without one.
#[test]
fn the_input_powers_down_15_s_after_the_last_read_only_where_nothing_reads() {
    for (yaml, powered_down) in [
        (BREAD.to_string(), false),
        (BREAD.replace("audio:\n", "audio:\n  wake_word: false\n"), true),
    ] {
        let mut lb = pair(&yaml, 1);
        listening(&mut lb);
        let now = lb.now();
        lb.device.toggle_chat(now);
        run(&mut lb, 500);
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
        lb.device.drain_events();
        run(&mut lb, 14_000);
        let early = lb
            .device
            .drain_events()
            .iter()
            .any(|e| e.to_string().contains("audio input powered down"));
        assert!(!early, "not before 15 s");
        run(&mut lb, 3_000);
        let off = lb
            .device
            .drain_events()
            .iter()
            .any(|e| e.to_string().contains("audio input powered down"));
        assert_eq!(off, powered_down);
    }
}

/// A word said while detection is off is not heard, and its audio does not turn up in a later
/// wake word's packets.
#[test]
fn an_unheard_wake_words_audio_is_not_sent_with_a_later_one() {
    let mut lb = pair(BREAD, 1);
    listening(&mut lb);
    let said = resample_clip(
        &Timbre::default().render(SimDuration::from_millis(900), 24_000),
        24_000,
        16_000,
    );
    let now = lb.now();
    lb.device.wake_word_saying(now, "你好小智", &said);
    run(&mut lb, 500);
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(&mut lb, 3000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
    lb.tap();
    let now = lb.now();
    lb.device.wake_word(now, "你好小智");
    run(&mut lb, 1000);
    let frames = lb.tapped();
    let detect_at = frames
        .iter()
        .position(|f| !f.1 && f.2.windows(6).any(|w| w == b"detect"))
        .unwrap();
    let wake: Vec<usize> = frames[..detect_at].iter().filter(|f| f.1).map(|f| f.2.len()).collect();
    assert!(
        !wake.is_empty() && wake.iter().all(|&n| n == 1),
        "silence only: {wake:?}"
    );
}

#[test]
fn a_packet_longer_than_the_announced_frame_is_dropped_with_the_decoders_error() {
    // The PCM buffer holds one announced frame (audio_service.cc:391); a 120 ms packet does not
    // fit 60 ms and esp_opus_dec answers ESP_AUDIO_ERR_BUFF_NOT_ENOUGH (-8).
    let mut lb = pair(BREAD, 1);
    listening(&mut lb);
    let now = lb.now();
    lb.device.handle(
        now,
        Input::WsText(br#"{"type":"tts","state":"start","session_id":"s"}"#),
    );
    run(&mut lb, 100);
    let _ = lb.device.drain_events();
    let now = lb.now();
    // CELT 20 ms frames (config 31), code 3: 6 frames (120 ms), then 3 frames (60 ms).
    let mut long = vec![(31 << 3) | 3, 6];
    long.extend([0u8; 12]);
    let mut fits = vec![(31 << 3) | 3, 3];
    fits.extend([0u8; 6]);
    lb.device.handle(now, Input::WsBinary(&long));
    lb.device.handle(now, Input::WsBinary(&fits));
    let log: Vec<String> = lb.device.drain_events().iter().map(|e| e.to_string()).collect();
    let errors: Vec<&String> = log.iter().filter(|l| l.contains("error code: -8")).collect();
    assert_eq!(errors.len(), 1, "{log:?}");
    let counts = &lb.device.speech_log().sessions.last().unwrap().counts;
    assert_eq!(counts.received, 2);
    assert_eq!(counts.dropped_undecodable, 1, "{counts:?}");
}

#[test]
fn with_device_aec_the_device_listens_in_realtime_and_keeps_listening_through_speech() {
    // CONFIG_USE_DEVICE_AEC: GetDefaultListeningMode is realtime (application.cc:1022-1024);
    // voice processing stays on while speaking and tts stop sends no listen start.
    let aec = BREAD.replace(
        "  output_sample_rate: 24000\n",
        "  output_sample_rate: 24000\n  device_aec: true\n",
    );
    let mut lb = pair(&aec, 1);
    lb.tap();
    listening(&mut lb);
    let started = lb.now();
    lb.device.handle(
        started,
        Input::WsText(br#"{"type":"tts","state":"start","session_id":"s"}"#),
    );
    run(&mut lb, 1000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Speaking));
    let stopped = lb.now();
    lb.device.handle(
        stopped,
        Input::WsText(br#"{"type":"tts","state":"stop","session_id":"s"}"#),
    );
    run(&mut lb, 1000);
    let frames = lb.tapped();
    let sent = texts(&frames);
    let listens: Vec<&Value> = sent.iter().map(|(_, v)| v).filter(|v| is(v, "listen", "")).collect();
    assert_eq!(listens.len(), 1, "one listen start, none after tts stop: {listens:?}");
    assert_eq!(listens[0]["mode"], "realtime");
    let while_speaking = frames.iter().filter(|f| f.1 && f.0 > started && f.0 <= stopped).count();
    assert!(
        while_speaking >= 15,
        "the microphone kept sending while speaking: {while_speaking}"
    );
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
}

/// Issue 40: a device measuring as it plays lets each decoded frame go once played and measured,
/// and hears the turn exactly as a device that kept every frame and rendered it afterwards.
#[test]
fn a_device_measuring_as_it_plays_keeps_no_played_speech_and_hears_the_same() {
    let turn = |streaming: bool| {
        let mut lb = pair(BREAD, 1);
        let which = if streaming { AsPlayed::Replies } else { AsPlayed::Off };
        lb.device.measure_as_played(which);
        listening(&mut lb);
        common::utter(&mut lb);
        let now = lb.now();
        let text = "好的，我把音量调小一点，现在是四十。";
        let s = lb.session().unwrap();
        s.speak(now, text, &Timbre::default(), SimDuration::from_secs(3));
        s.end_turn(now);
        let speech_held = |lb: &Loopback| lb.device.audio_log().playbacks.iter().filter(|p| p.speech).count();
        run(&mut lb, 2000);
        let mid = speech_held(&lb);
        run(&mut lb, 5000);
        let session = lb.device.speech_log().sessions.last().unwrap().clone();
        assert!(session.counts.decoded >= 40, "{:?}", session.counts);
        let heard = lb.device.heard(&session.window.unwrap(), false).0;
        (heard, mid, speech_held(&lb), session.counts.decoded)
    };
    let (stored, stored_mid, stored_after, decoded) = turn(false);
    let (streamed, mid, after) = {
        let (m, mid, after, _) = turn(true);
        (m, mid, after)
    };
    assert!(stored.spl_db.is_some(), "{stored:?}");
    assert_eq!(streamed, stored, "the same figures, to the bit");
    assert_eq!(stored_after as u64, decoded, "kept: every decoded frame");
    assert!(stored_mid >= 30, "kept mid-turn: {stored_mid}");
    assert_eq!(
        after, 0,
        "measuring as it plays: nothing left once the window is measured"
    );
    assert!(mid < stored_mid / 2, "mid-turn: {mid} frames held against {stored_mid}");
}
