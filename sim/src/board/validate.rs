//! What serde cannot check in a board file: impossible values and inconsistent facts
//! (docs/boards.md, "Board file schema"). Every physical quantity is finite and in a stated
//! range, so nothing downstream (the acoustic chain's clamps, the screen, the clocks) ever sees
//! NaN, an infinity or a negative supply (docs/guarantees.md, "Input limits").

use super::{Behavior, BoardSpec, BoardTool, Builtin, DisplayKind, MOTIONS};
use crate::firmware::Firmware;
use crate::mcp::property::PropertyType;

/// A refusal: the offending field's dotted path and why.
type Checked = Result<(), (String, String)>;

fn bad(field: &str, message: String) -> Checked {
    Err((field.to_string(), message))
}

/// The largest heap a board may declare (`target.free_heap`): 64 MiB, twice the largest PSRAM
/// of any ESP32 part (32 MB on the ESP32-P4/S3). It also bounds what `stdio` reads per line.
pub const MAX_FREE_HEAP: usize = 64 * 1024 * 1024;

/// Checks what serde cannot: impossible values, inconsistent facts. Returns the offending
/// field path and why.
pub(super) fn board(spec: &BoardSpec) -> Checked {
    identity(spec)?;
    firmware(spec)?;
    target(spec)?;
    display(spec)?;
    peripherals(spec)?;
    audio(spec)?;
    tools(spec)?;
    buttons(spec)?;
    text_font(spec)?;
    battery(spec)
}

/// `name` and `type`.
fn identity(spec: &BoardSpec) -> Checked {
    if spec.name.is_empty()
        || !spec
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return bad(
            "name",
            format!("`{}` is not a BOARD_NAME: CMake allows only [a-z0-9.-]+", spec.name),
        );
    }
    if spec.board_type.is_empty() {
        return bad("type", "BOARD_TYPE must not be empty".into());
    }
    Ok(())
}

/// The firmware tag and its constraints.
fn firmware(spec: &BoardSpec) -> Checked {
    match Firmware::parse(&spec.firmware.version) {
        Err(e) => return bad("firmware.version", e.to_string()),
        Ok(f) if spec.firmware.range_error_aborts && f.user_only_tools => {
            return bad(
                "firmware.range_error_aborts",
                format!("the L1–L2 flag applies over a 1.x line, not {}", f.label()),
            );
        }
        Ok(f) => {
            if let Some(tags) = &spec.firmware.tags {
                match crate::firmware::Constraint::parse(tags) {
                    Err(e) => return bad("firmware.tags", e.to_string()),
                    Ok(c) if !c.matches(&f) => {
                        return bad(
                            "firmware.version",
                            format!("{} is outside this board's tags ({})", f.tag, c.text()),
                        );
                    }
                    Ok(_) => {}
                }
            }
        }
    }
    Ok(())
}

/// The tick rate and the heap.
fn target(spec: &BoardSpec) -> Checked {
    if spec.target.tick_hz == 0 || spec.target.tick_hz > 1000 {
        return bad(
            "target.tick_hz",
            format!("{} Hz: FreeRTOS allows 1..=1000", spec.target.tick_hz),
        );
    }
    if spec.target.free_heap > MAX_FREE_HEAP {
        return bad(
            "target.free_heap",
            format!(
                "{} bytes: no ESP32 has that much heap (the twin takes at most {MAX_FREE_HEAP})",
                spec.target.free_heap
            ),
        );
    }
    Ok(())
}

/// The panel and its themes.
fn display(spec: &BoardSpec) -> Checked {
    let d = &spec.display;
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
    Ok(())
}

/// The backlight and the camera.
fn peripherals(spec: &BoardSpec) -> Checked {
    if let Some(b) = &spec.backlight {
        if b.default_brightness > 100 {
            return bad(
                "backlight.default_brightness",
                format!("{} > 100", b.default_brightness),
            );
        }
        if let Some(g) = b.gpio {
            check_gpio(g).map_err(|m| ("backlight.gpio".to_string(), m.to_string()))?;
        }
        if b.boot_brightness > 100 {
            return bad("backlight.boot_brightness", format!("{} > 100", b.boot_brightness));
        }
        if b.frequency_hz == 0 {
            return bad("backlight.frequency_hz", "must be > 0".into());
        }
    }
    if let Some(c) = &spec.camera
        && (c.width == 0 || c.height == 0)
    {
        return bad("camera.width", "frame size must be > 0".into());
    }
    Ok(())
}

