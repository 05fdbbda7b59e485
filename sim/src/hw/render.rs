//! The screen as a picture (issue 27): a [`ScreenState`] drawn at the board's resolution, after
//! the layout of upstream's default message style (`lcd_display.cc` `SetupUI`: a status bar on
//! top whose centre shows the notification or else the status, the emotion in the middle, the
//! chat line in a bottom bar, the preview image over the emotion) and its light and dark theme
//! colours (`lcd_display.cc:35-59`); OLEDs white on black, one bit a pixel. docs/screen.md says
//! where this is an approximation of LVGL. Deterministic: the same state gives the same bytes.
//!
//! Two pictures are drawn from one state: [`framebuffer`], what LVGL holds (and what
//! `lv_snapshot_take` copies for `self.screen.snapshot`), and [`panel`], what a person sees: the
//! framebuffer through the round glass of a round panel, dimmed by the backlight, black in power
//! save.
//!
//! The text is drawn with `sim/assets/fonts/NotoSansSC-subset.otf` (SIL OFL 1.1,
//! `sim/assets/fonts/OFL.txt`) at the board's built-in font size; the emotion is a named stand-in
//! (its name in brackets), not upstream's emoji image.

use std::sync::OnceLock;

use tiny_skia::{Color, FillRule, Paint, PathBuilder, Pixmap, Rect, Stroke, Transform};

use crate::board::{BoardSpec, DisplayKind};
use crate::hw::screen::{NetworkIcon, ScreenState, StatusIcons};
use crate::time::SimTime;

static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/NotoSansSC-subset.otf");

fn font() -> &'static fontdue::Font {
    static FONT: OnceLock<fontdue::Font> = OnceLock::new();
    FONT.get_or_init(|| {
        fontdue::Font::from_bytes(FONT_BYTES, fontdue::FontSettings::default())
            .unwrap_or_else(|e| unreachable!("the shipped font parses: {e}"))
    })
}

/// Whether the shipped font has a glyph for `c`.
pub fn has_glyph(c: char) -> bool {
    font().lookup_glyph_index(c) != 0
}

/// A drawn screen: opaque RGBA pixels at the display's resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Picture {
    pixmap: Pixmap,
}

impl Picture {
    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.pixmap.width()
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.pixmap.height()
    }

    /// The `(r, g, b)` of the pixel at `(x, y)`; `None` outside the picture.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        let p = self.pixmap.pixel(x, y)?;
        Some([p.red(), p.green(), p.blue()])
    }

    /// The pixels, RGBA row by row (alpha is always 255).
    pub fn rgba(&self) -> &[u8] {
        self.pixmap.data()
    }

    /// As PNG bytes (the same picture gives the same bytes).
    pub fn png(&self) -> Vec<u8> {
        self.pixmap
            .encode_png()
            .unwrap_or_else(|e| unreachable!("an RGBA pixmap encodes as PNG: {e}"))
    }

    /// As the firmware's snapshot JPEG at `quality` (clamped to 1..=100, as `image_to_jpeg`
    /// does): the picture in RGB565 (`lv_snapshot_take(…, LV_COLOR_FORMAT_RGB565)`), widened to
    /// RGB888 for the encoder, 4:2:0 chroma (the software encoder's setting,
    /// `image_to_jpeg.cpp:370`). The encoder is not esp_new_jpeg: sizes are of the same kind,
    /// not the same bytes.
    pub fn jpeg(&self, quality: i32) -> Vec<u8> {
        let (w, h) = (self.width(), self.height());
        let mut rgb = Vec::with_capacity((w * h * 3) as usize);
        for px in self.pixmap.data().chunks_exact(4) {
            let (r, g, b) = (px[0] >> 3, px[1] >> 2, px[2] >> 3);
            rgb.extend_from_slice(&[(r << 3) | (r >> 2), (g << 2) | (g >> 4), (b << 3) | (b >> 2)]);
        }
        let mut out = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100) as u8);
        encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
        // Displays are at most a few thousand pixels a side (the encoder's limit is 65535).
        if let (Ok(w), Ok(h)) = (u16::try_from(w), u16::try_from(h))
            && encoder.encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb).is_ok()
        {
            return out;
        }
        Vec::new()
    }
}

