//! The two readbacks a client gets: `WifiBoard::GetDeviceStatusJson` (cJSON-built, escaped) and
//! `Board::GetSystemInfoJson` (hand-built, unescaped, with its odd spacing and types)
//! (docs/reference/firmware.md §10.1, §10.2). Both report *software* state, never hardware.

use crate::board::BoardSpec;
use crate::cjson;
use crate::world::WifiSpec;

/// The software values the status JSON reports.
pub(crate) struct StatusFacts<'a> {
    /// `codec.output_volume()` (the board always has a codec here).
    pub volume: Option<i32>,
    /// `backlight.brightness()`: the in-flight value.
    pub brightness: Option<u8>,
    /// Display height and current theme (theme reported only when height > 64).
    pub display: Option<(u32, Option<&'a str>)>,
    /// `(level, charging)`, on boards with a battery.
    pub battery: Option<(i32, bool)>,
    /// The Wi-Fi link: `network.ssid` and `signal` (empty and `strong` when not connected).
    pub wifi: &'a WifiSpec,
}

/// RSSI ≥ −60 `strong`, ≥ −70 `medium`, else `weak`; 0 (not connected) reads `strong`.
pub(crate) fn signal_word(rssi: i32) -> &'static str {
    if rssi >= -60 {
        "strong"
    } else if rssi >= -70 {
        "medium"
    } else {
        "weak"
    }
}

/// `GetDeviceStatusJson` as cJSON prints it.
pub(crate) fn device_status_json(f: &StatusFacts<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"audio_speaker\":{");
    if let Some(v) = f.volume {
        out.extend_from_slice(b"\"volume\":");
        cjson::write_int(out, v);
    }
    out.extend_from_slice(b"},\"screen\":{");
    let mut first = true;
    if let Some(b) = f.brightness {
        out.extend_from_slice(b"\"brightness\":");
        cjson::write_int(out, i32::from(b));
        first = false;
    }
    if let Some((height, Some(theme))) = f.display
        && height > 64
    {
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(b"\"theme\":");
        cjson::write_string(out, theme.as_bytes());
    }
    out.push(b'}');
    if let Some((level, charging)) = f.battery {
        out.extend_from_slice(b",\"battery\":{\"level\":");
        cjson::write_int(out, level);
        out.extend_from_slice(if charging {
            b",\"charging\":true}"
        } else {
            b",\"charging\":false}"
        });
    }
    let (ssid, rssi): (&[u8], i32) = if f.wifi.connected {
        (f.wifi.ssid.as_bytes(), f.wifi.rssi)
    } else {
        (b"", 0)
    };
    out.extend_from_slice(b",\"network\":{\"type\":\"wifi\",\"ssid\":");
    cjson::write_string(out, ssid);
    out.extend_from_slice(b",\"signal\":");
    cjson::write_string(out, signal_word(rssi).as_bytes());
    out.extend_from_slice(b"}}");
}

/// Everything `GetSystemInfoJson` reads.
pub(crate) struct SystemFacts<'a> {
    /// The board file: chip, flash, partitions, firmware and board identity.
    pub spec: &'a BoardSpec,
    /// `mac_address` and `board.mac`.
    pub mac: &'a str,
    /// `uuid` (`Board::uuid_`).
    pub uuid: &'a str,
    /// `application.elf_sha256`.
    pub elf_sha256: &'a [u8; 32],
    /// `(monochrome, width, height)` of the display object (`NoDisplay`: false, 0, 0).
    pub display: (bool, u32, u32),
    /// The Wi-Fi link: `board.ssid`, `rssi`, `channel`, `ip` (only when connected).
    pub wifi: &'a WifiSpec,
}

