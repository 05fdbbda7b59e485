//! The voice fleet: many devices that talk (wake, an utterance, the reply heard), against one
//! backend, with the summary a backend operator reads (`turns`, `summary`), the knee search
//! (`capacity`) and shards.
//!
//! What is shared, and why it is still faithful: every device has its own state machine,
//! queues, NVS, audio chain and measurement; Opus work goes through one codec memo
//! (`xiaozhi_sim::voice::memo`), which gives each device the bytes its own decoder or encoder
//! would give; the utterance's samples are held once; the built-in backend encodes each distinct
//! reply once.

pub mod capacity;
pub mod summary;
pub mod turns;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Board, Device};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::voice::codec::MIC_RATE;
use xiaozhi_sim::voice::memo::{CodecPool, SharedCodecs};
use xiaozhi_sim::world::{WorldSpec, WsConfig};

use crate::live::{Counters, LiveOptions, Wake, run_device};
use crate::server::{BackendFault, Server, serve};
use summary::{Latency, Loudness, Pacing, Phases, RunOf, Shard, Summary, TwinCost};
use turns::{Metrics, Plan};

/// The fleet's default utterance (`assets/utterance-2s.wav`, made by `assets/make_utterance.py`).
pub const DEFAULT_UTTERANCE: &[u8] = include_bytes!("../../assets/utterance-2s.wav");

/// What the built-in backend does on each turn: hear the utterance, turn the volume down, say so.
pub const VOICE_SCRIPT: &str = "\
await utterance
speak \"好的，音量已经调小了。\" for 3s
";

/// A voice fleet to run.
#[derive(Clone)]
pub struct VoiceRun {
    pub spec: Arc<BoardSpec>,
    pub devices: u32,
    pub shard: Shard,
    pub url: Option<String>,
    pub personality: BackendSpec,
    pub script: Script,
    /// The backend's script for one turn, as given (for the summary).
    pub script_text: String,
    pub fault: BackendFault,
    pub plan: Plan,
    pub utterance_name: String,
    pub decode_full: bool,
    pub ramp: f64,
    pub duration: Duration,
    pub seed: u64,
    pub quiet: bool,
}

/// Resident set size of this process in KiB (Linux; 0 elsewhere).
pub fn rss_kib() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4
}

/// Raises the soft open-files limit to the hard one; returns the soft limit in force.
#[allow(unsafe_code)] // the one FFI call of the project: getrlimit/setrlimit
pub fn raise_open_files_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return 0;
            }
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: lim.rlim_max,
                    rlim_max: lim.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    return raised.rlim_cur;
                }
            }
        }
        lim.rlim_cur
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// CPU seconds of this process so far (user + system; Linux `/proc/self/stat`, 0 elsewhere).
pub fn cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|s| s.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

/// The designed delay of the built-in backend from the last voiced frame to its first audio:
/// its end-of-speech rule fires on the first microphone frame at least `end_of_speech` after
/// the last voiced one (frames come every 60 ms), and the script speaks at once.
pub fn nominal_first_audio(spec: &BackendSpec) -> Option<Duration> {
    let eos = spec.voice.as_ref()?.end_of_speech.0.as_micros();
    let frame = 60_000u64;
    Some(Duration::from_micros(eos.div_ceil(frame) * frame))
}

/// How long a run may take: `--duration`, or longer when the ramp and the turns need it (the
/// last device starts at `n / ramp`, then its turns each take at most the utterance, three
/// timeouts and the think time), so a big fleet is never cut by a fixed deadline.
pub fn run_length(run: &VoiceRun, n: u64) -> Duration {
    let plan = &run.plan;
    let ramp = Duration::from_secs_f64(n as f64 / run.ramp.max(0.001));
    let utterance = plan.utterance_length();
    let turn = utterance + plan.timeout * 3 + plan.think;
    run.duration.max(ramp + turn * plan.turns + Duration::from_secs(10))
}

/// The devices of shard `i/N`: `i, i+N, …` below `devices`.
pub fn shard_ids(devices: u32, shard: Shard) -> impl Iterator<Item = u32> {
    (shard.index..devices).step_by(shard.count.max(1) as usize)
}

