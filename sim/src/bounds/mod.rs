//! Bound properties of tool parameters, reusable on any board (docs/reference/firmware.md §2.2, §2.3, §4.5).
//!
//! For every parameter of every tool a board registers, three promises:
//!
//! * **numbers** (integer parameters): any JSON number is accepted iff its `valueint`
//!   (truncation toward zero, saturation at ±2^31) lies in the range; a rejected call answers the
//!   exact firmware message and leaves the device untouched (the callback never ran); an accepted
//!   call hands the truncated value to the callback, which stores it where the tool stores things
//!   (volume, brightness, a GPIO flag, an NVS key).
//! * **wrong types**: a value of another JSON type gives `Missing valid argument: <name>` for a
//!   required parameter and the default, silently, for an optional one.
//! * **key spelling**: argument keys match ASCII case-insensitively and the first match wins.
//!
//! The oracle ([`expected_valueint`], [`expected_integer`], the expected replies) is written from
//! docs/reference/firmware.md §2.1–§2.3 and §4.5, not from [`crate::cjson`] or [`crate::mcp`]: it reads numbers with Rust's own
//! `f64` parser and builds reply bytes by hand. [`check_board`] runs the promises on a booted
//! board with proptest's shrinking runner (what `xiaozhi-twin check-bounds` prints);
//! [`json_number`], [`wrong_type_value`] and [`key_spelling`] are the generators and
//! [`BoundChecker`] checks single cases, for a board author's own tests.
//!
//! Determinism: the generators draw from a seeded ChaCha RNG of their own (never the device's),
//! shrinking is bounded by a number of steps rather than by time, and failures are not persisted
//! to files, so the same board, cases and seed give the same report.

use crate::hw::nvs::names;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

mod generate;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::board::{Behavior, BoardSpec, BoardTool};
use crate::device::{Device, DeviceSnapshot, Receipt};
use crate::harness::Harness;
use crate::mcp::{McpServer, Property, PropertyType, PropertyValue, ToolAction};
use crate::time::SimDuration;
use crate::trace::{Event, NvsValue};
use crate::world::WorldSpec;

/// How long the checker lets the device run between cases: longer than any backlight fade
/// (100 steps of 5 ms), so every case starts from a settled device.
pub const SETTLE: SimDuration = SimDuration::from_secs(2);

/// Shrinking stops after this many steps (bounded work, no time limit).
pub const MAX_SHRINK_STEPS: u32 = 2048;

// ---------------------------------------------------------------------------------------------
// The oracle, from docs/reference/firmware.md
// ---------------------------------------------------------------------------------------------

