//! The firmware's screen layouts drawn with its own glyph data (issue 41): `LcdDisplay::SetupUI`
//! in the default message style, `OledDisplay::SetupUI_128x64` and `SetupUI_128x32`, as LVGL
//! 9.5 places their objects (`lv_obj_align`'s `parent/2 − child/2`, flex rows, a label as tall as
//! its font's line), with the theme's `spacing(n) = 2n` (`lvgl_theme.h`). docs/screen.md lists
//! the geometry with its upstream lines and what the twin leaves out.

use crate::board::{BoardSpec, DisplayKind};
use crate::hw::screen::{NetworkIcon, PreviewImage, ScreenState};
use crate::lvgl::canvas::{Align, Area, Canvas, rgb565};
use crate::lvgl::emoji;
use crate::lvgl::font::{self, Font};
use crate::time::SimTime;

/// The fonts and emoji a board's screen draws with.
#[derive(Debug)]
pub struct ScreenFonts {
    /// The labels' font: the default assets' `common` font when the board has them, else the
    /// built-in `basic` one (`Assets::Apply` → `SetTextFont`).
    pub text: &'static Font,
    /// The built-in text font `SetupUI` sizes the bottom bar with (before the assets apply).
    pub builtin_text: &'static Font,
    /// The status bar's icon font (`BUILTIN_ICON_FONT`).
    pub icon: &'static Font,
    /// The large icon font (Material Symbols at 30 px).
    pub large_icon: &'static Font,
    /// The monochrome emoji font (Noto Emoji at 30 px).
    pub emoji: &'static Font,
    /// The colour emoji collection of the default assets, if any.
    pub emoji_collection: Option<&'static str>,
    /// The names of the fonts above, in that order (for the record).
    pub names: [String; 5],
}

impl ScreenFonts {
    /// The fonts of `spec`'s build; `None` when one is not shipped (board validation refuses
    /// such a board, so only an unvalidated spec gets here).
    pub fn of(spec: &BoardSpec) -> Option<ScreenFonts> {
        let (size, bpp) = spec.text_font().map_or((14, 1), |f| (f.size, f.bpp));
        let mono = spec.display.kind == DisplayKind::Oled;
        let assets = spec.has_default_assets();
        let builtin = format!("font_noto_sans_basic_{size}_{bpp}");
        // The emote stand-in's texts: its engine's own font is not modelled; the `common` font
        // shows them whole.
        let text = if assets || spec.display.kind == DisplayKind::Emote {
            format!("font_noto_sans_common_{size}_{bpp}")
        } else {
            builtin.clone()
        };
        let icon = spec
            .display
            .icon_font
            .clone()
            .unwrap_or_else(|| format!("font_material_symbols_{size}_{bpp}"));
        let (large, emoji_font) = if mono {
            ("font_material_symbols_30_1", "font_noto_emoji_30_1")
        } else {
            ("font_material_symbols_30_4", "font_noto_emoji_30_4")
        };
        let collection = spec.display.emoji_collection.as_deref().filter(|_| assets);
        Some(ScreenFonts {
            text: font::by_name(&text)?,
            builtin_text: font::by_name(&builtin)?,
            icon: font::by_name(&icon)?,
            large_icon: font::by_name(large)?,
            emoji: font::by_name(emoji_font)?,
            emoji_collection: collection.and_then(|c| emoji::collections().find(|n| *n == c)),
            names: [text, builtin, icon, large.into(), emoji_font.into()],
        })
    }
}

/// The letters of `texts` the board's text font has no glyph for, in order, each once: LVGL
/// draws them as nothing (no placeholder), so a person does not see them.
pub fn missing_letters<'a>(spec: &BoardSpec, texts: impl IntoIterator<Item = &'a str>) -> String {
    let Some(f) = ScreenFonts::of(spec) else {
        return String::new();
    };
    let mut missing = String::new();
    for c in texts.into_iter().flat_map(str::chars) {
        if !c.is_control() && !f.text.has(c) && !missing.contains(c) {
            missing.push(c);
        }
    }
    missing
}

