//! Property tests of the parameter bounds (issue 6): on every shipped and example board, every
//! integer parameter accepts exactly the JSON numbers whose `valueint` is in range, every
//! parameter answers wrong JSON types as the firmware does, and argument keys match
//! case-insensitively, first match wins. The oracle is `xiaozhi_sim::bounds` (written from
//! docs/reference/firmware.md §2.1–§2.3 and §4.5, independent of the twin's cJSON and MCP code).
//!
//! Case counts are tuned for CI; `PROPTEST_CASES=N` runs N cases per parameter and promise
//! (and per property below), `PROPTEST_RNG_SEED=S` draws them from seed S.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::bounds::{self, BoundChecker, Check, Settings, json_number};
use xiaozhi_sim::cjson::{Limits, Parser, Terminator};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::mcp::{Property, PropertyType};
use xiaozhi_sim::world::WorldSpec;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn cases(default: u32) -> u32 {
    env_u64("PROPTEST_CASES").map_or(default, |n| n as u32)
}

fn seed() -> u64 {
    env_u64("PROPTEST_RNG_SEED").unwrap_or(0)
}

/// Runs `test` on `cases(default)` values of `strategy`, deterministically seeded.
fn check<S: Strategy>(default: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), String>) {
    let mut runner = bounds::test_runner(cases(default), &bounds::seed_bytes(seed()));
    if let Err(e) = runner.run(&strategy, |v| test(v).map_err(TestCaseError::fail)) {
        panic!("seed {}: {e}", seed());
    }
}

fn board_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("board directory")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root.join("boards"), &mut files);
    walk(&root.join("scenarios/boards"), &mut files);
    files
}

fn check_every_board(check: Check, default_cases: u32) {
    let files = board_files();
    assert!(files.len() >= 10, "found the shipped and example boards: {files:?}");
    let settings = Settings {
        cases: cases(default_cases),
        seed: seed(),
        checks: vec![check],
    };
    let mut failed = String::new();
    for file in files {
        let spec = Arc::new(BoardSpec::load(&file).expect("shipped boards load"));
        let report = bounds::check_board(spec, &settings);
        eprint!("{}", report.to_text());
        if !report.passed() {
            failed.push_str(&report.to_text());
        }
    }
    assert!(failed.is_empty(), "{failed}");
}

#[test]
fn integer_parameters_accept_exactly_the_numbers_whose_valueint_is_in_range() {
    check_every_board(Check::Numbers, 1024);
}

#[test]
fn wrong_json_types_are_missing_when_required_and_default_when_optional() {
    check_every_board(Check::WrongTypes, 256);
}

#[test]
fn argument_keys_match_case_insensitively_and_the_first_match_wins() {
    check_every_board(Check::KeySpelling, 256);
}

#[test]
fn the_parser_stores_the_oracles_valueint_for_every_number() {
    // The same promise one level down: cJSON's valueint, as a bare value, an object member and
    // a request id (the reply id is the truncated, saturated id).
    let spec = Arc::new(
        BoardSpec::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("boards/bread-compact-wifi.yaml")).unwrap(),
    );
    let mut h = Harness::new(Device::new(spec, WorldSpec::conformance(), 0));
    h.power_on();
    let h = std::cell::RefCell::new(h);
    check(4096, json_number(None), |text| {
        let want = bounds::expected_valueint(&text).ok_or("not a number token")?;
        let mut parser = Parser::new();
        for input in [text.clone(), format!(r#"{{"v":{text}}}"#)] {
            let doc = parser
                .parse(input.as_bytes(), Terminator::Length, Limits::default())
                .map_err(|e| format!("{input}: {e}"))?;
            let root = doc.root();
            let got = root.get(b"v").unwrap_or(root).valueint();
            if got != want {
                return Err(format!("{input}: valueint {got}, expected {want}"));
            }
        }
        let mut h = h.borrow_mut();
        h.deliver(format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#).as_bytes());
        h.run_until_idle().map_err(|e| e.to_string())?;
        let sent: Vec<Vec<u8>> = h.take_mcp_payloads();
        let expected =
            format!(r#"{{"jsonrpc":"2.0","id":{want},"error":{{"message":"Method not implemented: ping"}}}}"#);
        if sent != [expected.clone().into_bytes()] {
            return Err(format!("id {text}: sent {sent:?}, expected {expected}"));
        }
        Ok(())
    });
}

/// Bytes a backend might send by mistake: valid requests with bytes flipped, cut or spliced,
/// and arbitrary bytes.
fn mangled_request() -> impl Strategy<Value = Vec<u8>> {
    let base = proptest::sample::select(vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":40}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"self.lamp.turn_on","withUserTools":true}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"capabilities":{"vision":{"url":"http://x/","token":"t"}}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"self.reboot"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"self.screen.set_theme","arguments":{"theme":"dark"}}}"#,
    ]);
    let edited = (
        base,
        proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 0..6),
    )
        .prop_map(|(b, edits)| {
            let mut bytes = b.as_bytes().to_vec();
            for (at, byte, kind) in edits {
                let i = at % (bytes.len() + 1);
                match kind {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i.max(1)),
                }
            }
            bytes
        });
    prop_oneof![3 => edited, 1 => proptest::collection::vec(any::<u8>(), 0..64)]
}

