//! From `true` to sound pressure: the worked examples of docs/reference/acoustics.md §5 come out of the model
//! through the real MCP path (a `tools/call` on the receive task, the callback on the main task,
//! then a probe through the audio chain), and the gaps between `true`, readback and what is
//! heard show up where the firmware puts them.

use std::path::Path;
use std::sync::Arc;

use xiaozhi_sim::audio::measure::{Measurement, perceived_change};
use xiaozhi_sim::audio::source::Source;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::fault::Fault;
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::world::WorldSpec;

fn spec_text(id: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("boards")
            .join(format!("{id}.yaml")),
    )
    .unwrap()
}

fn boot_text(text: &str) -> Harness {
    let spec = Arc::new(BoardSpec::from_yaml("board.yaml", text).unwrap());
    let mut h = Harness::new(Device::new(spec, WorldSpec::conformance(), 3));
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    h.run_until_idle().unwrap();
    h
}

fn boot(id: &str) -> Harness {
    boot_text(&spec_text(id))
}

fn set_volume(h: &mut Harness, v: i32) -> String {
    let msg = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"self.audio_speaker.set_volume","arguments":{{"volume":{v}}}}}}}"#
    );
    h.deliver(msg.as_bytes());
    h.run_until_idle().unwrap();
    h.take_outputs()
        .into_iter()
        .filter_map(|o| o.mcp().map(|(p, _)| String::from_utf8(p.to_vec()).unwrap()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn readback(h: &Harness) -> i32 {
    h.device.snapshot().volume.unwrap()
}

fn probe(h: &mut Harness) -> Measurement {
    h.sleep(SimDuration::from_millis(200));
    h.play_and_measure(Source::probe(1000.0, -6.0), SimDuration::from_millis(1150), false)
        .unwrap()
        .measurement
}

fn close(actual: Option<f64>, expected: f64) -> bool {
    actual.is_some_and(|a| (a - expected).abs() <= 0.05)
}

#[test]
fn bread_board_worked_examples_through_mcp() {
    for (v, i2s, spl) in [
        (70, -12.20, 72.9),
        (50, -18.04, 67.0),
        (40, -21.92, 63.2),
        (10, -46.00, 39.1),
    ] {
        let mut h = boot("bread-compact-wifi");
        assert!(set_volume(&mut h, v).contains(r#""text":"true""#));
        let m = probe(&mut h);
        assert!(close(m.i2s_dbfs, i2s), "v={v}: I2S {:?}", m.i2s_dbfs);
        assert!(close(m.spl_db, spl), "v={v}: SPL {:?}", m.spl_db);
    }
}

#[test]
fn volume_zero_is_digital_silence_until_a_reboot_brings_back_ten() {
    let mut h = boot("bread-compact-wifi");
    assert!(set_volume(&mut h, 0).contains(r#""text":"true""#));
    assert_eq!(readback(&h), 0);
    let m = probe(&mut h);
    assert_eq!((m.i2s_dbfs, m.spl_db, m.verdict.name()), (None, None, "silent"));
    assert_eq!(m.i2s_running, 1.0, "the I2S is clocked: it carries zeros");
    h.deliver(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"self.reboot"}}"#);
    h.run_until_idle().unwrap();
    assert_eq!(readback(&h), 10);
    let m = probe(&mut h);
    assert!(close(m.spl_db, 39.1), "{:?}", m.spl_db);
    assert!(m.verdict.is_audible());
}

#[test]
fn es8311_board_register_and_worked_examples() {
    let mut h = boot("waveshare/esp32-s3-audio-board");
    set_volume(&mut h, 70);
    assert_eq!(
        h.device.audio_log().changes.iter().rev().find_map(|(_, c)| match c {
            xiaozhi_sim::audio::AudioChange::Register32(r) => Some(*r),
            _ => None,
        }),
        Some(98 + 70)
    );
    let m70 = probe(&mut h);
    assert!(close(m70.spl_db, 66.6), "{:?}", m70.spl_db);
    set_volume(&mut h, 40);
    let m40 = probe(&mut h);
    assert!(close(m40.spl_db, 51.6), "{:?}", m40.spl_db);
    assert_eq!(m40.codec_reg32, Some(98 + 40));
    // Same call, same `true`, different laws: −15.0 dB here against −9.7 dB on the bread board.
    assert!(((m40.spl_db.unwrap() - m70.spl_db.unwrap()) + 15.0).abs() < 0.05);
    let mut b = boot("bread-compact-wifi");
    set_volume(&mut b, 70);
    let b70 = probe(&mut b);
    set_volume(&mut b, 40);
    let b40 = probe(&mut b);
    assert!(((b40.spl_db.unwrap() - b70.spl_db.unwrap()) + 9.7).abs() < 0.05);
}

#[test]
fn with_the_amplifier_shut_down_true_and_readback_hide_the_silence() {
    let mut h = boot("bread-compact-wifi");
    let now = h.now();
    h.device.set_fault(Fault::AmpShutdown, now, true);
    assert!(set_volume(&mut h, 40).contains(r#""text":"true""#));
    assert_eq!(readback(&h), 40);
    let m = probe(&mut h);
    assert!(m.i2s_dbfs.is_some(), "the I2S still carries the tone");
    assert_eq!(m.amp_enabled, 0.0);
    assert!(!m.verdict.is_audible());
    assert_eq!(m.combined_db(), m.ambient_dba, "the listener hears only the room");
}

#[test]
fn a_volume_change_while_silent_is_heard_only_when_something_plays() {
    let mut h = boot("bread-compact-wifi");
    let before = h.listen(SimDuration::from_secs(1), false).measurement;
    set_volume(&mut h, 30);
    let after = h.listen(SimDuration::from_secs(1), false).measurement;
    assert_eq!((before.playing, after.playing), (0.0, 0.0));
    assert!(!perceived_change(&before, &after), "set_volume plays nothing");
    let m = probe(&mut h);
    assert!(m.verdict.is_audible());
}

#[test]
fn output_powers_down_after_fifteen_seconds_and_comes_back_for_the_next_sound() {
    let mut h = boot("bread-compact-wifi");
    probe(&mut h);
    assert!(h.device.snapshot().output_enabled);
    h.sleep(SimDuration::from_secs(17));
    assert!(
        !h.device.snapshot().output_enabled,
        "15 s after the last output (1 s check)"
    );
    let quiet = h.listen(SimDuration::from_millis(500), false).measurement;
    assert_eq!(quiet.i2s_running, 0.0);
    let m = probe(&mut h);
    assert_eq!(m.i2s_running, 1.0);
    assert!(m.verdict.is_audible());
}

#[test]
fn es8311_volume_while_closed_reaches_the_chip_only_when_opened_and_pa_follows_output() {
    // A build without a wake word: nothing keeps the codec open while idle.
    let text = spec_text("lckfb/szpi-esp32c3").replace("  codec: es8311 ", "  wake_word: false\n  codec: es8311 ");
    let mut h = boot_text(&text);
    h.sleep(SimDuration::from_secs(17));
    let snap = h.device.snapshot();
    assert!(
        !snap.codec_open && !snap.pa_on,
        "closed and PA low after the idle timeout"
    );
    let writes_before = h.device.audio_log().changes.len();
    assert!(set_volume(&mut h, 40).contains(r#""text":"true""#));
    let new: Vec<_> = h.device.audio_log().changes[writes_before..].to_vec();
    assert!(
        !new.iter()
            .any(|(_, c)| matches!(c, xiaozhi_sim::audio::AudioChange::Register32(_))),
        "no register write while closed: {new:?}"
    );
    let m = probe(&mut h);
    assert_eq!(
        m.codec_reg32,
        Some(98 + 40),
        "written when the device opened for playback"
    );
    assert!(h.device.snapshot().pa_on, "PA follows output enable");
}

#[test]
fn duplex_keeps_tx_on_while_the_mic_runs_and_simplex_does_not() {
    let mut simplex = boot("bread-compact-wifi");
    let mut duplex = boot("bread-compact-wifi-duplex");
    for h in [&mut simplex, &mut duplex] {
        probe(h);
        h.sleep(SimDuration::from_secs(20));
    }
    assert!(!simplex.device.snapshot().output_enabled);
    assert!(duplex.device.snapshot().output_enabled);
    assert_eq!(
        duplex.listen(SimDuration::from_secs(1), false).measurement.i2s_running,
        1.0
    );
}

#[test]
fn the_dummy_codec_succeeds_at_everything_and_plays_nothing() {
    let spec = Arc::new(BoardSpec::from_yaml("b.yaml", &spec_text("bread-compact-wifi")).unwrap());
    let mut h = Harness::new(Device::new(spec, WorldSpec::conformance(), 3));
    let now = h.now();
    h.device.set_fault(Fault::CodecDummy, now, true);
    h.power_on();
    h.run_until_idle().unwrap();
    assert!(set_volume(&mut h, 80).contains(r#""text":"true""#));
    assert_eq!(readback(&h), 80);
    let m = probe(&mut h);
    assert_eq!((m.verdict.name(), m.i2s_running), ("silent", 0.0));
}

/// Issue 40: a device that measures its speech windows as they play and lets the decoded frames
/// go gives every shipped scenario (the demo's among them) the same report, to the byte, as one
/// that keeps its PCM and renders each window afterwards.
#[test]
fn speech_measured_as_it_plays_gives_the_same_reports_on_every_shipped_scenario() {
    use xiaozhi_sim::scenario::runner::RunOptions;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let files = xiaozhi_twin::scenarios::collect(&[dir]).unwrap();
    let mut levels = 0;
    for file in &files {
        let loaded = xiaozhi_twin::scenarios::load(file).unwrap();
        let run = |streaming: bool| {
            let opts = RunOptions {
                measure_as_played: streaming,
                ..RunOptions::default()
            };
            let (report, _) = xiaozhi_twin::scenarios::run_with(&loaded, &opts);
            serde_json::to_string_pretty(&report).unwrap()
        };
        let (stored, streamed) = (run(false), run(true));
        levels += stored.matches("\"spl_db\": ").count();
        if stored != streamed {
            let line = stored
                .lines()
                .zip(streamed.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let show = |s: &str| {
                s.lines()
                    .skip(line.saturating_sub(3))
                    .take(6)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "{}: the report differs at line {line}\nstored:\n{}\nstreamed:\n{}",
                file.display(),
                show(&stored),
                show(&streamed)
            );
        }
    }
    assert!(files.len() >= 40, "{} scenarios", files.len());
    assert!(levels >= 20, "the scenarios measure levels ({levels})");
}
