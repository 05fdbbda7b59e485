//! The conformance replay format (`#burst`, `#sleep`, one record per line) and its runner,
//! shared by `xiaozhi-twin replay`, the conformance tests and the benchmarks: request lines on
//! a freshly flashed board in the conformance world, with the recorder's timing convention
//! (`tests/conformance/README.md`). Runs on the [`Harness`]; knows nothing about the wall clock.

use std::sync::Arc;

use crate::board::BoardSpec;
use crate::cjson::Terminator;
use crate::device::Device;
use crate::harness::{Harness, NeverIdle};
use crate::time::SimDuration;
use crate::trace::{TraceEvent, render_events};
use crate::world::WorldSpec;

/// One line of a replay file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayLine {
    /// One inner MCP payload, raw bytes.
    Payload(Vec<u8>),
    /// Several payloads delivered before the main task runs.
    Burst(Vec<Vec<u8>>),
    /// Let the device run this long.
    Sleep(SimDuration),
}

/// A line that is a directive but malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// The line number given to [`ReplayLine::parse`].
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl ReplayLine {
    /// Parses one line (without its newline). `#burst <JSON array of strings>` and
    /// `#sleep <ms>` are directives; anything else is a payload, whatever its bytes.
    pub fn parse(line_no: usize, raw: &[u8]) -> Result<ReplayLine, LineError> {
        let err = |message: String| LineError { line: line_no, message };
        if let Some(rest) = directive(raw, b"#burst") {
            let text = std::str::from_utf8(rest).map_err(|_| err("#burst: the array is not UTF-8 text".into()))?;
            let items: Vec<String> = serde_json::from_str(text.trim())
                .map_err(|e| err(format!("#burst needs a JSON array of payload strings: {e}")))?;
            return Ok(ReplayLine::Burst(items.into_iter().map(String::into_bytes).collect()));
        }
        if let Some(rest) = directive(raw, b"#sleep") {
            let text = std::str::from_utf8(rest).unwrap_or("").trim();
            let ms: u64 = text
                .parse()
                .map_err(|_| err(format!("#sleep needs a whole number of milliseconds, got `{text}`")))?;
            if ms > crate::time::MAX_SPAN.as_millis() {
                return Err(err(format!(
                    "#sleep {ms}: longer than a day ({} ms), the longest span any duration may give",
                    crate::time::MAX_SPAN.as_millis()
                )));
            }
            return Ok(ReplayLine::Sleep(SimDuration::from_millis(ms)));
        }
        Ok(ReplayLine::Payload(raw.to_vec()))
    }
}

fn directive<'a>(raw: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = raw.strip_prefix(name)?;
    match rest.first() {
        None => Some(rest),
        Some(b) if b.is_ascii_whitespace() => Some(rest),
        Some(_) => None,
    }
}

/// What one replay line produced.
#[derive(Clone, Debug)]
pub struct ReplayRecord {
    /// The line's number, as given to [`Replayer::run_line`].
    pub n: usize,
    /// The line's raw bytes.
    pub request: Vec<u8>,
    /// MCP payloads transmitted while it ran, in order.
    pub replies: Vec<Vec<u8>>,
    /// Rendered trace lines ([`render_events`]); empty without tracing.
    pub events: Vec<String>,
}

/// Replays request lines on a freshly flashed board in the conformance world, with the
/// recorder's timing convention: no virtual time passes between lines except what the device
/// spends and `#sleep`; after every boot the device runs 1000 ms before the next line.
pub struct Replayer {
    harness: Harness,
    trace: bool,
    pending_events: Vec<TraceEvent>,
}

/// The settle time after every boot.
pub const BOOT_SETTLE: SimDuration = SimDuration::from_millis(1000);

impl Replayer {
    /// A replayer in the conformance world, booted and settled.
    pub fn new(spec: Arc<BoardSpec>, seed: u64, trace: bool) -> Self {
        Self::with_world(spec, WorldSpec::conformance(), seed, trace)
    }

    /// A replayer in `world`, booted and settled (NUL-terminated parsing, as the recorder).
    pub fn with_world(spec: Arc<BoardSpec>, world: WorldSpec, seed: u64, trace: bool) -> Self {
        let mut device = Device::new(spec, world, seed);
        device.set_trace(trace);
        // The recorder fed lines to `ParseMessage(const std::string&)`: cJSON_Parse, C string.
        device.set_terminator(Terminator::Nul);
        let mut harness = Harness::new(device);
        harness.power_on();
        let mut r = Replayer {
            harness,
            trace,
            pending_events: Vec::new(),
        };
        r.settle_after_boot(0);
        r.pending_events = r.harness.device.drain_events();
        r
    }

    /// The harness, e.g. to inspect the device between lines.
    pub fn harness(&mut self) -> &mut Harness {
        &mut self.harness
    }

