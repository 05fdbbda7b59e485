//! `audit --html FILE`: the scorecard as one self-contained page (inline CSS and SVG, no script,
//! no network), in the style of the run reports: the gate, one bar per item (each verdict's
//! share of its trials), and per item its worst trial as an acceptance record with the claim row
//! and a sound lane (the listener's level of the reference speech and of every sentence after the
//! request). Every text from a battery, a backend or a device is escaped.

use std::fmt::Write as _;

use anyhow::Result;
use plotters::prelude::*;
use xiaozhi_sim::audit::score::{ItemScore, Scorecard};
use xiaozhi_sim::audit::trial::{Trial, Turn};

use xiaozhi_sim::audit::verdict::Verdict;

use super::{CSS, err, esc, label};
use crate::audit::Gate;

/// Extra style of the audit page.
const AUDIT_CSS: &str = ".bar{display:inline-flex;vertical-align:middle;width:320px;height:16px;border:1px solid #999}\
td.board{white-space:nowrap}\
.bar span{display:block;height:100%}\
.v-verified{background:#2e9d4b}.v-unverified-claim{background:#9ccf6a}.v-no-action{background:#c8c8c8}\
.v-silent-action{background:#7fb3d5}.v-no-answer{background:#888}.v-wrong-action{background:#e08a2c}\
.v-false-claim{background:#c62828}\
.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 .8em;vertical-align:middle}";

/// The verdict's colour class.
fn class(v: Verdict) -> String {
    format!("v-{}", v.name())
}

