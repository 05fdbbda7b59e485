//! The firmware's glyph data as the twin reads it (issue 41): every shipped font parses and
//! checks, the two conversion paths agree (the built-in fonts converted from the component's C
//! sources by `sim/assets/lvgl/make.py`, the assets' fonts as the component's own converter made
//! them), and the code points the layouts draw are the component's.

use xiaozhi_sim::lvgl::canvas::{Align, Area, Canvas, line_width, mix16, rgb565};
use xiaozhi_sim::lvgl::{emoji, font};

#[test]
fn every_shipped_font_parses_with_its_upstream_metrics() {
    let names: Vec<&str> = font::names().collect();
    assert_eq!(names.len(), 15);
    for name in &names {
        let f = font::by_name(name).unwrap_or_else(|| panic!("{name} parses"));
        let bpp: u8 = name
            .rsplit('_')
            .next()
            .and_then(|b| b.parse().ok())
            .expect("bpp in the name");
        assert_eq!(f.bpp, bpp, "{name}");
        assert!(f.line_height > 0 && f.base_line.abs() < f.line_height, "{name}");
    }
    // The line metrics as the component's sources state them (font_noto_sans_basic_16_4.c:
    // `.line_height = 23, .base_line = 7`; font_material_symbols_16_4.c: 16 and 0;
    // font_noto_emoji_30_4.c: 32 and 6) and the 14 px profile's fitted line box (manifest.json:
    // line_height 16, base_line 2, for basic and common alike).
    let metrics = |n: &str| {
        let f = font::by_name(n).expect("shipped");
        (f.line_height, f.base_line)
    };
    assert_eq!(metrics("font_noto_sans_basic_16_4"), (23, 7));
    assert_eq!(metrics("font_material_symbols_16_4"), (16, 0));
    assert_eq!(metrics("font_noto_emoji_30_4"), (32, 6));
    assert_eq!(metrics("font_noto_sans_basic_14_1"), (16, 2));
    assert_eq!(metrics("font_noto_sans_common_14_1"), (16, 2));
}

/// The first glyph of font_noto_sans_basic_16_4.c after the space: U+0021 "!" with its bitmap
/// `0xaf, 0xa, 0xf0, 0x9e, …` (2 px wide, 4 bits a pixel, rows packed without padding).
#[test]
fn a_glyph_reads_as_its_c_source_says() {
    let f = font::by_name("font_noto_sans_basic_16_4").expect("shipped");
    let g = f.glyph('!', None).expect("has !");
    assert_eq!((g.box_w, g.box_h), (3, 12), "{g:?}");
    let cov = f.coverage(&g);
    // 0xaf 0x0a 0xf0 0x9e: a, f, 0 | a, f, 0 | 9, e, …  ×17 each.
    assert_eq!(&cov[..9], &[170, 255, 0, 170, 255, 0, 153, 238, 0]);
    assert_eq!(
        f.glyph('\u{4e00}', None).map(|g| g.id > 0),
        Some(true),
        "一 is in basic"
    );
    assert!(f.glyph('\u{9f98}', None).is_none(), "龘 is not");
}

/// Where both a built-in and an assets' font of one profile draw a letter from the same Noto
/// source at the same size, they hold the same box and the same coverage, so the two paths
/// (make.py's conversion of the C source, the component's own cbin) must agree on them. (A few
/// CJK letters differ between the tiers, e.g. 话, whose `common` glyph is one row taller: the
/// tiers merge their sources differently; they are left out.)
#[test]
fn the_converted_and_the_shipped_cbin_fonts_agree() {
    for size in ["16_4", "20_4", "30_4"] {
        let basic = font::by_name(&format!("font_noto_sans_basic_{size}")).expect("shipped");
        let common = font::by_name(&format!("font_noto_sans_common_{size}")).expect("shipped");
        let (letters, mut same) = ("AaBbgjQ0123456789，。说中待命聆听", 0);
        for c in letters.chars() {
            let (Some(b), Some(k)) = (basic.glyph(c, None), common.glyph(c, None)) else {
                panic!("{size}: {c} in both");
            };
            assert_eq!(
                (b.adv_w, b.box_w, b.box_h, b.ofs_x),
                (k.adv_w, k.box_w, k.box_h, k.ofs_x),
                "{size} {c}"
            );
            if basic.coverage(&b) == common.coverage(&k) {
                same += 1;
            }
        }
        assert_eq!(same, letters.chars().count(), "{size}: letters with the same coverage");
    }
}

/// Kerning applies between letters of one font: the firmware's Noto Sans kerns no ASCII pair,
/// but kana with punctuation (font_noto_sans_basic_20_4.c's classes give う followed by ，the
/// value −32, scaled by `kern_scale` 16 / 16: −2 px), as lv_font_get_glyph_dsc_fmt_txt applies it.
#[test]
fn kerning_narrows_a_pair() {
    let f = font::by_name("font_noto_sans_basic_20_4").expect("shipped");
    let alone = f.glyph('う', None).expect("う").adv_w;
    assert_eq!(f.glyph('う', Some('，')).expect("う").adv_w, alone - 2);
    assert_eq!(line_width("う，", f), line_width("う", f) + line_width("，", f) - 2);
    assert_eq!(line_width("AV", f), line_width("A", f) + line_width("V", f));
}

/// The blend is LVGL's 5-bit mix: black over white at 50 % is the 16-bit grey LVGL makes.
#[test]
fn the_blend_is_lvgls() {
    let (white, black) = (rgb565(255, 255, 255), rgb565(0, 0, 0));
    assert_eq!(mix16(black, white, 255), black);
    assert_eq!(mix16(black, white, 0), white);
    // mix (128 + 4) >> 3 = 16 of 32: each channel halves, rounding down.
    assert_eq!(mix16(black, white, 128), (15 << 11) | (31 << 5) | 15);
    let mut c = Canvas::new(40, 30, white);
    let f = font::by_name("font_noto_sans_basic_16_4").expect("shipped");
    let screen = c.screen();
    c.label("说", f, Area::at(0, 0, 40, 30), &screen, Align::Left, black);
    let inked = (0..30)
        .flat_map(|y| (0..40).map(move |x| (x, y)))
        .filter(|&(x, y)| c.get(x, y) != Some(white))
        .count();
    let g = f.glyph('说', None).expect("说");
    let cov = f.coverage(&g).iter().filter(|&&a| a > 0).count();
    // Each covered pixel changes the white unless its coverage is below one 5-bit step.
    assert!(inked <= cov && inked * 10 >= cov * 9, "inked {inked} of {cov}");
}

/// The code points the layouts draw are the component's mappings (mappings/*.json).
#[test]
fn the_emoji_collections_decode_with_their_sizes() {
    for (collection, width) in [
        ("noto-color-emoji_32", 32),
        ("noto-color-emoji_64", 64),
        ("noto-color-emoji_128", 128),
    ] {
        let img = emoji::image(collection, "happy").expect("happy");
        assert_eq!(img.width, width);
        assert_eq!(img.rgba.len(), (img.width * img.height * 4) as usize);
        assert_eq!(&img.rgba[..4], &[0, 0, 0, 0], "a transparent corner");
    }
    assert!(emoji::image("noto-color-emoji_32", "no-such-emotion").is_none());
    // Every emotion of the component's mapping, in every collection.
    let mapping: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(include_str!("../assets/lvgl/mappings/emoji.json")).expect("JSON");
    for collection in emoji::collections() {
        for emotion in mapping.keys() {
            assert!(emoji::image(collection, emotion).is_some(), "{collection} {emotion}");
        }
    }
    assert_eq!(emoji::collections().count(), 3);
}
