//! Standard output and standard error, written without a panic (docs/guarantees.md, "Input
//! limits": a closed standard output).
//!
//! `println!` panics when standard output is gone (`xiaozhi-twin run scenarios/ | head -c 10`:
//! "failed printing to stdout: Broken pipe"). Every line the commands print goes through
//! [`outln!`](crate::outln) / [`out!`](crate::out) instead. A closed standard output (the
//! reader went away) is the end of the output, not of the work: later lines are dropped, the
//! command still writes its files (`--json`, `--junit`, a fleet shard) and ends with its own
//! status, without a word; a server (`backend`) stops as at Ctrl-C, since its reports have
//! nowhere to go ([`stdout_closed`]). Another write error (a full disk behind `> file`) is one
//! line on standard error and exit status 2. Standard error ([`errln!`](crate::errln)) is best
//! effort: a closed standard error loses the line, never the process.
//!
//! A command whose last act may fail after it printed (writing its report files) can
//! [`hold`] its output and [`release`] it once the files are written: refused, it prints
//! nothing on stdout.

use std::fmt;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Exit status when standard output cannot be written for another reason than a closed reader.
const WRITE_FAILED: i32 = 2;

/// Standard output's reader went away.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Output held back until [`release`] (`None`: written as it comes).
static HELD: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// Writes to standard output (or to what is held); see the module for a closed or failing one.
pub fn stdout_fmt(args: fmt::Arguments<'_>) {
    if let Ok(mut held) = HELD.lock()
        && let Some(buf) = held.as_mut()
    {
        let _ = buf.write_fmt(args);
        return;
    }
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        stdout_failed(&e);
    }
}

/// Writes bytes to standard output and flushes them, as [`stdout_fmt`] does.
pub fn stdout_bytes(bytes: &[u8]) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// Standard output's reader went away: nothing more will be printed.
pub fn stdout_closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Holds what is printed from now on until [`release`] or [`discard`].
pub fn hold() {
    if let Ok(mut held) = HELD.lock() {
        *held = Some(Vec::new());
    }
}

/// Prints what was held and prints as it comes again.
pub fn release() {
    let held = HELD.lock().ok().and_then(|mut h| h.take());
    if let Some(bytes) = held {
        stdout_bytes(&bytes);
    }
}

/// Drops what was held (the command was refused after all) and prints as it comes again.
pub fn discard() {
    if let Ok(mut held) = HELD.lock() {
        *held = None;
    }
}

/// Runs `work` with its output held when `files` (it writes report files at the end): printed
/// once `work` succeeded, dropped when it is refused, so a report that cannot be written (a
/// full disk) leaves nothing on stdout and exit status 2.
pub fn holding<T>(files: bool, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    if !files {
        return work();
    }
    hold();
    let result = work();
    match &result {
        Ok(_) => release(),
        Err(_) => discard(),
    }
    result
}

/// Writes to standard error; a failure is ignored (there is nowhere left to say it).
pub fn stderr_fmt(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// A failed write to standard output: a closed reader ends the output; anything else is one
/// line and exit status 2.
pub fn stdout_failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CLOSED.store(true, Ordering::Relaxed);
        return;
    }
    stderr_fmt(format_args!("xiaozhi-twin: standard output: {e}\n"));
    std::process::exit(WRITE_FAILED);
}

/// Refuses an output file that cannot be written before any work starts (a directory, a
/// missing folder, no permission), so such a mistake prints nothing on stdout and exits 2. A
/// regular file is opened to append (nothing is truncated or written yet); a path with nothing
/// there is created to try and removed again; anything else (a FIFO, a device, a symlink) is
/// left alone, so that a reader at the other end does not see an end of file. A write that
/// fails later (a full disk) is refused by the command itself ([`hold`]).
pub fn check_writable(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    let cannot = |e: std::io::Error| anyhow::anyhow!("{flag} {}: cannot write: {e}", path.display());
    if path.is_dir() {
        anyhow::bail!("{flag} {}: is a directory, not a file", path.display());
    }
    let open = || std::fs::OpenOptions::new().append(true).create(true).open(path);
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => open().map(drop).map_err(cannot),
        Ok(_) => Ok(()),
        Err(_) => {
            open().map_err(cannot)?;
            // Made only to try: a run refused later leaves no empty report behind.
            let _ = std::fs::remove_file(path);
            Ok(())
        }
    }
}

/// `text` cut to its first `max` characters, with its length (the sim crate's one rule).
pub use xiaozhi_sim::spec::elide;

/// `println!` that ends the process quietly when standard output is closed (see [`crate::out`]).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::stdout_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that ends the process quietly when standard output is closed.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout_fmt(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics (a closed standard error loses the line).
#[macro_export]
macro_rules! errln {
    () => {
        $crate::out::stderr_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stderr_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::out::stderr_fmt(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn elide_keeps_short_text_and_cuts_long_text_at_a_character() {
        assert_eq!(super::elide("short", 10), "short");
        assert_eq!(super::elide("音量调到五十", 2), "音量… (18 bytes in all)");
    }
}
