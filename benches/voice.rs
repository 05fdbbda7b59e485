//! The voice path's speed and memory targets (issue 13; BENCHMARKS.md).
//!
//! | bench | what | target |
//! |---|---|---|
//! | `voice/receive_tts` | 3 s of the server's TTS (24 kHz Opus, decoded at 16 kHz as xinnan-py's hello says, resampled to 24 kHz) through the device: decode, resample, codec, amplifier, speaker, room, measured | ≥ 500× real time |
//! | `voice/decode_only`, `voice/decode_resample` | the decoder alone, and with the resampler (reference) | — |
//! | `voice/encode_mic` | 3 s of speech through the firmware's microphone encoder (16 kHz, 60 ms, complexity 0) | ≥ 500× real time |
//! | `voice/voice_turn` | a whole turn in virtual time against xinnan-py (loopback): wake, 2 s utterance, set_volume, 3 s reply | ≥ 200× real time |
//!
//! Elements are **virtual microseconds**, so `Melem/s` reads as "times real time". Before the
//! benches run, the memory of a device idle and in the middle of a voice turn is printed
//! (resident set over 200 devices, `/proc/self/statm`), with codecs of their own and sharing one
//! codec pool (`voice/receive_tts_pooled` is the shared case's speed row).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Board, Device, DeviceState};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::loopback::Loopback;
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::{Decoder, Encoder, resample_clip};
use xiaozhi_sim::voice::memo::{CodecPool, SharedCodecs};
use xiaozhi_sim::voice::speak::{Timbre, synthesize};
use xiaozhi_sim::world::{WorldSpec, WsConfig};

const BOARD: &str = include_str!("../boards/bread-compact-wifi.yaml");

fn board() -> Board {
    Board::new(Arc::new(
        BoardSpec::from_yaml("boards/bread-compact-wifi.yaml", BOARD).expect("shipped board"),
    ))
}

fn booted(b: &Board) -> Harness {
    let mut h = Harness::new(Device::new(b, WorldSpec::conformance(), 3));
    h.power_on();
    h.run_until_idle().expect("boots");
    h.sleep(SimDuration::from_secs(1));
    h
}

/// Delivers `packets` as one turn and measures the session.
fn receive(h: &mut Harness, packets: Vec<Vec<u8>>) -> f64 {
    let now = h.now();
    h.agenda.start_turn(now);
    h.agenda.sentence(now + SimDuration::from_millis(200), "好的", packets);
    h.agenda.stop_turn(now);
    let end = h.agenda.last_at().expect("queued");
    h.run_until(end + SimDuration::from_millis(200));
    let s = h.device.speech_log().sessions.last().expect("a session").clone();
    let w = s.window.expect("decoded");
    let (m, _) = h.device.render(w.start, w.end, false);
    m.spl_db.expect("heard")
}

fn paired(b: &Board) -> Loopback {
    let mut world = WorldSpec::conformance();
    world.websocket = Some(WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version: 1,
    });
    let mut d = Device::new(b, world, 5);
    d.set_trace(false);
    d.power_on(SimTime::ZERO);
    let mut lb = Loopback::new(d, Arc::new(BackendSpec::shipped("xinnan-py").expect("shipped")));
    lb.run_until(SimTime::from_millis(3000)).expect("rests");
    lb
}

/// wake → 2 s utterance → set_volume → 3 s reply → back to listening. Returns the virtual span.
fn voice_turn(b: &Board, utterance: &[i16]) -> SimDuration {
    let mut lb = paired(b);
    let t0 = lb.now();
    lb.device.wake_word(t0, "你好小智");
    lb.run_until(t0 + SimDuration::from_millis(200)).expect("rests");
    // xinnan-py answers the wake word's `listen detect` with a turn; this one says nothing.
    let now = lb.now();
    lb.session().expect("connected").end_turn(now);
    lb.run_until(now + SimDuration::from_secs(1)).expect("rests");
    let now = lb.now();
    lb.device.say(now, utterance);
    let before = lb.session().map_or(0, |s| s.utterances());
    while lb.session().map_or(0, |s| s.utterances()) == before {
        let t = lb.now() + SimDuration::from_millis(60);
        lb.run_until(t).expect("rests");
        assert!(
            lb.now().saturating_since(t0) < SimDuration::from_secs(10),
            "utterance never ended"
        );
    }
    lb.call("self.audio_speaker.set_volume", serde_json::json!({"volume": 40}));
    let now = lb.now();
    let s = lb.session().expect("connected");
    s.speak(now, "音量已经调小了", &Timbre::default(), SimDuration::from_secs(3));
    s.end_turn(now);
    let t = lb.now() + SimDuration::from_secs(5);
    lb.run_until(t).expect("rests");
    assert_eq!(lb.device.snapshot().state, Some(DeviceState::Listening));
    lb.now().saturating_since(t0)
}

fn resident_kib() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4.0)
}

