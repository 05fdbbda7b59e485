//! Personalities against a simulated board, in virtual time over an in-memory socket: what each
//! real backend would see and hand its LLM.

use std::sync::Arc;

use serde_json::json;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::backend::{BackendSpec, Delivery, Outcome, Phase, SessionReport};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState};
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

fn pair(board_yaml: &str, personality: &str) -> Loopback {
    pair_with(board_yaml, BackendSpec::shipped(personality).unwrap())
}

/// The board, powered on at 0 in a world with a WebSocket server configured.
fn powered(board_yaml: &str) -> Device {
    let spec = BoardSpec::from_yaml("b.yaml", board_yaml).unwrap();
    let mut world = WorldSpec::conformance();
    world.websocket = Some(WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version: 1,
    });
    world.board_tasks_run = true;
    let mut d = Device::new(Arc::new(spec), world, 9);
    d.power_on(SimTime::ZERO);
    d
}

/// Boots the board, lets the user open the channel, and runs 5 s against `backend`.
fn pair_with(board_yaml: &str, backend: BackendSpec) -> Loopback {
    let d = powered(board_yaml);
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.run_until(SimTime::from_millis(1000)).expect("comes to rest");
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(5)).expect("comes to rest");
    lb
}

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const OTTO: &str = include_str!("../../boards/otto-robot.yaml");

#[test]
fn xinnan_py_discovers_and_hands_true_to_the_llm_as_text() {
    let mut lb = pair(BREAD, "xinnan-py");
    let r = &lb.reports()[0];
    assert_eq!(r.phase, Phase::Ready);
    assert_eq!(r.tools.len(), 6);
    assert!(r.tools.iter().any(|t| t.llm_name == "self_audio_speaker_set_volume"));
    lb.call("self.audio_speaker.set_volume", json!({"volume": 40}));
    let t = lb.now();
    lb.run_until(t + SimDuration::from_secs(1)).expect("comes to rest");
    let r = lb.reports().pop().unwrap();
    let call = r.exchanges.iter().find(|e| e.method == "tools/call").unwrap();
    assert_eq!(call.id, 1, "xinnan-py's call counter starts at 1 again");
    assert_eq!(call.outcome, Outcome::Replied);
    assert_eq!(call.result_to, Some(Delivery::Llm));
    assert_eq!(call.llm_sees.as_deref(), Some("true"));
    assert_eq!(call.spoken, None);
    assert_eq!(lb.device.snapshot().volume.unwrap(), 40);
}

/// xiaozhi-esp32-server never hands a failure to its LLM: a JSON-RPC error is spoken as
/// `MCP错误: <message>`, an unregistered tool as `工具 <name> 不存在` (docs/reference/voice.md §5).
#[test]
fn xinnan_py_speaks_errors_to_the_user_instead_of_asking_the_llm() {
    let mut lb = pair(BREAD, "xinnan-py");
    lb.call("self.audio_speaker.set_volume", json!({"volume": 400}));
    lb.call("self.reboot", json!({}));
    let t = lb.now();
    lb.run_until(t + SimDuration::from_secs(1)).expect("comes to rest");
    let r = lb.reports().pop().unwrap();
    let calls: Vec<_> = r.exchanges.iter().filter(|e| e.method == "tools/call").collect();
    assert_eq!(calls.len(), 2);
    let bad = calls[0];
    assert_eq!(bad.outcome, Outcome::Error);
    assert_eq!(bad.result_to, Some(Delivery::User));
    assert_eq!(bad.llm_sees, None, "no second LLM request");
    let spoken = bad.spoken.as_deref().unwrap();
    assert!(spoken.starts_with("MCP错误: "), "{spoken}");
    let unknown = calls[1];
    assert_eq!(unknown.id, -1, "no traffic");
    assert_eq!(unknown.result_to, Some(Delivery::User));
    assert_eq!(unknown.spoken.as_deref(), Some("工具 self_reboot 不存在"));
}

/// The other personalities hand failures to their LLM (or, for the gateway console, to the
/// HTTP caller), each in its own words.
#[test]
fn other_personalities_route_errors_where_their_code_does() {
    for (name, to, text) in [
        ("mcp-go-strict", Delivery::Llm, "调用工具失败: "),
        ("go-eager", Delivery::Llm, "MCP工具调用失败"),
        ("rust-first-page", Delivery::Llm, "设备工具调用失败: {"),
        ("java-cap32", Delivery::Llm, "Value exceeds maximum allowed: 100"),
        ("cloud-gateway", Delivery::Console, "null (HTTP 500)"),
    ] {
        let mut lb = pair(BREAD, name);
        lb.call("self.audio_speaker.set_volume", json!({"volume": 400}));
        let t = lb.now();
        lb.run_until(t + SimDuration::from_secs(1)).expect("comes to rest");
        let r = lb.reports().pop().unwrap();
        let call = r.exchanges.iter().find(|e| e.method == "tools/call").unwrap();
        assert_eq!(call.outcome, Outcome::Error, "{name}");
        assert_eq!(call.result_to, Some(to), "{name}");
        assert_eq!(call.spoken, None, "{name}");
        let got = call.llm_sees.as_deref().or(call.console_gets.as_deref()).unwrap();
        assert!(got.starts_with(text), "{name}: {got}");
    }
}

