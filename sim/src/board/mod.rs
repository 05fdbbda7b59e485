//! `BoardSpec`: what the firmware decides per board at compile time and in the board
//! constructor, loaded from `boards/<id>.yaml` and validated (docs/reference/architecture.md §6).
//!
//! Mirrors `main/boards/<dir>/config.h`, `config.json` (BOARD_NAME/BOARD_TYPE) and the board
//! class constructor (display, backlight, camera, lamp, board tools). The tool catalogue is *not*
//! stored here: the device derives it from these facts by the firmware's registration rules (and
//! memoizes it in a `device::Board`).
//! Knows nothing about runtime state.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::firmware::Firmware;
pub use crate::firmware::FirmwareSpec;

use crate::mcp::property::{Property, PropertyError, PropertyType, PropertyValue};
use crate::spec::{self, SpecError};

pub mod audio;
pub mod builtin;
pub mod button;
pub mod by_firmware;
pub mod target;
pub mod upstream;
mod validate;
pub use builtin::{Builtin, MOTIONS};
pub use button::{ButtonAction, ButtonSpec, Gesture, MultipleClick};
pub use by_firmware::FirmwareOverride;
pub use target::{Chip, PartitionRow, PartitionTable, TargetSpec};
pub use upstream::{UpstreamCodec, UpstreamSpec};
pub use validate::MAX_FREE_HEAP;

/// A validated board description.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardSpec {
    /// `BOARD_NAME`: the build variant name (`serverInfo.name`, system info `board.name`).
    pub name: String,
    /// `BOARD_TYPE` from the board's `config.json` (system info `board.type`).
    #[serde(rename = "type")]
    pub board_type: String,
    /// `BOARD_MANUFACTURER` (empty for the bread boards).
    #[serde(default)]
    pub manufacturer: String,
    /// One line for humans (`xiaozhi-twin boards`).
    #[serde(default)]
    pub summary: String,
    /// Where the facts come from upstream (for reviewers).
    #[serde(default)]
    pub source: String,
    /// Application descriptor and build facts (system info `application`).
    #[serde(default)]
    pub firmware: FirmwareSpec,
    /// The SoC and its build configuration.
    #[serde(default)]
    pub target: TargetSpec,
    /// The display class the board constructs.
    pub display: DisplaySpec,
    /// The PWM backlight, if the board has one (LCD boards).
    #[serde(default)]
    pub backlight: Option<BacklightSpec>,
    /// The camera, if the board constructs one (registers `self.camera.take_photo`).
    #[serde(default)]
    pub camera: Option<CameraSpec>,
    /// The audio codec, sample rates and the analogue output chain.
    #[serde(default)]
    pub audio: AudioSpec,
    /// Tools the board constructor registers, in order (before `AddCommonTools`).
    #[serde(default)]
    pub board_tools: Vec<BoardTool>,
    /// The physical buttons the board wires up.
    #[serde(default)]
    pub buttons: Vec<ButtonSpec>,
    /// The battery the board reports, if any (`self.battery.get_level`, status JSON).
    #[serde(default)]
    pub battery: Option<BatterySpec>,
    /// The built-in font the device hello advertises (`text_font`); default from the display.
    #[serde(default)]
    pub text_font: Option<TextFontSpec>,
    /// Facts that differ by firmware version ([`by_firmware::FirmwareOverride`]).
    #[serde(default)]
    pub by_firmware: Vec<FirmwareOverride>,
    /// Where a generated board's facts were read upstream, and what the twin leaves out (boardgen).
    #[serde(default)]
    pub upstream: Option<UpstreamSpec>,
    /// The facts as the file states them, before a `by_firmware` entry replaced any.
    #[serde(skip)]
    base: Option<std::sync::Arc<by_firmware::BaseFacts>>,
}

/// The board's built-in font as the hello advertises it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextFontSpec {
    /// Font bundle name (e.g. `font_puhui_basic_14_1`).
    pub bundle: String,
    /// Glyph set of the bundle (`basic` unless the board says otherwise).
    #[serde(default = "basic")]
    pub charset: String,
    /// Glyph height in pixels.
    pub size: i32,
    /// Bits per pixel of the glyph bitmaps (1 on OLEDs, 4 on LCDs).
    pub bpp: i32,
}

fn basic() -> String {
    "basic".into()
}

/// Display class the board constructs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisplayKind {
    /// `OledDisplay` (LVGL, monochrome).
    Oled,
    /// `SpiLcdDisplay` / `LcdDisplay` (LVGL, colour).
    Lcd,
    /// `NoDisplay` (no LVGL display object; e.g. boards without a screen).
    None,
    /// `emote::EmoteDisplay`: an animated face, not an LVGL display (no `screen.get_info`, no
    /// snapshot, no themes: `GetTheme()` stays null).
    Emote,
}

