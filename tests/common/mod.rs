//! Helpers shared by the integration tests (each test file includes this with `mod common;`, so
//! a file uses only some of them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The built binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_xiaozhi-twin");

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary to completion (no backtraces in its stderr).
pub fn twin(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("binary runs")
}

/// Writes `content` to `<target tmp>/<area>/<name>` and returns the path.
pub fn scratch_file(area: &str, name: &str, content: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

/// A fresh, empty directory `<target tmp>/<name>`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `backend` process listening on loopback.
pub struct Backend {
    pub child: Child,
    pub port: u16,
    pub stderr: mpsc::Receiver<String>,
}

/// Starts `backend --listen 127.0.0.1:0 ARGS` and reads the port from its first stderr line;
/// the rest of stderr arrives on `Backend::stderr`.
pub fn listening(args: &[&str]) -> Backend {
    let mut child = Command::new(BIN)
        .args(["backend", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("backend prints its address").unwrap();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let port = first
        .split("ws://127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    Backend {
        child,
        port,
        stderr: rx,
    }
}

/// Waits until a line for which `want` holds arrives on `lines` (a process's stderr), within a
/// generous `limit`: tests wait for events, not for a time that a busy machine may overrun.
pub fn wait_for_line(lines: &mpsc::Receiver<String>, limit: Duration, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if want(&l) => return l,
            Ok(l) => seen.push(l),
            Err(_) => panic!("no such line within {limit:?}; seen: {seen:?}"),
        }
    }
}

/// Waits for a child with a hard limit; returns (exit code, stdout, stderr).
pub fn finish(mut child: Child, limit: Duration) -> (i32, String, String) {
    let start = Instant::now();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut o = String::new();
        let mut e = String::new();
        if let Some(s) = out.as_mut() {
            let _ = s.read_to_string(&mut o);
        }
        if let Some(s) = err.as_mut() {
            let _ = s.read_to_string(&mut e);
        }
        (o, e)
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let (o, e) = reader.join().unwrap();
            return (status.code().unwrap_or(-1), o, e);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process still running after {limit:?}: it hangs past its stated duration");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A one-shot OTA server: captures the request, answers with `answer`.
pub fn ota_server(answer: String) -> (u16, std::thread::JoinHandle<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len: usize = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + len || n == 0 {
                    break;
                }
            }
        }
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
            answer.len()
        );
        s.write_all(reply.as_bytes()).unwrap();
        String::from_utf8_lossy(&got).into_owned()
    });
    (port, handle)
}

/// A WAV of `secs` of the built-in speech-like voice (16 kHz mono), for `say FILE`.
pub fn speechlike_wav(path: &std::path::Path, secs: u64) {
    let pcm =
        xiaozhi_sim::voice::speak::Timbre::default().render(xiaozhi_sim::time::SimDuration::from_secs(secs), 16_000);
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for s in pcm {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
}

/// The report of `connect --report` after two turns answered by xinnan-py, the second after
/// `set_volume 40` with `音量已经调小了`: both replies whole (16 kHz, at least 30 frames decoded,
/// none dropped) and audible, the second 9.7 dB quieter (±0.5 dB), and the claim judged as an
/// unverified claim that was heard.
pub fn two_turns_heard_quieter_after_set_volume_40(r: &serde_json::Value, stderr: &str) {
    let sessions = r["tts_sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{stderr}\n{r:#}");
    for s in sessions {
        assert_eq!(s["frames"]["dropped"], 0, "{s:#}");
        assert!(s["frames"]["decoded"].as_u64().unwrap() >= 30, "{s:#}");
        assert_eq!(s["heard"]["audible"], true, "{s:#}");
        assert_eq!(s["decode_rate"], 16000, "xinnan-py echoes the device's 16 kHz: {s:#}");
    }
    let before = sessions[0]["heard"]["spl_db"].as_f64().unwrap();
    let after = sessions[1]["heard"]["spl_db"].as_f64().unwrap();
    assert!(((after - before) + 9.7).abs() <= 0.5, "{before} → {after}");
    assert_eq!(sessions[1]["mcp_calls"][0]["tool"], "self.audio_speaker.set_volume");
    let claim = &r["claims"][0];
    assert_eq!(claim["text"], "音量已经调小了");
    assert_eq!(claim["heard"], true);
    assert!(claim["judgements"][0].as_str().unwrap().starts_with("unverified claim"));
}
