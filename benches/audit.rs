//! `xiaozhi-twin audit` against the built-in backend in virtual time: the shipped battery (14
//! items × 4 trials) as a whole process, on one thread and on the machine's cores, and with
//! `--html`. Whole processes are timed, so the figures include start-up. The claim it backs:
//! docs/audit.md ("about a second for the shipped battery").

use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn audit(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_xiaozhi-twin"))
        .args(["audit", "--quiet"])
        .args(args)
        .output()
        .expect("binary runs");
    // The trusting stand-in's amp-off item fails the gate (exit 1); anything else is a bug.
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

fn bench(c: &mut Criterion) {
    let html = std::env::temp_dir().join("xiaozhi-twin-bench-audit.html");
    let mut g = c.benchmark_group("audit");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("default_battery_1_device", |b| b.iter(|| audit(&["--devices", "1"])));
    g.bench_function("default_battery_all_cores", |b| b.iter(|| audit(&[])));
    g.bench_function("default_battery_all_cores_html", |b| {
        b.iter(|| audit(&["--html", html.to_str().unwrap()]))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
