//! The HTML report's cost: `xiaozhi-twin run scenarios/ --quiet` with and without `--html`
//! (every shipped scenario, release build). The difference is rendering: records, tables and
//! one plotters SVG timeline per scenario. Target (issue 15): rendering all shipped scenarios in
//! under 1 s. Whole processes are timed, so the figures include start-up and the runs.

use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn run(html: Option<&std::path::Path>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"));
    cmd.args(["run", "scenarios/", "--quiet"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(p) = html {
        cmd.arg("--html").arg(p);
    }
    let out = cmd.output().expect("binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn html(c: &mut Criterion) {
    let file = std::env::temp_dir().join("xiaozhi-twin-bench-report.html");
    let mut g = c.benchmark_group("html");
    g.sample_size(10).measurement_time(Duration::from_secs(12));
    g.bench_function("run_all_scenarios", |b| b.iter(|| run(None)));
    g.bench_function("run_all_scenarios_with_html", |b| b.iter(|| run(Some(&file))));
    g.finish();
}

criterion_group!(benches, html);
criterion_main!(benches);
