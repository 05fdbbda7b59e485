//! The voice path per firmware version (docs/reference/voice.md §7): what a `tts stop` sent
//! with the last packet leaves of the speech, whether the main task waits for the tail, what an
//! abort does to the speech still queued, and a wake word while speaking.

use std::sync::Arc;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState, Output};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::voice::log::Counts;
use xiaozhi_sim::voice::speak::{STOP_AFTER, Timbre, llm_message, synthesize_text};
use xiaozhi_sim::world::WorldSpec;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");

/// The bread board on `firmware`, on the direct link, booted and quiet.
fn device(firmware: &str) -> Harness {
    let spec = BoardSpec::from_yaml("b.yaml", BREAD)
        .unwrap()
        .with_firmware(firmware)
        .unwrap();
    let mut h = Harness::new(Device::new(Arc::new(spec), WorldSpec::conformance(), 3));
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    h
}

/// The backend speaks 1.2 s (20 packets, paced as xiaozhi-esp32-server) and sends `tts stop`
/// `stop_after` after the last packet; the device runs 3 s on. The session's counts.
fn speak(h: &mut Harness, stop_after: SimDuration) -> Counts {
    let now = h.now();
    let packets = synthesize_text(&Timbre::default(), "最后几个字", SimDuration::from_millis(1200), 24_000);
    assert_eq!(packets.len(), 20);
    h.agenda.start_turn(now);
    h.agenda.message(now, llm_message("happy", "direct"));
    h.agenda
        .sentence(now + SimDuration::from_millis(200), "最后几个字", packets);
    h.agenda.stop_turn_after(now, stop_after);
    h.sleep(SimDuration::from_secs(3));
    h.device.speech_log().sessions.last().unwrap().counts.clone()
}

/// The backend opens a turn of 4 s of speech (no stop yet); the device runs `ms` into it.
fn long_turn(h: &mut Harness, ms: u64) {
    let now = h.now();
    let packets = synthesize_text(&Timbre::default(), "很长", SimDuration::from_secs(4), 24_000);
    h.agenda.start_turn(now);
    h.agenda.sentence(now + SimDuration::from_millis(200), "很长", packets);
    h.sleep(SimDuration::from_millis(ms));
}

