//! The public conformance transcripts recorded from the real firmware code replay identically
//! (replies byte for byte; `self.get_system_info` by JSON shape, as `compare.py` does).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::replay::{ReplayLine, ReplayRecord, Replayer, split_lines};

fn board(id: &str) -> Arc<BoardSpec> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("boards")
        .join(format!("{id}.yaml"));
    Arc::new(BoardSpec::load(&path).expect("shipped board loads"))
}

fn replay(board_id: &str, requests: &str) -> Vec<ReplayRecord> {
    replay_as(board_id, None, requests)
}

/// Replays `requests` (relative to `tests/conformance`) on `board_id` running `firmware`.
fn replay_as(board_id: &str, firmware: Option<&str>, requests: &str) -> Vec<ReplayRecord> {
    let spec = match firmware {
        None => board(board_id),
        Some(v) => Arc::new(board(board_id).with_firmware(v).expect("modelled version")),
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(requests);
    let content = std::fs::read(&path).expect("request file");
    let mut replayer = Replayer::new(spec, 0, true);
    split_lines(&content)
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let line = ReplayLine::parse(i + 1, raw).expect("valid line");
            replayer.run_line(i + 1, raw, &line).expect("goes idle")
        })
        .collect()
}

fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), shape(x))).collect()),
        Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
        Value::String(_) => Value::String("str".into()),
        Value::Number(n) if n.is_f64() => Value::String("float".into()),
        Value::Number(_) => Value::String("int".into()),
        Value::Bool(_) => Value::String("bool".into()),
        Value::Null => Value::Null,
    }
}

fn system_info_shape(reply: &str) -> Option<(Value, Value)> {
    let outer: Value = serde_json::from_str(reply).ok()?;
    let text = outer["result"]["content"][0]["text"].as_str()?;
    let inner: Value = serde_json::from_str(text).ok()?;
    Some((outer["id"].clone(), shape(&inner)))
}

/// Compares against an expected `.jsonl` file; returns the mismatching line numbers.
fn mismatches(expected_file: &str, actual: &[ReplayRecord]) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(expected_file);
    let text = std::fs::read_to_string(&path).expect("expected file");
    let expected: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(expected.len(), actual.len(), "one record per request line");
    let mut bad = Vec::new();
    for (e, a) in expected.iter().zip(actual) {
        let want: Vec<String> = e["replies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        let got: Vec<String> = a
            .replies
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        let request = e["request"].as_str().unwrap();
        let same = want == got
            || (request.contains("self.get_system_info")
                && want.len() == got.len()
                && want
                    .iter()
                    .zip(&got)
                    .all(|(w, g)| system_info_shape(w).is_some() && system_info_shape(w) == system_info_shape(g)));
        if !same {
            bad.push(format!(
                "line {}: {}\n  expected {want:?}\n  actual   {got:?}",
                e["n"], e["note"]
            ));
        }
    }
    bad
}

