//! Memory and agreement of the two codecs (README.md): bytes each decoder and encoder holds
//! (a counting allocator), each decode of the committed libopus 1.3.1 vectors against libopus's
//! own, and each microphone encode of the vectors' input against libopus's packets.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use opus_comparison::*;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes `make` leaves held.
fn held<T>(make: impl FnOnce() -> T) -> (isize, T) {
    let before = LIVE.load(Ordering::Relaxed);
    let t = make();
    (LIVE.load(Ordering::Relaxed) - before, t)
}

/// The input of `make_vectors.py`'s cases (its `speechlike`, float64 as numpy computes it).
fn speechlike(rate: usize, seconds: f64) -> Vec<i16> {
    let n = (rate as f64 * seconds) as usize;
    let tau = 2.0 * std::f64::consts::PI;
    let mut cum = 0.0f64;
    (0..n)
        .map(|i| {
            let t = i as f64 / rate as f64;
            cum += 120.0 + 100.0 * (0.5 + 0.5 * (tau * 0.7 * t).sin());
            let phase = tau * cum / rate as f64;
            let x: f64 = (1..16)
                .filter(|k| (k * 220) < rate / 2)
                .map(|k| (0.6 / k as f64) * (k as f64 * phase).sin())
                .sum();
            let mut env = (tau * 4.0 * t).sin().max(0.0).powf(0.5);
            if t > 1.0 && t < 1.3 {
                env = 0.0;
            }
            ((x * env * 0.25).clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16
        })
        .collect()
}

/// SNR of `got` against `want` (dB) and the largest sample difference.
fn agreement(want: &[i16], got: &[i16]) -> (f64, i32) {
    let (mut s, mut e, mut worst) = (0f64, 0f64, 0i32);
    for (&a, &b) in want.iter().zip(got) {
        s += f64::from(a).powi(2);
        let d = i32::from(a) - i32::from(b);
        e += f64::from(d).powi(2);
        worst = worst.max(d.abs());
    }
    (10.0 * (s / e.max(1e-30)).log10(), worst)
}

fn decode_all(d: &mut dyn Decode, packets: &[Vec<u8>], rate: i32) -> Vec<i16> {
    let mut buf = vec![0i16; frame(rate)];
    let mut out = Vec::new();
    for p in packets {
        let n = d.decode(p, &mut buf);
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn main() {
    println!("held after construction (heap bytes, counting allocator):");
    for rate in [16_000, 24_000] {
        let (rs, _a) = held(|| RsDecoder::new(rate));
        let (lib, _b) = held(|| LibDecoder::new(rate));
        println!("  decoder {rate} Hz mono   opus-rs {rs:>7}   unsafe-libopus {lib:>7}");
    }
    let (rs, _a) = held(RsEncoder::mic);
    let (lib, _b) = held(LibEncoder::mic);
    println!("  microphone encoder     opus-rs {rs:>7}   unsafe-libopus {lib:>7}");

    println!("decode against libopus 1.3.1 (sim/tests/data/opus):");
    for (case, rate) in [("tts24k", 16_000), ("tts24k", 24_000), ("mic16k", 16_000)] {
        let packets = packets(case);
        let want = pcm(&format!("{case}.{rate}.pcm"));
        for (name, d) in [
            ("opus-rs", &mut RsDecoder::new(rate) as &mut dyn Decode),
            ("unsafe-libopus", &mut LibDecoder::new(rate)),
        ] {
            let got = decode_all(d, &packets, rate);
            let (snr, worst) = agreement(&want, &got);
            let same = got == want;
            println!(
                "  {case} at {rate}: {name:>14} {} samples, SNR {snr:.1} dB, worst {worst} LSB{}",
                got.len(),
                if same { ", identical" } else { "" }
            );
        }
        if case == "mic16k" {
            // Packet by packet: where the two disagree with libopus.
            let mut lib = LibDecoder::new(rate);
            let mut buf = vec![0i16; frame(rate)];
            let mut at = 0;
            for (i, p) in packets.iter().enumerate() {
                let n = lib.decode(p, &mut buf);
                let (_, worst) = agreement(&want[at..at + n], &buf[..n]);
                if worst > 2 {
                    println!("    unsafe-libopus packet {i} ({} bytes): worst {worst} LSB", p.len());
                }
                at += n;
            }
        }
    }

    println!("microphone encode of make_vectors.py's input against libopus 1.3.1's packets:");
    let input = speechlike(16_000, 2.0);
    let want = packets("mic16k");
    for (name, e) in [
        ("opus-rs", &mut RsEncoder::mic() as &mut dyn Encode),
        ("unsafe-libopus", &mut LibEncoder::mic()),
    ] {
        let mut out = vec![0u8; 1500];
        let got: Vec<Vec<u8>> = input
            .chunks_exact(960)
            .map(|f| {
                let n = e.encode(f, &mut out);
                out[..n].to_vec()
            })
            .collect();
        let same = got.iter().zip(&want).filter(|(a, b)| a == b).count();
        println!("  {name:>14}: {same} of {} packets byte-identical", want.len());
    }
}
