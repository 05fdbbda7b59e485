//! The twin's Opus decoder (opus-rs) against real libopus 1.3.1: packets and libopus's own
//! decode were made once by `tests/data/opus/make_vectors.py` (Debian `libopus0` + `opuslib`)
//! and committed; this test needs neither.
//!
//! * `tts24k`: xiaozhi-esp32-server's TTS encoder (24 kHz, AUDIO, 24 kbps, complexity 10,
//!   VOICE, 60 ms), decoded at 16 kHz (the rate the server's hello echoes back, so the rate
//!   the device decodes at) and at 24 kHz.
//! * `mic16k`: the firmware's microphone settings (16 kHz, AUDIO, complexity 0, VBR, DTX on;
//!   1-byte DTX packets included), decoded at 16 kHz as the server does.
//!
//! Tolerance: the SNR of the twin's decode against libopus's, over the whole stream, at least
//! 80 dB, and no sample more than 2 LSB apart. Measured on 2026-12-01 (opus-rs 0.1.40, x86_64):
//! `tts24k` bit-identical at both rates; `mic16k` 87.1 dB, worst 1 LSB (float rounding in the
//! SILK path).

use xiaozhi_sim::voice::codec::to_i16;

fn data(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/opus")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn packets(name: &str) -> Vec<Vec<u8>> {
    let raw = data(&format!("{name}.packets"));
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 <= raw.len() {
        let n = usize::from(u16::from_be_bytes([raw[i], raw[i + 1]]));
        out.push(raw[i + 2..i + 2 + n].to_vec());
        i += 2 + n;
    }
    assert_eq!(i, raw.len(), "{name}.packets is not a whole number of packets");
    out
}

fn pcm(name: &str) -> Vec<i16> {
    data(name)
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Decodes with opus-rs directly (no resampler): what the decoder itself produces at `rate`.
fn twin_decode(packets: &[Vec<u8>], rate: i32) -> Vec<i16> {
    let mut d = opus_rs::OpusDecoder::new(rate, 1).unwrap();
    let frame = (rate / 1000 * 60) as usize;
    let mut buf = vec![0f32; frame * 2];
    let mut out = Vec::new();
    for p in packets {
        let n = d.decode(p, frame, &mut buf).unwrap();
        out.extend(buf[..n].iter().map(|&x| to_i16(x)));
    }
    out
}

fn compare(case: &str, rate: i32) -> (f64, i32) {
    let ps = packets(case);
    let want = pcm(&format!("{case}.{rate}.pcm"));
    let got = twin_decode(&ps, rate);
    assert_eq!(got.len(), want.len(), "{case} at {rate}: sample count");
    let signal: f64 = want.iter().map(|&s| f64::from(s).powi(2)).sum();
    let noise: f64 = got.iter().zip(&want).map(|(&a, &b)| f64::from(a - b).powi(2)).sum();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
        .max()
        .unwrap();
    assert!(signal > 0.0, "{case}: the reference is silent");
    let snr = if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    };
    (snr, worst)
}

#[test]
fn the_servers_tts_stream_decodes_like_libopus_at_16k_and_24k() {
    assert_eq!(packets("tts24k").len(), 33);
    for rate in [16_000, 24_000] {
        let (snr, worst) = compare("tts24k", rate);
        eprintln!("tts24k at {rate} Hz: SNR {snr:.1} dB, worst {worst} LSB");
        assert!(
            snr >= 80.0 && worst <= 2,
            "tts24k at {rate} Hz: SNR {snr:.1} dB, worst {worst} LSB"
        );
    }
}

#[test]
fn the_firmwares_mic_stream_with_dtx_packets_decodes_like_libopus() {
    let ps = packets("mic16k");
    assert!(ps.iter().any(|p| p.len() <= 2), "the vector has DTX packets");
    let (snr, worst) = compare("mic16k", 16_000);
    eprintln!("mic16k: SNR {snr:.1} dB, worst {worst} LSB");
    assert!(snr >= 80.0 && worst <= 2, "mic16k: SNR {snr:.1} dB, worst {worst} LSB");
}

#[test]
fn a_corrupted_packet_is_an_error_or_audio_never_a_panic() {
    let mut d = xiaozhi_sim::voice::codec::Decoder::new(16_000, 60, 24_000).unwrap();
    for (k, p) in packets("tts24k").into_iter().enumerate() {
        let mut q = p.clone();
        for (i, b) in q.iter_mut().enumerate().skip(1) {
            *b ^= ((i * 31 + k * 7) % 251) as u8;
        }
        let _ = d.decode(&q);
        let _ = d.decode(&q[..q.len() / 2]);
    }
}