/// True for the number tokens `strtod` and Rust's `f64` parser read alike:
/// `-?D+(.D*)?([eE][+-]?D+)?` (so `01`, `4.`, `1.e5`, `-0` are in; `+5`, `.5`, `1e`, `0x10` out).
pub fn is_number_token(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        digits(&mut i);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// cJSON's `valueint` for a number token (docs/reference/firmware.md §2.3): `d` is the correctly rounded
/// double (as glibc's and newlib's `strtod` give it), then `INT_MAX` when `d ≥ 2147483647`,
/// `INT_MIN` when `d ≤ −2147483648`, otherwise `d` truncated toward zero. `None` when `text` is
/// not a token of `is_number_token` or its exponent has more than 4 digits (Rust's parser is
/// only exact below that when a long mantissa compensates the exponent).
pub fn expected_valueint(text: &str) -> Option<i32> {
    if !is_number_token(text) {
        return None;
    }
    if let Some(e) = text.find(['e', 'E'])
        && text[e + 1..].trim_start_matches(['+', '-']).len() > 4
    {
        return None;
    }
    let d: f64 = text.parse().ok()?;
    Some(if d >= 2_147_483_647.0 {
        i32::MAX
    } else if d <= -2_147_483_648.0 {
        i32::MIN
    } else {
        d.trunc() as i32
    })
}

/// The argument walk's verdict on an integer (docs/reference/firmware.md §4.5 step 2): the value, or the exact
/// error message the firmware replies with (interface data, so a string).
pub fn expected_integer(property: &Property, value: i32) -> Result<i32, String> {
    match property.range() {
        Some((min, _)) if value < min => Err(format!("Value is below minimum allowed: {min}")),
        Some((_, max)) if value > max => Err(format!("Value exceeds maximum allowed: {max}")),
        _ => Ok(value),
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"error":{"message":"<message>"}}`, message inserted raw (§4.6).
pub fn expected_error_reply(id: i32, message: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"message":"{message}"}}}}"#).into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Parameters of a board
// ---------------------------------------------------------------------------------------------

/// One parameter of one callable tool.
#[derive(Clone, Debug)]
pub struct Parameter {
    /// The tool's name.
    pub tool: String,
    /// Which of the tool's properties is under test.
    pub index: usize,
    /// All of the tool's properties, in declaration order.
    pub properties: Vec<Property>,
    /// What the tool does (decides which stored effect can be checked).
    pub action: ToolAction,
}

impl Parameter {
    /// The property under test (`properties[index]`).
    pub fn property(&self) -> &Property {
        &self.properties[self.index]
    }

    /// `self.audio_speaker.set_volume volume: integer 0..=100, required`.
    pub fn describe(&self) -> String {
        let p = self.property();
        let mut s = format!("{} {}: ", self.tool, p.name());
        s.push_str(match p.ty() {
            PropertyType::Boolean => "boolean",
            PropertyType::Integer => "integer",
            PropertyType::String => "string",
        });
        if let Some((min, max)) = p.range() {
            let _ = write!(s, " {min}..={max}");
        }
        match p.default() {
            None => s.push_str(", required"),
            Some(d) => {
                let _ = write!(s, ", default {}", value_text(d));
            }
        }
        s
    }
}

fn value_text(v: &PropertyValue) -> String {
    match v {
        PropertyValue::Bool(b) => b.to_string(),
        PropertyValue::Int(i) => i.to_string(),
        PropertyValue::Str(s) => json_string(&String::from_utf8_lossy(s)),
    }
}

/// Every parameter of every tool a `tools/call` can reach, in registry order. A tool shadowed by
/// an earlier one of the same name (docs/reference/firmware.md §4.8) is never called, so it is left out.
pub fn parameters(server: &McpServer) -> Vec<Parameter> {
    server
        .tools()
        .iter()
        .enumerate()
        .filter(|(i, t)| server.find(t.name().as_bytes()) == Some(*i))
        .flat_map(|(_, t)| {
            (0..t.properties().len()).map(move |index| Parameter {
                tool: t.name().to_string(),
                index,
                properties: t.properties().to_vec(),
                action: t.action().clone(),
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

use generate::distinct_valid_value;
pub use generate::{json_number, json_string, key_spelling, valid_value, wrong_type_value};

// ---------------------------------------------------------------------------------------------
// Checking single cases
// ---------------------------------------------------------------------------------------------

/// What the argument walk should make of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// A 1-hop error reply with this message; the callback never runs.
    Rejected(String),
    /// The call is scheduled and the callback receives this value for the parameter.
    Accepted(PropertyValue),
}

/// How a case that held turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted, and the callback stored the expected value.
    Accepted,
    /// Rejected with the exact message, device state untouched.
    Rejected,
}

/// What a case is judged against: the device's snapshot plus what a readback cannot see (the
/// NVS contents and the main task's queue), taken just before the case.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    device: DeviceSnapshot,
    nvs: String,
    pending: Vec<String>,
}

impl Snapshot {
    fn of(device: &Device) -> Snapshot {
        Snapshot {
            device: device.snapshot(),
            nvs: format!("{:?}", device.nvs()),
            pending: device.pending_tasks(),
        }
    }
}

/// Why a bound check did not pass: what was sent and what the device did instead (or why the
/// check could not run). Reads as its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

impl std::ops::Deref for Violation {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// A booted board that answers one bound case at a time (the device is reused; every case
/// starts after [`SETTLE`] and is judged against a snapshot taken just before it).
pub struct BoundChecker {
    harness: Harness,
    next_id: i32,
}

impl BoundChecker {
    /// Boots `spec` in the conformance world. `Err` when the board does not come up.
    pub fn new(spec: Arc<BoardSpec>) -> Result<BoundChecker, Violation> {
        let mut harness = Harness::new(Device::new(spec, WorldSpec::conformance(), 0));
        harness.power_on();
        harness.run_until_idle().map_err(|e| Violation(e.to_string()))?;
        if !harness.device.is_running() {
            return Err(Violation("the board did not boot".into()));
        }
        Ok(BoundChecker { harness, next_id: 1 })
    }

    /// The board's callable parameters.
    pub fn parameters(&self) -> Vec<Parameter> {
        self.harness.device.mcp().map(parameters).unwrap_or_default()
    }

    /// The booted device the cases run on.
    pub fn device(&self) -> &Device {
        &self.harness.device
    }

    /// Calls the tool with `number` (a JSON number token) for the parameter: accepted iff its
    /// `valueint` is in range, and then stored; otherwise the exact range error, state untouched.
    pub fn check_number(&mut self, p: &Parameter, number: &str) -> Result<Verdict, Violation> {
        let value = expected_valueint(number).ok_or_else(|| Violation(format!("`{number}` is not a number token")))?;
        let expected = match expected_integer(p.property(), value) {
            Ok(v) => Expected::Accepted(PropertyValue::Int(v)),
            Err(message) => Expected::Rejected(message),
        };
        let name = json_string(p.property().name());
        self.call(p, &format!("{name}:{number}"), &expected)
    }

    /// Calls the tool with `value` (JSON of a type the parameter does not take): `Missing valid
    /// argument: <name>` when required, the default when optional.
    pub fn check_wrong_type(&mut self, p: &Parameter, value: &str) -> Result<Verdict, Violation> {
        let expected = match p.property().default() {
            Some(d) => Expected::Accepted(d.clone()),
            None => Expected::Rejected(format!("Missing valid argument: {}", p.property().name())),
        };
        let name = json_string(p.property().name());
        self.call(p, &format!("{name}:{value}"), &expected)
    }

    /// Calls the tool with the parameter spelled `key` (an ASCII case variant of its name) and
    /// then again under its exact name with a `null`: the first, case-insensitive match wins.
    pub fn check_key_spelling(&mut self, p: &Parameter, key: &str) -> Result<Verdict, Violation> {
        if !key.eq_ignore_ascii_case(p.property().name()) {
            return Err(Violation(format!(
                "`{key}` is not a spelling of `{}`",
                p.property().name()
            )));
        }
        let (json, value) = distinct_valid_value(p.property());
        let exact = json_string(p.property().name());
        let args = format!("{}:{json},{exact}:null", json_string(key));
        self.call(p, &args, &Expected::Accepted(value))
    }

    /// One `tools/call` of `p.tool` with `first` (the member(s) for the parameter under test)
    /// followed by valid members for every other parameter, judged against `expected`.
    pub fn call(&mut self, p: &Parameter, first: &str, expected: &Expected) -> Result<Verdict, Violation> {
        self.settle();
        let id = self.next_id;
        self.next_id = if self.next_id >= 1_000_000_000 {
            1
        } else {
            self.next_id + 1
        };
        let mut arguments = first.to_string();
        for (i, sibling) in p.properties.iter().enumerate() {
            if i != p.index {
                let _ = write!(arguments, ",{}:{}", json_string(sibling.name()), valid_value(sibling).0);
            }
        }
        let payload = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{{{arguments}}}}}}}"#,
            json_string(&p.tool)
        );
        let before = Snapshot::of(&self.harness.device);
        let receipt = self.harness.deliver(payload.as_bytes());
        self.harness.run_until_idle().map_err(|e| Violation(e.to_string()))?;
        let replies: Vec<Vec<u8>> = self.harness.take_mcp_payloads();
        let events = self.harness.device.drain_events();
        let sent = payload.clone();
        let shown = |r: &[Vec<u8>]| {
            r.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
        };
        match expected {
            Expected::Rejected(message) => {
                let want = expected_error_reply(id, message);
                if receipt != (Receipt::Answered { id, is_error: true }) {
                    return Err(Violation(format!(
                        "{sent}: expected the 1-hop error `{message}`, the receive task gave {receipt:?}"
                    )));
                }
                if replies != [want.clone()] {
                    return Err(Violation(format!(
                        "{sent}: expected exactly {:?}, sent {:?}",
                        String::from_utf8_lossy(&want),
                        shown(&replies)
                    )));
                }
                let after = Snapshot::of(&self.harness.device);
                if after != before {
                    return Err(Violation(format!(
                        "{sent}: rejected, but the device changed: {before:?} -> {after:?}"
                    )));
                }
                if let Some(e) = events.iter().find(|e| {
                    !matches!(
                        e.kind,
                        Event::Logged { .. } | Event::BatchStarted { .. } | Event::ReplySent { .. }
                    )
                }) {
                    return Err(Violation(format!("{sent}: rejected, but something ran: {e}")));
                }
                Ok(Verdict::Rejected)
            }
            Expected::Accepted(value) => {
                let Receipt::Scheduled { id: got, args, .. } = &receipt else {
                    return Err(Violation(format!(
                        "{sent}: expected the call to be scheduled with {}, the receive task gave {receipt:?} and sent {:?}",
                        value_text(value),
                        shown(&replies)
                    )));
                };
                if *got != id || args.get(p.index) != Some(value) {
                    return Err(Violation(format!(
                        "{sent}: the callback was handed {:?}, expected {} for `{}`",
                        args,
                        value_text(value),
                        p.property().name()
                    )));
                }
                if let Some(reason) = events.iter().find_map(|e| match &e.kind {
                    Event::Panicked { reason } => Some(reason.clone()),
                    _ => None,
                }) {
                    return Err(Violation(format!(
                        "{sent}: the callback panicked ({reason}); the device rebooted"
                    )));
                }
                let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
                let ours = replies.iter().filter(|r| r.starts_with(prefix.as_bytes())).count();
                if ours != 1 || replies.len() != 1 {
                    return Err(Violation(format!(
                        "{sent}: expected one reply for id {id}, sent {:?}",
                        shown(&replies)
                    )));
                }
                self.harness.sleep(SETTLE);
                self.check_stored(p, value, &before)
                    .map_err(|e| Violation(format!("{sent}: {e}")))?;
                Ok(Verdict::Accepted)
            }
        }
    }

    /// The stored effect of an accepted call, where the tool stores its argument somewhere the
    /// twin can read back: the volume (and NVS), the backlight (after its fade), a GPIO flag, an
    /// NVS key.
    fn check_stored(&self, p: &Parameter, value: &PropertyValue, before: &Snapshot) -> Result<(), Violation> {
        let device = &self.harness.device;
        let after = device.snapshot();
        if after.state.is_none() {
            return Err(Violation("the device is not running after the call".into()));
        }
        let v = value.as_int();
        match &p.action {
            ToolAction::SetVolume => {
                let nvs = device.nvs().get_i32(names::AUDIO, names::OUTPUT_VOLUME, i32::MIN);
                let volume = after.volume.unwrap_or_default();
                if volume != v || nvs != v {
                    return Err(Violation(format!(
                        "volume {v} accepted, but readback {volume} and NVS {nvs}"
                    )));
                }
            }
            ToolAction::SetBrightness => {
                let b = after.brightness.map(i32::from);
                let nvs = device.nvs().get_i32(names::DISPLAY, names::BRIGHTNESS, i32::MIN);
                let unchanged = before.device.brightness.is_some_and(|now| i32::from(now) == v);
                if b != Some(v) || (nvs != v && !unchanged) {
                    return Err(Violation(format!(
                        "brightness {v} accepted, but after the fade the backlight reads {b:?} and NVS {nvs}"
                    )));
                }
            }
            ToolAction::Board(index) => {
                let Some(BoardTool::Tool(t)) = device.spec().board_tools.get(*index) else {
                    return Ok(());
                };
                let name = p.property().name();
                match &t.behavior {
                    Behavior::Gpio {
                        gpio, from: Some(from), ..
                    } if from == name => {
                        let want = match value {
                            PropertyValue::Bool(b) => *b,
                            other => other.as_int() != 0,
                        };
                        let got = after.gpio.get(gpio).copied();
                        if got != Some(want) {
                            let reads = got.map_or("as never set".to_string(), |l| format!("level {}", u8::from(l)));
                            return Err(Violation(format!(
                                "{} accepted, but GPIO {gpio} reads {reads}",
                                value_text(value)
                            )));
                        }
                    }
                    Behavior::NvsSet { namespace, key, from } if from == name => {
                        let want = match value {
                            PropertyValue::Int(i) => NvsValue::I32(*i),
                            PropertyValue::Bool(b) => NvsValue::U8(u8::from(*b)),
                            PropertyValue::Str(s) => NvsValue::Str(s.clone()),
                        };
                        let got = device.nvs().get(namespace, key);
                        if got != Some(&want) {
                            return Err(Violation(format!(
                                "{} accepted, but NVS {namespace}/{key} holds {got:?}",
                                value_text(value)
                            )));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Lets the device run for [`SETTLE`] and forgets what it sent or recorded meanwhile.
    fn settle(&mut self) {
        self.harness.sleep(SETTLE);
        self.harness.take_outputs();
        self.harness.device.drain_events();
    }
}

// ---------------------------------------------------------------------------------------------
// Running the properties on a whole board
// ---------------------------------------------------------------------------------------------

/// One of the three promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Check {
    /// Integer parameters: any JSON number, accepted iff its `valueint` is in range.
    Numbers,
    /// Every parameter: values of another JSON type.
    WrongTypes,
    /// Every parameter: case variants of the key, first match wins.
    KeySpelling,
}

impl Check {
    /// The three promises, in report order.
    pub const ALL: [Check; 3] = [Check::Numbers, Check::WrongTypes, Check::KeySpelling];

    /// The name reports use (`numbers`, `wrong types`, `key spelling`).
    pub fn name(self) -> &'static str {
        match self {
            Check::Numbers => "numbers",
            Check::WrongTypes => "wrong types",
            Check::KeySpelling => "key spelling",
        }
    }

    fn applies_to(self, p: &Property) -> bool {
        self != Check::Numbers || p.ty() == PropertyType::Integer
    }
}

/// How many cases, from which seed, which promises.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Generated cases per parameter and promise.
    pub cases: u32,
    /// Seed of the generators; each (parameter, promise) derives its own from it.
    pub seed: u64,
    /// Which promises to run, in this order.
    pub checks: Vec<Check>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cases: 256,
            seed: 0,
            checks: Check::ALL.to_vec(),
        }
    }
}