#[test]
fn a_device_answers_each_mangled_request_at_most_once_and_keeps_running() {
    let spec = Arc::new(
        BoardSpec::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("boards/bread-compact-wifi-s3cam.yaml")).unwrap(),
    );
    check(256, proptest::collection::vec(mangled_request(), 1..6), |burst| {
        let mut h = Harness::new(Device::new(spec.clone(), WorldSpec::conformance(), 0));
        h.power_on();
        for p in &burst {
            h.deliver(p);
        }
        h.run_until_idle().map_err(|e| e.to_string())?;
        let sent = h.take_outputs().len();
        if sent > burst.len() {
            return Err(format!("{sent} replies to {} requests", burst.len()));
        }
        // Whatever happened (reboot included), the board answers again afterwards.
        h.deliver(br#"{"jsonrpc":"2.0","id":77,"method":"ping"}"#);
        h.run_until_idle().map_err(|e| e.to_string())?;
        let after = h.take_outputs();
        if after.len() != 1 {
            return Err(format!("the device no longer answers: {after:?}"));
        }
        Ok(())
    });
}

#[test]
fn the_bound_checker_reports_a_range_the_device_does_not_have() {
    // Guards the checker against passing vacuously: told that volume is 0..=50, it must find
    // (and shrink to) a number the device accepts in 51..=100.
    let spec = Arc::new(
        BoardSpec::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("boards/bread-compact-wifi.yaml")).unwrap(),
    );
    let mut checker = BoundChecker::new(spec).expect("boots");
    let mut p = checker
        .parameters()
        .into_iter()
        .find(|p| p.tool == "self.audio_speaker.set_volume")
        .expect("every board has set_volume");
    p.properties[p.index] = Property::ranged("volume", PropertyType::Integer, 0, 50).unwrap();
    let err = checker.check_number(&p, "75").expect_err("the device accepts 75");
    assert!(err.contains("Value exceeds maximum allowed: 50"), "{err}");
    let report = bounds::check_parameter(&mut checker, &p, Check::Numbers, 64, 0);
    let failure = report.failure.expect("a counterexample");
    let shrunk = bounds::expected_valueint(&failure.input).expect("a number");
    assert!((51..=100).contains(&shrunk), "shrunk to {}", failure.input);
}

#[test]
fn check_bounds_runs_on_shipped_and_user_boards() {
    let twin = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("binary runs")
    };
    let out = twin(&["check-bounds", "--board", "bread-compact-wifi-lcd", "--cases", "16"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("self.screen.set_brightness brightness: integer 0..=100"),
        "{text}"
    );
    assert!(text.ends_with("all bound promises hold\n"), "{text}");

    // A user board whose tool panics the firmware (NVS key longer than 15 bytes): exit 1 and
    // the shrunk input.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("check-bounds");
    std::fs::create_dir_all(&dir).unwrap();
    let board = dir.join("motor.yaml");
    std::fs::write(
        &board,
        "name: motor\ntype: bread-compact-wifi\ndisplay: { kind: none }\nboard_tools:\n  - tool:\n      name: self.motor.set_speed\n      properties: [{ name: speed, type: integer, min: -100, max: 100 }]\n      behavior: { nvs_set: { namespace: motor, key: speed_setting_rpm, from: speed } }\n",
    )
    .unwrap();
    let out = twin(&["check-bounds", "--board", board.to_str().unwrap(), "--cases", "16"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("minimal input:") && text.contains("ESP_ERR_NVS_KEY_TOO_LONG"),
        "{text}"
    );
}