/// The image `preview_image` downloaded (it starts with the PNG signature): the size its header
/// claims (`lv_lodepng.c` reads it at bytes 16..24, big-endian; short data reads as 0 here) and
/// its pixels when it decodes to that size (at most 4 Mpx; LVGL draws nothing otherwise).
pub fn preview_image(png: &[u8]) -> crate::hw::screen::PreviewImage {
    let be = |i: usize| {
        png.get(i..i + 4)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (width, height) = (be(16), be(20));
    let rgba = (u64::from(width) * u64::from(height) <= 1 << 22)
        .then(|| Pixmap::decode_png(png).ok())
        .flatten()
        .filter(|p| (p.width(), p.height()) == (width, height))
        .map(|p| {
            p.pixels()
                .iter()
                .flat_map(|c| {
                    let d = c.demultiply();
                    [d.red(), d.green(), d.blue(), d.alpha()]
                })
                .collect()
        });
    crate::hw::screen::PreviewImage { width, height, rgba }
}

/// What a person sees at an instant: the state, the backlight then.
pub struct Frame<'a> {
    /// The board (display kind, size, font size).
    pub spec: &'a BoardSpec,
    /// What the display was told.
    pub state: &'a ScreenState,
    /// The instant (a notification or a preview shows until its end).
    pub at: SimTime,
    /// The backlight in percent (100 without one).
    pub brightness: u8,
}

#[derive(Clone, Copy)]
struct Rgb(u8, u8, u8);

struct Canvas {
    pixmap: Pixmap,
    fg: Rgb,
    mono: bool,
    px: f32,
}

impl Canvas {
    fn fill(&mut self, x: f32, y: f32, w: f32, h: f32, c: Rgb) {
        if let Some(r) = Rect::from_xywh(x, y, w, h) {
            let mut p = Paint::default();
            p.set_color(Color::from_rgba8(c.0, c.1, c.2, 255));
            p.anti_alias = false;
            self.pixmap.fill_rect(r, &p, Transform::identity(), None);
        }
    }

    fn text_width(&self, text: &str) -> f32 {
        text.chars().map(|c| font().metrics(c, self.px).advance_width).sum()
    }

    /// One line of `text` centred in the box `(x, y, w, h)`, clipped to it.
    fn text_centred(&mut self, text: &str, x: f32, y: f32, w: f32, h: f32) {
        self.text_in(text, x, y, w, h, true);
    }

    /// One line of `text` in the box `(x, y, w, h)`, vertically centred, horizontally centred or
    /// from the left edge, clipped to the box (a text wider than the box starts at its left).
    fn text_in(&mut self, text: &str, x: f32, y: f32, w: f32, h: f32, centred: bool) {
        let f = font();
        let line = f.horizontal_line_metrics(self.px);
        let (ascent, descent) = line.map_or((self.px * 0.88, -self.px * 0.12), |l| (l.ascent, l.descent));
        let width = self.text_width(text);
        let mut pen = if width <= w && centred {
            x + (w - width) / 2.0
        } else {
            x
        };
        let baseline = (y + (h - (ascent - descent)) / 2.0 + ascent).round();
        let (cx0, cx1, cy0, cy1) = (x as i32, (x + w) as i32, y as i32, (y + h) as i32);
        for c in text.chars() {
            let (m, cov) = f.rasterize(c, self.px);
            let gx = (pen + m.xmin as f32).round() as i32;
            let gy = baseline as i32 - m.height as i32 - m.ymin;
            for row in 0..m.height {
                for col in 0..m.width {
                    let (px, py) = (gx + col as i32, gy + row as i32);
                    if px < cx0 || px >= cx1 || py < cy0 || py >= cy1 {
                        continue;
                    }
                    let a = cov[row * m.width + col];
                    self.blend(px as u32, py as u32, a);
                }
            }
            pen += m.advance_width;
            if pen > x + w {
                break;
            }
        }
    }