/// A Material Symbols glyph by its name (`mappings/material_symbols.json` of the component).
fn symbol(name: &str) -> &'static str {
    match name {
        "wifi" => "\u{e63e}",
        "wifi_2_bar" => "\u{e4d9}",
        "wifi_1_bar" => "\u{e4ca}",
        "wifi_off" => "\u{e648}",
        "volume_off" => "\u{e04f}",
        "robot_2" => "\u{f5d0}",
        "battery_android_0" => "\u{f30d}",
        "battery_android_frame_1" => "\u{f257}",
        "battery_android_frame_2" => "\u{f256}",
        "battery_android_frame_3" => "\u{f255}",
        "battery_android_frame_4" => "\u{f254}",
        "battery_android_frame_5" => "\u{f253}",
        "battery_android_frame_6" => "\u{f252}",
        "battery_android_frame_full" => "\u{f24f}",
        "battery_android_frame_bolt" => "\u{f250}",
        _ => "",
    }
}

/// The network label's text (`WifiBoard::GetNetworkStateIcon`).
fn network_text(icon: NetworkIcon) -> &'static str {
    match icon {
        NetworkIcon::None => "",
        NetworkIcon::Full => symbol("wifi"),
        NetworkIcon::TwoBars => symbol("wifi_2_bar"),
        NetworkIcon::OneBar => symbol("wifi_1_bar"),
        NetworkIcon::Off => symbol("wifi_off"),
    }
}

/// The battery label's text (`UpdateStatusBar`'s `levels`, a bolt when charging).
fn battery_text(battery: Option<(u8, bool)>) -> &'static str {
    const LEVELS: [&str; 8] = [
        "battery_android_0",
        "battery_android_frame_1",
        "battery_android_frame_2",
        "battery_android_frame_3",
        "battery_android_frame_4",
        "battery_android_frame_5",
        "battery_android_frame_6",
        "battery_android_frame_full",
    ];
    match battery {
        None => "",
        Some((_, true)) => symbol("battery_android_frame_bolt"),
        Some((index, false)) => symbol(LEVELS[usize::from(index.min(7))]),
    }
}

/// The monochrome Noto Emoji letter of an emotion (`noto_emoji_get_utf8`, the component's
/// `mappings/emoji.json`).
fn noto_emoji(emotion: &str) -> Option<&'static str> {
    Some(match emotion {
        "neutral" => "\u{1f636}",
        "happy" => "\u{1f642}",
        "laughing" => "\u{1f606}",
        "funny" => "\u{1f602}",
        "sad" => "\u{1f614}",
        "angry" => "\u{1f620}",
        "crying" => "\u{1f62d}",
        "loving" => "\u{1f60d}",
        "embarrassed" => "\u{1f633}",
        "surprised" => "\u{1f62f}",
        "shocked" => "\u{1f631}",
        "thinking" => "\u{1f914}",
        "winking" => "\u{1f609}",
        "cool" => "\u{1f60e}",
        "relaxed" => "\u{1f60c}",
        "delicious" => "\u{1f924}",
        "kissy" => "\u{1f618}",
        "confident" => "\u{1f60f}",
        "sleepy" => "\u{1f634}",
        "silly" => "\u{1f61c}",
        "confused" => "\u{1f644}",
        _ => return None,
    })
}

/// What the emotion slot shows: an image of the collection, or a letter in a font.
enum Face<'a> {
    Image(&'static emoji::Image),
    Letter(&'a str, &'static Font),
}

/// `SetEmotion`: the collection's image if it has one, else the Noto Emoji letter, else a
/// Material Symbols icon of that name; before any emotion (and for a name none of them has) the
/// label keeps `SetupUI`'s robot.
fn face<'a>(f: &ScreenFonts, emotion: &str) -> Face<'a> {
    if let Some(image) = f.emoji_collection.and_then(|c| emoji::image(c, emotion)) {
        return Face::Image(image);
    }
    if let Some(letter) = noto_emoji(emotion) {
        return Face::Letter(letter, f.emoji);
    }
    let icon = symbol(emotion);
    Face::Letter(if icon.is_empty() { symbol("robot_2") } else { icon }, f.large_icon)
}

/// A label's width as `LV_SIZE_CONTENT` makes it: its text's width.
fn text_w(text: &str, font: &Font) -> i32 {
    crate::lvgl::canvas::line_width(text, font)
}

