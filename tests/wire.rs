//! The device and the backend on real loopback sockets, as two processes (bounded, real time):
//! `xiaozhi-twin connect` ↔ `xiaozhi-twin backend`. Every run has a stated duration; the test
//! checks that neither side panics, that both exit on time, and what the backend recorded.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{BIN, Backend, finish, listening, ota_server};

fn scratch(name: &str) -> PathBuf {
    common::scratch_dir(&format!("wire-{name}"))
}

/// Starts `backend --listen 127.0.0.1:0 --script <dir>/script.txt EXTRA`.
fn backend(dir: &Path, script: &str, extra: &[&str]) -> Backend {
    let path = dir.join("script.txt");
    std::fs::write(&path, script).unwrap();
    let path = path.to_str().expect("a UTF-8 scratch path");
    listening(&[&["--script", path], extra].concat())
}

fn connect(port: u16, extra: &[&str], duration: &str) -> Child {
    Command::new(BIN)
        .args(["connect", "--board", "bread-compact-wifi", "--duration", duration])
        .arg("--url")
        .arg(format!("ws://127.0.0.1:{port}/xiaozhi/v1/"))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn reports(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `connects N (failed F), frames in …, boots B, …` from connect's last stderr line.
fn connect_summary(stderr: &str, key: &str) -> u64 {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("connects "))
        .unwrap_or_else(|| panic!("no summary in:\n{stderr}"));
    let after = line
        .split(&format!("{key} "))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    after
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_no_panic(what: &str, stderr: &str) {
    assert!(!stderr.contains("panicked at"), "{what} panicked:\n{stderr}");
}

fn exchange<'a>(report: &'a Value, tool: &str) -> &'a Value {
    report["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} exchange in {report}"))
}

fn status_volume(e: &Value) -> i64 {
    let reply: Value = serde_json::from_str(e["reply"].as_str().unwrap()).unwrap();
    let text: Value = serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    text["audio_speaker"]["volume"].as_i64().unwrap()
}

#[test]
fn handshake_mcp_exchange_and_a_reboot_seen_from_the_backend() {
    let dir = scratch("reboot");
    let be = backend(
        &dir,
        "@1 call self.audio_speaker.set_volume {\"volume\": 0}\n@1 call self.get_device_status\n@1 send self.reboot\n\
         @2 call self.get_device_status\n@2 close\n",
        &[
            "--personality",
            "cloud-gateway",
            "--connections",
            "2",
            "--duration",
            "20s",
        ],
    );
    let dev = connect(
        be.port,
        &[
            "--token",
            "abc",
            "--device-id",
            "02:11:22:33:44:55",
            "--client-id",
            "0b7e1c2d-1111-4222-8333-444455556666",
        ],
        "6s",
    );
    let (code, out, err) = finish(be.child, Duration::from_secs(25));
    assert_eq!(code, 0, "backend: {err}");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "connect: {derr}");
    assert_no_panic("connect", &derr);
    let r = reports(&out);
    assert_eq!(r.len(), 2, "{out}");
    // The handshake as the firmware writes it.
    let names: Vec<&str> = r[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[0].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Host",
            "Authorization",
            "Client-Id",
            "Connection",
            "Device-Id",
            "Protocol-Version",
            "Sec-WebSocket-Key",
            "Sec-WebSocket-Version",
            "Upgrade"
        ]
    );
    let header = |name: &str| {
        r[0]["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == name)
            .unwrap()[1]
            .clone()
    };
    assert_eq!(header("Authorization"), "Bearer abc");
    assert_eq!(header("Device-Id"), "02:11:22:33:44:55");
    assert_eq!(header("Client-Id"), "0b7e1c2d-1111-4222-8333-444455556666");
    assert_eq!(r[0]["path"], "/xiaozhi/v1/");
    // A full exchange, paired by id.
    assert_eq!(r[0]["exchanges"][0]["method"], "initialize");
    assert_eq!(r[0]["exchanges"][0]["outcome"], "replied");
    assert_eq!(
        exchange(&r[0], "self.audio_speaker.set_volume")["console_gets"],
        "true (boolean)"
    );
    assert_eq!(exchange(&r[0], "self.audio_speaker.set_volume")["result_to"], "console");
    assert_eq!(status_volume(exchange(&r[0], "self.get_device_status")), 0);
    // The reboot: no reply, TCP closed without a close frame.
    let reboot = exchange(&r[0], "self.reboot");
    assert_eq!(reboot["outcome"], "connection_closed");
    assert!(reboot.get("reply").is_none());
    assert_eq!(r[0]["ending"], "tcp_closed_without_close_frame");
    assert_eq!(r[0]["unanswered"], serde_json::json!([reboot["id"]]));
    // The device comes back with a new hello; volume 0 reads back as 10.
    assert_eq!(r[1]["device_connection"], 2);
    assert_eq!(r[1]["device_id"], "02:11:22:33:44:55");
    assert_ne!(r[1]["session_id"], r[0]["session_id"]);
    assert_eq!(status_volume(exchange(&r[1], "self.get_device_status")), 10);
    assert_eq!(r[1]["ending"], "backend_closed");
    assert_eq!(connect_summary(&derr, "boots"), 2);
    assert_eq!(connect_summary(&derr, "device-side closes"), 1);
    drop(be.stderr);
}

