//! `fleet --voice --find-capacity --slo EXPR`: the largest device count a backend holds.
//!
//! The count starts at `--devices` and doubles while the SLO holds, then bisects between the
//! last count that held and the first that broke (to within 10 %). Each step is a whole voice
//! fleet (fresh devices; with the built-in backend, a fresh backend). A step also breaks when
//! the twin's own budget does (its added first-audio latency p99 over 50 ms, frames dropped by
//! the devices without a backend fault to explain them, or the twin's CPU above 90 % of the
//! machine's cores): then the knee reported is the twin's, and it says so, because a knee
//! the twin caused says nothing about the backend.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::Serialize;

use crate::fleet::slo::Slo;
use crate::fleet::summary::VoiceSummary;
use crate::fleet::talking::VoiceRun;
use crate::server::BackendFault;

/// The twin's own first-audio budget (the target), ms.
pub const TWIN_ADDED_P99_MS: f64 = 50.0;
/// The twin's CPU budget: this share of the machine's cores.
pub const TWIN_CPU_SHARE: f64 = 0.9;

/// Whether the twin itself was the limit at this step (and how).
pub fn twin_limit(s: &VoiceSummary, fault: BackendFault) -> Option<String> {
    if s.turns.unfinished > 0 {
        return Some(format!(
            "{} of {} turns did not end before the run did",
            s.turns.unfinished, s.turns.planned
        ));
    }
    if let Some(p99) = s.latency.twin_added_first_audio.p99_ms
        && p99 > TWIN_ADDED_P99_MS
    {
        return Some(format!(
            "twin-added first-audio p99 {p99:.1} ms > {TWIN_ADDED_P99_MS} ms"
        ));
    }
    let drops: u64 = s.pacing.frames_dropped_by_devices.values().sum();
    if drops > 0 && fault == BackendFault::None && s.run.backend.starts_with("built-in") {
        return Some(format!(
            "{drops} frames dropped by devices against the built-in backend"
        ));
    }
    let cores = f64::from(s.twin.cores.max(1));
    (s.twin.cores_busy_peak > TWIN_CPU_SHARE * cores).then(|| {
        format!(
            "the twin used {:.2} of {} cores in its busiest second",
            s.twin.cores_busy_peak, s.twin.cores
        )
    })
}

/// One step of the search.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub devices: u32,
    pub completed: u64,
    pub failed: u64,
    pub first_audio_p50_ms: Option<f64>,
    pub first_audio_p99_ms: Option<f64>,
    pub twin_added_p99_ms: Option<f64>,
    /// The busiest second with turns in flight (cores).
    pub cores_busy: f64,
    /// The twin's CPU seconds over the step (the built-in backend's included when it runs in
    /// the fleet's process).
    pub twin_cpu_s: f64,
    /// The backend's CPU seconds, when it ran in another process (`--backend-process`).
    pub backend_cpu_s: Option<f64>,
    /// Completed turns per second of the step's wall time.
    pub turns_per_s: f64,
    pub held: bool,
    /// Why it broke: the SLO term, or the twin's budget.
    pub broke: Option<String>,
    pub twin_limited: bool,
}

/// The search's result.
#[derive(Clone, Debug, Serialize)]
pub struct Capacity {
    pub slo: String,
    pub backend: String,
    /// How often each device talks: `--think` and `--turns` (`exp:30s`: one turn every 30 s on
    /// average).
    pub talk: String,
    /// The twin's CPU is its own (`--backend-process` or `--url`), not the backend's too.
    pub twin_alone: bool,
    /// The largest count that held (None: not even the first).
    pub knee: Option<u32>,
    /// `backend` (the SLO broke with the twin within budget), `twin` (the twin's budget broke
    /// first), or `max_devices` (nothing broke up to the limit).
    pub limited_by: String,
    pub steps: Vec<Probe>,
}

