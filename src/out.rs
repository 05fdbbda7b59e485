//! Standard output and standard error, written without a panic (docs/guarantees.md, "Input
//! limits": a closed standard output).
//!
//! `println!` panics when standard output is gone (`xiaozhi-twin run scenarios/ | head -c 10`:
//! "failed printing to stdout: Broken pipe"). Every line the commands print goes through
//! [`outln!`](crate::outln) / [`out!`](crate::out) instead: a closed standard output (the
//! reader went away) is the end of the output, and the process exits quietly with status 0,
//! as ripgrep and `yes | head` do; another write error (a full disk behind `> file`) is one line
//! on standard error and exit status 2. Standard error ([`errln!`](crate::errln)) is best
//! effort: a closed standard error loses the line, never the process.

use std::fmt;
use std::io::Write;

/// Exit status when standard output cannot be written for another reason than a closed reader.
const WRITE_FAILED: i32 = 2;

/// Writes to standard output; exits on a closed or failing standard output.
pub fn stdout_fmt(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        stdout_failed(&e);
    }
}

/// Writes bytes to standard output and flushes them; exits as [`stdout_fmt`] does.
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// Writes to standard error; a failure is ignored (there is nowhere left to say it).
pub fn stderr_fmt(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// What a failed write to standard output ends in: status 0 for a closed reader, else 2.
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    stderr_fmt(format_args!("xiaozhi-twin: standard output: {e}\n"));
    std::process::exit(WRITE_FAILED);
}

/// Refuses an output file that cannot be written before any work starts (a directory, a
/// missing folder, no permission), so such a mistake prints nothing on stdout and exits 2. The
/// file is opened to append (nothing is truncated or written yet; a file made to try is removed
/// again); a write that fails later (a
/// full disk) still ends in one line and exit status 2, after what was printed.
pub fn check_writable(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("{flag} {}: is a directory, not a file", path.display());
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot write: {e}", path.display()))?;
    if !existed {
        // Made only to try: a run refused later leaves no empty report behind.
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// `text` cut to its first `max` characters, with how long it was, for one-line messages that
/// quote an input (a 100,000-character tool name is not echoed whole).
pub fn elide(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((at, _)) => format!("{}… ({} bytes in all)", &text[..at], text.len()).into(),
    }
}

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
