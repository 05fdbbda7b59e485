//! `BoardSpec`: what the firmware decides per board at compile time and in the board
//! constructor, loaded from `boards/<id>.yaml` and validated (DESIGN.md §6).
//!
//! Mirrors `main/boards/<dir>/config.h`, `config.json` (BOARD_NAME/BOARD_TYPE) and the board
//! class constructor (display, backlight, camera, lamp, board tools). The tool catalogue is *not*
//! stored here: the device derives it from these facts by the firmware's registration rules (and
//! memoizes it in a `device::Board`).
//! Knows nothing about runtime state.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::mcp::property::{Property, PropertyError, PropertyType, PropertyValue};
use crate::spec::{self, SpecError};
use crate::time::TickRate;

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
    #[serde(default)]
    pub firmware: FirmwareSpec,
    #[serde(default)]
    pub target: TargetSpec,
    pub display: DisplaySpec,
    #[serde(default)]
    pub backlight: Option<BacklightSpec>,
    #[serde(default)]
    pub camera: Option<CameraSpec>,
    #[serde(default)]
    pub audio: AudioSpec,
    /// Tools the board constructor registers, in order (before `AddCommonTools`).
    #[serde(default)]
    pub board_tools: Vec<BoardTool>,
    #[serde(default)]
    pub buttons: Vec<ButtonSpec>,
    #[serde(default)]
    pub battery: Option<BatterySpec>,
    /// The built-in font the device hello advertises (`text_font`); default from the display.
    #[serde(default)]
    pub text_font: Option<TextFontSpec>,
}

/// The board's built-in font as the hello advertises it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextFontSpec {
    pub bundle: String,
    #[serde(default = "basic")]
    pub charset: String,
    pub size: i32,
    pub bpp: i32,
}

fn basic() -> String {
    "basic".into()
}

/// Application descriptor and build facts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FirmwareSpec {
    /// `PROJECT_VER` (`serverInfo.version`).
    pub version: String,
    pub project_name: String,
    /// `__DATE__ "T" __TIME__ "Z"` as the firmware concatenates it.
    pub compile_time: String,
    pub idf_version: String,
    /// `Lang::CODE`.
    pub language: String,
}

impl Default for FirmwareSpec {
    fn default() -> Self {
        FirmwareSpec {
            version: "2.4.2".into(),
            project_name: "xiaozhi".into(),
            compile_time: "Aug  8 2026T08:33:45Z".into(),
            idf_version: "v6.0.1".into(),
            language: "zh-CN".into(),
        }
    }
}

/// The SoC and its build configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TargetSpec {
    pub chip: Chip,
    /// `CONFIG_FREERTOS_HZ` (ESP-IDF default 100).
    pub tick_hz: u32,
    pub flash_size: u32,
    /// `CONFIG_LV_USE_SNAPSHOT` (on for every ESP32-S3 build via `sdkconfig.defaults.esp32s3`).
    pub lv_use_snapshot: bool,
    /// Free heap after boot; parsing a message that needs more fails like a cJSON malloc failure.
    pub free_heap: usize,
    /// `esp_get_minimum_free_heap_size()` as reported in system info.
    pub minimum_free_heap: u32,
    /// `esp_chip_info().revision`.
    pub revision: u32,
    /// The partition table (`partitions/v2/*.csv`).
    pub partitions: PartitionTable,
}

/// The upstream partition tables a board can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum PartitionTable {
    #[serde(rename = "v2/16m")]
    V2_16m,
    #[serde(rename = "v2/16m_c3")]
    V2_16mC3,
    #[serde(rename = "v2/8m")]
    V2_8m,
}

