//! What the display is told, in virtual time (issue 27, step 1): the calls of the firmware's
//! `Display` interface (`main/display/display.h`: `SetStatus`, `ShowNotification`, `SetEmotion`,
//! `SetChatMessage`, `ClearChatMessages`, `SetTheme`, `SetPowerSaveMode`) as the application and
//! the board make them, kept as a log, so that what the screen showed at any instant is a query
//! ([`ScreenLog::at`]). Drawing it is a later step.
//!
//! The texts are the firmware's `zh-CN` strings (`main/assets/locales/zh-CN/language.json`, the
//! language the twin's firmware reports).

use std::sync::Arc;

use crate::time::{SimDuration, SimTime};

/// `Lang::Strings::STANDBY`.
pub const STANDBY: &str = "待命";
/// `Lang::Strings::CONNECTING`.
pub const CONNECTING: &str = "连接中...";
/// `Lang::Strings::LISTENING`.
pub const LISTENING: &str = "聆听中...";
/// `Lang::Strings::SPEAKING`.
pub const SPEAKING: &str = "说话中...";
/// `Lang::Strings::VOLUME` (the volume buttons add the value).
pub const VOLUME: &str = "音量 ";
/// `Lang::Strings::MAX_VOLUME` (a long press on volume up).
pub const MAX_VOLUME: &str = "最大音量";
/// `Lang::Strings::MUTED` (a long press on volume down).
pub const MUTED: &str = "已静音";

/// `ShowNotification`'s default duration (`display.h`: `duration_ms = 3000`).
pub const NOTIFICATION_MS: u64 = 3000;

/// How many calls the log keeps; older ones are folded into its base state.
const KEEP: usize = 4096;

/// How many chat messages a state keeps (the newest last).
const CHAT_KEEP: usize = 16;

/// One call of the display interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScreenCall {
    /// The board constructed its display (a boot): everything starts blank, with this theme.
    Constructed {
        /// The current theme after construction.
        theme: Option<String>,
    },
    /// `SetStatus(status)`: the status bar's text (it hides a notification still showing).
    SetStatus(String),
    /// `SetEmotion(emotion)`: the face (an emoji name such as `neutral`).
    SetEmotion(String),
    /// `SetChatMessage(role, content)`: `user`, `assistant` or `system`.
    SetChatMessage {
        /// The role.
        role: String,
        /// The text (empty clears the line on the default style).
        content: String,
    },
    /// `ClearChatMessages()`.
    ClearChatMessages,
    /// `ShowNotification(text, duration_ms)`: over the status bar for a while.
    ShowNotification {
        /// The text.
        text: String,
        /// How long it shows.
        duration_ms: u64,
    },
    /// `SetTheme(theme)` took effect: the current theme.
    SetTheme(String),
    /// `SetPowerSaveMode(on)`.
    SetPowerSaveMode(bool),
    /// `UpdateStatusBar(true)` at `Application::Initialize`: the network and battery icons (and
    /// the mute icon from the volume then).
    StatusIcons(StatusIcons),
    /// The codec's output volume changed (not a display call: `UpdateStatusBar` reads it on each
    /// 1 s clock tick and shows the mute icon while it is 0).
    OutputVolume(i32),
    /// `SetPreviewImage(image)` on an LCD: the image over the emoji box for a while (the
    /// preview timer then calls `SetPreviewImage(nullptr)`).
    ShowPreview {
        /// The image.
        image: Arc<PreviewImage>,
        /// How long it shows (`PREVIEW_IMAGE_DURATION_MS`).
        duration_ms: u64,
    },
}

/// The network icon (`WifiBoard::GetNetworkStateIcon`, `wifi_board.cc:245-262`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkIcon {
    /// No icon (before the first `UpdateStatusBar`).
    #[default]
    None,
    /// `wifi`: connected at RSSI ≥ −65 dBm (or in config mode).
    Full,
    /// `wifi_2_bar`: RSSI ≥ −75.
    TwoBars,
    /// `wifi_1_bar`: weaker.
    OneBar,
    /// `wifi_off`: not connected.
    Off,
}