    fn paint(&self) -> Paint<'static> {
        let mut p = Paint::default();
        p.set_color(Color::from_rgba8(self.fg.0, self.fg.1, self.fg.2, 255));
        p.anti_alias = !self.mono;
        p
    }

    /// A polyline through `points` (fractions of the box `(x, y, b)`), stroked, or filled when
    /// `fill`.
    fn shape(&mut self, x: f32, y: f32, b: f32, points: &[(f32, f32)], fill: bool) {
        let mut pb = PathBuilder::new();
        for (i, (u, v)) in points.iter().enumerate() {
            let (px, py) = (x + u * b, y + v * b);
            if i == 0 { pb.move_to(px, py) } else { pb.line_to(px, py) }
        }
        if fill {
            pb.close();
        }
        let Some(path) = pb.finish() else { return };
        let paint = self.paint();
        if fill {
            self.pixmap
                .fill_path(&path, &paint, FillRule::Winding, Transform::identity(), None);
        } else {
            let stroke = Stroke {
                width: (b / 9.0).max(1.0),
                ..Stroke::default()
            };
            self.pixmap
                .stroke_path(&path, &paint, &stroke, Transform::identity(), None);
        }
    }

    /// The network icon's stand-in in the square `(x, y, b)`: one to three arcs over a dot
    /// (`wifi`, `wifi_2_bar`, `wifi_1_bar`), struck through when off.
    fn network_icon(&mut self, icon: NetworkIcon, x: f32, y: f32, b: f32) {
        let arcs = match icon {
            NetworkIcon::None => return,
            NetworkIcon::Full | NetworkIcon::Off => 3,
            NetworkIcon::TwoBars => 2,
            NetworkIcon::OneBar => 1,
        };
        for k in 1..=arcs {
            let r = 0.27 * k as f32;
            let points: Vec<(f32, f32)> = (0..=8)
                .map(|i| {
                    let a = (225.0 + 90.0 * i as f32 / 8.0).to_radians();
                    (0.5 + r * a.cos(), 0.85 + r * a.sin())
                })
                .collect();
            self.shape(x, y, b, &points, false);
        }
        self.shape(x, y, b, &[(0.42, 0.78), (0.58, 0.78), (0.58, 0.92), (0.42, 0.92)], true);
        if icon == NetworkIcon::Off {
            self.shape(x, y, b, &[(0.1, 0.1), (0.9, 0.9)], false);
        }
    }

    /// The mute icon's stand-in: a speaker and a cross.
    fn mute_icon(&mut self, x: f32, y: f32, b: f32) {
        let speaker = [
            (0.05, 0.35),
            (0.25, 0.35),
            (0.5, 0.1),
            (0.5, 0.9),
            (0.25, 0.65),
            (0.05, 0.65),
        ];
        self.shape(x, y, b, &speaker, true);
        self.shape(x, y, b, &[(0.62, 0.32), (0.95, 0.68)], false);
        self.shape(x, y, b, &[(0.62, 0.68), (0.95, 0.32)], false);
    }

    /// The battery icon's stand-in: an outline filled to the level index (0..=7), a bolt when
    /// charging.
    fn battery_icon(&mut self, (index, charging): (u8, bool), x: f32, y: f32, b: f32) {
        self.shape(
            x,
            y,
            b,
            &[(0.05, 0.28), (0.82, 0.28), (0.82, 0.72), (0.05, 0.72), (0.05, 0.28)],
            false,
        );
        self.shape(x, y, b, &[(0.82, 0.4), (0.95, 0.4), (0.95, 0.6), (0.82, 0.6)], true);
        if charging {
            let bolt = [
                (0.5, 0.22),
                (0.3, 0.52),
                (0.45, 0.52),
                (0.38, 0.8),
                (0.6, 0.46),
                (0.45, 0.46),
            ];
            self.shape(x, y, b, &bolt, true);
        } else if index > 0 {
            let right = 0.12 + 0.63 * f32::from(index) / 7.0;
            self.shape(
                x,
                y,
                b,
                &[(0.12, 0.36), (right, 0.36), (right, 0.64), (0.12, 0.64)],
                true,
            );
        }
    }

    /// The status bar's icons: the network icon at `left`, and the mute and battery icons
    /// ending at `right` (mute, then the battery 4 px after it on LCDs); `network_right` puts the
    /// network icon between them instead (the 128x32 OLED's row). Returns where the right-hand
    /// icons begin.
    fn status_icons(
        &mut self,
        s: &ScreenState,
        icons: &StatusIcons,
        y: f32,
        b: f32,
        (left, right): (f32, f32),
        network_right: bool,
    ) -> f32 {
        let gap = if self.mono { 0.0 } else { 4.0 };
        let mut x = right;
        if let Some(battery) = icons.battery {
            x -= b;
            self.battery_icon(battery, x, y, b);
            x -= gap;
        }
        if network_right && icons.network != NetworkIcon::None {
            x -= b;
            self.network_icon(icons.network, x, y, b);
        }
        if s.muted {
            x -= b;
            self.mute_icon(x, y, b);
        }
        if !network_right {
            self.network_icon(icons.network, left, y, b);
        }
        x
    }

    /// The emotion's stand-in in a small box (the OLEDs' 32 px icon slot): `[name]` when it fits,
    /// else the bare name from its first letter, clipped (`neut`, `happ`: a 1-bit glyph smaller
    /// than the text font is not legible).
    fn emotion_in(&mut self, text: &str, x: f32, y: f32, w: f32, h: f32) {
        if self.text_width(text) <= w {
            self.text_centred(text, x, y, w, h);
        } else {
            let bare = text.trim_start_matches('[').trim_end_matches(']');
            self.text_in(bare, x, y, w, h, false);
        }
    }

    fn blend(&mut self, x: u32, y: u32, a: u8) {
        let w = self.pixmap.width();
        let i = ((y * w + x) * 4) as usize;
        let data = self.pixmap.data_mut();
        let Some(px) = data.get_mut(i..i + 4) else { return };
        if self.mono {
            if a >= 128 {
                px[..3].copy_from_slice(&[self.fg.0, self.fg.1, self.fg.2]);
            }
            return;
        }
        let mix =
            |bg: u8, fg: u8| ((u32::from(bg) * u32::from(255 - a) + u32::from(fg) * u32::from(a) + 127) / 255) as u8;
        px[0] = mix(px[0], self.fg.0);
        px[1] = mix(px[1], self.fg.1);
        px[2] = mix(px[2], self.fg.2);
    }

    /// The preview image in the box `(x, y, w, h)` (`lcd_display.cc:1018-1052`: an image object
    /// half the screen's size, centred; the image scaled by `128 × width / image width` / 256,
    /// centred in it and clipped to it). Nearest-neighbour sampling.
    fn image(&mut self, image: &crate::hw::screen::PreviewImage, screen_w: u32, bx: i64, by: i64, bw: i64, bh: i64) {
        let Some(rgba) = image.rgba.as_deref() else { return };
        let (iw, ih) = (i64::from(image.width), i64::from(image.height));
        if iw == 0 || ih == 0 {
            return;
        }
        // lv_image_set_scale(128 * width_ / w): the scale in 1/256ths.
        let zoom = (128 * i64::from(screen_w) / iw).max(1);
        let (sw, sh) = (iw * zoom / 256, ih * zoom / 256);
        let (ox, oy) = (bx + (bw - sw) / 2, by + (bh - sh) / 2);
        let width = i64::from(self.pixmap.width());
        let data = self.pixmap.data_mut();
        for y in by.max(oy)..(by + bh).min(oy + sh) {
            for x in bx.max(ox)..(bx + bw).min(ox + sw) {
                let (u, v) = (((x - ox) * 256 / zoom).min(iw - 1), ((y - oy) * 256 / zoom).min(ih - 1));
                let s = ((v * iw + u) * 4) as usize;
                let d = ((y * width + x) * 4) as usize;
                let (Some(src), true) = (rgba.get(s..s + 4), d + 4 <= data.len()) else {
                    continue;
                };
                let a = u32::from(src[3]);
                for k in 0..3 {
                    let bg = u32::from(data[d + k]);
                    data[d + k] = ((u32::from(src[k]) * a + bg * (255 - a) + 127) / 255) as u8;
                }
            }
        }
    }
}

