//! The firmware's fonts, read as LVGL reads them (issue 41).
//!
//! Every font a build draws with ships in `sim/assets/lvgl/fonts/` in the `cbin` layout of the
//! font component `78/xiaozhi-fonts` 2.0.0 (what its `cbin_font_create` loads: LVGL's
//! `lv_font_t` and `lv_font_fmt_txt_dsc_t` as laid out on a 32-bit target, offsets in place of
//! pointers; docs/screen.md, "The glyph data"). This module finds a glyph the way LVGL 9.5's
//! `lv_font_fmt_txt.c` does (the first cmap whose range holds the letter decides; kerning by
//! classes; the advance rounded to whole pixels per glyph) and expands its bitmap to 8-bit
//! coverage the way `lv_font_get_bitmap_fmt_txt` does (rows packed without padding; 4-bit
//! levels through `opa4_table`, 1-bit as 0 or 255).

use std::sync::OnceLock;

/// A font file as shipped: its upstream name and bytes.
struct FontFile {
    name: &'static str,
    bytes: &'static [u8],
}

macro_rules! fonts {
    ($($name:literal),* $(,)?) => {
        [$(FontFile {
            name: $name,
            bytes: include_bytes!(concat!("../../assets/lvgl/fonts/", $name, ".bin")),
        }),*]
    };
}

/// Every font the firmware's builds use (`sim/assets/lvgl/make.py` lists where each is used).
static FILES: [FontFile; FONT_COUNT] = fonts!(
    "font_noto_sans_basic_14_1",
    "font_noto_sans_basic_16_4",
    "font_noto_sans_basic_20_4",
    "font_noto_sans_basic_30_4",
    "font_noto_sans_common_14_1",
    "font_noto_sans_common_16_4",
    "font_noto_sans_common_20_4",
    "font_noto_sans_common_30_4",
    "font_material_symbols_14_1",
    "font_material_symbols_16_4",
    "font_material_symbols_20_4",
    "font_material_symbols_30_1",
    "font_material_symbols_30_4",
    "font_noto_emoji_30_1",
    "font_noto_emoji_30_4",
);

/// The names of the shipped fonts (upstream's symbol names, e.g. `font_noto_sans_basic_16_4`).
pub fn names() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|f| f.name)
}

/// Whether a font called `name` is shipped (nothing is parsed).
pub fn is_shipped(name: &str) -> bool {
    names().any(|n| n == name)
}

/// The shipped font called `name` (upstream's symbol name), parsed the first time it is asked
/// for (a board draws with five of the fifteen).
pub fn by_name(name: &str) -> Option<&'static Font> {
    static PARSED: [OnceLock<Font>; FONT_COUNT] = [const { OnceLock::new() }; FONT_COUNT];
    let i = FILES.iter().position(|f| f.name == name)?;
    let f = &FILES[i];
    Some(PARSED[i].get_or_init(|| {
        Font::parse(f.bytes).unwrap_or_else(|e| unreachable!("the shipped font {} parses: {e}", f.name))
    }))
}

/// How many fonts are shipped.
const FONT_COUNT: usize = 15;

/// One cmap: a range of code points mapped to glyph ids.
#[derive(Debug)]
struct Cmap {
    range_start: u32,
    range_length: u32,
    glyph_id_start: u32,
    /// Offset of the `uint16_t` code-point list (sparse kinds).
    unicode_list: usize,
    /// Offset of the glyph-id offsets (full kinds: `uint8_t` for format 0, `uint16_t` sparse).
    ofs_list: usize,
    list_length: usize,
    kind: CmapKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmapKind {
    Format0Full,
    SparseFull,
    Format0Tiny,
    SparseTiny,
}

/// Kerning by classes (`lv_font_fmt_txt_kern_classes_t`).
#[derive(Debug)]
struct KernClasses {
    values: usize,
    left: usize,
    right: usize,
    left_count: usize,
    right_count: usize,
}

/// A parsed font: offsets into its bytes, checked once.
#[derive(Debug)]
pub struct Font {
    data: &'static [u8],
    /// `line_height`: the height of a line in pixels.
    pub line_height: i32,
    /// `base_line`: the base line measured from the bottom of the line.
    pub base_line: i32,
    /// Bits per pixel of the bitmaps (1, 2, 4 or 8).
    pub bpp: u8,
    bitmap: usize,
    glyphs: usize,
    glyph_count: u32,
    cmaps: Vec<Cmap>,
    kern: Option<KernClasses>,
    kern_scale: i32,
    kerning: bool,
}

/// What LVGL's `lv_font_glyph_dsc_t` holds for a letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Glyph {
    /// The glyph id (index into the font's glyph table).
    pub id: u32,
    /// The advance in whole pixels, kerning with the next letter included.
    pub adv_w: i32,
    /// The bitmap's width.
    pub box_w: i32,
    /// The bitmap's height.
    pub box_h: i32,
    /// The bitmap's left edge from the pen.
    pub ofs_x: i32,
    /// The bitmap's bottom edge above the base line.
    pub ofs_y: i32,
}

