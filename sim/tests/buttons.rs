//! Buttons as the boards wire them (docs/boards.md, "Buttons"; the component's timing in
//! `sim/src/device/button.rs`), seen on the wire of a loopback pairing with xinnan-py: the
//! bread board's touch button is push-to-talk, its BOOT button only clicks.

use std::sync::Arc;
use xiaozhi_sim::device::Input;

use serde_json::Value;
use xiaozhi_sim::board::{BoardSpec, ButtonAction, Gesture};
use xiaozhi_sim::device::Output;
use xiaozhi_sim::device::{Device, DeviceState};
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::world::{WorldSpec, WsConfig};

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");

/// The bread board over WebSocket, booted and idle.
fn device() -> Device {
    let mut world = WorldSpec::conformance();
    world.websocket = Some(WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version: 1,
    });
    let spec = BoardSpec::from_yaml("b.yaml", BREAD).unwrap();
    let mut d = Device::new(Arc::new(spec), world, 5);
    d.power_on(SimTime::ZERO);
    d.run_until(SimTime::from_millis(1000));
    d
}

/// The bread board paired with xinnan-py over WebSocket, idle, the wire tapped.
fn pair() -> Loopback {
    let d = device();
    let backend = xiaozhi_sim::backend::BackendSpec::shipped("xinnan-py").unwrap();
    let mut lb = Loopback::new(d, Arc::new(backend));
    lb.run_until(SimTime::from_millis(1000)).unwrap();
    lb.tap();
    lb
}

fn run(lb: &mut Loopback, ms: u64) {
    let t = lb.now() + SimDuration::from_millis(ms);
    lb.run_until(t).unwrap();
}

/// The finger on `button` now.
fn finger(lb: &mut Loopback, button: &str, pressed: bool) {
    let now = lb.now();
    lb.device.button(now, button, pressed).unwrap();
}

/// The `listen`/`abort` messages the device sent since the last call, with their times.
fn controls(lb: &mut Loopback) -> Vec<(SimTime, Value)> {
    lb.tapped()
        .into_iter()
        .filter(|f| !f.1)
        .map(|(t, _, b)| (t, serde_json::from_slice::<Value>(&b).unwrap()))
        .filter(|(_, v)| v["type"] == "listen" || v["type"] == "abort")
        .collect()
}

fn state(lb: &Loopback) -> Option<DeviceState> {
    lb.device.snapshot().state
}