/// The theme's colours: `(background, text)` (`lcd_display.cc:33-59`; OLEDs white on black).
fn colours(mono: bool, theme: Option<&str>) -> (u16, u16) {
    if mono || theme == Some("dark") {
        (rgb565(0, 0, 0), rgb565(255, 255, 255))
    } else {
        (rgb565(255, 255, 255), rgb565(0, 0, 0))
    }
}

/// The texts a layout shows at `at`.
struct Texts {
    status: String,
    chat: String,
}

fn texts(s: &ScreenState, at: SimTime) -> Texts {
    Texts {
        status: s.notification_at(at).unwrap_or(&s.status).to_string(),
        chat: s.last_message().map(|m| m.1.clone()).unwrap_or_default(),
    }
}

/// Draws the board's layout of `s` at `at` on `c` (filled with the background first).
pub fn draw(c: &mut Canvas, spec: &BoardSpec, f: &ScreenFonts, s: &ScreenState, at: SimTime) {
    let mono = spec.display.kind == DisplayKind::Oled;
    let (bg, fg) = colours(mono || spec.display.kind == DisplayKind::Emote, s.theme.as_deref());
    let screen = c.screen();
    c.fill(screen, &screen, bg, 255);
    if s.power_save {
        return;
    }
    match spec.display.kind {
        DisplayKind::Emote => emote(c, f, s, at, fg),
        DisplayKind::Oled if c.height() <= 32 => oled_128x32(c, f, s, at, fg),
        DisplayKind::Oled => oled_128x64(c, f, s, at, fg),
        _ => lcd(c, f, s, at, (bg, fg)),
    }
}

