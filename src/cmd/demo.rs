//! `xiaozhi-twin demo`: a few curated scenarios, narrated, that show the gap between `true`,
//! the software readback and what a listener hears. No arguments, no hardware, seconds.

use std::path::PathBuf;

use anyhow::Result;
use xiaozhi_sim::scenario::ScenarioSpec;

use crate::boards;
use crate::scenarios::{Loaded, run_one, write_evidence};

/// Narrated tour: `true`, readback and what a listener hears, on simulated boards.
///
/// Runs a few curated scenarios in virtual time (seconds of wall time), prints their
/// acceptance records and writes WAV evidence (I2S stream and listener pressure) per scene.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the WAV evidence.
    #[arg(long, value_name = "DIR", default_value = "xiaozhi-twin-demo")]
    pub out: PathBuf,
    /// Play the before/after listener audio of the first scenes (needs the `playback` feature).
    #[arg(long)]
    pub play: bool,
    /// Also write the scenes as one self-contained HTML report with timelines.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// (scenario file, embedded text, narration).
const SCENES: &[(&str, &str, &str)] = &[
    (
        "scenarios/00-turn-it-down-a-bit.yaml",
        include_str!("../../scenarios/00-turn-it-down-a-bit.yaml"),
        "A backend asks a simulated bread-compact-wifi to turn the volume down. Three facts are \
         recorded separately: the tool said \"true\", get_device_status reads 40, and a listener \
         0.5 m away hears the 1 kHz probe drop from 67.0 to 63.2 dB SPL.",
    ),
    (
        "scenarios/01-true-is-not-heard.yaml",
        include_str!("../../scenarios/01-true-is-not-heard.yaml"),
        "Same call, but the MAX98357A amplifier is shut down. \"true\" and the readback look \
         exactly as before; only the acoustic row tells the truth: silence. Clear the fault and \
         the same probe is heard at 63.2 dB SPL.",
    ),
    (
        "scenarios/04a-bread-board-law.yaml",
        include_str!("../../scenarios/04a-bread-board-law.yaml"),
        "One tool name, different codecs. On the bread board 70 → 40 is a software factor: −9.7 dB…",
    ),
    (
        "scenarios/04b-es8311-board-law.yaml",
        include_str!("../../scenarios/04b-es8311-board-law.yaml"),
        "…on an ES8311 + NS4150B board the same call writes register 0x32 = 98 + volume: −15.0 dB.",
    ),
    (
        "scenarios/12-reboot-true-never-arrives.yaml",
        include_str!("../../scenarios/12-reboot-true-never-arrives.yaml"),
        "self.reboot's \"true\" is queued behind the reboot task and dies with esp_restart. The only \
         evidence is the device coming back — with volume 10, because a stored 0 is not restored.",
    ),
    (
        "scenarios/10-built-is-not-received.yaml",
        include_str!("../../scenarios/10-built-is-not-received.yaml"),
        "Replies are queued on the main task: a tools/list sent after a tools/call overtakes it, and \
         a busy main task holds every reply back. Pair replies by id.",
    ),
    (
        "scenarios/v01-voice-turn-gets-quieter.yaml",
        include_str!("../../scenarios/v01-voice-turn-gets-quieter.yaml"),
        "Now with the voice: the backend speaks (Opus, paced as xiaozhi-esp32-server sends it), calls \
         set_volume 40, reads it back and says 音量已经调小了. The device decodes its speech and \
         plays it through the same chain: the listener hears the backend's own voice 9.7 dB quieter.",
    ),
    (
        "scenarios/v03-amp-shutdown-claim-not-heard.yaml",
        include_str!("../../scenarios/v03-amp-shutdown-claim-not-heard.yaml"),
        "Error card row 1, end to end: the amplifier is shut down, set_volume answers true, and the \
         backend says 音量已调小 without a readback. Every frame is decoded and played into silence: \
         the record calls the claim unverified and not heard.",
    ),
];