/// The display the board constructs: class, panel and theme registry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplaySpec {
    /// Display class.
    pub kind: DisplayKind,
    /// Panel controller (e.g. `ssd1306`, `st7789`); informational.
    #[serde(default)]
    pub driver: String,
    /// Panel width in pixels (0 without a display).
    #[serde(default)]
    pub width: u32,
    /// Panel height in pixels (0 without a display).
    #[serde(default)]
    pub height: u32,
    /// Round glass, inferred from the controller and size (upstream does not say; docs/boards.md).
    #[serde(default)]
    pub round: bool,
    /// Themes the display registers in the global theme registry.
    #[serde(default)]
    pub themes: Vec<String>,
    /// The theme set at construction (or loaded from NVS `display/theme` when `persist_theme`).
    #[serde(default)]
    pub default_theme: Option<String>,
    /// LCD displays persist `display/theme` on every successful `SetTheme`; OLED never.
    #[serde(default)]
    pub persist_theme: bool,
    /// A theme the board constructor forces (and persists) at every boot (otto-robot: `dark`).
    #[serde(default)]
    pub boot_theme: Option<String>,
    /// `BUILTIN_ICON_FONT` of the build (the status bar's icons); by default the Material
    /// Symbols font of the text font's size and depth, as most builds pair them.
    #[serde(default)]
    pub icon_font: Option<String>,
    /// `DEFAULT_EMOJI_COLLECTION` of the build (`noto-color-emoji_32`, `_64` or `_128`): the
    /// colour emoji the default assets carry; none by default (the emotion is then a letter
    /// of the monochrome emoji font).
    #[serde(default)]
    pub emoji_collection: Option<String>,
}

/// The LEDC PWM backlight (`PwmBacklight`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BacklightSpec {
    /// `DISPLAY_BACKLIGHT_PIN` of a `PwmBacklight`; absent for a board's own class (PMIC, expander).
    #[serde(default)]
    pub gpio: Option<u32>,
    /// The backlight class when it is not `PwmBacklight` (informational).
    #[serde(default)]
    pub class: Option<String>,
    /// LEDC PWM frequency in Hz (25 000 by default).
    #[serde(default = "default_backlight_hz")]
    pub frequency_hz: u32,
    /// `DISPLAY_BACKLIGHT_OUTPUT_INVERT`: the panel lights at low duty.
    #[serde(default)]
    pub invert: bool,
    /// NVS `display/brightness` default when nothing is stored.
    #[serde(default = "default_brightness")]
    pub default_brightness: u8,
    /// The constructor calls `RestoreBrightness()` (most boards); when false it calls
    /// `SetBrightness(boot_brightness)` and NVS is never read.
    #[serde(default = "yes")]
    pub restore: bool,
    /// Brightness in percent set at boot when `restore` is false (100 by default).
    #[serde(default = "full_brightness")]
    pub boot_brightness: u8,
}

fn full_brightness() -> u8 {
    100
}

fn default_backlight_hz() -> u32 {
    25_000
}
fn default_brightness() -> u8 {
    75
}

/// The board camera (`Esp32Camera`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraSpec {
    /// Sensor model the driver detects (e.g. `OV2640`).
    pub sensor: String,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// `false` models a camera whose init failed: the tool is still registered and every call
    /// fails with `Failed to capture photo`.
    #[serde(default = "yes")]
    pub init_ok: bool,
}

fn yes() -> bool {
    true
}

pub use crate::audio::codec::CodecKind;
pub use audio::{AudioSpec, PaPinSpec};

/// A tool group registered by the board constructor.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BoardTool {
    /// `LampController` on a GPIO: `self.lamp.get_state`, `turn_on`, `turn_off`.
    Lamp {
        /// GPIO driving the lamp.
        gpio: u32,
    },
    /// A tool described entirely by data.
    Tool(ToolSpec),
}

/// A board-file tool: texts and schema are interface data, `behavior` says what the callback does.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Tool name as listed in `tools/list` (e.g. `self.otto.stop`).
    pub name: String,
    /// Tool description text, byte for byte.
    #[serde(default)]
    pub description: String,
    /// Input schema parameters, in registration order.
    #[serde(default)]
    pub properties: Vec<PropertySpec>,
    /// Registered with `AddUserOnlyTool` (hidden from the default list, still callable).
    #[serde(default)]
    pub user_only: bool,
    /// What the callback does.
    pub behavior: Behavior,
}

