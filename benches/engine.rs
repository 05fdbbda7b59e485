//! The engine speed targets (issue 7; BENCHMARKS.md).
//!
//! | bench | what | target |
//! |---|---|---|
//! | `engine/scenario_reboot` | `scenarios/12-reboot-true-never-arrives.yaml` through the scenario runner (no audio rendered) | ≥ 100,000× real time |
//! | `engine/acoustic_chain` | a 1 kHz probe at 24 kHz through codec, amplifier, speaker and listener, measured (`Harness::play_and_measure`) | ≥ 1,000× real time |
//! | `engine/scenario_reboot_with_json` | the same, plus the JSON report with the trace rendered (reference) | — |
//! | `engine/replay_conformance` | the 64-line public conformance file, in process, traced (the CLI's default output) | (see the whole-process row: < 20 ms) |
//!
//! The first two count **virtual microseconds** as criterion elements, so `Melem/s` reads
//! directly as "times real time" (1 Melem/s = one virtual second per wall second).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use xiaozhi_sim::audio::source::Source;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Board, Device};
use xiaozhi_sim::harness::{Harness, PROBE_GUARD};
use xiaozhi_sim::replay::{ReplayLine, Replayer, split_lines};
use xiaozhi_sim::scenario::ScenarioSpec;
use xiaozhi_sim::scenario::record::Trace;
use xiaozhi_sim::scenario::runner::{self, NoFiles, RunOptions};
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::world::WorldSpec;

const BOARD: &str = include_str!("../boards/bread-compact-wifi.yaml");
const REBOOT_SCENARIO: &str = include_str!("../scenarios/12-reboot-true-never-arrives.yaml");
const CONFORMANCE: &[u8] = include_bytes!("../tests/conformance/bread-compact-wifi.requests.jsonl");

fn board() -> Arc<BoardSpec> {
    Arc::new(BoardSpec::from_yaml("boards/bread-compact-wifi.yaml", BOARD).expect("shipped board"))
}

/// The virtual span a scenario covers: the latest `t=<ms>` in its trace.
fn virtual_span_ms(trace: &Trace) -> u64 {
    trace
        .lines()
        .filter_map(|line| line.rsplit_once(" t=").and_then(|(_, ms)| ms.parse::<u64>().ok()))
        .max()
        .unwrap_or(0)
}

fn scenario_reboot(c: &mut Criterion) {
    let origin = "scenarios/12-reboot-true-never-arrives.yaml";
    let spec = ScenarioSpec::from_yaml(origin, REBOOT_SCENARIO).expect("shipped scenario");
    // One board for every run, so its tool catalogue is built once (as in a fleet).
    let board = Board::new(board());
    let opts = RunOptions::default();
    let (report, _) = runner::run(&spec, &board, origin, &opts, &NoFiles);
    assert!(report.passed, "the reboot scenario passes");
    let span_ms = virtual_span_ms(&report.trace);
    assert!(
        span_ms >= 2000,
        "the reboot takes 2 s of virtual time, got {span_ms} ms"
    );
    eprintln!("engine/scenario_reboot covers {span_ms} ms of virtual time per run");

    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(span_ms * 1000));
    group.bench_function("scenario_reboot", |b| {
        b.iter(|| runner::run(black_box(&spec), &board, origin, &opts, &NoFiles))
    });
    // For reference (no target): the same run plus its JSON report, trace lines rendered, as
    // `xiaozhi-twin run --json` writes it.
    group.bench_function("scenario_reboot_with_json", |b| {
        b.iter(|| {
            let (report, _) = runner::run(black_box(&spec), &board, origin, &opts, &NoFiles);
            serde_json::to_vec(&report).expect("a report serializes")
        })
    });
    group.finish();
}

/// A booted board in the conformance world, quiet (the boot prompt has finished).
fn quiet_board() -> Harness {
    let mut device = Device::new(board(), WorldSpec::conformance(), 1);
    device.set_trace(false);
    let mut h = Harness::new(device);
    h.power_on();
    h.run_until_idle().expect("boots");
    h.sleep(SimDuration::from_secs(2));
    h.take_outputs();
    h
}

fn acoustic_chain(c: &mut Criterion) {
    let rate = board().audio.output_sample_rate;
    assert_eq!(rate, 24_000, "bread-compact-wifi plays at 24 kHz");
    let duration = SimDuration::from_secs(1) + PROBE_GUARD;
    let listening = quiet_board()
        .play_and_measure(Source::probe(1000.0, -6.0), duration, false)
        .expect("running");
    assert!(listening.measurement.spl_db.is_some(), "the probe is heard");
    let (from, to) = listening.window;
    let measured = to.saturating_since(from);
    eprintln!("engine/acoustic_chain renders {measured} of a {duration} probe per run");

    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(measured.as_micros()));
    group.bench_function("acoustic_chain", |b| {
        b.iter_batched(
            quiet_board,
            |mut h| h.play_and_measure(Source::probe(1000.0, -6.0), duration, false),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn replay_conformance(c: &mut Criterion) {
    let board = board();
    let raw_lines = split_lines(CONFORMANCE);
    assert_eq!(raw_lines.len(), 64);
    let lines: Vec<ReplayLine> = raw_lines
        .iter()
        .enumerate()
        .map(|(i, raw)| ReplayLine::parse(i + 1, raw).expect("valid line"))
        .collect();
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(lines.len() as u64));
    group.bench_function("replay_conformance", |b| {
        b.iter(|| {
            let mut replayer = Replayer::new(board.clone(), 0, true);
            let mut out = Vec::with_capacity(64 * 1024);
            for (i, (raw, line)) in raw_lines.iter().zip(&lines).enumerate() {
                replayer
                    .run_line(i + 1, raw, line)
                    .expect("goes idle")
                    .to_json_line(&mut out);
            }
            out
        })
    });
    group.finish();
}

criterion_group!(benches, scenario_reboot, acoustic_chain, replay_conformance);
criterion_main!(benches);
