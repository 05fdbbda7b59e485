//! The screen as pictures (issue 27, step 2): golden PNGs of a few states per display kind
//! (LCD 240×320 and 320×240, OLED 128×64 and 128×32) compared byte for byte, and the font's
//! coverage of every text the firmware puts on the screen. `XIAOZHI_BLESS=1 cargo test --test
//! screen_png` rewrites the golden files (review them as pictures before committing).

use std::path::PathBuf;

use xiaozhi_sim::hw::screen::{self, ScreenCall, ScreenLog};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_twin::boards::load;
use xiaozhi_twin::screen_png::{Frame, has_glyph, render_png};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/screen")
}

fn t(ms: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_millis(ms)
}

/// The screen after a voice turn's calls up to `upto` (0 idle, 1 listening, 2 speaking, 3 an
/// alert, 4 a volume notification), with `theme`.
fn story(theme: &str, upto: u8) -> ScreenLog {
    let mut log = ScreenLog::default();
    log.record(
        t(0),
        ScreenCall::Constructed {
            theme: Some(theme.into()),
        },
    );
    log.record(t(1), ScreenCall::SetStatus(screen::STANDBY.into()));
    log.record(t(1), ScreenCall::SetEmotion("neutral".into()));
    if upto >= 1 {
        log.record(t(10), ScreenCall::SetStatus(screen::LISTENING.into()));
        log.record(
            t(20),
            ScreenCall::SetChatMessage {
                role: "user".into(),
                content: "声音小一点".into(),
            },
        );
    }
    if upto >= 2 {
        log.record(t(30), ScreenCall::SetEmotion("happy".into()));
        log.record(t(30), ScreenCall::SetStatus(screen::SPEAKING.into()));
        log.record(
            t(40),
            ScreenCall::SetChatMessage {
                role: "assistant".into(),
                content: "好的，已经帮你调小了".into(),
            },
        );
    }
    if upto >= 3 {
        log.record(t(50), ScreenCall::SetStatus("错误".into()));
        log.record(t(50), ScreenCall::SetEmotion("sad".into()));
        log.record(
            t(50),
            ScreenCall::SetChatMessage {
                role: "system".into(),
                content: "无法连接服务，请稍后再试".into(),
            },
        );
    }
    if upto >= 4 {
        log.record(
            t(60),
            ScreenCall::ShowNotification {
                text: format!("{}40", screen::VOLUME),
                duration_ms: screen::NOTIFICATION_MS,
            },
        );
    }
    log
}

fn check(name: &str, board: &str, log: &ScreenLog, brightness: u8, failures: &mut Vec<String>) {
    let spec = load(board).expect("board");
    let state = log.at(t(100));
    let png = render_png(&Frame {
        spec: &spec,
        state: &state,
        at: t(100),
        brightness,
    })
    .expect("renders")
    .expect("the board has a display");
    let path = golden_dir().join(format!("{name}.png"));
    if std::env::var_os("XIAOZHI_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, &png).expect("write golden");
        return;
    }
    match std::fs::read(&path) {
        Ok(golden) if golden == png => {}
        Ok(_) => {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"));
            std::fs::write(&out, &png).expect("write actual");
            failures.push(format!(
                "{name}: differs from {} (this run: {})",
                path.display(),
                out.display()
            ));
        }
        Err(e) => failures.push(format!("{name}: {}: {e}", path.display())),
    }
}

#[test]
fn each_display_kind_renders_its_states_as_the_golden_pictures() {
    let mut failures = Vec::new();
    for (kind, board) in [
        ("lcd-240x320", "bread-compact-wifi-lcd"),
        ("lcd-320x240", "lckfb/szpi-esp32c3"),
        ("oled-128x64", "bread-compact-wifi-128x64"),
        ("oled-128x32", "bread-compact-wifi"),
    ] {
        let lcd = kind.starts_with("lcd");
        for (step, what) in [
            (0, "idle"),
            (1, "listening"),
            (2, "speaking"),
            (3, "alert"),
            (4, "volume"),
        ] {
            let theme = if lcd { "light" } else { "dark" };
            check(
                &format!("{kind}-{what}"),
                board,
                &story(theme, step),
                100,
                &mut failures,
            );
        }
        if lcd {
            check(&format!("{kind}-dark"), board, &story("dark", 2), 100, &mut failures);
            check(
                &format!("{kind}-brightness-10"),
                board,
                &story("light", 2),
                10,
                &mut failures,
            );
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The pictures say what they should: a dark LCD is mostly dark, brightness 10 is dim, an OLED
/// is black and white only (checked on the decoded pixels, not only the bytes).
#[test]
fn the_pictures_follow_theme_brightness_and_monochrome() {
    let spec = load("bread-compact-wifi-lcd").expect("board");
    let mean = |theme: &str, brightness: u8| -> f64 {
        let state = story(theme, 2).at(t(100));
        let png = render_png(&Frame {
            spec: &spec,
            state: &state,
            at: t(100),
            brightness,
        })
        .unwrap()
        .unwrap();
        let pix = tiny_skia_decode(&png);
        pix.iter().map(|&v| f64::from(v)).sum::<f64>() / pix.len() as f64
    };
    let (light, dark, dim) = (mean("light", 100), mean("dark", 100), mean("light", 10));
    assert!(light > 200.0 && dark < 60.0, "light {light}, dark {dark}");
    assert!(
        (dim - light / 10.0).abs() < 2.0,
        "brightness 10 is a tenth of the light: {dim} vs {light}"
    );
    let oled = load("bread-compact-wifi-128x64").expect("board");
    let state = story("dark", 2).at(t(100));
    let png = render_png(&Frame {
        spec: &oled,
        state: &state,
        at: t(100),
        brightness: 100,
    })
    .unwrap()
    .unwrap();
    assert!(
        tiny_skia_decode(&png).iter().all(|&v| v == 0 || v == 255),
        "1 bit a pixel"
    );
}

/// Every text the firmware's screen calls use in the twin, and the test sentences, have glyphs.
#[test]
fn the_font_covers_the_firmwares_screen_texts() {
    let texts = [
        screen::STANDBY,
        screen::CONNECTING,
        screen::LISTENING,
        screen::SPEAKING,
        screen::VOLUME,
        screen::MAX_VOLUME,
        screen::MUTED,
        "错误警告信息无法连接服务，请稍后再试好的已经帮你调小了声音",
        "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ []().,!?",
    ];
    let missing: Vec<char> = texts
        .iter()
        .flat_map(|s| s.chars())
        .filter(|c| !has_glyph(*c))
        .collect();
    assert!(missing.is_empty(), "no glyph for {missing:?}");
}

/// The RGB bytes of a PNG (tiny-skia's own decoder, as the renderer encodes with it).
fn tiny_skia_decode(png: &[u8]) -> Vec<u8> {
    let p = tiny_skia::Pixmap::decode_png(png).expect("decodes");
    p.data().chunks_exact(4).flat_map(|px| px[..3].to_vec()).collect()
}