/// What a data-described tool does when called (runs on the main task).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Behavior {
    /// Drive a GPIO to a fixed level (0/1) or to a boolean/integer argument, remember it in a
    /// software flag, return `true`.
    Gpio {
        /// GPIO to drive.
        gpio: u32,
        /// Fixed level to drive (0 or 1); exclusive with `from`.
        #[serde(default)]
        level: Option<u8>,
        /// Boolean or integer property whose value (non-zero = high) sets the level; exclusive with `level`.
        #[serde(default)]
        from: Option<String>,
    },
    /// Return the software flag of a GPIO as `{"<key>": true|false}` (hand-built like the lamp,
    /// with a space after the colon).
    GpioState {
        /// GPIO whose software flag is reported.
        gpio: u32,
        /// JSON key of the reply (`power` by default).
        #[serde(default = "default_state_key")]
        key: String,
    },
    /// Store an argument in NVS (`namespace`/`key`), return `true`.
    NvsSet {
        /// NVS namespace.
        namespace: String,
        /// NVS key.
        key: String,
        /// Property whose argument value is stored.
        from: String,
    },
    /// Return a fixed value: `true`/`false`, an integer, or text.
    Returns {
        /// The value returned.
        value: ReturnSpec,
    },
    /// A callback the twin does not model (generated boards: what it moves is board code).
    /// The reply is `returns` when every `return` of the callback gives that literal; otherwise
    /// the callback computes its reply and the twin answers with [`UNMODELLED_REPLY`]. Either
    /// way the device notes "no physical effect modelled for this tool".
    Unmodelled {
        /// The literal every `return` of the callback gives, when they agree.
        #[serde(default)]
        returns: Option<ReturnSpec>,
        /// What the callback does, in a few words (from the source; informational).
        #[serde(default)]
        does: String,
    },
    /// Built-in behaviour implemented in the twin (e.g. `otto.set_trim`).
    Builtin {
        /// Which built-in behaviour.
        name: Builtin,
        /// The movement `otto.motion` queues (the pre-2.0.5 controller's one tool per move).
        #[serde(default)]
        motion: Option<String>,
    },
}

impl Behavior {
    /// The GPIO this behaviour drives or reads, if any.
    pub fn gpio(&self) -> Option<u32> {
        match self {
            Behavior::Gpio { gpio, .. } | Behavior::GpioState { gpio, .. } => Some(*gpio),
            _ => None,
        }
    }
}

/// The reply of an [`Behavior::Unmodelled`] tool whose callback computes its reply.
pub const UNMODELLED_REPLY: &str = "xiaozhi-twin: this tool's reply is computed by board code the twin does not model";

fn default_state_key() -> String {
    "power".to_string()
}

/// A fixed tool return value as a board file writes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ReturnSpec {
    /// Returned as a JSON boolean.
    Bool(bool),
    /// Returned as a JSON integer.
    Int(i32),
    /// Returned as text.
    Text(String),
}

/// A parameter in a board file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PropertySpec {
    /// Parameter name in the input schema.
    pub name: String,
    /// Parameter type (`boolean`, `integer`, `string`).
    #[serde(rename = "type")]
    pub ty: PropertyType,
    /// Default value; makes the parameter optional.
    #[serde(default)]
    pub default: Option<DefaultSpec>,
    /// Minimum of an integer range (give with `max`).
    #[serde(default)]
    pub min: Option<i32>,
    /// Maximum of an integer range (give with `min`).
    #[serde(default)]
    pub max: Option<i32>,
}

/// A parameter default as a board file writes it (checked against the type by `to_property`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum DefaultSpec {
    /// Boolean default.
    Bool(bool),
    /// Integer default (must fit in an `i32`).
    Int(i64),
    /// String default.
    Text(String),
}

impl PropertySpec {
    /// Builds the firmware `Property` with the same checks its constructors make.
    pub fn to_property(&self) -> Result<Property, PropertyError> {
        let name = self.name.as_str();
        let default = match &self.default {
            None => None,
            Some(DefaultSpec::Bool(b)) => Some(PropertyValue::Bool(*b)),
            Some(DefaultSpec::Int(i)) => match i32::try_from(*i) {
                Ok(v) => Some(PropertyValue::Int(v)),
                Err(_) => return Err(PropertyError::DefaultWrongType(name.to_string())),
            },
            Some(DefaultSpec::Text(s)) => Some(PropertyValue::Str(s.as_bytes().to_vec())),
        };
        match (self.min, self.max, default) {
            (None, None, None) => Ok(Property::required(name, self.ty)),
            (None, None, Some(d)) => Property::with_default(name, self.ty, d),
            (Some(min), Some(max), d) => {
                if min > max {
                    return Err(PropertyError::EmptyRange(name.to_string(), min, max));
                }
                match d {
                    None => Property::ranged(name, self.ty, min, max),
                    Some(PropertyValue::Int(v)) => Property::ranged_with_default(name, self.ty, v, min, max),
                    Some(_) => Err(PropertyError::DefaultWrongType(name.to_string())),
                }
            }
            _ => Err(PropertyError::RangeOnNonInteger(format!(
                "{name} (give both min and max)"
            ))),
        }
    }
}