impl NetworkIcon {
    /// The icon for a station at `rssi`, connected or not.
    pub fn for_wifi(connected: bool, rssi: i32) -> Self {
        match (connected, rssi) {
            (false, _) => NetworkIcon::Off,
            (true, r) if r >= -65 => NetworkIcon::Full,
            (true, r) if r >= -75 => NetworkIcon::TwoBars,
            _ => NetworkIcon::OneBar,
        }
    }
}

/// The status bar's icons.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusIcons {
    /// The network icon.
    pub network: NetworkIcon,
    /// The battery: `(level index 0..=7, charging)` as `UpdateStatusBar` picks the icon
    /// (`lvgl_display.cc:232-252`); none on a board without a battery.
    pub battery: Option<(u8, bool)>,
}

impl StatusIcons {
    /// The battery icon's index for a charge `level` (0 empty … 7 full).
    pub fn battery_index(level: i32) -> u8 {
        if level <= 0 {
            0
        } else if level >= 100 {
            7
        } else {
            (1 + (level - 1) * 6 / 99) as u8
        }
    }
}

/// The clock timer's period (`esp_timer_start_periodic(clock_timer_handle_, 1000000)`).
const TICK_US: u64 = 1_000_000;

/// `PREVIEW_IMAGE_DURATION_MS` (`lcd_display.h:12`).
pub const PREVIEW_MS: u64 = 5000;

/// An image `self.screen.preview_image` downloaded: the size its PNG header claims (what
/// LVGL's PNG decoder reads, `lv_lodepng.c` `decoder_info`) and, when it decodes, its pixels.
#[derive(Clone, PartialEq, Eq)]
pub struct PreviewImage {
    /// Width from the header.
    pub width: u32,
    /// Height from the header.
    pub height: u32,
    /// Straight RGBA pixels, row by row; `None` when the PNG does not decode (LVGL then draws
    /// nothing).
    pub rgba: Option<Vec<u8>>,
}

impl std::fmt::Debug for PreviewImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PreviewImage({}x{}, {})",
            self.width,
            self.height,
            if self.rgba.is_some() { "decoded" } else { "undecodable" }
        )
    }
}

/// What the screen shows at an instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScreenState {
    /// The status bar text.
    pub status: String,
    /// The emotion shown.
    pub emotion: String,
    /// Chat messages `(role, content)`, oldest first (at most 16 kept).
    pub chat: Vec<(String, String)>,
    /// The notification shown, with when it goes away.
    pub notification: Option<(String, SimTime)>,
    /// The current theme, if the display has one.
    pub theme: Option<String>,
    /// Power-save mode (the panel dimmed or off).
    pub power_save: bool,
    /// The preview image shown, with when the preview timer hides it.
    pub preview: Option<(Arc<PreviewImage>, SimTime)>,
    /// The network and battery icons.
    pub icons: StatusIcons,
    /// The mute icon shows (set by the clock tick from the volume then).
    pub muted: bool,
    /// The output volume the clock tick reads.
    pub volume: Option<i32>,
    /// When the clock timer started (this boot's `Initialize`); ticks every second after.
    pub tick_origin: Option<SimTime>,
    /// The instant the state was brought up to.
    pub clock: SimTime,
}

impl ScreenState {
    /// Brings the state to `t`: a clock tick in between shows the mute icon if the volume is 0
    /// then and hides it otherwise (`UpdateStatusBar`, `lvgl_display.cc:196-210`).
    fn advance(&mut self, t: SimTime) {
        if let (Some(origin), Some(volume)) = (self.tick_origin, self.volume)
            && t > self.clock
        {
            let ticks = |x: SimTime| x.saturating_since(origin).as_micros() / TICK_US;
            if ticks(t) > ticks(self.clock) {
                self.muted = volume == 0;
            }
        }
        self.clock = self.clock.max(t);
    }

