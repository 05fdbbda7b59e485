//! The second wire over real loopback sockets, two processes in real time: `backend --mqtt --ota`
//! (the xiaozhi-mqtt-gateway stand-in in front of xinnan-py, with a script that awaits each turn,
//! answers, calls set_volume 40 and says so) ↔ `connect --ota` (a user who opens the channel,
//! types one turn, speaks another and closes). The OTA answer must send the device to MQTT,
//! discovery must come from the gateway at CONNECT, the speech must arrive over UDP and be heard
//! 9.7 dB quieter after the call, the claim must be judged, and the goodbye must go both ways.

mod common;

use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::Value;

use common::{finish, listening, speechlike_wav};

/// The address a `backend: <what> …` line names after `prefix` (read from the backend's stderr).
fn announced(stderr: &Receiver<String>, prefix: &str) -> String {
    loop {
        let line = stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the backend never printed {prefix:?}"));
        if let Some(rest) = line.split(prefix).nth(1) {
            return rest.split([' ', '/']).next().unwrap().to_string();
        }
    }
}

#[test]
fn connect_over_mqtt_udp_against_the_twins_gateway_hears_the_reply_get_quieter() {
    let dir = common::scratch_dir("mqtt-wire");
    speechlike_wav(&dir.join("ask.wav"), 2);
    let backend_script = dir.join("backend.txt");
    std::fs::write(
        &backend_script,
        "await utterance\nspeak \"好的，我在听\" for 2s\nawait utterance\ncall self.audio_speaker.set_volume {\"volume\": 40}\nspeak \"音量已经调小了\" for 2s\n",
    )
    .unwrap();
    let user_script = dir.join("user.txt");
    std::fs::write(
        &user_script,
        "press boot\nwait 2s\nsay \"把音量调小一点\"\nwait 5s\nsay ask.wav\nwait 6s\npress boot\nwait 1s\n",
    )
    .unwrap();
    let report = dir.join("report.json");
    let b = listening(&[
        "--personality",
        "xinnan-py",
        "--script",
        backend_script.to_str().unwrap(),
        "--mqtt",
        "127.0.0.1:0",
        "--ota",
        "127.0.0.1:0",
        "--mqtt-signature-key",
        "twin-key",
        // Without it the typed turn's `tts start` waits behind the `stt` for an ACK and the
        // reply's first frames are dropped (the next test); here every frame is counted.
        "--mqtt-nodelay",
        "--connections",
        "1",
        "--duration",
        "40s",
    ]);
    let mqtt = announced(&b.stderr, "MQTT gateway on ");
    let ota = announced(&b.stderr, "OTA on http://");
    assert!(mqtt.starts_with("127.0.0.1:"), "{mqtt}");
    let child = std::process::Command::new(common::BIN)
        .args(["connect", "--board", "bread-compact-wifi", "--duration", "20s"])
        .arg("--ota")
        .arg(format!("http://{ota}/xiaozhi/ota/"))
        .arg("--script")
        .arg(&user_script)
        .arg("--report")
        .arg(&report)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _, stderr) = finish(child, Duration::from_secs(40));
    let (bcode, bout, berr) = finish(b.child, Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(bcode, 0, "{berr}");
    assert!(
        !stderr.contains("panicked") && !berr.contains("panicked"),
        "{stderr}\n{berr}"
    );

    // The OTA answer sent the device to MQTT, signed, and the gateway took the password.
    assert!(
        stderr.contains(&format!("ota: mqtt {mqtt} as GID_bread-compact-wifi@@@")),
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["wire"], "mqtt+udp");
    assert_eq!(r["mqtt_endpoint"], mqtt.as_str());
    assert_eq!(r["connections"]["connects"], 1, "{:#}", r["connections"]);
    assert_eq!(r["connections"]["connect_failures"], 0);
    assert!(
        r["connections"]["binary_out"].as_u64().unwrap() > 30,
        "microphone datagrams"
    );

    // Discovery came from the gateway at CONNECT (ids 10000, 10001), before any hello; the
    // server's own initialize reached the device, its tools/list did not.
    let requests = r["mcp_requests"].as_array().unwrap();
    let ids: Vec<(i64, &str)> = requests
        .iter()
        .filter_map(|q| Some((q["id"].as_i64()?, q["method"].as_str()?)))
        .collect();
    assert_eq!(ids[0], (10000, "initialize"), "{ids:?}");
    assert!(ids.contains(&(10001, "tools/list")), "{ids:?}");
    assert!(ids.contains(&(1, "initialize")), "{ids:?}");
    assert_eq!(ids.iter().filter(|(_, m)| *m == "tools/list").count(), 1, "{ids:?}");

    // A typed turn and a spoken one, each answered with speech over UDP and heard, the second
    // 9.7 dB quieter.
    common::two_turns_heard_quieter_after_set_volume_40(&r, &stderr);
    let user: Vec<&str> = r["user"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["action"].as_str())
        .collect();
    assert!(user.iter().any(|a| a.starts_with("typed input")), "{user:?}");

    // Goodbye both ways: the device's on its close, the gateway's echo after the bridge closed.
    assert!(
        stderr.contains(r#"→ {"session_id":""#) && stderr.contains(r#""type":"goodbye"}"#),
        "the device's goodbye: {stderr}"
    );
    assert!(
        stderr.contains(r#"← {"type":"goodbye","session_id":"#),
        "the echo: {stderr}"
    );
    // The backend's report of the bridge: the device's headers as the gateway sends them.
    let reports: Vec<Value> = bout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(reports.len(), 1, "{bout}");
    assert_eq!(reports[0]["ending"], "gateway_closed");
    assert_eq!(reports[0]["path"], "/xiaozhi/v1/?from=mqtt_gateway");
    let protocol = reports[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "protocol-version")
        .map(|h| h[1].clone());
    assert_eq!(protocol, Some(Value::from("2")), "{:#}", reports[0]["headers"]);
}

/// `connect` with these arguments for `secs` (frames on stderr; `--wake manual` unless they
/// say), to completion.
fn run_connect(args: &[&str], secs: u64) -> (i32, String) {
    let wake: &[&str] = if args.contains(&"--wake") {
        &[]
    } else {
        &["--wake", "manual"]
    };
    let child = std::process::Command::new(common::BIN)
        .args(["connect", "--board", "bread-compact-wifi"])
        .args(wake)
        .args(["--duration", &format!("{secs}s")])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _, stderr) = finish(child, Duration::from_secs(secs + 20));
    assert!(!stderr.contains("panicked"), "{stderr}");
    (code, stderr)
}

/// A `backend --mqtt` with these extra arguments; its MQTT address.
fn mqtt_backend(extra: &[&str]) -> (common::Backend, String) {
    let mut args = vec!["--mqtt", "127.0.0.1:0", "--duration", "15s"];
    args.extend_from_slice(extra);
    let b = listening(&args);
    let mqtt = announced(&b.stderr, "MQTT gateway on ");
    (b, mqtt)
}

fn stop(b: common::Backend) {
    let mut c = b.child;
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn an_answer_with_both_blocks_goes_to_mqtt_as_application_cc_does() {
    let (b, mqtt) = mqtt_backend(&[]);
    let answer = format!(
        r#"{{"websocket":{{"url":"ws://127.0.0.1:{}/xiaozhi/v1/","token":""}},"mqtt":{{"endpoint":"{mqtt}","client_id":"GID_test@@@02_00_00_00_00_07@@@02_00_00_00_00_07","username":"eyJpcCI6ICJ1bmtub3duIn0=","password":"","publish_topic":"device-server"}}}}"#,
        b.port
    );
    let (ota_port, ota) = common::ota_server(answer);
    let (code, stderr) = run_connect(&["--ota", &format!("http://127.0.0.1:{ota_port}/xiaozhi/ota/")], 3);
    let _ = ota.join();
    stop(b);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("both an `mqtt` and a `websocket` block"), "{stderr}");
    assert!(
        stderr.contains(&format!("log I MQTT: Connecting to endpoint {mqtt}")),
        "{stderr}"
    );
    assert!(stderr.contains("log I MQTT: Connected to endpoint"), "{stderr}");
    // The gateway's own MCP at CONNECT reached the device, over MQTT, before any hello.
    assert!(
        stderr.contains(r#"← {"type":"mcp","payload":{"jsonrpc":"2.0","method":"initialize","id":10000"#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"→ {"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":10000,"result""#),
        "{stderr}"
    );
    assert!(!stderr.contains("WebSocket"), "no WebSocket was dialled: {stderr}");
}

#[test]
fn an_answer_with_neither_block_is_mqtt_without_an_endpoint() {
    let (ota_port, ota) = common::ota_server(r#"{"firmware":{"version":"2.4.2","url":""}}"#.to_string());
    let (code, stderr) = run_connect(&["--ota", &format!("http://127.0.0.1:{ota_port}/xiaozhi/ota/")], 2);
    let _ = ota.join();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("ota: No protocol specified in the OTA config, using MQTT"),
        "{stderr}"
    );
    assert!(stderr.contains("ota: mqtt (no endpoint)"), "{stderr}");
    assert!(
        stderr.contains("log W MQTT: MQTT endpoint is not specified"),
        "{stderr}"
    );
    assert!(stderr.contains("connects 0 (failed 0)"), "nothing is dialled: {stderr}");
}

#[test]
fn connect_mqtt_signs_as_the_server_does_and_a_wrong_key_is_connack_then_a_drop() {
    let (b, mqtt) = mqtt_backend(&["--mqtt-signature-key", "right"]);
    let (code, good) = run_connect(&["--mqtt", &mqtt, "--mqtt-signature-key", "right"], 2);
    assert_eq!(code, 0, "{good}");
    assert!(good.contains("log I MQTT: Connected to endpoint"), "{good}");
    assert!(
        good.contains(r#""method":"initialize","id":10000"#),
        "the gateway took the password: {good}"
    );
    assert!(!good.contains("MQTT disconnected"), "{good}");
    let (code, bad) = run_connect(&["--mqtt", &mqtt, "--mqtt-signature-key", "wrong"], 2);
    stop(b);
    assert_eq!(code, 0, "{bad}");
    // The gateway sends CONNACK 0 before it checks the password: the firmware logs a connection,
    // then loses it and arms its 60 s timer.
    assert!(bad.contains("log I MQTT: Connected to endpoint"), "{bad}");
    assert!(
        bad.contains("MQTT disconnected, schedule reconnect in 60 seconds"),
        "{bad}"
    );
    assert!(!bad.contains(r#""id":10000"#), "{bad}");
}

#[test]
fn with_nagle_on_as_the_gateway_leaves_it_tts_start_waits_for_an_ack_and_the_first_audio_is_dropped() {
    let backend = "await utterance\nspeak \"好的，我在听\" for 2s\n";
    let user = "press boot\nwait 1500ms\nsay \"你好\"\nwait 3s\n";
    let reports = [
        scripted_pair("mqtt-wire-nagle", user, backend, &[], 5),
        scripted_pair("mqtt-wire-nodelay", user, backend, &["--mqtt-nodelay"], 5),
    ];
    let (nagle, nodelay) = (&reports[0], &reports[1]);
    // The server's `stt` and `tts start` go out as two small publishes; with Nagle on, the second
    // waits for the device's ACK of the first, while the reply's first datagrams (the server
    // sends a few at once) arrive over UDP and find the device still listening (6 frames seen).
    let early = nagle["frames_outside_sessions"]["dropped_wrong_state"]
        .as_u64()
        .unwrap();
    let heard = |r: &Value| r["tts_sessions"][0]["frames"]["received"].as_u64().unwrap();
    // The first audio is lost, not the reply: most of it still arrives inside the session
    // (6 early frames on a quiet machine; 11 once, with a release build running beside the suite).
    assert!(
        early >= 1 && early < heard(nagle),
        "{early} early, {} heard: {:#}",
        heard(nagle),
        nagle["frames_outside_sessions"]
    );
    // With TCP_NODELAY the `tts start` goes out at once: fewer early frames (none on a quiet
    // machine; under load the two sockets' order is the scheduler's) and more of the reply heard.
    let early_nodelay = nodelay["frames_outside_sessions"]["dropped_wrong_state"]
        .as_u64()
        .unwrap();
    assert!(
        early_nodelay < early,
        "{early_nodelay} vs {early}: {:#}",
        nodelay["frames_outside_sessions"]
    );
    assert!(heard(nagle) < heard(nodelay), "{} of {}", heard(nagle), heard(nodelay));
}

#[test]
fn run_wire_over_mqtt_passes_the_reboot_scenario_and_says_which_wire() {
    let child = std::process::Command::new(common::BIN)
        .args(["run", "--wire", "--transport", "mqtt", "--personality", "cloud-gateway"])
        .arg("scenarios/12-reboot-true-never-arrives.yaml")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("1/1 scenarios passed (4 checks)"), "{out}");
    assert!(out.contains("over the wire: mqtt://127.0.0.1:"), "{out}");
    assert!(
        out.contains("+ UDP (the gateway stand-in, backend cloud-gateway)"),
        "{out}"
    );
    // The reboot ends the gateway's bridge, and the device comes back over MQTT with a new hello.
    assert!(
        out.contains("event device_rebooted — connection 1 ended (gateway_closed); connection 2 opened"),
        "{out}"
    );
}

#[test]
fn backend_scenario_over_mqtt_judges_a_device_from_another_process() {
    let be = listening(&[
        "--scenario",
        "scenarios/12-reboot-true-never-arrives.yaml",
        "--personality",
        "cloud-gateway",
        "--mqtt",
        "127.0.0.1:0",
        "--duration",
        "20s",
    ]);
    let mqtt = announced(&be.stderr, "MQTT gateway on ");
    let (_, device_err) = run_connect(&["--mqtt", &mqtt, "--wake", "on-boot", "--quiet"], 6);
    let (code, out, _) = finish(be.child, Duration::from_secs(30));
    assert_eq!(code, 0, "the scenario passes over MQTT + UDP:\n{out}\n{device_err}");
    assert!(out.contains(&format!("and mqtt://{mqtt} + UDP")), "{out}");
    assert!(out.contains("pass  step 3 (line 16): readback is 10 — got 10"), "{out}");
}

#[test]
fn run_wire_over_mqtt_writes_junit_and_html_that_reproduce_over_mqtt() {
    let dir = common::scratch_dir("mqtt-wire-reports");
    let (junit, html) = (dir.join("r.xml"), dir.join("r.html"));
    let child = std::process::Command::new(common::BIN)
        .args(["run", "--wire", "--transport", "mqtt", "--quiet"])
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&html)
        .arg("scenarios/q12-wrong-type-is-missing.yaml")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(40));
    // xinnan-py never registered self.screen.snapshot: the scenario fails over either wire.
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("--wire --transport mqtt --personality xinnan-py --seed 112"),
        "{err}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("--wire --transport mqtt --personality xinnan-py"), "{xml}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("the gateway stand-in, backend xinnan-py"),
        "the HTML says which wire"
    );
}

#[test]
fn behind_a_plain_broker_the_device_never_hears_its_server() {
    let (b, mqtt) = mqtt_backend(&["--mqtt-server", "broker"]);
    let (code, stderr) = run_connect(&["--mqtt", &mqtt, "--wake", "on-boot"], 12);
    let mut child = b.child;
    let _ = child.kill();
    let _ = child.wait();
    let backend_log: Vec<String> = b.stderr.try_iter().collect();
    assert_eq!(code, 0, "{stderr}");
    // CONNACK came, so the firmware is connected; the hello goes out and nothing comes back.
    assert!(stderr.contains("log I MQTT: Connected to endpoint"), "{stderr}");
    assert!(
        stderr.contains(r#"→ {"type":"hello","version":3,"transport":"udp""#),
        "{stderr}"
    );
    assert!(
        stderr.contains("log E MQTT: Failed to receive server hello"),
        "{stderr}"
    );
    assert!(!stderr.contains("← "), "nothing reached the device: {stderr}");
    assert!(
        backend_log
            .iter()
            .any(|l| l.contains("were not delivered: the broker delivers only to subscribers")),
        "{backend_log:?}"
    );
}

#[test]
fn a_plain_broker_delivers_to_a_client_that_subscribed() {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    let (b, mqtt) = mqtt_backend(&["--mqtt-server", "broker"]);
    let (host, port) = mqtt.split_once(':').unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = runtime.block_on(async {
        let mut options = MqttOptions::new(
            "GID_test@@@02_00_00_00_00_01@@@02_00_00_00_00_01",
            host,
            port.parse().unwrap(),
        );
        options.set_credentials("eyJpcCI6ICJ1bmtub3duIn0=", "");
        let (client, mut events) = AsyncClient::new(options, 10);
        client.subscribe("devices/p2p/+", QoS::AtMostOnce).await.unwrap();
        let hello = r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
        client.publish("device-server", QoS::AtMostOnce, false, hello).await.unwrap();
        let wait = async {
            loop {
                if let Event::Incoming(Packet::Publish(p)) = events.poll().await.unwrap() {
                    let text = String::from_utf8_lossy(&p.payload).into_owned();
                    if text.contains(r#""type":"hello""#) {
                        return (p.topic, text);
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await
    });
    stop(b);
    let (topic, hello) = got.expect("the server hello reaches a subscriber");
    assert_eq!(topic, "devices/p2p/02_00_00_00_00_01");
    assert!(hello.contains(r#""transport":"udp""#), "{hello}");
}

/// `connect --mqtt` with `user` as its script against `backend --mqtt` with `backend` as its
/// script and `extra` flags; the device's report.
fn scripted_pair(name: &str, user: &str, backend: &str, extra: &[&str], secs: u64) -> Value {
    let dir = common::scratch_dir(name);
    let (user_script, backend_script) = (dir.join("user.txt"), dir.join("backend.txt"));
    std::fs::write(&user_script, user).unwrap();
    std::fs::write(&backend_script, backend).unwrap();
    let mut args = vec!["--script", backend_script.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (b, mqtt) = mqtt_backend(&args);
    let report = dir.join("report.json");
    let (code, stderr) = run_connect(
        &[
            "--mqtt",
            &mqtt,
            "--script",
            user_script.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--quiet",
        ],
        secs,
    );
    stop(b);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
}

const TURN: &str = "press boot\nwait 1500ms\nsay \"你好\"\nwait 4s\n";
const REPLY: &str = "await utterance\nspeak \"好的，我在听\" for 3s\n";

#[test]
fn udp_loss_on_the_gateway_s_path_shows_as_sequence_gaps_the_firmware_accepts() {
    let r = scripted_pair(
        "mqtt-udp-loss",
        TURN,
        REPLY,
        &["--mqtt-nodelay", "--udp-fault", "loss:150,seed:3"],
        6,
    );
    let s = &r["tts_sessions"][0]["frames"];
    // A lost datagram: the next one is accepted with `Received audio packet with wrong sequence`.
    let gaps = s["gaps"].as_u64().unwrap_or(0);
    assert!(gaps > 0, "{s:#}");
    assert!(s["received"].as_u64().unwrap() < 50, "{s:#}");
    assert_eq!(
        s["dropped_refused"].as_u64().unwrap_or(0),
        0,
        "loss alone refuses nothing: {s:#}"
    );
}

#[test]
fn a_forged_datagram_with_the_channel_s_ssrc_takes_the_rest_of_the_reply_away() {
    let user = "press boot\nwait 1500ms\nsay \"你好\"\nwait 1s\nforge\nwait 3s\n";
    let r = scripted_pair("mqtt-forge", user, REPLY, &["--mqtt-nodelay"], 7);
    let actions: Vec<&str> = r["user"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["action"].as_str())
        .collect();
    let forge = actions.iter().find(|a| a.starts_with("forge")).unwrap();
    assert!(forge.contains("with this channel's ssrc, to 127.0.0.1:"), "{actions:?}");
    // The gateway re-pointed its downlink at the forger's socket: the device heard the reply's
    // first second or so, then nothing more of it.
    let s = &r["tts_sessions"][0]["frames"];
    let received = s["received"].as_u64().unwrap();
    assert!((5..40).contains(&received), "{s:#}");
    // Without the forgery the same turn hears the reply (its 50 frames, but for one that may
    // overtake its `tts start` on a busy machine).
    let whole = scripted_pair("mqtt-no-forge", TURN, REPLY, &["--mqtt-nodelay"], 6);
    let all = whole["tts_sessions"][0]["frames"]["received"].as_u64().unwrap();
    assert!(all >= 48, "{:#}", whole["tts_sessions"]);
}

#[test]
fn a_fleet_behind_an_ota_goes_where_each_answer_sends_it() {
    let dir = common::scratch_dir("mqtt-fleet-ota");
    let script = dir.join("backend.txt");
    std::fs::write(&script, "await utterance\nspeak \"好的\" for 900ms\n").unwrap();
    // With a gateway the OTA hands out `mqtt` blocks; without one, `websocket` blocks.
    for (gateway, path) in [(true, "/xiaozhi/v1/?from=mqtt_gateway"), (false, "/xiaozhi/v1/")] {
        let mut args = vec![
            "--script",
            script.to_str().unwrap(),
            "--ota",
            "127.0.0.1:0",
            "--connections",
            "3",
        ];
        args.extend(["--duration", "40s"]);
        if gateway {
            args.extend(["--mqtt", "127.0.0.1:0", "--mqtt-nodelay"]);
        }
        let b = listening(&args);
        let ota = announced(&b.stderr, "OTA on http://");
        let json = dir.join(format!("summary-{gateway}.json"));
        let fleet = std::process::Command::new(common::BIN)
            .args([
                "fleet",
                "--voice",
                "--quiet",
                "--devices",
                "3",
                "--duration",
                "30s",
                "--json",
            ])
            .arg(&json)
            .arg("--ota")
            .arg(format!("http://{ota}/xiaozhi/ota/"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (code, out, err) = finish(fleet, Duration::from_secs(40));
        let (_, bout, _) = finish(b.child, Duration::from_secs(45));
        assert_eq!(code, 0, "{out}\n{err}");
        let s: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(s["turns"]["completed"], 3, "{:#}", s["turns"]);
        let reports: Vec<Value> = bout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        assert_eq!(reports.len(), 3, "{bout}");
        let mut macs: Vec<&str> = reports.iter().map(|r| r["device_id"].as_str().unwrap()).collect();
        macs.dedup();
        assert_eq!(macs.len(), 3, "each device activated with its own MAC");
        assert!(reports.iter().all(|r| r["path"] == path), "{gateway}: {bout}");
    }
}
