//! `xiaozhi-twin stdio` driven by a real MCP client written elsewhere: the official MCP Python
//! SDK (PyPI `mcp`, pinned in tests/mcp_sdk/ensure_venv.sh, installed into target/mcp-venv by
//! .ci/run or on first use here).
//!
//! In `--compat` mode every step works. In faithful mode the SDK accepts the firmware's
//! successes but cannot parse its errors (no `code`): pydantic rejects the reply, the request
//! is never resolved, and the SDK call runs into its timeout. That is what this test asserts,
//! because it is what happens to any SDK-based client talking to the real firmware's replies.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn python() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("tests/mcp_sdk/ensure_venv.sh"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "installing the MCP Python SDK failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn drive(mode: &str) -> (Value, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(root.join("tests/mcp_sdk/drive_stdio.py"))
        .args([env!("CARGO_BIN_EXE_xiaozhi-twin"), "bread-compact-wifi", mode])
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the SDK driver failed ({mode}):\n{stderr}");
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("driver output is not JSON ({e}): {stderr}"));
    (v, stderr)
}

fn volume_seen(status: &Value) -> i64 {
    let text = status["result"]["content"][0]["text"].as_str().expect("status text");
    let inner: Value = serde_json::from_str(text).expect("status is JSON");
    inner["audio_speaker"]["volume"].as_i64().expect("volume")
}

#[test]
fn the_python_sdk_drives_a_compat_board_end_to_end() {
    let (v, _) = drive("compat");
    assert_eq!(v["initialize"]["result"]["protocol_version"], "2024-11-05");
    assert_eq!(v["initialize"]["result"]["server_info"]["name"], "bread-compact-wifi");
    let tools: Vec<&str> = v["tools_list"]["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"self.audio_speaker.set_volume"), "{tools:?}");
    assert!(
        !tools.contains(&"self.reboot"),
        "user-only tools stay hidden: {tools:?}"
    );
    assert_eq!(v["set_volume"]["result"]["content"][0]["text"], "true");
    assert_eq!(v["set_volume"]["result"]["is_error"], false);
    assert_eq!(volume_seen(&v["get_device_status"]), 35, "readback after set_volume");
    // The firmware's error, now with a code the SDK accepts: raised as MCPError.
    assert_eq!(v["set_volume_out_of_range"]["ok"], false);
    assert_eq!(v["set_volume_out_of_range"]["error"], "MCPError");
    assert_eq!(
        v["set_volume_out_of_range"]["message"],
        "Value exceeds maximum allowed: 100"
    );
    assert_eq!(v["ping"]["ok"], true);
}

#[test]
fn in_faithful_mode_the_python_sdk_cannot_parse_the_firmwares_errors() {
    let (v, stderr) = drive("faithful");
    // Successes are standard enough.
    assert_eq!(v["initialize"]["ok"], true);
    assert_eq!(v["tools_list"]["ok"], true);
    assert_eq!(v["set_volume"]["result"]["content"][0]["text"], "true");
    assert_eq!(volume_seen(&v["get_device_status"]), 35);
    // Errors without `code` fail validation; the request never resolves.
    assert_eq!(v["set_volume_out_of_range"]["error"], "timeout", "{v}");
    assert_eq!(v["ping"]["error"], "timeout", "{v}");
    assert!(
        stderr.contains("JSONRPCError.error.code"),
        "the SDK names the missing field:\n{stderr}"
    );
    assert!(stderr.contains("Method not implemented: ping"), "{stderr}");
}
