//! What the console's tests share: the console process and its HTTP API, and the browsers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;

/// A process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first line of `child`'s stderr that holds `marker`, and what follows it on that line.
pub fn stderr_after(child: &mut Child, marker: &str) -> String {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some((_, rest)) = line.split_once(marker) {
            std::thread::spawn(move || lines.for_each(drop));
            return rest.trim().to_string();
        }
        seen.push(line);
    }
    panic!("no `{marker}` in:\n{}", seen.join("\n"));
}

/// A browser's path: Debian's `chromium` or `firefox-esr`, installed by
/// `tests/console/ensure_browser.sh` when missing.
pub fn browser(name: &str) -> String {
    let script = common::root().join("tests/console/ensure_browser.sh");
    let out = Command::new("bash").arg(script).arg(name).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// 2 s of the twin's speech-like voice, then 3 s of silence, at 48 kHz (the browser loops it).
pub fn speech_wav(dir: &Path) -> PathBuf {
    use xiaozhi_sim::time::SimDuration;
    let voice = xiaozhi_sim::voice::speak::Timbre::default().render(SimDuration::from_secs(2), 48_000);
    let path = dir.join("speech.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 48_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&path, spec).unwrap();
    for s in voice.iter().copied().chain(std::iter::repeat_n(0, 3 * 48_000)) {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    path
}

/// An HTTP answer: status and body.
pub fn http(method: &str, url: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut resp = match method {
        "GET" => agent.get(url).call().unwrap(),
        _ => agent.post(url).send(body).unwrap(),
    };
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_vec().unwrap())
}

/// `console --listen 127.0.0.1:0 ARGS`: the process (killed when dropped) and its base URL.
pub fn console(args: &[&str]) -> (Killed, String) {
    let mut child = Command::new(common::BIN)
        .args(["console", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = stderr_after(&mut child, "console: ");
    let base = url.split_whitespace().next().unwrap().trim_end_matches('/').to_string();
    (Killed(child), base)
}

/// Polls `GET /api/state` until `ok` holds (within a generous minute); the state then.
pub fn state_until(base: &str, what: &str, ok: &dyn Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let (code, body) = http("GET", &format!("{base}/api/state"), b"");
        assert_eq!(code, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        if ok(&v) {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never {what}: {v:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Saves a browser's screenshot (`data`: PNG in base64) as `<shots>/<name>.png`.
pub fn save_screenshot(shots: &Path, name: &str, data: &Value) {
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data.as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name}");
    std::fs::write(shots.join(format!("{name}.png")), png).unwrap();
}

/// What the tests ask the page (JavaScript expressions, true when it holds).
pub mod ask {
    /// The board is loaded and idle.
    pub const IDLE: &str = "twinConsole.ready && twinConsole.status.state === 'idle'";
    /// The screen is drawn.
    pub const SCREEN_DRAWN: &str = "document.getElementById('screen').naturalWidth > 0";
    /// The device sent `listen start`.
    pub const LISTEN_START_SENT: &str = "twinConsole.lines.some(l => l.kind === 'out' && l.text.includes('\"type\":\"listen\"') && l.text.includes('\"state\":\"start\"'))";
    /// The device listens.
    pub const LISTENING: &str = "twinConsole.status.state === 'listening'";
    /// The set_volume calls whose reply came, as the page shows them.
    pub const SET_VOLUME_REPLIES: &str = "twinConsole.calls.filter(c => c.tool === 'self.audio_speaker.set_volume' && c.reply_ms !== undefined).map(c => c.text + (c.is_error ? ' isError' : ''))";
}
