//! The screen in the HTML report (issue 27): each acceptance record's screen as a person saw
//! it, and a filmstrip of the screen at each change, as inline PNGs drawn by
//! `xiaozhi_sim::hw::picture` (docs/screen.md).

use std::fmt::Write as _;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::scenario::record::{ScenarioReport, ScreenShown};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::trace::Event;

use super::{esc, ms};

/// How many screen changes a filmstrip draws at most (the first ones; it says how many more).
const FILM_FRAMES: usize = 60;

/// The backlight's fade steps over the run, in time order (read once per filmstrip).
fn backlight_steps(r: &ScenarioReport) -> Vec<(SimTime, u8)> {
    r.trace
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            Event::BacklightStep { brightness, .. } => Some((e.at, brightness)),
            _ => None,
        })
        .collect()
}

/// The backlight at `t`: the last fade step at or before it; before the first one, 0 on a board
/// with a backlight (it fades up from dark after boot) and 100 without one.
fn backlight_at(steps: &[(SimTime, u8)], spec: &BoardSpec, t: SimTime) -> u8 {
    let dark = if spec.backlight.is_some() { 0 } else { 100 };
    match steps.partition_point(|(at, _)| *at <= t) {
        0 => dark,
        n => steps[n - 1].1,
    }
}

/// Small panels are drawn at twice their size, pixel for pixel.
fn scale(width: u32) -> u32 {
    if width <= 160 { 2 } else { 1 }
}

/// A screen as a person saw it, as an inline PNG (`None` without a display).
pub(super) fn screen_img(r: &ScenarioReport, shown: &ScreenShown, alt: &str) -> Option<String> {
    use base64::Engine as _;
    let screen = r.timeline.screen.as_ref()?;
    let frame = xiaozhi_sim::hw::picture::Frame {
        spec: &screen.spec,
        state: &shown.state,
        at: shown.at,
        brightness: shown.brightness,
    };
    let png = xiaozhi_sim::hw::picture::render_png(&frame)?;
    let d = &screen.spec.display;
    let scale = scale(d.width);
    Some(format!(
        "<img class=\"screen\" width=\"{}\" height=\"{}\" alt=\"{}\" src=\"data:image/png;base64,{}\">",
        d.width * scale,
        d.height * scale,
        esc(alt),
        base64::engine::general_purpose::STANDARD.encode(png)
    ))
}

/// The screen at each change over the run: a filmstrip of what a person saw.
pub(super) fn filmstrip(out: &mut String, r: &ScenarioReport) {
    let Some(screen) = r.timeline.screen.as_ref() else {
        return;
    };
    let changes = screen.log.changes();
    if changes.is_empty() {
        return;
    }
    let d = &screen.spec.display;
    let width = d.width * scale(d.width);
    let _ = writeln!(
        out,
        "<h3>Screen</h3>\n<p class=\"legend\">What the {}x{} display showed at each change (the twin's drawing of upstream's default layout, docs/screen.md), dimmed by the backlight as the eye sees it.</p>\n<div class=\"film\">",
        d.width, d.height
    );
    let steps = backlight_steps(r);
    for (t, state) in changes.iter().take(FILM_FRAMES) {
        let caption = format!(
            "{:.0} ms: {}",
            ms(*t),
            state.notification_at(*t).unwrap_or(&state.status)
        );
        let shown = ScreenShown {
            at: *t,
            state: state.clone(),
            brightness: backlight_at(&steps, &screen.spec, *t),
        };
        if let Some(img) = screen_img(r, &shown, &caption) {
            let _ = writeln!(
                out,
                "<figure style=\"width:{width}px\">{img}<figcaption>{}</figcaption></figure>",
                esc(&caption)
            );
        }
    }
    out.push_str("</div>\n");
    if changes.len() > FILM_FRAMES {
        let _ = writeln!(
            out,
            "<p class=\"legend\">… and {} later changes not drawn.</p>",
            changes.len() - FILM_FRAMES
        );
    }
}