fn step_of(devices: u32, s: &VoiceSummary, slo: &Slo, fault: BackendFault) -> Probe {
    let twin = twin_limit(s, fault);
    let broke = twin.clone().or_else(|| slo.broken(s));
    Probe {
        devices,
        completed: s.turns.completed,
        failed: s.turns.failed,
        first_audio_p50_ms: s.latency.first_audio.p50_ms,
        first_audio_p99_ms: s.latency.first_audio.p99_ms,
        twin_added_p99_ms: s.latency.twin_added_first_audio.p99_ms,
        cores_busy: s.twin.cores_busy_peak,
        twin_cpu_s: s.twin.cpu_s,
        backend_cpu_s: s.backend_process.as_ref().map(|b| b.cpu_s),
        turns_per_s: s.turns_per_s,
        held: broke.is_none(),
        broke,
        twin_limited: twin.is_some(),
    }
}

/// Where a search stopped: the knee, what limited it, every step it measured (by count).
#[derive(Clone, Debug)]
pub struct Search {
    pub knee: Option<u32>,
    pub limited_by: &'static str,
    pub steps: Vec<Probe>,
}

/// The search on any measurement (`measure(n)`: how a fleet of `n` went): from `start`,
/// doubling while steps hold (up to `max_devices`), then bisecting between the last count that
/// held and the first that broke until they are within 10 % (at least 1) of each other. The
/// knee is the last count that held; it is the twin's (`limited_by` = `twin`) when the step that
/// broke above it broke the twin's own budget, the backend's otherwise, `max_devices` when
/// nothing broke. On a measurement that is not monotone (noise) the result still holds what it
/// says: the knee held, and a count at most 10 % above it broke.
pub fn search(start: u32, max_devices: u32, mut measure: impl FnMut(u32) -> Result<Probe>) -> Result<Search> {
    let mut steps: Vec<Probe> = Vec::new();
    let mut run_at = |n: u32, steps: &mut Vec<Probe>| -> Result<bool> {
        let p = measure(n)?;
        let held = p.held;
        steps.push(p);
        Ok(held)
    };
    let max_devices = max_devices.max(1);
    let mut n = start.max(1).min(max_devices);
    let mut good: Option<u32> = None;
    let mut bad: Option<u32> = None;
    loop {
        if run_at(n, &mut steps)? {
            good = Some(n);
            if n >= max_devices {
                break;
            }
            n = (n.saturating_mul(2)).min(max_devices);
        } else {
            bad = Some(n);
            break;
        }
    }
    if let (Some(g), Some(b)) = (good, bad) {
        let (mut lo, mut hi) = (g, b);
        while hi - lo > (lo / 10).max(1) {
            let mid = lo + (hi - lo) / 2;
            if run_at(mid, &mut steps)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        good = Some(lo);
        bad = Some(hi);
    }
    let limited_by = match bad {
        None => "max_devices",
        // The step that broke right above the knee says whose limit the knee is.
        Some(b) => match steps.iter().rev().find(|s| s.devices == b && !s.held) {
            Some(s) if s.twin_limited => "twin",
            _ => "backend",
        },
    };
    steps.sort_by_key(|s| s.devices);
    Ok(Search {
        knee: good,
        limited_by,
        steps,
    })
}

/// Runs the search; prints the curve; exit status true when a knee was found within budget.
pub fn find(
    base: &VoiceRun,
    slo: &Slo,
    max_devices: u32,
    (svg, json): (Option<&Path>, Option<&Path>),
    run: &dyn Fn(&VoiceRun) -> Result<VoiceSummary>,
) -> Result<bool> {
    let slo_text: Vec<&str> = slo.0.iter().map(|t| t.text.as_str()).collect();
    let slo_text = slo_text.join(", ");
    let found = search(base.devices, max_devices, |n| {
        let mut r = base.clone();
        r.devices = n;
        crate::errln!("capacity: {n} devices …");
        let s = run(&r)?;
        let st = step_of(n, &s, slo, base.fault);
        crate::errln!(
            "capacity: {n} devices: {} completed, {} failed, first audio p99 {} → {}",
            st.completed,
            st.failed,
            st.first_audio_p99_ms.map_or("-".into(), |x| format!("{x:.0} ms")),
            st.broke.as_deref().unwrap_or("held")
        );
        // Let sockets in TIME_WAIT and the backend settle before the next step.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(st)
    })?;
    let twin_alone = base.external.is_some() || found.steps.iter().all(|s| s.backend_cpu_s.is_some());
    let cap = Capacity {
        slo: slo_text,
        backend: match &base.external {
            None if twin_alone => format!("{} in another process", base.backend_name()),
            _ => base.backend_name(),
        },
        talk: format!("{} turn(s) per device, --think {}", base.plan.turns, base.plan.think),
        twin_alone,
        knee: found.knee,
        limited_by: found.limited_by.to_string(),
        steps: found.steps,
    };
    print_table(&cap);
    if let Some(p) = svg {
        std::fs::write(p, curve_svg(&cap)?).with_context(|| format!("{}", p.display()))?;
        crate::errln!("capacity: curve written to {}", p.display());
    }
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_string_pretty(&cap)? + "\n").with_context(|| format!("{}", p.display()))?;
    }
    Ok(cap.knee.is_some() && cap.limited_by != "twin")
}