/// `Board::GetSystemInfoJson` + `WifiBoard::GetBoardJson`, concatenated without escaping.
pub(crate) fn system_info_json(f: &SystemFacts<'_>) -> Vec<u8> {
    let s = f.spec;
    let t = &s.target;
    let fw = &s.firmware;
    let mut j = String::with_capacity(1024);
    j.push_str(&format!("{{\"version\":2,\"language\":\"{}\",", fw.language));
    j.push_str(&format!("\"flash_size\":{},", t.flash_size));
    j.push_str(&format!("\"minimum_free_heap_size\":\"{}\",", t.minimum_free_heap));
    j.push_str(&format!("\"mac_address\":\"{}\",", f.mac));
    j.push_str(&format!("\"uuid\":\"{}\",", f.uuid));
    j.push_str(&format!("\"chip_model_name\":\"{}\",", t.chip.model_name()));
    j.push_str(&format!(
        "\"chip_info\":{{\"model\":{},\"cores\":{},\"revision\":{},\"features\":{}}},",
        t.chip.model_id(),
        t.chip.cores(),
        t.revision,
        t.chip.features()
    ));
    let sha: String = f.elf_sha256.iter().map(|b| format!("{b:02x}")).collect();
    j.push_str(&format!(
        "\"application\":{{\"name\":\"{}\",\"version\":\"{}\",\"compile_time\":\"{}\",\"idf_version\":\"{}\",\"elf_sha256\":\"{sha}\"}},",
        fw.project_name, fw.project_ver(), fw.compile_time, fw.idf_version()
    ));
    j.push_str("\"partition_table\": [");
    for (i, (label, ty, subtype, address, size)) in t.partitions.rows().iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        j.push_str(&format!(
            "{{\"label\":\"{label}\",\"type\":{ty},\"subtype\":{subtype},\"address\":{address},\"size\":{size}}}"
        ));
    }
    j.push_str(&format!(
        "],\"ota\":{{\"label\":\"{}\"}},",
        t.partitions.running_label()
    ));
    let (mono, w, h) = f.display;
    j.push_str(&format!(
        "\"display\":{{\"monochrome\":{mono},\"width\":{w},\"height\":{h}}},"
    ));
    let mut out = j.into_bytes();
    out.extend_from_slice(format!("\"board\":{{\"type\":\"{}\",\"name\":\"{}\",", s.board_type, s.name).as_bytes());
    if s.firmware().board_manufacturer {
        out.extend_from_slice(format!("\"manufacturer\":\"{}\",", s.manufacturer).as_bytes());
    }
    if f.wifi.connected {
        out.extend_from_slice(b"\"ssid\":\"");
        out.extend_from_slice(f.wifi.ssid.as_bytes());
        out.extend_from_slice(
            format!(
                "\",\"rssi\":{},\"channel\":{},\"ip\":\"{}\",",
                f.wifi.rssi, f.wifi.channel, f.wifi.ip
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(format!("\"mac\":\"{}\"}}}}", f.mac).as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_json_matches_the_oled_golden() {
        let wifi = WifiSpec {
            ssid: "TestAP".into(),
            ..WifiSpec::default()
        };
        let mut out = Vec::new();
        device_status_json(
            &StatusFacts {
                volume: Some(0),
                brightness: None,
                display: Some((32, Some("dark"))),
                battery: None,
                wifi: &wifi,
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"audio_speaker":{"volume":0},"screen":{},"network":{"type":"wifi","ssid":"TestAP","signal":"strong"}}"#
        );
    }

    #[test]
    fn status_json_reports_theme_only_on_tall_screens() {
        let wifi = WifiSpec {
            ssid: "MyAP".into(),
            rssi: -65,
            ..WifiSpec::default()
        };
        let mut out = Vec::new();
        device_status_json(
            &StatusFacts {
                volume: Some(70),
                brightness: Some(75),
                display: Some((320, Some("light"))),
                battery: None,
                wifi: &wifi,
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"audio_speaker":{"volume":70},"screen":{"brightness":75,"theme":"light"},"network":{"type":"wifi","ssid":"MyAP","signal":"medium"}}"#
        );
    }

    #[test]
    fn signal_thresholds() {
        assert_eq!(signal_word(-60), "strong");
        assert_eq!(signal_word(-61), "medium");
        assert_eq!(signal_word(-70), "medium");
        assert_eq!(signal_word(-71), "weak");
        assert_eq!(signal_word(0), "strong");
    }
}
