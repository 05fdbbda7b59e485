//! Runs a [`ScenarioSpec`] on a simulated board in virtual time and builds the report: one
//! acceptance record per tool call, one check per expectation, the full device trace, and the
//! audio signals of every measurement when asked. Same scenario + seed ⇒ same report, byte for
//! byte.

use std::borrow::Cow;
use std::sync::Arc;

use crate::audio::measure::{Measurement, perceived_change};
use crate::audio::render::Signals;
use crate::audio::source::Source;
use crate::board::{BoardSpec, ButtonAction};
use crate::device::{Device, Output, Receipt};
use crate::harness::{Harness, PROBE_GUARD};
use crate::mcp::{McpTool, ToolAction, ToolsPage};
use crate::scenario::record::{Check, Record, ScenarioReport, StepReport, Trace};
use crate::scenario::{Approx, EventName, Expect, ScenarioSpec, Step, quoted_or};
use crate::time::{SimDuration, SimTime};
use crate::trace::{Event, TraceEvent};
use crate::world::WorldSpec;

/// What the runner needs from the outside world (file access lives in the binary).
pub trait Resources {
    /// Loads a WAV file named in a `play` step as mono int16 PCM: `(rate, samples)`.
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String>;
}

/// No files: `play: {wav: …}` fails with a clear message.
pub struct NoFiles;

impl Resources for NoFiles {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        Err(format!("{path}: WAV files are not available here"))
    }
}

/// Run options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Keep the sample streams of every measurement (for WAV evidence).
    pub keep_signals: bool,
}

/// Signals of one measurement, labelled.
pub struct Evidence {
    pub label: String,
    pub rate: u32,
    pub signals: Signals,
}

/// The reference probe of the acoustic checks: 1 kHz at −6 dBFS for 1 s (ACOUSTICS.md §5).
fn reference_probe() -> (Source, SimDuration) {
    (
        Source::probe(1000.0, -6.0),
        SimDuration::from_millis(1000) + PROBE_GUARD,
    )
}