impl PartitionTable {
    /// `(label, type, subtype, address, size)` rows in table order.
    pub fn rows(self) -> [(&'static str, u32, u32, u32, u32); 6] {
        let (app, assets_at, assets) = match self {
            PartitionTable::V2_16m => (0x3f0000, 0x800000, 8 * 1024 * 1024),
            PartitionTable::V2_16mC3 => (0x3f0000, 0x800000, 4_096_000),
            PartitionTable::V2_8m => (0x2f0000, 0x600000, 2 * 1024 * 1024),
        };
        [
            ("nvs", 1, 2, 0x9000, 0x4000),
            ("otadata", 1, 0, 0xd000, 0x2000),
            ("phy_init", 1, 1, 0xf000, 0x1000),
            ("ota_0", 0, 16, 0x20000, app),
            ("ota_1", 0, 17, 0x20000 + app, app),
            ("assets", 1, 130, assets_at, assets),
        ]
    }
}

impl Default for TargetSpec {
    fn default() -> Self {
        TargetSpec {
            chip: Chip::Esp32s3,
            tick_hz: 100,
            flash_size: 16 * 1024 * 1024,
            lv_use_snapshot: true,
            free_heap: 8 * 1024 * 1024,
            minimum_free_heap: 8_211_452,
            revision: 2,
            partitions: PartitionTable::V2_16m,
        }
    }
}

impl TargetSpec {
    pub fn tick_rate(&self) -> TickRate {
        TickRate(self.tick_hz)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Chip {
    Esp32,
    Esp32s3,
    Esp32c3,
    Esp32c6,
}

impl Chip {
    /// `SystemInfo::GetChipModelName()`.
    pub fn model_name(self) -> &'static str {
        match self {
            Chip::Esp32 => "esp32",
            Chip::Esp32s3 => "esp32s3",
            Chip::Esp32c3 => "esp32c3",
            Chip::Esp32c6 => "esp32c6",
        }
    }
    /// `esp_chip_model_t`.
    pub fn model_id(self) -> u32 {
        match self {
            Chip::Esp32 => 1,
            Chip::Esp32s3 => 9,
            Chip::Esp32c3 => 5,
            Chip::Esp32c6 => 13,
        }
    }
    pub fn cores(self) -> u32 {
        match self {
            Chip::Esp32 | Chip::Esp32s3 => 2,
            Chip::Esp32c3 | Chip::Esp32c6 => 1,
        }
    }
    /// `esp_chip_info().features` (Wi-Fi BGN + BLE, plus classic BT on the original ESP32).
    pub fn features(self) -> u32 {
        match self {
            Chip::Esp32 => 2 | 16 | 32,
            Chip::Esp32s3 | Chip::Esp32c3 | Chip::Esp32c6 => 2 | 16,
        }
    }
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
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplaySpec {
    pub kind: DisplayKind,
    #[serde(default)]
    pub driver: String,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    /// Themes the display registers in the global theme registry.
    #[serde(default)]
    pub themes: Vec<String>,
    /// The theme set at construction (or loaded from NVS `display/theme` when `persist_theme`).
    #[serde(default)]
    pub default_theme: Option<String>,
    /// LCD displays persist `display/theme` on every successful `SetTheme`; OLED never.
    #[serde(default)]
    pub persist_theme: bool,
    /// A theme the board constructor sets (and so persists) at every boot after the UI is set
    /// up, whatever NVS held (otto-robot forces `dark`).
    #[serde(default)]
    pub boot_theme: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BacklightSpec {
    pub gpio: u32,
    #[serde(default = "default_backlight_hz")]
    pub frequency_hz: u32,
    #[serde(default)]
    pub invert: bool,
    /// NVS `display/brightness` default when nothing is stored.
    #[serde(default = "default_brightness")]
    pub default_brightness: u8,
    /// The constructor calls `RestoreBrightness()` (most boards); when false it calls
    /// `SetBrightness(boot_brightness)` and NVS is never read.
    #[serde(default = "yes")]
    pub restore: bool,
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraSpec {
    pub sensor: String,
    pub width: u32,
    pub height: u32,
    /// `false` models a camera whose init failed: the tool is still registered and every call
    /// fails with `Failed to capture photo`.
    #[serde(default = "yes")]
    pub init_ok: bool,
}

fn yes() -> bool {
    true
}

/// The audio chain of the board (codec here; amplifier/speaker facts live in `acoustics`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioSpec {
    pub codec: CodecKind,
    pub input_sample_rate: u32,
    pub output_sample_rate: u32,
    /// Default output volume of `AudioCodec` (70).
    pub default_volume: i32,
    /// The amplifier after the codec.
    pub amplifier: crate::audio::chain::AmplifierSpec,
    pub speaker: crate::audio::chain::SpeakerSpec,
    /// Hardware codecs: DAC full scale and the voltages handed to `esp_codec_dev`.
    pub dac: crate::audio::chain::DacSpec,
    /// A PA enable GPIO the codec driver drives from output enable (`Es8311AudioCodec`).
    pub pa_gpio: Option<PaPinSpec>,
    /// The PA is switched on once at boot and never again (e.g. through an I/O expander).
    pub pa_always_on: bool,
    /// The microphone runs while idle (wake-word detection), keeping duplex codecs open.
    pub wake_word: bool,
}

/// A PA enable pin.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaPinSpec {
    pub gpio: u32,
    #[serde(default)]
    pub inverted: bool,
}

impl Default for AudioSpec {
    fn default() -> Self {
        AudioSpec {
            codec: CodecKind::NoAudioCodecSimplex,
            input_sample_rate: 16_000,
            output_sample_rate: 24_000,
            default_volume: 70,
            amplifier: Default::default(),
            speaker: Default::default(),
            dac: Default::default(),
            pa_gpio: None,
            pa_always_on: false,
            wake_word: true,
        }
    }
}

pub use crate::audio::codec::CodecKind;

/// A tool group registered by the board constructor.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BoardTool {
    /// `LampController` on a GPIO: `self.lamp.get_state`, `turn_on`, `turn_off`.
    Lamp { gpio: u32 },
    /// A tool described entirely by data.
    Tool(ToolSpec),
}

/// A board-file tool: texts and schema are interface data, `behavior` says what the callback does.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub properties: Vec<PropertySpec>,
    /// Registered with `AddUserOnlyTool` (hidden from the default list, still callable).
    #[serde(default)]
    pub user_only: bool,
    pub behavior: Behavior,
}

/// What a data-described tool does when called (runs on the main task).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Behavior {
    /// Drive a GPIO to a fixed level (0/1) or to a boolean/integer argument, remember it in a
    /// software flag, return `true`.
    Gpio {
        gpio: u32,
        #[serde(default)]
        level: Option<u8>,
        #[serde(default)]
        from: Option<String>,
    },
    /// Return the software flag of a GPIO as `{"<key>": true|false}` (hand-built like the lamp,
    /// with a space after the colon).
    GpioState {
        gpio: u32,
        #[serde(default = "default_state_key")]
        key: String,
    },
    /// Store an argument in NVS (`namespace`/`key`), return `true`.
    NvsSet {
        namespace: String,
        key: String,
        from: String,
    },
    /// Return a fixed value: `true`/`false`, an integer, or text.
    Returns { value: ReturnSpec },
    /// Built-in behaviour implemented in the twin (e.g. `otto.set_trim`).
    Builtin { name: Builtin },
}

