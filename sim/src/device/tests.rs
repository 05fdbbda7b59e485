//! Unit tests of the device: boot, the receive task and main-task batches, reboot, power,
//! construction faults and the shared tool catalogue.

use super::*;
use crate::harness::Harness;

const BOARD: &str = include_str!("../../../boards/bread-compact-wifi.yaml");

fn spec() -> Arc<BoardSpec> {
    Arc::new(BoardSpec::from_yaml("bread-compact-wifi.yaml", BOARD).unwrap())
}

fn booted() -> Harness {
    let mut h = Harness::new(Device::new(spec(), WorldSpec::conformance(), 1));
    h.power_on();
    h
}

fn replies(h: &mut Harness) -> Vec<String> {
    h.take_outputs()
        .into_iter()
        .filter_map(|o| o.mcp().map(|(p, _)| String::from_utf8(p.to_vec()).unwrap()))
        .collect()
}

fn call(id: i32, name: &str, args: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#)
        .into_bytes()
}

#[test]
fn one_hop_replies_overtake_two_hop_replies_in_a_burst() {
    let mut h = booted();
    h.deliver(&call(13, "self.lamp.get_state", "{}"));
    h.deliver(br#"{"jsonrpc":"2.0","id":16,"method":"initialize"}"#);
    h.deliver(br#"{"jsonrpc":"2.0","id":27,"method":"ping"}"#);
    h.run_until_idle().unwrap();
    let heads: Vec<String> = replies(&mut h).iter().map(|r| r[..30].to_string()).collect();
    assert_eq!(
        heads,
        [
            r#"{"jsonrpc":"2.0","id":16,"resu"#,
            r#"{"jsonrpc":"2.0","id":27,"erro"#,
            r#"{"jsonrpc":"2.0","id":13,"resu"#
        ]
    );
}

#[test]
fn the_reply_to_self_reboot_is_never_sent() {
    let mut h = booted();
    let t0 = h.now();
    let receipt = h.deliver(&call(152, "self.reboot", "{}"));
    assert!(matches!(receipt, Receipt::Scheduled { id: 152, .. }));
    h.run_until_idle().unwrap();
    assert!(replies(&mut h).is_empty());
    assert_eq!(h.device.boots(), 2);
    assert_eq!(
        h.device.last_boot_at(),
        Some(t0 + SimDuration::from_millis(2000)),
        "1 s before Reboot(), 1 s inside it"
    );
    let events = h.device.drain_events();
    assert!(events.iter().any(|e| matches!(&e.kind, Event::ReplyDropped { payload, .. } if payload.starts_with(br#"{"jsonrpc":"2.0","id":152,"result""#))));
}

#[test]
fn reboot_drops_everything_queued_after_it() {
    let mut h = booted();
    h.deliver(&call(1, "self.reboot", "{}"));
    h.deliver(&call(2, "self.lamp.turn_on", "{}"));
    h.run_until_idle().unwrap();
    // Batch 2 is [R, S1, S2]: the lamp's side effect happened, its reply never left.
    assert!(replies(&mut h).is_empty());
    assert_eq!(h.device.boots(), 2);
    assert_eq!(
        h.device.snapshot().gpio.get(&18),
        Some(&false),
        "lamp state is RAM only"
    );
}

#[test]
fn volume_zero_returns_as_ten_after_reboot() {
    let mut h = booted();
    h.deliver(&call(1, "self.audio_speaker.set_volume", r#"{"volume":0}"#));
    h.run_until_idle().unwrap();
    assert_eq!(h.device.snapshot().volume, Some(0));
    h.deliver(&call(2, "self.reboot", "{}"));
    h.run_until_idle().unwrap();
    assert_eq!(h.device.snapshot().volume, Some(10), "readback after reboot");
    assert_eq!(
        h.device.nvs().get_i32("audio", "output_volume", 70),
        0,
        "NVS still holds 0"
    );
}

#[test]
fn nvs_survives_a_power_cut_and_volatile_state_does_not() {
    let mut h = booted();
    h.deliver(&call(1, "self.audio_speaker.set_volume", r#"{"volume":33}"#));
    h.deliver(&call(2, "self.lamp.turn_on", "{}"));
    h.run_until_idle().unwrap();
    let now = h.now();
    h.device.cut_power(now);
    assert!(!h.device.is_running());
    assert_eq!(h.deliver(&call(3, "self.get_device_status", "{}")), Receipt::NotRunning);
    h.power_on();
    let after = h.device.snapshot();
    assert_eq!(after.volume, Some(33));
    assert_eq!(after.gpio.get(&18), Some(&false));
}

#[test]
fn a_4000_byte_download_url_panics_and_reboots() {
    let mut h = booted();
    let url = "u".repeat(4000);
    h.deliver(&call(
        1,
        "self.assets.set_download_url",
        &format!(r#"{{"url":"{url}"}}"#),
    ));
    h.run_until_idle().unwrap();
    assert!(replies(&mut h).is_empty());
    assert_eq!(h.device.boots(), 2);
    assert_eq!(h.device.nvs().get_str("assets", "download_url"), None);
    h.deliver(&call(
        2,
        "self.assets.set_download_url",
        &format!(r#"{{"url":"{}"}}"#, &url[1..]),
    ));
    h.run_until_idle().unwrap();
    assert_eq!(replies(&mut h).len(), 1, "3999 bytes fit");
}

#[test]
fn upgrade_answers_true_seven_seconds_later_when_the_ota_fails() {
    let mut h = booted();
    let t0 = h.now();
    h.deliver(&call(9, "self.upgrade_firmware", "{}"));
    h.run_until_idle().unwrap();
    let out = h.take_outputs();
    assert_eq!(out.len(), 1);
    let (payload, at) = out[0].mcp().unwrap();
    assert!(payload.ends_with(br#""text":"true"}],"isError":false}}"#));
    assert_eq!(at, t0 + SimDuration::from_millis(7000));
    assert_eq!(
        h.device.state(),
        Some(DeviceState::Upgrading),
        "nothing brings it back to idle"
    );
}

#[test]
fn boots_sharing_a_board_get_the_catalogue_of_their_own_construction() {
    // Every user-only tool too, page by page, as bytes.
    let listing = |d: &Device| d.mcp().unwrap().pages(true).collect::<Vec<_>>();
    let boot = |board: &Board, oled_fails: bool| {
        let mut h = Harness::new(Device::new(board, WorldSpec::conformance(), 1));
        h.device.faults_mut().display_init_fails = oled_fails;
        h.power_on();
        h
    };
    let shared = Board::new(spec());
    let healthy = boot(&shared, false);
    let broken = boot(&shared, true);
    let mut again = boot(&shared, false);
    for (h, oled_fails) in [(&healthy, false), (&broken, true), (&again, false)] {
        let alone = boot(&Board::new(spec()), oled_fails);
        assert_eq!(listing(&h.device), listing(&alone.device), "oled fails: {oled_fails}");
    }
    assert_ne!(listing(&healthy.device), listing(&broken.device));
    assert!(std::ptr::eq(healthy.device.mcp().unwrap(), again.device.mcp().unwrap()));
    // A reboot registers again, into the same shared catalogue.
    again.deliver(&call(1, "self.reboot", "{}"));
    again.run_until_idle().unwrap();
    assert_eq!(again.device.boots(), 2);
    assert!(std::ptr::eq(healthy.device.mcp().unwrap(), again.device.mcp().unwrap()));
}

#[test]
fn a_failed_oled_init_removes_the_display_tools() {
    let mut h = Harness::new(Device::new(spec(), WorldSpec::conformance(), 1));
    h.device.faults_mut().display_init_fails = true;
    h.power_on();
    let names: Vec<&str> = h.device.mcp().unwrap().tools().iter().map(|t| t.name()).collect();
    assert!(!names.contains(&"self.screen.set_theme"));
    assert!(!names.contains(&"self.screen.get_info"));
    assert!(names.contains(&"self.lamp.turn_on"));
}

#[test]
fn a_speech_window_is_heard_from_the_start_up_guard_on() {
    let device = Device::new(spec(), WorldSpec::conformance(), 1);
    let heard = |start: u64, end: u64| {
        let w = crate::voice::log::Window {
            start: SimTime::from_millis(start),
            end: SimTime::from_millis(end),
        };
        let m = device.heard(&w, false).0;
        (m.from_ms, m.to_ms)
    };
    assert_eq!(heard(1000, 2000), (1300.0, 2000.0));
    assert_eq!(
        heard(1000, 1200),
        (1200.0, 1200.0),
        "shorter than the guard: nothing is heard"
    );
}

/// The one entry's rule for a board with no application (off, or booting): an MCP payload is
/// dropped with the `NotRunning` receipt and its event, audio from any transport is received
/// and lost for want of a channel, and nothing else is read.
#[test]
fn with_no_application_the_one_entry_drops_each_input_by_its_kind() {
    let mut d = Device::new(spec(), WorldSpec::conformance(), 1);
    let now = SimTime::ZERO;
    let read = d.handle(now, Input::Mcp(&call(1, "self.get_device_status", "{}")));
    assert_eq!(read.receipt, Some(Receipt::NotRunning));
    assert_eq!(read.message, MessageType::NotRead);
    assert!(
        d.drain_events().iter().any(|e| matches!(
            e.kind,
            Event::MessageDropped {
                reason: crate::mcp::DropReason::NotRunning
            }
        )),
        "the drop is traced"
    );
    let audio = [
        Input::WsBinary(&[0u8; 8]),
        Input::Udp(&[0u8; 16]),
        Input::Audio(&[0u8; 4]),
    ];
    for input in audio {
        assert_eq!(d.handle(now, input), Incoming::default());
    }
    let others = [
        Input::WsText(br#"{"type":"tts","state":"start"}"#),
        Input::MqttMessage(br#"{"type":"goodbye"}"#),
        Input::Json(br#"{"type":"stt","text":"x"}"#),
        Input::WsOpened { ok: true },
        Input::WsClosed,
        Input::MqttConnack { accepted: true },
        Input::MqttClosed,
    ];
    for input in others {
        assert_eq!(d.handle(now, input), Incoming::default(), "{input:?}");
    }
    let outside = &d.speech_log().outside;
    assert_eq!((outside.received, outside.dropped_no_channel), (3, 3));
    assert!(d.poll_output().is_none(), "nothing leaves a board that is off");
}