/// The id a reply carries: every reply starts `{"jsonrpc":"2.0","id":<int>,`.
pub fn reply_id(payload: &[u8]) -> Option<i64> {
    let rest = payload.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    let end = rest.iter().position(|&b| b == b',')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// A `tools/call` request, compact, members in this order:
/// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{"name":…[,"arguments":…]}}`.
fn call_request(id: i64, tool: &str, args: Option<&serde_json::Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + tool.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(br#","method":"tools/call","params":{"name":"#);
    // Serializing a str or a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, tool);
    if let Some(args) = args {
        out.extend_from_slice(br#","arguments":"#);
        let _ = serde_json::to_writer(&mut out, args);
    }
    out.extend_from_slice(b"}}");
    out
}

/// `result.content[0].text` of a reply, if it is valid JSON of that shape.
pub(crate) fn reply_text(payload: &[u8]) -> Option<String> {
    if let Some(text) = plain_reply_text(payload) {
        return Some(text.into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    v["result"]["content"][0]["text"].as_str().map(str::to_string)
}

/// Whether a reply is valid JSON.
pub(crate) fn is_valid_json(payload: &[u8]) -> bool {
    plain_reply_text(payload).is_some() || serde_json::from_slice::<serde_json::Value>(payload).is_ok()
}

/// The text of a reply in the exact shape the device prints for a callback's text
/// (`{"jsonrpc":"2.0","id":<int>,"result":{"content":[{"type":"text","text":<string>}],"isError":false}}`,
/// UTF-8, `<string>` one JSON string literal): then the whole payload is valid JSON and the
/// text is what a JSON reader decodes. `None` for anything else (which may still be JSON).
fn plain_reply_text(payload: &[u8]) -> Option<Cow<'_, str>> {
    let payload = std::str::from_utf8(payload).ok()?;
    let rest = payload.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    let (id, rest) = rest.split_once(',')?;
    let digits = id.strip_prefix('-').unwrap_or(id);
    let json_int =
        matches!(digits.as_bytes(), [b'0'] | [b'1'..=b'9', ..]) && digits.bytes().all(|b| b.is_ascii_digit());
    if !json_int {
        return None;
    }
    let literal = rest
        .strip_prefix(r#""result":{"content":[{"type":"text","text":"#)?
        .strip_suffix(r#"}],"isError":false}}"#)?;
    let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
    if inner.bytes().all(|b| b != b'"' && b != b'\\' && b >= 0x20) {
        return Some(Cow::Borrowed(inner));
    }
    // Escapes (a status JSON inside the text, say): the literal must be exactly one string.
    serde_json::from_str::<String>(literal).ok().map(Cow::Owned)
}

/// The raw error message of an error reply (the firmware does not escape it).
pub(crate) fn reply_error(payload: &[u8]) -> Option<Vec<u8>> {
    const HEAD: &[u8] = br#","error":{"message":""#;
    let i = payload.windows(HEAD.len()).position(|w| w == HEAD)?;
    let rest = &payload[i + HEAD.len()..];
    rest.strip_suffix(br#""}}"#).map(<[u8]>::to_vec)
}

/// What stood in place of a reply text: no reply at all, or a reply that is no text result.
pub(crate) fn no_text(replied: bool) -> &'static str {
    if replied {
        "a reply without a result text"
    } else {
        "no reply"
    }
}

/// Reply ids as a list: `[1, 2]`.
fn ids(ids: &[i64]) -> String {
    let shown: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// What happened to the payloads on receipt, in words.
fn describe_receipts(receipts: &[Receipt]) -> String {
    if receipts.is_empty() {
        return "nothing was delivered".into();
    }
    let shown: Vec<String> = receipts.iter().map(Receipt::to_string).collect();
    shown.join("; ")
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The JSON-RPC `valueint` of an id as the device computes it.
fn coerced(id: i64) -> i64 {
    id.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

struct StepOutcome {
    sent: Vec<Vec<u8>>,
    started: SimTime,
    replies: Vec<(Vec<u8>, SimTime)>,
    /// The step's trace events, in the chunks they were drained in (lengths in `chunks`).
    events: Vec<TraceEvent>,
    chunks: Vec<usize>,
    receipts: Vec<Receipt>,
    measurement: Option<Measurement>,
    previous: Option<Measurement>,
    readback: Option<serde_json::Value>,
    listed: Option<(Vec<String>, usize, Option<String>)>,
    id: Option<i64>,
}

impl StepOutcome {
    fn new(started: SimTime) -> Self {
        StepOutcome {
            sent: Vec::new(),
            started,
            replies: Vec::new(),
            events: Vec::new(),
            chunks: Vec::new(),
            receipts: Vec::new(),
            measurement: None,
            previous: None,
            readback: None,
            listed: None,
            id: None,
        }
    }

    fn reply_for(&self, id: i64) -> Option<&(Vec<u8>, SimTime)> {
        let want = coerced(id);
        self.replies.iter().find(|(p, _)| reply_id(p) == Some(want))
    }

    fn has(&self, name: EventName) -> bool {
        self.events.iter().any(|e| match (&e.kind, name) {
            (Event::ReplyDropped { .. }, EventName::ReplyDropped) => true,
            (Event::Booted { .. }, EventName::DeviceRebooted) => true,
            (Event::MessageDropped { .. }, EventName::MessageDropped) => true,
            (Event::Panicked { .. }, EventName::Panicked) => true,
            (Event::Note { text }, EventName::OutputPoweredDown) => text.starts_with("audio output powered down"),
            (Event::NvsSet { .. }, EventName::NvsWritten) => true,
            (Event::GpioSet { .. }, EventName::GpioChanged) => true,
            _ => false,
        })
    }
}

/// The tool names of one `tools/list` result object (`{"tools":[{"name":…},…]}`), in order,
/// exactly as `serde_json` reads them; none when the bytes do not parse. `listed` is how many
/// tools the device put on the page, `registry` the tools it could have listed.
fn page_names(result: &[u8], listed: usize, registry: &[McpTool]) -> Vec<String> {
    recognize_page(result, registry)
        .filter(|names| names.len() == listed)
        .unwrap_or_else(|| parse_page_names(result))
}

/// The general reading: the page through `serde_json`.
fn parse_page_names(result: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(result).unwrap_or_default();
    v["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The fast reading of a page as the device prints it: each element of the `tools` array is
/// recognized as the exact JSON of a registered tool (whose name is then what a JSON reader
/// decodes from it, unless it holds a NUL, which the JSON cuts). `None` for anything else,
/// which then goes through [`parse_page_names`].
fn recognize_page(result: &[u8], registry: &[McpTool]) -> Option<Vec<String>> {
    let mut rest = result.strip_prefix(br#"{"tools":["#)?;
    let mut names = Vec::new();
    if rest.first() == Some(&b']') {
        return Some(names);
    }
    loop {
        let tool = registry.iter().find(|t| rest.starts_with(t.json()))?;
        if tool.name().contains('\0') {
            return None;
        }
        names.push(tool.name().to_string());
        rest = &rest[tool.json().len()..];
        match rest.first()? {
            b',' => rest = &rest[1..],
            b']' => return Some(names),
            _ => return None,
        }
    }
}

/// What discovery found at boot: every page of both lists.
struct Discovery {
    default_pages: Vec<Vec<String>>,
    user_pages: Vec<Vec<String>>,
    registered: Vec<(String, bool)>,
}

impl Discovery {
    fn of(device: &Device) -> Discovery {
        let Some(mcp) = device.mcp() else {
            return Discovery {
                default_pages: Vec::new(),
                user_pages: Vec::new(),
                registered: Vec::new(),
            };
        };
        // The device's own reply bytes, read without building a `serde_json::Value` per page:
        // the names are what a client sees.
        let pages = |with_user: bool| -> Vec<Vec<String>> {
            mcp.pages(with_user)
                .map_while(|page| match page {
                    ToolsPage::Page { result, tools, .. } => Some(page_names(&result, tools, mcp.tools())),
                    ToolsPage::Error { .. } => None,
                })
                .take(64)
                .collect()
        };
        Discovery {
            default_pages: pages(false),
            user_pages: pages(true),
            registered: mcp
                .tools()
                .iter()
                .map(|t| (t.name().to_string(), t.user_only()))
                .collect(),
        }
    }

    fn describe(&self, tool: &str, board: &BoardSpec) -> String {
        let total: usize = self.default_pages.iter().map(Vec::len).sum();
        if let Some(p) = self
            .default_pages
            .iter()
            .position(|page| page.iter().any(|t| t == tool))
        {
            return format!(
                "listed on page {} of {} of the default tools/list ({} tools) of {} {}",
                p + 1,
                self.default_pages.len(),
                total,
                board.name,
                board.firmware.version
            );
        }
        match self.registered.iter().find(|(n, _)| n == tool) {
            Some((_, true)) => format!(
                "registered user-only: hidden from the default list, listed only with withUserTools:true (page {}); callable by name all the same",
                self.user_pages
                    .iter()
                    .position(|p| p.iter().any(|t| t == tool))
                    .map_or(0, |p| p + 1)
            ),
            Some((_, false)) => "registered but on no default page (the list failed)".to_string(),
            None => format!(
                "NOT registered on {} {}: the board facts do not create it (full list: {} tools, {} with user-only)",
                board.name,
                board.firmware.version,
                total,
                self.user_pages.iter().map(Vec::len).sum::<usize>()
            ),
        }
    }
}

/// The software state a readback sees, for before/after comparisons.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    volume: Option<i32>,
    brightness: Option<u8>,
    theme: Option<String>,
    gpio: Vec<(u32, bool)>,
    boots: u32,
    running: bool,
}

fn snapshot(d: &Device) -> Snapshot {
    let app = d.app();
    Snapshot {
        volume: app.map(|a| a.volume),
        brightness: app.and_then(|a| a.backlight.as_ref().map(|b| b.brightness())),
        theme: app.and_then(|a| a.display.current_theme().map(str::to_string)),
        gpio: app
            .map(|a| a.gpio_flags.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default(),
        boots: d.boots(),
        running: d.is_running(),
    }
}

struct Runner<'a> {
    board: Arc<BoardSpec>,
    resources: &'a dyn Resources,
    h: Harness,
    discovery: Discovery,
    next_id: i64,
    last: Option<Measurement>,
    faults: Vec<(SimTime, crate::fault::Fault, bool)>,
    fault_cursor: usize,
    records: Vec<Record>,
    checks: Vec<Check>,
    steps: Vec<StepReport>,
    trace: Trace,
    keep_signals: bool,
    evidence: Vec<Evidence>,
}

/// Runs `spec` on `board`.
pub fn run(
    spec: &ScenarioSpec,
    board: Arc<BoardSpec>,
    origin: &str,
    opts: &RunOptions,
    resources: &dyn Resources,
) -> (ScenarioReport, Vec<Evidence>) {
    let seed = opts.seed.or(spec.seed).unwrap_or(1);
    let mut world = spec.world.clone().unwrap_or_else(WorldSpec::conformance);
    if spec.world.is_none() {
        world.board_tasks_run = true;
    }
    let mut device = Device::new(board.clone(), world, seed);
    device.set_trace(true);
    let mut faults: Vec<(SimTime, crate::fault::Fault, bool)> = spec
        .faults
        .iter()
        .filter_map(|f| {
            let at = SimTime::ZERO + f.at.0;
            f.set.map(|x| (at, x, true)).or(f.clear.map(|x| (at, x, false)))
        })
        .collect();
    faults.sort_by_key(|(t, f, on)| (*t, *f, *on));
    // Construction faults due at power-on apply before the first boot.
    let mut fault_cursor = 0;
    while fault_cursor < faults.len() && faults[fault_cursor].0 == SimTime::ZERO {
        let (_, f, on) = faults[fault_cursor];
        f.apply(&mut device, SimTime::ZERO, on);
        fault_cursor += 1;
    }
    let mut h = Harness::new(device);
    h.power_on();
    let _ = h.run_until_idle();
    let discovery = Discovery::of(&h.device);
    let mut runner = Runner {
        board: board.clone(),
        resources,
        h,
        discovery,
        next_id: 1,
        last: None,
        faults,
        fault_cursor,
        records: Vec::new(),
        checks: Vec::new(),
        steps: Vec::new(),
        trace: Trace::default(),
        keep_signals: opts.keep_signals,
        evidence: Vec::new(),
    };
    let booted = runner.h.device.drain_events();
    runner.trace.push_chunk(booted);
    for (i, step) in spec.steps.iter().enumerate() {
        runner.step(i + 1, step.referenced.line(), &step.value);
    }
    let finished = runner.h.device.drain_events();
    runner.trace.push_chunk(finished);
    let passed = runner.checks.iter().all(|c| c.passed);
    let report = ScenarioReport {
        name: spec.name.clone(),
        file: origin.to_string(),
        board: board.name.clone(),
        firmware: board.firmware.version.clone(),
        seed,
        card: spec.card,
        description: spec.description.clone(),
        passed,
        steps: runner.steps,
        records: runner.records,
        checks: runner.checks,
        trace: runner.trace,
        files: Vec::new(),
        over: None,
        unobserved: Vec::new(),
    };
    (report, runner.evidence)
}

impl Runner<'_> {
    fn now(&self) -> SimTime {
        self.h.now()
    }

    /// Drains the device's trace events into the step's outcome, as one chunk.
    fn collect_trace(&mut self, out: &mut StepOutcome) {
        let events = self.h.device.drain_events();
        out.chunks.push(events.len());
        out.events.extend(events);
    }

    /// Advances to `t`, applying timeline faults on the way.
    fn advance_to(&mut self, t: SimTime) {
        while self.fault_cursor < self.faults.len() && self.faults[self.fault_cursor].0 <= t {
            let (at, f, on) = self.faults[self.fault_cursor];
            let at = at.max(self.now());
            self.h.device.run_until(at);
            f.apply(&mut self.h.device, at, on);
            self.fault_cursor += 1;
        }
        self.h.device.run_until(t);
    }

    fn settle(&mut self) {
        let _ = self.h.run_until_idle();
        let now = self.now();
        self.advance_to(now);
    }

    fn take_replies(&mut self) -> Vec<(Vec<u8>, SimTime)> {
        self.h
            .take_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Mcp { payload, at } => Some((payload, at)),
                _ => None,
            })
            .collect()
    }

    fn alloc_id(&mut self, given: Option<i64>) -> i64 {
        match given {
            Some(id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    fn deliver(&mut self, out: &mut StepOutcome, payload: Vec<u8>) {
        let r = self.h.deliver(&payload);
        out.receipts.push(r);
        out.sent.push(payload);
    }

    fn measure_probe(&mut self, label: &str) -> Option<Measurement> {
        let (source, duration) = reference_probe();
        let l = self.h.play_and_measure(source, duration, self.keep_signals)?;
        self.keep(label, l.signals);
        Some(l.measurement)
    }

    fn keep(&mut self, label: &str, signals: Option<Signals>) {
        if let Some(signals) = signals {
            self.evidence.push(Evidence {
                label: label.to_string(),
                rate: self.board.audio.output_sample_rate,
                signals,
            });
        }
    }

    fn step(&mut self, n: usize, line: u64, step: &Step) {
        let now = self.now();
        self.advance_to(now);
        let started = self.now();
        let mut out = StepOutcome::new(started);
        let mut summary;
        let expect: Option<&Expect>;
        match step {
            Step::Initialize(s) => {
                let id = self.alloc_id(s.id);
                out.id = Some(id);
                let caps = match &s.vision_url {
                    Some(url) => {
                        let mut vision = serde_json::Map::new();
                        vision.insert("url".into(), url.clone().into());
                        if let Some(t) = &s.vision_token {
                            vision.insert("token".into(), t.clone().into());
                        }
                        serde_json::json!({ "vision": vision })
                    }
                    None => serde_json::json!({}),
                };
                let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":caps}});
                self.deliver(&mut out, payload.to_string().into_bytes());
                self.settle();
                summary = format!("initialize id {id}");
                expect = Some(&s.expect);
            }
            Step::ListTools(s) => {
                let mut names = Vec::new();
                let mut pages = 0;
                let mut cursor = s.cursor.clone();
                let mut last_cursor = None;
                loop {
                    let id = self.alloc_id(None);
                    let mut params = serde_json::Map::new();
                    if let Some(c) = &cursor {
                        params.insert("cursor".into(), c.clone().into());
                    }
                    if s.with_user_tools {
                        params.insert("withUserTools".into(), true.into());
                    }
                    let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params});
                    self.deliver(&mut out, payload.to_string().into_bytes());
                    self.settle();
                    let replies = self.take_replies();
                    let page = replies
                        .iter()
                        .find(|(p, _)| reply_id(p) == Some(id))
                        .map(|(p, _)| p.clone());
                    out.replies.extend(replies);
                    let Some(page) = page else { break };
                    let v: serde_json::Value = serde_json::from_slice(&page).unwrap_or_default();
                    let Some(tools) = v["result"]["tools"].as_array() else {
                        break;
                    };
                    pages += 1;
                    names.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_string)));
                    last_cursor = v["result"]["nextCursor"].as_str().map(str::to_string);
                    match (&last_cursor, s.follow) {
                        (Some(c), true) if pages < 64 => cursor = Some(c.clone()),
                        _ => break,
                    }
                }
                summary = format!(
                    "tools/list{}: {} tools on {pages} page(s){}",
                    if s.with_user_tools { " withUserTools" } else { "" },
                    names.len(),
                    last_cursor
                        .as_ref()
                        .map(|c| format!(", nextCursor {c} not followed"))
                        .filter(|_| !s.follow)
                        .unwrap_or_default()
                );
                out.listed = Some((names, pages, last_cursor));
                expect = Some(&s.expect);
            }
            Step::Call(c) => {
                let id = self.alloc_id(c.id);
                out.id = Some(id);
                let tool = c.tool.value.clone();
                let before = snapshot(&self.h.device);
                if c.acoustic {
                    out.previous = self.measure_probe(&format!("step{n}-before"));
                    let now = self.now();
                    self.advance_to(now + SimDuration::from_millis(200));
                }
                let at = self.now();
                self.deliver(&mut out, call_request(id, &tool, c.args.as_ref()));
                self.settle();
                out.replies.extend(self.take_replies());
                if c.acoustic && self.h.device.is_running() {
                    let now = self.now();
                    self.advance_to(now + SimDuration::from_millis(200));
                    out.measurement = self.measure_probe(&format!("step{n}-after"));
                }
                let after = snapshot(&self.h.device);
                self.collect_trace(&mut out);
                let record = self.record(n, &tool, id, at, c.decision.as_deref(), &before, &after, &out);
                summary = format!("tools/call {tool} id {id}");
                self.records.push(record);
                expect = Some(&c.expect);
            }
            Step::Send(s) => {
                let payload = s.payload.clone().into_bytes();
                out.id = serde_json::from_slice::<serde_json::Value>(&payload)
                    .ok()
                    .and_then(|v| v["id"].as_f64())
                    .map(|f| crate::cjson::valueint(f) as i64);
                self.deliver(&mut out, payload);
                self.settle();
                summary = format!("sent {} bytes", s.payload.len());
                expect = Some(&s.expect);
            }
            Step::Burst(b) => {
                for p in &b.payloads {
                    self.deliver(&mut out, p.clone().into_bytes());
                }
                self.settle();
                summary = format!("burst of {} payloads parsed before the main task ran", b.payloads.len());
                expect = Some(&b.expect);
            }
            Step::Wait(d) => {
                let t = self.now() + d.0;
                self.advance_to(t);
                summary = format!("waited {}", d.0);
                expect = None;
            }
            Step::Readback(r) => {
                let id = self.alloc_id(None);
                out.id = Some(id);
                self.deliver(&mut out, call_request(id, "self.get_device_status", None));
                self.settle();
                out.replies.extend(self.take_replies());
                let status = out
                    .reply_for(id)
                    .and_then(|(p, _)| reply_text(p))
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
                let value = status.as_ref().map(|s| r.path.split('.').fold(s, |v, k| &v[k]).clone());
                summary = format!(
                    "readback {} = {}",
                    r.path,
                    value
                        .as_ref()
                        .map_or_else(|| "(no status reply)".to_string(), |v| v.to_string())
                );
                out.readback = value;
                expect = Some(&r.expect);
            }
            Step::Play(p) => {
                let (source, natural) = if let Some(wav) = &p.wav {
                    match self.resources.load_wav(wav) {
                        Ok((rate, samples)) => {
                            let s = Source::Pcm {
                                rate,
                                samples: samples.into(),
                            };
                            let d = s.natural_duration().unwrap_or(SimDuration::from_secs(1));
                            (Some(s), d)
                        }
                        Err(e) => {
                            self.checks.push(Check {
                                step: n,
                                line,
                                what: "play wav".into(),
                                passed: false,
                                detail: e,
                            });
                            (None, SimDuration::ZERO)
                        }
                    }
                } else {
                    let t = p
                        .tone
                        .clone()
                        .unwrap_or(crate::scenario::Tone { hz: 1000.0, dbfs: -6.0 });
                    (Some(Source::probe(t.hz, t.dbfs)), SimDuration::from_millis(1000))
                };
                summary = "play: nothing".to_string();
                if let Some(source) = source {
                    let d = p.duration.map_or(natural, |d| d.0) + PROBE_GUARD;
                    summary = format!("played {} for {d}", source.describe());
                    out.previous = self.last.clone();
                    match self.h.play_and_measure(source, d, self.keep_signals) {
                        Some(l) => {
                            self.keep(&format!("step{n}-play"), l.signals);
                            out.measurement = Some(l.measurement);
                        }
                        None => summary.push_str(" (the device is not running: nothing played)"),
                    }
                }
                expect = Some(&p.expect);
            }
            Step::Listen(l) => {
                out.previous = self.last.clone();
                let listening = self.h.listen(l.duration.0, self.keep_signals);
                self.keep(&format!("step{n}-listen"), listening.signals);
                out.measurement = Some(listening.measurement);
                summary = format!("listened for {}", l.duration.0);
                expect = Some(&l.expect);
            }
            Step::Press(p) => {
                let action = self.board.buttons.iter().find(|b| b.name == p.button).map(|b| {
                    if p.long {
                        b.long_press.unwrap_or(b.click)
                    } else {
                        b.click
                    }
                });
                let now = self.now();
                summary = format!("pressed {}{}", p.button, if p.long { " (long)" } else { "" });
                match action {
                    Some(ButtonAction::VolumeUp) => self.h.device.press_volume(now, 10, false),
                    Some(ButtonAction::VolumeDown) => self.h.device.press_volume(now, -10, false),
                    Some(ButtonAction::VolumeMax) => self.h.device.press_volume(now, 1, true),
                    Some(ButtonAction::VolumeMin) => self.h.device.press_volume(now, -1, true),
                    Some(ButtonAction::ToggleChat | ButtonAction::StartListening) => {
                        summary.push_str(": asks to open the audio channel (no server in an offline run)")
                    }
                    None => summary.push_str(": no such button"),
                }
                self.settle();
                expect = Some(&p.expect);
            }
            Step::Reboot => {
                let now = self.now();
                self.h.device.reset(now);
                self.settle();
                summary = "hardware reset".to_string();
                expect = None;
            }
            Step::CutPower => {
                let now = self.now();
                self.h.device.cut_power(now);
                summary = "power cut".to_string();
                expect = None;
            }
            Step::PowerOn => {
                self.h.power_on();
                self.settle();
                summary = "power on".to_string();
                expect = None;
            }
            Step::Fault(f) => {
                let now = self.now();
                let (fault, on) = match (f.set, f.clear) {
                    (Some(x), _) => (x, true),
                    (None, Some(x)) => (x, false),
                    (None, None) => unreachable!("validated at load"),
                };
                fault.apply(&mut self.h.device, now, on);
                summary = format!(
                    "{} fault {}{}",
                    if on { "set" } else { "cleared" },
                    fault.name(),
                    if fault.needs_boot() {
                        " (takes effect at the next boot)"
                    } else {
                        ""
                    }
                );
                expect = None;
            }
            Step::Busy(d) => {
                let now = self.now();
                self.h.device.busy(now, d.0);
                summary = format!("main task busy for {}", d.0);
                expect = None;
            }
            Step::Note(text) => {
                summary = text.clone();
                expect = None;
            }
        }
        if !matches!(step, Step::Call(_) | Step::ListTools(_) | Step::Readback(_)) {
            out.replies.extend(self.take_replies());
        }
        self.collect_trace(&mut out);
        if let Some(m) = &out.measurement {
            self.last = Some(m.clone());
        }
        if let Some(e) = expect {
            self.evaluate(n, line, e, &out);
        }
        self.steps.push(StepReport {
            n,
            line,
            kind: step_kind(step).to_string(),
            at_ms: started.as_micros() as f64 / 1000.0,
            summary,
            sent: out.sent.iter().map(|p| lossy(p)).collect(),
            replies: out.replies.iter().map(|(p, _)| lossy(p)).collect(),
            measurement: out.measurement.take(),
        });
        let mut events = std::mem::take(&mut out.events).into_iter();
        for len in out.chunks {
            self.trace.push_chunk(events.by_ref().take(len));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        n: usize,
        tool: &str,
        id: i64,
        at: SimTime,
        decision: Option<&str>,
        before: &Snapshot,
        after: &Snapshot,
        out: &StepOutcome,
    ) -> Record {
        let discovery = self.discovery.describe(tool, &self.board);
        let decision = format!(
            "{}; state before: {}; request id {id} at {at}",
            decision.unwrap_or("(no decision recorded)"),
            describe_snapshot(before)
        );
        let parameters = match out.receipts.first() {
            Some(Receipt::Scheduled { args, .. }) => {
                let props = self
                    .h
                    .device
                    .mcp()
                    .and_then(|m| m.find(tool.as_bytes()).map(|i| m.tool(i).properties().to_vec()))
                    .unwrap_or_default();
                if props.is_empty() {
                    "no parameters; queued for the main task (2 hops)".to_string()
                } else {
                    let shown: Vec<String> = props
                        .iter()
                        .zip(args)
                        .map(|(p, v)| {
                            let value = match v {
                                crate::mcp::PropertyValue::Bool(b) => b.to_string(),
                                crate::mcp::PropertyValue::Int(i) => i.to_string(),
                                crate::mcp::PropertyValue::Str(s) => format!("{:?}", lossy(s)),
                            };
                            let range = p.range().map(|(a, b)| format!(" (range {a}..{b})")).unwrap_or_default();
                            format!("{} = {value}{range}", p.name())
                        })
                        .collect();
                    format!(
                        "accepted: {}; the callback runs on the main task (2 hops)",
                        shown.join(", ")
                    )
                }
            }
            Some(Receipt::Answered { is_error: true, .. }) => {
                let msg = out
                    .reply_for(id)
                    .and_then(|(p, _)| reply_error(p))
                    .map(|m| lossy(&m))
                    .unwrap_or_default();
                format!("rejected before the callback: \"{msg}\" (1 hop); the callback never ran")
            }
            Some(Receipt::Answered { .. }) => "answered on the receive task (1 hop)".to_string(),
            Some(Receipt::Dropped { reason }) => format!("dropped silently on the receive task: {}", reason.as_str()),
            Some(Receipt::NotRunning) => "lost: the device was not running".to_string(),
            Some(Receipt::OutOfMemory) => "dropped: parsing ran out of heap".to_string(),
            None => "not sent".to_string(),
        };
        let response = match out.reply_for(id) {
            Some((p, t)) => {
                let shape = match (reply_text(p), reply_error(p)) {
                    (Some(text), _) => format!("result text {text:?} (isError false)"),
                    (None, Some(e)) => format!("error \"{}\"", lossy(&e)),
                    _ => format!("raw {:?}", lossy(p)),
                };
                let valid = is_valid_json(p);
                format!(
                    "id {} → {shape}, {} after the request{}",
                    coerced(id),
                    t.saturating_since(at),
                    if valid { "" } else { "; NOT valid JSON" }
                )
            }
            None => {
                let why = out
                    .events
                    .iter()
                    .find_map(|e| match &e.kind {
                        Event::ReplyDropped { payload, why } if reply_id(payload) == Some(coerced(id)) => {
                            Some(format!("queued, then dropped ({why})"))
                        }
                        _ => None,
                    })
                    .or_else(|| match out.receipts.first() {
                        Some(Receipt::Dropped { reason }) => Some(format!("dropped on receipt ({})", reason.as_str())),
                        _ => None,
                    })
                    .unwrap_or_else(|| "no reply while the device ran to idle".to_string());
                format!("never sent: {why}")
            }
        };
        let (effect, missing) = self.effect(tool, before, after, out);
        Record {
            step: n,
            tool: tool.to_string(),
            id,
            discovery,
            decision,
            parameters,
            response,
            effect,
            missing,
        }
    }

    /// The effect row: software readback after the call and the measured physical effect.
    fn effect(&self, tool: &str, before: &Snapshot, after: &Snapshot, out: &StepOutcome) -> (String, Vec<String>) {
        let action = self
            .h
            .device
            .mcp()
            .and_then(|m| m.find(tool.as_bytes()).map(|i| m.tool(i).action().clone()));
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        let acoustic = |parts: &mut Vec<String>, missing: &mut Vec<String>| match (&out.previous, &out.measurement) {
            (Some(a), Some(b)) => parts.push(format!(
                "heard {} → {} ({}, {})",
                level(a),
                level(b),
                match (a.spl_db, b.spl_db) {
                    (Some(x), Some(y)) => format!("{:+.1} dB", y - x),
                    _ => "level change n/a".to_string(),
                },
                if perceived_change(a, b) {
                    "perceived change"
                } else {
                    "no perceived change"
                }
            )),
            _ => missing.push("acoustic measurement (add `acoustic: true`)".to_string()),
        };
        match action {
            Some(ToolAction::SetVolume) => {
                parts.push(format!(
                    "readback volume {} → {}",
                    opt(before.volume),
                    opt(after.volume)
                ));
                acoustic(&mut parts, &mut missing);
            }
            Some(ToolAction::SetBrightness) => {
                parts.push(format!(
                    "readback brightness {} → {} (in-flight value at reply time)",
                    opt(before.brightness),
                    opt(after.brightness)
                ));
            }
            Some(ToolAction::SetTheme) => {
                parts.push(format!(
                    "display theme {} → {}",
                    before.theme.clone().unwrap_or_else(|| "-".into()),
                    after.theme.clone().unwrap_or_else(|| "-".into())
                ));
            }
            Some(
                ToolAction::LampTurnOn { gpio } | ToolAction::LampTurnOff { gpio } | ToolAction::LampGetState { gpio },
            ) => {
                let level = |s: &Snapshot| {
                    s.gpio
                        .iter()
                        .find(|(g, _)| *g == gpio)
                        .map_or("-".to_string(), |(_, on)| u8::from(*on).to_string())
                };
                parts.push(format!(
                    "GPIO {gpio} level {} → {} (software flag = readback)",
                    level(before),
                    level(after)
                ));
            }
            Some(ToolAction::Reboot) => {
                if after.boots > before.boots {
                    parts.push(format!(
                        "device came back: boot {} → {}; volume after boot {}",
                        before.boots,
                        after.boots,
                        opt(after.volume)
                    ));
                } else {
                    parts.push("no reboot observed yet".to_string());
                    missing.push("evidence that the device came back".to_string());
                }
            }
            Some(_) => parts.push("no physical effect modelled for this tool; software state unchanged".to_string()),
            None => parts.push("no callback ran (unknown tool)".to_string()),
        }
        if out.has(EventName::Panicked) {
            parts.push("the device PANICKED and rebooted during the call".to_string());
        }
        (parts.join("; "), missing)
    }

    fn evaluate(&mut self, n: usize, line: u64, e: &Expect, out: &StepOutcome) {
        let mut checks = Vec::new();
        let mut check = |what: String, passed: bool, detail: String| {
            checks.push(Check {
                step: n,
                line,
                what,
                passed,
                detail,
            });
        };
        let primary = out.id.and_then(|id| out.reply_for(id)).or(out.replies.first());
        let shown = |p: Option<&(Vec<u8>, SimTime)>| p.map_or_else(|| "no reply".to_string(), |(b, _)| lossy(b));
        if let Some(want) = &e.reply {
            let got = primary.map(|(p, _)| lossy(p));
            check(
                format!("reply is {want}"),
                got.as_deref() == Some(want.as_str()),
                shown(primary),
            );
        }
        if let Some(want) = &e.text {
            let got = primary.and_then(|(p, _)| reply_text(p));
            check(
                format!("text is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(primary.is_some()))),
            );
        }
        if let Some(want) = &e.text_contains {
            let got = primary.and_then(|(p, _)| reply_text(p));
            check(
                format!("text contains {}", quoted_or(Some(want), "")),
                got.as_deref().unwrap_or_default().contains(want.as_str()),
                format!("got {}", quoted_or(got.as_deref(), no_text(primary.is_some()))),
            );
        }
        if let Some(want) = &e.error {
            let got = primary.and_then(|(p, _)| reply_error(p)).map(|m| lossy(&m));
            check(
                format!("error is {}", quoted_or(Some(want), "")),
                got.as_deref() == Some(want.as_str()),
                format!("got {}", shown(primary)),
            );
        }
        if let Some(want) = e.valid_json {
            let got = primary.map(|(p, _)| is_valid_json(p));
            check(
                format!("reply is {}valid JSON", if want { "" } else { "not " }),
                got == Some(want),
                shown(primary),
            );
        }
        if let Some(want) = e.reply_id {
            let got = primary.and_then(|(p, _)| reply_id(p));
            check(
                format!("reply id is {want}"),
                got == Some(want),
                match (got, primary) {
                    (Some(id), _) => format!("got {id}"),
                    (None, Some(_)) => "got a reply without an integer id".into(),
                    (None, None) => "got no reply".into(),
                },
            );
        }
        if let Some(d) = e.no_reply_within {
            let limit = out.started + d.0;
            let found = out.id.and_then(|id| out.reply_for(id)).filter(|(_, t)| *t <= limit);
            check(format!("no reply within {}", d.0), found.is_none(), shown(found));
        }
        if let Some(d) = e.reply_within {
            let limit = out.started + d.0;
            let found = primary.filter(|(_, t)| *t <= limit);
            check(
                format!("reply within {}", d.0),
                found.is_some(),
                primary.map_or("no reply".into(), |(_, t)| {
                    format!("reply after {}", t.saturating_since(out.started))
                }),
            );
        }
        if let Some(want) = e.dropped {
            let got = out.receipts.iter().any(|r| matches!(r, Receipt::Dropped { .. }));
            check(
                format!("dropped on receipt: {want}"),
                got == want,
                describe_receipts(&out.receipts),
            );
        }
        if let Some(order) = &e.reply_order {
            let got: Vec<i64> = out.replies.iter().filter_map(|(p, _)| reply_id(p)).collect();
            check(
                format!("replies leave in the order {}", ids(order)),
                &got == order,
                format!("got {}", if got.is_empty() { "no reply".into() } else { ids(&got) }),
            );
        }
        if let Some(want) = &e.value {
            let got = out.readback.clone().unwrap_or(serde_json::Value::Null);
            check(format!("readback is {want}"), &got == want, format!("got {got}"));
        }
        if let Some((names, pages, _)) = &out.listed {
            for t in &e.contains {
                check(
                    format!("list contains {t}"),
                    names.contains(t),
                    format!("{} tools listed", names.len()),
                );
            }
            for t in &e.absent {
                check(
                    format!("list lacks {t}"),
                    !names.contains(t),
                    format!("{} tools listed", names.len()),
                );
            }
            if let Some(p) = e.pages {
                check(format!("{p} page(s)"), *pages == p, format!("got {pages}"));
            }
        }
        let m = out.measurement.as_ref();
        if let Some(want) = e.audible {
            let got = m.map(|m| m.verdict.is_audible());
            check(format!("audible: {want}"), got == Some(want), describe_measurement(m));
        }
        if let Some(want) = &e.verdict {
            let got = m.map(|m| m.verdict.name());
            check(
                format!("verdict {want}"),
                got == Some(want.as_str()),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.spl_db {
            check(
                format!("level {} ± {} dB SPL", a.value, a.tolerance),
                approx(m.and_then(|m| m.spl_db), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.i2s_dbfs {
            check(
                format!("I2S {} ± {} dBFS", a.value, a.tolerance),
                approx(m.and_then(|m| m.i2s_dbfs), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.change_db {
            let change = match (out.previous.as_ref().and_then(|p| p.spl_db), m.and_then(|m| m.spl_db)) {
                (Some(x), Some(y)) => Some(y - x),
                _ => None,
            };
            check(
                format!("level change {:+} ± {} dB", a.value, a.tolerance),
                approx(change, a),
                change.map_or("no level to compare".into(), |c| format!("changed {c:+.2} dB")),
            );
        }
        if let Some(want) = e.perceived_change {
            let got = match (&out.previous, m) {
                (Some(a), Some(b)) => Some(perceived_change(a, b)),
                _ => None,
            };
            check(
                format!("perceived change: {want}"),
                got == Some(want),
                got.map_or("no measurement to compare".into(), |g| format!("got {g}")),
            );
        }
        if let Some(want) = e.record_complete {
            let record = self.records.iter().rev().find(|r| r.step == n);
            let got = record.map(Record::is_complete);
            let detail = record.map_or("no record for this step".to_string(), |r| {
                if r.missing.is_empty() {
                    "every row has evidence".to_string()
                } else {
                    format!("missing {}", r.missing.join(", "))
                }
            });
            self.checks.push(Check {
                step: n,
                line,
                what: format!("record complete: {want}"),
                passed: got == Some(want),
                detail,
            });
        }
        for name in &e.events {
            check(
                format!("event {name}"),
                out.has(*name),
                format!("{} events in the step", out.events.len()),
            );
        }
        for name in &e.no_events {
            check(
                format!("no event {name}"),
                !out.has(*name),
                format!("{} events in the step", out.events.len()),
            );
        }
        self.checks.extend(checks);
    }
}

fn approx(v: Option<f64>, a: Approx) -> bool {
    v.is_some_and(|x| (x - a.value).abs() <= a.tolerance)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

fn level(m: &Measurement) -> String {
    match m.spl_db {
        Some(l) => format!("{l:.1} dB SPL"),
        None => "silence".to_string(),
    }
}

fn describe_measurement(m: Option<&Measurement>) -> String {
    match m {
        None => "nothing measured".to_string(),
        Some(m) => format!(
            "{} ({}; I2S {}; playing {:.2}, i2s_running {:.2}, amp_enabled {:.2})",
            m.verdict.name(),
            level(m),
            m.i2s_dbfs.map_or("null".into(), |x| format!("{x:.2} dBFS")),
            m.playing,
            m.i2s_running,
            m.amp_enabled
        ),
    }
}

fn describe_snapshot(s: &Snapshot) -> String {
    if !s.running {
        return "device not running".to_string();
    }
    let mut parts = vec![format!("volume {}", opt(s.volume))];
    if let Some(b) = s.brightness {
        parts.push(format!("brightness {b}"));
    }
    if let Some(t) = &s.theme {
        parts.push(format!("theme {t}"));
    }
    for (g, on) in &s.gpio {
        parts.push(format!("GPIO {g} {}", if *on { "on" } else { "off" }));
    }
    parts.join(", ")
}

/// A step's name as written in the scenario file.
pub(crate) fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Initialize(_) => "initialize",
        Step::ListTools(_) => "list_tools",
        Step::Call(_) => "call",
        Step::Send(_) => "send",
        Step::Burst(_) => "burst",
        Step::Wait(_) => "wait",
        Step::Readback(_) => "readback",
        Step::Play(_) => "play",
        Step::Listen(_) => "listen",
        Step::Press(_) => "press",
        Step::Reboot => "reboot",
        Step::CutPower => "cut_power",
        Step::PowerOn => "power_on",
        Step::Fault(_) => "fault",
        Step::Busy(_) => "busy",
        Step::Note(_) => "note",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_fields_are_read_without_trusting_the_json() {
        let p = br#"{"jsonrpc":"2.0","id":144,"error":{"message":"Unknown tool: self.x"y"}}"#;
        assert_eq!(reply_id(p), Some(144));
        assert_eq!(reply_error(p), Some(br#"Unknown tool: self.x"y"#.to_vec()));
        assert_eq!(reply_text(p), None);
        let p = br#"{"jsonrpc":"2.0","id":-7,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#;
        assert_eq!(reply_id(p), Some(-7));
        assert_eq!(reply_text(p).as_deref(), Some("true"));
    }

    #[test]
    fn call_requests_print_as_serde_json_does() {
        let tools = ["self.reboot", "a\"b\\c\u{1}é", ""];
        let args = [
            None,
            Some(serde_json::json!({"volume": 35})),
            Some(serde_json::json!({"z": [1, 2.5, null], "a": {"b": "x\ny"}})),
            Some(serde_json::json!("not an object")),
        ];
        for id in [0, 7, -7, i64::MAX, i64::MIN] {
            for tool in tools {
                for a in &args {
                    let mut params = serde_json::Map::new();
                    params.insert("name".into(), tool.into());
                    if let Some(a) = a {
                        params.insert("arguments".into(), a.clone());
                    }
                    let want = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params});
                    assert_eq!(
                        String::from_utf8(call_request(id, tool, a.as_ref())).unwrap(),
                        want.to_string()
                    );
                }
            }
        }
    }

    #[test]
    fn plain_reply_texts_read_as_serde_json_does() {
        let serde_text = |p: &[u8]| {
            let v: serde_json::Value = serde_json::from_slice(p).ok()?;
            v["result"]["content"][0]["text"].as_str().map(str::to_string)
        };
        let wrap = |id: &str, text: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}}}"#
            )
        };
        for id in ["0", "7", "-7", "2147483647", "007", "+7", "-", "", "1.5", "1e3", "-0"] {
            for text in [
                "true",
                "",
                "a b",
                r#"\"q\""#,
                r#"\u00e9"#,
                "\u{e9}",
                "\u{1}",
                "a\\",
                r#"x"}],"isError":false}}"#,
                r#"{\"audio_speaker\":{\"volume\":10}}"#,
                r#"a\\b\/c\n\t\ud83d\ude00"#,
                r#"\ud800"#,
                r#"\x"#,
                r#"x","type":"text"#,
                r#"x","text":"y"#,
                r#"x\"#,
            ] {
                let p = wrap(id, text);
                assert_eq!(reply_text(p.as_bytes()), serde_text(p.as_bytes()), "{p}");
                let valid = serde_json::from_slice::<serde_json::Value>(p.as_bytes()).is_ok();
                assert_eq!(is_valid_json(p.as_bytes()), valid, "{p}");
            }
        }
        let p = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}],\"isError\":false}}";
        assert_eq!(reply_text(p), None);
        assert!(!is_valid_json(p));
    }

    #[test]
    fn page_names_read_every_page_as_serde_json_does() {
        let check = |result: &[u8], listed: usize, registry: &[McpTool]| {
            assert_eq!(page_names(result, listed, registry), parse_page_names(result));
        };
        for file in [
            "bread-compact-wifi.yaml",
            "bread-compact-wifi-lcd.yaml",
            "bread-compact-wifi-s3cam.yaml",
            "otto-robot.yaml",
            "lckfb/szpi-esp32c3.yaml",
            "waveshare/esp32-s3-audio-board.yaml",
        ] {
            let path = format!("{}/../boards/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("shipped board");
            let board = Arc::new(BoardSpec::from_yaml(&path, &text).expect("board"));
            let mut h = Harness::new(Device::new(board, WorldSpec::conformance(), 1));
            h.power_on();
            let _ = h.run_until_idle();
            let mcp = h.device.mcp().expect("booted");
            for with_user in [false, true] {
                for page in mcp.pages(with_user) {
                    let ToolsPage::Page { result, tools, .. } = page else {
                        break;
                    };
                    let recognized = recognize_page(&result, mcp.tools());
                    assert_eq!(recognized.map(|n| n.len()), Some(tools), "{file}");
                    check(&result, tools, mcp.tools());
                }
            }
        }
        // Hand-made registries and pages: escapes, a NUL, duplicates, pages out of shape.
        let tool = |name: &str| McpTool::new(name, "d \"q\"", Vec::new(), false, ToolAction::Reboot);
        let registry = [tool("a\"b"), tool("c\\"), tool("x\u{0}y"), tool("\u{e9}\n")];
        let json = |i: usize| String::from_utf8(registry[i].json().to_vec()).expect("UTF-8");
        let pages = [
            format!(r#"{{"tools":[{},{},{}]}}"#, json(0), json(1), json(3)),
            format!(r#"{{"tools":[{}],"nextCursor":"z"}}"#, json(2)),
            format!(r#"{{"tools":[{},{}]}}"#, json(0), json(0)),
            format!(r#"{{"tools":[{}x]}}"#, json(1)),
            r#"{"tools":[{"name":"a","name":"b"}]}"#.to_string(),
            r#"{"tools":[{"name":1},{"name":"q"}]}"#.to_string(),
            r#"{"tools":[]}"#.to_string(),
            String::new(),
        ];
        for page in &pages {
            for listed in 0..4 {
                check(page.as_bytes(), listed, &registry);
            }
        }
        check(b"{\"tools\":[{\"name\":\"\xff\"}]}", 1, &registry);
        assert_eq!(
            page_names(pages[0].as_bytes(), 3, &registry),
            ["a\"b", "c\\", "\u{e9}\n"]
        );
        assert_eq!(page_names(pages[1].as_bytes(), 1, &registry), ["x"]);
    }
}