    /// The next clock tick after the state's instant at which the mute icon would change.
    fn next_mute_flip(&self) -> Option<SimTime> {
        let (origin, volume) = (self.tick_origin?, self.volume?);
        if (volume == 0) == self.muted {
            return None;
        }
        let next = (self.clock.saturating_since(origin).as_micros() / TICK_US + 1) * TICK_US;
        Some(origin + SimDuration::from_micros(next))
    }

    fn apply(&mut self, at: SimTime, call: &ScreenCall) {
        self.advance(at);
        match call {
            ScreenCall::Constructed { theme } => {
                *self = ScreenState {
                    theme: theme.clone(),
                    tick_origin: Some(at),
                    clock: at,
                    ..ScreenState::default()
                }
            }
            ScreenCall::StatusIcons(icons) => {
                self.icons = *icons;
                self.muted = self.volume == Some(0);
            }
            ScreenCall::OutputVolume(v) => self.volume = Some(*v),
            // `LvglDisplay::SetStatus` shows the status label and hides the notification's
            // (`lvgl_display.cc:157-159`): a state change ends a notification early.
            ScreenCall::SetStatus(s) => {
                self.status = s.clone();
                self.notification = None;
            }
            ScreenCall::SetEmotion(e) => self.emotion = e.clone(),
            ScreenCall::SetChatMessage { role, content } => {
                self.chat.push((role.clone(), content.clone()));
                if self.chat.len() > CHAT_KEEP {
                    self.chat.remove(0);
                }
            }
            ScreenCall::ClearChatMessages => self.chat.clear(),
            ScreenCall::ShowNotification { text, duration_ms } => {
                self.notification = Some((text.clone(), at + SimDuration::from_millis(*duration_ms)))
            }
            ScreenCall::SetTheme(t) => self.theme = Some(t.clone()),
            ScreenCall::SetPowerSaveMode(on) => self.power_save = *on,
            ScreenCall::ShowPreview { image, duration_ms } => {
                self.preview = Some((image.clone(), at + SimDuration::from_millis(*duration_ms)))
            }
        }
    }

    /// The notification text if it still shows at `t`.
    pub fn notification_at(&self, t: SimTime) -> Option<&str> {
        self.notification
            .as_ref()
            .filter(|(_, until)| t < *until)
            .map(|(s, _)| s.as_str())
    }

    /// The preview image if it still shows at `t`.
    pub fn preview_at(&self, t: SimTime) -> Option<&PreviewImage> {
        self.preview
            .as_ref()
            .filter(|(_, until)| t < *until)
            .map(|(image, _)| image.as_ref())
    }

    /// The newest chat message, as the default style shows it (one line of text).
    pub fn last_message(&self) -> Option<&(String, String)> {
        self.chat.last()
    }
}

/// Every display call, in time order (survives reboots; bounded).
#[derive(Clone, Debug, Default)]
pub struct ScreenLog {
    /// The state before the first kept call.
    base: ScreenState,
    /// `(when, call)`, in order.
    calls: Vec<(SimTime, ScreenCall)>,
}

impl ScreenLog {
    /// Records a call made at `at`.
    pub fn record(&mut self, at: SimTime, call: ScreenCall) {
        self.calls.push((at, call));
        if self.calls.len() > KEEP {
            let drop = self.calls.len() - KEEP / 2;
            for (t, c) in self.calls.drain(..drop) {
                self.base.apply(t, &c);
            }
        }
    }

    /// The calls kept, in order.
    pub fn calls(&self) -> &[(SimTime, ScreenCall)] {
        &self.calls
    }

    /// What the screen shows at `t`: every call made at or before `t` applied in order.
    pub fn at(&self, t: SimTime) -> ScreenState {
        let mut s = self.base.clone();
        for (at, c) in self.calls.iter().take_while(|(at, _)| *at <= t) {
            s.apply(*at, c);
        }
        s.advance(t);
        s
    }