/// A built-in tool behaviour a board file can name (`behavior: {builtin: {name: …}}`) where a
/// callback does more than data can say (otto-robot's servo controller). The tool's texts and
/// schema still come from the board file; `device::builtin` implements each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    OttoAction,
    OttoServoSequences,
    OttoStop,
    OttoSetTrim,
    OttoGetTrims,
    OttoGetStatus,
    BatteryGetLevel,
    OttoGetIp,
}

impl Builtin {
    /// Every built-in behaviour, in the order error messages list them.
    pub const ALL: [Builtin; 8] = [
        Builtin::OttoAction,
        Builtin::OttoServoSequences,
        Builtin::OttoStop,
        Builtin::OttoSetTrim,
        Builtin::OttoGetTrims,
        Builtin::OttoGetStatus,
        Builtin::BatteryGetLevel,
        Builtin::OttoGetIp,
    ];

    /// The name a board file writes.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::OttoAction => "otto.action",
            Builtin::OttoServoSequences => "otto.servo_sequences",
            Builtin::OttoStop => "otto.stop",
            Builtin::OttoSetTrim => "otto.set_trim",
            Builtin::OttoGetTrims => "otto.get_trims",
            Builtin::OttoGetStatus => "otto.get_status",
            Builtin::BatteryGetLevel => "battery.get_level",
            Builtin::OttoGetIp => "otto.get_ip",
        }
    }

    /// Behaviours that need the otto controller (its action queue and trims) on the board.
    pub fn needs_otto(self) -> bool {
        self.name().starts_with("otto.")
    }
}

