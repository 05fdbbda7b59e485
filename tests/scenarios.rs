//! The shipped scenarios pass, twice with byte-identical reports and traces; a scenario that
//! expects something false fails with a clear message and exit 1; broken scenario files are
//! refused with file:line:column errors and exit 2.

mod common;

use common::{root, twin};
use std::path::{Path, PathBuf};

fn scratch(name: &str, content: &[u8]) -> PathBuf {
    common::scratch_file("scenarios", name, content)
}

#[test]
fn shipped_scenarios_pass_twice_with_identical_reports() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("determinism");
    std::fs::create_dir_all(&dir).unwrap();
    let scenarios = root().join("scenarios");
    let mut reports = Vec::new();
    for run in 0..2 {
        let json = dir.join(format!("run{run}.json"));
        let out = twin(&[
            "run",
            scenarios.to_str().unwrap(),
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        reports.push(std::fs::read(&json).unwrap());
    }
    assert!(!reports[0].is_empty());
    assert!(
        reports[0] == reports[1],
        "two runs of the same scenarios produced different reports"
    );
    let v: serde_json::Value = serde_json::from_slice(&reports[0]).unwrap();
    let all = v.as_array().unwrap();
    assert!(all.len() >= 17, "the error card and the volume template are shipped");
    for card in 1..=16 {
        assert!(
            all.iter().any(|r| r["card"] == card),
            "error-card row {card} has a scenario"
        );
    }
    assert!(all.iter().all(|r| !r["trace"].as_array().unwrap().is_empty()));
    // The voice turns carry claims, judged from facts: heard and backed, not heard, unverified.
    let claims: Vec<&serde_json::Value> = all
        .iter()
        .flat_map(|r| r["records"].as_array().unwrap())
        .filter_map(|rec| rec.get("claim"))
        .collect();
    let judged = |needle: &str| {
        claims.iter().any(|c| {
            c["judgements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j.as_str().unwrap().starts_with(needle))
        })
    };
    assert!(judged("claim not heard"), "the amplifier scenario's claim is not heard");
    assert!(judged("unverified claim"));
    assert!(
        claims.iter().any(|c| c["heard"] == true
            && c["readback"] == true
            && (c["change_db"].as_f64().unwrap() + 9.7).abs() < 0.1)
    );
}

#[test]
fn a_different_seed_changes_identity_not_outcomes() {
    let s = root().join("scenarios/12-reboot-true-never-arrives.yaml");
    let out = twin(&["run", s.to_str().unwrap(), "--seed", "999", "--quiet"]);
    assert!(out.status.success());
}

#[test]
fn a_false_expectation_fails_clearly_with_exit_1() {
    let f = scratch(
        "wrong.yaml",
        b"name: expects the wrong readback\nboard: bread-compact-wifi\nseed: 7\nsteps:\n  - call: { tool: self.audio_speaker.set_volume, args: { volume: 30 } }\n  - readback: { path: audio_speaker.volume, expect: { value: 99 } }\n",
    );
    let out = twin(&["run", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("FAIL  step 2 (line 6): readback is 99 — got 30"),
        "{stdout}"
    );
    assert!(
        stderr.contains("--seed 7"),
        "the seed to reproduce is printed: {stderr}"
    );
    assert!(stderr.contains("Reproduce with: xiaozhi-twin run"), "{stderr}");
}

fn refused(name: &str, content: &[u8], needle: &str) {
    let f = scratch(name, content);
    let out = twin(&["run", f.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
    assert!(out.stdout.is_empty(), "{name}: nothing presented as success");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: one line: {stderr}");
    assert!(stderr.contains(needle), "{name}: expected `{needle}` in: {stderr}");
}

#[test]
fn broken_scenario_files_point_at_line_and_column() {
    let head = "name: broken\nboard: bread-compact-wifi\nsteps:\n";
    refused(
        "unknown-step.yaml",
        format!("{head}  - explode: {{}}\n").as_bytes(),
        "unknown-step.yaml:4:",
    );
    refused(
        "bad-duration.yaml",
        format!("{head}  - wait: soon\n").as_bytes(),
        "bad-duration.yaml:4:",
    );
    refused(
        "no-unit.yaml",
        format!("{head}  - wait: 1500\n").as_bytes(),
        "a duration needs a unit",
    );
    refused(
        "unknown-tool.yaml",
        format!("{head}  - call: {{ tool: self.screen.set_brightness }}\n").as_bytes(),
        "unknown-tool.yaml:4:",
    );
    refused(
        "unknown-key.yaml",
        b"name: x\nboard: bread-compact-wifi\ncolour: red\nsteps: []\n",
        "unknown-key.yaml:3:",
    );
    refused("missing-board.yaml", b"name: x\nsteps: []\n", "missing-board.yaml:");
    refused(
        "unknown-board.yaml",
        b"name: x\nboard: no-such-board\nsteps: []\n",
        "unknown board",
    );
    refused(
        "bad-fault.yaml",
        format!("{head}  - fault: {{ set: meteor_strike }}\n").as_bytes(),
        "unknown fault `meteor_strike`",
    );
    refused(
        "not-utf8.yaml",
        b"name: x\nboard: bread-compact-wifi\nsteps:\n  - note: \xff\xfe\n",
        "not-utf8.yaml:4:",
    );
    refused(
        "no-button.yaml",
        format!("{head}  - press: {{ button: volume_up }}\n")
            .replace("bread-compact-wifi", "bread-compact-wifi-lcd")
            .as_bytes(),
        "has no button",
    );
}

/// Check lines read as a user reads values: `got "true"`, `got no reply`, event names as the
/// scenario writes them — never Rust's debug forms (`Some("true")`, `None`, `Dropped { … }`).
#[test]
fn check_lines_never_show_rust_debug_formatting() {
    let debug = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                [
                    "Some(",
                    "Ok(",
                    "Err(",
                    " None",
                    "(None",
                    "{ reason:",
                    "Dropped {",
                    "DeviceRebooted",
                ]
                .iter()
                .any(|p| l.contains(p))
            })
            .map(str::to_string)
            .collect()
    };
    let scenarios = root().join("scenarios");
    let over_the_wire: Vec<String> = [
        "09-true-is-text.yaml",
        "12-reboot-true-never-arrives.yaml",
        "q05-ids-are-coerced.yaml",
    ]
    .iter()
    .map(|f| scenarios.join(f).display().to_string())
    .collect();
    let mut wire_args = vec!["run", "--wire", "--personality", "cloud-gateway"];
    wire_args.extend(over_the_wire.iter().map(String::as_str));
    for (args, at_least) in [(vec!["run", scenarios.to_str().unwrap()], 100), (wire_args, 4)] {
        let out = twin(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.matches(" pass ").count() >= at_least, "{args:?} ran: {stdout}");
        assert_eq!(debug(&stdout), Vec::<String>::new(), "{args:?}");
    }
    // Failing checks say what stood in place of the value.
    let file = scratch(
        "debug-forms.yaml",
        b"name: no reply\nboard: bread-compact-wifi\nsteps:\n  - call: { tool: self.reboot, expect: { text: \"true\", reply_id: 1, reply_order: [1] } }\n  - send: { payload: '{\"jsonrpc\":\"2.0\",\"method\":\"x\"}', expect: { dropped: false } }\n",
    );
    let out = twin(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(debug(&stdout), Vec::<String>::new());
    for want in [
        "text is \"true\" — got no reply",
        "reply id is 1 — got no reply",
        "replies leave in the order [1] — got no reply",
        "dropped on receipt: false — dropped without a reply",
    ] {
        assert!(stdout.contains(want), "{want:?} missing:\n{stdout}");
    }
}

/// A newcomer's file with several mistakes gets all of them in one run, in file order, each
/// `file:line:column: reason` on its own line; exit 2, nothing on stdout.
#[test]
fn several_mistakes_are_reported_in_one_run() {
    let f = scratch(
        "several-mistakes.yaml",
        b"name: three mistakes\nboard: bread-compact-wifi\nsteps:\n  - call: { tool: self.audio_speaker.set_volme, args: { volume: 40 } }\n  - wait: 2 seconds\n  - call:\n      tool: self.get_device_status\n      expct: { text: \"x\" }\n  - press: { button: nope }\ncolour: red\n",
    );
    let out = twin(&["run", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let at: Vec<&str> = lines
        .iter()
        .map(|l| {
            let rest = l
                .split("several-mistakes.yaml:")
                .nth(1)
                .unwrap_or_else(|| panic!("located: {l}"));
            rest.split(": ").next().unwrap()
        })
        .collect();
    assert_eq!(at, ["4:19", "5:11", "8:7", "9:5", "10:1"], "{stderr}");
    for (line, reason) in lines.iter().zip([
        "unknown tool `self.audio_speaker.set_volme`",
        "unknown time unit `seconds`",
        "unknown field `expct`",
        "has no button `nope`",
        "unknown field `colour`",
    ]) {
        assert!(line.contains(reason), "{line} should say {reason}");
    }
}
