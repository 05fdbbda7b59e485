//! `xiaozhi-twin replay`: feeds a conformance request file to a freshly flashed board in the
//! conformance world and prints one JSON object per line (or just the replies).

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::harness::{ReplayLine, Replayer, split_lines};

use crate::boards;

pub struct Options<'a> {
    pub board: &'a str,
    pub file: &'a Path,
    pub replies_only: bool,
    pub seed: u64,
}

pub fn run(opts: &Options<'_>) -> Result<()> {
    let spec = boards::load(opts.board)?;
    let content = match std::fs::read(opts.file) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{}: no such file", opts.file.display()),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read", opts.file.display())),
    };
    let raw_lines = split_lines(&content);
    // Validate every directive before running anything: no partial output on a bad file.
    let mut lines = Vec::with_capacity(raw_lines.len());
    for (i, raw) in raw_lines.iter().enumerate() {
        let line = ReplayLine::parse(i + 1, raw)
            .map_err(|e| anyhow::anyhow!("{}:{}: {}", opts.file.display(), e.line, e.message))?;
        lines.push(line);
    }
    let trace = !opts.replies_only;
    let mut replayer = Replayer::new(spec, opts.seed, trace);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut buf = Vec::with_capacity(4096);
    for (i, (raw, line)) in raw_lines.iter().zip(&lines).enumerate() {
        let record = replayer
            .run_line(i + 1, raw, line)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", opts.file.display(), i + 1))?;
        buf.clear();
        if opts.replies_only {
            for r in &record.replies {
                buf.extend_from_slice(r);
                buf.push(b'\n');
            }
        } else {
            record.to_json_line(&mut buf);
        }
        out.write_all(&buf)?;
    }
    out.flush()?;
    Ok(())
}