#[test]
fn touch_press_hold_release_is_listen_start_manual_then_listen_stop() {
    let mut lb = pair();
    // Opening the channel takes a while: the first press opens it and listens.
    finger(&mut lb, "touch", true);
    run(&mut lb, 3000);
    assert_eq!(state(&lb), Some(DeviceState::Listening));
    finger(&mut lb, "touch", false);
    run(&mut lb, 500);
    assert_eq!(state(&lb), Some(DeviceState::Idle));
    let sent = controls(&mut lb);
    let kinds: Vec<String> = sent
        .iter()
        .map(|(_, v)| {
            format!(
                "{} {}",
                v["state"].as_str().unwrap_or(""),
                v["mode"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(kinds, ["start manual", "stop "], "{sent:?}");

    // With the channel open, a second hold: listen start manual ≤ 10 ms after the press, listen
    // stop ≤ 10 ms after the release (the press is found on the second 5 ms poll).
    let pressed = lb.now();
    finger(&mut lb, "touch", true);
    run(&mut lb, 2000);
    let released = lb.now();
    finger(&mut lb, "touch", false);
    run(&mut lb, 500);
    let sent = controls(&mut lb);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        (sent[0].1["state"].as_str(), sent[0].1["mode"].as_str()),
        (Some("start"), Some("manual"))
    );
    let after_press = sent[0].0.saturating_since(pressed);
    assert!(after_press <= SimDuration::from_millis(10), "{after_press}");
    assert_eq!(sent[1].1["state"], "stop");
    let after_release = sent[1].0.saturating_since(released);
    assert!(after_release <= SimDuration::from_millis(10), "{after_release}");
    assert_eq!(state(&lb), Some(DeviceState::Idle));
}

/// Every text frame the device sent since the last call, parsed.
fn texts(d: &mut Device) -> Vec<Value> {
    std::iter::from_fn(|| d.poll_output())
        .filter_map(|o| match o {
            Output::WsText { text, .. } => serde_json::from_slice(&text).ok(),
            _ => None,
        })
        .collect()
}

/// Lets the channel the device is dialling open at `at` (the socket is the test's).
fn open_channel(d: &mut Device, at: SimTime) {
    d.handle(at, Input::WsOpened { ok: true });
    d.run_until(at);
    let hello = texts(d);
    assert!(hello.iter().any(|v| v["type"] == "hello"), "{hello:?}");
    d.handle(at, Input::WsText(br#"{"type":"hello","transport":"websocket","session_id":"s1","audio_params":{"sample_rate":16000,"frame_duration":60}}"#));
}

/// The `listen` messages among `sent`, as "state mode".
fn listens(sent: &[Value]) -> Vec<String> {
    sent.iter()
        .filter(|v| v["type"] == "listen")
        .map(|v| {
            format!(
                "{} {}",
                v["state"].as_str().unwrap_or(""),
                v["mode"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_release_while_the_channel_opens_is_handled_once_it_is_open() {
    // ContinueOpenAudioChannel blocks the main task until the server hello; the release's
    // STOP_LISTENING bit waits, and is handled in the next round: listen start, then stop.
    let mut d = device();
    let t = SimTime::from_millis(2000);
    d.button(t, "touch", true).unwrap();
    d.run_until(t + SimDuration::from_millis(100));
    d.button(t + SimDuration::from_millis(100), "touch", false).unwrap();
    d.run_until(t + SimDuration::from_millis(400));
    assert_eq!(d.snapshot().state, Some(DeviceState::Connecting));
    open_channel(&mut d, t + SimDuration::from_millis(400));
    d.run_until(t + SimDuration::from_secs(5));
    assert_eq!(listens(&texts(&mut d)), ["start manual", "stop "]);
    assert_eq!(d.snapshot().state, Some(DeviceState::Idle));
}

#[test]
fn a_tap_while_the_main_task_is_busy_leaves_the_device_listening() {
    // Press and release wait for the main task together; one round handles START_LISTENING
    // (idle: connecting, the open scheduled) and then STOP_LISTENING, which does nothing while
    // connecting (application.cc:796-807). The open then listens in manual mode, and nothing
    // ever sends listen stop.
    let mut d = device();
    let t = SimTime::from_millis(2000);
    d.busy(t, SimDuration::from_secs(1));
    d.button(t + SimDuration::from_millis(100), "touch", true).unwrap();
    d.button(t + SimDuration::from_millis(200), "touch", false).unwrap();
    d.run_until(t + SimDuration::from_millis(1500));
    assert_eq!(d.snapshot().state, Some(DeviceState::Connecting));
    open_channel(&mut d, t + SimDuration::from_millis(1500));
    d.run_until(t + SimDuration::from_secs(10));
    assert_eq!(listens(&texts(&mut d)), ["start manual"]);
    assert_eq!(
        d.snapshot().state,
        Some(DeviceState::Listening),
        "released, and still listening"
    );
}

#[test]
fn boot_hold_is_not_push_to_talk() {
    let mut lb = pair();
    let first = lb.device.gestures().len();
    finger(&mut lb, "boot", true);
    run(&mut lb, 3000);
    assert_eq!(state(&lb), Some(DeviceState::Idle), "BOOT has no press-down callback");
    finger(&mut lb, "boot", false);
    run(&mut lb, 1000);
    assert_eq!(state(&lb), Some(DeviceState::Idle), "nor a long press or press-up one");
    assert!(controls(&mut lb).is_empty());
    let found: Vec<(Gesture, Option<ButtonAction>)> = lb.device.gestures()[first..]
        .iter()
        .map(|g| (g.gesture, g.action))
        .collect();
    assert_eq!(
        found,
        [
            (Gesture::PressDown, None),
            (Gesture::LongPress, None),
            (Gesture::PressUp, None)
        ],
        "held past 1.5 s: a long press, so no click after the release"
    );
}

#[test]
fn a_boot_click_toggles_the_chat_about_0_2_s_after_the_release() {
    let mut lb = pair();
    finger(&mut lb, "boot", true);
    run(&mut lb, 100);
    let released = lb.now();
    finger(&mut lb, "boot", false);
    run(&mut lb, 150);
    assert_eq!(state(&lb), Some(DeviceState::Idle), "the click is not decided yet");
    run(&mut lb, 50);
    assert_ne!(state(&lb), Some(DeviceState::Idle), "the click toggled the chat");
    let click = lb
        .device
        .gestures()
        .iter()
        .find(|g| g.gesture == Gesture::Click)
        .unwrap();
    assert_eq!(click.action, Some(ButtonAction::ToggleChat));
    let after = click.at.saturating_since(released);
    assert!(
        (SimDuration::from_millis(185)..=SimDuration::from_millis(195)).contains(&after),
        "{after}"
    );
    run(&mut lb, 3000);
    assert_eq!(state(&lb), Some(DeviceState::Listening));
    assert_eq!(controls(&mut lb)[0].1["mode"], "auto");
}

#[test]
fn a_double_click_on_boot_does_nothing() {
    let mut lb = pair();
    for _ in 0..2 {
        finger(&mut lb, "boot", true);
        run(&mut lb, 80);
        finger(&mut lb, "boot", false);
        run(&mut lb, 80);
    }
    run(&mut lb, 2000);
    assert_eq!(state(&lb), Some(DeviceState::Idle));
    assert!(
        lb.device
            .gestures()
            .iter()
            .any(|g| g.gesture == Gesture::DoubleClick && g.action.is_none())
    );
    assert!(!lb.device.gestures().iter().any(|g| g.gesture == Gesture::Click));
}

#[test]
fn a_volume_long_press_acts_while_still_held_and_a_click_after_the_release() {
    let mut lb = pair();
    let volume = |lb: &Loopback| lb.device.snapshot().volume.unwrap();
    let start = volume(&lb);
    assert!(start < 100, "{start}");
    finger(&mut lb, "volume_up", true);
    run(&mut lb, 1400);
    assert_eq!(volume(&lb), start, "not yet a long press");
    run(&mut lb, 200);
    assert_eq!(volume(&lb), 100, "the long press fired at 1.5 s, finger still down");
    finger(&mut lb, "volume_up", false);
    run(&mut lb, 500);
    assert_eq!(volume(&lb), 100);

    finger(&mut lb, "volume_down", true);
    run(&mut lb, 100);
    finger(&mut lb, "volume_down", false);
    assert_eq!(
        volume(&lb),
        100,
        "a click waits for the release and the short press time"
    );
    run(&mut lb, 300);
    assert_eq!(volume(&lb), 90);
}

#[test]
fn a_touch_button_held_through_a_reboot_is_pressed_again_after_it() {
    let mut lb = pair();
    finger(&mut lb, "touch", true);
    run(&mut lb, 3000);
    let now = lb.now();
    lb.device.reset(now);
    run(&mut lb, 6000);
    let downs = lb
        .device
        .gestures()
        .iter()
        .filter(|g| g.gesture == Gesture::PressDown)
        .count();
    assert_eq!(downs, 2, "one press down per boot: the new button sees the finger");
    assert!(lb.device.button_held("touch"));
    assert_eq!(state(&lb), Some(DeviceState::Listening));
}