/// The whole page.
pub fn document(card: &Scorecard, ran: &crate::audit::Ran, gate: &Gate) -> Result<String> {
    let trials = &ran.trials;
    let mut failures = gate.failures(card);
    if ran.interrupted {
        failures.insert(
            0,
            format!(
                "the run was interrupted: {} of {} trials ran",
                ran.trials.len(),
                ran.planned
            ),
        );
    }
    let mut out = String::with_capacity(32 * 1024 * card.items.len().max(1));
    let title = format!("audit: {}", card.battery);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}{AUDIT_CSS}</style></head><body>\n<h1>{}</h1>\n<p>{} ({}) · {} items × {} trials against {} · seed {}</p>\n",
        esc(&title),
        esc(&title),
        esc(&card.battery),
        esc(&card.origin),
        card.items.len(),
        card.trials,
        esc(&card.backend),
        card.seed
    );
    if failures.is_empty() {
        out.push_str("<p class=\"gate\"><span class=\"verdict pass\">GATE PASSED</span></p>\n");
    } else {
        out.push_str("<p class=\"gate\"><span class=\"verdict fail\">GATE FAILED</span></p>\n<ul class=\"gate\">");
        for f in &failures {
            let _ = write!(out, "<li>{}</li>", esc(f));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<p class=\"key legend\">");
    for v in Verdict::ALL {
        let _ = write!(out, "<span class=\"{}\"></span>{}", class(v), v.name());
    }
    out.push_str("</p>\n<table class=\"scorecard\"><tr><th>item</th><th>board</th><th>verdicts over the trials</th><th>rates (95 % Wilson interval)</th><th>what it shows</th></tr>\n");
    for item in &card.items {
        let _ = writeln!(
            out,
            "<tr data-item=\"{}\"><td><a href=\"#i-{}\">{}</a></td><td class=\"board\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&item.id),
            esc(&item.id),
            esc(&item.id),
            esc(&item.board),
            bar(item),
            esc(&crate::audit::rates(item)),
            esc(&about(item))
        );
    }
    out.push_str("</table>\n<p class=\"legend\">Verdicts are decided from facts read off the twin (docs/audit.md): the calls that reached the device and their replies, the value before and after, what the backend said and what a listener heard. Times are virtual milliseconds after the request.</p>\n");
    for item in &card.items {
        if let Some(t) = trials.iter().find(|t| t.item == item.id && t.trial == item.worst) {
            worst(&mut out, item, t, gate)?;
        }
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

fn about(item: &ItemScore) -> String {
    let rows = if item.card.is_empty() {
        String::new()
    } else {
        let r: Vec<String> = item.card.iter().map(u32::to_string).collect();
        format!(" (error card {})", r.join(", "))
    };
    format!("{}{rows}", item.about)
}

/// One item's bar: a segment per verdict, as wide as its share.
fn bar(item: &ItemScore) -> String {
    let mut out = String::from("<div class=\"bar\">");
    for (v, r) in &item.verdicts {
        let _ = write!(
            out,
            "<span class=\"{}\" style=\"width:{:.2}%\" title=\"{}: {}/{}\" data-verdict=\"{}\" data-count=\"{}\"></span>",
            class(*v),
            r.rate * 100.0,
            v.name(),
            r.count,
            item.trials,
            v.name(),
            r.count
        );
    }
    out.push_str("</div>");
    out
}

/// The worst trial of an item: each request as a record, and the sound lane.
fn worst(out: &mut String, item: &ItemScore, t: &Trial, gate: &Gate) -> Result<()> {
    let _ = write!(
        out,
        "<section class=\"item\" id=\"i-{}\" data-verdict=\"{}\">\n<h2>{}</h2>\n<p>{} · worst trial: {} (seed {}) · board {} over {} · <span class=\"verdict {}\">{}</span></p>\n",
        esc(&item.id),
        t.verdict.name(),
        esc(&item.id),
        bar(item),
        t.trial,
        t.seed,
        esc(&t.board),
        esc(&t.wire),
        if gate.fail_on.contains(&t.verdict) {
            "fail"
        } else {
            "pass"
        },
        t.verdict.name()
    );
    if let Some(g) = &t.greeting {
        let _ = writeln!(
            out,
            "<p>greeting after the wake word: 「{}」, {}</p>",
            esc(&g.text),
            level(g.level_db, g.audible)
        );
    }
    for (n, turn) in t.turns.iter().enumerate() {
        record(out, n, turn);
        out.push_str("<div class=\"lanes\">");
        out.push_str(&sound_lane(turn)?);
        out.push_str("</div>\n");
    }
    for note in &t.notes {
        let _ = writeln!(out, "<p class=\"unobserved\">{}</p>", esc(note));
    }
    out.push_str("<p class=\"legend\">Sound: the listener's level (dB SPL) of the speech before the request (the reference) and of every sentence after it; an empty bar is silence.</p>\n</section>\n");
    Ok(())
}

fn level(db: Option<f64>, audible: bool) -> String {
    match db {
        Some(d) => format!(
            "{d:.1} dB SPL at the listener ({})",
            if audible { "heard" } else { "not heard" }
        ),
        None => "silence at the listener".into(),
    }
}

/// One request as an acceptance record.
fn record(out: &mut String, n: usize, turn: &Turn) {
    let f = &turn.facts;
    let j = &turn.judgement;
    let _ = writeln!(
        out,
        "<table class=\"record\"><caption>request {} 「{}」 ({})</caption>",
        n + 1,
        esc(&f.request),
        esc(&f.lang)
    );
    let calls = if f.calls.is_empty() {
        "no call reached the device".to_string()
    } else {
        f.calls
            .iter()
            .map(|c| {
                format!(
                    "{} {} at {:.0} ms → {}{}",
                    c.tool,
                    c.args,
                    c.at_ms,
                    c.reply
                        .as_deref()
                        .map_or("no reply".to_string(), |r| format!("\"{r}\"")),
                    if c.failed { " (failed)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let said = if f.sentences.is_empty() {
        "nothing".to_string()
    } else {
        f.sentences
            .iter()
            .map(|s| format!("「{}」 at {:.0} ms, {}", s.text, s.at_ms, level(s.level_db, s.audible)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let claim = match &j.claim {
        Some((i, p)) => format!(
            "sentence {} claims success (\"{p}\"); {}",
            i + 1,
            if j.readback {
                "a readback came between the call's reply and the claim"
            } else {
                "no readback came before it: the claim rests on the call's reply"
            }
        ),
        None => "no sentence claims success".to_string(),
    };
    let shown = |v: &Option<xiaozhi_sim::audit::condition::Val>| v.as_ref().map_or("unknown".into(), |v| v.to_string());
    let rows = [
        ("delivery", f.delivery.clone()),
        (
            "heard as",
            f.stt
                .as_ref()
                .map_or("(no stt shown)".into(), |t| format!("「{t}」 (the backend's stt)")),
        ),
        ("calls", calls),
        ("timing", timing(f)),
        ("value", format!("{} → {}", shown(&f.before), shown(&f.after))),
        ("said", said),
        ("claim", claim),
        (
            "effect",
            match &f.perceived {
                xiaozhi_sim::audit::verdict::Perceived::Yes(h) => format!("perceivable: {h}"),
                xiaozhi_sim::audit::verdict::Perceived::No(h) => format!("not perceivable: {h}"),
            },
        ),
        ("verdict", format!("{}: {}", j.verdict.name(), j.why)),
    ];
    for (name, text) in rows {
        let _ = writeln!(
            out,
            "<tr><td class=\"row\">{name}</td><td><pre>{}</pre></td></tr>",
            esc(&text)
        );
    }
    out.push_str("</table>\n");
}

/// The request's delays, from its end.
fn timing(f: &xiaozhi_sim::audit::verdict::Facts) -> String {
    let at = |what: &str, ms: Option<f64>| match ms {
        Some(ms) => format!("{what} {ms:.0} ms"),
        None => format!("no {what}"),
    };
    format!(
        "{}, {}, {} after the end of the request",
        at("first call", f.first_call_ms),
        at("first sentence", f.first_sentence_ms),
        at("first audio", f.first_audio_ms)
    )
}

/// The reference level and each sentence's, as bars.
fn sound_lane(turn: &Turn) -> Result<String> {
    let f = &turn.facts;
    let mut bars: Vec<(String, Option<f64>)> = Vec::new();
    if let Some((db, _)) = f.level_before {
        bars.push(("before".into(), db));
    }
    for (i, s) in f.sentences.iter().enumerate() {
        bars.push((format!("{} ({:.0} ms)", i + 1, s.at_ms), s.level_db));
    }
    let top = bars.iter().filter_map(|b| b.1).fold(60.0_f64, f64::max) + 10.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (480, 160)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = bars.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption("sound at the listener (dB SPL)", ("sans-serif", 13))
            .margin(4)
            .x_label_area_size(6)
            .y_label_area_size(40)
            .build_cartesian_2d(0.0..n as f64, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .draw()
            .map_err(err)?;
        let blue = RGBColor(70, 110, 180);
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
                let db = b.1?;
                let x = i as f64;
                Some(Rectangle::new([(x + 0.2, 0.0), (x + 0.8, db)], blue.filled()))
            }))
            .map_err(err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let text = match b.1 {
                    Some(db) => format!("{} {db:.1}", label(&b.0)),
                    None => format!("{} silent", label(&b.0)),
                };
                Text::new(text, (i as f64 + 0.2, b.1.unwrap_or(0.0) + 2.0), ("sans-serif", 11))
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
