//! The voice path on simulated boards, in virtual time, with the direct link's speaking backend
//! (the harness's agenda): what the listener hears of the backend's own speech, before and
//! after `set_volume`, and how the device's state machine answers `tts` messages.

use std::sync::Arc;
use xiaozhi_sim::device::Input;

mod common;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState, Output};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::speak::{Timbre, synthesize};
use xiaozhi_sim::world::WorldSpec;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const ES8311: &str = include_str!("../../boards/lckfb/szpi-esp32c3.yaml");

/// The conformance world with a WebSocket server configured (protocol `version`).
fn ws_world(version: i32) -> WorldSpec {
    let mut world = WorldSpec::conformance();
    world.websocket = Some(xiaozhi_sim::world::WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version,
    });
    world
}

/// `yaml`'s board in [`ws_world`] v1, paired with xinnan-py, the channel not yet opened.
fn xinnan_pair(yaml: &str) -> xiaozhi_sim::loopback::Loopback {
    let spec = BoardSpec::from_yaml("b.yaml", yaml).unwrap();
    let mut d = Device::new(Arc::new(spec), ws_world(1), 5);
    d.power_on(SimTime::ZERO);
    let backend = xiaozhi_sim::backend::BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = xiaozhi_sim::loopback::Loopback::new(d, Arc::new(backend));
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    lb
}

fn booted(yaml: &str) -> Harness {
    let spec = BoardSpec::from_yaml("b.yaml", yaml).unwrap();
    let mut h = Harness::new(Device::new(Arc::new(spec), WorldSpec::conformance(), 7));
    h.power_on();
    h.run_until_idle().unwrap();
    h.sleep(SimDuration::from_secs(1));
    h
}

/// One turn of `secs` of speech; returns the session's listener level (dB SPL) and its window.
fn turn(h: &mut Harness, text: &str, secs: u64) -> (f64, usize) {
    let now = h.now();
    let packets = synthesize(&Timbre::default(), SimDuration::from_secs(secs), 24_000);
    let n = packets.len();
    // tts start goes out before the LLM runs; the first audio follows 200 ms later.
    h.agenda.start_turn(now);
    h.agenda.sentence(now + SimDuration::from_millis(200), text, packets);
    h.agenda.stop_turn(now);
    let end = h.agenda.last_at().unwrap();
    h.run_until(end + SimDuration::from_millis(500));
    let s = h.device.speech_log().sessions.last().unwrap().clone();
    assert_eq!(s.counts.received, n as u64, "{s:?}");
    assert_eq!(s.counts.decoded, n as u64, "every frame decoded: {:?}", s.counts);
    let w = s.window.unwrap();
    // The first 300 ms hold the decoder's and resampler's start-up.
    let (m, _) = h.device.render(w.start + SimDuration::from_millis(300), w.end, false);
    (m.spl_db.expect("heard something"), n)
}

fn set_volume(h: &mut Harness, v: i32) {
    let p = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"self.audio_speaker.set_volume","arguments":{{"volume":{v}}}}}}}"#
    );
    h.deliver(p.as_bytes());
    h.run_until_idle().unwrap();
    assert_eq!(h.device.snapshot().volume, Some(v));
}

#[test]
fn the_backends_speech_is_9_7_db_quieter_after_set_volume_40_on_bread_compact_wifi() {
    let mut h = booted(BREAD);
    assert!(!h.device.snapshot().decoder_allocated, "codec state is made lazily");
    set_volume(&mut h, 70);
    let (before, _) = turn(&mut h, "好的", 2);
    assert!(h.device.snapshot().decoder_allocated);
    set_volume(&mut h, 40);
    let (after, _) = turn(&mut h, "音量已调小", 2);
    let change = after - before;
    assert!(
        (change + 9.7).abs() <= 0.1,
        "change {change:.2} dB (before {before:.1}, after {after:.1})"
    );
}