    fn settle_after_boot(&mut self, boots_before: u32) {
        if self.harness.device.boots() > boots_before
            && let Some(at) = self.harness.device.last_boot_at()
        {
            let until = at + BOOT_SETTLE;
            if until > self.harness.now() {
                self.harness.device.run_until(until);
            }
        }
    }

    /// Runs one line and returns its record.
    pub fn run_line(&mut self, n: usize, raw: &[u8], line: &ReplayLine) -> Result<ReplayRecord, NeverIdle> {
        self.run(line)?;
        let replies = self.harness.take_mcp_payloads();
        let events = if self.trace {
            render_events(&self.harness.device.drain_events())
        } else {
            Vec::new()
        };
        Ok(ReplayRecord {
            n,
            request: raw.to_vec(),
            replies,
            events,
        })
    }

    /// Runs one line and hands each MCP payload it transmitted to `reply`, building no record:
    /// the replies-only path (its trace events, if tracing, are dropped).
    pub fn run_line_replies(&mut self, line: &ReplayLine, reply: impl FnMut(&[u8])) -> Result<(), NeverIdle> {
        self.run(line)?;
        self.harness.drain_mcp_payloads(reply);
        if self.trace {
            self.harness.device.drain_events();
        }
        Ok(())
    }

    fn run(&mut self, line: &ReplayLine) -> Result<(), NeverIdle> {
        let boots_before = self.harness.device.boots();
        match line {
            ReplayLine::Payload(p) => {
                self.harness.deliver(p);
                self.harness.run_until_idle()?;
            }
            ReplayLine::Burst(items) => {
                for p in items {
                    self.harness.deliver(p);
                }
                self.harness.run_until_idle()?;
            }
            ReplayLine::Sleep(d) => {
                self.harness.sleep(*d);
                self.harness.run_until_idle()?;
            }
        }
        self.settle_after_boot(boots_before);
        Ok(())
    }
}

/// Appends `bytes` as a JSON string the way `json.dumps(ensure_ascii=False)` would, except that
/// bytes which are not UTF-8 are written raw (readable with Python's `surrogateescape`).
pub fn write_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\u{8}' => out.extend_from_slice(b"\\b"),
                '\u{c}' => out.extend_from_slice(b"\\f"),
                c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out.push(b'"');
}

impl ReplayRecord {
    /// `{"n": …, "request": …, "replies": […], "events": […]}` on one line.
    pub fn to_json_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("{{\"n\": {}, \"request\": ", self.n).as_bytes());
        write_json_string(out, &self.request);
        out.extend_from_slice(b", \"replies\": [");
        for (i, r) in self.replies.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            write_json_string(out, r);
        }
        out.extend_from_slice(b"], \"events\": [");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            write_json_string(out, e.as_bytes());
        }
        out.extend_from_slice(b"]}\n");
    }
}

/// Splits a request file into lines (without `\n` or a `\r\n` ending).
pub fn split_lines(content: &[u8]) -> Vec<&[u8]> {
    if content.is_empty() {
        return Vec::new();
    }
    let body = content.strip_suffix(b"\n").unwrap_or(content);
    body.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_recognised_only_with_their_exact_names() {
        assert_eq!(
            ReplayLine::parse(1, b"#sleep 25").unwrap(),
            ReplayLine::Sleep(SimDuration::from_millis(25))
        );
        assert!(ReplayLine::parse(1, b"#sleep soon").is_err());
        assert!(ReplayLine::parse(1, b"#sleep 86400000").is_ok());
        assert!(ReplayLine::parse(1, b"#sleep 86400001").is_err());
        assert!(ReplayLine::parse(1, b"#burst [1,2]").is_err());
        assert!(ReplayLine::parse(1, b"#burst not json").is_err());
        assert_eq!(
            ReplayLine::parse(1, br#"#burst ["a","b"]"#).unwrap(),
            ReplayLine::Burst(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(
            ReplayLine::parse(1, b"#bursty").unwrap(),
            ReplayLine::Payload(b"#bursty".to_vec())
        );
        assert_eq!(
            ReplayLine::parse(1, b"hello device").unwrap(),
            ReplayLine::Payload(b"hello device".to_vec())
        );
    }

    #[test]
    fn lines_split_on_newlines_only() {
        assert_eq!(split_lines(b"a\r\nb\n\nc"), vec![&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(split_lines(b"a\n"), vec![&b"a"[..]]);
        assert!(split_lines(b"").is_empty());
    }

    #[test]
    fn json_strings_escape_like_python_and_keep_raw_bytes() {
        let mut out = Vec::new();
        write_json_string(&mut out, b"a\"b\\\n\x01\xff\xe4\xb8\xad");
        assert_eq!(out, b"\"a\\\"b\\\\\\n\\u0001\xff\xe4\xb8\xad\"".to_vec());
    }
}