/// Resident memory per device: 200 idle devices, then the same 200 mid-turn (speech queued,
/// decoder and encoder made, microphone streaming); with `shared`, the devices share one codec
/// pool (what `fleet --voice` does: decoder and encoder output come from the memo, the
/// utterance is held once).
fn memory(shared: bool) {
    let b = board();
    let n = 200;
    let Some(base) = resident_kib() else { return };
    let pool: Arc<dyn CodecPool> = SharedCodecs::new(256 << 20);
    let mut hs: Vec<Harness> = (0..n)
        .map(|_| {
            let mut h = booted(&b);
            if shared {
                h.device.share_codecs(pool.clone());
            }
            h
        })
        .collect();
    let idle = resident_kib().unwrap_or(base);
    let packets = if shared {
        pool.speech(&Timbre::default(), "", SimDuration::from_secs(3), 24_000)
            .to_vec()
    } else {
        synthesize(&Timbre::default(), SimDuration::from_secs(3), 24_000)
    };
    let speech: Arc<[i16]> = resample_clip(
        &Timbre::default().render(SimDuration::from_secs(2), 24_000),
        24_000,
        16_000,
    )
    .into();
    for h in &mut hs {
        h.device.set_trace(false);
        let now = h.now();
        h.device.toggle_chat(now);
        h.run_until(now + SimDuration::from_millis(100));
        let now = h.now();
        if shared {
            h.device.say_shared(now, speech.clone());
        } else {
            h.device.say(now, &speech);
        }
        h.run_until(now + SimDuration::from_secs(2));
        let now = h.now();
        h.agenda.start_turn(now);
        h.agenda
            .sentence(now + SimDuration::from_millis(200), "好的", packets.clone());
        h.agenda.stop_turn(now);
        // Half-way through the reply.
        h.run_until(now + SimDuration::from_millis(1700));
        assert_eq!(h.device.snapshot().state, Some(DeviceState::Speaking));
    }
    let mid = resident_kib().unwrap_or(idle);
    eprintln!(
        "voice/memory{}: {:.1} KiB per idle device, {:.1} KiB per device mid voice turn (resident, {n} devices)",
        if shared {
            " (shared codec pool, pool included)"
        } else {
            ""
        },
        (idle - base) / f64::from(n),
        (mid - base) / f64::from(n)
    );
    black_box(&hs);
}

/// Each memory line in a process of its own (resident memory freed by one measurement would
/// otherwise be reused by the next and hide its growth).
fn memory_lines() {
    for mode in ["own", "shared"] {
        let Ok(exe) = std::env::current_exe() else { return };
        let out = std::process::Command::new(exe).env("VOICE_MEMORY", mode).output();
        if let Ok(o) = out {
            eprint!("{}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

fn benches(c: &mut Criterion) {
    memory_lines();
    let b = board();
    let mut group = c.benchmark_group("voice");
    let packets = synthesize(&Timbre::default(), SimDuration::from_secs(3), 24_000);
    group.throughput(Throughput::Elements(3_000_000));
    // The fleet's case: the reply was decoded once already (a warm pool); each device still
    // runs its own queues, resampled output, codec law, amplifier, speaker, room and measurement.
    let pool: Arc<dyn CodecPool> = SharedCodecs::new(256 << 20);
    {
        let mut h = booted(&b);
        h.device.share_codecs(pool.clone());
        receive(&mut h, packets.clone());
    }
    group.bench_function("receive_tts_pooled", |bench| {
        bench.iter_batched(
            || {
                let mut h = booted(&b);
                h.device.share_codecs(pool.clone());
                (h, packets.clone())
            },
            |(mut h, p)| black_box(receive(&mut h, p)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("receive_tts", |bench| {
        bench.iter_batched(
            || (booted(&b), packets.clone()),
            |(mut h, p)| black_box(receive(&mut h, p)),
            BatchSize::LargeInput,
        )
    });
    // The decoder alone (server's 16 kHz, no resampling), then with the resampler to 24 kHz.
    for (name, out_rate) in [("decode_only", 16_000), ("decode_resample", 24_000)] {
        group.bench_function(name, |bench| {
            bench.iter(|| {
                let mut d = Decoder::new(16_000, 60, out_rate).expect("16 kHz");
                black_box(
                    packets
                        .iter()
                        .map(|p| d.decode(p).map_or(0, |x| x.len()))
                        .sum::<usize>(),
                )
            })
        });
    }
    let speech = resample_clip(
        &Timbre::default().render(SimDuration::from_secs(3), 24_000),
        24_000,
        16_000,
    );
    group.bench_function("encode_mic", |bench| {
        bench.iter(|| {
            let mut e = Encoder::mic();
            let n = e.frame_len();
            black_box(speech.chunks(n).map(|f| e.encode(f).len()).sum::<usize>())
        })
    });
    let utterance = resample_clip(
        &Timbre::default().render(SimDuration::from_secs(2), 24_000),
        24_000,
        16_000,
    );
    let span = voice_turn(&b, &utterance);
    eprintln!("voice/voice_turn covers {span} of virtual time per run");
    group.throughput(Throughput::Elements(span.as_micros()));
    group.bench_function("voice_turn", |bench| {
        bench.iter(|| black_box(voice_turn(&b, &utterance)))
    });
    group.finish();
}

criterion_group! {
    name = voice;
    config = Criterion::default().sample_size(20);
    targets = benches
}
fn main() {
    // A child started by `memory_lines` measures one memory line and exits.
    if let Ok(mode) = std::env::var("VOICE_MEMORY") {
        memory(mode == "shared");
        return;
    }
    voice();
    Criterion::default().configure_from_args().final_summary();
}