/// The board's text size in pixels (its built-in font; 14 on OLEDs, 16 on LCDs otherwise).
fn font_px(spec: &BoardSpec) -> f32 {
    spec.text_font().map_or(14.0, |f| f.size as f32)
}

/// What LVGL holds for `state` at `at` (what `lv_snapshot_take` copies): no backlight, no round
/// glass. `None` without a display (or with a size no picture can have).
pub fn framebuffer(spec: &BoardSpec, state: &ScreenState, at: SimTime) -> Option<Picture> {
    let d = &spec.display;
    if d.kind == DisplayKind::None || d.width == 0 || d.height == 0 {
        return None;
    }
    let (w, h) = (d.width, d.height);
    let s = state;
    let mono = d.kind == DisplayKind::Oled;
    let dark = mono || s.theme.as_deref() == Some("dark");
    let (bg, fg) = if dark {
        (Rgb(0, 0, 0), Rgb(255, 255, 255))
    } else {
        (Rgb(255, 255, 255), Rgb(0, 0, 0))
    };
    let mut c = Canvas {
        pixmap: Pixmap::new(w, h)?,
        fg,
        mono,
        px: font_px(spec),
    };
    let (wf, hf) = (w as f32, h as f32);
    c.fill(0.0, 0.0, wf, hf, bg);
    if s.power_save {
        return Some(Picture { pixmap: c.pixmap });
    }
    if d.kind == DisplayKind::Emote {
        emote(&mut c, s, at, wf, hf);
        return Some(Picture { pixmap: c.pixmap });
    }
    let line = (c.px * 1.25).ceil();
    let status = s.notification_at(at).unwrap_or(&s.status).to_string();
    let chat = s.last_message().map(|m| m.1.clone()).unwrap_or_default();
    // The preview hides the emoji box while it shows (LCDs only: the OLED's SetPreviewImage does
    // nothing, so nothing is ever recorded there).
    let preview = s.preview_at(at);
    let emotion = if s.emotion.is_empty() || preview.is_some() {
        String::new()
    } else {
        format!("[{}]", s.emotion)
    };
    if mono && h <= 32 {
        // oled_display.cc SetupUI_128x32: the emotion in a 32x32 box on the left; on the right
        // a 16 px status row (the status or the notification from the left, padded 2 px) over
        // the chat line (from the left, padded 2 px).
        c.emotion_in(&emotion, 0.0, 0.0, 32.0, 32.0);
        let icons_at = c.status_icons(s, &s.icons, 1.0, 14.0, (32.0, wf), true);
        c.text_in(&status, 34.0, 0.0, icons_at - 34.0, 16.0, false);
        c.text_in(&chat, 34.0, 16.0, wf - 34.0, 16.0, false);
    } else if mono {
        // SetupUI_128x64: a 16 px status bar (text centred across the width); below it a row
        // whose left 32 px hold the emotion (8 px down) and whose right side the chat line (14
        // px down, from the left); the right side is hidden while the chat text is empty, and
        // the row centres the emotion alone.
        c.status_icons(s, &s.icons, 1.0, 14.0, (0.0, wf), false);
        c.text_centred(&status, 0.0, 0.0, wf, 16.0);
        if chat.is_empty() {
            c.emotion_in(&emotion, (wf - 32.0) / 2.0, 24.0, 32.0, 30.0);
        } else {
            c.emotion_in(&emotion, 0.0, 24.0, 32.0, 30.0);
            c.text_in(&chat, 32.0, 30.0, wf - 32.0, line, false);
        }
    } else {
        // lcd_display.cc SetupUI (default style): the emoji box centred on the screen; the
        // preview over it; the status bar (4 px above and below the text; the status and
        // notification labels 75 % of the width, centred); the bottom bar (one line plus 16 px,
        // the theme's background, hidden while the chat text is empty; the label the width less
        // 16 px, centred).
        c.text_centred(&emotion, 0.0, 0.0, wf, hf);
        if let Some(image) = preview {
            let (bw, bh) = (i64::from(w / 2), i64::from(h / 2));
            c.image(image, w, (i64::from(w) - bw) / 2, (i64::from(h) - bh) / 2, bw, bh);
        }
        c.status_icons(s, &s.icons, 4.0, c.px, (8.0, wf - 8.0), false);
        c.text_centred(&status, wf / 8.0, 0.0, wf * 0.75, line + 8.0);
        if !chat.is_empty() {
            let bar = line + 16.0;
            c.fill(0.0, hf - bar, wf, bar, bg);
            c.text_centred(&chat, 8.0, hf - bar, wf - 16.0, bar);
        }
    }
    Some(Picture { pixmap: c.pixmap })
}

