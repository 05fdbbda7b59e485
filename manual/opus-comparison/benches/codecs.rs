//! CPU per 60 ms frame of the two codecs (README.md): decoding xiaozhi-esp32-server's TTS
//! stream at 16 and 24 kHz (the committed `tts24k` packets), and the firmware's microphone
//! encoder on a decoded speech stream. Each iteration is the whole stream through a fresh codec.

use criterion::{Criterion, criterion_group, criterion_main};
use opus_comparison::*;

fn decode(c: &mut Criterion) {
    let packets = packets("tts24k");
    let mut g = c.benchmark_group("decode_tts24k_33_frames");
    for rate in [16_000, 24_000] {
        let mut buf = vec![0i16; frame(rate)];
        g.bench_function(format!("opus-rs/{rate}"), |b| {
            b.iter(|| {
                let mut d = RsDecoder::new(rate);
                packets.iter().map(|p| d.decode(p, &mut buf)).sum::<usize>()
            })
        });
        g.bench_function(format!("unsafe-libopus/{rate}"), |b| {
            b.iter(|| {
                let mut d = LibDecoder::new(rate);
                packets.iter().map(|p| d.decode(p, &mut buf)).sum::<usize>()
            })
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let input = pcm("tts24k.16000.pcm");
    let mut out = vec![0u8; 1500];
    let mut g = c.benchmark_group("encode_mic_33_frames");
    g.bench_function("opus-rs", |b| {
        b.iter(|| {
            let mut e = RsEncoder::mic();
            input.chunks_exact(960).map(|f| e.encode(f, &mut out)).sum::<usize>()
        })
    });
    g.bench_function("unsafe-libopus", |b| {
        b.iter(|| {
            let mut e = LibEncoder::mic();
            input.chunks_exact(960).map(|f| e.encode(f, &mut out)).sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
