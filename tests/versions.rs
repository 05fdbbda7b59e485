//! Firmware versions as data (docs/reference/firmware-versions.md): the CLI's `--firmware`, the version matrix,
//! bad versions, and the differences read from the code of each tag that no recorded transcript
//! shows (each test names the upstream file it was written from). The recorded version
//! transcripts themselves replay in `tests/conformance.rs`.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{root, scratch_file, twin};
use serde_json::Value;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, Receipt};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::world::WorldSpec;

fn stdout(args: &[&str]) -> String {
    let out = twin(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A freshly flashed `board` running `firmware`, booted, its start-up over.
fn device(board: &str, firmware: &str) -> Harness {
    let spec = BoardSpec::load(&root().join("boards").join(format!("{board}.yaml")))
        .unwrap()
        .with_firmware(firmware)
        .unwrap();
    let mut h = Harness::new(Device::new(Arc::new(spec), WorldSpec::conformance(), 0));
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    h
}

/// Sends one payload, runs the device until idle, returns what it sent.
fn call(h: &mut Harness, payload: &str) -> Vec<String> {
    h.deliver(payload.as_bytes());
    h.run_until_idle().unwrap();
    h.take_mcp_payloads()
        .into_iter()
        .map(|p| String::from_utf8(p).unwrap())
        .collect()
}

fn tool_call(id: u32, name: &str, args: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#)
}

fn text_of(reply: &str) -> String {
    let v: Value = serde_json::from_str(reply).unwrap();
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn names(page: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(page).unwrap();
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tools_gives_each_versions_list() {
    let l4 = stdout(&["tools", "--board", "bread-compact-wifi", "--firmware", "1.9.4"]);
    assert_eq!(l4.lines().count(), 1);
    assert_eq!(l4.trim_end().len(), 1145, "the recorded 1.9.4 list is 1145 bytes");
    assert_eq!(
        names(l4.trim_end()),
        [
            "self.get_device_status",
            "self.audio_speaker.set_volume",
            "self.lamp.get_state",
            "self.lamp.turn_on",
            "self.lamp.turn_off"
        ]
    );
    let with_user = stdout(&[
        "tools",
        "--board",
        "bread-compact-wifi",
        "--firmware",
        "v1.9.4",
        "--with-user-tools",
    ]);
    assert_eq!(
        with_user, l4,
        "1.x has no user-only tools: withUserTools changes nothing"
    );
    let l7 = stdout(&["tools", "--board", "bread-compact-wifi", "--firmware", "2.2.6"]);
    assert_eq!(
        l7,
        stdout(&["tools", "--board", "bread-compact-wifi"]),
        "2.2.6 lists as 2.4.2"
    );
}

/// otto_controller.cc at v1.7.5 … v2.0.4: 16 tools, one per move; with the 4 common tools the
/// list fits one page. From v2.0.5 the 8-tool controller; with the camera (v2.1.0 on) it pages.
#[test]
fn otto_robot_has_its_older_controller_before_2_0_5() {
    let old = stdout(&["tools", "--board", "otto-robot", "--firmware", "1.8.9"]);
    assert_eq!(old.lines().count(), 1, "one page, no nextCursor");
    let tools = names(old.trim_end());
    assert_eq!(tools.len(), 20);
    assert_eq!(tools[4], "self.otto.walk_forward");
    assert!(
        !tools
            .iter()
            .any(|t| t == "self.otto.action" || t == "self.camera.take_photo")
    );
    assert_eq!(old.trim_end().len(), 6864);
    let v205 = stdout(&["tools", "--board", "otto-robot", "--firmware", "2.0.5"]);
    assert_eq!(v205.lines().count(), 1, "no camera on 2.0.5: 12 tools, one page");
    assert_eq!(names(v205.trim_end()).len(), 12);
    let now = stdout(&["tools", "--board", "otto-robot", "--firmware", "2.2.6"]);
    assert_eq!(now.lines().count(), 2, "the camera version pages");
    // The old tools run: a move is queued and answered `true`, the robot is then moving.
    let mut h = device("otto-robot", "1.9.4");
    let r = call(&mut h, &tool_call(1, "self.otto.walk_forward", r#"{"steps":2}"#));
    assert_eq!(text_of(&r[0]), "true");
    let r = call(
        &mut h,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"self.otto.walk_forward","arguments":{"speed":400}}}"#,
    );
    assert!(r[0].contains("Value is below minimum allowed: 500"), "{r:?}");
}

/// v2.2.4–v2.2.6's otto_emoji_display.cc has no `SetTheme("dark")` (removed by 332c6523): a
/// fresh device reports `light`; every other tag forces `dark` at boot.
#[test]
fn otto_robot_boots_dark_except_on_2_2_4_to_2_2_6() {
    let status = tool_call(1, "self.get_device_status", "{}");
    for (fw, theme) in [
        ("2.2.6", "light"),
        ("2.2.4", "light"),
        ("2.2.3", "dark"),
        ("2.4.2", "dark"),
        ("1.9.4", "dark"),
    ] {
        let mut h = device("otto-robot", fw);
        let r = call(&mut h, &status);
        assert!(text_of(&r[0]).contains(&format!(r#""theme":"{theme}""#)), "{fw}: {r:?}");
    }
}

/// 1.x `LcdDisplay::SetTheme` (v1.9.4 lcd_display.cc:939-950, display.cc:227-231) and the
/// set_theme callback (mcp_server.cc:83-86): any name answers `true`; `LIGHT` is kept as given,
/// persisted, and reported after a power cycle; unknown names change nothing.
#[test]
fn one_x_lcd_themes_are_names_and_set_theme_always_says_true() {
    let status = tool_call(9, "self.get_device_status", "{}");
    let mut h = device("bread-compact-wifi-lcd", "1.9.4");
    let r = call(&mut h, &tool_call(1, "self.screen.set_theme", r#"{"theme":"sepia"}"#));
    assert_eq!(text_of(&r[0]), "true");
    assert!(text_of(&call(&mut h, &status)[0]).contains(r#""theme":"light""#));
    let r = call(&mut h, &tool_call(2, "self.screen.set_theme", r#"{"theme":"LIGHT"}"#));
    assert_eq!(text_of(&r[0]), "true");
    assert!(text_of(&call(&mut h, &status)[0]).contains(r#""theme":"LIGHT""#));
    let now = h.now();
    h.device.cut_power(now);
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    assert!(
        text_of(&call(&mut h, &status)[0]).contains(r#""theme":"LIGHT""#),
        "loaded from NVS verbatim"
    );
    // 2.x: an exact registry lookup.
    let mut h = device("bread-compact-wifi-lcd", "2.2.6");
    let r = call(&mut h, &tool_call(1, "self.screen.set_theme", r#"{"theme":"LIGHT"}"#));
    assert_eq!(text_of(&r[0]), "false");
}

/// 1.x take_photo and `Esp32Camera::Explain` return failures as text (v1.9.4 mcp_server.cc:104-106,
/// esp32_camera.cc:191-294); 2.x throws them. 1.x lists the older description.
#[test]
fn one_x_camera_failures_are_text_results() {
    let photo = tool_call(1, "self.camera.take_photo", r#"{"question":"what?"}"#);
    let answer = |fw: &str| call(&mut device("bread-compact-wifi-s3cam", fw), &photo).remove(0);
    assert_eq!(
        answer("1.9.4"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"success\": false, \"message\": \"Image explain URL or token is not set\"}"}],"isError":false}}"#
    );
    assert_eq!(
        answer("2.2.6"),
        r#"{"jsonrpc":"2.0","id":1,"error":{"message":"Image explain URL or token is not set"}}"#
    );
    let list = stdout(&["tools", "--board", "bread-compact-wifi-s3cam", "--firmware", "2.1.0"]);
    assert!(
        list.contains("\"description\":\"Take a photo and explain it."),
        "{list}"
    );
    let list = stdout(&["tools", "--board", "bread-compact-wifi-s3cam", "--firmware", "2.2.2"]);
    assert!(list.contains("\"description\":\"Always remember you have a camera."));
}

/// v2.0.1–v2.0.5 `SendMcpMessage` sends at once on the main-loop task (application.cc:837-852 at
/// v2.0.1): the reboot tool's `true` leaves before the reboot task runs; from 2.1.0 it never does.
#[test]
fn reboot_answers_on_2_0_x_and_never_from_2_1_0() {
    let reboot = tool_call(1, "self.reboot", "{}");
    let mut h = device("bread-compact-wifi", "2.0.5");
    let r = call(&mut h, &reboot);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(text_of(&r[0]), "true");
    assert_eq!(h.device.snapshot().boots, 2, "and it still reboots");
    let mut h = device("bread-compact-wifi", "2.1.0");
    assert!(call(&mut h, &reboot).is_empty());
    assert_eq!(h.device.snapshot().boots, 2);
}

/// 1.7.5–1.9.1 run a tool in its own thread: a callback that blocks (the camera's HTTP POST)
/// blocks only that thread, so a later call's reply overtakes it (mcp_server.cc:350-366 at v1.8.9).
#[test]
fn a_blocked_tool_thread_does_not_hold_up_later_calls() {
    let mut h = device("bread-compact-wifi-s3cam", "1.8.9");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"vision":{"url":"http://nowhere.example/v"}}}}"#;
    call(&mut h, init);
    h.deliver(tool_call(2, "self.camera.take_photo", r#"{"question":"q"}"#).as_bytes());
    h.deliver(tool_call(3, "self.get_device_status", "{}").as_bytes());
    h.run_until_idle().unwrap();
    let ids: Vec<i64> = h
        .take_mcp_payloads()
        .iter()
        .map(|p| serde_json::from_slice::<Value>(p).unwrap()["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [3, 2]);
}

/// The L1–L2 flag (v1.6.6–v1.7.2 mcp_server.cc: the argument walk catches only
/// `std::runtime_error`, or nothing): an out-of-range integer aborts the device, no reply.
#[test]
fn the_l1_flag_makes_a_range_error_abort_the_device() {
    let text = std::fs::read_to_string(root().join("boards/bread-compact-wifi.yaml"))
        .unwrap()
        .replace("  version: 2.4.2", "  version: 1.8.9\n  range_error_aborts: true");
    let path = scratch_file("versions", "l1.yaml", text.as_bytes());
    let spec = BoardSpec::load(&path).unwrap();
    let mut h = Harness::new(Device::new(Arc::new(spec), WorldSpec::conformance(), 0));
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    let receipt = h.deliver(tool_call(1, "self.audio_speaker.set_volume", r#"{"volume":150}"#).as_bytes());
    assert!(matches!(receipt, Receipt::Aborted { .. }), "{receipt:?}");
    h.run_until_idle().unwrap();
    assert!(h.take_mcp_payloads().is_empty());
    assert_eq!(h.device.snapshot().boots, 2, "panic reboot");
    // Without the flag 1.8.9 answers the range error.
    let mut h = device("bread-compact-wifi", "1.8.9");
    let r = call(
        &mut h,
        &tool_call(1, "self.audio_speaker.set_volume", r#"{"volume":150}"#),
    );
    assert!(r[0].contains("Value exceeds maximum allowed: 100"));
    // The flag belongs over a 1.x line.
    let text = text.replace("version: 1.8.9", "version: 2.2.6");
    let path = scratch_file("versions", "l1-bad.yaml", text.as_bytes());
    let e = BoardSpec::load(&path).unwrap_err().to_string();
    assert!(e.contains("range_error_aborts") && e.contains("l1-bad.yaml:"), "{e}");
}

fn matrix(json: &Path) -> (i32, String, Value) {
    let out = twin(&[
        "run",
        "--firmware",
        "1.8.9,1.9.4,2.2.6,2.4.2",
        "scenarios/",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(json).unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        serde_json::from_str(&text).unwrap(),
    )
}

#[test]
fn the_version_matrix_is_deterministic_and_every_changed_cell_has_its_reason() {
    let dir = common::scratch_dir("matrix");
    let (code, text, a) = matrix(&dir.join("a.json"));
    let (_, text_b, b) = matrix(&dir.join("b.json"));
    assert_eq!(code, 0, "{text}");
    assert_eq!(a, b, "same inputs, same matrix");
    assert_eq!(text, text_b);
    let versions: Vec<&str> = a["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.8.9", "1.9.4", "2.2.6", "2.4.2"]);
    assert_eq!(a["reference"], "2.4.2");
    let rows = a["rows"].as_array().unwrap();
    let shipped = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "yaml"))
        .count();
    assert_eq!(rows.len(), shipped, "every shipped scenario has a row");
    let changes = a["changes"].as_array().unwrap();
    let mut expected = 0;
    for row in rows {
        let cells = row["cells"].as_array().unwrap();
        assert_eq!(cells[3]["result"], "pass", "{} passes on 2.4.2", row["scenario"]);
        for (v, cell) in versions.iter().zip(cells) {
            if cell["result"] == cells[3]["result"] {
                continue;
            }
            expected += 1;
            let change = changes
                .iter()
                .find(|c| c["scenario"] == row["scenario"] && c["version"] == *v)
                .unwrap_or_else(|| panic!("no reason for {} on {v}", row["scenario"]));
            assert!(change["reason"].as_str().unwrap().len() > 10, "{change}");
        }
    }
    assert_eq!(changes.len(), expected);
    let reason = |s: &str, v: &str| {
        changes
            .iter()
            .find(|c| c["scenario"] == s && c["version"] == v)
            .map(|c| c["reason"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let r = reason("13-hidden-is-not-forbidden", "1.9.4");
    assert!(
        r.contains("Unknown tool: self.get_system_info") && r.contains("no user-only tools"),
        "{r}"
    );
    assert!(reason("10-built-is-not-received", "1.9.4").contains("arrival order"));
    assert!(reason("12-reboot-true-never-arrives", "1.8.9").contains("not applicable"));
    assert!(reason("q29-camera-needs-initialize", "1.8.9").contains("camera failures as text"));
    // The voice axis: the early stop's frames, and the switch that explains them.
    let early = reason("v12-early-tts-stop", "1.9.4");
    assert!(
        early.contains("15 played, 5 discarded") && early.contains("ResetDecoder"),
        "{early}"
    );
    assert!(
        reason("v12-early-tts-stop", "2.2.6").is_empty(),
        "2.2.6 plays every frame"
    );
    assert!(reason("v10-wake-word-interrupts", "2.2.6").contains("main task is blocked"));
    assert!(text.contains("13-hidden-is-not-forbidden on 1.9.4: `Unknown tool: self.get_system_info`"));
}

fn refused(args: &[&str]) -> String {
    let out = twin(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn bad_versions_and_premises_are_refused_with_one_line() {
    for bad in ["1.9.3", "2.0.0", "1.6.6", "9.9.9"] {
        let e = refused(&["tools", "--board", "bread-compact-wifi", "--firmware", bad]);
        assert!(
            e.contains("not a tag of a modelled behaviour line") && e.contains("1.7.5–1.9.1 (L3)"),
            "{e}"
        );
    }
    for bad in ["latest", "1.9", "1.9.4-rc", ""] {
        let e = refused(&[
            "replay",
            "--board",
            "bread-compact-wifi",
            "--firmware",
            bad,
            "/dev/null",
        ]);
        assert!(e.contains("is not a version"), "{e}");
    }
    let e = refused(&[
        "run",
        "--firmware",
        "2.4.2,v2.4.2",
        "scenarios/00-turn-it-down-a-bit.yaml",
    ]);
    assert!(e.contains("twice"), "{e}");
    // A board file with a version outside the lines: file:line:col.
    let text = std::fs::read_to_string(root().join("boards/bread-compact-wifi.yaml"))
        .unwrap()
        .replace("  version: 2.4.2", "  version: 2.5.0");
    let board = scratch_file("versions", "future.yaml", text.as_bytes());
    let e = refused(&["tools", "--board", board.to_str().unwrap()]);
    assert!(e.contains("future.yaml:") && e.contains("2.5.0"), "{e}");
    // A premise no listed version meets, and one that does not parse.
    let scenario = |premise: &str| {
        format!("name: premise\nboard: bread-compact-wifi\nfirmware: {premise}\nsteps:\n  - list_tools: {{}}\n")
    };
    let path = scratch_file("versions", "premise.yaml", scenario(r#"[">=2.0.1"]"#).as_bytes());
    let e = refused(&["run", "--firmware", "1.8.9,1.9.4", path.to_str().unwrap()]);
    assert!(e.contains("premise.yaml:3:") && e.contains(">=2.0.1"), "{e}");
    let e = refused(&["run", "--firmware", "1.9.4", path.to_str().unwrap()]);
    assert!(e.contains("premise.yaml:3:"), "{e}");
    let path = scratch_file("versions", "garbled.yaml", scenario(r#"["~2.0"]"#).as_bytes());
    let e = refused(&["run", path.to_str().unwrap()]);
    assert!(
        e.contains("garbled.yaml:3:") && e.contains("not a version comparison"),
        "{e}"
    );
    let path = scratch_file("versions", "nowhere.yaml", scenario(r#"["2.0.0"]"#).as_bytes());
    let e = refused(&["run", path.to_str().unwrap()]);
    assert!(e.contains("nowhere.yaml:3:") && e.contains("not a modelled tag"), "{e}");
}