#[test]
fn a_server_hello_without_transport_crashes_the_device_not_the_twin() {
    let dir = scratch("no-transport");
    let yaml = xiaozhi_sim::backend::spec::SHIPPED
        .iter()
        .find(|(n, _)| *n == "xinnan-py")
        .unwrap()
        .1;
    let broken = yaml
        .replace("\"transport\": \"websocket\", ", "")
        .replace("name: xinnan-py", "name: no-transport");
    assert_ne!(broken, yaml);
    std::fs::write(dir.join("no-transport.yaml"), broken).unwrap();
    let personality = dir.join("no-transport.yaml");
    let be = backend(
        &dir,
        "",
        &[
            "--personality",
            personality.to_str().unwrap(),
            "--connections",
            "2",
            "--duration",
            "20s",
        ],
    );
    let dev = connect(be.port, &[], "8s");
    let (code, out, err) = finish(be.child, Duration::from_secs(25));
    assert_eq!(code, 0, "{err}");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    assert_no_panic("connect", &derr);
    assert!(derr.contains("NULL dereference in ParseServerHello"), "{derr}");
    let r = reports(&out);
    assert_eq!(r.len(), 2);
    for c in &r {
        assert_eq!(c["ending"], "tcp_closed_without_close_frame", "{c}");
        assert_eq!(c["phase"], "closed");
    }
    assert!(
        connect_summary(&derr, "boots") >= 3,
        "boot, crash, boot, crash, boot: {derr}"
    );
}

#[test]
fn a_backend_that_vanishes_mid_call_leaves_the_device_idle_and_alive() {
    let dir = scratch("vanish");
    let be = backend(
        &dir,
        "@1 call self.audio_speaker.set_volume {\"volume\": 40}\n@1 send self.get_device_status\n@1 vanish\n",
        &["--personality", "go-eager", "--connections", "1", "--duration", "20s"],
    );
    let dev = connect(be.port, &[], "4s");
    let (code, out, err) = finish(be.child, Duration::from_secs(25));
    assert_eq!(code, 0, "{err}");
    let r = reports(&out);
    assert_eq!(r[0]["ending"], "backend_vanished");
    assert_eq!(exchange(&r[0], "self.audio_speaker.set_volume")["outcome"], "replied");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    assert_no_panic("connect", &derr);
    assert!(derr.contains("Websocket disconnected"), "{derr}");
    assert_eq!(
        connect_summary(&derr, "boots"),
        1,
        "a vanished backend is no reason to reboot"
    );
}

#[test]
fn a_killed_backend_process_is_a_closed_socket_for_the_device() {
    let dir = scratch("killed");
    let mut be = backend(&dir, "", &["--duration", "60s", "--verbose"]);
    let dev = connect(be.port, &[], "12s");
    // Wait until the backend has the device's tool list (xinnan-py asks 1 s after the hello),
    // however busy the machine is, then kill it.
    common::wait_for_line(&be.stderr, Duration::from_secs(40), |l| {
        l.contains("← ") && l.contains("\"tools\":[")
    });
    be.child.kill().unwrap();
    let _ = be.child.wait();
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    assert_no_panic("connect", &derr);
    assert!(derr.contains("Websocket disconnected"), "{derr}");
    assert_eq!(connect_summary(&derr, "connects"), 1, "no automatic reconnection");
}

#[test]
fn malformed_frames_are_survived() {
    let dir = scratch("malformed");
    let be = backend(
        &dir,
        "frame {not json\nframe {\"type\":\"mcp\",\"payload\":{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\ncall self.get_device_status\ngarbage\n",
        &["--personality", "go-eager", "--connections", "1", "--duration", "20s"],
    );
    let dev = connect(be.port, &[], "4s");
    let (code, out, err) = finish(be.child, Duration::from_secs(25));
    assert_eq!(code, 0, "{err}");
    let r = reports(&out);
    // The device ignored the broken text frames and still answered the call after them.
    assert_eq!(exchange(&r[0], "self.get_device_status")["outcome"], "replied");
    assert_eq!(r[0]["ending"], "backend_vanished");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    assert_no_panic("connect", &derr);
    assert!(derr.contains("Websocket disconnected"), "{derr}");
    assert_eq!(connect_summary(&derr, "boots"), 1);
}