fn print_table(c: &Capacity) {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    crate::outln!("capacity of {} under {}", c.backend, c.slo);
    crate::outln!(
        "talk rate: {}; the twin's CPU is {}",
        c.talk,
        if c.twin_alone {
            "its own (the backend in another process)"
        } else {
            "the fleet process's, the built-in backend's included"
        }
    );
    crate::outln!(
        "{:>8} {:>10} {:>7} {:>10} {:>10} {:>9} {:>8} {:>9} {:>6} {:>9}  result",
        "devices",
        "completed",
        "failed",
        "1st audio",
        "p99 (ms)",
        "twin p99",
        "turns/s",
        "twin CPU",
        "cores",
        "backend"
    );
    crate::outln!(
        "{:>8} {:>10} {:>7} {:>10} {:>10} {:>9} {:>8} {:>9} {:>6} {:>9}",
        "",
        "",
        "",
        "p50 (ms)",
        "",
        "(ms)",
        "",
        "(s)",
        "peak",
        "CPU (s)"
    );
    for s in &c.steps {
        crate::outln!(
            "{:>8} {:>10} {:>7} {:>10} {:>10} {:>9} {:>8.1} {:>9.1} {:>6.2} {:>9}  {}",
            s.devices,
            s.completed,
            s.failed,
            f(s.first_audio_p50_ms),
            f(s.first_audio_p99_ms),
            f(s.twin_added_p99_ms),
            s.turns_per_s,
            s.twin_cpu_s,
            s.cores_busy,
            s.backend_cpu_s.map_or("-".to_string(), |x| format!("{x:.1}")),
            match &s.broke {
                None => "held".to_string(),
                Some(w) if s.twin_limited => format!("twin's budget broke: {w}"),
                Some(w) => format!("broke: {w}"),
            }
        );
    }
    match (c.knee, c.limited_by.as_str()) {
        (Some(k), "backend") => crate::outln!("knee: {k} devices (the backend's: the twin stayed within its budget)"),
        (Some(k), "twin") => crate::outln!(
            "knee: {k} devices, but the twin's own budget broke first: this is the twin's limit, not the backend's"
        ),
        (Some(k), _) => crate::outln!("held up to --max-devices ({k}); no knee found"),
        (None, _) => crate::outln!("knee: none (the first step already broke the SLO)"),
    }
}

