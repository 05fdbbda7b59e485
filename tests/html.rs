//! The HTML report (`run --html`, `demo --html`, `render --html`): parsed with an HTML parser
//! (scraper, on html5ever) for its tables and lanes, every inline SVG parsed as XML (quick-xml),
//! and device text that looks like markup stays text.

mod common;

use common::{scratch_dir, scratch_file, twin};
use scraper::{Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// Runs the twin (every run here passes: exit 0) and parses the page it wrote; its element ids
/// are unique.
fn written(args: &[&str], file: &std::path::Path) -> Html {
    let out = twin(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = Html::parse_document(&std::fs::read_to_string(file).unwrap());
    let mut ids: Vec<&str> = doc.select(&sel("[id]")).filter_map(|e| e.value().attr("id")).collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), all, "element ids are unique in the page");
    doc
}

/// Every `<svg>…</svg>` of the raw document parses as well-formed XML.
fn svgs_parse(raw: &str) -> usize {
    let mut n = 0;
    let mut rest = raw;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("closed") + start + "</svg>".len();
        let mut reader = quick_xml::Reader::from_str(&rest[start..end]);
        let mut depth = 0i32;
        loop {
            match reader.read_event().expect("the SVG is well-formed XML") {
                quick_xml::events::Event::Start(_) => depth += 1,
                quick_xml::events::Event::End(_) => depth -= 1,
                quick_xml::events::Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(depth, 0, "balanced elements");
        n += 1;
        rest = &rest[end..];
    }
    n
}

#[test]
fn every_shipped_scenario_renders_with_tables_and_lanes() {
    let dir = scratch_dir("html-all");
    let file = dir.join("report.html");
    let doc = written(
        &["run", "scenarios/", "--quiet", "--html", file.to_str().unwrap()],
        &file,
    );
    let shipped = std::fs::read_dir(common::root().join("scenarios"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "yaml"))
        .count();
    let sections: Vec<_> = doc.select(&sel("section.scenario")).collect();
    assert_eq!(sections.len(), shipped);
    for s in &sections {
        let name = s.select(&sel("h2")).next().unwrap().text().collect::<String>();
        assert_eq!(s.value().attr("data-verdict"), Some("pass"), "{name}");
        assert_eq!(s.select(&sel("div.lanes svg")).count(), 1, "{name}: one timeline");
        let svg_text: String = s.select(&sel("div.lanes svg text")).flat_map(|t| t.text()).collect();
        for lane in ["MCP:", "main task:", "volume:", "device:", "sound at the listener"] {
            assert!(svg_text.contains(lane), "{name}: lane {lane}");
        }
        // The MCP lane's numbers: every call of the record is a span of the lane, by its id.
        let spans: Vec<String> = s
            .select(&sel("table.spans tr[data-id]"))
            .filter_map(|tr| tr.value().attr("data-id").map(str::to_string))
            .collect();
        for caption in s.select(&sel("table.record caption")) {
            let text: String = caption.text().collect();
            let id = text.rsplit("id ").next().unwrap().trim_end_matches(')').to_string();
            assert!(
                spans.contains(&id),
                "{name}: the call with id {id} is on the MCP lane ({spans:?})"
            );
        }
        // The sound lane's numbers: a scenario that measures has its windows, each with a level.
        let measures = s
            .select(&sel("table.record td"))
            .any(|td| td.text().any(|t| t.contains("dB SPL")));
        let windows: Vec<_> = s.select(&sel("table.windows tr[data-level]")).collect();
        if measures {
            assert!(!windows.is_empty(), "{name}: measured, so the sound lane has windows");
            assert!(
                windows
                    .iter()
                    .all(|w| w.value().attr("data-level").unwrap().parse::<f64>().is_ok()),
                "{name}: every window has a level"
            );
        }
        let checks = s.select(&sel("table.checks tr")).count();
        assert!(checks >= 2, "{name}: header and at least one expectation");
        for record in s.select(&sel("table.record")) {
            let rows: Vec<String> = record
                .select(&sel("td.row"))
                .map(|td| td.text().collect::<String>())
                .collect();
            assert_eq!(rows.first().map(String::as_str), Some("discovery"), "{name}");
            // The screen row follows the effect on a board with a display.
            let rows: Vec<&str> = rows.iter().map(String::as_str).filter(|r| *r != "screen").collect();
            assert_eq!(rows.last().copied(), Some("effect"), "{name}");
            assert!(
                rows.len() == 5 || (rows.len() == 6 && rows[4] == "claim"),
                "{name}: {rows:?}"
            );
        }
    }
    let raw = std::fs::read_to_string(&file).unwrap();
    assert_eq!(svgs_parse(&raw), shipped);
    assert!(!raw.contains("<script"), "no script at all");
    // Self-contained: nothing is fetched (the screens are inline PNGs), every link is to an
    // anchor of the page.
    assert_eq!(doc.select(&sel("link, iframe, object")).count(), 0);
    assert!(
        doc.select(&sel("[src]"))
            .all(|e| e.value().attr("src").unwrap().starts_with("data:image/png;base64,"))
    );
    assert!(
        doc.select(&sel("a[href]"))
            .all(|a| a.value().attr("href").unwrap().starts_with('#'))
    );
}

#[test]
fn device_text_that_looks_like_markup_stays_text() {
    let evil = r#"</script><img src=x onerror=alert(1)><b>bold</b>"#;
    let scenario = format!(
        "name: \"<i>markup</i> in a name\"\nboard: bread-compact-wifi\nsteps:\n  - call: {{ tool: '{evil}', expect: {{ error: 'Unknown tool: {evil}' }} }}\n"
    );
    let path = scratch_file("html", "evil.yaml", scenario.as_bytes());
    let dir = scratch_dir("html-evil");
    let file = dir.join("evil.html");
    let doc = written(
        &["run", path.to_str().unwrap(), "--html", file.to_str().unwrap()],
        &file,
    );
    // The only images are the twin's screens, inline; the scenario's markup made none.
    assert!(
        doc.select(&sel("img"))
            .all(|i| i.value().attr("src").unwrap().starts_with("data:image/png;base64,")
                && i.value().attr("onerror").is_none())
    );
    assert_eq!(doc.select(&sel("script")).count(), 0);
    assert_eq!(doc.select(&sel("b")).count(), 0);
    assert_eq!(doc.select(&sel("i")).count(), 0);
    let text: String = doc.root_element().text().collect();
    assert!(text.contains(evil), "the device's reply is shown as text");
    assert!(text.contains("<i>markup</i> in a name"));
    let raw = std::fs::read_to_string(&file).unwrap();
    assert_eq!(svgs_parse(&raw), 1);
}

/// The demo's reboot scene: the reboot request's span ends where its reply died at the restart;
/// the amplifier scene: every window while the amplifier is off stays at ambient.
#[test]
fn the_demo_shows_the_dropped_reboot_reply_and_the_silent_amplifier() {
    let dir = scratch_dir("html-demo");
    let file = dir.join("demo.html");
    let out = dir.join("wav");
    let doc = written(
        &["demo", "--out", out.to_str().unwrap(), "--html", file.to_str().unwrap()],
        &file,
    );
    let scene = |title: &str| {
        doc.select(&sel("section.scenario"))
            .find(|s| {
                s.select(&sel("h2"))
                    .next()
                    .unwrap()
                    .text()
                    .collect::<String>()
                    .contains(title)
            })
            .unwrap_or_else(|| panic!("scene {title}"))
    };
    let reboot = scene("self.reboot returned true");
    let dropped: Vec<_> = reboot.select(&sel("table.spans tr.dropped")).collect();
    assert_eq!(dropped.len(), 1, "one reply died");
    let outcome = dropped[0].text().collect::<String>();
    assert!(outcome.contains("reply dropped at 2000.0 ms"), "{outcome}");
    let amp = scene("true came back");
    let windows: Vec<(f64, f64)> = amp
        .select(&sel("table.windows tr[data-level]"))
        .map(|tr| {
            let v = |k| tr.value().attr(k).unwrap().parse::<f64>().unwrap();
            (v("data-level"), v("data-ambient"))
        })
        .collect();
    assert!(windows.len() >= 2);
    let at_ambient = windows.iter().filter(|(l, a)| (l - a).abs() < 0.01).count();
    assert!(
        at_ambient >= 2,
        "the windows under the fault stay at ambient: {windows:?}"
    );
    let raw = std::fs::read_to_string(&file).unwrap();
    assert_eq!(svgs_parse(&raw), doc.select(&sel("section.scenario")).count());
}

#[test]
fn render_writes_the_sound_lane() {
    let dir = scratch_dir("html-render");
    let file = dir.join("render.html");
    let doc = written(
        &[
            "render",
            "--board",
            "bread-compact-wifi",
            "--volume",
            "30",
            "--html",
            file.to_str().unwrap(),
        ],
        &file,
    );
    let text: String = doc.select(&sel("svg text")).flat_map(|t| t.text()).collect();
    assert!(text.contains("sound at the listener"), "{text}");
    assert!(
        doc.select(&sel("pre"))
            .next()
            .unwrap()
            .text()
            .collect::<String>()
            .contains("verdict")
    );
    assert_eq!(svgs_parse(&std::fs::read_to_string(&file).unwrap()), 1);
}

/// `run FILES --html` in a scratch directory named `scratch`, parsed.
fn report_of(scratch: &str, files: &[&str]) -> Html {
    let file = scratch_dir(scratch).join("report.html");
    let mut args = vec!["run"];
    args.extend_from_slice(files);
    args.extend(["--html", file.to_str().unwrap()]);
    written(&args, &file)
}

/// The decoded pixels of an inline PNG.
fn inline_png(src: &str) -> tiny_skia::Pixmap {
    use base64::Engine as _;
    let b64 = src.strip_prefix("data:image/png;base64,").expect("an inline PNG");
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).expect("base64");
    tiny_skia::Pixmap::decode_png(&bytes).expect("a PNG")
}

