//! An RGB565 framebuffer drawn the way LVGL 9.5's software renderer draws into one (issue 41):
//! the device's LVGL holds 16-bit colour (`LV_COLOR_DEPTH 16`), so the twin keeps the same
//! pixels and blends with the same integer formulas (`lv_color_16_16_mix` for fills and glyph
//! coverage, `lv_color_24_16_mix` for ARGB8888 images, `lv_draw_sw_blend_to_rgb565.c`). Text
//! is placed as `lv_draw_label` places it: the pen from the label's left edge (centred by
//! `(width − line width) / 2`), each glyph's box at `pen + ofs_x` and
//! `top + (line_height − base_line) − box_h − ofs_y`.

use super::font::Font;

/// An area in pixels, both ends included (LVGL's `lv_area_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// Left column.
    pub x1: i32,
    /// Top row.
    pub y1: i32,
    /// Right column (included).
    pub x2: i32,
    /// Bottom row (included).
    pub y2: i32,
}

impl Area {
    /// The area of `w × h` pixels whose top left is `(x, y)`.
    pub fn at(x: i32, y: i32, w: i32, h: i32) -> Area {
        Area {
            x1: x,
            y1: y,
            x2: x + w - 1,
            y2: y + h - 1,
        }
    }

    /// Width in pixels.
    pub fn w(&self) -> i32 {
        self.x2 - self.x1 + 1
    }

    /// Height in pixels.
    pub fn h(&self) -> i32 {
        self.y2 - self.y1 + 1
    }

    /// The part of both areas (possibly empty: then `x2 < x1` or `y2 < y1`).
    pub fn clip(&self, other: &Area) -> Area {
        Area {
            x1: self.x1.max(other.x1),
            y1: self.y1.max(other.y1),
            x2: self.x2.min(other.x2),
            y2: self.y2.min(other.y2),
        }
    }
}

/// A colour as `lv_color_to_u16` makes it from 8-bit channels.
pub fn rgb565(r: u8, g: u8, b: u8) -> u16 {
    ((u16::from(r) & 0xF8) << 8) + ((u16::from(g) & 0xFC) << 3) + (u16::from(b) >> 3)
}

/// `lv_color_16_16_mix`: `c1` over `c2` at `mix` (0..=255), in 5-bit steps.
pub fn mix16(c1: u16, c2: u16, mix: u8) -> u16 {
    if mix == 255 {
        return c1;
    }
    if mix == 0 || c1 == c2 {
        return c2;
    }
    let mix = (u32::from(mix) + 4) >> 3;
    let bg = (u32::from(c2) | (u32::from(c2) << 16)) & 0x07E0_F81F;
    let fg = (u32::from(c1) | (u32::from(c1) << 16)) & 0x07E0_F81F;
    let result = ((fg.wrapping_sub(bg).wrapping_mul(mix) >> 5).wrapping_add(bg)) & 0x07E0_F81F;
    ((result >> 16) as u16) | (result as u16)
}

/// `lv_color_24_16_mix`: an 8-bit `[r, g, b]` over `c2` at `mix`.
pub fn mix24(c1: [u8; 3], c2: u16, mix: u8) -> u16 {
    let [r, g, b] = c1.map(u32::from);
    if mix == 0 {
        return c2;
    }
    if mix == 255 {
        return (((r & 0xF8) << 8) + ((g & 0xFC) << 3) + ((b & 0xF8) >> 3)) as u16;
    }
    let (m, inv) = (u32::from(mix), 255 - u32::from(mix));
    let c2 = u32::from(c2);
    let red = ((((r >> 3) * m + ((c2 >> 11) & 0x1F) * inv) << 3) & 0xF800)
        + ((((g >> 2) * m + ((c2 >> 5) & 0x3F) * inv) >> 3) & 0x07E0)
        + (((b >> 3) * m + (c2 & 0x1F) * inv) >> 8);
    red as u16
}

/// The 8-bit channels a 16-bit colour is shown as (the high bits repeated into the low ones).
pub fn rgb888(c: u16) -> [u8; 3] {
    let (r, g, b) = ((c >> 11) as u8, ((c >> 5) & 0x3F) as u8, (c & 0x1F) as u8);
    [(r << 3) | (r >> 2), (g << 2) | (g >> 4), (b << 3) | (b >> 2)]
}

/// How a line of text sits in its label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// From the label's left edge.
    Left,
    /// Centred: `(label width − line width) / 2` from the left edge, as C divides.
    Center,
}

/// A 16-bit framebuffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u16>,
}

impl Canvas {
    /// A `width × height` framebuffer filled with `colour`.
    pub fn new(width: u32, height: u32, colour: u16) -> Canvas {
        let (w, h) = (width.min(1 << 14) as i32, height.min(1 << 14) as i32);
        Canvas {
            width: w,
            height: h,
            pixels: vec![colour; (w * h) as usize],
        }
    }