#[test]
fn a_backend_that_is_not_there_is_a_failed_connect_and_no_hang() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dev = connect(port, &[], "3s");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    assert_no_panic("connect", &derr);
    assert_eq!(connect_summary(&derr, "failed"), 1, "{derr}");
}

#[test]
fn ota_activation_gives_the_websocket_url_and_token() {
    let dir = scratch("ota");
    let be = backend(
        &dir,
        "call self.get_device_status\nclose\n",
        &["--connections", "1", "--duration", "20s"],
    );
    let answer = format!(
        r#"{{"websocket":{{"url":"ws://127.0.0.1:{}/xiaozhi/v1/","token":"from-ota"}}}}"#,
        be.port
    );
    let (ota_port, ota) = ota_server(answer);
    let dev = Command::new(BIN)
        .args([
            "connect",
            "--board",
            "bread-compact-wifi",
            "--duration",
            "4s",
            "--device-id",
            "02:00:00:00:00:07",
        ])
        .arg("--ota")
        .arg(format!("http://127.0.0.1:{ota_port}/xiaozhi/ota/"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request = ota.join().unwrap();
    let (code, out, err) = finish(be.child, Duration::from_secs(25));
    assert_eq!(code, 0, "{err}");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
    // The firmware's activation request.
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("POST /xiaozhi/ota/ HTTP/1.1\r\n"), "{head}");
    for h in [
        "Activation-Version: 1",
        "Device-Id: 02:00:00:00:00:07",
        "User-Agent: bread-compact-wifi/2.4.2",
        "Accept-Language: zh-CN",
    ] {
        assert!(
            head.lines().any(|l| l.eq_ignore_ascii_case(h)),
            "{h} missing in\n{head}"
        );
    }
    let info: Value = serde_json::from_str(body).expect("system info JSON");
    assert_eq!(info["mac_address"], "02:00:00:00:00:07");
    assert_eq!(info["board"]["name"], "bread-compact-wifi");
    // The backend saw the token from the OTA answer.
    let r = reports(&out);
    let auth = r[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "Authorization")
        .unwrap()[1]
        .clone();
    assert_eq!(auth, "Bearer from-ota");
    assert_eq!(exchange(&r[0], "self.get_device_status")["outcome"], "replied");
}

#[test]
fn the_state_directory_keeps_nvs_between_runs_like_flash() {
    let dir = scratch("state");
    let state = dir.join("nvs");
    let mut seen = Vec::new();
    for script in [
        "call self.audio_speaker.set_volume {\"volume\": 33}\nclose\n",
        "call self.get_device_status\nclose\n",
    ] {
        let be = backend(&dir, script, &["--connections", "1", "--duration", "15s"]);
        let dev = connect(be.port, &["--state", state.to_str().unwrap(), "--quiet"], "3s");
        let (code, out, err) = finish(be.child, Duration::from_secs(20));
        assert_eq!(code, 0, "{err}");
        let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
        assert_eq!(dcode, 0, "{derr}");
        seen.push(reports(&out).remove(0));
    }
    assert_eq!(status_volume(exchange(&seen[1], "self.get_device_status")), 33);
    let client_id = |r: &Value| {
        r["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == "Client-Id")
            .unwrap()[1]
            .clone()
    };
    assert_eq!(client_id(&seen[0]), client_id(&seen[1]), "the UUID lives in NVS too");
}

#[test]
fn backend_commands_typed_on_stdin_reach_every_ready_device() {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--script",
            "-",
            "--personality",
            "go-eager",
            "--verbose",
        ])
        .args(["--connections", "1", "--duration", "60s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let port: u16 = first
        .split("ws://127.0.0.1:")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let dev = connect(port, &["--quiet"], "10s");
    // go-eager is ready once it has the tool list: wait for it (not for a time), then type.
    common::wait_for_line(&said, Duration::from_secs(40), |l| {
        l.contains("← ") && l.contains("\"tools\":[")
    });
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "call self.audio_speaker.set_volume {{\"volume\": 21}}").unwrap();
    common::wait_for_line(&said, Duration::from_secs(40), |l| {
        l.contains("← ") && l.contains("\"content\"")
    });
    writeln!(stdin, "close").unwrap();
    let (code, out, _) = finish(child, Duration::from_secs(65));
    assert_eq!(code, 0);
    let r = reports(&out);
    assert_eq!(exchange(&r[0], "self.audio_speaker.set_volume")["outcome"], "replied");
    assert_eq!(r[0]["ending"], "backend_closed");
    let (dcode, _, derr) = finish(dev, Duration::from_secs(15));
    assert_eq!(dcode, 0, "{derr}");
}

#[test]
fn a_fleet_against_a_separate_backend_process() {
    let dir = scratch("fleet-url");
    let be = backend(
        &dir,
        "call self.get_device_status\n",
        &["--connections", "20", "--duration", "30s"],
    );
    let json = dir.join("summary.json");
    let fleet = Command::new(BIN)
        .args(["fleet", "--devices", "20", "--duration", "3s", "--json"])
        .arg(&json)
        .arg("--url")
        .arg(format!("ws://127.0.0.1:{}/xiaozhi/v1/", be.port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (fcode, fout, ferr) = finish(fleet, Duration::from_secs(30));
    assert_eq!(fcode, 0, "{fout}\n{ferr}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["hellos_completed"], 20, "{s}");
    assert_eq!(s["latency_measured_at"], "device (request frame in → reply frame out)");
    let (code, out, err) = finish(be.child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    let r = reports(&out);
    assert_eq!(r.len(), 20);
    let mut macs: Vec<&str> = r.iter().map(|c| c["device_id"].as_str().unwrap()).collect();
    macs.sort_unstable();
    macs.dedup();
    assert_eq!(macs.len(), 20, "every device has its own MAC");
    // Discovery (2) and the script's call (1) on every device, measured on the device side.
    assert_eq!(s["mcp_round_trips"], 60, "{s}");
    for c in &r {
        assert_eq!(exchange(c, "self.get_device_status")["outcome"], "replied");
    }
}

#[test]
fn a_scenario_runs_through_the_backend_process_against_a_connecting_device() {
    // The reboot scenario, performed by `backend --scenario` on whatever device dials in: the
    // `true` of self.reboot never arrives, the device comes back on a second connection and the
    // stored volume 0 reads back as 10 — all judged from the backend's side.
    let be = listening(&[
        "--scenario",
        "scenarios/12-reboot-true-never-arrives.yaml",
        "--personality",
        "cloud-gateway",
        "--duration",
        "20s",
    ]);
    let port = be.port;
    let device = connect(port, &[], "8s");
    let (code, out, _) = finish(be.child, Duration::from_secs(30));
    let _ = finish(device, Duration::from_secs(30));
    assert_eq!(code, 0, "the scenario passes over the wire:\n{out}");
    assert!(
        out.contains(&format!(
            "over the wire: ws://127.0.0.1:{port}/xiaozhi/v1/ (backend cloud-gateway)"
        )),
        "{out}"
    );
    assert!(out.contains("pass  step 2 (line 12): no reply within 30s — no reply: the connection ended (tcp_closed_without_close_frame)"), "{out}");
    assert!(out.contains("pass  step 2 (line 12): event device_rebooted — connection 1 ended (tcp_closed_without_close_frame); connection 2 opened"), "{out}");
    assert!(out.contains("pass  step 3 (line 16): readback is 10 — got 10"), "{out}");
    assert!(
        out.contains("not judged over the wire: step 2 (line 12): event reply_dropped"),
        "{out}"
    );
    assert!(out.contains("INCOMPLETE: no measured effect"), "{out}");
}

#[test]
fn a_scenario_over_the_wire_fails_where_the_backend_personality_differs() {
    // xinnan-py registers only the tools it listed without withUserTools and refuses the rest:
    // self.reboot never leaves the backend, the device never reboots, and the run says so
    // within its limit instead of hanging.
    let start = Instant::now();
    let child = Command::new(BIN)
        .args([
            "run",
            "--wire",
            "--personality",
            "xinnan-py",
            "--limit",
            "4s",
            "scenarios/12-reboot-true-never-arrives.yaml",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(start.elapsed() < Duration::from_secs(15));
    assert!(out.contains("FAIL  step 2 (line 12): no reply within 30s — no traffic: self.reboot is not among the tools this backend registered; spoken to the user as \"工具 self_reboot 不存在\" (not handed to the LLM)"), "{out}");
    assert!(
        out.contains("FAIL  step 0 (line 0): every step ran over the wire — time limit 4s reached"),
        "{out}"
    );
    assert!(err.contains("--wire --personality xinnan-py --seed 12"), "{err}");
}

#[test]
fn run_wire_passes_the_reboot_scenario_in_one_process_and_refuses_steps_that_need_the_room() {
    let child = Command::new(BIN)
        .args([
            "run",
            "--wire",
            "--personality",
            "cloud-gateway",
            "scenarios/12-reboot-true-never-arrives.yaml",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("1/1 scenarios passed (4 checks)"), "{out}");
    // A lone scenario that measures the room cannot run over the wire: exit 2, at its line.
    let child = Command::new(BIN)
        .args(["run", "--wire", "scenarios/04a-bread-board-law.yaml"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(10));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(
            "scenarios/04a-bread-board-law.yaml:10:5: play: cannot run over the wire: it measures the simulated room"
        ),
        "{err}"
    );
}
