//! `xiaozhi-twin replay`: feeds a conformance request file to a freshly flashed board in the
//! conformance world and prints one JSON object per line (or just the replies).
//!
//! The file is read twice, line by line through one reused buffer: first to validate every
//! directive (no partial output on a bad file), then to run. Memory stays flat however long the
//! file is (BENCHMARKS.md: the 200,000-line rows).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xiaozhi_sim::replay::{ReplayLine, Replayer};

use crate::args::BoardArgs;

/// Replay a conformance request file on a freshly flashed board and print what it sends.
///
/// Each line of FILE is one inner MCP payload (raw bytes, JSON or not), `#burst [<payload
/// strings>]` (all parsed before the main task runs) or `#sleep <ms>`. Prints one JSON object
/// per line: {"n", "request", "replies", "events"}. Exit status 2 on a missing file, an
/// unknown board or a malformed directive (nothing is printed then).
#[derive(clap::Args)]
#[command(mut_arg("board", |a| a.help("Board id (see `xiaozhi-twin boards`) or path to a board YAML file")))]
pub struct Args {
    #[command(flatten)]
    pub board: BoardArgs,
    /// Request file, one payload or directive per line.
    pub file: PathBuf,
    /// Print only the reply payloads, one per line (for piping and throughput runs).
    #[arg(long)]
    pub replies_only: bool,
    /// Seed of the device identity (MAC, UUID); replies do not depend on it.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(opts: &Args) -> Result<bool> {
    let spec = opts.board.load()?;
    let file = opts.file.as_path();
    let parse = |n: usize, raw: &[u8]| {
        ReplayLine::parse(n, raw).map_err(|e| anyhow::anyhow!("{}:{}: {}", file.display(), e.line, e.message))
    };
    // Validate every directive before running anything: no partial output on a bad file.
    for_each_line(file, Lines::Directives, |n, raw| parse(n, raw).map(drop))?;
    let trace = !opts.replies_only;
    let mut replayer = Replayer::new(spec, opts.seed, trace);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut buf = Vec::with_capacity(4096);
    // Payload lines (nearly all of them) are copied into this one line instead of a new one each.
    let mut payload = ReplayLine::Payload(Vec::with_capacity(4096));
    for_each_line(file, Lines::All, |n, raw| {
        let directive;
        let line = if is_directive(raw) {
            directive = parse(n, raw)?;
            &directive
        } else {
            if let ReplayLine::Payload(bytes) = &mut payload {
                bytes.clear();
                bytes.extend_from_slice(raw);
            }
            &payload
        };
        let never_idle = |e| anyhow::anyhow!("{}:{n}: {e}", file.display());
        if opts.replies_only {
            // Each reply goes straight into the output buffer; the first write error is kept.
            let mut written = Ok(());
            replayer
                .run_line_replies(line, |reply| {
                    if written.is_ok() {
                        written = out.write_all(reply).and_then(|()| out.write_all(b"\n"));
                    }
                })
                .map_err(never_idle)?;
            return Ok(written?);
        }
        let record = replayer.run_line(n, raw, line).map_err(never_idle)?;
        buf.clear();
        record.to_json_line(&mut buf);
        out.write_all(&buf)?;
        Ok(())
    })?;
    out.flush()?;
    Ok(true)
}

/// Only lines starting with `#` can be directives (`#burst`, `#sleep`); every other line is a
/// payload as it is, which is what [`ReplayLine::parse`] would make of it.
fn is_directive(raw: &[u8]) -> bool {
    raw.first() == Some(&b'#')
}

/// Which lines [`for_each_line`] hands over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lines {
    All,
    /// Only lines that may be directives ([`is_directive`]); the others are skipped unread.
    Directives,
}

/// The longest line of a request file: 64 MiB, the largest heap a board may declare, which no
/// longer message could be parsed in (docs/guarantees.md,
/// "Input limits"); a longer one (`replay /dev/zero`) is refused, not read for ever.
const MAX_LINE: usize = xiaozhi_sim::board::MAX_FREE_HEAP;

/// Calls `f` with each line of `file` (of `which`) and its number (from 1), without its `\n` or
/// `\r\n`: the same lines as `replay::split_lines` on the whole content. A line that lies whole
/// in the read buffer is handed over in place (no copy); `memchr` finds the ends of lines.
fn for_each_line(file: &Path, which: Lines, mut f: impl FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
    let cannot_read = || format!("{}: cannot read", file.display());
    let handle = match File::open(file) {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{}: no such file", file.display()),
        Err(e) => return Err(e).with_context(cannot_read),
    };
    let mut reader = BufReader::with_capacity(1 << 16, handle);
    // A line that runs over the end of the buffer, gathered here (`skip`: not wanted); `long`
    // counts its bytes, kept or not, against MAX_LINE.
    let mut line = Vec::with_capacity(4096);
    let (mut n, mut partial, mut skip, mut long) = (1usize, false, false, 0usize);
    loop {
        let avail = reader.fill_buf().with_context(cannot_read)?;
        if avail.is_empty() {
            if partial && !skip {
                f(n, strip(&line))?;
            }
            return Ok(());
        }
        if !partial {
            skip = which == Lines::Directives && !is_directive(avail);
        }
        let Some(end) = memchr::memchr(b'\n', avail) else {
            long += avail.len();
            if long > MAX_LINE {
                bail!(
                    "{}:{n}: a line longer than {MAX_LINE} bytes (more than any board's heap could take)",
                    file.display()
                );
            }
            if !skip {
                line.extend_from_slice(avail);
            }
            partial = true;
            let used = avail.len();
            reader.consume(used);
            continue;
        };
        if !skip {
            if partial {
                line.extend_from_slice(&avail[..end]);
                f(n, strip(&line))?;
            } else {
                f(n, strip(&avail[..end]))?;
            }
        }
        line.clear();
        (partial, long) = (false, 0);
        n += 1;
        reader.consume(end + 1);
    }
}

/// A line without its `\n` or `\r\n`.
fn strip(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw.strip_suffix(b"\r").unwrap_or(raw)
}
