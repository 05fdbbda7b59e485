//! Resident memory of the voice codec state, per instance (opus-rs decoder and encoder, the
//! rubato resampler of the decode path): `cargo run --release -p xiaozhi-sim --example memprobe`.
use rubato::{
    Async, Fft, FixedAsync, FixedSync, PolynomialDegree, SincInterpolationParameters, SincInterpolationType,
    WindowFunction,
};

fn rss() -> f64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<f64>().ok())
        .unwrap_or(0.0)
        * 4.0
}

fn per<T>(n: usize, make: impl Fn() -> T) -> (f64, Vec<T>) {
    let a = rss();
    let v: Vec<T> = (0..n).map(|_| make()).collect();
    ((rss() - a) / n as f64, v)
}

fn main() {
    let n = 500;
    let (d, _d) = per(n, || opus_rs::OpusDecoder::new(16000, 1).unwrap());
    let (e, _e) = per(n, xiaozhi_sim::voice::codec::Encoder::mic);
    let (r1, _r1) = per(n, || Fft::<f32>::new(16000, 24000, 960, 1, FixedSync::Both).unwrap());
    let (r8, _r8) = per(n, || {
        Fft::<f32>::new_custom(
            16000,
            24000,
            960,
            8,
            1,
            WindowFunction::BlackmanHarris2,
            FixedSync::Both,
        )
        .unwrap()
    });
    let (poly, _p) = per(n, || {
        Async::<f32>::new_poly(1.5, 1.0, PolynomialDegree::Septic, 960, 1, FixedAsync::Input).unwrap()
    });
    let sp = SincInterpolationParameters {
        sinc_len: 64,
        f_cutoff: Some(0.9),
        oversampling_factor: 64,
        interpolation: SincInterpolationType::Linear,
        window: WindowFunction::BlackmanHarris2,
    };
    let (sinc, _s) = per(n, || {
        Async::<f32>::new_sinc(1.5, 1.0, &sp, 960, 1, FixedAsync::Input).unwrap()
    });
    println!("poly {poly:.1} sinc64 {sinc:.1}");
    let (full, _f) = per(n, || xiaozhi_sim::voice::codec::Decoder::new(16000, 60, 24000).unwrap());
    println!(
        "KiB per instance: opus-rs decoder {d:.1}, mic encoder {e:.1}, resampler 1 sub-chunk {r1:.1}, 8 sub-chunks {r8:.1}, the twin's decoder + resampler {full:.1}"
    );
}