/// The `listen` texts the device sent since the last call.
fn listens(h: &mut Harness) -> Vec<String> {
    h.take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Control { text, .. } => Some(String::from_utf8_lossy(&text).into_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_early_tts_stop_cuts_the_last_frames_only_on_1_7_7_and_1_8_0_to_2_1_0() {
    let mut played = Vec::new();
    for v in ["1.7.5", "1.7.7", "1.8.6", "2.1.0", "2.2.2", "2.3.0", "2.4.2"] {
        let mut h = device(v);
        let c = speak(&mut h, SimDuration::ZERO);
        assert_eq!((c.received, c.decoded), (20, 20), "{v}");
        assert_eq!(c.played() + c.discarded, 20, "{v}");
        played.push((v, c.played()));
        assert_eq!(h.device.snapshot().state, Some(DeviceState::Listening), "{v}");
    }
    assert_eq!(
        played,
        [
            ("1.7.5", 20),
            ("1.7.7", 16),
            ("1.8.6", 15),
            ("2.1.0", 15),
            ("2.2.2", 20),
            ("2.3.0", 20),
            ("2.4.2", 20)
        ],
        "frames heard of 20 when tts stop comes with the last packet"
    );
}

#[test]
fn with_the_servers_420_ms_every_version_plays_every_frame() {
    for v in ["1.7.5", "1.7.7", "1.8.6", "2.1.0", "2.2.2", "2.4.2"] {
        let mut h = device(v);
        let c = speak(&mut h, STOP_AFTER);
        assert_eq!(c.played(), 20, "{v}: {c:?}");
    }
}

#[test]
fn the_tail_plays_past_the_stop_from_2_2_2_and_is_cut_at_it_on_2_1_0() {
    // When the session's sound ends against when its tts stop arrived.
    let mut at = Vec::new();
    for v in ["2.1.0", "2.2.2", "2.4.2"] {
        let mut h = device(v);
        let _ = listens(&mut h);
        speak(&mut h, SimDuration::ZERO);
        let log = h.device.speech_log().sessions.last().unwrap().clone();
        at.push((v, log.stopped.unwrap(), log.window.unwrap().end));
        assert!(listens(&mut h).iter().any(|t| t.contains(r#""state":"start""#)), "{v}");
    }
    let (_, stop_210, end_210) = at[0];
    assert!(
        end_210 <= stop_210 + SimDuration::from_millis(60),
        "2.1.0 cut at the stop"
    );
    for (v, stopped, end) in &at[1..] {
        assert!(
            *end > *stopped + SimDuration::from_millis(200),
            "{v}: the tail plays past the stop"
        );
    }
}

#[test]
fn on_2_2_2_the_main_task_is_blocked_while_the_tail_plays_and_on_2_4_2_it_is_not() {
    let wait_for_reply = |v: &str| -> SimDuration {
        let mut h = device(v);
        let now = h.now();
        let packets = synthesize_text(&Timbre::default(), "尾巴", SimDuration::from_millis(1200), 24_000);
        h.agenda.start_turn(now);
        h.agenda.sentence(now + SimDuration::from_millis(200), "尾巴", packets);
        h.agenda.stop_turn_after(now, SimDuration::ZERO);
        // Run to just after the stop was handled, then a tools/call arrives.
        let stop_at = h.agenda.last_at().unwrap();
        h.run_until(stop_at + SimDuration::from_millis(5));
        let asked = h.now();
        h.deliver(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"self.get_device_status","arguments":{}}}"#);
        h.sleep(SimDuration::from_secs(3));
        let replied = h
            .take_outputs()
            .into_iter()
            .find_map(|o| match o {
                Output::Mcp { at, payload } if String::from_utf8_lossy(&payload).contains("\"id\":7") => Some(at),
                _ => None,
            })
            .unwrap();
        replied.saturating_since(asked)
    };
    let blocked = wait_for_reply("2.2.2");
    let free = wait_for_reply("2.4.2");
    assert!(free < SimDuration::from_millis(20), "2.4.2 answers at once: {free}");
    assert!(
        blocked > SimDuration::from_millis(200),
        "2.2.2 answers after the tail: {blocked}"
    );
}

#[test]
fn on_1_7_x_an_abort_silences_the_speech_at_once_and_later_on_it_plays_on() {
    for (v, silenced) in [("1.7.5", true), ("1.8.6", false), ("2.4.2", false)] {
        let mut h = device(v);
        long_turn(&mut h, 1500);
        // The backend stops sending and never answers the abort (no tts stop): what the device
        // already holds is all there is. The user clicks BOOT: abort.
        h.agenda = xiaozhi_sim::voice::speak::Agenda::new("direct");
        let at = h.now();
        h.device.toggle_chat(at);
        h.sleep(SimDuration::from_secs(5));
        let s = h.device.speech_log().sessions.last().unwrap().clone();
        let end = s.window.unwrap().end;
        if silenced {
            assert!(
                end <= at + SimDuration::from_millis(80),
                "{v}: silent within a frame: {end} vs {at}"
            );
            assert!(s.counts.discarded > 0, "{v}: {:?}", s.counts);
        } else {
            assert!(
                end > at + SimDuration::from_millis(200),
                "{v}: the queued speech plays on: {end} vs {at}"
            );
        }
    }
}

#[test]
fn a_wake_word_while_speaking_only_aborts_before_2_2_3() {
    for (v, leaves) in [("2.2.2", false), ("2.2.3", true), ("2.4.2", true)] {
        let mut h = device(v);
        long_turn(&mut h, 1000);
        let _ = listens(&mut h);
        // A backend that does not answer the abort (the agenda is emptied, no stop sent).
        h.agenda = xiaozhi_sim::voice::speak::Agenda::new("direct");
        let at = h.now();
        h.device.wake_word(at, "你好小智");
        h.run_until(at + SimDuration::from_millis(10));
        let sent = listens(&mut h);
        assert!(sent.iter().any(|t| t.contains("wake_word_detected")), "{v}: {sent:?}");
        let state = h.device.snapshot().state;
        let want = if leaves {
            DeviceState::Listening
        } else {
            DeviceState::Speaking
        };
        assert_eq!(state, Some(want), "{v}");
    }
}