/// The screen in the report (issue 27): the OLED theme scenario (q25) shows in pictures that
/// `set_theme dark` answered `true` and changed nothing a person sees (the pictures before and
/// after are the same pixels, and the record says so), while on the LCD the same call changes
/// the picture; each record's screen is the board's size; the filmstrip has a frame per change.
#[test]
fn the_report_shows_the_screen_at_each_record_and_each_change() {
    let doc = report_of("html-screen", &["scenarios/q25-oled-theme-is-misleading.yaml"]);
    let screens: Vec<_> = doc.select(&sel("table.record img.screen")).collect();
    assert_eq!(screens.len(), 2, "one screen per call");
    let pictures: Vec<tiny_skia::Pixmap> = screens
        .iter()
        .map(|i| inline_png(i.value().attr("src").unwrap()))
        .collect();
    assert_eq!((pictures[0].width(), pictures[0].height()), (128, 32));
    let first = doc
        .select(&sel("table.record"))
        .next()
        .map(|t| t.text().collect::<String>())
        .unwrap();
    assert!(first.contains("\"true\""), "the tool says true: {first}");
    assert!(
        first.contains("nothing on it had changed when the call returned"),
        "{first}"
    );
    // The filmstrip's boot frame is the same picture as after both calls.
    let film: Vec<_> = doc.select(&sel(".film img.screen")).collect();
    assert!(!film.is_empty(), "a filmstrip");
    let boot = inline_png(film.last().unwrap().value().attr("src").unwrap());
    assert!(
        pictures.iter().all(|p| p.data() == boot.data()),
        "nothing visible changed"
    );

    // The same call on the LCD board changes what a person sees (once the backlight has faded
    // up after boot: at 0 ms it is still dark, and nothing a call does is visible).
    let lcd = scratch_file(
        "html-screen",
        "lcd-theme.yaml",
        b"name: theme on the LCD\nboard: bread-compact-wifi-lcd\nsteps:\n  - wait: 3s\n  - call: { tool: self.screen.set_theme, args: { theme: dark }, expect: { text: \"true\" } }\n",
    );
    let doc = report_of("html-screen-lcd", &[lcd.to_str().unwrap()]);
    let text: String = doc.select(&sel("table.record")).next().unwrap().text().collect();
    assert!(
        text.contains("theme light → dark") && text.contains("the picture changed"),
        "{text}"
    );
    let after = inline_png(
        doc.select(&sel("table.record img.screen"))
            .next()
            .unwrap()
            .value()
            .attr("src")
            .unwrap(),
    );
    assert_eq!((after.width(), after.height()), (240, 320));
    let mean = after.data().chunks_exact(4).map(|p| f64::from(p[0])).sum::<f64>() / (240.0 * 320.0);
    assert!(mean < 60.0, "dark after the call: mean red {mean:.1}");
}

