//! `xiaozhi-twin fleet --voice` against its built-in backend on loopback: devices that talk,
//! turns counted and timed, failures by reason when the backend misbehaves, shards that merge
//! into one run's counts, the knee search, and the bad inputs (one line, exit 2).
//!
//! Small fleets with a short utterance and a short reply keep each run to a few seconds; the
//! 1,000 / 5,000-device figures are in BENCHMARKS.md ("Voice fleet").

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// A 16 kHz mono WAV of `secs` of a voiced tone (every 60 ms frame is voice).
fn wav(name: &str, secs: f64) -> PathBuf {
    let p = tmp(name);
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&p, spec).unwrap();
    for i in 0..(16_000.0 * secs) as usize {
        let t = i as f64 / 16_000.0;
        let x = 8000.0 * (2.0 * std::f64::consts::PI * 220.0 * t).sin()
            + 3000.0 * (2.0 * std::f64::consts::PI * 660.0 * t).sin();
        w.write_sample(x as i16).unwrap();
    }
    w.finalize().unwrap();
    p
}

/// A short turn: the backend hears the utterance and says one 900 ms sentence (15 frames).
fn script() -> PathBuf {
    let p = tmp("fleet-voice-script.txt");
    std::fs::write(&p, "await utterance\nspeak \"好的\" for 900ms\n").unwrap();
    p
}

fn twin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args(args)
        .output()
        .unwrap()
}

/// `fleet --voice` with a 1.2 s utterance (the server recognises only more than 15 frames) and the
/// short script, then `extra`.
fn short_fleet(extra: &[&str]) -> Output {
    let utt = wav("fleet-voice-utterance.wav", 1.2);
    let script = script();
    let mut args = vec![
        "fleet",
        "--voice",
        "--quiet",
        "--utterance",
        utt.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--think",
        "200ms",
        "--duration",
        "60s",
    ];
    args.extend_from_slice(extra);
    twin(&args)
}

