//! Personalities against a simulated board, in virtual time over an in-memory socket: what each
//! real backend would see and hand its LLM.

use std::sync::Arc;

use serde_json::json;
use xiaozhi_sim::backend::{BackendSpec, Delivery, Outcome, Phase};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

fn pair(board_yaml: &str, personality: &str) -> Loopback {
    pair_with(board_yaml, BackendSpec::shipped(personality).unwrap())
}

/// Boots the board, lets the user open the channel, and runs 5 s against `backend`.
fn pair_with(board_yaml: &str, backend: BackendSpec) -> Loopback {
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
/// `MCP错误: <message>`, an unregistered tool as `工具 <name> 不存在` (VOICE.md §5).
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

/// What the real backends meet on a 1.9.4 device (FIRMWARE-VERSIONS.md L4): every personality
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
