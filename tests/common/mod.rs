//! Helpers shared by the integration tests (each test file includes this with `mod common;`, so
//! a file uses only some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