/// Rates, volume, the PA pin and the analog chain.
fn audio(spec: &BoardSpec) -> Checked {
    let a = &spec.audio;
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
    if let Some(pa) = &a.pa_gpio {
        check_gpio(pa.gpio).map_err(|m| ("audio.pa_gpio.gpio".to_string(), m.to_string()))?;
    }
    analog_chain(a)
}

/// Every physical quantity of the amplifier, the speaker and the DAC: finite and within the
/// range stated here (wide around the data sheets of docs/reference/acoustics.md §2–§3).
fn analog_chain(a: &super::audio::AudioSpec) -> Checked {
    let (amp, spk, dac) = (&a.amplifier, &a.speaker, &a.dac);
    let quantities: [(&str, f64, f64, f64, &str); 10] = [
        ("audio.amplifier.gain_db", amp.gain_db, -40.0, 60.0, "dB"),
        ("audio.amplifier.supply_v", amp.supply_v, 1.0, 24.0, "V"),
        ("audio.amplifier.p_1pct_w", amp.p_1pct_w, 0.01, 100.0, "W"),
        ("audio.amplifier.startup_ms", amp.startup_ms, 0.0, 10_000.0, "ms"),
        (
            "audio.speaker.sensitivity_db",
            spk.sensitivity_db,
            40.0,
            120.0,
            "dB SPL/1 W/1 m",
        ),
        ("audio.speaker.impedance_ohm", spk.impedance_ohm, 1.0, 100.0, "ohm"),
        ("audio.speaker.f0_hz", spk.f0_hz, 1.0, 20_000.0, "Hz"),
        ("audio.dac.avdd_v", dac.avdd_v, 0.5, 10.0, "V"),
        ("audio.dac.pa_voltage", dac.pa_voltage, 0.5, 30.0, "V"),
        ("audio.dac.codec_dac_voltage", dac.codec_dac_voltage, 0.5, 10.0, "V"),
    ];
    for (field, value, lo, hi, unit) in quantities {
        crate::spec::within(value, lo, hi, unit).map_err(|m| (field.to_string(), m))?;
    }
    Ok(())
}