    /// The times at which the screen changed, with the state from then on (for filmstrips): the
    /// calls (several at one instant make one change) and the ends of notifications and
    /// previews (the state is the same; drawn at that instant it no longer shows them).
    pub fn changes(&self) -> Vec<(SimTime, ScreenState)> {
        let mut s = self.base.clone();
        let mut out: Vec<(SimTime, ScreenState)> = Vec::new();
        let mut calls = self.calls.iter().peekable();
        loop {
            let last = out.last().map(|(t, _)| *t);
            let ends = [
                s.notification.as_ref().map(|n| n.1),
                s.preview.as_ref().map(|p| p.1),
                s.next_mute_flip(),
            ];
            let end = ends.into_iter().flatten().filter(|u| last.is_none_or(|t| *u > t)).min();
            match (calls.peek().map(|(t, _)| *t), end) {
                (Some(at), end) if end.is_none_or(|e| at <= e) => {
                    while let Some((_, c)) = calls.next_if(|(t, _)| *t == at) {
                        s.apply(at, c);
                    }
                    out.push((at, s.clone()));
                }
                (_, Some(e)) => {
                    s.advance(e);
                    out.push((e, s.clone()))
                }
                (_, None) => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    #[test]
    fn the_state_at_an_instant_folds_the_calls_before_it() {
        let mut log = ScreenLog::default();
        log.record(
            t(0),
            ScreenCall::Constructed {
                theme: Some("light".into()),
            },
        );
        log.record(t(10), ScreenCall::SetStatus(LISTENING.into()));
        log.record(
            t(20),
            ScreenCall::SetChatMessage {
                role: "user".into(),
                content: "小声一点".into(),
            },
        );
        log.record(
            t(30),
            ScreenCall::ShowNotification {
                text: format!("{VOLUME}40"),
                duration_ms: NOTIFICATION_MS,
            },
        );
        log.record(t(40), ScreenCall::SetStatus(STANDBY.into()));
        log.record(t(40), ScreenCall::ClearChatMessages);
        assert_eq!(log.at(t(5)).status, "");
        assert_eq!(log.at(t(15)).status, "聆听中...");
        let s = log.at(t(35));
        assert_eq!(s.last_message().map(|m| m.1.as_str()), Some("小声一点"));
        assert_eq!(s.notification_at(t(35)), Some("音量 40"));
        assert_eq!(s.notification_at(t(3030)), None, "a notification shows for 3 s");
        assert_eq!(log.at(t(40)).notification_at(t(40)), None, "a status hides it at once");
        let s = log.at(t(40));
        assert_eq!(
            (s.status.as_str(), s.chat.len(), s.theme.as_deref()),
            ("待命", 0, Some("light"))
        );
        // Two calls at one instant make one change; a notification's end is one too (here the
        // status at 40 hid it first).
        let changes: Vec<u64> = log.changes().iter().map(|(t, _)| t.as_millis()).collect();
        assert_eq!(changes, [0, 10, 20, 30, 40]);
        log.record(
            t(50),
            ScreenCall::ShowNotification {
                text: "已静音".into(),
                duration_ms: NOTIFICATION_MS,
            },
        );
        let changes: Vec<u64> = log.changes().iter().map(|(t, _)| t.as_millis()).collect();
        assert_eq!(changes, [0, 10, 20, 30, 40, 50, 3050]);
    }

    #[test]
    fn a_long_log_keeps_its_state_when_it_drops_old_calls() {
        let mut log = ScreenLog::default();
        log.record(t(0), ScreenCall::SetEmotion("happy".into()));
        for i in 0..10_000u64 {
            log.record(t(i + 1), ScreenCall::SetStatus(format!("{i}")));
        }
        assert!(log.calls().len() <= KEEP);
        let s = log.at(t(20_000));
        assert_eq!((s.status.as_str(), s.emotion.as_str()), ("9999", "happy"));
    }
}
