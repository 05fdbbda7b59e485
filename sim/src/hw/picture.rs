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
//! The layouts are drawn by [`crate::hw::layout`] with the firmware's own glyph data and LVGL's
//! blending into 16-bit colour ([`crate::lvgl`]); the picture shows each 16-bit pixel with
//! its high bits repeated into the low ones.

use tiny_skia::Pixmap;

use crate::board::{BoardSpec, DisplayKind};
use crate::hw::layout;
use crate::hw::screen::ScreenState;
use crate::lvgl::canvas::Canvas;
use crate::time::SimTime;

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
        .then(|| crate::lvgl::emoji::decode(png).ok())
        .flatten()
        .filter(|p| (p.width, p.height) == (width, height))
        .map(|p| p.rgba);
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

/// What LVGL holds for `state` at `at` (what `lv_snapshot_take` copies): no backlight, no round
/// glass. `None` without a display (or with a size no picture can have).
pub fn framebuffer(spec: &BoardSpec, state: &ScreenState, at: SimTime) -> Option<Picture> {
    let d = &spec.display;
    if d.kind == DisplayKind::None || d.width == 0 || d.height == 0 {
        return None;
    }
    let fonts = layout::ScreenFonts::of(spec)?;
    let mut canvas = Canvas::new(d.width, d.height, 0);
    layout::draw(&mut canvas, spec, &fonts, state, at);
    let mut rgba = canvas.rgba();
    if d.kind == DisplayKind::Oled {
        // A monochrome panel: a pixel is lit or not (LVGL's I1 conversion, by brightness).
        for px in rgba.chunks_exact_mut(4) {
            let lit = u32::from(px[0]) + u32::from(px[1]) + u32::from(px[2]) >= 3 * 128;
            px[..3].fill(if lit { 255 } else { 0 });
        }
    }
    let size = tiny_skia::IntSize::from_wh(canvas.width() as u32, canvas.height() as u32)?;
    Some(Picture {
        pixmap: Pixmap::from_vec(rgba, size)?,
    })
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