#[test]
fn bread_compact_wifi_public_transcript_replays_identically() {
    let records = replay("bread-compact-wifi", "bread-compact-wifi.requests.jsonl");
    assert_eq!(records.len(), 64);
    let bad = mismatches("bread-compact-wifi.expected.jsonl", &records);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn bread_compact_wifi_burst_transcript_replays_identically() {
    let records = replay("bread-compact-wifi", "bread-compact-wifi.burst.requests.txt");
    assert_eq!(records.len(), 5);
    let bad = mismatches("bread-compact-wifi.burst.expected.jsonl", &records);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn bread_compact_wifi_lcd_public_transcript_replays_identically() {
    let records = replay("bread-compact-wifi-lcd", "bread-compact-wifi-lcd.requests.txt");
    let bad = mismatches("bread-compact-wifi-lcd.expected.jsonl", &records);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn bread_compact_wifi_s3cam_public_transcript_replays_identically() {
    let records = replay("bread-compact-wifi-s3cam", "bread-compact-wifi-s3cam.requests.txt");
    let bad = mismatches("bread-compact-wifi-s3cam.expected.jsonl", &records);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn otto_robot_public_transcript_replays_identically() {
    let records = replay("otto-robot", "otto-robot.requests.txt");
    let bad = mismatches("otto-robot.expected.jsonl", &records);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The public transcripts of older firmware (`conformance/versions/<tag>/`, recorded from the
/// real code of each tag) replay identically on the twin running that tag.
fn version_transcripts_replay_identically(tag: &str) {
    for (requests, expected, lines) in [
        (
            "bread-compact-wifi.requests.jsonl",
            "bread-compact-wifi.expected.jsonl",
            33,
        ),
        (
            "bread-compact-wifi.burst.requests.txt",
            "bread-compact-wifi.burst.expected.jsonl",
            4,
        ),
    ] {
        let dir = format!("versions/v{tag}");
        let records = replay_as("bread-compact-wifi", Some(tag), &format!("{dir}/{requests}"));
        assert_eq!(records.len(), lines, "{dir}/{requests}");
        let bad = mismatches(&format!("{dir}/{expected}"), &records);
        assert!(bad.is_empty(), "{dir}/{expected}:\n{}", bad.join("\n"));
    }
}

#[test]
fn v1_8_9_transcripts_replay_identically() {
    version_transcripts_replay_identically("1.8.9");
}

#[test]
fn v1_9_4_transcripts_replay_identically() {
    version_transcripts_replay_identically("1.9.4");
}

#[test]
fn v2_2_6_transcripts_replay_identically() {
    version_transcripts_replay_identically("2.2.6");
}

#[test]
fn system_info_reply_has_the_firmware_shape() {
    let mut replayer = Replayer::new(board("bread-compact-wifi"), 7, false);
    let raw = br#"{"jsonrpc":"2.0","id":25.5,"method":"tools/call","params":{"name":"self.get_system_info"}}"#;
    let record = replayer.run_line(1, raw, &ReplayLine::parse(1, raw).unwrap()).unwrap();
    let reply = String::from_utf8(record.replies[0].clone()).unwrap();
    let (id, got) = system_info_shape(&reply).expect("valid JSON inside a text item");
    assert_eq!(id, Value::from(25));
    // The shape docs/reference/firmware.md §10.2 shows (the string-typed heap size, the board object …).
    let golden = r#"{"version":2,"language":"zh-CN","flash_size":16777216,"minimum_free_heap_size":"123456","mac_address":"aa:bb:cc:dd:ee:ff","uuid":"u","chip_model_name":"esp32s3","chip_info":{"model":9,"cores":2,"revision":0,"features":18},"application":{"name":"xiaozhi","version":"2.4.2","compile_time":"Aug  8 2026T08:33:45Z","idf_version":"v6.0.1","elf_sha256":"00"},"partition_table": [{"label":"nvs","type":1,"subtype":2,"address":36864,"size":16384}],"ota":{"label":"ota_0"},"display":{"monochrome":true,"width":128,"height":32},"board":{"type":"bread-compact-wifi","name":"bread-compact-wifi","manufacturer":"","ssid":"MyAP","rssi":-55,"channel":6,"ip":"192.168.1.23","mac":"aa:bb:cc:dd:ee:ff"}}"#;
    let golden_shape = shape(&serde_json::from_str::<Value>(golden).unwrap());
    assert_eq!(got, golden_shape);
    assert!(
        reply.contains(r#"\"partition_table\": ["#),
        "the space after the colon is kept: {reply}"
    );
}

/// The conformance world's station facts (conformance/README.md "Stand-ins"): channel 6 and the
/// station IP `192.168.4.2`, as `self.otto.get_ip` and the system info's board object report.
#[test]
fn the_conformance_world_reports_the_recorders_station_ip() {
    let mut replayer = Replayer::new(board("otto-robot"), 0, false);
    let raw = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"self.otto.get_ip"}}"#;
    let record = replayer.run_line(1, raw, &ReplayLine::parse(1, raw).unwrap()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&record.replies[0]),
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"ip\":\"192.168.4.2\",\"connected\":true}"}],"isError":false}}"#
    );
    let raw = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"self.get_system_info"}}"#;
    let record = replayer.run_line(2, raw, &ReplayLine::parse(2, raw).unwrap()).unwrap();
    let outer: Value = serde_json::from_slice(&record.replies[0]).unwrap();
    let info: Value = serde_json::from_str(outer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let b = &info["board"];
    assert_eq!(
        (&b["ssid"], &b["rssi"], &b["channel"], &b["ip"]),
        (
            &Value::from("twin-ssid"),
            &Value::from(-50),
            &Value::from(6),
            &Value::from("192.168.4.2")
        )
    );
}
