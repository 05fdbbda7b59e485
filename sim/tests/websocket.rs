//! The device side of the WebSocket protocol, driven by a fake socket layer in virtual time:
//! dial on user action, device hello, 10 s wait for the server hello, MCP envelope both ways,
//! replies dropped on a closed socket, reboot closing TCP without a close frame, and the crash
//! on a server hello without `transport`.

use std::sync::Arc;
use xiaozhi_sim::device::Input;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, DeviceState, Output};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::trace::Event;
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

fn device() -> Device {
    let spec = BoardSpec::from_yaml("b.yaml", include_str!("../../boards/bread-compact-wifi.yaml")).unwrap();
    let mut world = WorldSpec::conformance();
    world.websocket = Some(WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: "tok".into(),
        version: 1,
    });
    let mut d = Device::new(Arc::new(spec), world, 5);
    d.power_on(SimTime::ZERO);
    d.run_until(SimTime::from_millis(1000));
    d
}

fn outputs(d: &mut Device) -> Vec<Output> {
    std::iter::from_fn(|| d.poll_output()).collect()
}

fn texts(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::WsText { text, .. } => Some(String::from_utf8_lossy(text).into_owned()),
            _ => None,
        })
        .collect()
}

/// Opens the channel: toggle, connect ok, server hello. Returns the time after.
fn open(d: &mut Device, t: SimTime) -> SimTime {
    d.toggle_chat(t);
    d.run_until(t);
    let out = outputs(d);
    let Some(Output::WsOpen { request, .. }) = out.first() else {
        panic!("dials first: {out:?}")
    };
    let req = String::from_utf8(request.clone()).unwrap();
    assert!(
        req.starts_with(
            "GET /xiaozhi/v1/ HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAuthorization: Bearer tok\r\nClient-Id: "
        ),
        "{req}"
    );
    d.handle(t, Input::WsOpened { ok: true });
    d.run_until(t);
    let hello = texts(&outputs(d));
    assert!(
        hello[0].starts_with(r#"{"type":"hello","version":1,"features":{"mcp":true"#),
        "{hello:?}"
    );
    d.handle(
        t,
        Input::WsText(
            br#"{"type":"hello","transport":"websocket","session_id":"s-1","audio_params":{"sample_rate":24000}}"#,
        ),
    );
    d.run_until(t);
    let listen = texts(&outputs(d));
    assert_eq!(
        listen,
        [r#"{"session_id":"s-1","type":"listen","state":"start","mode":"auto"}"#]
    );
    assert_eq!(d.snapshot().state.unwrap(), DeviceState::Listening);
    t
}

#[test]
fn mcp_travels_in_the_session_envelope() {
    let mut d = device();
    let t = open(&mut d, SimTime::from_millis(1000));
    d.handle(
        t,
        Input::WsText(br#"{"session_id":"ignored","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#),
    );
    d.run_until(t);
    assert_eq!(
        texts(&outputs(&mut d)),
        [
            r#"{"session_id":"s-1","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"error":{"message":"Method not implemented: ping"}}}"#
        ]
    );
    // A payload given as a string (JSON inside a string) is not accepted.
    d.handle(
        t,
        Input::WsText(br#"{"type":"mcp","payload":"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"}"#),
    );
    d.run_until(t);
    assert!(outputs(&mut d).is_empty());
}

#[test]
fn no_server_hello_within_ten_seconds_fails_the_open() {
    let mut d = device();
    let t = SimTime::from_millis(1000);
    d.toggle_chat(t);
    d.run_until(t);
    outputs(&mut d);
    d.handle(t, Input::WsOpened { ok: true });
    d.handle(t, Input::WsText(br#"{"type":"hello","transport":"udp"}"#));
    d.run_until(t + SimDuration::from_millis(9_999));
    assert_eq!(d.snapshot().state.unwrap(), DeviceState::Connecting);
    d.run_until(t + SimDuration::from_millis(10_000));
    assert_eq!(
        d.snapshot().state.unwrap(),
        DeviceState::Idle,
        "wrong transport ignored, then timeout"
    );
}

/// A server that refuses the token sends the text `认证失败` and closes. The firmware's wait for
/// the server hello has no early exit on disconnect: the failure is reported after the full 10 s.
#[test]
fn a_refused_handshake_still_waits_ten_seconds_for_the_hello() {
    let mut d = device();
    d.set_trace(true);
    let t = SimTime::from_millis(1000);
    d.toggle_chat(t);
    d.run_until(t);
    outputs(&mut d);
    d.handle(t, Input::WsOpened { ok: true });
    d.run_until(t);
    let sent = texts(&outputs(&mut d));
    assert!(sent[0].starts_with(r#"{"type":"hello""#), "{sent:?}");
    let t1 = t + SimDuration::from_millis(1);
    d.handle(t1, Input::WsText("认证失败".as_bytes()));
    d.handle(t1, Input::WsClosed);
    let failed_at = |d: &mut Device| {
        d.drain_events().into_iter().find_map(|e| match &e.kind {
            Event::Logged { text, .. } if text.to_string() == "Failed to receive server hello" => Some(e.at),
            _ => None,
        })
    };
    d.run_until(t + SimDuration::from_millis(9_999));
    assert_eq!(failed_at(&mut d), None, "still waiting at 9.999 s");
    assert_eq!(d.snapshot().state.unwrap(), DeviceState::Connecting);
    d.run_until(t + SimDuration::from_millis(10_000));
    assert_eq!(failed_at(&mut d), Some(t + SimDuration::from_millis(10_000)));
    d.run_until(t + SimDuration::from_millis(10_001));
    assert_eq!(d.snapshot().state.unwrap(), DeviceState::Idle);
}

#[test]
fn a_server_hello_without_transport_crashes_the_device() {
    let mut d = device();
    let t = SimTime::from_millis(1000);
    d.toggle_chat(t);
    d.run_until(t);
    d.handle(t, Input::WsOpened { ok: true });
    d.run_until(t);
    d.handle(t, Input::WsText(br#"{"type":"hello","session_id":"x"}"#));
    assert_eq!(d.boots(), 2, "panic, reboot");
}

#[test]
fn reboot_closes_tcp_without_a_reply_and_the_device_comes_back_silent() {
    let mut d = device();
    let t = open(&mut d, SimTime::from_millis(1000));
    d.handle(t, Input::WsText(br#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"self.reboot"}}}"#));
    d.run_until(t + SimDuration::from_secs(5));
    let out = outputs(&mut d);
    assert!(texts(&out).is_empty(), "no reply: {out:?}");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::WsClose { at } if *at == t + SimDuration::from_millis(1000)))
    );
    assert_eq!(d.boots(), 2);
    assert_eq!(
        d.snapshot().state.unwrap(),
        DeviceState::Idle,
        "no automatic reconnection"
    );
}

#[test]
fn replies_to_a_closed_socket_are_lost_but_effects_stay() {
    let mut d = device();
    let t = open(&mut d, SimTime::from_millis(1000));
    d.handle(t, Input::WsText(br#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":20}}}}"#));
    d.handle(t, Input::WsClosed);
    d.run_until(t + SimDuration::from_millis(10));
    assert!(texts(&outputs(&mut d)).is_empty());
    assert_eq!(d.snapshot().volume.unwrap(), 20);
    assert_eq!(d.snapshot().state.unwrap(), DeviceState::Idle);
}

#[test]
fn the_system_reboot_command_skips_the_first_second() {
    let mut d = device();
    let t = open(&mut d, SimTime::from_millis(1000));
    d.handle(t, Input::WsText(br#"{"type":"system","command":"reboot"}"#));
    d.run_until(t + SimDuration::from_millis(1500));
    assert_eq!(d.boots(), 2, "Reboot() waits 1000 ms, not 2000");
}

/// What the device says it read is what it acted on, its own parser's view: the first of two
/// `type` keys (serde_json keeps the last), a key in any case, a request's id as `valueint`
/// (the id its reply carries), arguments as cJSON prints them, and a text that is not JSON.
#[test]
fn the_device_says_what_it_read_as_it_read_it() {
    use xiaozhi_sim::device::{Incoming, MessageType, Receipt, TtsState};
    let mut d = device();
    let t = open(&mut d, SimTime::from_millis(1000));
    let read = d.handle(
        t,
        Input::WsText(br#"{"type":"tts","type":"hello","state":"sentence_start","text":"hi"}"#),
    );
    assert_eq!(read.message, MessageType::Tts(Some(TtsState::SentenceStart)));
    let read = d.handle(t, Input::WsText(br#"{"TYPE":"tts","State":"stop"}"#));
    assert_eq!(read.message, MessageType::Tts(Some(TtsState::Stop)));
    let call = br#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":7.9,"method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":2e1}}}}"#;
    let read = d.handle(t, Input::WsText(call));
    assert_eq!(read.message, MessageType::Mcp);
    let request = read.request.clone().unwrap();
    assert_eq!(
        (
            request.method.as_str(),
            request.tool.as_deref(),
            request.arguments.as_deref()
        ),
        (
            "tools/call",
            Some("self.audio_speaker.set_volume"),
            Some(r#"{"volume":20}"#)
        )
    );
    assert_eq!(read.reply_id(), Some(7), "valueint of 7.9: {read:?}");
    assert!(
        matches!(read.receipt, Some(Receipt::Scheduled { id: 7, .. })),
        "{read:?}"
    );
    let note = d.handle(
        t,
        Input::WsText(br#"{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#),
    );
    assert_eq!(note.reply_id(), None);
    assert_eq!(note.request.unwrap().method, "notifications/initialized");
    assert_eq!(
        d.handle(t, Input::WsText("认证失败".as_bytes())).message,
        MessageType::Untyped
    );
    d.cut_power(t);
    assert_eq!(
        d.handle(t, Input::WsText(call)),
        Incoming::default(),
        "an unpowered device reads nothing"
    );
}
