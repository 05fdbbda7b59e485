//! What the display is told, in virtual time (issue 27, step 1; `hw::screen`): the calls the
//! firmware makes at state changes, for the server's `stt`/`tts`/`llm`/`alert` messages, for the
//! volume buttons and for `set_theme`, and what the screen shows at any instant.

use xiaozhi_sim::device::DeviceState;
use xiaozhi_sim::device::Input;
use xiaozhi_sim::hw::screen::ScreenState;
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};

mod common;

const BREAD: &str = include_str!("../../boards/bread-compact-wifi.yaml");
const LCD: &str = include_str!("../../boards/bread-compact-wifi-lcd.yaml");

fn pair(yaml: &str) -> Loopback {
    common::ws_pair(yaml, 1)
}

fn run(lb: &mut Loopback, ms: u64) {
    let t = lb.now() + SimDuration::from_millis(ms);
    lb.run_until(t).unwrap();
}

fn screen(lb: &Loopback) -> ScreenState {
    lb.device.screen_log().at(lb.now())
}

fn server(lb: &mut Loopback, json: &str) {
    let now = lb.now();
    lb.device.handle(now, Input::WsText(json.as_bytes()));
}

#[test]
fn a_turn_shows_listening_the_users_words_speaking_the_answer_and_the_emotion() {
    let mut lb = pair(LCD);
    assert_eq!(screen(&lb).status, "待命", "idle after boot");
    assert_eq!(screen(&lb).theme.as_deref(), Some("light"));
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(&mut lb, 3000);
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    let s = screen(&lb);
    assert_eq!((s.status.as_str(), s.emotion.as_str()), ("聆听中...", "neutral"));
    server(&mut lb, r#"{"type":"stt","text":"小声一点"}"#);
    server(&mut lb, r#"{"type":"llm","emotion":"happy"}"#);
    server(&mut lb, r#"{"type":"tts","state":"start"}"#);
    server(
        &mut lb,
        r#"{"type":"tts","state":"sentence_start","text":"好的，已经调小了"}"#,
    );
    run(&mut lb, 300);
    let s = screen(&lb);
    assert_eq!(s.status, "说话中...");
    assert_eq!(s.emotion, "happy");
    let said: Vec<(&str, &str)> = s.chat.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
    assert!(
        said.ends_with(&[("user", "小声一点"), ("assistant", "好的，已经调小了")]),
        "{said:?}"
    );
    // The past stays a query: while listening, before the answer.
    let before = lb
        .device
        .screen_log()
        .at(SimTime::from_micros(lb.now().as_micros() - 400_000));
    assert_eq!(before.status, "聆听中...");
    server(&mut lb, r#"{"type":"tts","state":"stop"}"#);
    run(&mut lb, 3000);
    let s = screen(&lb);
    assert_eq!(s.status, "聆听中...", "auto mode listens again: {s:?}");
    assert_eq!(s.emotion, "neutral");
}

#[test]
fn an_alert_shows_its_status_emotion_and_message() {
    let mut lb = pair(LCD);
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(&mut lb, 3000);
    server(
        &mut lb,
        r#"{"type":"alert","status":"提示","message":"电量低","emotion":"sad"}"#,
    );
    run(&mut lb, 100);
    let s = screen(&lb);
    assert_eq!((s.status.as_str(), s.emotion.as_str()), ("提示", "sad"));
    assert_eq!(s.last_message(), Some(&("system".to_string(), "电量低".to_string())));
}

#[test]
fn the_volume_button_shows_the_new_volume_for_three_seconds() {
    let mut lb = pair(BREAD);
    let now = lb.now();
    lb.device.button(now, "volume_up", true).unwrap();
    run(&mut lb, 100);
    let now = lb.now();
    lb.device.button(now, "volume_up", false).unwrap();
    run(&mut lb, 400);
    let t = lb.now();
    let s = screen(&lb);
    assert_eq!(s.notification_at(t), Some("音量 80"), "70 + 10: {s:?}");
    assert_eq!(s.notification_at(t + SimDuration::from_millis(3000)), None);
    // A long press on volume down: muted.
    let now = lb.now();
    lb.device.button(now, "volume_down", true).unwrap();
    run(&mut lb, 1700);
    let t = lb.now();
    assert_eq!(screen(&lb).notification_at(t), Some("已静音"));
    // A state change's SetStatus hides the notification at once (lvgl_display.cc:157-159).
    let now = lb.now();
    lb.device.button(now, "volume_down", false).unwrap();
    lb.device.toggle_chat(now);
    run(&mut lb, 300);
    let t = lb.now();
    let s = screen(&lb);
    assert_ne!(s.status, "待命", "the chat started: {s:?}");
    assert_eq!(s.notification_at(t), None, "{s:?}");
}

#[test]
fn set_theme_changes_the_lcd_and_leaves_the_oled_dark() {
    for (yaml, theme, expect) in [(LCD, "dark", "dark"), (BREAD, "light", "dark"), (BREAD, "dark", "dark")] {
        let mut lb = pair(yaml);
        let now = lb.now();
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"self.screen.set_theme","arguments":{{"theme":"{theme}"}}}}}}"#
        );
        lb.device.handle(now, Input::Mcp(call.as_bytes()));
        run(&mut lb, 200);
        assert_eq!(screen(&lb).theme.as_deref(), Some(expect), "{theme}");
    }
}