    /// Width in pixels.
    pub fn width(&self) -> i32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> i32 {
        self.height
    }

    /// The whole screen as an area.
    pub fn screen(&self) -> Area {
        Area::at(0, 0, self.width, self.height)
    }

    /// The pixel at `(x, y)`.
    pub fn get(&self, x: i32, y: i32) -> Option<u16> {
        if x < 0 || y < 0 || x >= self.width || y >= self.height {
            return None;
        }
        self.pixels.get((y * self.width + x) as usize).copied()
    }

    fn at_mut(&mut self, x: i32, y: i32) -> Option<&mut u16> {
        if x < 0 || y < 0 || x >= self.width || y >= self.height {
            return None;
        }
        self.pixels.get_mut((y * self.width + x) as usize)
    }

    /// Fills `area` (clipped to `clip` and the screen) with `colour` at `opa` (LVGL draws
    /// nothing at opa ≤ 2 and covers at ≥ 253).
    pub fn fill(&mut self, area: Area, clip: &Area, colour: u16, opa: u8) {
        if opa <= 2 {
            return;
        }
        let a = area.clip(clip).clip(&self.screen());
        for y in a.y1..=a.y2 {
            for x in a.x1..=a.x2 {
                if let Some(p) = self.at_mut(x, y) {
                    *p = if opa >= 253 { colour } else { mix16(colour, *p, opa) };
                }
            }
        }
    }

    /// `colour` through an 8-bit `coverage` mask of `area`'s size, clipped to `clip`.
    pub fn blend_mask(&mut self, area: Area, coverage: &[u8], clip: &Area, colour: u16) {
        let a = area.clip(clip).clip(&self.screen());
        let w = area.w();
        for y in a.y1..=a.y2 {
            for x in a.x1..=a.x2 {
                let m = coverage
                    .get(((y - area.y1) * w + (x - area.x1)) as usize)
                    .copied()
                    .unwrap_or(0);
                if let Some(p) = self.at_mut(x, y) {
                    *p = mix16(colour, *p, m);
                }
            }
        }
    }

    /// An RGBA (not premultiplied) image of `w × h` with its top left at `(x, y)`, clipped.
    pub fn image(&mut self, x: i32, y: i32, w: i32, h: i32, rgba: &[u8], clip: &Area) {
        let area = Area::at(x, y, w, h);
        let a = area.clip(clip).clip(&self.screen());
        for py in a.y1..=a.y2 {
            for px in a.x1..=a.x2 {
                let i = (((py - y) * w + (px - x)) * 4) as usize;
                let Some(s) = rgba.get(i..i + 4) else { continue };
                if let Some(p) = self.at_mut(px, py) {
                    *p = mix24([s[0], s[1], s[2]], *p, s[3]);
                }
            }
        }
    }

    /// One line of `text` in the label `area`, as `lv_draw_label` draws it, clipped to `clip`. A
    /// text wider than the label starts at its left edge (a scrolling label at the start of its
    /// scroll). A letter the font lacks takes no room (no placeholder, no fallback font: the
    /// firmware's only fallback holds glyphs a server pushes, which the twin does not draw).
    pub fn label(&mut self, text: &str, font: &Font, area: Area, clip: &Area, align: Align, colour: u16) {
        let clip = area.clip(clip);
        let width = line_width(text, font);
        let mut pen = area.x1;
        if align == Align::Center && width <= area.w() {
            pen += (area.w() - width) / 2;
        }
        let top = area.y1 + font.line_height - font.base_line;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let Some(g) = font.glyph(c, chars.peek().copied()) else {
                continue;
            };
            if g.box_w > 0 && g.box_h > 0 {
                let glyph = Area::at(pen + g.ofs_x, top - g.box_h - g.ofs_y, g.box_w, g.box_h);
                self.blend_mask(glyph, &font.coverage(&g), &clip, colour);
            }
            if g.adv_w > 0 {
                pen += g.adv_w;
            }
        }
    }

    /// The pixels as 8-bit RGBA (opaque).
    pub fn rgba(&self) -> Vec<u8> {
        self.pixels
            .iter()
            .flat_map(|&c| {
                let [r, g, b] = rgb888(c);
                [r, g, b, 255]
            })
            .collect()
    }
}

/// `lv_text_get_width` for one line (no letter space).
pub fn line_width(text: &str, font: &Font) -> i32 {
    let mut width = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let w = font.glyph(c, chars.peek().copied()).map_or(0, |g| g.adv_w);
        if w > 0 {
            width += w;
        }
    }
    width
}