/// Runs a small voice fleet; returns (exit code, summary).
fn voice_fleet(name: &str, extra: &[&str]) -> (i32, Value) {
    let json = tmp(&format!("fleet-voice-{name}.json"));
    let _ = std::fs::remove_file(&json);
    let mut args = vec!["--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = short_fleet(&args);
    let code = out.status.code().unwrap_or(-1);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no summary ({code}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, serde_json::from_str(&text).unwrap())
}

/// The HdrHistogram a summary carries for one phase (V2 + DEFLATE, base64).
fn hdr(latency: &Value) -> hdrhistogram::Histogram<u64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(latency["hdr"].as_str().unwrap())
        .unwrap();
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn talking_devices_complete_every_turn_and_the_summary_adds_up() {
    let (code, s) = voice_fleet("ok", &["--devices", "12", "--turns", "2"]);
    assert_eq!(code, 0, "{s:#}");
    let t = &s["turns"];
    assert_eq!(
        (u(&t["planned"]), u(&t["started"]), u(&t["completed"]), u(&t["failed"])),
        (24, 24, 24, 0),
        "{s:#}"
    );
    assert_eq!(u(&s["devices_connected"]), 12);
    // Every completed turn has its three latencies; the reply is 900 ms = 15 frames.
    for phase in ["stt", "first_audio", "tts_stop"] {
        assert_eq!(u(&s["latency"][phase]["count"]), 24, "{phase}: {s:#}");
    }
    assert_eq!(u(&s["pacing"]["tts_frames_received"]), 24 * 15);
    assert!(
        s["pacing"]["frames_dropped_by_devices"].as_object().unwrap().is_empty(),
        "{s:#}"
    );
    // The backend answers by the server's VAD rule (a window of 5 chunks of 512 samples, 3 voiced,
    // then 200 ms; docs/reference/voice.md §5.1): 4 to 6 frames after the last voiced one, so
    // first audio comes 240–360 ms of microphone time after the end of speech (a few ms less when
    // a busy thread sent that last frame late).
    let fa = &s["latency"]["first_audio"];
    let p50 = fa["p50_ms"].as_f64().unwrap();
    assert!((220.0..=420.0).contains(&p50), "{fa}");
    assert!(s["latency"]["tts_stop"]["p50_ms"].as_f64().unwrap() > fa["p50_ms"].as_f64().unwrap() + 500.0);
    // A custom script: the designed delay is not known, so nothing is claimed for the twin.
    assert_eq!(u(&s["latency"]["twin_added_first_audio"]["count"]), 0);
    // Decoded and heard at the listener.
    let l = &s["loudness"];
    assert_eq!((u(&l["replies_measured"]), u(&l["not_audible"])), (24, 0), "{l}");
    assert!(l["spl_db_mean"].as_f64().unwrap() > 40.0, "{l}");
    // Distinct audio (the default): each device says its own variation of the utterance.
    assert_eq!(s["run"]["audio"], "distinct", "{s:#}");
}

/// The share of Opus steps the codec memo looked up rather than computed.
fn memo_share(s: &Value) -> f64 {
    let (hits, computed) = (u(&s["twin"]["codec_memo_hits"]), u(&s["twin"]["codec_memo_computed"]));
    hits as f64 / (hits + computed).max(1) as f64
}

#[test]
fn each_device_hears_and_says_its_own_audio_unless_told_the_same() {
    // The default turn (utterance, reply with {device} and {turn}) on 16 devices, both ways.
    let run = |audio: &str, extra: &[&str]| {
        let json = tmp(&format!("fleet-voice-audio-{audio}.json"));
        let _ = std::fs::remove_file(&json);
        let mut args = vec!["fleet", "--voice", "--quiet", "--devices", "16", "--ramp", "50"];
        args.extend_from_slice(&["--duration", "90s", "--json", json.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = twin(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(s["run"]["audio"], audio, "{s:#}");
        assert_eq!(u(&s["turns"]["completed"]), 16, "{s:#}");
        s
    };
    let distinct = memo_share(&run("distinct", &[]));
    let same = memo_share(&run("same", &["--same-audio"]));
    assert!(
        distinct < 0.20,
        "distinct audio shared {:.1} % of the Opus work",
        distinct * 100.0
    );
    assert!(same > 0.80, "the same audio shared only {:.1} %", same * 100.0);
}

#[test]
fn decode_none_times_replies_from_toc_bytes_and_measures_no_loudness() {
    let (code, s) = voice_fleet("none", &["--devices", "6", "--decode", "none"]);
    assert_eq!(code, 0, "{s:#}");
    assert_eq!(u(&s["turns"]["completed"]), 6);
    assert_eq!(u(&s["pacing"]["tts_frames_received"]), 6 * 15);
    assert!(s["loudness"].is_null());
    assert_eq!(s["run"]["decode"], "none");
    // Every third device (ids 0 and 3 of 6) decodes and is measured; all are timed.
    let (code, s) = voice_fleet("sample", &["--devices", "6", "--decode", "sample:3"]);
    assert_eq!(code, 0, "{s:#}");
    assert_eq!(u(&s["pacing"]["tts_frames_received"]), 6 * 15);
    assert_eq!(u(&s["loudness"]["replies_measured"]), 2, "{s:#}");
    assert_eq!(s["run"]["decode"], "sample:3");
}

#[test]
fn a_misbehaving_backend_fails_turns_with_their_reason_and_the_fleet_goes_on() {
    for (fault, reason, devices) in [
        ("never-tts-start", "no_tts_start", 4),
        ("stop-mid-reply", "stuck_in_speaking", 4),
        ("flood", "frames_dropped", 4),
        ("close-every:2", "connection_lost", 4),
    ] {
        let (code, s) = voice_fleet(
            fault,
            &[
                "--devices",
                &devices.to_string(),
                "--backend-fault",
                fault,
                "--turn-timeout",
                "2s",
            ],
        );
        let t = &s["turns"];
        assert_eq!(code, 1, "{fault}: {s:#}");
        assert_eq!(u(&t["planned"]), devices, "{fault}");
        assert_eq!(
            u(&t["completed"]) + u(&t["failed"]),
            devices,
            "{fault}: every turn ended: {t}"
        );
        assert!(u(&t["failures"][reason]) >= 1, "{fault}: {t}");
        if fault == "close-every:2" {
            assert_eq!(u(&t["failures"][reason]), 2, "{t}");
            assert_eq!(u(&t["completed"]), 2, "{t}");
        } else {
            assert_eq!(u(&t["failures"][reason]), devices, "{fault}: {t}");
        }
    }
}

#[test]
fn two_shards_merge_into_one_runs_counts_and_histograms() {
    let (c0, s0) = voice_fleet("shard0", &["--devices", "9", "--shard", "0/2"]);
    let (c1, s1) = voice_fleet("shard1", &["--devices", "9", "--shard", "1/2"]);
    let (cw, whole) = voice_fleet("whole", &["--devices", "9"]);
    assert_eq!((c0, c1, cw), (0, 0, 0));
    // Devices 0,2,4,6,8 and 1,3,5,7.
    assert_eq!((u(&s0["devices"]), u(&s1["devices"])), (5, 4));
    let merged = tmp("fleet-voice-merged.json");
    let a = tmp("fleet-voice-shard0.json");
    let b = tmp("fleet-voice-shard1.json");
    let out = twin(&[
        "fleet",
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        merged.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    for key in ["devices", "devices_connected"] {
        assert_eq!(m[key], whole[key], "{key}");
    }
    for key in ["planned", "started", "completed", "failed"] {
        assert_eq!(m["turns"][key], whole["turns"][key], "turns.{key}");
    }
    assert_eq!(
        m["pacing"]["tts_frames_received"],
        whole["pacing"]["tts_frames_received"]
    );
    assert_eq!(m["run"], whole["run"]);
    // Histograms merge exactly: the merged percentiles are those of one histogram holding every
    // sample of both shards (rebuilt here from the shards' own HdrHistogram encodings), and lie
    // between the shards'. (The whole run's latencies differ from the shards' by scheduling
    // noise, being another run in real time; they are compared loosely.)
    for phase in ["stt", "first_audio", "tts_stop"] {
        let (x, y, z, w) = (
            &s0["latency"][phase],
            &s1["latency"][phase],
            &m["latency"][phase],
            &whole["latency"][phase],
        );
        assert_eq!(u(&z["count"]), u(&x["count"]) + u(&y["count"]), "{phase}");
        assert_eq!(z["count"], w["count"], "{phase}");
        let mut union = hdr(x);
        union.add(hdr(y)).unwrap();
        for (p, q) in [("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)] {
            let want = union.value_at_quantile(q) as f64 / 1000.0;
            assert_eq!(z[p].as_f64().unwrap(), want, "{phase} {p}");
            let (a, b) = (x[p].as_f64().unwrap(), y[p].as_f64().unwrap());
            let c = z[p].as_f64().unwrap();
            assert!(c >= a.min(b) && c <= a.max(b), "{phase} {p}: {a} {b} → {c}");
            assert!(
                (c - w[p].as_f64().unwrap()).abs() < 250.0,
                "{phase} {p}: merged {c} vs one run {}",
                w[p]
            );
        }
        assert_eq!(
            z["max_ms"].as_f64().unwrap(),
            union.max() as f64 / 1000.0,
            "{phase} max"
        );
    }
    assert_eq!(m["shards"].as_array().unwrap().len(), 2);
    // One shard alone is refused unless --partial says so.
    let alone = twin(&["fleet", "merge", a.to_str().unwrap()]);
    assert_eq!(alone.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("only 1 of 2 shards"));
    let partial = twin(&["fleet", "merge", "--partial", a.to_str().unwrap()]);
    assert_eq!(
        partial.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&partial.stderr)
    );
    // A shard merged twice, and a summary of another run: one line, exit 2.
    let twice = twin(&["fleet", "merge", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("shard 0/2 is already merged"));
    let w = tmp("fleet-voice-whole.json");
    let other = twin(&["fleet", "merge", a.to_str().unwrap(), w.to_str().unwrap()]);
    assert_eq!(other.status.code(), Some(2));
    let e = String::from_utf8_lossy(&other.stderr);
    assert!(
        e.contains("shard 0/1") || e.contains("not a shard of the same run") || e.contains("belongs to a run"),
        "{e}"
    );
}

#[test]
fn the_knee_search_ramps_until_the_slo_breaks_and_draws_the_curve() {
    let svg = tmp("fleet-voice-knee.svg");
    let json = tmp("fleet-voice-knee.json");
    // An SLO every step holds: doubling from 2 stops at --max-devices.
    let out = short_fleet(&[
        "--devices",
        "2",
        "--max-devices",
        "4",
        "--find-capacity",
        "--slo",
        "first_audio_p99<5s,failed<1",
        "--out",
        svg.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let devices: Vec<u64> = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| u(&s["devices"]))
        .collect();
    assert_eq!(devices, vec![2, 4]);
    assert_eq!(
        (c["knee"].as_u64(), c["limited_by"].as_str()),
        (Some(4), Some("max_devices"))
    );
    assert!(text.contains("held up to --max-devices (4)"), "{text}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg") && picture.contains("first audio p99") && picture.contains("knee: 4"),
        "{picture}"
    );
}

#[test]
fn bad_fleet_input_is_one_line_and_exit_2() {
    let not_wav = tmp("fleet-voice-not.wav");
    std::fs::write(&not_wav, "hello").unwrap();
    let junk = tmp("fleet-voice-junk.json");
    std::fs::write(&junk, "{\"format\": \"something else\"}").unwrap();
    let personal = tmp("fleet-voice-personal.txt");
    std::fs::write(&personal, "await utterance\nspeak \"好的 {device}\" for 1s\n").unwrap();
    let personal_at = format!("{}:2", personal.display());
    for (args, says) in [
        (
            vec![
                "fleet",
                "--voice",
                "--same-audio",
                "--script",
                personal.to_str().unwrap(),
            ],
            personal_at.as_str(),
        ),
        (vec!["fleet", "--voice", "--shard", "2/2"], "use i/N with 0 ≤ i < N"),
        (vec!["fleet", "--voice", "--shard", "1/0"], "use i/N"),
        (
            vec!["fleet", "--voice", "--utterance", not_wav.to_str().unwrap()],
            "not a readable WAV file",
        ),
        (
            vec!["fleet", "--voice", "--slo", "first_audio_p99<1s"],
            "--slo is read by --find-capacity only",
        ),
        (
            vec!["fleet", "--voice", "--find-capacity", "--slo", "loudness<3"],
            "unknown metric `loudness`",
        ),
        (
            vec!["fleet", "--voice", "--backend-fault", "close-every:0"],
            "close-every:N (N ≥ 1)",
        ),
        (
            vec!["fleet", "--voice", "--decode", "sample:0"],
            "full, none or sample:N",
        ),
        (vec!["fleet", "--voice", "--decode", "some"], "full, none or sample:N"),
        (
            vec!["fleet", "merge", junk.to_str().unwrap()],
            "not a voice fleet summary",
        ),
        (vec!["fleet", "--turns", "2"], "--voice"),
        (vec!["fleet", "--backend-process"], "--voice"),
        (
            vec!["fleet", "--voice", "--backend-process", "--transport", "mqtt"],
            "--backend-process runs the backend over WebSocket",
        ),
        (vec!["fleet", "--voice", "--turns", "0"], "--turns"),
        (vec!["fleet", "--voice", "--turns", "4000000000"], "--turns"),
        (vec!["fleet", "--voice", "--out", "x.svg"], "--find-capacity"),
        (
            vec![
                "fleet",
                "--voice",
                "--find-capacity",
                "--slo",
                "failed<1",
                "--max-devices",
                "0",
            ],
            "--max-devices",
        ),
    ] {
        let out = twin(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    }
}

#[test]
fn talking_devices_over_mqtt_udp_complete_every_turn_through_the_gateway_stand_in() {
    let args = ["--devices", "12", "--turns", "2", "--transport", "mqtt"];
    let (code, s) = voice_fleet("mqtt-nodelay", &[&args[..], &["--mqtt-nodelay"]].concat());
    assert_eq!(code, 0, "{s:#}");
    let t = &s["turns"];
    assert_eq!(
        (u(&t["planned"]), u(&t["completed"]), u(&t["failed"])),
        (24, 24, 0),
        "{s:#}"
    );
    assert_eq!(u(&s["devices_connected"]), 12);
    assert_eq!(
        u(&s["pacing"]["tts_frames_received"]),
        24 * 15,
        "every datagram of every reply"
    );
    // No loss on loopback: no gap, no refusal, no drop.
    assert!(s["pacing"].get("udp_sequence_gaps").is_none(), "{:#}", s["pacing"]);
    assert!(
        s["pacing"]["frames_dropped_by_devices"].as_object().unwrap().is_empty(),
        "{s:#}"
    );
    let backend = s["run"]["backend"].as_str().unwrap();
    assert!(
        backend.contains("over MQTT + UDP via the gateway stand-in, TCP_NODELAY"),
        "{backend}"
    );
    assert_eq!(
        (u(&s["loudness"]["replies_measured"]), u(&s["loudness"]["not_audible"])),
        (24, 0)
    );
    // With Nagle on, as the real gateway leaves it, this script's `tts start` follows the `stt`
    // at once and waits for the device's ACK: the reply's first frames arrive over UDP first and
    // the firmware, still listening, drops them (6 a turn seen); those turns fail with the reason.
    let (code, s) = voice_fleet("mqtt-nagle", &args);
    assert_eq!(code, 1, "{s:#}");
    let early = u(&s["pacing"]["frames_dropped_by_devices"]["wrong_state"]);
    assert!(early > 0, "{:#}", s["pacing"]);
    assert!(u(&s["turns"]["failures"]["frames_dropped"]) > 0, "{:#}", s["turns"]);
}

#[test]
fn udp_faults_on_a_fleet_show_in_its_udp_counters() {
    let args = [
        "--devices",
        "6",
        "--transport",
        "mqtt",
        "--mqtt-nodelay",
        "--udp-fault",
        "loss:100,duplicate:100,seed:9",
    ];
    let (_, s) = voice_fleet("mqtt-udp-faults", &args);
    let p = &s["pacing"];
    // Loss shows as gaps the firmware accepts; duplicates are refused as old.
    assert!(u(&p["udp_sequence_gaps"]) > 0, "{p:#}");
    assert!(u(&p["frames_dropped_by_devices"]["udp_refused"]) > 0, "{p:#}");
    assert!(
        s["run"]["backend"]
            .as_str()
            .unwrap()
            .contains("UDP loss 100‰ duplicate 100‰"),
        "{:#}",
        s["run"]
    );
}

/// `fleet --voice --quiet ARGS --json FILE`: its output and its summary.
fn fleet_summary(name: &str, args: &[&str]) -> (Output, Value) {
    let json = tmp(&format!("fleet-voice-{name}.json"));
    let _ = std::fs::remove_file(&json);
    let mut all = vec!["fleet", "--voice", "--quiet", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = twin(&all);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|_| panic!("no summary: {}", String::from_utf8_lossy(&out.stderr)));
    (out, serde_json::from_str(&text).unwrap())
}

/// Turns planned, completed and failed.
fn turn_counts(s: &Value) -> (u64, u64, u64) {
    let t = &s["turns"];
    (u(&t["planned"]), u(&t["completed"]), u(&t["failed"]))
}

/// `xiaozhi-twin backend` with no script, in a process of its own, answers every turn as the
/// fleet's built-in backend does (the seed article's turn: set_volume, get_device_status, three
/// seconds of speech), so `fleet --url` against it completes every turn.
#[test]
fn a_backend_without_a_script_in_another_process_answers_every_turn() {
    let mut be = common::listening(&[]);
    let url = format!("ws://127.0.0.1:{}/xiaozhi/v1/", be.port);
    let utt = wav("fleet-voice-standalone.wav", 1.2);
    let utt = utt.to_str().unwrap();
    let (out, s) = fleet_summary(
        "standalone",
        &[
            "--devices",
            "4",
            "--turns",
            "2",
            "--utterance",
            utt,
            "--think",
            "200ms",
            "--url",
            &url,
        ],
    );
    let _ = be.child.kill();
    assert_eq!(out.status.code(), Some(0), "{s:#}");
    assert_eq!(turn_counts(&s), (8, 8, 0), "{s:#}");
    // Discovery's two requests a device, two calls a turn, and 3 s of speech: 50 frames of 60 ms.
    assert_eq!(u(&s["latency"]["mcp_reply"]["count"]), 4 * 2 + 8 * 2, "{s:#}");
    assert_eq!(u(&s["pacing"]["tts_frames_received"]), 8 * 50, "{s:#}");
    assert_eq!(u(&s["loudness"]["not_audible"]), 0, "{s:#}");
    // The twin alone: its cost line claims no backend work.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the twin itself") && !text.contains("backend's work included"),
        "{text}"
    );
    // In one process with the built-in backend, the line says the backend's work is in it.
    let (out, _) = fleet_summary("in-process", &["--devices", "2", "--utterance", utt]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(the built-in backend's work included; the twin alone: --backend-process)"),
        "{text}"
    );
}

/// `--think exp:MEAN`: every turn, the first included, waits a seeded exponential draw; every
/// turn still completes, and the summary says how the fleet was paced.
#[test]
fn exponential_think_times_pace_the_turns_and_the_summary_says_so() {
    let (utt, script) = (wav("fleet-voice-utterance.wav", 1.2), script());
    let args = ["--devices", "4", "--turns", "3", "--think", "exp:400ms", "--utterance"];
    let (out, s) = fleet_summary(
        "think-exp",
        &[
            &args[..],
            &[utt.to_str().unwrap(), "--script", script.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{s:#}");
    assert_eq!(turn_counts(&s), (12, 12, 0), "{s:#}");
    assert_eq!(s["run"]["think"], "exp:400ms", "{:#}", s["run"]);
    assert_eq!(s["run"]["think_s"].as_f64(), Some(0.4), "{:#}", s["run"]);
}

/// `--backend-process`: the fleet starts `xiaozhi-twin backend` in a child process, every turn
/// completes against it, the summary counts the backend's CPU and memory apart from the twin's,
/// the child is gone afterwards, and the capacity table shows both per step.
#[test]
fn a_backend_process_of_the_fleets_own_is_counted_apart_from_the_twin() {
    let (utt, script) = (wav("fleet-voice-utterance.wav", 1.2), script());
    let (utt, script) = (utt.to_str().unwrap(), script.to_str().unwrap());
    let args = [
        "--devices",
        "3",
        "--turns",
        "2",
        "--think",
        "200ms",
        "--backend-process",
    ];
    let (out, s) = fleet_summary(
        "backend-process",
        &[&args[..], &["--utterance", utt, "--script", script]].concat(),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(turn_counts(&s), (6, 6, 0), "{s:#}");
    let b = &s["backend_process"];
    assert!(b["cpu_s"].as_f64().unwrap() > 0.0, "{b:#}");
    assert!(u(&b["rss_peak_kib"]) > 1024, "{b:#}");
    assert!(
        s["run"]["backend"].as_str().unwrap().starts_with("ws://127.0.0.1:"),
        "{:#}",
        s["run"]
    );
    assert!(
        stdout.contains("the backend ") && stdout.contains("in another process, not counted above"),
        "{stdout}"
    );
    assert!(!stdout.contains("backend's work included"), "{stdout}");
    let pid = stderr
        .split("(pid ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the backend process {pid} was left running"
    );

    let json = tmp("fleet-voice-knee-process.json");
    let out = short_fleet(&[
        "--devices",
        "2",
        "--max-devices",
        "2",
        "--backend-process",
        "--find-capacity",
        "--slo",
        "failed<1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("the twin's CPU is its own (the backend in another process)"),
        "{text}"
    );
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(c["twin_alone"], true, "{c:#}");
    assert!(c["steps"][0]["backend_cpu_s"].as_f64().unwrap() > 0.0, "{c:#}");
}

/// `--web`: the fleet's dashboard serves its page and a sample a second while the fleet runs,
/// and the summary at its end.
#[test]
fn the_web_dashboard_shows_the_fleet_as_it_runs_and_its_summary() {
    use std::io::{BufRead, BufReader};
    let (utt, script) = (wav("fleet-voice-utterance.wav", 1.2), script());
    let mut child = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args([
            "fleet",
            "--voice",
            "--quiet",
            "--devices",
            "3",
            "--turns",
            "2",
            "--think",
            "1s",
        ])
        .args([
            "--utterance",
            utt.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ])
        .args(["--web", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("the dashboard is on ")
                .nth(1)
                .map(|u| u.trim().trim_end_matches('/').to_string())
        })
        .expect("the dashboard's address on stderr");
    std::thread::spawn(move || lines.for_each(drop));
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .new_agent();
    let page = agent
        .get(&format!("{base}/"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        page.contains("xiaozhi-twin fleet") && page.contains("Save report"),
        "{page}"
    );
    let (mut samples, mut last) = (Vec::new(), Value::Null);
    while let Ok(mut r) = agent.get(&format!("{base}/api/samples?since={}", samples.len())).call() {
        let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        samples.extend(v["samples"].as_array().unwrap().iter().cloned());
        last = v;
        if !last["summary"].is_null() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    assert!(child.wait().unwrap().success());
    assert!(samples.len() >= 2, "a sample a second: {samples:?}");
    assert!(samples.iter().any(|s| u(&s["connected"]) == 3), "{samples:?}");
    assert!(
        samples
            .windows(2)
            .all(|w| u(&w[1]["completed"]) >= u(&w[0]["completed"])),
        "{samples:?}"
    );
    assert!(
        last["run"]["title"].as_str().unwrap().starts_with("3 devices"),
        "{last:#}"
    );
    assert_eq!(turn_counts(&last["summary"]), (6, 6, 0), "{last:#}");
}