/// A promise that did not hold, with the smallest input proptest shrank it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The shrunk input (number text, wrong-type JSON or key spelling).
    pub input: String,
    /// What the twin did instead.
    pub reason: String,
}

/// One promise on one parameter.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Which promise.
    pub check: Check,
    /// Cases run (including shrinking steps after a failure).
    pub cases: u32,
    /// Cases that held with the call accepted.
    pub accepted: u32,
    /// Cases that held with the call rejected.
    pub rejected: u32,
    /// The broken promise's minimal input; `None` when it held.
    pub failure: Option<Failure>,
}

/// Every promise on one parameter.
#[derive(Clone, Debug)]
pub struct ParamReport {
    /// The parameter, as [`Parameter::describe`] puts it.
    pub parameter: String,
    /// One report per promise that applies to it.
    pub checks: Vec<CheckReport>,
}

/// Every promise on every parameter of one board.
#[derive(Clone, Debug)]
pub struct BoardReport {
    /// The board's name.
    pub board: String,
    /// What was run.
    pub settings: Settings,
    /// Set when the board did not boot (nothing was checked).
    pub boot_error: Option<String>,
    /// Every callable parameter with at least one applicable promise, in registry order.
    pub params: Vec<ParamReport>,
}

impl BoardReport {
    /// True when the board booted and every promise held.
    pub fn passed(&self) -> bool {
        self.boot_error.is_none() && self.failures().next().is_none()
    }