fn curve_svg(c: &Capacity) -> Result<String> {
    let err = |e: String| anyhow::anyhow!("SVG: {e}");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let xmax = c.steps.iter().map(|s| s.devices).max().unwrap_or(1) as f64 * 1.05;
        let ymax = c
            .steps
            .iter()
            .filter_map(|s| s.first_audio_p99_ms)
            .fold(100.0f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("first-audio latency vs devices: {} ({})", c.backend, c.slo),
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("devices")
            .y_desc("ms")
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let pts = |f: fn(&Probe) -> Option<f64>| -> Vec<(f64, f64)> {
            c.steps
                .iter()
                .filter_map(|s| Some((f64::from(s.devices), f(s)?)))
                .collect()
        };
        let p50 = pts(|s| s.first_audio_p50_ms);
        let p99 = pts(|s| s.first_audio_p99_ms);
        chart
            .draw_series(LineSeries::new(p50.clone(), BLUE.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label("first audio p50")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
        chart
            .draw_series(LineSeries::new(p99.clone(), RED.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label("first audio p99")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
        chart
            .draw_series(c.steps.iter().filter_map(|s| {
                let y = s.first_audio_p99_ms.unwrap_or(0.0);
                (!s.held).then(|| Cross::new((f64::from(s.devices), y), 6, BLACK.stroke_width(2)))
            }))
            .map_err(|e| err(e.to_string()))?
            .label("broke (SLO or twin budget)")
            .legend(|(x, y)| Cross::new((x + 8, y), 5, BLACK));
        chart
            .draw_series(p99.iter().map(|&(x, y)| Circle::new((x, y), 3, RED.filled())))
            .map_err(|e| err(e.to_string()))?;
        if let Some(k) = c.knee {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(f64::from(k), 0.0), (f64::from(k), ymax)],
                    6,
                    4,
                    GREEN.stroke_width(2),
                ))
                .map_err(|e| err(e.to_string()))?
                .label(format!("knee: {k} devices ({})", c.limited_by))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], GREEN));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::summary::Latency;

    /// A step of `n` devices that held or broke (the twin's budget, or the SLO).
    fn probe(n: u32, broke: Option<&str>, twin: bool) -> Probe {
        Probe {
            devices: n,
            completed: 0,
            failed: 0,
            first_audio_p50_ms: None,
            first_audio_p99_ms: None,
            twin_added_p99_ms: None,
            cores_busy: 0.0,
            twin_cpu_s: 0.0,
            backend_cpu_s: None,
            turns_per_s: 0.0,
            held: broke.is_none(),
            broke: broke.map(str::to_string),
            twin_limited: twin,
        }
    }

    #[test]
    fn bisection_finds_a_monotone_knee_within_ten_percent_in_few_steps() {
        for (start, knee, max) in [
            (10, 1234, 20_000),
            (1, 1, 100),
            (50, 49, 1000),
            (7, 5000, 5000),
            (3, 999_999, 2_000_000),
        ] {
            let mut calls = Vec::new();
            let s = search(start, max, |n| {
                calls.push(n);
                Ok(probe(
                    n,
                    (n > knee).then_some("first_audio_p99<1500ms (was 1700)"),
                    false,
                ))
            })
            .unwrap();
            if knee >= max {
                assert_eq!((s.knee, s.limited_by), (Some(max), "max_devices"), "{knee}");
                continue;
            }
            let Some(k) = s.knee else {
                assert!(start > knee, "no knee although {start} held");
                continue;
            };
            assert!(k <= knee, "the knee {k} must have held (true knee {knee})");
            let broke_above = s.steps.iter().filter(|p| !p.held).map(|p| p.devices).min().unwrap();
            assert!(
                broke_above > knee && broke_above - k <= (k / 10).max(1),
                "{k} … {broke_above} for {knee}"
            );
            assert_eq!(s.limited_by, "backend");
            assert!(calls.len() <= 2 * 32, "{} steps", calls.len());
            let mut sorted = s.steps.iter().map(|p| p.devices).collect::<Vec<_>>();
            assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "steps come sorted by count");
            sorted.dedup();
            assert_eq!(sorted.len(), s.steps.len(), "no count measured twice");
        }
    }

    #[test]
    fn on_a_noisy_measurement_the_knee_held_and_a_count_just_above_it_broke() {
        // Around the true knee the outcome flips at random: the bracket still holds.
        for seed in 0..200u64 {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let s = search(10, 50_000, |n| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let broke = n > 3000 || (n > 1500 && x % 3 == 0);
                Ok(probe(n, broke.then_some("failed<1 (was 2.0)"), false))
            })
            .unwrap();
            let k = s.knee.expect("10 always holds");
            assert!(
                s.steps.iter().any(|p| p.devices == k && p.held),
                "seed {seed}: the knee {k} held"
            );
            assert!(
                s.steps
                    .iter()
                    .any(|p| !p.held && p.devices > k && p.devices - k <= (k / 10).max(1)),
                "seed {seed}: a count within 10 % above {k} broke"
            );
        }
    }

    #[test]
    fn the_knee_is_the_twins_when_the_twin_broke_right_above_it() {
        // The twin's own budget breaks above 1500 (before the backend's SLO would): the knee is
        // the twin's (step_of tries the twin's budget before the SLO).
        let s = search(100, 20_000, |n| {
            Ok(match n {
                n if n > 1500 => probe(n, Some("twin-added first-audio p99 71.0 ms > 50 ms"), true),
                n => probe(n, None, false),
            })
        })
        .unwrap();
        assert_eq!(s.limited_by, "twin");
        assert!(s.knee.is_some_and(|k| (1360..=1500).contains(&k)), "{:?}", s.knee);
        // The twin broke once in the doubling, but the step right above the knee was the
        // backend's: the knee is the backend's.
        let s = search(100, 20_000, |n| {
            Ok(match n {
                1600 => probe(n, Some("the twin used 1.95 of 2 cores in its busiest second"), true),
                n if n > 1000 => probe(n, Some("failed<1 (was 4.0)"), false),
                n => probe(n, None, false),
            })
        })
        .unwrap();
        assert_eq!((s.knee.map(|k| k <= 1000), s.limited_by), (Some(true), "backend"));
        let s = search(5, 40, |n| Ok(probe(n, None, false))).unwrap();
        assert_eq!((s.knee, s.limited_by), (Some(40), "max_devices"));
        let s = search(5, 40, |n| Ok(probe(n, Some("failed<1 (was 1.0)"), false))).unwrap();
        assert_eq!((s.knee, s.limited_by, s.steps.len()), (None, "backend", 1));
    }

    #[test]
    fn the_twins_budget_is_its_added_latency_its_drops_and_its_busiest_second() {
        let mut s = VoiceSummary::default();
        s.run.backend = "built-in (xinnan-py)".into();
        s.twin.cores = 2;
        assert_eq!(
            twin_limit(&s, BackendFault::None),
            None,
            "nothing measured, nothing broke"
        );
        let mut h = crate::fleet::summary::Hist::new();
        for _ in 0..100 {
            h.record(80_000);
        }
        s.latency.twin_added_first_audio = Latency::of(&h);
        let why = twin_limit(&s, BackendFault::None).unwrap();
        assert!(
            why.starts_with("twin-added first-audio p99 80.") && why.ends_with("ms > 50 ms"),
            "{why}"
        );
        s.latency.twin_added_first_audio = Latency::default();
        s.pacing.frames_dropped_by_devices.insert("queue_full".into(), 3);
        assert!(twin_limit(&s, BackendFault::None).unwrap().contains("3 frames dropped"));
        assert_eq!(twin_limit(&s, BackendFault::Flood), None, "a flood explains the drops");
        s.pacing.frames_dropped_by_devices.clear();
        // A whole-run average under budget does not hide a busiest second over it.
        s.twin.cores_busy = 0.7;
        s.twin.cores_busy_peak = 1.85;
        assert!(
            twin_limit(&s, BackendFault::None)
                .unwrap()
                .contains("1.85 of 2 cores in its busiest second")
        );
        s.twin.cores_busy_peak = 1.75;
        assert_eq!(twin_limit(&s, BackendFault::None), None);
        s.turns.planned = 10;
        s.turns.unfinished = 1;
        assert!(
            twin_limit(&s, BackendFault::None)
                .unwrap()
                .contains("did not end before the run did")
        );
    }
}