/// The battery as the board's power manager reports it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatterySpec {
    /// Charge level in percent (0..=100).
    pub level: i32,
    /// The charger reports charging.
    #[serde(default)]
    pub charging: bool,
}

impl BoardSpec {
    /// Parses and validates a board file's text; `origin` names the file in errors.
    pub fn from_yaml(origin: &str, text: &str) -> Result<BoardSpec, SpecError> {
        let mut spec: BoardSpec = spec::from_yaml(origin, text)?;
        let checked = validate::board(&spec)
            .and_then(|()| spec.resolve_by_firmware())
            .and_then(|()| {
                spec.override_variants().iter().try_for_each(|(i, variant)| {
                    validate::board(variant).map_err(|(field, message)| (format!("by_firmware[{i}].{field}"), message))
                })
            });
        checked.map_err(|refused| spec::invalid_at(origin, text, refused))?;
        Ok(spec)
    }

    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<BoardSpec, SpecError> {
        let text = spec::read_text(path)?;
        BoardSpec::from_yaml(&path.display().to_string(), &text)
    }

    /// The same board running another firmware tag (`--firmware`).
    pub fn with_firmware(&self, version: &str) -> Result<BoardSpec, crate::firmware::UnknownVersion> {
        let firmware = Firmware::parse(version)?;
        if let Some(c) = self
            .firmware
            .tags
            .as_deref()
            .and_then(|t| crate::firmware::Constraint::parse(t).ok())
            && !c.matches(&firmware)
        {
            return Err(crate::firmware::UnknownVersion {
                given: version.to_string(),
                why: format!(
                    "is not a tag of board `{}` as its file describes it ({})",
                    self.name,
                    c.text()
                ),
            });
        }
        let mut spec = self.clone();
        spec.firmware.version = firmware.tag.to_string();
        // Constraints were checked when the file was loaded.
        let _ = spec.resolve_by_firmware();
        Ok(spec)
    }

    /// The firmware the board runs, with its behaviour switches.
    pub fn firmware(&self) -> Firmware {
        self.firmware.firmware()
    }

    /// The font in the device hello: the board's, else the display's usual built-in font
    /// (14 px 1 bpp on OLEDs, 16 px 4 bpp on LCDs), none without a display.
    pub fn text_font(&self) -> Option<TextFontSpec> {
        if let Some(f) = &self.text_font {
            return Some(f.clone());
        }
        let (size, bpp) = match self.display.kind {
            DisplayKind::Oled => (14, 1),
            DisplayKind::Lcd => (16, 4),
            DisplayKind::None | DisplayKind::Emote => return None,
        };
        Some(TextFontSpec {
            bundle: format!("font_puhui_basic_{size}_{bpp}"),
            charset: "basic".into(),
            size,
            bpp,
        })
    }

    /// Whether the screen draws with the default assets: the build flashes them (`FLASH_DEFAULT_
    /// ASSETS`, the Kconfig default except for emote builds) into an assets partition, which
    /// its partition table has and which holds a valid image; else only the built-in fonts.
    pub fn has_default_assets(&self) -> bool {
        self.display.kind != DisplayKind::Emote
            && self.target.assets_partition_valid
            && self.target.partitions.rows().iter().any(|r| r.0 == "assets")
    }

    /// The button named `name`.
    pub fn button(&self, name: &str) -> Option<&ButtonSpec> {
        self.buttons.iter().find(|b| b.name == name)
    }

    /// The lamp GPIO, if the board constructs a `LampController`.
    pub fn lamp_gpios(&self) -> impl Iterator<Item = u32> + '_ {
        self.board_tools.iter().filter_map(|t| match t {
            BoardTool::Lamp { gpio } => Some(*gpio),
            BoardTool::Tool(_) => None,
        })
    }
}

impl fmt::Display for DisplayKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DisplayKind::Oled => "oled",
            DisplayKind::Lcd => "lcd",
            DisplayKind::None => "none",
            DisplayKind::Emote => "emote",
        })
    }
}
