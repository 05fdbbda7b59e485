//! A board's buttons as data: which gestures have a callback and what each callback does
//! (`main/boards/common/button.h`; a board's `InitializeButtons`). The timing of the gestures
//! is the device's (`device/button.rs`); docs/boards.md, "Buttons", has both.

use serde::Deserialize;

/// `CONFIG_BUTTON_LONG_PRESS_TIME_MS` (espressif/button Kconfig): a `long_press_time` of 0.
pub const DEFAULT_LONG_PRESS_MS: u32 = 1500;
/// `CONFIG_BUTTON_SHORT_PRESS_TIME_MS`: a `short_press_time` of 0.
pub const DEFAULT_SHORT_PRESS_MS: u32 = 180;

/// A physical button (`Button` on a GPIO) and the callbacks its board registers on it
/// (`main/boards/common/button.h`: `OnPressDown`, `OnPressUp`, `OnClick`, `OnLongPress`,
/// `OnDoubleClick`, `OnMultipleClick`). A gesture with no callback does nothing: a BOOT
/// button wired with `click` only ignores a long press and a double click. docs/boards.md
/// lists the gestures and their timing.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ButtonSpec {
    /// Name a scenario `press` step refers to (e.g. `boot`).
    pub name: String,
    /// GPIO the button is wired to.
    pub gpio: u32,
    /// `long_press_time` of the `Button` constructor in ms; 0 (the default) is the component's
    /// 1500.
    #[serde(default)]
    pub long_press_time: u32,
    /// `short_press_time` in ms; 0 (the default) is the component's 180.
    #[serde(default)]
    pub short_press_time: u32,
    /// `OnPressDown`.
    #[serde(default)]
    pub press_down: Option<ButtonAction>,
    /// `OnPressUp`.
    #[serde(default)]
    pub press_up: Option<ButtonAction>,
    /// `OnClick`.
    #[serde(default)]
    pub click: Option<ButtonAction>,
    /// `OnDoubleClick`.
    #[serde(default)]
    pub double_click: Option<ButtonAction>,
    /// `OnMultipleClick(cb, clicks)`.
    #[serde(default)]
    pub multiple_click: Option<MultipleClick>,
    /// `OnLongPress`.
    #[serde(default)]
    pub long_press: Option<ButtonAction>,
}

/// `OnMultipleClick(callback, clicks)`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultipleClick {
    /// How many presses (the firmware's default is 3).
    #[serde(default = "three")]
    pub clicks: u8,
    /// What the callback does.
    pub action: ButtonAction,
}

fn three() -> u8 {
    3
}

impl ButtonSpec {
    /// The long press time in ms (the component's default for 0).
    pub fn long_press_ms(&self) -> u32 {
        if self.long_press_time == 0 {
            DEFAULT_LONG_PRESS_MS
        } else {
            self.long_press_time
        }
    }

    /// The short press time in ms (the component's default for 0).
    pub fn short_press_ms(&self) -> u32 {
        if self.short_press_time == 0 {
            DEFAULT_SHORT_PRESS_MS
        } else {
            self.short_press_time
        }
    }

    /// What the board's callback for `gesture` does, if it registered one.
    pub fn action(&self, gesture: Gesture) -> Option<ButtonAction> {
        match gesture {
            Gesture::PressDown => self.press_down,
            Gesture::PressUp => self.press_up,
            Gesture::Click => self.click,
            Gesture::DoubleClick => self.double_click,
            Gesture::Clicks(n) => self.multiple_click.filter(|m| m.clicks == n).map(|m| m.action),
            Gesture::LongPress => self.long_press,
        }
    }

    /// The gestures that have a callback, with what each does (for `boards` and evidence).
    pub fn wired(&self) -> Vec<(String, ButtonAction)> {
        let mut out = Vec::new();
        let mut add = |g: &str, a: Option<ButtonAction>| {
            if let Some(a) = a {
                out.push((g.to_string(), a));
            }
        };
        add("press down", self.press_down);
        add("press up", self.press_up);
        add("click", self.click);
        add("double click", self.double_click);
        if let Some(m) = self.multiple_click {
            add(&format!("{} clicks", m.clicks), Some(m.action));
        }
        add("long press", self.long_press);
        out
    }
}

/// A gesture of a button, as espressif/button reports it (the events `Button` registers
/// callbacks for; the timing is `device/button.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gesture {
    /// `BUTTON_PRESS_DOWN` (`OnPressDown`): every press, the first of a click included.
    PressDown,
    /// `BUTTON_PRESS_UP` (`OnPressUp`): every release, after a long press too.
    PressUp,
    /// `BUTTON_SINGLE_CLICK` (`OnClick`): one short press, and no second one within the short
    /// press time after it.
    Click,
    /// `BUTTON_DOUBLE_CLICK` (`OnDoubleClick`): two short presses (no `Click` then).
    DoubleClick,
    /// `BUTTON_MULTIPLE_CLICK` with this many presses (`OnMultipleClick(cb, n)`); reported
    /// with every click series, 1 and 2 included, as the component does.
    Clicks(u8),
    /// `BUTTON_LONG_PRESS_START` (`OnLongPress`): held for the long press time (no click follows).
    LongPress,
}

impl Gesture {
    /// How the gesture is named in board files and evidence.
    pub fn name(self) -> String {
        match self {
            Gesture::PressDown => "press down".into(),
            Gesture::PressUp => "press up".into(),
            Gesture::Click => "click".into(),
            Gesture::DoubleClick => "double click".into(),
            Gesture::Clicks(n) => format!("{n} clicks"),
            Gesture::LongPress => "long press".into(),
        }
    }
}

/// What a button callback does in the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ButtonAction {
    /// The BOOT lambda: `EnterWifiConfigMode()` while starting (a state the twin's boot passes
    /// in an instant, so not reached), else `ToggleChatState()`.
    ToggleChat,
    /// `StartListening()` (a talk button's press down).
    StartListening,
    /// `StopListening()` (a talk button's press up).
    StopListening,
    /// Output volume +10, clamped to 100.
    VolumeUp,
    /// Output volume −10, clamped to 0.
    VolumeDown,
    /// Output volume to 100.
    VolumeMax,
    /// Output volume to 0.
    VolumeMin,
    /// A callback the twin does not model (power off, Wi-Fi configuration, a board's own
    /// feature): the gesture is found and reported, and nothing else happens.
    Unmodelled,
}

impl ButtonAction {
    /// What the callback does, for evidence.
    pub fn describe(self) -> &'static str {
        match self {
            ButtonAction::ToggleChat => "toggle chat",
            ButtonAction::StartListening => "start listening (manual mode)",
            ButtonAction::StopListening => "stop listening",
            ButtonAction::VolumeUp => "volume +10",
            ButtonAction::VolumeDown => "volume -10",
            ButtonAction::VolumeMax => "volume 100",
            ButtonAction::VolumeMin => "volume 0",
            ButtonAction::Unmodelled => "a board callback the twin does not model",
        }
    }
}