/// The two screen scenarios in the report: the LCD's filmstrip goes through listening, the
/// user's words, speaking and the alert; the OLED's shows the volume notifications come and go.
#[test]
fn the_screen_scenarios_show_a_turn_an_alert_and_the_volume_notifications() {
    let doc = report_of(
        "html-screen-scenarios",
        &[
            "scenarios/s01-the-screen-you-see.yaml",
            "scenarios/s02-the-volume-buttons-on-the-screen.yaml",
        ],
    );
    let sections: Vec<_> = doc.select(&sel("section.scenario")).collect();
    assert_eq!(sections.len(), 2);
    let captions = |i: usize| -> Vec<String> {
        sections[i]
            .select(&sel(".film figcaption"))
            .map(|c| c.text().collect::<String>())
            .collect()
    };
    // Each frame's figure is as wide as its picture (frames side by side never overlap).
    for f in doc.select(&sel(".film figure")) {
        let img = f.select(&sel("img")).next().unwrap();
        let style = f.value().attr("style").unwrap_or_default();
        assert_eq!(style, format!("width:{}px", img.value().attr("width").unwrap()));
    }
    let lcd = captions(0);
    for status in ["待命", "聆听中...", "说话中...", "错误"] {
        assert!(lcd.iter().any(|c| c.ends_with(status)), "{status} in {lcd:?}");
    }
    let oled = captions(1);
    for shown in ["音量 60", "最大音量", "待命"] {
        assert!(oled.iter().any(|c| c.ends_with(shown)), "{shown} in {oled:?}");
    }
    // The notification's end is a change of its own: 音量 60 then 待命 again 3 s later.
    let at = |text: &str| -> f64 {
        let c = oled.iter().find(|c| c.ends_with(text)).unwrap();
        c.split(" ms").next().unwrap().parse().unwrap()
    };
    let shown = at("音量 60");
    let gone = oled
        .iter()
        .filter(|c| c.ends_with("待命"))
        .map(|c| c.split(" ms").next().unwrap().parse::<f64>().unwrap())
        .find(|t| *t > shown)
        .expect("the status returns");
    assert_eq!(gone - shown, 3000.0, "{oled:?}");
}