/// Runs one voice fleet; the summary covers this shard.
pub fn run_voice(run: &VoiceRun) -> Result<Summary> {
    let limit = raise_open_files_limit();
    let ids: Vec<u32> = shard_ids(run.devices, run.shard).collect();
    let n = ids.len() as u64;
    let needed = n * if run.url.is_some() { 1 } else { 2 } + 64;
    if limit != 0 && limit < needed {
        bail!("{n} devices need about {needed} open files, but the limit is {limit} (raise it with `ulimit -n`)");
    }
    let board = Board::new(run.spec.clone());
    let pool: Arc<dyn CodecPool> = SharedCodecs::new(256 << 20);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let plan = Arc::new(run.plan.clone());
    if let Some(u) = &run.url
        && xiaozhi_sim::device::channel::parse_url(u).is_none()
    {
        bail!("--url `{u}`: expected ws://HOST:PORT/PATH");
    }
    let started = std::time::Instant::now();
    let cpu0 = cpu_s();
    let rss_before = rss_kib();
    let counters = Arc::new(Counters::default());
    let metrics = Arc::new(Metrics::default());
    let planned = n * u64::from(plan.turns);
    let bar = if run.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(planned)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} turns ended · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let gap = Duration::from_secs_f64(1.0 / run.ramp.max(0.001));
    let (stop_tx, stop_rx) = watch::channel(false);
    let connections = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // One thread per core, each with its own single-threaded runtime, its own built-in backend
    // (sharing the codec pool) and every `workers`-th device: a device and its backend
    // connection then run on one thread, with no cross-thread wake-ups per audio frame.
    let mut peak = 0u64;
    let mut rss_peak = rss_before;
    let parts: Vec<Result<Part>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<(usize, u32)> = ids
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(k, _)| k % workers == w)
                    .collect();
                let ctx = PartCtx {
                    run,
                    board: &board,
                    pool: pool.clone(),
                    plan: plan.clone(),
                    metrics: metrics.clone(),
                    counters: counters.clone(),
                    gap,
                    stop: stop_rx.clone(),
                    connections: connections.clone(),
                };
                scope.spawn(move || run_part(ctx, mine))
            })
            .collect();
        let deadline = started + run_length(run, n);
        loop {
            let open = counters.open.load(Ordering::Relaxed);
            peak = peak.max(open);
            if metrics.in_flight.load(Ordering::Relaxed) > 0 {
                rss_peak = rss_peak.max(rss_kib());
            }
            let ended = metrics.completed.load(Ordering::Relaxed) + metrics.failed.load(Ordering::Relaxed);
            bar.set_position(ended.min(planned));
            bar.set_message(format!(
                "{open} connected · turns {} started, {} completed, {} failed · {} TTS frames in",
                metrics.started.load(Ordering::Relaxed),
                metrics.completed.load(Ordering::Relaxed),
                metrics.failed.load(Ordering::Relaxed),
                metrics.tts_frames.load(Ordering::Relaxed),
            ));
            let all_done = metrics.devices_done.load(Ordering::Relaxed) >= n;
            if all_done || std::time::Instant::now() >= deadline || handles.iter().any(|h| h.is_finished()) {
                if all_done {
                    // The last conversations are closing (a BOOT click each): let them.
                    std::thread::sleep(Duration::from_millis(300));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = stop_tx.send(true);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a fleet thread panicked")))
            })
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    bar.finish_and_clear();
    let mut connect_failures = 0;
    let mut connected = 0;
    let mut drops = std::collections::BTreeMap::<String, u64>::new();
    let mut loud = Loudness::default();
    for p in parts {
        let p = p?;
        connect_failures += p.connect_failures;
        connected += p.connected;
        for (k, v) in p.drops {
            *drops.entry(k).or_insert(0) += v;
        }
        loud.replies_measured += p.loud.replies_measured;
        loud.not_audible += p.loud.not_audible;
        loud.replies_with_level += p.loud.replies_with_level;
        loud.spl_db_sum += p.loud.spl_db_sum;
        loud.spl_db_min = [loud.spl_db_min, p.loud.spl_db_min]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        loud.spl_db_max = [loud.spl_db_max, p.loud.spl_db_max]
            .into_iter()
            .flatten()
            .reduce(f64::max);
    }
    loud.spl_db_mean = (loud.replies_with_level > 0).then(|| loud.spl_db_sum / loud.replies_with_level as f64);
    let (dec, enc, _) = pool.stats();
    let lat = metrics.latency.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let failures = metrics
        .failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(k, v)| (k.key().to_string(), *v))
        .collect();
    let completed = metrics.completed.load(Ordering::Relaxed);
    let started_turns = metrics.started.load(Ordering::Relaxed);
    let failed = metrics.failed.load(Ordering::Relaxed);
    let tts = metrics.tts_frames.load(Ordering::Relaxed);
    let mic = metrics.mic_frames.load(Ordering::Relaxed);
    let w = wall.max(1e-9);
    Ok(Summary {
        format: summary::FORMAT.into(),
        run: RunOf {
            twin_version: env!("CARGO_PKG_VERSION").into(),
            board: run.spec.name.clone(),
            firmware: run.spec.firmware.version.clone(),
            backend: match &run.url {
                Some(u) => u.clone(),
                None => format!(
                    "built-in ({}{})",
                    run.personality.name,
                    match run.fault {
                        BackendFault::None => String::new(),
                        f => format!(", fault {f:?}"),
                    }
                ),
            },
            decode: if run.decode_full { "full" } else { "none" }.into(),
            utterance: run.utterance_name.clone(),
            utterance_s: plan.utterance.len() as f64 / f64::from(MIC_RATE),
            turns_per_device: plan.turns,
            devices_total: run.devices,
            seed: run.seed,
            think_s: plan.think.as_secs_f64(),
            turn_timeout_s: plan.timeout.as_secs_f64(),
            ramp_per_s: run.ramp,
            backend_script: run.url.is_none().then(|| run.script_text.clone()),
        },
        shards: vec![run.shard],
        devices: n,
        devices_connected: connected,
        connected_peak: peak,
        connect_failures,
        turns: summary::Turns {
            planned,
            started: started_turns,
            completed,
            failed,
            unfinished: planned.saturating_sub(completed + failed),
            failures,
            stt_before_end_of_speech: metrics.early_stt.load(Ordering::Relaxed),
        },
        latency: Phases {
            stt: Latency::of(&lat.stt),
            first_audio: Latency::of(&lat.first_audio),
            tts_stop: Latency::of(&lat.tts_stop),
            twin_added_first_audio: Latency::of(&lat.twin_added_first_audio),
            mcp_reply: Latency::of(&lat.mcp_reply),
            worst_frame_gap: Latency::of(&lat.worst_gap),
        },
        pacing: Pacing {
            tts_frames_received: tts,
            mic_frames_sent: mic,
            gaps_over_120ms: metrics.stutters.load(Ordering::Relaxed),
            turns_with_gaps: metrics.stuttered_turns.load(Ordering::Relaxed),
            frames_dropped_by_devices: drops,
        },
        loudness: run.decode_full.then_some(loud),
        turns_per_s: completed as f64 / w,
        tts_frames_per_s: tts as f64 / w,
        mic_frames_per_s: mic as f64 / w,
        wall_s: wall,
        twin: TwinCost {
            cpu_s: cpu,
            cores: workers as u32,
            cores_busy: cpu / w,
            rss_before_kib: rss_before,
            rss_peak_kib: rss_peak,
            rss_per_device_kib: rss_peak.saturating_sub(rss_before) as f64 / n.max(1) as f64,
            open_files_limit: limit,
            codec_memo_hits: dec.hits + enc.hits,
            codec_memo_computed: dec.computed + enc.computed,
        },
    })
}

