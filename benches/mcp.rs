//! The MCP core speed targets (issue 7; BENCHMARKS.md): one request from inbound bytes to reply
//! bytes, through the receive task (`Device::handle` with `Input::Mcp`), the main-task batches
//! (`Device::run_until`) and the send queue (`Device::poll_output`).
//!
//! | bench | request | target |
//! |---|---|---|
//! | `mcp/set_volume` | `tools/call self.audio_speaker.set_volume`, volume varying, always valid | ≥ 1.4 M/s |
//! | `mcp/get_device_status` | `tools/call self.get_device_status` | ≥ 1.0 M/s |
//! | `mcp/tools_list` | default `tools/list` of bread-compact-wifi, no params | ≥ 250 k/s |
//!
//! Throughput is one element per request, so criterion's `elem/s` is the rate to compare.
//! Tracing is off (as `replay --replies-only` runs); virtual time does not move between requests
//! (the conformance recorder's convention), so no timer fires inside the measured loop.

use std::hint::black_box;
use std::sync::Arc;
use xiaozhi_sim::device::Input;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, Output};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::world::WorldSpec;

const BOARD: &str = include_str!("../boards/bread-compact-wifi.yaml");

/// Distinct payloads cycled through, so ids and volumes vary from call to call.
const VARIANTS: usize = 1024;

/// A freshly flashed bread-compact-wifi, booted and idle, with tracing off.
fn booted_device() -> Device {
    let spec = Arc::new(BoardSpec::from_yaml("boards/bread-compact-wifi.yaml", BOARD).expect("shipped board"));
    let mut device = Device::new(spec, WorldSpec::conformance(), 1);
    device.set_trace(false);
    let mut h = Harness::new(device);
    h.power_on();
    h.run_until_idle().expect("boots");
    h.take_outputs();
    h.device
}

/// One request, bytes in, bytes out; returns the reply's length (every request here has
/// exactly one reply).
fn round_trip(device: &mut Device, payload: &[u8]) -> usize {
    let now = device.now();
    black_box(device.handle(now, Input::Mcp(payload)));
    device.run_until(now);
    let mut len = 0;
    while let Some(out) = device.poll_output() {
        if let Output::Mcp { payload, .. } = out {
            len += payload.len();
        }
    }
    len
}

fn bench_requests(c: &mut Criterion, name: &str, payloads: &[Vec<u8>]) {
    let mut device = booted_device();
    // Every request must be answered (no silent drop would make the figure meaningless).
    for p in payloads.iter().take(8) {
        assert!(
            round_trip(&mut device, p) > 0,
            "no reply to {}",
            String::from_utf8_lossy(p)
        );
    }
    let mut group = c.benchmark_group("mcp");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function(name, |b| {
        b.iter(|| {
            let payload = &payloads[i % payloads.len()];
            i += 1;
            round_trip(&mut device, black_box(payload))
        })
    });
    group.finish();
}

fn set_volume(c: &mut Criterion) {
    let payloads: Vec<Vec<u8>> = (0..VARIANTS)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"self.audio_speaker.set_volume","arguments":{{"volume":{}}}}}}}"#,
                i + 1,
                i % 101
            )
            .into_bytes()
        })
        .collect();
    bench_requests(c, "set_volume", &payloads);
}

fn get_device_status(c: &mut Criterion) {
    let payloads: Vec<Vec<u8>> = (0..VARIANTS)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"self.get_device_status","arguments":{{}}}}}}"#,
                i + 1
            )
            .into_bytes()
        })
        .collect();
    bench_requests(c, "get_device_status", &payloads);
}

fn tools_list(c: &mut Criterion) {
    let payloads: Vec<Vec<u8>> = (0..VARIANTS)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#, i + 1).into_bytes())
        .collect();
    bench_requests(c, "tools_list", &payloads);
}

criterion_group!(benches, set_volume, get_device_status, tools_list);
criterion_main!(benches);