/// The board's own tools.
fn tools(spec: &BoardSpec) -> Checked {
    let mut names: Vec<&str> = Vec::new();
    for (i, tool) in spec.board_tools.iter().enumerate() {
        match tool {
            BoardTool::Lamp { gpio } => {
                check_gpio(*gpio).map_err(|m| (format!("board_tools[{i}].lamp.gpio"), m.to_string()))?;
            }
            BoardTool::Tool(t) => {
                let at = |f: &str| format!("board_tools[{i}].tool.{f}");
                if t.name.is_empty() || t.name.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
                    return Err((
                        at("name"),
                        format!(
                            "`{}` is not a usable tool name (no quotes, backslashes or control characters)",
                            crate::spec::elide(&t.name, 200)
                        ),
                    ));
                }
                if names.contains(&t.name.as_str()) {
                    return Err((
                        at("name"),
                        format!(
                            "`{}` is declared twice; the firmware would log \"already added\" and drop the second",
                            crate::spec::elide(&t.name, 200)
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
                        check_gpio(*gpio).map_err(|m| (at("behavior.gpio.gpio"), m.to_string()))?;
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
                        check_gpio(*gpio).map_err(|m| (at("behavior.gpio_state.gpio"), m.to_string()))?
                    }
                    Behavior::NvsSet { from, .. } => {
                        if prop_type(from).is_none() {
                            return Err((
                                at("behavior.nvs_set.from"),
                                format!("`{from}` is not a property of this tool"),
                            ));
                        }
                    }
                    Behavior::Returns { .. } | Behavior::Unmodelled { .. } => {}
                    Behavior::Builtin { name, motion } => {
                        if (*name == Builtin::OttoMotion) != motion.is_some() {
                            return Err((
                                at("behavior.builtin"),
                                "`motion` goes with `otto.motion` and only with it".into(),
                            ));
                        }
                        if let Some(m) = motion
                            && !MOTIONS.contains(&m.as_str())
                        {
                            return Err((
                                at("behavior.builtin.motion"),
                                format!("unknown motion `{m}`; known: {}", MOTIONS.join(", ")),
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The buttons.
fn buttons(spec: &BoardSpec) -> Checked {
    for (i, b) in spec.buttons.iter().enumerate() {
        check_gpio(b.gpio).map_err(|m| (format!("buttons[{i}].gpio"), m.to_string()))?;
        if b.wired().is_empty() {
            return bad(
                &format!("buttons[{i}]"),
                "a button with no callback does nothing: give it press_down, press_up, click, double_click, multiple_click or long_press".into(),
            );
        }
        if let Some(m) = b.multiple_click
            && m.clicks == 0
        {
            return bad(
                &format!("buttons[{i}].multiple_click.clicks"),
                "0 clicks is refused by iot_button_register_cb".into(),
            );
        }
        if spec.buttons[..i].iter().any(|o| o.name == b.name) {
            return bad(&format!("buttons[{i}].name"), format!("`{}` names two buttons", b.name));
        }
    }
    Ok(())
}

/// The text font: a size and depth the firmware's font component ships (a build draws with
/// `font_noto_sans_basic_<size>_<bpp>`, main/CMakeLists.txt refuses any other name) when the
/// board has a screen; the icon font and emoji collection among those the twin ships.
fn text_font(spec: &BoardSpec) -> Checked {
    use crate::lvgl::{emoji, font};
    let drawn = matches!(
        spec.display.kind,
        DisplayKind::Lcd | DisplayKind::Oled | DisplayKind::Emote
    );
    if let Some(f) = &spec.text_font {
        if !(1..=128).contains(&f.size) {
            return bad("text_font.size", format!("{} px is outside 1..=128", f.size));
        }
        if ![1, 2, 4, 8].contains(&f.bpp) {
            return bad("text_font.bpp", format!("{} is not 1, 2, 4 or 8 bits per pixel", f.bpp));
        }
        let name = format!("font_noto_sans_basic_{}_{}", f.size, f.bpp);
        if drawn && !font::is_shipped(&name) {
            return bad(
                "text_font.size",
                format!(
                    "{name} is not a font of 78/xiaozhi-fonts 2.0: a screen draws at 14 px 1 bpp, 16, 20 or 30 px 4 bpp"
                ),
            );
        }
    }
    if let Some(icon) = &spec.display.icon_font
        && !(font::is_shipped(icon) && icon.starts_with("font_material_symbols_"))
    {
        let known: Vec<&str> = font::names()
            .filter(|n| n.starts_with("font_material_symbols_"))
            .collect();
        return bad("display.icon_font", format!("`{icon}` is none of {}", known.join(", ")));
    }
    if let Some(c) = &spec.display.emoji_collection
        && !emoji::collections().any(|k| k == c)
    {
        let known: Vec<&str> = emoji::collections().collect();
        return bad(
            "display.emoji_collection",
            format!("`{c}` is none of {}", known.join(", ")),
        );
    }
    Ok(())
}

/// The battery.
fn battery(spec: &BoardSpec) -> Checked {
    if let Some(bat) = &spec.battery
        && !(0..=100).contains(&bat.level)
    {
        return bad("battery.level", format!("{} is outside 0..=100", bat.level));
    }
    Ok(())
}

/// A pin number beyond the chip's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "GPIO {0} does not exist on an ESP32 (0..=63: no part has more than 64 pins; the ESP32-S31 uses 57); an NC pin registers nothing, so leave the tool out"
)]
struct NoSuchGpio(u32);

fn check_gpio(gpio: u32) -> Result<(), NoSuchGpio> {
    if gpio > 63 { Err(NoSuchGpio(gpio)) } else { Ok(()) }
}
