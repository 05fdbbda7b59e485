//! The HTML report of `run --html` / `demo --html` / `render --html`: one self-contained file
//! (inline CSS and SVG, no script, no network) with, per scenario, the verdict, the acceptance
//! records as tables, every expectation with its line, and a timeline in virtual time drawn
//! with plotters' SVG backend.
//!
//! Timeline lanes: MCP (each request id as a span from delivery to reply; a reply dropped where
//! it died; overtaking shows as spans ending out of order), main task (batches, busy periods),
//! volume (the value set when the callback ran, readbacks as points), device (state, boots,
//! reboots, power cuts) and sound (dB SPL of every measured window against the ambient level and
//! the audible threshold, faults shaded). Every text that comes from a scenario or a device is
//! escaped; labels drawn into the SVG are reduced to plain characters first.

use std::fmt::Write as _;

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use xiaozhi_sim::audio::measure::Measurement;
use xiaozhi_sim::cjson;
use xiaozhi_sim::scenario::record::{Record, ScenarioReport};

pub mod audit;
mod screen;
use screen::{filmstrip, screen_img};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::trace::Event;

/// Width of a timeline in pixels.
const WIDTH: u32 = 960;
/// Height of one lane in pixels.
const LANE: u32 = 120;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\
h1{font-size:1.6em}h2{margin-top:2em;border-top:2px solid #ccc;padding-top:.6em}\
.verdict{font-weight:bold;padding:.1em .5em;border-radius:3px}\
.pass{background:#d8f5d8;color:#145214}.fail{background:#fadada;color:#7a1010}\
table{border-collapse:collapse;margin:.6em 0;max-width:100%}\
td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;text-align:left}\
th{background:#f3f3f3}td.row{font-weight:bold;white-space:nowrap}\
pre,code{font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}\
.lanes svg{display:block;max-width:100%;height:auto;border:1px solid #ddd}\
.legend{color:#555;font-size:12px}\
.film{display:flex;flex-wrap:wrap;gap:.6em;margin:.6em 0}.film figure{margin:0;font-size:12px}\
img.screen{image-rendering:pixelated;border:1px solid #999;background:#000;display:block}";

/// Escapes text for HTML element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A label safe to hand to the SVG backend (which writes text as given).
fn label(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " .,:_-+=()/%#".contains(c) {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The whole document for `reports`.
pub fn document(title: &str, reports: &[ScenarioReport]) -> Result<String> {
    let passed = reports.iter().filter(|r| r.passed).count();
    let mut out = String::with_capacity(64 * 1024 * reports.len().max(1));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n<p>{passed} of {} scenarios passed. Times are virtual (the twin's clock), in milliseconds from power-on.</p>\n<ul class=\"index\">",
        esc(title),
        esc(title),
        reports.len()
    );
    for (i, r) in reports.iter().enumerate() {
        let _ = write!(
            out,
            "<li><a href=\"#s{i}\">{}</a> <span class=\"verdict {}\">{}</span></li>",
            esc(&r.name),
            if r.passed { "pass" } else { "fail" },
            if r.passed { "PASS" } else { "FAIL" }
        );
    }
    out.push_str("</ul>\n");
    for (i, r) in reports.iter().enumerate() {
        scenario(&mut out, i, r)?;
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

fn scenario(out: &mut String, i: usize, r: &ScenarioReport) -> Result<()> {
    let verdict = if r.passed { "pass" } else { "fail" };
    let _ = write!(
        out,
        "<section class=\"scenario\" id=\"s{i}\" data-verdict=\"{verdict}\">\n<h2>{}</h2>\n<p><span class=\"verdict {verdict}\">{}</span> {} · board {} · firmware {} · seed {}{}</p>\n",
        esc(&r.name),
        verdict.to_uppercase(),
        esc(&r.file),
        esc(&r.board),
        esc(&r.firmware),
        r.seed,
        r.over
            .as_deref()
            .map(|o| format!(" · over {}", esc(o)))
            .unwrap_or_default()
    );
    if !r.description.is_empty() {
        let _ = writeln!(out, "<p class=\"description\">{}</p>", esc(&r.description));
    }
    out.push_str("<h3>Timeline</h3>\n<div class=\"lanes\">");
    let l = lanes(r);
    out.push_str(&timeline_svg(r, &l)?);
    out.push_str(
        "</div>\n<p class=\"legend\">MCP: one row per request id, from delivery to reply (red cross: the reply was dropped there; grey: no reply by the end). Main task: batches (ticks) and blocking delays (bars). Volume: the value set when the callback ran (line) and readbacks (dots). Device: state, boots (green), restarts (red), power cuts (black), WebSocket opened (blue dot) and closed (orange dot). Sound: device level at the listener per measured window (with ambient), the ambient level (dashed) and the audible threshold, ambient + margin (dotted; the same line when the margin is 0); shaded: a fault is set.</p>\n",
    );
    lane_tables(out, r, &l);
    filmstrip(out, r);
    if !r.records.is_empty() {
        out.push_str("<h3>Acceptance records</h3>\n");
        for rec in &r.records {
            record(out, r, rec);
        }
    }
    out.push_str("<h3>Expectations</h3>\n<table class=\"checks\"><tr><th>step</th><th>line</th><th>expectation</th><th>result</th><th>observed</th></tr>\n");
    for c in &r.checks {
        let _ = writeln!(
            out,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            if c.passed { "pass" } else { "fail" },
            c.step,
            c.line,
            esc(&c.what),
            if c.passed { "pass" } else { "FAIL" },
            esc(&c.detail)
        );
    }
    out.push_str("</table>\n");
    for u in &r.unobserved {
        let _ = writeln!(out, "<p class=\"unobserved\">not judged: {}</p>", esc(u));
    }
    out.push_str("</section>\n");
    Ok(())
}

fn record(out: &mut String, r: &ScenarioReport, rec: &Record) {
    let _ = writeln!(
        out,
        "<table class=\"record\"><caption>call <code>{}</code> (step {}, id {})</caption>",
        esc(&rec.tool),
        rec.step,
        rec.id
    );
    let mut rows = vec![
        ("discovery", rec.discovery.clone()),
        ("decision", rec.decision.clone()),
        ("parameters", rec.parameters.clone()),
        ("response", rec.response.clone()),
    ];
    if let Some(c) = &rec.claim {
        rows.push(("claim", c.row()));
    }
    rows.push(("effect", rec.effect.clone()));
    for (name, text) in rows {
        let _ = writeln!(out, "<tr><td class=\"row\">{name}</td><td>{}</td></tr>", esc(&text));
    }
    if let Some(text) = &rec.screen {
        let img = rec
            .screen_shown
            .as_ref()
            .and_then(|s| screen_img(r, s, &format!("the screen after call {}", rec.id)))
            .unwrap_or_default();
        let _ = writeln!(out, "<tr><td class=\"row\">screen</td><td>{img}{}</td></tr>", esc(text));
    }
    out.push_str("</table>\n");
}

/// One request id's life: delivered, replied or dropped.
struct Span {
    id: i64,
    from: f64,
    to: Option<f64>,
    dropped: Option<f64>,
}

/// The id the firmware takes from a payload: cJSON's parse (as `ParseMessage` reads it) and
/// `valueint`, so coerced or duplicate ids pair requests with replies as the device did.
fn id_of(payload: &[u8]) -> Option<i64> {
    cjson::with_parsed(payload, cjson::Terminator::Nul, |root| {
        let id = root.ok()?.get(b"id")?;
        id.is_number().then(|| i64::from(id.valueint()))
    })
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}

/// The facts the lanes draw, read from the report.
struct Lanes {
    end: f64,
    spans: Vec<Span>,
    batches: Vec<f64>,
    busy: Vec<(f64, f64)>,
    volume: Vec<(f64, f64)>,
    readbacks: Vec<(f64, f64)>,
    states: Vec<(f64, String)>,
    boots: Vec<f64>,
    restarts: Vec<f64>,
    cuts: Vec<f64>,
    /// Socket opened (`true`) or closed (`false`).
    sockets: Vec<(f64, bool)>,
}

fn lanes(r: &ScenarioReport) -> Lanes {
    let mut l = Lanes {
        end: 1000.0,
        spans: Vec::new(),
        batches: Vec::new(),
        busy: Vec::new(),
        volume: Vec::new(),
        readbacks: Vec::new(),
        states: vec![(0.0, "starting".into())],
        boots: Vec::new(),
        restarts: Vec::new(),
        cuts: Vec::new(),
        sockets: Vec::new(),
    };
    for (t, payload) in &r.timeline.requests {
        if let Some(id) = id_of(payload) {
            l.spans.push(Span {
                id,
                from: ms(*t),
                to: None,
                dropped: None,
            });
        }
    }
    // A reply closes the earliest open span of its id (ids may repeat).
    let open = |spans: &[Span], id: i64| {
        spans
            .iter()
            .position(|s| s.id == id && s.to.is_none() && s.dropped.is_none())
    };
    for e in r.trace.events() {
        let t = ms(e.at);
        match &e.kind {
            Event::ReplySent { payload } => {
                if let Some(i) = id_of(payload).and_then(|id| open(&l.spans, id)) {
                    l.spans[i].to = Some(t);
                }
            }
            Event::ReplyDropped { payload, .. } => {
                if let Some(i) = id_of(payload).and_then(|id| open(&l.spans, id)) {
                    l.spans[i].dropped = Some(t);
                }
            }
            _ => {}
        }
    }
    for e in r.trace.events() {
        let t = ms(e.at);
        l.end = l.end.max(t);
        match &e.kind {
            Event::BatchStarted { .. } => l.batches.push(t),
            Event::TaskDelayed { ms } => l.busy.push((t, t + *ms as f64)),
            Event::VolumeChanged { volume } => l.volume.push((t, f64::from(*volume))),
            Event::StateChanged { to, .. } => l.states.push((t, to.name().to_string())),
            Event::Booted { .. } => l.boots.push(t),
            Event::Restarted => l.restarts.push(t),
            Event::PowerCut => {
                l.cuts.push(t);
                l.states.push((t, "off".into()));
            }
            Event::AudioChannelOpened { .. } => l.sockets.push((t, true)),
            Event::WebSocketDestroyed { .. } => l.sockets.push((t, false)),
            _ => {}
        }
    }
    for s in &r.steps {
        l.end = l.end.max(s.at_ms);
        if s.kind == xiaozhi_sim::scenario::StepKind::Readback {
            let value = s.replies.iter().find_map(|p| readback_volume(p));
            if let Some(v) = value {
                l.readbacks.push((s.at_ms, v));
            }
        }
    }
    for w in &r.timeline.windows {
        l.end = l.end.max(w.to_ms);
    }
    for s in &l.spans {
        l.end = l.end.max(s.to.or(s.dropped).unwrap_or(s.from));
    }
    l.end *= 1.02;
    l
}

/// `audio_speaker.volume` from a `get_device_status` reply.
fn readback_volume(reply: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(reply).ok()?;
    let text = v["result"]["content"][0]["text"].as_str()?;
    let status: serde_json::Value = serde_json::from_str(text).ok()?;
    status["audio_speaker"]["volume"].as_f64()
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the timeline: {e}")
}

/// The MCP and sound lanes as tables too (what the picture shows, in numbers).
fn lane_tables(out: &mut String, r: &ScenarioReport, l: &Lanes) {
    out.push_str("<details><summary>MCP requests and sound windows in numbers</summary>\n<table class=\"spans\"><tr><th>id</th><th>delivered (ms)</th><th>outcome</th></tr>\n");
    for s in &l.spans {
        let outcome = match (s.to, s.dropped) {
            (Some(t), _) => format!("replied at {t:.1} ms"),
            (None, Some(d)) => format!("reply dropped at {d:.1} ms"),
            (None, None) => "no reply".to_string(),
        };
        let class = match (s.to, s.dropped) {
            (Some(_), _) => "replied",
            (None, Some(_)) => "dropped",
            (None, None) => "unanswered",
        };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\" data-id=\"{}\"><td>{}</td><td>{:.1}</td><td>{outcome}</td></tr>",
            s.id, s.id, s.from
        );
    }
    out.push_str("</table>\n<table class=\"windows\"><tr><th>from (ms)</th><th>to (ms)</th><th>device dB SPL</th><th>with ambient</th><th>ambient dBA</th><th>verdict</th></tr>\n");
    for w in &r.timeline.windows {
        let _ = writeln!(
            out,
            "<tr data-level=\"{:.2}\" data-ambient=\"{:.2}\"><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td></tr>",
            w.combined_db(),
            w.ambient_dba,
            w.from_ms,
            w.to_ms,
            w.spl_db.map_or("silent".to_string(), |x| format!("{x:.2}")),
            w.combined_db(),
            w.ambient_dba,
            w.verdict.name()
        );
    }
    out.push_str("</table></details>\n");
}

/// The five lanes as one inline SVG.
fn timeline_svg(r: &ScenarioReport, l: &Lanes) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, LANE * 5)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let areas = root.split_evenly((5, 1));
        mcp_lane(&areas[0], l)?;
        main_lane(&areas[1], l)?;
        volume_lane(&areas[2], l)?;
        device_lane(&areas[3], l)?;
        sound_lane(
            &areas[4],
            &r.timeline.windows,
            &fault_spans(r, l.end),
            r.timeline.margin_db,
            l.end,
        )?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Fault spans `(from, to, name)` from the set/clear log.
fn fault_spans(r: &ScenarioReport, end: f64) -> Vec<(f64, f64, String)> {
    let mut spans = Vec::new();
    let mut open: Vec<(f64, &str)> = Vec::new();
    for (t, name, on) in &r.timeline.faults {
        if *on {
            open.push((ms(*t), name));
        } else if let Some(i) = open.iter().position(|(_, n)| n == name) {
            let (from, n) = open.remove(i);
            spans.push((from, ms(*t), n.to_string()));
        }
    }
    spans.extend(open.into_iter().map(|(from, n)| (from, end, n.to_string())));
    spans
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn lane_chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    y: std::ops::Range<f64>,
    end: f64,
) -> Result<
    ChartContext<
        'a,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 13))
        .margin(4)
        .x_label_area_size(18)
        .y_label_area_size(44)
        .build_cartesian_2d(0.0..end, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(10)
        .y_labels(4)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 10))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

fn mcp_lane(area: &Area<'_>, l: &Lanes) -> Result<()> {
    let rows = l.spans.len().max(1) as f64;
    let mut chart = lane_chart(area, "MCP: request id, delivered -> replied (ms)", 0.0..rows, l.end)?;
    for (i, s) in l.spans.iter().enumerate() {
        let y = rows - i as f64 - 0.5;
        let (to, color) = match (s.to, s.dropped) {
            (Some(t), _) => (t, BLUE.mix(0.7)),
            (None, Some(d)) => (d, RED.mix(0.7)),
            (None, None) => (l.end, BLACK.mix(0.25)),
        };
        let to = to.max(s.from + l.end * 0.002);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(s.from, y - 0.3), (to, y + 0.3)],
                color.filled(),
            )))
            .map_err(err)?;
        if let Some(d) = s.dropped {
            chart
                .draw_series(std::iter::once(Cross::new((d, y), 5, RED.stroke_width(2))))
                .map_err(err)?;
        }
        if l.spans.len() <= 24 {
            chart
                .draw_series(std::iter::once(Text::new(
                    label(&format!("id {}", s.id)),
                    (s.from, y + 0.45),
                    ("sans-serif", 9),
                )))
                .map_err(err)?;
        }
    }
    Ok(())
}

fn main_lane(area: &Area<'_>, l: &Lanes) -> Result<()> {
    let mut chart = lane_chart(
        area,
        "main task: batches (ticks), blocked in delays (bars)",
        0.0..2.0,
        l.end,
    )?;
    chart
        .draw_series(
            l.busy
                .iter()
                .map(|&(a, b)| Rectangle::new([(a, 0.2), (b, 0.8)], RGBColor(230, 150, 30).filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(
            l.batches
                .iter()
                .map(|&t| PathElement::new(vec![(t, 1.1), (t, 1.9)], BLACK.stroke_width(1))),
        )
        .map_err(err)?;
    Ok(())
}

fn volume_lane(area: &Area<'_>, l: &Lanes) -> Result<()> {
    let mut chart = lane_chart(
        area,
        "volume: set by the callback (line), readback (dots)",
        0.0..105.0,
        l.end,
    )?;
    let mut steps = Vec::new();
    let mut last: Option<f64> = None;
    for &(t, v) in &l.volume {
        if let Some(p) = last {
            steps.push((t, p));
        }
        steps.push((t, v));
        last = Some(v);
    }
    if let Some(p) = last {
        steps.push((l.end, p));
    }
    chart
        .draw_series(LineSeries::new(steps, GREEN.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(l.readbacks.iter().map(|&(t, v)| Circle::new((t, v), 4, BLUE.filled())))
        .map_err(err)?;
    Ok(())
}

fn state_color(state: &str) -> RGBColor {
    match state {
        "idle" => RGBColor(200, 200, 200),
        "connecting" => RGBColor(250, 210, 120),
        "listening" => RGBColor(130, 200, 250),
        "speaking" => RGBColor(120, 210, 140),
        "upgrading" => RGBColor(220, 140, 220),
        "off" => RGBColor(60, 60, 60),
        _ => RGBColor(235, 235, 235),
    }
}

fn device_lane(area: &Area<'_>, l: &Lanes) -> Result<()> {
    let mut chart = lane_chart(
        area,
        "device: state; boots (green), restarts (red), power cuts (black), socket open/closed (blue/orange dots)",
        0.0..2.0,
        l.end,
    )?;
    for (i, (t, state)) in l.states.iter().enumerate() {
        let until = l.states.get(i + 1).map_or(l.end, |n| n.0);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*t, 0.2), (until, 0.9)],
                state_color(state).filled(),
            )))
            .map_err(err)?;
        if until - t > l.end * 0.04 {
            chart
                .draw_series(std::iter::once(Text::new(label(state), (*t, 0.55), ("sans-serif", 10))))
                .map_err(err)?;
        }
    }
    for &(t, open) in &l.sockets {
        let color = if open { BLUE } else { RGBColor(230, 150, 30) };
        chart
            .draw_series(std::iter::once(Circle::new((t, 1.45), 4, color.filled())))
            .map_err(err)?;
    }
    for (marks, color) in [(&l.boots, GREEN), (&l.restarts, RED), (&l.cuts, BLACK)] {
        chart
            .draw_series(
                marks
                    .iter()
                    .map(|&t| PathElement::new(vec![(t, 1.0), (t, 1.9)], color.stroke_width(2))),
            )
            .map_err(err)?;
    }
    Ok(())
}

fn sound_lane(
    area: &Area<'_>,
    windows: &[Measurement],
    faults: &[(f64, f64, String)],
    margin: f64,
    end: f64,
) -> Result<()> {
    let ambient = windows.first().map_or(35.0, |w| w.ambient_dba);
    let top = windows
        .iter()
        .map(Measurement::combined_db)
        .fold(ambient + 30.0, f64::max)
        + 5.0;
    let bottom = (ambient - 10.0).max(0.0);
    let mut chart = lane_chart(area, "sound at the listener, dB SPL", bottom..top, end)?;
    for (a, b, name) in faults {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*a, bottom), (*b, top)],
                RED.mix(0.12).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                label(name),
                (*a, top - 2.0),
                ("sans-serif", 10),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, ambient), (end, ambient)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, ambient + margin), (end, ambient + margin)],
            2,
            3,
            RED.stroke_width(1),
        ))
        .map_err(err)?;
    for w in windows {
        let level = w.combined_db();
        let color = if w.audible { BLUE } else { RGBColor(150, 150, 150) };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(w.from_ms, bottom), (w.to_ms.max(w.from_ms + end * 0.002), level)],
                color.mix(0.45).filled(),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// The sound lane alone (for `render --html`): one window.
pub fn sound_document(title: &str, m: &Measurement, summary: &str) -> Result<String> {
    let end = m.to_ms * 1.05 + 100.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, LANE * 2)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        sound_lane(&root, std::slice::from_ref(m), &[], 0.0, end)?;
        root.present().map_err(err)?;
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n<div class=\"lanes\">{svg}</div>\n<pre>{}</pre>\n</body></html>\n",
        esc(summary),
        t = esc(title),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc("</script><a href='x'>&\""),
            "&lt;/script&gt;&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        assert_eq!(label("id <5> & \"q\""), "id ?5? ? ?q?");
    }
}