#[test]
fn the_es8311_board_takes_15_db_off_its_speech_for_the_same_call() {
    let mut h = booted(ES8311);
    set_volume(&mut h, 70);
    let (before, _) = turn(&mut h, "好的", 2);
    set_volume(&mut h, 40);
    let (after, _) = turn(&mut h, "音量已调小", 2);
    let change = after - before;
    assert!(
        (change + 15.0).abs() <= 0.2,
        "change {change:.2} dB (before {before:.1}, after {after:.1})"
    );
}

#[test]
fn listen_start_follows_tts_stop_only_after_playback_drained() {
    let mut h = booted(BREAD);
    let t0 = h.now();
    let packets = synthesize(&Timbre::default(), SimDuration::from_secs(3), 24_000);
    h.agenda.start_turn(t0);
    h.agenda
        .sentence(t0 + SimDuration::from_millis(50), "说点什么", packets);
    // The server stops early (network jitter): tts stop 1 s in, audio still queued.
    let stop_at = t0 + SimDuration::from_millis(1000);
    h.run_until(stop_at);
    h.agenda = xiaozhi_sim::voice::speak::Agenda::new("direct");
    h.device
        .handle(stop_at, Input::Json(br#"{"type":"tts","state":"stop"}"#));
    h.run_until(t0 + SimDuration::from_millis(1100));
    assert_eq!(h.device.snapshot().state, Some(DeviceState::Listening));
    let early: Vec<Output> = h.take_outputs();
    assert!(
        !early
            .iter()
            .any(|o| matches!(o, Output::Control { text, .. } if text.windows(6).any(|w| w == b"listen"))),
        "no listen start while the queue still plays: {early:?}"
    );
    let end = h.device.speech_log().sessions[0].window.unwrap().end;
    h.run_until(end + SimDuration::from_millis(100));
    let late: Vec<(Vec<u8>, SimTime)> = h
        .take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Control { text, at, .. } => Some((text, at)),
            _ => None,
        })
        .collect();
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(
        late[0].0,
        br#"{"session_id":"","type":"listen","state":"start","mode":"auto"}"#
    );
    // Drained = the last frame written to I2S, one DMA ring (60 ms at 24 kHz) before its end.
    assert_eq!(late[0].1, SimTime::from_micros(end.as_micros() - 60_000));
}

#[test]
fn audio_sent_together_with_tts_start_overtakes_it_and_is_dropped() {
    // The receive task takes the frames before the main task runs the scheduled speaking state.
    let mut h = booted(BREAD);
    let now = h.now();
    h.agenda.sentence(
        now,
        "好",
        synthesize(&Timbre::default(), SimDuration::from_secs(1), 24_000),
    );
    h.agenda.stop_turn(now);
    h.run_until(now + SimDuration::from_secs(3));
    let s = &h.device.speech_log().sessions[0];
    assert_eq!(
        s.counts.dropped_wrong_state, 6,
        "the 5 pre-buffered packets and the first paced one"
    );
    assert_eq!(s.counts.decoded, s.counts.received - 6);
}

#[test]
fn audio_outside_speaking_is_dropped_and_counted() {
    let mut h = booted(BREAD);
    let now = h.now();
    for p in synthesize(&Timbre::default(), SimDuration::from_millis(600), 24_000) {
        h.device.handle(now, Input::Audio(&p));
    }
    let log = h.device.speech_log();
    assert_eq!(log.outside.received, 10);
    assert_eq!(log.outside.dropped_wrong_state, 10);
    assert!(
        h.device
            .audio_log()
            .playbacks
            .iter()
            .all(|p| !matches!(p.source, xiaozhi_sim::audio::source::Source::Pcm { .. }))
    );
    assert!(!h.device.snapshot().decoder_allocated, "no decoder for dropped frames");
}

