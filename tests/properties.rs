//! Property tests of the parameter bounds (issue 6): on every shipped and example board, every
//! integer parameter accepts exactly the JSON numbers whose `valueint` is in range, every
//! parameter answers wrong JSON types as the firmware does, and argument keys match
//! case-insensitively, first match wins. The oracle is `xiaozhi_sim::bounds` (written from
//! FIRMWARE.md, independent of the twin's cJSON and MCP code).
//!
//! Case counts are tuned for CI; `PROPTEST_CASES=N` runs N cases per parameter and promise.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::bounds::{self, Check, Settings};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
        seed: 0,
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
    check_every_board(Check::Numbers, 48);
}

#[test]
fn wrong_json_types_are_missing_when_required_and_default_when_optional() {
    check_every_board(Check::WrongTypes, 12);
}

#[test]
fn argument_keys_match_case_insensitively_and_the_first_match_wins() {
    check_every_board(Check::KeySpelling, 8);
}