    /// `(parameter, check, failure)` for every promise that did not hold.
    pub fn failures(&self) -> impl Iterator<Item = (&str, Check, &Failure)> {
        self.params.iter().flat_map(|p| {
            p.checks
                .iter()
                .filter_map(move |c| c.failure.as_ref().map(|f| (p.parameter.as_str(), c.check, f)))
        })
    }

    /// The short report `xiaozhi-twin check-bounds` prints.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let checks: Vec<&str> = self.settings.checks.iter().map(|c| c.name()).collect();
        let _ = writeln!(
            out,
            "check-bounds {}: {} parameters, {} cases per promise ({}), seed {}",
            self.board,
            self.params.len(),
            self.settings.cases,
            checks.join(", "),
            self.settings.seed
        );
        if let Some(e) = &self.boot_error {
            let _ = writeln!(out, "  FAILED: {e}");
            return out;
        }
        for p in &self.params {
            let verdicts: Vec<String> = p
                .checks
                .iter()
                .map(|c| match (&c.failure, c.check) {
                    (Some(_), check) => format!("{} FAILED", check.name()),
                    (None, Check::Numbers) => {
                        format!("numbers ok ({} accepted, {} rejected)", c.accepted, c.rejected)
                    }
                    (None, check) => format!("{} ok", check.name()),
                })
                .collect();
            let _ = writeln!(out, "  {}: {}", p.parameter, verdicts.join("; "));
            for c in &p.checks {
                if let Some(f) = &c.failure {
                    let _ = writeln!(out, "    minimal input: {}", f.input);
                    let _ = writeln!(out, "    {}", f.reason);
                }
            }
        }
        let failed = self.failures().count();
        if failed == 0 {
            let _ = writeln!(out, "all bound promises hold");
        } else {
            let _ = writeln!(out, "{failed} promise(s) broken");
        }
        out
    }
}