/// What one thread of the fleet shares with the others.
struct PartCtx<'a> {
    run: &'a VoiceRun,
    board: &'a Board,
    pool: Arc<dyn CodecPool>,
    plan: Arc<Plan>,
    metrics: Arc<Metrics>,
    counters: Arc<Counters>,
    gap: Duration,
    stop: watch::Receiver<bool>,
    connections: Arc<std::sync::atomic::AtomicU64>,
}

/// What one thread of the fleet found.
#[derive(Default)]
struct Part {
    connect_failures: u64,
    connected: u64,
    drops: std::collections::BTreeMap<String, u64>,
    loud: Loudness,
}

/// One thread's devices (`(k, id)`: start order and device id) and, without `--url`, its
/// backend; runs until the stop signal.
fn run_part(ctx: PartCtx<'_>, mine: Vec<(usize, u32)>) -> Result<Part> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let run = ctx.run;
    runtime.block_on(async {
        let (backend_stop_tx, backend_stop_rx) = watch::channel(false);
        let (device_stop_tx, device_stop_rx) = watch::channel(false);
        let (url, serving) = match &run.url {
            Some(u) => (u.clone(), None),
            None => {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let server = Server::with(
                    run.personality.clone(),
                    run.script.clone(),
                    false,
                    false,
                    Some(ctx.pool.clone()),
                    run.fault,
                    Some(ctx.connections.clone()),
                );
                let serving = tokio::spawn(serve(listener, server, backend_stop_rx));
                (format!("ws://{addr}/xiaozhi/v1/"), Some(serving))
            }
        };
        let mut tasks = tokio::task::JoinSet::new();
        for (k, i) in mine {
            let world = WorldSpec::dialling(WsConfig {
                url: url.clone(),
                token: "test-token".into(),
                version: 1,
            });
            let mut device = Device::new(ctx.board, world, run.seed.wrapping_add(u64::from(i)));
            device.set_trace(false);
            device.share_codecs(ctx.pool.clone());
            device.set_durations_only(!run.decode_full);
            let live = LiveOptions {
                wake: Wake::OnBoot,
                duration: Some(run_length(run, u64::from(run.devices)) + Duration::from_secs(30)),
                verbose: false,
                label: device.mac().to_string(),
                stop: Some(device_stop_rx.clone()),
                counters: Some(ctx.counters.clone()),
                script: None,
                record: false,
                turns: Some((ctx.plan.clone(), ctx.metrics.clone())),
            };
            let delay = ctx.gap.mul_f64(k as f64);
            tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                device.power_on(SimTime::ZERO);
                run_device(device, live).await
            });
        }
        let mut stop = ctx.stop.clone();
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        // The backend stops first (close frames), then the devices.
        let _ = backend_stop_tx.send(true);
        if let Some(s) = serving {
            let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
        }
        let _ = device_stop_tx.send(true);
        let mut part = Part::default();
        while let Some(r) = tasks.join_next().await {
            let Ok(Ok((device, stats))) = r else { continue };
            part.connect_failures += stats.connect_failures;
            part.connected += u64::from(stats.hellos > 0);
            measure(&device, run.decode_full, &mut part);
        }
        Ok(part)
    })
}