impl<'de> Deserialize<'de> for Builtin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Builtin, D::Error> {
        let name = String::deserialize(d)?;
        Builtin::ALL.into_iter().find(|b| b.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
            serde::de::Error::custom(format!(
                "unknown built-in behaviour `{name}`; known: {}",
                known.join(", ")
            ))
        })
    }
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

fn default_state_key() -> String {
    "power".to_string()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ReturnSpec {
    Bool(bool),
    Int(i32),
    Text(String),
}

/// A parameter in a board file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PropertySpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: PropertyType,
    #[serde(default)]
    pub default: Option<DefaultSpec>,
    #[serde(default)]
    pub min: Option<i32>,
    #[serde(default)]
    pub max: Option<i32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum DefaultSpec {
    Bool(bool),
    Int(i64),
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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ButtonSpec {
    pub name: String,
    pub gpio: u32,
    /// What a click does.
    pub click: ButtonAction,
    #[serde(default)]
    pub long_press: Option<ButtonAction>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ButtonAction {
    ToggleChat,
    StartListening,
    VolumeUp,
    VolumeDown,
    VolumeMax,
    VolumeMin,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatterySpec {
    pub level: i32,
    #[serde(default)]
    pub charging: bool,
}

impl BoardSpec {
    /// Parses and validates a board file's text; `origin` names the file in errors.
    pub fn from_yaml(origin: &str, text: &str) -> Result<BoardSpec, SpecError> {
        let spec: BoardSpec = spec::from_yaml(origin, text)?;
        spec.validate().map_err(|(field, message)| {
            let (line, column) = spec::find_field(text, &field);
            SpecError::Invalid {
                origin: origin.to_string(),
                line,
                column,
                field,
                message,
            }
        })?;
        Ok(spec)
    }

    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<BoardSpec, SpecError> {
        let text = spec::read_text(path)?;
        BoardSpec::from_yaml(&path.display().to_string(), &text)
    }

    /// Checks what serde cannot: impossible values, inconsistent facts. Returns the offending
    /// field path and why.
    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |field: &str, message: String| Err((field.to_string(), message));
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        {
            return bad(
                "name",
                format!("`{}` is not a BOARD_NAME: CMake allows only [a-z0-9.-]+", self.name),
            );
        }
        if self.board_type.is_empty() {
            return bad("type", "BOARD_TYPE must not be empty".into());
        }
        if self.target.tick_hz == 0 || self.target.tick_hz > 1000 {
            return bad(
                "target.tick_hz",
                format!("{} Hz: FreeRTOS allows 1..=1000", self.target.tick_hz),
            );
        }
        let d = &self.display;
        if d.kind != DisplayKind::None {
            if d.width == 0 || d.height == 0 || d.width > 2048 || d.height > 2048 {
                return bad("display.width", format!("{}x{} is not a panel size", d.width, d.height));
            }
            if let Some(t) = &d.default_theme
                && !d.themes.contains(t)
            {
                return bad(
                    "display.default_theme",
                    format!("`{t}` is not one of the registered themes {:?}", d.themes),
                );
            }
        } else if !d.themes.is_empty() {
            return bad("display.themes", "a board without a display registers no themes".into());
        }
        if let Some(b) = &self.backlight {
            if b.default_brightness > 100 {
                return bad(
                    "backlight.default_brightness",
                    format!("{} > 100", b.default_brightness),
                );
            }
            if b.frequency_hz == 0 {
                return bad("backlight.frequency_hz", "must be > 0".into());
            }
        }
        if let Some(c) = &self.camera
            && (c.width == 0 || c.height == 0)
        {
            return bad("camera.width", "frame size must be > 0".into());
        }
        let a = &self.audio;
        for (field, rate) in [
            ("audio.input_sample_rate", a.input_sample_rate),
            ("audio.output_sample_rate", a.output_sample_rate),
        ] {
            if !(8_000..=96_000).contains(&rate) {
                return bad(
                    field,
                    format!("{rate} Hz is not an I2S sample rate the firmware uses (8000..=96000)"),
                );
            }
        }
        if !(0..=100).contains(&a.default_volume) {
            return bad(
                "audio.default_volume",
                format!("{} is outside 0..=100", a.default_volume),
            );
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, tool) in self.board_tools.iter().enumerate() {
            match tool {
                BoardTool::Lamp { gpio } => {
                    check_gpio(*gpio).map_err(|m| (format!("board_tools[{i}].lamp.gpio"), m))?;
                }
                BoardTool::Tool(t) => {
                    let at = |f: &str| format!("board_tools[{i}].tool.{f}");
                    if t.name.is_empty() || t.name.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
                        return Err((
                            at("name"),
                            format!(
                                "`{}` is not a usable tool name (no quotes, backslashes or control characters)",
                                t.name
                            ),
                        ));
                    }
                    if names.contains(&t.name.as_str()) {
                        return Err((
                            at("name"),
                            format!(
                                "`{}` is declared twice; the firmware would log \"already added\" and drop the second",
                                t.name
                            ),
                        ));
                    }
                    names.push(&t.name);
                    for (j, p) in t.properties.iter().enumerate() {
                        p.to_property()
                            .map_err(|e| (format!("board_tools[{i}].tool.properties[{j}]"), e.to_string()))?;
                    }
                    let prop_type = |n: &str| t.properties.iter().find(|p| p.name == n).map(|p| p.ty);
                    match &t.behavior {
                        Behavior::Gpio { gpio, level, from } => {
                            check_gpio(*gpio).map_err(|m| (at("behavior.gpio.gpio"), m))?;
                            match (level, from) {
                                (Some(l), None) if *l <= 1 => {}
                                (Some(l), None) => {
                                    return Err((at("behavior.gpio.level"), format!("{l} is not 0 or 1")));
                                }
                                (None, Some(f)) => match prop_type(f) {
                                    Some(PropertyType::Boolean | PropertyType::Integer) => {}
                                    _ => {
                                        return Err((
                                            at("behavior.gpio.from"),
                                            format!("`{f}` is not a boolean or integer property of this tool"),
                                        ));
                                    }
                                },
                                _ => return Err((at("behavior.gpio"), "give exactly one of `level` or `from`".into())),
                            }
                        }
                        Behavior::GpioState { gpio, .. } => {
                            check_gpio(*gpio).map_err(|m| (at("behavior.gpio_state.gpio"), m))?
                        }
                        Behavior::NvsSet { from, .. } => {
                            if prop_type(from).is_none() {
                                return Err((
                                    at("behavior.nvs_set.from"),
                                    format!("`{from}` is not a property of this tool"),
                                ));
                            }
                        }
                        Behavior::Returns { .. } => {}
                        Behavior::Builtin { .. } => {}
                    }
                }
            }
        }
        for (i, b) in self.buttons.iter().enumerate() {
            check_gpio(b.gpio).map_err(|m| (format!("buttons[{i}].gpio"), m))?;
        }
        if let Some(bat) = &self.battery
            && !(0..=100).contains(&bat.level)
        {
            return bad("battery.level", format!("{} is outside 0..=100", bat.level));
        }
        Ok(())
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
            DisplayKind::None => return None,
        };
        Some(TextFontSpec {
            bundle: format!("font_puhui_basic_{size}_{bpp}"),
            charset: "basic".into(),
            size,
            bpp,
        })
    }

    /// The lamp GPIO, if the board constructs a `LampController`.
    pub fn lamp_gpios(&self) -> impl Iterator<Item = u32> + '_ {
        self.board_tools.iter().filter_map(|t| match t {
            BoardTool::Lamp { gpio } => Some(*gpio),
            BoardTool::Tool(_) => None,
        })
    }
}

fn check_gpio(gpio: u32) -> Result<(), String> {
    if gpio > 56 {
        Err(format!(
            "GPIO {gpio} does not exist on an ESP32 (0..=56); an NC pin registers nothing, so leave the tool out"
        ))
    } else {
        Ok(())
    }
}

impl fmt::Display for DisplayKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DisplayKind::Oled => "oled",
            DisplayKind::Lcd => "lcd",
            DisplayKind::None => "none",
        })
    }
}