#[test]
fn rust_first_page_never_sees_otto_page_two() {
    let lb = pair(OTTO, "rust-first-page");
    let r = &lb.reports()[0];
    assert_eq!(r.phase, Phase::Ready);
    assert_eq!(r.pages, 1);
    assert!(
        !r.tools.iter().any(|t| t.name == "self.battery.get_level"),
        "page 2 stays invisible"
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("nextCursor self.battery.get_level not followed"))
    );
    let xinnan = pair(OTTO, "xinnan-py");
    assert!(
        xinnan.reports()[0]
            .tools
            .iter()
            .any(|t| t.name == "self.battery.get_level")
    );
}

#[test]
fn cloud_gateway_lists_user_tools_and_reaches_reboot_whose_reply_never_comes() {
    let mut lb = pair(BREAD, "cloud-gateway");
    assert!(lb.reports()[0].tools.iter().any(|t| t.name == "self.reboot"));
    lb.call("self.reboot", json!({}));
    let t = lb.now();
    lb.run_until(t + SimDuration::from_secs(10)).expect("comes to rest");
    let closed = &lb.reports()[0];
    let call = closed
        .exchanges
        .iter()
        .find(|e| e.tool.as_deref() == Some("self.reboot"))
        .unwrap();
    assert_eq!(
        call.outcome,
        Outcome::ConnectionClosed,
        "the socket closed ~1 s later; pending failed at once"
    );
    assert_eq!(lb.device.boots(), 2);
}

#[test]
fn mcp_go_strict_sends_null_arguments_and_the_firmware_refuses_them() {
    let mut lb = pair(BREAD, "mcp-go-strict");
    lb.call("self.lamp.turn_on", json!({}));
    let t = lb.now();
    lb.run_until(t + SimDuration::from_secs(1)).expect("comes to rest");
    let r = lb.reports().pop().unwrap();
    let call = r.exchanges.iter().find(|e| e.method == "tools/call").unwrap();
    assert_eq!(call.outcome, Outcome::Error);
    assert_eq!(call.llm_sees.as_deref(), Some("调用工具失败: Invalid arguments"));
}

#[test]
fn go_eager_initializes_before_the_hello() {
    let lb = pair(BREAD, "go-eager");
    let r = &lb.reports()[0];
    assert_eq!(r.phase, Phase::Ready);
    assert!(r.session_id.starts_with("device-f4_12_fa_"), "{}", r.session_id);
}

#[test]
fn a_panic_closes_the_socket_and_the_backend_sees_the_connection_end() {
    let mut personality = BackendSpec::shipped("xinnan-py").unwrap();
    personality.hello = personality.hello.replace("\"transport\": \"websocket\", ", "");
    let mut lb = pair_with(BREAD, personality);
    assert_eq!(lb.device.boots(), 2, "the NULL dereference reboots the device");
    let reports = lb.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0].phase,
        Phase::Closed,
        "the reset ended TCP: {:?}",
        reports[0].notes
    );
    assert!(lb.session().is_none(), "nothing is left connected after the panic");
}

/// The same pairing with the board running another firmware tag.
fn pair_on(board_yaml: &str, firmware: &str, personality: &str) -> Loopback {
    let spec = BoardSpec::from_yaml("b.yaml", board_yaml)
        .unwrap()
        .with_firmware(firmware)
        .unwrap();
    let yaml = board_yaml.replace("version: 2.4.2", &format!("version: {}", spec.firmware.version));
    assert!(
        yaml.contains(&format!("version: {firmware}")),
        "the board file names its version"
    );
    pair_with(&yaml, BackendSpec::shipped(personality).unwrap())
}