/// A seed for one (parameter, promise), so that adding a tool does not change the cases of others.
fn case_seed(seed: u64, p: &Parameter, check: Check) -> [u8; 32] {
    // FNV-1a over the identity.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in p
        .tool
        .bytes()
        .chain([0])
        .chain(p.property().name().bytes())
        .chain([check as u8])
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    seed_bytes(h)
}

/// A proptest runner as the bound checks use it: `cases` cases from a ChaCha RNG seeded with
/// `seed`, no failure files, shrinking bounded by [`MAX_SHRINK_STEPS`]. Public so that a board
/// author's own properties (and the twin's tests) run the same way.
pub fn test_runner(cases: u32, seed: &[u8; 32]) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        source_file: None,
        max_shrink_iters: MAX_SHRINK_STEPS,
        max_shrink_time: 0,
        rng_algorithm: RngAlgorithm::ChaCha,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, seed))
}

/// A 32-byte runner seed from a number.
pub fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
    }
    out
}

/// Runs one promise on one parameter.
pub fn check_parameter(checker: &mut BoundChecker, p: &Parameter, check: Check, cases: u32, seed: u64) -> CheckReport {
    let strategy = match check {
        Check::Numbers => json_number(p.property().range()),
        Check::WrongTypes => wrong_type_value(p.property().ty()),
        Check::KeySpelling => key_spelling(p.property().name()),
    };
    let counts = RefCell::new((0u32, 0u32, 0u32));
    let cell = RefCell::new(checker);
    let outcome = test_runner(cases, &case_seed(seed, p, check)).run(&strategy, |input| {
        let mut checker = cell.borrow_mut();
        let verdict = match check {
            Check::Numbers => checker.check_number(p, &input),
            Check::WrongTypes => checker.check_wrong_type(p, &input),
            Check::KeySpelling => checker.check_key_spelling(p, &input),
        };
        let mut c = counts.borrow_mut();
        c.0 += 1;
        match verdict {
            Ok(Verdict::Accepted) => c.1 += 1,
            Ok(Verdict::Rejected) => c.2 += 1,
            Err(reason) => return Err(TestCaseError::fail(reason.0)),
        }
        Ok(())
    });
    let failure = match outcome {
        Ok(()) => None,
        Err(TestError::Fail(reason, input)) => Some(Failure {
            input,
            reason: reason.message().to_string(),
        }),
        Err(TestError::Abort(reason)) => Some(Failure {
            input: String::new(),
            reason: format!("aborted: {}", reason.message()),
        }),
    };
    let (cases, accepted, rejected) = counts.into_inner();
    CheckReport {
        check,
        cases,
        accepted,
        rejected,
        failure,
    }
}