#[test]
fn a_flood_of_frames_fills_the_decode_queue_and_the_rest_is_dropped() {
    let mut h = booted(BREAD);
    let now = h.now();
    h.device.handle(now, Input::Json(br#"{"type":"tts","state":"start"}"#));
    h.run_until(now);
    let packets = synthesize(&Timbre::default(), SimDuration::from_secs(6), 24_000);
    // 100 packets at once: 42 fit (40 waiting for the decoder, 2 in the playback queue) behind
    // the one that starts playing now.
    for p in &packets {
        h.device.handle(now, Input::Audio(p));
    }
    let s = &h.device.speech_log().sessions[0];
    assert_eq!(s.counts.received, 100);
    assert_eq!(s.counts.decoded, 43);
    assert_eq!(s.counts.dropped_queue_full, 57);
}

#[test]
fn undecodable_packets_are_dropped_without_sound_or_panic() {
    let mut h = booted(BREAD);
    let now = h.now();
    h.device.handle(now, Input::Json(br#"{"type":"tts","state":"start"}"#));
    h.run_until(now);
    for junk in [&b""[..], &[0xff; 7], &[0x08, 0x00], &[0xfc; 1275]] {
        h.device.handle(now, Input::Audio(junk));
    }
    let s = &h.device.speech_log().sessions[0];
    assert_eq!(s.counts.received, 4);
    assert!(s.counts.dropped_undecodable >= 1, "{:?}", s.counts);
    assert_eq!(s.counts.decoded + s.counts.dropped_undecodable, 4);
}

#[test]
fn tts_stop_without_start_and_sentence_without_text_change_nothing() {
    let mut h = booted(BREAD);
    let now = h.now();
    h.device.handle(now, Input::Json(br#"{"type":"tts","state":"stop"}"#));
    h.device
        .handle(now, Input::Json(br#"{"type":"tts","state":"sentence_start"}"#));
    h.device
        .handle(now, Input::Json(br#"{"type":"tts","state":"sentence_start","text":7}"#));
    h.device.handle(now, Input::Json(br#"{"type":"tts"}"#));
    h.run_until_idle().unwrap();
    assert_eq!(h.device.snapshot().state, Some(DeviceState::Idle));
    assert!(h.device.speech_log().sessions.is_empty());
}

mod loopback_turns {
    use super::*;
    use serde_json::json;
    use xiaozhi_sim::loopback::Loopback;

    fn paired(yaml: &str) -> Loopback {
        let mut lb = xinnan_pair(yaml);
        let now = lb.now();
        lb.device.toggle_chat(now);
        lb.run_until(now + SimDuration::from_secs(3)).unwrap();
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
        lb
    }

    use common::{reply, utter};

    #[test]
    fn a_voice_turn_with_xinnan_py_hears_its_reply_9_7_db_quieter_after_set_volume_40() {
        let mut lb = paired(BREAD);
        lb.call("self.audio_speaker.set_volume", json!({"volume": 70}));
        utter(&mut lb);
        assert_eq!(
            lb.device.snapshot().state,
            Some(DeviceState::Speaking),
            "tts start followed the stt echo"
        );
        let before = reply(&mut lb, "好的");
        assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
        utter(&mut lb);
        lb.call("self.audio_speaker.set_volume", json!({"volume": 40}));
        let t = lb.now() + SimDuration::from_millis(200);
        lb.run_until(t).unwrap();
        let after = reply(&mut lb, "音量已经调小了");
        let change = after - before;
        assert!((change + 9.7).abs() <= 0.1, "change {change:.2} dB");
        let r = lb.reports().pop().unwrap();
        let v = &r.voice;
        assert_eq!(v.utterances.len(), 2);
        assert!(
            v.utterances.iter().all(|u| (u.voice_ms - 2000.0).abs() <= 180.0),
            "{:?}",
            v.utterances
        );
        assert_eq!(v.spoken.len(), 2);
        // listen start after every tts stop (auto mode), plus the first one.
        assert_eq!(
            v.listen.iter().filter(|l| *l == "start auto").count(),
            3,
            "{:?}",
            v.listen
        );
        assert!(v.frames_in > 100);
        // Listening to silence again: DTX packets, and no encoder kept (it is made for speech).
        assert!(lb.device.snapshot().mic_packets_sent > 100);
        assert!(!lb.device.snapshot().encoder_allocated);
    }
}

mod hostile_frames {
    use super::*;
    use xiaozhi_sim::voice::frame::pack;

    fn ws_device(version: i32) -> Device {
        let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
        let mut d = Device::new(Arc::new(spec), ws_world(version), 11);
        d.power_on(SimTime::ZERO);
        d.run_until(SimTime::from_millis(1000));
        d
    }

    #[test]
    fn binary_frames_before_any_hello_are_dropped_as_not_speaking() {
        let mut d = ws_device(1);
        let p = synthesize(&Timbre::default(), SimDuration::from_millis(120), 24_000);
        for f in &p {
            d.handle(SimTime::from_millis(1000), Input::WsBinary(f));
        }
        assert_eq!(d.speech_log().outside.dropped_wrong_state, 2);
        assert_eq!(d.boots(), 1);
    }

    #[test]
    fn a_header_that_announces_more_than_the_frame_is_an_overread_or_the_firmwares_bad_alloc() {
        let mut d = ws_device(2);
        let now = SimTime::from_millis(1000);
        let mut f = pack(2, b"abc", 0);
        f[15] = 40; // announces 40 bytes, carries 3
        d.handle(now, Input::WsBinary(&f));
        assert_eq!(d.speech_log().outside.overread, 1);
        assert_eq!(d.boots(), 1, "an over-read is not a crash");
        let mut v3 = pack(3, b"abc", 0);
        v3[2] = 0xff; // v3 size field on a v2 device: read as part of a v2 header
        d.handle(now, Input::WsBinary(&v3));
        assert_eq!(d.boots(), 1);
        f[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        d.handle(now, Input::WsBinary(&f));
        let events = d.drain_events();
        assert!(
            events.iter().any(
                |e| matches!(&e.kind, xiaozhi_sim::trace::Event::Panicked { reason } if reason.contains("bad_alloc"))
            ),
            "a 4 GiB payload is the firmware's std::bad_alloc"
        );
        d.run_until(SimTime::from_millis(10_000));
        assert_eq!(d.boots(), 2, "and the device reboots");
    }
}

#[test]
fn the_loopback_voice_turn_is_the_same_twice() {
    fn once() -> (String, String) {
        let mut lb = xinnan_pair(BREAD);
        let now = lb.now();
        lb.device.toggle_chat(now);
        lb.run_until(now + SimDuration::from_secs(3)).unwrap();
        let pcm = Timbre::default().render(SimDuration::from_secs(2), 16_000);
        let now = lb.now();
        lb.device.say(now, &pcm);
        lb.run_until(now + SimDuration::from_secs(3)).unwrap();
        lb.call("self.audio_speaker.set_volume", serde_json::json!({"volume": 40}));
        let now = lb.now();
        let s = lb.session().unwrap();
        s.speak(now, "音量已经调小了", &Timbre::default(), SimDuration::from_secs(2));
        s.end_turn(now);
        let t = lb.now() + SimDuration::from_secs(4);
        lb.run_until(t).unwrap();
        let report = serde_json::to_string(&lb.reports()).unwrap();
        let speech = format!("{:?}", lb.device.speech_log());
        (report, speech)
    }
    let a = once();
    let b = once();
    assert!(
        a.0.contains("音量已经调小了") || a.0.contains("\\u97f3"),
        "the turn happened"
    );
    assert_eq!(a, b, "same inputs and seed, same bytes");
}

#[test]
fn speech_queued_right_after_power_on_is_not_mistaken_for_a_reboot() {
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut h = Harness::new(Device::new(Arc::new(spec), WorldSpec::conformance(), 7));
    h.power_on();
    let now = h.now();
    h.agenda.start_turn(now + SimDuration::from_millis(1000));
    h.agenda.sentence(
        now + SimDuration::from_millis(1200),
        "早",
        synthesize(&Timbre::default(), SimDuration::from_secs(1), 24_000),
    );
    h.agenda.stop_turn(now);
    h.run_until(now + SimDuration::from_secs(4));
    let s = &h.device.speech_log().sessions;
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].counts.dropped(), 0, "{:?}", s[0].counts);
    assert!(s[0].counts.decoded > 10);
}