pub fn run(opts: &Args) -> Result<bool> {
    if let Some(p) = &opts.html {
        crate::out::check_writable("--html", p)?;
    }
    crate::out::holding(opts.html.is_some(), || run_inner(opts))
}

/// [`run`] once its output files were checked.
fn run_inner(opts: &Args) -> Result<bool> {
    crate::outln!("xiaozhi-twin demo: the gap between `true`, readback and what is heard");
    crate::outln!("(firmware 78/xiaozhi-esp32 2.4.2 @ 48142026, simulated in virtual time)\n");
    let mut all_passed = true;
    let mut plays = Vec::new();
    let mut reports = Vec::new();
    for (i, (origin, text, narration)) in SCENES.iter().enumerate() {
        let spec = ScenarioSpec::from_yaml(origin, text)?;
        let board = boards::load(&spec.board)?;
        let loaded = Loaded {
            path: PathBuf::from(origin),
            origin: origin.to_string(),
            spec,
            board,
            text: text.to_string(),
        };
        let (mut report, evidence) = run_one(&loaded, None, true);
        write_evidence(&opts.out, &loaded, &mut report, &evidence)?;
        crate::outln!("--- scene {} of {}: {}", i + 1, SCENES.len(), report.name);
        for line in xiaozhi_sim::scenario::record::wrap(narration, 96) {
            crate::outln!("    {line}");
        }
        for r in &report.records {
            crate::outln!("\n    {} (id {})", r.tool, r.id);
            let claim = r.claim.as_ref().map(|c| c.row());
            let mut rows = vec![("parameters", &r.parameters), ("response", &r.response)];
            if let Some(c) = &claim {
                rows.push(("claim", c));
            }
            rows.push(("effect", &r.effect));
            for (row, value) in rows {
                crate::outln!("      {row:<10} {value}");
            }
        }
        for s in report
            .steps
            .iter()
            .filter(|s| s.kind == xiaozhi_sim::scenario::StepKind::Burst)
        {
            let ids: Vec<String> = s
                .replies
                .iter()
                .filter_map(|r| xiaozhi_sim::scenario::reply::reply_id(r.as_bytes()).map(|i| i.to_string()))
                .collect();
            crate::outln!("\n    {}: replies left in the order {}", s.summary, ids.join(", "));
        }
        for s in report.steps.iter().filter(|s| {
            matches!(
                s.kind,
                xiaozhi_sim::scenario::StepKind::Play | xiaozhi_sim::scenario::StepKind::Listen
            )
        }) {
            crate::outln!(
                "\n    {} → {}",
                s.summary,
                s.measurement.as_ref().map_or("-".into(), |m| {
                    format!(
                        "{} ({})",
                        m.spl_db.map_or("silence".into(), |l| format!("{l:.1} dB SPL")),
                        m.verdict.name()
                    )
                })
            );
        }
        let failed = report.failed_checks().count();
        crate::outln!(
            "\n    {} checks, {} failed; evidence in {}\n",
            report.checks.len(),
            failed,
            opts.out.join(loaded.path.file_stem().unwrap_or_default()).display()
        );
        all_passed &= report.passed;
        if i < 2 {
            plays.extend(evidence.into_iter().map(|e| (report.name.clone(), e)));
        }
        reports.push(report);
    }
    if let Some(path) = &opts.html {
        let html = crate::html::document("xiaozhi-twin demo", &reports)?;
        std::fs::write(path, html)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the HTML report: {e}", path.display()))?;
        crate::outln!("HTML report: {}", path.display());
    }
    crate::outln!("Run them yourself: xiaozhi-twin run scenarios/   (or write your own: see README.md)");
    if opts.play {
        for (name, e) in &plays {
            crate::outln!("playing {name}: {}", e.label);
            crate::wav::play(e.rate, &e.signals)?;
        }
    }
    Ok(all_passed)
}
