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
