//! The screen as a picture (issue 27, step 2): a [`ScreenState`] drawn at the board's resolution
//! as a PNG, after the layout of upstream's default message style (`lcd_display.cc` `SetupUI`:
//! a status bar on top whose centre shows the notification or else the status, the emotion in
//! the middle, the chat line in a bottom bar) and its light and dark theme colours
//! (`lcd_display.cc:35-59`); OLEDs white on black, one bit a pixel. docs/screen.md says where
//! this is an approximation of LVGL. Deterministic: the same state gives the same bytes.
//!
//! The text is drawn with `assets/fonts/NotoSansSC-subset.otf` (SIL OFL 1.1,
//! `assets/fonts/OFL.txt`) at the board's built-in font size; the emotion is a named stand-in
//! (its name in brackets), not upstream's emoji image.

use std::sync::OnceLock;

use anyhow::{Result, anyhow};
use tiny_skia::{Color, Paint, Pixmap, Rect, Transform};
use xiaozhi_sim::board::{BoardSpec, DisplayKind};
use xiaozhi_sim::hw::screen::ScreenState;
use xiaozhi_sim::time::SimTime;

static FONT_BYTES: &[u8] = include_bytes!("../assets/fonts/NotoSansSC-subset.otf");

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

/// What to draw: the state at an instant and the backlight then.
pub struct Frame<'a> {
    /// The board (display kind, size, font size).
    pub spec: &'a BoardSpec,
    /// What the display was told.
    pub state: &'a ScreenState,
    /// The instant (a notification shows until its end).
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
        let f = font();
        let line = f.horizontal_line_metrics(self.px);
        let (ascent, descent) = line.map_or((self.px * 0.88, -self.px * 0.12), |l| (l.ascent, l.descent));
        let width = self.text_width(text);
        let mut pen = if width <= w { x + (w - width) / 2.0 } else { x };
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
}

/// The board's text size in pixels (its built-in font; 14 on OLEDs, 16 on LCDs otherwise).
fn font_px(spec: &BoardSpec) -> f32 {
    spec.text_font().map_or(14.0, |f| f.size as f32)
}

/// The frame as PNG bytes, at the display's resolution; `None` without a display.
pub fn render_png(frame: &Frame<'_>) -> Result<Option<Vec<u8>>> {
    let d = &frame.spec.display;
    if d.kind == DisplayKind::None || d.width == 0 || d.height == 0 {
        return Ok(None);
    }
    let (w, h) = (d.width, d.height);
    let s = frame.state;
    let mono = d.kind == DisplayKind::Oled;
    let dark = mono || s.theme.as_deref() == Some("dark");
    let (bg, fg, bar) = if dark {
        (Rgb(0, 0, 0), Rgb(255, 255, 255), Rgb(0x1F, 0x1F, 0x1F))
    } else {
        (Rgb(255, 255, 255), Rgb(0, 0, 0), Rgb(0xE0, 0xE0, 0xE0))
    };
    let pixmap = Pixmap::new(w, h).ok_or_else(|| anyhow!("{w}x{h} is not a picture size"))?;
    let mut c = Canvas {
        pixmap,
        fg,
        mono,
        px: font_px(frame.spec),
    };
    let (wf, hf) = (w as f32, h as f32);
    c.fill(0.0, 0.0, wf, hf, bg);
    if !s.power_save {
        let line = (c.px * 1.25).ceil();
        let status = s.notification_at(frame.at).unwrap_or(&s.status).to_string();
        let chat = s.last_message().map(|m| m.1.clone()).unwrap_or_default();
        let emotion = if s.emotion.is_empty() {
            String::new()
        } else {
            format!("[{}]", s.emotion)
        };
        if mono && h <= 32 {
            // 128x32: the emotion on the left, the status and the chat line on the right.
            let left = hf.min(32.0);
            c.text_centred(&emotion, 0.0, 0.0, left, hf);
            c.text_centred(&status, left, 0.0, wf - left, hf / 2.0);
            c.text_centred(&chat, left, hf / 2.0, wf - left, hf / 2.0);
        } else {
            let top = line + 4.0;
            let bottom = if mono { line } else { line + 8.0 };
            if !mono {
                c.fill(0.0, hf - bottom, wf, bottom, bar);
            }
            c.text_centred(&status, 0.0, 0.0, wf, top);
            c.text_centred(&emotion, 0.0, top, wf, hf - top - bottom);
            c.text_centred(&chat, 4.0, hf - bottom, wf - 8.0, bottom);
        }
    }
    // The backlight: the panel's light scales with it.
    let level = u32::from(frame.brightness.min(100));
    if level < 100 {
        for px in c.pixmap.data_mut().chunks_exact_mut(4) {
            for v in &mut px[..3] {
                *v = ((u32::from(*v) * level + 50) / 100) as u8;
            }
        }
    }
    Ok(Some(c.pixmap.encode_png().map_err(|e| anyhow!("PNG: {e}"))?))
}