fn u8_at(d: &[u8], at: usize) -> Option<u8> {
    d.get(at).copied()
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn i16_at(d: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn i32_at(d: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// The size of one glyph descriptor in a cbin (LVGL's large format: `uint32_t bitmap_index,
/// adv_w; uint16_t box_w, box_h; int16_t ofs_x, ofs_y`).
const GLYPH_DSC: usize = 16;
/// The size of one cmap record in a cbin (`cbin_font.c` reads it field by field).
const CMAP_RECORD: usize = 20;

impl Font {
    /// Reads a cbin; every offset and every glyph's bitmap is checked to lie inside `data`.
    pub fn parse(data: &'static [u8]) -> Result<Font, String> {
        let short = |what: &str| format!("{what} lies outside the {} bytes", data.len());
        let line_height = i32_at(data, 12).ok_or_else(|| short("line_height"))?;
        let base_line = i32_at(data, 16).ok_or_else(|| short("base_line"))?;
        let bits = u8_at(data, 20).ok_or_else(|| short("the font's flags"))?;
        let dsc = u32_at(data, 24).ok_or_else(|| short("dsc"))? as usize;
        let at = |k: usize| {
            u32_at(data, dsc + 4 * k)
                .map(|o| o as usize)
                .ok_or_else(|| short("a dsc field"))
        };
        let (bitmap, glyphs, cmaps, kern) = (dsc + at(0)?, dsc + at(1)?, dsc + at(2)?, at(3)?);
        let kern_scale = i32::from(u16_at(data, dsc + 16).ok_or_else(|| short("kern_scale"))?);
        let flags = u16_at(data, dsc + 18).ok_or_else(|| short("the dsc's flags"))?;
        let (cmap_num, bpp) = (usize::from(flags & 0x1ff), ((flags >> 9) & 0xf) as u8);
        let (kern_classes, bitmap_format) = ((flags >> 13) & 1, flags >> 14);
        if ![1, 2, 4, 8].contains(&bpp) || bitmap_format != 0 {
            return Err(format!(
                "bpp {bpp}, bitmap format {bitmap_format}: only plain bitmaps are drawn"
            ));
        }
        if u32_at(data, dsc + 20) != Some(0) {
            return Err("a glyph row stride: only packed rows are drawn".into());
        }
        if glyphs > cmaps || (cmaps - glyphs) % GLYPH_DSC != 0 {
            return Err("the glyph table does not end where the cmaps begin".into());
        }
        let glyph_count = ((cmaps - glyphs) / GLYPH_DSC) as u32;
        let mut list = Vec::with_capacity(cmap_num);
        for i in 0..cmap_num {
            let r = cmaps + CMAP_RECORD * i;
            let rel = |o: u32| if o == 0 { 0 } else { cmaps + o as usize };
            let kind = match u8_at(data, r + 18).ok_or_else(|| short("a cmap"))? {
                0 => CmapKind::Format0Full,
                1 => CmapKind::SparseFull,
                2 => CmapKind::Format0Tiny,
                3 => CmapKind::SparseTiny,
                k => return Err(format!("cmap {i} has the unknown type {k}")),
            };
            list.push(Cmap {
                range_start: u32_at(data, r).ok_or_else(|| short("a cmap"))?,
                range_length: u32::from(u16_at(data, r + 4).ok_or_else(|| short("a cmap"))?),
                glyph_id_start: u32::from(u16_at(data, r + 6).ok_or_else(|| short("a cmap"))?),
                unicode_list: rel(u32_at(data, r + 8).ok_or_else(|| short("a cmap"))?),
                ofs_list: rel(u32_at(data, r + 12).ok_or_else(|| short("a cmap"))?),
                list_length: usize::from(u16_at(data, r + 16).ok_or_else(|| short("a cmap"))?),
                kind,
            });
        }
        let kern = if kern == 0 {
            None
        } else if kern_classes != 1 {
            return Err("kerning by pairs: the firmware's fonts kern by classes".into());
        } else {
            let k = dsc + kern;
            let off = |i: usize| {
                u32_at(data, k + 4 * i)
                    .map(|o| k + o as usize)
                    .ok_or_else(|| short("kerning"))
            };
            Some(KernClasses {
                values: off(0)?,
                left: off(1)?,
                right: off(2)?,
                left_count: usize::from(u8_at(data, k + 12).ok_or_else(|| short("kerning"))?),
                right_count: usize::from(u8_at(data, k + 13).ok_or_else(|| short("kerning"))?),
            })
        };
        let font = Font {
            data,
            line_height,
            base_line,
            bpp,
            bitmap,
            glyphs,
            glyph_count,
            cmaps: list,
            kern,
            kern_scale,
            // lv_font_t's `kerning` bit: 0 is LV_FONT_KERNING_NORMAL.
            kerning: bits & 0b100 == 0,
        };
        font.check()?;
        Ok(font)
    }

    /// Every lookup the drawing can make stays inside the bytes: so the drawing can index
    /// without a second check failing.
    fn check(&self) -> Result<(), String> {
        for (i, c) in self.cmaps.iter().enumerate() {
            let width = match c.kind {
                CmapKind::Format0Full => 1,
                _ => 2,
            };
            let needs = |at: usize, n: usize| at != 0 && self.data.len() >= at + n;
            let ok = match c.kind {
                CmapKind::Format0Tiny => true,
                CmapKind::Format0Full => needs(c.ofs_list, c.range_length as usize),
                CmapKind::SparseTiny => needs(c.unicode_list, 2 * c.list_length),
                CmapKind::SparseFull => {
                    needs(c.unicode_list, 2 * c.list_length) && needs(c.ofs_list, width * c.list_length)
                }
            };
            if !ok {
                return Err(format!("cmap {i}'s lists lie outside the file"));
            }
        }
        if let Some(k) = &self.kern {
            let n = self.glyph_count as usize;
            if self.data.len() < k.left + n || self.data.len() < k.right + n {
                return Err("a kerning class map is shorter than the glyph table".into());
            }
            if self.data.len() < k.values + k.left_count * k.right_count {
                return Err("the kerning values lie outside the file".into());
            }
        }
        for id in 0..self.glyph_count {
            let (index, w, h) = self.raw(id).ok_or("a glyph descriptor lies outside the file")?;
            let bits = (w * h) as usize * usize::from(self.bpp);
            if self.data.len() < self.bitmap + index + bits.div_ceil(8) {
                return Err(format!("glyph {id}'s bitmap lies outside the file"));
            }
        }
        Ok(())
    }

    /// `(bitmap_index, box_w, box_h)` of glyph `id`.
    fn raw(&self, id: u32) -> Option<(usize, i32, i32)> {
        let g = self.glyphs + GLYPH_DSC * id as usize;
        let index = u32_at(self.data, g)? as usize;
        Some((
            index,
            i32::from(u16_at(self.data, g + 8)?),
            i32::from(u16_at(self.data, g + 10)?),
        ))
    }

    /// `get_glyph_dsc_id`: the first cmap whose range holds `letter` decides (0: no glyph).
    fn glyph_id(&self, letter: u32) -> u32 {
        if letter == 0 {
            return 0;
        }
        for c in &self.cmaps {
            let rcp = letter.wrapping_sub(c.range_start);
            if rcp >= c.range_length {
                continue;
            }
            let search = || {
                let key = rcp as u16;
                let (mut lo, mut hi) = (0, c.list_length);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match u16_at(self.data, c.unicode_list + 2 * mid)
                        .unwrap_or(u16::MAX)
                        .cmp(&key)
                    {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Some(mid),
                    }
                }
                None
            };
            let id = match c.kind {
                CmapKind::Format0Tiny => c.glyph_id_start + rcp,
                CmapKind::Format0Full => {
                    let ofs = u32::from(u8_at(self.data, c.ofs_list + rcp as usize).unwrap_or(0));
                    // A 0 past the first position marks a missing letter.
                    if ofs == 0 && letter != c.range_start {
                        continue;
                    }
                    c.glyph_id_start + ofs
                }
                CmapKind::SparseTiny => search().map_or(0, |i| c.glyph_id_start + i as u32),
                CmapKind::SparseFull => search().map_or(0, |i| {
                    c.glyph_id_start + u32::from(u16_at(self.data, c.ofs_list + 2 * i).unwrap_or(0))
                }),
            };
            return if id < self.glyph_count { id } else { 0 };
        }
        0
    }

    fn kern_value(&self, left: u32, right: u32) -> i32 {
        let Some(k) = &self.kern else { return 0 };
        let l = usize::from(u8_at(self.data, k.left + left as usize).unwrap_or(0));
        let r = usize::from(u8_at(self.data, k.right + right as usize).unwrap_or(0));
        if l == 0 || r == 0 {
            return 0;
        }
        let v = u8_at(self.data, k.values + (l - 1) * k.right_count + (r - 1)).unwrap_or(0);
        i32::from(v as i8)
    }

    /// Whether the font has a glyph for `c`.
    pub fn has(&self, c: char) -> bool {
        self.glyph_id(u32::from(c)) != 0
    }

    /// `lv_font_get_glyph_dsc_fmt_txt`: the glyph of `letter` followed by `next` (kerning), or
    /// `None` when the font has none (the firmware has no placeholder: `CONFIG_LV_USE_FONT_
    /// PLACEHOLDER=n`, so a missing letter takes no room and draws nothing).
    pub fn glyph(&self, letter: char, next: Option<char>) -> Option<Glyph> {
        let tab = letter == '\t';
        let id = self.glyph_id(if tab { 32 } else { u32::from(letter) });
        if id == 0 {
            return None;
        }
        let g = self.glyphs + GLYPH_DSC * id as usize;
        let kv = match next.map(|n| self.glyph_id(u32::from(n))) {
            Some(next) if self.kerning && next != 0 => (self.kern_value(id, next) * self.kern_scale) >> 4,
            _ => 0,
        };
        let mut adv = u32_at(self.data, g + 4)? as i32;
        if tab {
            adv *= 2;
        }
        let (_, box_w, box_h) = self.raw(id)?;
        Some(Glyph {
            id,
            adv_w: (adv + kv + 8) >> 4,
            box_w: if tab { box_w * 2 } else { box_w },
            box_h,
            ofs_x: i32::from(i16_at(self.data, g + 12)?),
            ofs_y: i32::from(i16_at(self.data, g + 14)?),
        })
    }

    /// The glyph's coverage, `box_w × box_h` bytes row by row (0 transparent, 255 opaque).
    pub fn coverage(&self, g: &Glyph) -> Vec<u8> {
        let Some((index, w, h)) = self.raw(g.id) else {
            return Vec::new();
        };
        let n = (w * h) as usize;
        let bpp = usize::from(self.bpp);
        let start = self.bitmap + index;
        (0..n)
            .map(|i| {
                let bit = i * bpp;
                let byte = u8_at(self.data, start + bit / 8).unwrap_or(0);
                let v = (byte >> (8 - bpp - bit % 8)) & ((1u16 << bpp) - 1) as u8;
                match bpp {
                    1 => v * 255,
                    2 => v * 85,
                    4 => v * 17,
                    _ => v,
                }
            })
            .collect()
    }
}