/// What the real backends meet on a 1.9.4 device (docs/reference/firmware-versions.md L4): every personality
/// still discovers (the hello has no glyph features, nothing else changes for them), xinnan-py
/// sees 5 tools instead of 6 (no set_theme on the 1.x OLED), and cloud-gateway's
/// `withUserTools` finds nothing extra — a reboot it is asked for is not in its list at all.
#[test]
fn on_1_9_4_the_backends_see_the_1_x_catalogue() {
    for (name, _) in xiaozhi_sim::backend::spec::SHIPPED {
        for fw in ["1.9.4", "1.8.9"] {
            let lb = pair_on(BREAD, fw, name);
            let r = &lb.reports()[0];
            assert_eq!(r.phase, Phase::Ready, "{name} on {fw}");
            assert_eq!(r.tools.len(), 5, "{name} on {fw}: {:?}", r.tools);
        }
    }
    let lb = pair_on(BREAD, "2.4.2", "xinnan-py");
    assert_eq!(lb.reports()[0].tools.len(), 6, "2.4.2: set_theme too");
    let mut lb = pair_on(BREAD, "1.9.4", "cloud-gateway");
    assert!(!lb.reports()[0].tools.iter().any(|t| t.name == "self.reboot"));
    lb.call("self.reboot", json!({}));
    let t = lb.now();
    lb.run_until(t + SimDuration::from_secs(10)).expect("comes to rest");
    let r = lb.reports().pop().unwrap();
    let call = r.exchanges.iter().find(|e| e.method == "tools/call").unwrap();
    assert_eq!(call.outcome, Outcome::Error);
    assert_eq!(lb.device.boots(), 1, "nothing reboots");
}

/// `script` run by xinnan-py with `fault` against the bread board, in virtual time: boot, the
/// user opens the channel, and 10 s pass (discovery takes a second, then the script runs).
fn scripted(script: &str, fault: &str) -> Loopback {
    let d = powered(BREAD);
    let script = Script::parse("test.script", script).unwrap();
    let backend = Arc::new(BackendSpec::shipped("xinnan-py").unwrap());
    let mut lb = Loopback::scripted(d, backend, script, fault.parse().unwrap());
    lb.run_until(SimTime::from_millis(1000)).expect("comes to rest");
    let now = lb.now();
    lb.device.toggle_chat(now);
    lb.run_until(now + SimDuration::from_secs(10)).expect("comes to rest");
    lb
}

const REPLY: &str = "speak \"好的\" for 2s\n";

/// The note a session writes when its connection ends.
fn closed_at(r: &SessionReport) -> Option<&str> {
    r.notes.iter().find_map(|n| n.strip_prefix("connection closed at "))
}

#[test]
fn a_scripted_reply_without_a_fault_is_heard_whole() {
    let lb = scripted(REPLY, "none");
    let r = lb.reports().pop().unwrap();
    assert_eq!(r.phase, Phase::Ready);
    assert_eq!(r.voice.spoken.len(), 1);
    let log = lb.device.speech_log();
    assert_eq!(log.sessions.len(), 1);
    let s = &log.sessions[0];
    assert!(s.stopped.is_some(), "the end of the script sent tts stop");
    assert_eq!(s.counts.received, r.voice.frames_out);
    assert!(s.counts.decoded > 0);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
}

#[test]
fn a_backend_that_never_sends_tts_start_has_its_whole_reply_dropped_by_the_device() {
    let lb = scripted(REPLY, "never-tts-start");
    let r = lb.reports().pop().unwrap();
    assert!(r.voice.frames_out > 0, "the audio still came");
    let log = lb.device.speech_log();
    assert!(log.sessions.is_empty(), "no tts start, no speech session");
    assert_eq!(log.outside.received, r.voice.frames_out);
    assert_eq!(
        log.outside.dropped_wrong_state, r.voice.frames_out,
        "not speaking: dropped"
    );
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
}

#[test]
fn a_backend_that_stops_mid_reply_leaves_the_device_speaking_after_ten_frames() {
    let lb = scripted(REPLY, "stop-mid-reply");
    let r = lb.reports().pop().unwrap();
    assert!(r.voice.frames_out > 10, "{}", r.voice.frames_out);
    let s = &lb.device.speech_log().sessions[0];
    assert_eq!(s.counts.received, 10);
    assert_eq!(s.stopped, None, "the tts stop is not sent either");
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Speaking));
}

#[test]
fn a_flooding_backend_sends_every_frame_ten_times_and_the_device_drops_the_excess() {
    let lb = scripted(REPLY, "flood");
    let r = lb.reports().pop().unwrap();
    let s = &lb.device.speech_log().sessions[0];
    assert_eq!(s.counts.received, 10 * r.voice.frames_out);
    assert!(s.counts.dropped_queue_full > 0, "{:?}", s.counts);
}