#[test]
fn a_board_without_a_display_is_told_nothing() {
    let yaml = BREAD
        .replace("  kind: oled ", "  kind: none ")
        .replace("  themes: [dark]", "  themes: []");
    let yaml = yaml.replace("  default_theme: dark", "");
    let mut lb = pair(&yaml);
    let now = lb.now();
    lb.device.toggle_chat(now);
    run(&mut lb, 3000);
    assert!(lb.device.screen_log().calls().is_empty());
}

/// The mute icon follows the volume on the status bar's 1 s clock tick (`UpdateStatusBar`), not
/// at once: a long press on volume down (0) shows it at the next tick; after a reboot the volume
/// comes back as 10 and the icon is gone. The network icon is the world's Wi-Fi (RSSI −50: full).
#[test]
fn the_mute_icon_shows_at_the_next_clock_tick_and_not_after_a_reboot() {
    use xiaozhi_sim::hw::screen::NetworkIcon;
    let mut lb = pair(BREAD);
    let s = screen(&lb);
    assert_eq!((s.muted, s.icons.network), (false, NetworkIcon::Full), "{s:?}");
    let now = lb.now();
    lb.device.button(now, "volume_down", true).unwrap();
    run(&mut lb, 1700);
    let now = lb.now();
    lb.device.button(now, "volume_down", false).unwrap();
    let set_at = lb
        .device
        .screen_log()
        .calls()
        .iter()
        .rev()
        .find(|(_, c)| matches!(c, xiaozhi_sim::hw::screen::ScreenCall::OutputVolume(0)))
        .map(|(t, _)| *t)
        .expect("the volume went to 0");
    let log = lb.device.screen_log();
    assert!(!log.at(set_at).muted, "not at once: the tick reads it");
    let tick = log
        .changes()
        .into_iter()
        .find(|(t, s)| *t > set_at && s.muted)
        .map(|(t, _)| t)
        .expect("a tick shows the mute icon");
    let wait = tick.saturating_since(set_at);
    assert!(
        wait > SimDuration::ZERO && wait <= SimDuration::from_millis(1000),
        "{wait}"
    );
    run(&mut lb, 1000);
    assert!(screen(&lb).muted);
    let now = lb.now();
    lb.device.reset(now);
    run(&mut lb, 3000);
    let s = screen(&lb);
    assert_eq!((s.volume, s.muted), (Some(10), false), "0 comes back as 10: {s:?}");
}
