//! The owner of virtual time for offline runs (quinn-proto's test harness, turmoil's `Sim`):
//! it powers the device, delivers payloads, and jumps the clock straight to the next deadline.
//!
//! Also the conformance replay format (`#burst`, `#sleep`, one record per line) shared by
//! `xiaozhi-twin replay`, the tests and the benchmarks. Knows nothing about the wall clock.

use std::sync::Arc;

use crate::backend::is_abort;
use crate::board::BoardSpec;
use crate::cjson::Terminator;
use crate::device::{Device, Output, Receipt};
use crate::time::{SimDuration, SimTime};
use crate::trace::{Event, TraceEvent};
use crate::voice::speak::{Agenda, Said};
use crate::world::WorldSpec;

/// How long `run_until_idle` may advance virtual time before it gives up (a device that never
/// goes idle is reported, never looped on forever).
pub const IDLE_HORIZON: SimDuration = SimDuration::from_secs(24 * 3600);

/// A device plus the clock, and a speaking backend on the direct link.
pub struct Harness {
    /// The device under test; drive it directly for anything the harness lacks.
    pub device: Device,
    /// What the backend still has to say (`tts` messages and Opus packets with their times);
    /// delivered as virtual time passes through the harness. Like xiaozhi-esp32-server, the
    /// harness answers a device `abort` at once: queued speech dropped, `tts stop` sent.
    pub agenda: Agenda,
    held: Vec<Output>,
    agenda_boot: u32,
}

/// The device did not go idle within [`IDLE_HORIZON`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the device was still busy after {0} of virtual time")]
pub struct NeverIdle(pub SimDuration);

impl Harness {
    /// Wraps `device`; the clock is the device's.
    pub fn new(device: Device) -> Self {
        Harness {
            device,
            agenda: Agenda::new("direct"),
            held: Vec::new(),
            agenda_boot: 0,
        }
    }

    /// Takes the device's outputs into the harness, answering an `abort` as the backend does.
    fn pump(&mut self) {
        while let Some(o) = self.device.poll_output() {
            if let Output::Control { text, at } = &o
                && (!self.agenda.is_empty() || self.agenda.in_turn())
                && is_abort(&String::from_utf8_lossy(text))
            {
                self.agenda.abort(*at);
            }
            self.held.push(o);
        }
    }

    /// Runs to `t`, delivering what the backend says on the way (at its own times).
    pub fn run_until(&mut self, t: SimTime) {
        while let Some(next) = self.agenda.next_at().filter(|n| *n <= t) {
            self.device.run_before(next.max(self.now()));
            self.pump();
            if self.agenda_boot == 0 {
                // First speech of this harness: it belongs to the boot that is running now.
                self.agenda_boot = self.device.boots();
            }
            if self.device.boots() != self.agenda_boot {
                // The device restarted: its session with the backend is gone, and so is the
                // backend's turn (what was still queued is never sent).
                self.agenda_boot = self.device.boots();
                self.agenda = Agenda::new("direct");
                break;
            }
            let Some((at, said)) = self.agenda.pop_due(next) else {
                continue;
            };
            let at = at.max(self.now());
            match said {
                Said::Json(text) => {
                    self.device.handle_json(at, text.as_bytes());
                }
                Said::Audio(packet) => self.device.handle_audio(at, &packet),
            }
        }
        self.device.run_until(t);
        self.pump();
        if self.agenda.is_empty() {
            self.agenda_boot = self.device.boots();
        }
    }

    /// The device's clock.
    pub fn now(&self) -> SimTime {
        self.device.now()
    }

    /// Powers the board on at the current time.
    pub fn power_on(&mut self) {
        let now = self.now();
        self.device.power_on(now);
    }

    /// Delivers one payload on the receive task at the current time (the main task does not run).
    pub fn deliver(&mut self, payload: &[u8]) -> Receipt {
        let now = self.now();
        self.device.handle_mcp(now, payload)
    }

    /// Lets virtual time pass.
    pub fn sleep(&mut self, d: SimDuration) {
        let t = self.now() + d;
        self.run_until(t);
    }