#[test]
fn close_every_1_closes_the_connection_as_the_reply_starts() {
    let lb = scripted(REPLY, "close-every:1");
    let reports = lb.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].phase, Phase::Closed);
    let log = lb.device.speech_log();
    assert_eq!(log.sessions.len(), 1, "the tts start went out, then the close");
    let s = &log.sessions[0];
    assert_eq!(s.counts.received, 0, "no audio after the close");
    assert_eq!(
        closed_at(&reports[0]),
        Some(format!("{} ms", s.started.as_micros() / 1000).as_str())
    );
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
    // close-every:2 spares the first connection.
    let lb = scripted(REPLY, "close-every:2");
    assert_eq!(lb.reports()[0].phase, Phase::Ready);
}

#[test]
fn garbage_breaks_the_devices_connection_at_once_and_the_backend_vanishes_100_ms_later() {
    let mut lb = scripted("garbage\n", "none");
    let disconnected = lb
        .device
        .drain_events()
        .into_iter()
        .find(|e| e.to_string().contains("Websocket disconnected"))
        .expect("the device saw the connection break")
        .at;
    let r = lb.reports().pop().unwrap();
    assert_eq!(r.phase, Phase::Closed);
    let at = disconnected + SimDuration::from_millis(100);
    assert_eq!(closed_at(&r), Some(format!("{} ms", at.as_micros() / 1000).as_str()));
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Idle));
}

#[test]
fn a_script_wait_passes_in_virtual_time() {
    let plain = scripted(REPLY, "none").reports().pop().unwrap();
    let waited = scripted(&format!("wait 3s\n{REPLY}"), "none").reports().pop().unwrap();
    let at = |r: &SessionReport| r.voice.spoken[0].at_ms;
    assert_eq!(at(&waited) - at(&plain), 3000.0);
    let vanished = scripted("wait 2s\nvanish\n", "none").reports().pop().unwrap();
    let ready = plain.exchanges.last().unwrap().reply_ms.unwrap();
    assert_eq!(closed_at(&vanished), Some(format!("{:.0} ms", ready + 2000.0).as_str()));
}

/// What a run leaves behind, as bytes: the backend's reports as JSON, the device's trace and
/// speech log.
fn evidence(mut lb: Loopback) -> (String, Vec<String>, String) {
    let reports = serde_json::to_string(&lb.reports()).unwrap();
    let trace = lb.device.drain_events().iter().map(|e| e.to_string()).collect();
    (reports, trace, format!("{:?}", lb.device.speech_log()))
}

#[test]
fn a_scripted_backend_with_a_fault_replays_byte_for_byte() {
    let script =
        "speak \"音量已调小\" for 1s tone 440 -12\ncall self.get_device_status\nspeak \"好\"\nwait 1s\nclose\n";
    for fault in ["stop-mid-reply", "flood", "close-every:1", "never-tts-start"] {
        let run = || {
            let mut lb = scripted(&format!("{REPLY}{script}"), fault);
            let now = lb.now();
            lb.device.toggle_chat(now);
            lb.run_until(now + SimDuration::from_secs(5)).expect("comes to rest");
            evidence(lb)
        };
        let (a, b) = (run(), run());
        assert!(a.1.len() > 10, "{fault}: a trace to compare");
        assert_eq!(a, b, "{fault}");
    }
}

/// The harness answers an abort by the backend's own rule: a frame whose parsed `type` is
/// `abort`, not any text that contains the words.
#[test]
fn an_abort_is_told_by_its_parsed_type() {
    use xiaozhi_sim::backend::is_abort;
    assert!(is_abort(
        r#"{"session_id":"s","type":"abort","reason":"wake_word_detected"}"#
    ));
    assert!(is_abort(r#"{"type": "abort"}"#));
    assert!(!is_abort(
        r#"{"type":"listen","state":"detect","text":"\"type\":\"abort\""}"#
    ));
    assert!(!is_abort(r#""type":"abort""#));
}

/// `repeat` makes a turn loop: every request typed in one conversation is answered, each with
/// its own `{turn}`, and the loop waits at its `await utterance` in between.
#[test]
fn a_repeating_script_answers_every_turn_of_a_conversation() {
    let mut lb = scripted("await utterance\nspeak \"第 {turn} 轮\" for 1s\nrepeat\n", "none");
    for _ in 0..3 {
        let now = lb.now();
        lb.device.type_text(now, "把声音调小一点");
        lb.run_until(now + SimDuration::from_secs(6)).expect("comes to rest");
    }
    let said: Vec<String> = lb
        .device
        .speech_log()
        .sessions
        .iter()
        .flat_map(|s| s.sentences.iter().map(|x| x.text.clone()))
        .collect();
    assert_eq!(said, ["第 1 轮", "第 2 轮", "第 3 轮"]);
    assert!(lb.device.speech_log().sessions.iter().all(|s| s.stopped.is_some()));
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
}