/// The emote display (`emote_display.cc`), as a stand-in: its engine animates a face and shows
/// event texts; here, white on black, the emotion's name in the middle and below it the
/// notification while it lasts, else the newest non-empty chat text (`SetChatMessage` ignores
/// an empty one). No status bar: `SetStatus` only picks the face's animation.
fn emote(c: &mut Canvas, s: &ScreenState, at: SimTime, wf: f32, hf: f32) {
    c.fill(0.0, 0.0, wf, hf, Rgb(0, 0, 0));
    c.fg = Rgb(255, 255, 255);
    let line = (c.px * 1.25).ceil();
    if !s.emotion.is_empty() {
        c.text_centred(&format!("[{}]", s.emotion), 0.0, 0.0, wf, hf - line);
    }
    let text = s
        .notification_at(at)
        .map(str::to_string)
        .or_else(|| s.chat.iter().rev().find(|m| !m.1.is_empty()).map(|m| m.1.clone()))
        .unwrap_or_default();
    c.text_centred(&text, 8.0, hf - 2.0 * line, wf - 16.0, line);
}

/// What a person sees: the framebuffer through a round panel's glass (black outside the circle),
/// black in power save, the light scaled by the backlight. `None` without a display.
pub fn panel(frame: &Frame<'_>) -> Option<Picture> {
    let mut picture = framebuffer(frame.spec, frame.state, frame.at)?;
    let (w, h) = (picture.width(), picture.height());
    let round = frame.spec.display.round;
    let level = if frame.state.power_save {
        0
    } else {
        u32::from(frame.brightness.min(100))
    };
    if level == 100 && !round {
        return Some(picture);
    }
    // The glass of a round panel: a pixel shows when its centre is inside the inscribed circle.
    let r = f64::from(w.min(h)) / 2.0;
    let (cx, cy) = (f64::from(w) / 2.0, f64::from(h) / 2.0);
    for (i, px) in picture.pixmap.data_mut().chunks_exact_mut(4).enumerate() {
        let (x, y) = ((i as u32 % w) as f64 + 0.5, (i as u32 / w) as f64 + 0.5);
        let lit = if round && (x - cx).powi(2) + (y - cy).powi(2) > r * r {
            0
        } else {
            level
        };
        for v in &mut px[..3] {
            *v = ((u32::from(*v) * lit + 50) / 100) as u8;
        }
    }
    Some(picture)
}

/// The PNG of what a person sees ([`panel`]); `None` without a display.
pub fn render_png(frame: &Frame<'_>) -> Option<Vec<u8>> {
    panel(frame).map(|p| p.png())
}
