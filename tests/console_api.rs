//! `xiaozhi-twin console` without a browser: its HTTP API reads the twin, refuses what it
//! cannot do, reflashes to another board, firmware and backend (the built-in one's personality
//! and wire, or the server the console was started with), and the console follows a real OTA
//! answer or a given MQTT gateway onto MQTT + UDP.

mod common;
#[path = "console/shared.rs"]
mod shared;

use std::time::Duration;

use serde_json::{Value, json};

use shared::{console, http, state_until};

/// The HTTP API drives a running console without a browser: the state and the screen read,
/// bad names refused with what is known, and a reflash to another board boots that board.
#[test]
fn the_console_s_http_api_reads_the_twin_and_reflashes_it() {
    let (_console, base) = console(&["--duration", "120s"]);
    let state = |what: &str| -> Value {
        state_until(&base, what, &|v| {
            what.is_empty() || v["board"]["name"] == what && v["status"]["state"] == "idle"
        })
    };
    let first = state("bread-compact-wifi");
    let buttons: Vec<&str> = first["board"]["buttons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(buttons.contains(&"boot"), "{buttons:?}");
    let (code, png) = http("GET", &format!("{base}/api/screen.png"), b"");
    assert_eq!(
        (code, &png[..4]),
        (200, &b"\x89PNG"[..]),
        "{}",
        String::from_utf8_lossy(&png)
    );

    let (code, body) = http("POST", &format!("{base}/api/button/nope"), b"");
    assert_eq!(
        (code, String::from_utf8_lossy(&body).trim()),
        (404, "this board has no button `nope`")
    );
    let (code, body) = http("POST", &format!("{base}/api/fault/nope?on=true"), b"");
    assert_eq!(code, 404);
    assert!(
        String::from_utf8_lossy(&body).contains("amp_shutdown"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (code, _) = http("POST", &format!("{base}/api/say"), b"not a wav");
    assert_eq!(code, 400);
    let (code, body) = http("POST", &format!("{base}/api/type"), "字".repeat(3000).as_bytes());
    assert_eq!(code, 413, "{}", String::from_utf8_lossy(&body));
    let (code, body) = http("POST", &format!("{base}/api/board?board=no-such-board"), b"");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let (code, body) = http("GET", &format!("{base}/api/boards"), b"");
    assert_eq!(code, 200);
    let boards: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        boards["boards"].as_array().unwrap().len() > 170,
        "every upstream build: {boards}"
    );
    assert!(
        boards["firmware"].as_array().unwrap().contains(&json!("2.2.6")),
        "{boards}"
    );

    // Reflash to the ESP32-C3 board on 2.2.6: it boots, with its own buttons, and is idle.
    let (code, _) = http(
        "POST",
        &format!("{base}/api/board?board=lckfb/szpi-esp32c3&firmware=2.2.6"),
        b"",
    );
    assert_eq!(code, 202);
    let c3 = xiaozhi_twin::boards::load("lckfb/szpi-esp32c3").unwrap().name.clone();
    let after = state(&c3);
    assert_eq!(after["board"]["firmware"], "2.2.6", "{after:#}");
    assert_eq!(after["status"]["boots"], 1, "a fresh board: {after:#}");
    let (code, _) = http("POST", &format!("{base}/api/button/boot?action=click"), b"");
    assert_eq!(code, 202);
    let lines = state("")["lines"].to_string();
    assert!(lines.contains("reflash: "), "{lines}");
}

/// The word after `marker` in the backend's stderr (where it serves something).
fn announced(backend: &common::Backend, marker: &str) -> String {
    let line = common::wait_for_line(&backend.stderr, Duration::from_secs(20), |l| l.contains(marker));
    let (_, rest) = line.split_once(marker).unwrap();
    rest.split_whitespace().next().unwrap().to_string()
}

/// `--ota`: the console's device activates at a backend's OTA endpoint, goes where its answer
/// sends it (MQTT + UDP through the backend's gateway), and a typed turn gets the backend's
/// set_volume call, answered `true`, over that wire.
#[test]
fn the_console_behind_an_ota_talks_over_mqtt_and_udp() {
    let backend = common::listening(&["--mqtt", "127.0.0.1:0", "--ota", "127.0.0.1:0", "--duration", "90s"]);
    let ota = announced(&backend, "OTA on ");
    let mut backend = backend;
    let (_console, base) = console(&["--duration", "80s", "--ota", &ota]);
    let until = |what: &str, ok: &dyn Fn(&Value) -> bool| state_until(&base, what, ok);
    until("idle", &|v| v["status"]["state"] == "idle");
    assert_eq!(
        http("POST", &format!("{base}/api/button/boot?action=click"), b"").0,
        202
    );
    until("listening", &|v| v["status"]["state"] == "listening");
    assert_eq!(
        http("POST", &format!("{base}/api/type"), "把音量调小一点".as_bytes()).0,
        202
    );
    let done = until("set_volume answered", &|v| {
        v["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["tool"] == "self.audio_speaker.set_volume" && c["text"] == "true")
    });
    let lines = done["lines"].to_string();
    assert!(lines.contains("MQTT"), "the device went over MQTT: {lines}");
    let _ = backend.child.kill();
    let _ = backend.child.wait();
}

/// The backend is chosen as a board is: a reflash asked for the built-in backend over MQTT + UDP
/// boots the board there (its gateway stand-in, audio over UDP) and a typed turn gets
/// `set_volume`'s `true` over that wire; another reflash asks for another personality over a
/// WebSocket. A backend the console cannot have is refused with what it can.
#[test]
fn a_reflash_chooses_the_built_in_backend_s_wire_and_personality() {
    let (_console, base) = console(&["--duration", "120s"]);
    let until = |what: &str, ok: &dyn Fn(&Value) -> bool| state_until(&base, what, ok);
    let first = until("idle", &|v| v["status"]["state"] == "idle");
    assert_eq!(first["board"]["backend"]["wire"], "websocket", "{first:#}");
    let (code, body) = http("GET", &format!("{base}/api/boards"), b"");
    assert_eq!(code, 200);
    let choices: Value = serde_json::from_slice(&body).unwrap();
    let shipped: Vec<&str> = xiaozhi_sim::backend::spec::SHIPPED.iter().map(|(n, _)| *n).collect();
    assert_eq!(choices["backends"]["personalities"], json!(shipped), "{choices}");
    assert_eq!(choices["backends"]["server"], Value::Null);

    for (query, why) in [
        ("personality=nope", "personality `nope`: xinnan-py"),
        ("wire=udp", "wire `udp`: websocket or mqtt"),
        ("backend=server", "started without one"),
        ("backend=cloud", "backend `cloud`: built-in or server"),
    ] {
        let (code, body) = http(
            "POST",
            &format!("{base}/api/board?board=bread-compact-wifi&{query}"),
            b"",
        );
        let body = String::from_utf8_lossy(&body);
        assert!(code == 400 && body.contains(why), "{query}: {code} {body}");
    }

    let (code, _) = http(
        "POST",
        &format!("{base}/api/board?board=bread-compact-wifi&wire=mqtt"),
        b"",
    );
    assert_eq!(code, 202);
    until("on MQTT and idle", &|v| {
        v["board"]["backend"]["wire"] == "mqtt" && v["status"]["state"] == "idle" && v["status"]["boots"] == 1
    });
    assert_eq!(http("POST", &format!("{base}/api/button/boot"), b"").0, 202);
    until("listening", &|v| v["status"]["state"] == "listening");
    // The console's turn: the first utterance is answered, the second gets set_volume.
    let answered = |n: usize| {
        move |v: &Value| {
            v["heard"]
                .as_array()
                .is_some_and(|h| h.iter().filter(|l| l["sentence"].is_null()).count() >= n)
                && v["status"]["state"] == "listening"
        }
    };
    assert_eq!(http("POST", &format!("{base}/api/type"), "你好".as_bytes()).0, 202);
    until("the first reply", &answered(1));
    assert_eq!(
        http("POST", &format!("{base}/api/type"), "把音量调小一点".as_bytes()).0,
        202
    );
    let done = until("set_volume answered over MQTT", &|v| {
        v["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["tool"] == "self.audio_speaker.set_volume" && c["text"] == "true")
    });
    let texts: Vec<&str> = done["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("the device dials mqtt://127.0.0.1:"))
            && texts
                .iter()
                .any(|t| t.contains("\"transport\":\"udp\"") && t.contains("aes-128-ctr"))
            && texts.iter().any(|t| t.starts_with("audio channel opened (UDP)")),
        "the device went over MQTT + UDP: {texts:#?}"
    );

    let (code, _) = http(
        "POST",
        &format!("{base}/api/board?board=bread-compact-wifi&personality=go-eager&wire=websocket"),
        b"",
    );
    assert_eq!(code, 202);
    let after = until("go-eager over a WebSocket", &|v| {
        v["board"]["backend"]["personality"] == "go-eager" && v["status"]["state"] == "idle"
    });
    assert_eq!(after["board"]["backend"]["wire"], "websocket", "{after:#}");
    assert!(
        after["lines"].to_string().contains("the device dials ws://127.0.0.1:"),
        "{after:#}"
    );
}

/// `--mqtt ENDPOINT`: the console's device is configured for a gateway there as the server's
/// OTA would configure it and goes idle over MQTT; the page may leave for the built-in backend
/// and come back to that server (`backend=server`).
#[test]
fn the_console_on_a_given_gateway_can_leave_it_and_come_back() {
    let backend = common::listening(&["--mqtt", "127.0.0.1:0", "--duration", "90s"]);
    let endpoint = announced(&backend, "MQTT gateway on ");
    let mut backend = backend;
    let (_console, base) = console(&["--duration", "80s", "--mqtt", &endpoint]);
    let until = |what: &str, ok: &dyn Fn(&Value) -> bool| state_until(&base, what, ok);
    let on_server = |v: &Value| v["board"]["backend"]["kind"] == "server" && v["status"]["state"] == "idle";
    let first = until("idle on the gateway", &on_server);
    assert!(
        first["board"]["backend"]["text"].as_str().unwrap().contains(&endpoint),
        "{first:#}"
    );
    assert!(
        first["lines"].to_string().contains("MQTT: Connected to endpoint"),
        "{first:#}"
    );
    let (code, _) = http(
        "POST",
        &format!("{base}/api/board?board=bread-compact-wifi&backend=built-in"),
        b"",
    );
    assert_eq!(code, 202);
    until("on the built-in backend", &|v| {
        v["board"]["backend"]["kind"] == "built-in" && v["status"]["state"] == "idle"
    });
    let (code, _) = http(
        "POST",
        &format!("{base}/api/board?board=bread-compact-wifi&backend=server"),
        b"",
    );
    assert_eq!(code, 202);
    until("back on the gateway", &on_server);
    let _ = backend.child.kill();
    let _ = backend.child.wait();
}
