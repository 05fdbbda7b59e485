//! The whole device entry on arbitrary bytes: a freshly booted board receives up to 16
//! payloads back to back (a burst, split at `\n`) on its receive task, then runs until idle.
//! It must never panic or hang, never answer more often than it was asked, and give the same
//! bytes when the same input is replayed on a second device.
//!
//! Input: one control byte (bits 0–2 pick the board, bit 3 the C-string entry point, bit 4
//! turns tracing on), then the payloads.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::cjson::Terminator;
use xiaozhi_sim::device::{Device, Output};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::world::WorldSpec;

const BOARDS: &[(&str, &str)] = &[
    (
        "bread-compact-wifi",
        include_str!("../../boards/bread-compact-wifi.yaml"),
    ),
    (
        "bread-compact-wifi-lcd",
        include_str!("../../boards/bread-compact-wifi-lcd.yaml"),
    ),
    (
        "bread-compact-wifi-s3cam",
        include_str!("../../boards/bread-compact-wifi-s3cam.yaml"),
    ),
    ("otto-robot", include_str!("../../boards/otto-robot.yaml")),
    (
        "waveshare/esp32-s3-audio-board",
        include_str!("../../boards/waveshare/esp32-s3-audio-board.yaml"),
    ),
    (
        "lckfb/szpi-esp32c3",
        include_str!("../../boards/lckfb/szpi-esp32c3.yaml"),
    ),
    ("relay-bank", include_str!("../../scenarios/boards/relay-bank.yaml")),
    (
        "bread-compact-wifi-duplex",
        include_str!("../../boards/bread-compact-wifi-duplex.yaml"),
    ),
];

fn boards() -> &'static [Arc<BoardSpec>] {
    static SPECS: OnceLock<Vec<Arc<BoardSpec>>> = OnceLock::new();
    SPECS.get_or_init(|| {
        BOARDS
            .iter()
            .map(|(id, text)| Arc::new(BoardSpec::from_yaml(id, text).expect("shipped boards load")))
            .collect()
    })
}

/// Boots `spec`, delivers `payloads` as one burst, runs until idle; the payloads sent.
fn run(spec: &Arc<BoardSpec>, control: u8, payloads: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut device = Device::new(spec.clone(), WorldSpec::conformance(), 0);
    device.set_trace(control & 0x10 != 0);
    if control & 0x08 != 0 {
        device.set_terminator(Terminator::Nul);
    }
    let mut h = Harness::new(device);
    h.power_on();
    for p in payloads {
        h.deliver(p);
    }
    h.run_until_idle().expect("the device goes idle");
    h.device.drain_events();
    h.take_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Mcp { payload, .. } => Some(payload),
            _ => None,
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let specs = boards();
    let spec = &specs[usize::from(control & 0x07) % specs.len()];
    let payloads: Vec<&[u8]> = rest.split(|&b| b == b'\n').take(16).collect();
    let sent = run(spec, control, &payloads);
    assert!(
        sent.len() <= payloads.len(),
        "{} replies to {} requests",
        sent.len(),
        payloads.len()
    );
    for reply in &sent {
        assert!(
            reply.starts_with(br#"{"jsonrpc":"2.0","id":"#),
            "not a JSON-RPC reply: {:?}",
            String::from_utf8_lossy(reply)
        );
    }
    assert_eq!(
        sent,
        run(spec, control, &payloads),
        "the same input gave different bytes"
    );
});
