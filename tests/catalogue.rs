//! Tool catalogues derived from board facts match FIRMWARE.md §7.4 byte for byte (sizes and
//! SHA-256 of the `result` object), and paging follows §4.4 exactly.

use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::mcp::ToolsPage;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;

fn shipped(id: &str) -> Arc<BoardSpec> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("boards")
        .join(format!("{id}.yaml"));
    Arc::new(BoardSpec::load(&path).expect("shipped board loads"))
}

fn booted(spec: Arc<BoardSpec>, display_fails: bool) -> Device {
    let mut d = Device::new(spec, WorldSpec::conformance(), 0);
    d.faults_mut().display_init_fails = display_fails;
    d.power_on(SimTime::ZERO);
    d
}

fn page(d: &Device, cursor: &str, with_user_tools: bool) -> (Vec<u8>, Option<String>, usize) {
    match d.mcp().unwrap().tools_list(cursor.as_bytes(), with_user_tools) {
        ToolsPage::Page {
            result,
            next_cursor,
            tools,
        } => (result, next_cursor, tools),
        ToolsPage::Error { message } => panic!("error page: {}", String::from_utf8_lossy(&message)),
    }
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn assert_list(d: &Device, with_user_tools: bool, len: usize, digest: &str) {
    let (result, next, _) = page(d, "", with_user_tools);
    assert_eq!(next, None);
    assert_eq!(
        (result.len(), sha(&result).as_str()),
        (len, digest),
        "withUserTools={with_user_tools}"
    );
}

#[test]
fn bread_compact_wifi_lists_match_the_spec() {
    let d = booted(shipped("bread-compact-wifi"), false);
    assert_list(
        &d,
        false,
        1353,
        "90a48b3d90f1edfd2cad5bf809ab9c514a54b940db49ea1d6d123dcd05e218d3",
    );
    assert_list(
        &d,
        true,
        2902,
        "899d79b4c9a6a297199cd32a5da74800ca2150631c34c0fe77c699e3646a7cda",
    );
}

#[test]
fn nodisplay_fallback_lists_match_the_spec() {
    let d = booted(shipped("bread-compact-wifi"), true);
    assert_list(
        &d,
        false,
        1145,
        "15a7d623380a829b950b7eaa3a45573c6ac9c3f73b27440bc0371c8e7a75978e",
    );
    assert_list(
        &d,
        true,
        1998,
        "7099ea4f1926f55745b969202af54237eba23f503d6d08539e026fff8c14b56d",
    );
}

/// FIRMWARE.md §4.4's synthetic golden: 20 board tools of 589 bytes after the lamp tools.
#[test]
fn synthetic_twenty_tool_board_pages_exactly_as_verified() {
    // The test tools are constructor tools registered right after the lamp.
    let mut spec_text = String::new();
    for line in include_str!("../boards/bread-compact-wifi.yaml").lines() {
        spec_text.push_str(line);
        spec_text.push('\n');
        if line.starts_with("  - lamp:") {
            for i in 0..20 {
                spec_text.push_str(&format!(
                    "  - tool:\n      name: self.test.t{i:02}\n      description: {}\n      behavior: {{ returns: {{ value: true }} }}\n",
                    "x".repeat(500)
                ));
            }
        }
    }
    let d = booted(
        Arc::new(BoardSpec::from_yaml("synthetic.yaml", &spec_text).unwrap()),
        false,
    );
    let tools = d.mcp().unwrap().tools();
    assert_eq!(
        tools.iter().find(|t| t.name() == "self.test.t00").unwrap().json().len(),
        589
    );

    let (r, next, n) = page(&d, "", false);
    assert_eq!((n, next.as_deref(), r.len()), (17, Some("self.test.t11"), 7872));
    assert!(r.starts_with(br#"{"tools":[{"name":"self.get_device_status""#));
    assert!(r.ends_with(br#"],"nextCursor":"self.test.t11"}"#));
    let (r, next, n) = page(&d, "self.test.t11", false);
    assert_eq!((n, next, r.len()), (9, None, 5321));
    let (r, next, n) = page(&d, "", true);
    assert_eq!((n, next.as_deref(), r.len()), (17, Some("self.test.t11"), 7872));
    let (r, next, n) = page(&d, "self.test.t11", true);
    assert_eq!((n, next, r.len()), (16, None, 6870));
    assert!(r.ends_with(br#"{"name":"self.assets.set_download_url","description":"Set the download url for the assets","inputSchema":{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]},"annotations":{"audience":["user"]}}]}"#));
}
