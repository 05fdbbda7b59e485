//! The voice path over real loopback sockets, two processes in real time: `connect --script`
//! (a user who opens the channel and speaks a WAV file twice) ↔ `backend` (xinnan-py with a
//! script that awaits each utterance, answers, calls set_volume 40 and says so). The report of
//! `connect` must show the backend's speech decoded and heard, 9.7 dB quieter after the call,
//! listen start after every tts stop, and the claim judged.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::{finish, listening, speechlike_wav};

#[test]
fn connect_script_against_the_twins_backend_hears_the_reply_get_quieter() {
    let dir = common::scratch_dir("voice-wire");
    speechlike_wav(&dir.join("ask.wav"), 2);
    let backend_script = dir.join("backend.txt");
    std::fs::write(
        &backend_script,
        "await utterance\nspeak \"好的，我在听\" for 2s\nwait 1s\nawait utterance\ncall self.audio_speaker.set_volume {\"volume\": 40}\nspeak \"音量已经调小了\" for 2s\n",
    )
    .unwrap();
    let user_script = dir.join("user.txt");
    std::fs::write(
        &user_script,
        "press boot\nwait 2s\nsay ask.wav\nwait 5s\nsay ask.wav\nwait 6s\n",
    )
    .unwrap();
    let report = dir.join("report.json");
    let b = listening(&[
        "--personality",
        "xinnan-py",
        "--script",
        backend_script.to_str().unwrap(),
    ]);
    let child = std::process::Command::new(common::BIN)
        .args([
            "connect",
            "--board",
            "bread-compact-wifi",
            "--duration",
            "19s",
            "--quiet",
        ])
        .arg("--url")
        .arg(format!("ws://127.0.0.1:{}/xiaozhi/v1/", b.port))
        .arg("--script")
        .arg(&user_script)
        .arg("--report")
        .arg(&report)
        .arg("--out")
        .arg(dir.join("out"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _, stderr) = finish(child, Duration::from_secs(40));
    let mut bc = b.child;
    let _ = bc.kill();
    let _ = bc.wait();
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    common::two_turns_heard_quieter_after_set_volume_40(&r, &stderr);
    // `--out` also wrote the screen at each change: the 128x32 OLED, in time order, the turn's
    // changes (idle, connecting, listening, the user's words, speaking, ...) as different pictures.
    let mut frames: Vec<_> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("screen-") && n.ends_with("ms.png"))
        .collect();
    frames.sort();
    assert!(frames.len() >= 6, "{frames:?}");
    let pictures: Vec<Vec<u8>> = frames
        .iter()
        .map(|n| {
            let p = tiny_skia::Pixmap::decode_png(&std::fs::read(dir.join("out").join(n)).unwrap()).unwrap();
            assert_eq!((p.width(), p.height()), (128, 32), "{n}");
            p.data().to_vec()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&Vec<u8>> = pictures.iter().collect();
    assert!(
        distinct.len() >= 4,
        "{} distinct pictures in {frames:?}",
        distinct.len()
    );
    // listen start at the channel's opening and after each tts stop.
    let starts = r["sent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["text"].as_str().unwrap().contains("\"state\":\"start\""))
        .count();
    assert_eq!(starts, 3, "{:#}", r["sent"]);
    assert!(r["microphone"]["packets_sent"].as_u64().unwrap() > 100);
}

#[test]
fn a_bad_script_line_is_file_line_col_and_exit_2_before_dialling() {
    let path = common::scratch_file("voice-wire-bad", "user.txt", b"wait 1s\n  press nowhere\n");
    // Port 9 (discard) is never dialled: the script is refused first.
    let out = common::twin(&[
        "connect",
        "--board",
        "bread-compact-wifi",
        "--url",
        "ws://127.0.0.1:9/",
        "--script",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("user.txt:2:9: the board has no button `nowhere`"), "{err}");
    let wav = common::scratch_file("voice-wire-bad", "not.wav", b"RIFF nonsense");
    let script = common::scratch_file("voice-wire-bad", "say.txt", b"say not.wav\n");
    let out = common::twin(&[
        "connect",
        "--board",
        "bread-compact-wifi",
        "--url",
        "ws://127.0.0.1:9/",
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("say.txt:1:5:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = wav;
}

/// A WAV header claiming `secs` of 16 kHz mono, its data a sparse run of zeros.
fn sparse_wav(path: &std::path::Path, secs: u32) {
    let data = 16_000 * 2 * secs;
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&16_000u32.to_le_bytes());
    h.extend_from_slice(&32_000u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data.to_le_bytes());
    std::fs::write(path, &h).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(h.len() as u64 + u64::from(data)).unwrap();
}

#[test]
fn a_zero_second_wav_says_nothing_and_an_hour_long_one_is_cut_at_ten_minutes() {
    let dir = common::scratch_dir("voice-wire-wavs");
    sparse_wav(&dir.join("hour.wav"), 3600);
    sparse_wav(&dir.join("zero.wav"), 0);
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        "name: long and empty recordings\nboard: bread-compact-wifi\nsteps:\n  - press: { button: boot }\n  - say: { wav: zero.wav }\n  - say: { wav: hour.wav }\n  - speak: { text: 还在, for: 1s, expect: { heard: { audible: true } } }\n",
    )
    .unwrap();
    let json = dir.join("r.json");
    let out = common::twin(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let steps = r[0]["steps"].as_array().unwrap();
    let said: Vec<&str> = steps
        .iter()
        .filter(|s| s["kind"] == "say")
        .map(|s| s["summary"].as_str().unwrap())
        .collect();
    assert!(said[0].contains("says 0"), "{said:?}");
    assert!(
        said[1].contains("600"),
        "an hour-long file is cut at ten minutes: {said:?}"
    );
}