/// `LcdDisplay::SetupUI`, the default message style (`lcd_display.cc:822-1016`).
fn lcd(c: &mut Canvas, f: &ScreenFonts, s: &ScreenState, at: SimTime, (bg, fg): (u16, u16)) {
    let (w, h) = (c.width(), c.height());
    let screen = c.screen();
    let t = texts(s, at);
    let preview = s.preview_at(at);
    // The emoji box (LV_SIZE_CONTENT, centred): the image, or the label; hidden under a preview.
    if preview.is_none() {
        face_in(c, f, &s.emotion, screen, None, fg);
    }
    if let Some(image) = preview {
        preview_image(c, image);
    }
    // The top bar: 4 px above and below its icons, 8 px in from the sides; the network icon at
    // the left, the mute and battery icons (4 px margin, the card style's 8 px gap) at the right.
    let icons = if f.text.line_height >= 40 { f.large_icon } else { f.icon };
    let lh = icons.line_height;
    let network = network_text(s.icons.network);
    c.label(
        network,
        icons,
        Area::at(8, 4, text_w(network, icons).max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    let mute = if s.muted { symbol("volume_off") } else { "" };
    let battery = battery_text(s.icons.battery);
    let (mw, bw) = (text_w(mute, icons), text_w(battery, icons));
    let battery_x = w - 8 - bw;
    let mute_x = battery_x - 4 - 8 - mw;
    c.label(
        mute,
        icons,
        Area::at(mute_x, 4, mw.max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    c.label(
        battery,
        icons,
        Area::at(battery_x, 4, bw.max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    // The status bar: the status or notification label, 75 % of the width, centred, 4 px down.
    let label_w = w * 3 / 4;
    let status = Area::at(w / 2 - label_w / 2, 4, label_w, f.text.line_height);
    c.label(&t.status, f.text, status, &screen, Align::Center, fg);
    // The bottom bar: the built-in font's line plus 16 px, opaque, hidden while the chat is empty.
    if !t.chat.is_empty() {
        let bar_h = f.builtin_text.line_height + 16;
        let bar = Area::at(0, h - bar_h, w, bar_h);
        c.fill(bar, &screen, bg, 255);
        let label_h = f.text.line_height;
        let label = Area::at(8, bar.y1 + bar_h / 2 - label_h / 2, w - 16, label_h);
        c.label(&t.chat, f.text, label, &bar, Align::Center, fg);
    }
}

/// The preview image (`lcd_display.cc:1018-1052`): an image object half the screen's size,
/// centred; the image scaled by `128 × width / image width` / 256, centred in it and clipped to
/// it. Nearest-neighbour sampling.
fn preview_image(c: &mut Canvas, image: &PreviewImage) {
    let Some(rgba) = image.rgba.as_deref() else { return };
    let (iw, ih) = (i64::from(image.width), i64::from(image.height));
    if iw == 0 || ih == 0 {
        return;
    }
    let (w, h) = (i64::from(c.width()), i64::from(c.height()));
    let (bw, bh) = (w / 2, h / 2);
    let (bx, by) = ((w - bw) / 2, (h - bh) / 2);
    let zoom = (128 * w / iw).max(1);
    let (sw, sh) = (iw * zoom / 256, ih * zoom / 256);
    let (ox, oy) = (bx + (bw - sw) / 2, by + (bh - sh) / 2);
    let (x0, y0) = (bx.max(ox), by.max(oy));
    let (x1, y1) = ((bx + bw).min(ox + sw), (by + bh).min(oy + sh));
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let mut scaled = Vec::with_capacity(((x1 - x0) * (y1 - y0) * 4) as usize);
    for y in y0..y1 {
        for x in x0..x1 {
            let (u, v) = (((x - ox) * 256 / zoom).min(iw - 1), ((y - oy) * 256 / zoom).min(ih - 1));
            let s = ((v * iw + u) * 4) as usize;
            scaled.extend_from_slice(rgba.get(s..s + 4).unwrap_or(&[0, 0, 0, 0]));
        }
    }
    let screen = c.screen();
    c.image(
        x0 as i32,
        y0 as i32,
        (x1 - x0) as i32,
        (y1 - y0) as i32,
        &scaled,
        &screen,
    );
}

/// `OledDisplay::SetupUI_128x64` (`oled_display.cc:171-304`): a 16 px top bar (the network
/// icon at the left, mute and battery at the right) under a 16 px status row (the text centred
/// across the width); below, a row whose 32 px left box holds the emotion (centred, 8 px down)
/// and, 8 px after it (the card style's gap), the chat line (14 px down, from the left); the right side hidden while
/// the chat is empty, which centres the left box alone.
fn oled_128x64(c: &mut Canvas, f: &ScreenFonts, s: &ScreenState, at: SimTime, fg: u16) {
    let w = c.width();
    let screen = c.screen();
    let t = texts(s, at);
    let lh = f.icon.line_height;
    let network = network_text(s.icons.network);
    let top = |font: &Font| 16 / 2 - font.line_height / 2;
    c.label(
        network,
        f.icon,
        Area::at(0, top(f.icon), text_w(network, f.icon).max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    let mute = if s.muted { symbol("volume_off") } else { "" };
    let battery = battery_text(s.icons.battery);
    let (mw, bw) = (text_w(mute, f.icon), text_w(battery, f.icon));
    c.label(
        battery,
        f.icon,
        Area::at(w - bw, top(f.icon), bw.max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    c.label(
        mute,
        f.icon,
        Area::at(w - bw - 8 - mw, top(f.icon), mw.max(1), lh),
        &screen,
        Align::Left,
        fg,
    );
    let status = Area::at(0, top(f.text), w, f.text.line_height);
    c.label(&t.status, f.text, status, &screen, Align::Center, fg);
    let left_x = if t.chat.is_empty() { (w - 32) / 2 } else { 0 };
    let slot = Area::at(left_x, 16, 32, c.height() - 16);
    face_in(c, f, &s.emotion, slot, Some(8), fg);
    if !t.chat.is_empty() {
        // The right side starts after the left box and the card style's 8 px gap (`content_`
        // sets no pad_column); its label is `width − 32` wide, clipped to the side.
        let chat = Area::at(32 + 8, 16 + 14, w - 32, f.text.line_height);
        c.label(&t.chat, f.text, chat, &screen, Align::Left, fg);
    }
}

/// `OledDisplay::SetupUI_128x32` (`oled_display.cc:306-392`): the emotion centred in a 32×32 box
/// on the left; on the right a 16 px row (the status or notification from the left, 2 px in, then
/// the mute, network and battery icons at its end) over the chat line (2 px in).
fn oled_128x32(c: &mut Canvas, f: &ScreenFonts, s: &ScreenState, at: SimTime, fg: u16) {
    let w = c.width();
    let screen = c.screen();
    let t = texts(s, at);
    face_in(c, f, &s.emotion, Area::at(0, 0, 32, 32), None, fg);
    let icons = [
        if s.muted { symbol("volume_off") } else { "" },
        network_text(s.icons.network),
        battery_text(s.icons.battery),
    ];
    let mut x = w;
    for icon in icons.iter().rev() {
        let iw = text_w(icon, f.icon);
        x -= iw;
        c.label(
            icon,
            f.icon,
            Area::at(x, 0, iw.max(1), f.icon.line_height),
            &screen,
            Align::Left,
            fg,
        );
    }
    let status = Area::at(32 + 2, 0, x - 34, f.text.line_height);
    c.label(&t.status, f.text, status, &screen, Align::Left, fg);
    let chat = Area::at(32 + 2, 16, w - 34, f.text.line_height);
    c.label(&t.chat, f.text, chat, &screen, Align::Left, fg);
}

/// The emotion centred across `slot`: `pad_top` px below its top, or (`None`) centred down it
/// too, as `lv_obj_center` places a label in its box.
fn face_in(c: &mut Canvas, f: &ScreenFonts, emotion: &str, slot: Area, pad_top: Option<i32>, fg: u16) {
    let screen = c.screen();
    let y = |h: i32| pad_top.map_or(slot.y1 + slot.h() / 2 - h / 2, |p| slot.y1 + p);
    match face(f, emotion) {
        Face::Image(img) => {
            let (iw, ih) = (img.width as i32, img.height as i32);
            let x = slot.x1 + slot.w() / 2 - iw / 2;
            c.image(x, y(ih), iw, ih, &img.rgba, &screen);
        }
        Face::Letter(letter, font) => {
            let lw = text_w(letter, font);
            let area = Area::at(
                slot.x1 + slot.w() / 2 - lw / 2,
                y(font.line_height),
                lw,
                font.line_height,
            );
            c.label(letter, font, area, &screen, Align::Left, fg);
        }
    }
}

/// The emote display (`emote_display.cc`), as a stand-in: its engine animates a face and shows
/// event texts; here, white on black, the emotion's letter in the middle and below it the
/// notification while it lasts, else the newest non-empty chat text (`SetChatMessage` ignores
/// an empty one). No status bar: `SetStatus` only picks the face's animation.
fn emote(c: &mut Canvas, f: &ScreenFonts, s: &ScreenState, at: SimTime, fg: u16) {
    let (w, h) = (c.width(), c.height());
    let screen = c.screen();
    let line = f.text.line_height;
    if !s.emotion.is_empty() {
        face_in(c, f, &s.emotion, Area::at(0, 0, w, h - 2 * line), None, fg);
    }
    let text = s
        .notification_at(at)
        .map(str::to_string)
        .or_else(|| s.chat.iter().rev().find(|m| !m.1.is_empty()).map(|m| m.1.clone()))
        .unwrap_or_default();
    c.label(
        &text,
        f.text,
        Area::at(8, h - 2 * line, w - 16, line),
        &screen,
        Align::Center,
        fg,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The letters the layouts draw are the component's mappings (`mappings/*.json`).
    #[test]
    fn the_code_points_are_the_components() {
        let parse = |json: &str| -> Vec<(String, char)> {
            let map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(json).expect("the shipped mapping is JSON");
            map.into_iter()
                .map(|(k, v)| {
                    let hex = v.as_str().expect("a hex code point");
                    (
                        k,
                        char::from_u32(u32::from_str_radix(hex, 16).expect("hex")).expect("a char"),
                    )
                })
                .collect()
        };
        let emoji = parse(include_str!("../../assets/lvgl/mappings/emoji.json"));
        assert_eq!(emoji.len(), 21);
        for (name, c) in emoji {
            assert_eq!(noto_emoji(&name), Some(c.to_string().as_str()), "{name}");
        }
        let symbols = parse(include_str!("../../assets/lvgl/mappings/material_symbols.json"));
        let mut used = 0;
        for (name, c) in symbols {
            let s = symbol(&name);
            if !s.is_empty() {
                assert_eq!(s, c.to_string(), "{name}");
                used += 1;
            }
        }
        assert_eq!(used, 15, "every symbol the layouts draw is in the mapping");
    }
}
