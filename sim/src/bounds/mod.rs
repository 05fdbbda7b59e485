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

mod checker;
mod oracle;

pub use checker::{BoundChecker, Expected, Verdict, Violation};
pub use oracle::{expected_error_reply, expected_integer, expected_valueint, is_number_token};

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