/// Runs the chosen promises on every callable parameter of `spec` (booted fresh, conformance
/// world). Deterministic for a given board, settings and seed.
pub fn check_board(spec: Arc<BoardSpec>, settings: &Settings) -> BoardReport {
    let board = spec.name.clone();
    let mut report = BoardReport {
        board,
        settings: settings.clone(),
        boot_error: None,
        params: Vec::new(),
    };
    let mut checker = match BoundChecker::new(spec) {
        Ok(c) => c,
        Err(e) => {
            report.boot_error = Some(e.0);
            return report;
        }
    };
    for p in checker.parameters() {
        let checks: Vec<CheckReport> = settings
            .checks
            .iter()
            .filter(|c| c.applies_to(p.property()))
            .map(|&c| check_parameter(&mut checker, &p, c, settings.cases, settings.seed))
            .collect();
        if checks.is_empty() {
            continue;
        }
        report.params.push(ParamReport {
            parameter: p.describe(),
            checks,
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::generate::spell_integer;

    #[test]
    fn the_oracle_agrees_with_the_firmware_tables() {
        // docs/reference/firmware.md §2.3.
        for (text, want) in [
            ("12.9", 12),
            ("-12.9", -12),
            ("-0.99", 0),
            ("100.99", 100),
            ("1e-7", 0),
            ("-0", 0),
            ("1e1", 10),
            ("2147483647.5", i32::MAX),
            ("2147483648", i32::MAX),
            ("-2147483648.7", i32::MIN),
            ("1e10", i32::MAX),
            ("1e300", i32::MAX),
            ("1e999", i32::MAX),
            ("-1e10", i32::MIN),
            ("01", 1),
            ("4.", 4),
        ] {
            assert_eq!(expected_valueint(text), Some(want), "{text}");
        }
        for bad in ["+5", ".5", "0x10", "NaN", "Infinity", "1e", "", "-", "1.2.3"] {
            assert_eq!(expected_valueint(bad), None, "{bad}");
        }
        // docs/reference/firmware.md §4.5, set_volume.
        let volume = Property::ranged("volume", PropertyType::Integer, 0, 100).unwrap();
        assert_eq!(
            expected_integer(&volume, 101),
            Err("Value exceeds maximum allowed: 100".into())
        );
        assert_eq!(
            expected_integer(&volume, -1),
            Err("Value is below minimum allowed: 0".into())
        );
        assert_eq!(expected_integer(&volume, 0), Ok(0));
    }

    #[test]
    fn every_spelling_of_an_integer_reads_back_as_that_integer() {
        for n in [0i64, 7, -7, 100, -2147483648, 2147483647, 12345] {
            for style in 0..7 {
                let text = spell_integer(n, style);
                assert!(is_number_token(&text), "{text}");
                assert_eq!(text.parse::<f64>().unwrap(), n as f64, "{text}");
            }
        }
    }
}