/// A finished device's drops by reason and (with decoding) the level of each reply.
fn measure(device: &Device, decode_full: bool, part: &mut Part) {
    let log = device.speech_log();
    for c in log.sessions.iter().map(|s| &s.counts).chain([&log.outside]) {
        for (k, v) in [
            ("wrong_state", c.dropped_wrong_state),
            ("queue_full", c.dropped_queue_full),
            ("undecodable", c.dropped_undecodable),
            ("no_channel", c.dropped_no_channel),
        ] {
            if v > 0 {
                *part.drops.entry(k.into()).or_insert(0) += v;
            }
        }
    }
    if !decode_full {
        return;
    }
    let loud = &mut part.loud;
    for s in &log.sessions {
        let Some(w) = s.window else { continue };
        let (m, _) = device.heard(&w, false);
        loud.replies_measured += 1;
        if let Some(spl) = m.spl_db.filter(|x| x.is_finite()) {
            loud.replies_with_level += 1;
            loud.spl_db_sum += spl;
            loud.spl_db_min = Some(loud.spl_db_min.map_or(spl, |x| x.min(spl)));
            loud.spl_db_max = Some(loud.spl_db_max.map_or(spl, |x| x.max(spl)));
        }
        if !m.audible {
            loud.not_audible += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_device_once_with_the_ids_of_the_whole_run() {
        for count in 1..6u32 {
            let mut seen: Vec<u32> = (0..count)
                .flat_map(|index| shard_ids(23, Shard { index, count }))
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..23).collect::<Vec<_>>(), "{count} shards");
        }
        assert_eq!(
            shard_ids(10, Shard { index: 1, count: 3 }).collect::<Vec<_>>(),
            vec![1, 4, 7]
        );
    }

    #[test]
    fn the_built_in_backend_answers_after_its_end_of_speech_wait_in_whole_frames() {
        let spec = xiaozhi_sim::backend::BackendSpec::shipped("xinnan-py").unwrap();
        // 500 ms of quiet is noticed on the 9th 60 ms frame after the last voiced one.
        assert_eq!(nominal_first_audio(&spec), Some(Duration::from_millis(540)));
    }

    #[test]
    fn the_shipped_utterance_is_two_seconds_of_voice_to_its_last_frame() {
        let (rate, pcm) = crate::wav::parse_pcm(DEFAULT_UTTERANCE).unwrap();
        assert_eq!((rate, pcm.len()), (16_000, 32_000));
        assert_eq!(turns::voiced_end(&pcm, -40.0), pcm.len());
    }
}
