//! Where the time of receiving TTS goes, and what each resampler costs (the figures behind the
//! choice in `voice::codec`): `cargo run --release -p xiaozhi-sim --example voiceprof`.
use std::time::Instant;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::voice::codec::Decoder;
use xiaozhi_sim::voice::speak::{Timbre, synthesize};

fn main() {
    resamplers();
    let packets = synthesize(&Timbre::default(), SimDuration::from_secs(3), 24_000);
    let t = Instant::now();
    for _ in 0..50 {
        let mut d = opus_rs::OpusDecoder::new(16000, 1).unwrap();
        let mut buf = vec![0f32; 1920];
        for p in &packets {
            d.decode(p, 1920, &mut buf).unwrap();
        }
    }
    println!(
        "opus decode only: {:.2} ms per 3 s",
        t.elapsed().as_secs_f64() * 1000.0 / 50.0
    );
    let t = Instant::now();
    for _ in 0..50 {
        let mut d = Decoder::new(16000, 60, 24000).unwrap();
        for p in &packets {
            d.decode(p).unwrap();
        }
    }
    println!(
        "decode + resample: {:.2} ms per 3 s",
        t.elapsed().as_secs_f64() * 1000.0 / 50.0
    );
    let t = Instant::now();
    for _ in 0..50 {
        let _ = Decoder::new(16000, 60, 24000).unwrap();
    }
    println!("making a decoder: {:.3} ms", t.elapsed().as_secs_f64() * 1000.0 / 50.0);
}

/// The resamplers rubato offers for 16 → 24 kHz, timed on 3 s of input.
fn resamplers() {
    use audioadapter_buffers::direct::InterleavedSlice;
    use rubato::{
        Async, Fft, FixedAsync, FixedSync, PolynomialDegree, Resampler, SincInterpolationParameters,
        SincInterpolationType, WindowFunction,
    };
    let input = vec![0.1f32; 960];
    let mut out = vec![0f32; 2000];
    let mut run = |name: &str, r: &mut dyn Resampler<f32>| {
        let t = Instant::now();
        for _ in 0..50 * 50 {
            let want = r.output_frames_next();
            let i = InterleavedSlice::new(&input, 1, 960).unwrap();
            let mut o = InterleavedSlice::new_mut(&mut out[..want], 1, want).unwrap();
            r.process_into_buffer(&i, &mut o, None).unwrap();
        }
        println!("{name}: {:.2} ms per 3 s", t.elapsed().as_secs_f64() * 1000.0 / 50.0);
    };
    let p = |len, os, it| SincInterpolationParameters {
        sinc_len: len,
        f_cutoff: Some(0.9),
        oversampling_factor: os,
        interpolation: it,
        window: WindowFunction::BlackmanHarris2,
    };
    run(
        "sinc 32/32 linear",
        &mut Async::<f32>::new_sinc(
            1.5,
            1.0,
            &p(32, 32, SincInterpolationType::Linear),
            960,
            1,
            FixedAsync::Input,
        )
        .unwrap(),
    );
    run(
        "sinc 32/32 nearest",
        &mut Async::<f32>::new_sinc(
            1.5,
            1.0,
            &p(32, 32, SincInterpolationType::Nearest),
            960,
            1,
            FixedAsync::Input,
        )
        .unwrap(),
    );
    run(
        "sinc 32/3 nearest",
        &mut Async::<f32>::new_sinc(
            1.5,
            1.0,
            &p(32, 2, SincInterpolationType::Nearest),
            960,
            1,
            FixedAsync::Input,
        )
        .unwrap(),
    );
    run(
        "poly cubic",
        &mut Async::<f32>::new_poly(1.5, 1.0, PolynomialDegree::Cubic, 960, 1, FixedAsync::Input).unwrap(),
    );
    run(
        "poly septic",
        &mut Async::<f32>::new_poly(1.5, 1.0, PolynomialDegree::Septic, 960, 1, FixedAsync::Input).unwrap(),
    );
    run(
        "poly quintic",
        &mut Async::<f32>::new_poly(1.5, 1.0, PolynomialDegree::Quintic, 960, 1, FixedAsync::Input).unwrap(),
    );
    run(
        "fft",
        &mut Fft::<f32>::new(16000, 24000, 960, 1, FixedSync::Both).unwrap(),
    );
}
