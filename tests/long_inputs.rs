//! Every duration the twin reads has an upper bound, and beyond it the input is refused in one
//! line with its place and exit status 2, never an abort: a day for any span (scenario waits,
//! script waits, command-line durations), ten minutes for any one sound (a `speak`, a `play`, a
//! `listen`, the natural length of a long text, a WAV file), and WAV files only at sample rates
//! whose resampling stays proportional to its output.

mod common;

use std::process::Output;

use proptest::prelude::*;
use xiaozhi_sim::time::{MAX_SPAN, parse_duration};

/// Refused as unusable input: exit 2, nothing on stdout, a `file:line:col` (or the flag) named
/// in the one-line error, and `needle` in it.
fn refused(out: &Output, place: &str, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status (134 would be an abort): {err}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains(place), "{place} named in: {err}");
    assert!(err.contains(needle), "{needle} in: {err}");
    // One line (clap adds its usual "For more information, try '--help'." hint to flag errors).
    let lines = err
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"));
    assert_eq!(lines.count(), 1, "one line: {err}");
}

fn scenario(name: &str, steps: &str) -> std::path::PathBuf {
    common::scratch_file(
        "long-inputs",
        name,
        format!("name: {name}\nboard: bread-compact-wifi\nsteps:\n{steps}").as_bytes(),
    )
}

#[test]
fn a_speech_for_a_hundred_thousand_seconds_is_refused_at_its_line() {
    let s = scenario(
        "speak-long.yaml",
        "  - press: { button: boot }\n  - speak: { text: hi, for: 100000s }\n",
    );
    let out = common::twin(&["run", s.to_str().unwrap()]);
    refused(&out, "speak-long.yaml:5:29", "longer than a day");
}

#[test]
fn a_speech_or_a_probe_longer_than_ten_minutes_is_refused() {
    for (name, step, line) in [
        ("speak-11m.yaml", "  - speak: { text: hi, for: 11m }\n", 4),
        ("play-11m.yaml", "  - play: { for: 11m }\n", 4),
        ("listen-11m.yaml", "  - listen: { for: 601s }\n", 4),
    ] {
        let s = scenario(name, step);
        let out = common::twin(&["run", s.to_str().unwrap()]);
        refused(&out, &format!("{name}:{line}:"), "the twin makes in one sound");
    }
}

#[test]
fn a_text_too_long_to_say_in_ten_minutes_is_refused_unless_it_has_a_length() {
    let text = "字".repeat(2401);
    let s = scenario("speak-text.yaml", &format!("  - speak: {{ text: {text} }}\n"));
    let out = common::twin(&["run", s.to_str().unwrap()]);
    refused(&out, "speak-text.yaml:4:", "2401 characters");
    let s = scenario(
        "speak-text-for.yaml",
        &format!("  - speak: {{ text: {text}, for: 2s }}\n"),
    );
    let out = common::twin(&["run", s.to_str().unwrap(), "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_scenario_wait_longer_than_a_day_is_refused() {
    let s = scenario("wait-long.yaml", "  - wait: 25h\n");
    let out = common::twin(&["run", s.to_str().unwrap()]);
    refused(&out, "wait-long.yaml:4:", "longer than a day");
}

#[test]
fn a_backend_script_speech_longer_than_ten_minutes_is_refused_at_its_column() {
    let script = common::scratch_file(
        "long-inputs",
        "long.script",
        b"await utterance\nspeak \"hi\" for 100000s\n",
    );
    let out = common::twin(&[
        "fleet",
        "--voice",
        "--devices",
        "1",
        "--script",
        script.to_str().unwrap(),
    ]);
    refused(&out, "long.script:2:16", "longer than a day");
    let script = common::scratch_file("long-inputs", "long2.script", b"speak \"hi\" for 11m\n");
    let out = common::twin(&[
        "fleet",
        "--voice",
        "--devices",
        "1",
        "--script",
        script.to_str().unwrap(),
    ]);
    refused(&out, "long2.script:1:16", "the twin makes in one sound");
    let text = format!("speak \"{}\"\n", "x".repeat(2401));
    let script = common::scratch_file("long-inputs", "long3.script", text.as_bytes());
    let out = common::twin(&[
        "fleet",
        "--voice",
        "--devices",
        "1",
        "--script",
        script.to_str().unwrap(),
    ]);
    refused(&out, "long3.script:1:", "2401 characters");
}

#[test]
fn a_connect_script_wait_longer_than_a_day_is_refused_before_dialling() {
    let script = common::scratch_file("long-inputs", "user.script", b"wait 2s\nwait 25h\n");
    let out = common::twin(&[
        "connect",
        "--board",
        "bread-compact-wifi",
        "--url",
        "ws://127.0.0.1:9/",
        "--script",
        script.to_str().unwrap(),
    ]);
    refused(&out, "user.script:2:", "longer than a day");
}

#[test]
fn command_line_durations_longer_than_a_day_are_refused() {
    let out = common::twin(&["fleet", "--devices", "1", "--duration", "100000s"]);
    refused(&out, "--duration", "longer than a day");
    let out = common::twin(&[
        "connect",
        "--board",
        "bread-compact-wifi",
        "--url",
        "ws://127.0.0.1:9/",
        "--duration",
        "25h",
    ]);
    refused(&out, "--duration", "longer than a day");
}

#[test]
fn a_ramp_that_is_not_a_positive_finite_rate_is_refused() {
    for bad in ["0", "-5", "NaN", "inf", "1e300", "fast"] {
        let out = common::twin(&["fleet", "--voice", "--devices", "1", "--ramp", bad]);
        refused(&out, "--ramp", "devices per second");
    }
}

/// A WAV header at `rate` Hz with `samples` zero samples.
fn wav(rate: u32, samples: u32) -> Vec<u8> {
    let data = samples * 2;
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&(rate * 2).to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data.to_le_bytes());
    h.resize(h.len() + data as usize, 0);
    h
}

#[test]
fn a_wav_at_one_hertz_is_refused_instead_of_resampled_to_ten_minutes() {
    let file = common::scratch_file("long-inputs", "one-hertz.wav", &wav(1, 1000));
    let out = common::twin(&[
        "fleet",
        "--voice",
        "--devices",
        "1",
        "--utterance",
        file.to_str().unwrap(),
    ]);
    refused(&out, "one-hertz.wav", "1 Hz");
    let script = common::scratch_file(
        "long-inputs",
        "say.script",
        format!("say {}\n", file.to_str().unwrap()).as_bytes(),
    );
    let out = common::twin(&[
        "connect",
        "--board",
        "bread-compact-wifi",
        "--url",
        "ws://127.0.0.1:9/",
        "--script",
        script.to_str().unwrap(),
    ]);
    refused(&out, "say.script:1:", "1 Hz");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whatever the text, parsing a duration never panics, and what it accepts is at most a day.
    #[test]
    fn any_duration_text_parses_to_at_most_a_day_or_an_error(
        number in prop_oneof![
            "[0-9]{1,30}",
            "[0-9]{1,20}\\.[0-9]{0,20}",
            "[0-9.e+-]{1,12}",
        ],
        unit in prop_oneof![Just("us"), Just("ms"), Just("s"), Just("m"), Just("min"), Just("h"), Just(""), Just("parsec")],
    ) {
        if let Ok(d) = parse_duration(&format!("{number}{unit}")) {
            prop_assert!(d <= MAX_SPAN);
        }
    }
}