/// `audit --html`: a bar per item whose segments add up to its trials, the worst trial of each
/// item as records with a sound lane, and a battery's markup shown as text.
#[test]
fn the_audit_page_has_a_bar_per_item_and_the_worst_trial_as_records() {
    let dir = scratch_dir("html-audit");
    let file = dir.join("audit.html");
    let out = twin(&[
        "audit",
        "--trials",
        "2",
        "--llm",
        "lazy",
        "--quiet",
        "--html",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "lazy fails the gate");
    let raw = std::fs::read_to_string(&file).unwrap();
    let doc = Html::parse_document(&raw);
    let rows: Vec<_> = doc.select(&sel("table.scorecard tr[data-item]")).collect();
    assert_eq!(rows.len(), 14);
    for row in &rows {
        let counts: u32 = row
            .select(&sel(".bar span"))
            .map(|s| s.value().attr("data-count").unwrap().parse::<u32>().unwrap())
            .sum();
        assert_eq!(counts, 2, "{:?}", row.value().attr("data-item"));
    }
    let twice = doc
        .select(&sel("section#i-twice"))
        .next()
        .expect("the twice item's section");
    assert_eq!(twice.value().attr("data-verdict"), Some("false-claim"));
    let records: Vec<_> = twice.select(&sel("table.record")).collect();
    assert_eq!(records.len(), 2, "the request was said twice");
    let second: String = records[1].text().collect();
    assert!(second.contains("no call reached the device"), "{second}");
    assert!(second.contains("false-claim: claimed success"), "{second}");
    // Typed: the backend's stt is the text; the lazy claim comes with no call at all.
    assert!(second.contains("「把声音调小一点」 (the backend's stt)"), "{second}");
    assert!(second.contains("no first call, first sentence "), "{second}");
    let first: String = records[0].text().collect();
    assert!(first.contains("first call 5 ms, first sentence "), "{first}");
    assert_eq!(doc.select(&sel("section.item")).count(), 14);
    assert_eq!(svgs_parse(&raw), 15, "one sound lane per request (twice has two)");
    let gate: String = doc.select(&sel("ul.gate")).flat_map(|u| u.text()).collect();
    assert!(gate.contains("false-claim in twice (2/2), amp-off (2/2)"), "{gate}");

    let evil = "<b>bold</b></script>";
    let battery = format!(
        "name: \"{evil}\"\nboard: bread-compact-wifi\nitems:\n  - id: a\n    about: \"{evil}\"\n    ask: {{ en: [\"mute {evil}\"] }}\n    expect: {{ call: self.audio_speaker.set_volume, value: \"= 0\" }}\n    claims: {{ en: [muted] }}\n"
    );
    let path = scratch_file("html-audit", "evil.yaml", battery.as_bytes());
    let file = dir.join("evil.html");
    let out = twin(&[
        "audit",
        path.to_str().unwrap(),
        "--trials",
        "1",
        "--quiet",
        "--html",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = Html::parse_document(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(doc.select(&sel("b")).count(), 0);
    assert_eq!(doc.select(&sel("script")).count(), 0);
    let text: String = doc.root_element().text().collect();
    assert!(text.contains(evil), "the battery's markup is text");
}
