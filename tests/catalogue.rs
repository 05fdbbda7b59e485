//! Tool catalogues derived from board facts match docs/reference/firmware.md §7.4 byte for byte (sizes and
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

#[test]
fn bread_compact_wifi_128x64_lists_like_the_32_pixel_build() {
    let d = booted(shipped("bread-compact-wifi-128x64"), false);
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
fn bread_compact_wifi_lcd_lists_match_the_spec() {
    let d = booted(shipped("bread-compact-wifi-lcd"), false);
    assert_list(
        &d,
        false,
        1572,
        "68b6ce0095b56b3c6b8aa6e7b86f06bf4f5a01c19407b82d2462ac9d13424bd2",
    );
    assert_list(
        &d,
        true,
        3121,
        "d08f89caecd8fb6c5ccfc96a87136c08eef3d39bb0785a46f6255d51c3642307",
    );
}

#[test]
fn bread_compact_wifi_s3cam_lists_match_the_spec() {
    let d = booted(shipped("bread-compact-wifi-s3cam"), false);
    assert_list(
        &d,
        false,
        1634,
        "72c3dd6a55081b5cd95c0f764b142d279ec15b33c204393251bee8f7425cc65f",
    );
    assert_list(
        &d,
        true,
        3183,
        "af67f5040f04dff214012ad201f80dfe95566929930a6b3efabcabc5f0aece51",
    );
}

#[test]
fn otto_robot_pages_after_eleven_tools() {
    let d = booted(shipped("otto-robot"), false);
    let (r, next, n) = page(&d, "", false);
    assert_eq!(
        (n, next.as_deref(), r.len()),
        (11, Some("self.battery.get_level"), 7975)
    );
    assert_eq!(
        sha(&r),
        "9cfb1733193da79b607becac1bde04cddc1638126eea4f068c76f1a20eec4a26"
    );
    let (r, next, n) = page(&d, "self.battery.get_level", false);
    assert_eq!((n, next, r.len()), (2, None, 273));
}

fn names(d: &Device, with_user_tools: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let (r, next, _) = page(d, &cursor, with_user_tools);
        let v: serde_json::Value = serde_json::from_slice(&r).unwrap();
        out.extend(
            v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string()),
        );
        match next {
            Some(c) => cursor = c,
            None => return out,
        }
    }
}

#[test]
fn hardware_codec_boards_derive_their_lists_from_their_facts() {
    // Waveshare ESP32-S3 audio board: backlight, LCD themes and a camera ⇒ T1–T5, snapshot on S3.
    let d = booted(shipped("waveshare/esp32-s3-audio-board"), false);
    assert_eq!(
        names(&d, false),
        [
            "self.get_device_status",
            "self.audio_speaker.set_volume",
            "self.screen.set_brightness",
            "self.screen.set_theme",
            "self.camera.take_photo"
        ]
    );
    assert!(names(&d, true).contains(&"self.screen.snapshot".to_string()));
    // ESP32-C3: no CONFIG_LV_USE_SNAPSHOT ⇒ get_info stays, snapshot and preview are gone.
    let d = booted(shipped("lckfb/szpi-esp32c3"), false);
    assert_eq!(
        names(&d, true),
        [
            "self.get_device_status",
            "self.audio_speaker.set_volume",
            "self.screen.set_brightness",
            "self.screen.set_theme",
            "self.get_system_info",
            "self.reboot",
            "self.upgrade_firmware",
            "self.screen.get_info",
            "self.assets.set_download_url"
        ]
    );
}

/// docs/reference/firmware.md §4.4's synthetic golden: 20 board tools of 589 bytes after the lamp tools.
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
