//! The command line, end to end: `replay` output that `compare.py` accepts, exit codes and
//! one-line errors on bad input, nothing on stdout when the input is refused.

mod common;

use common::twin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn conformance(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(file)
        .display()
        .to_string()
}

fn scratch(name: &str, content: &[u8]) -> PathBuf {
    common::scratch_file("cli", name, content)
}

#[test]
fn replay_output_passes_the_shipped_compare_script() {
    let out = twin(&[
        "replay",
        "--board",
        "bread-compact-wifi",
        &conformance("bread-compact-wifi.requests.jsonl"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        out.stdout.iter().filter(|&&b| b == b'\n').count(),
        64,
        "one object per request line"
    );
    let actual = scratch("actual.jsonl", &out.stdout);
    let compare = Command::new("python3")
        .arg(conformance("compare.py"))
        .arg(conformance("bread-compact-wifi.expected.jsonl"))
        .arg(&actual)
        .output()
        .expect("python3 runs compare.py");
    let report = String::from_utf8_lossy(&compare.stdout);
    assert!(compare.status.success(), "{report}");
    assert!(report.contains("64/64 lines identical"), "{report}");
}

#[test]
fn replies_only_prints_just_the_payloads() {
    let out = twin(&[
        "replay",
        "--board",
        "bread-compact-wifi",
        "--replies-only",
        &conformance("bread-compact-wifi.burst.requests.txt"),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9);
    assert!(
        lines[0].starts_with(r#"{"jsonrpc":"2.0","id":202,"result""#),
        "initialize overtook the lamp call"
    );
    assert!(lines[2].starts_with(r#"{"jsonrpc":"2.0","id":201,"result""#));
}

fn assert_refused(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no partial output");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn missing_file_is_a_one_line_error() {
    assert_refused(
        &twin(&["replay", "--board", "bread-compact-wifi", "/no/such/file.jsonl"]),
        "no such file",
    );
}

#[test]
fn unknown_board_is_a_one_line_error() {
    let f = scratch("ok.txt", b"{}\n");
    assert_refused(
        &twin(&["replay", "--board", "no-such-board", f.to_str().unwrap()]),
        "unknown board `no-such-board`",
    );
}

#[test]
fn malformed_burst_line_names_the_line() {
    let f = scratch(
        "bad-burst.txt",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n#burst [\"a\",\n",
    );
    assert_refused(
        &twin(&["replay", "--board", "bread-compact-wifi", f.to_str().unwrap()]),
        "bad-burst.txt:2: #burst",
    );
}

#[test]
fn malformed_payloads_are_fed_to_the_device_not_refused() {
    let f = scratch(
        "garbage.txt",
        b"\xff\xfe not json\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} trailing\n",
    );
    let out = twin(&["replay", "--board", "bread-compact-wifi", f.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().nth(2).unwrap().contains(r#"Method not implemented: x"#));
}

#[test]
fn tools_prints_every_page() {
    let out = twin(&["tools", "--board", "bread-compact-wifi", "--with-user-tools"]);
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 2902 + 1);
}

#[test]
fn a_bad_backend_script_names_line_and_column_and_nothing_listens() {
    let script = scratch(
        "bad-script.txt",
        b"call self.get_device_status\n  call x {\"volume\": }\n",
    );
    let out = twin(&[
        "backend",
        "--listen",
        "127.0.0.1:0",
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_refused(&out, "bad-script.txt:2:21: arguments are not JSON: expected value");
}

#[test]
fn an_unknown_personality_lists_the_shipped_ones() {
    let out = twin(&[
        "backend",
        "--listen",
        "127.0.0.1:0",
        "--personality",
        "nope",
        "--duration",
        "1s",
    ]);
    let shipped: Vec<&str> = xiaozhi_sim::backend::spec::SHIPPED.iter().map(|(n, _)| *n).collect();
    assert_refused(
        &out,
        &format!("unknown personality `nope` (shipped: {}", shipped.join(", ")),
    );
}

#[test]
fn connect_needs_a_url_or_an_ota_endpoint() {
    let out = twin(&["connect", "--board", "bread-compact-wifi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url"));
    let out = twin(&["connect", "--board", "bread-compact-wifi", "--url", "http://x/"]);
    assert_refused(&out, "expected ws://HOST:PORT/PATH");
}

#[test]
fn stdio_answers_on_stdout_and_logs_on_stderr() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args(["stdio", "--board", "bread-compact-wifi"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"a\\\"b\",\"arguments\":{}}}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    // Faithful: the firmware's unescaped message, no code.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"message\":\"Unknown tool: a\"b\"}}\n"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ready (faithful mode)"));
    // The startup line names the mode the same way in both modes.
    let out = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args(["stdio", "--board", "bread-compact-wifi", "--compat"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ready (compat mode)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `boards` prints the id `--board` takes (each once) and the BOARD_NAME the device reports in a
/// column of its own.
#[test]
fn boards_prints_ids_that_board_accepts_and_the_reported_name_apart() {
    let out = twin(&["boards"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("The twin's boards"), "{text}");
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["--board", "BOARD_NAME", "summary"]);
    // The hand-written section ends at a blank line; the upstream section follows.
    let rows: Vec<(String, String)> = lines
        .by_ref()
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let mut cols = l.split_whitespace();
            (cols.next().unwrap().to_string(), cols.next().unwrap().to_string())
        })
        .collect();
    let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    for want in [
        "bread-compact-wifi",
        "bread-compact-wifi-duplex",
        "waveshare/esp32-s3-audio-board",
        "lckfb/szpi-esp32c3",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "each id once: {ids:?}");
    for (id, name) in &rows {
        let tools = twin(&["tools", "--board", id]);
        assert!(
            tools.status.success(),
            "--board {id}: {}",
            String::from_utf8_lossy(&tools.stderr)
        );
        let replay = twin(&[
            "replay",
            "--board",
            id,
            "--replies-only",
            &scratch(
                "info.txt",
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self.get_system_info"}}"#,
            )
            .display()
            .to_string(),
        ]);
        let reply = String::from_utf8_lossy(&replay.stdout);
        assert!(
            reply.contains(&format!(r#"\"name\":\"{name}\""#)),
            "{id} reports BOARD_NAME {name}: {reply}"
        );
    }
    // Every upstream build, once, with the commit it was read at; each id is one `--board` takes.
    let title = lines.next().unwrap();
    assert!(title.contains("177 builds") && title.contains("48142026"), "{title}");
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header[0], "--board");
    let upstream: Vec<&str> = lines.map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(upstream.len(), 177);
    let mut unique = upstream.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), upstream.len(), "each build once");
    for id in ["mixgo-nova", "esp-box-3", "m5stack-core-s3", "bread-compact-wifi"] {
        assert!(upstream.contains(&id), "{id} missing");
        let tools = twin(&["tools", "--board", id]);
        assert!(
            tools.status.success(),
            "--board {id}: {}",
            String::from_utf8_lossy(&tools.stderr)
        );
    }
    assert!(
        rows.contains(&("bread-compact-wifi-duplex".into(), "bread-compact-wifi".into())),
        "the duplex build reports the simplex BOARD_NAME: {rows:?}"
    );
}

/// `render --json` says `audible` as a boolean next to the verdict: false with the amplifier
/// shut down, true on the healthy chain.
#[test]
fn render_json_has_a_boolean_audible_beside_the_verdict() {
    for (faults, audible, verdict) in [
        (&["--fault", "amp_shutdown"][..], false, "silent"),
        (&[][..], true, "clearly_audible"),
    ] {
        let mut args = vec!["render", "--board", "bread-compact-wifi", "--json"];
        args.extend_from_slice(faults);
        let out = twin(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["measurement"]["audible"],
            serde_json::Value::Bool(audible),
            "{faults:?}"
        );
        assert_eq!(v["measurement"]["verdict"], verdict, "{faults:?}");
    }
}

/// `backend --help` lists every shipped personality, from the list the binary embeds.
#[test]
fn backend_help_lists_the_shipped_personalities() {
    let out = twin(&["backend", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    let shipped: Vec<&str> = xiaozhi_sim::backend::spec::SHIPPED.iter().map(|(n, _)| *n).collect();
    assert!(
        help.contains(&format!(
            "Shipped personalities: {} (default xinnan-py).",
            shipped.join(", ")
        )),
        "{help}"
    );
}