    /// Runs the device until its main task has nothing queued or blocked (timers keep firing as
    /// time passes, but do not keep it busy).
    pub fn run_until_idle(&mut self) -> Result<(), NeverIdle> {
        let start = self.now();
        // Work queued at this very instant runs first.
        self.run_until(start);
        while self.device.is_busy() {
            let Some(t) = self.device.poll_timeout() else { break };
            if t.saturating_since(start) > IDLE_HORIZON {
                return Err(NeverIdle(IDLE_HORIZON));
            }
            self.run_until(t);
        }
        Ok(())
    }

    /// Every payload transmitted since the last call.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.pump();
        std::mem::take(&mut self.held)
    }

    /// The MCP payloads transmitted since the last call (other outputs are discarded).
    pub fn take_mcp_payloads(&mut self) -> Vec<Vec<u8>> {
        self.take_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Mcp { payload, .. } => Some(payload),
                _ => None,
            })
            .collect()
    }
}

/// Lead-in excluded from a probe's measurement window: the DMA ring and playback queue
/// (60–120 ms), the MAX98357A start-up (7.5 ms) and the NS4150B start-up (120 ms)
/// (ACOUSTICS.md §6 "Guards").
pub const PROBE_GUARD: SimDuration = SimDuration::from_millis(150);

/// A sound played through the device and what the listener measured.
#[derive(Clone, Debug)]
pub struct Listening {
    /// When the sound actually played (it queues behind what already plays).
    pub played: (SimTime, SimTime),
    /// The measured window (after the guard).
    pub window: (SimTime, SimTime),
    /// What the listener measured in `window`.
    pub measurement: crate::audio::measure::Measurement,
    /// The rendered signals, when asked for.
    pub signals: Option<crate::audio::render::Signals>,
}

impl Harness {
    /// Plays `source` for `duration` through the device, runs the device past its end, and
    /// measures the played window minus [`PROBE_GUARD`]. `None` when the device is not running.
    pub fn play_and_measure(
        &mut self,
        source: crate::audio::source::Source,
        duration: SimDuration,
        signals: bool,
    ) -> Option<Listening> {
        let now = self.now();
        let (start, end) = self.device.play(now, source, duration)?;
        self.run_until(end);
        let from = (start + PROBE_GUARD).min(end);
        let (measurement, signals) = self.device.render(from, end, signals);
        Some(Listening {
            played: (start, end),
            window: (from, end),
            measurement,
            signals,
        })
    }

    /// Measures what the listener hears during `[now, now + d)` while the device runs.
    pub fn listen(&mut self, d: SimDuration, signals: bool) -> Listening {
        let from = self.now();
        let to = from + d;
        self.run_until(to);
        let (measurement, signals) = self.device.render(from, to, signals);
        Listening {
            played: (from, to),
            window: (from, to),
            measurement,
            signals,
        }
    }
}

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
            if ms > 365 * 24 * 3600 * 1000 {
                return Err(err(format!("#sleep {ms}: more than a year of virtual time")));
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

    /// Events of the boot before the first line.
    pub fn boot_events(&mut self) -> Vec<String> {
        render_events(&std::mem::take(&mut self.pending_events))
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
}

/// Renders events in the recorder's trace style (`#batch k tasks=n`, `#event …`, `#log …`),
/// numbering batches from 1 within the list.
pub fn render_events(events: &[TraceEvent]) -> Vec<String> {
    let mut batch = 0;
    events.iter().map(|e| render_event(e, &mut batch)).collect()
}

/// One event as a trace line; `batch` counts the batches rendered so far in this list.
pub fn render_event(e: &TraceEvent, batch: &mut usize) -> String {
    use std::fmt::Write as _;
    // One allocation per line: sized for the fixed words plus the variable text.
    let mut line = String::with_capacity(match &e.kind {
        Event::Logged { tag, text, .. } => 8 + tag.len() + text.len(),
        _ => 64,
    });
    // Writing into a String cannot fail.
    let _ = match &e.kind {
        Event::BatchStarted { tasks } => {
            *batch += 1;
            write!(line, "#batch {batch} tasks={tasks}")
        }
        Event::Logged { .. } => write!(line, "#{e}"),
        _ => write!(line, "#event {e}"),
    };
    line
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
