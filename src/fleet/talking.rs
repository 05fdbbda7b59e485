//! The voice fleet: many devices that talk (wake, an utterance, the reply heard), against one
//! backend, with the summary a backend operator reads (`super::summary`), run whole or as one
//! shard of a bigger run.
//!
//! What is shared, and why it is still faithful: every device has its own state machine,
//! queues, NVS, audio chain and measurement; Opus work goes through one codec memo
//! (`xiaozhi_sim::voice::memo`), which gives each device the bytes its own decoder or encoder
//! would give; the utterance's samples are held once; the built-in backend encodes each distinct
//! reply once.
//!
//! One thread per core, each with its own single-threaded runtime, its own built-in backend
//! (sharing the codec pool) and every `workers`-th device: a device and its backend connection
//! then run on one thread, with no cross-thread wake-ups per audio frame.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use indicatif::ProgressBar;
use tokio::sync::watch;
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Board, Device};
use xiaozhi_sim::voice::codec::{MIC_RATE, resample_clip};
use xiaozhi_sim::voice::memo::{CodecPool, SharedCodecs};

use super::summary::{self, Latency, Loudness, Pacing, Phases, RunOf, Shard, TwinCost, VoiceSummary};
use super::turns::{Latencies, Metrics, Plan};
use super::{
    Devices, GatewayNet, Member, Target, Transport, check_url, cpu_s, fleet_device, loopback_backend, open_files_for,
    progress_bar, rss_kib, start, via,
};
use crate::live::Counters;
use crate::server::{BackendFault, Server};

pub use crate::fleet::turns::Decode;

/// The fleet's default utterance (`assets/utterance-2s.wav`, made by `assets/make_utterance.py`).
pub const DEFAULT_UTTERANCE: &[u8] = include_bytes!("../../assets/utterance-2s.wav");

/// What the built-in backend does on each turn, as the seed article's turn goes: hear the
/// utterance, turn the volume down (`set_volume 40`), read it back, say so, in words of its own
/// for each device and turn (`{device}`, `{turn}`: a real server's replies differ from one
/// listener to the next, so no two devices decode the same audio).
pub const VOICE_SCRIPT: &str = "\
await utterance
call self.audio_speaker.set_volume {\"volume\": 40}
call self.get_device_status
speak \"好的，音量已经调小了。（{device}，第 {turn} 轮）\" for 3s
";

/// [`VOICE_SCRIPT`] saying the same words to everyone (`--same-audio`).
pub const SAME_AUDIO_SCRIPT: &str = "\
await utterance
call self.audio_speaker.set_volume {\"volume\": 40}
call self.get_device_status
speak \"好的，音量已经调小了。\" for 3s
";

/// A voice fleet to run.
#[derive(Clone)]
pub struct VoiceRun {
    pub spec: Arc<BoardSpec>,
    pub devices: u32,
    pub shard: Shard,
    /// Someone else's backend (`None`: the built-in one on a loopback port).
    pub external: Option<Target>,
    /// The built-in backend's wire (MQTT + UDP: through the gateway stand-in).
    pub transport: Transport,
    /// The built-in gateway stand-in's network (MQTT + UDP).
    pub gateway: GatewayNet,
    pub personality: BackendSpec,
    pub script: Script,
    /// The backend's script for one turn, as given (for the summary).
    pub script_text: String,
    pub fault: BackendFault,
    pub plan: Plan,
    pub utterance_name: String,
    pub decode: Decode,
    pub ramp: f64,
    pub duration: Duration,
    pub seed: u64,
    pub quiet: bool,
    /// Serve the live dashboard here (`--web`).
    pub web: Option<String>,
}

impl VoiceRun {
    /// The backend as the summary names it: someone else's, or the built-in one with its
    /// personality, fault and wire.
    pub fn backend_name(&self) -> String {
        match &self.external {
            Some(t) => t.to_string(),
            None => {
                let fault = match self.fault {
                    BackendFault::None => String::new(),
                    f => format!(", fault {f:?}"),
                };
                let wire = match self.transport {
                    Transport::Websocket => via(&Target::WebSocket(String::new())),
                    Transport::Mqtt => via(&Target::Mqtt {
                        endpoint: String::new(),
                        key: None,
                    }),
                };
                let mut net = String::new();
                if self.gateway.nodelay {
                    net.push_str(", TCP_NODELAY");
                }
                let f = self.gateway.udp_faults;
                if !f.is_none() {
                    let _ = write!(
                        net,
                        ", UDP loss {}‰ duplicate {}‰ reorder {}‰ corrupt {}‰",
                        f.loss, f.duplicate, f.reorder, f.corrupt
                    );
                }
                format!("built-in ({}{fault}{wire}{net})", self.personality.name)
            }
        }
    }
}

/// The utterance every device says, 16 kHz, and how the summary names it: a WAV file (any rate
/// hound reads, resampled), or the shipped 2 s voice.
pub fn load_utterance(path: Option<&Path>) -> Result<(Vec<i16>, String)> {
    match path {
        Some(p) => {
            let (rate, pcm) = crate::wav::read_pcm(p)?;
            if pcm.is_empty() {
                bail!("{}: the utterance is empty", p.display());
            }
            Ok((resample_clip(&pcm, rate, MIC_RATE), p.display().to_string()))
        }
        None => {
            let (rate, pcm) = crate::wav::parse_pcm(DEFAULT_UTTERANCE)?;
            Ok((pcm, format!("built-in ({rate} Hz speech-like, 2 s)")))
        }
    }
}

/// The built-in backend's script: one turn (`path`, or [`VOICE_SCRIPT`] /
/// [`SAME_AUDIO_SCRIPT`]) as given, and that turn repeated `turns` times (it runs once per
/// turn). The text is checked alone first, so an error names the line of the file; with
/// `same_audio` a sentence that names its listener is refused (the replies would differ).
pub fn turn_script(path: Option<&Path>, turns: u32, same_audio: bool) -> Result<(Script, String)> {
    let (origin, text) = match path {
        Some(p) => (p.display().to_string(), xiaozhi_sim::spec::read_text(p)?),
        None if same_audio => ("default voice fleet script".to_string(), SAME_AUDIO_SCRIPT.to_string()),
        None => ("default voice fleet script".to_string(), VOICE_SCRIPT.to_string()),
    };
    let one = Script::parse(&origin, &text)?;
    if same_audio && let Some(line) = one.personal_line() {
        bail!(
            "{origin}:{line}: the sentence names its listener ({{device}} or {{turn}}), so the replies differ; drop --same-audio or the placeholder"
        );
    }
    let mut turn = text.clone();
    if !turn.ends_with('\n') {
        turn.push('\n');
    }
    Ok((Script::parse(&origin, &turn.repeat(turns as usize))?, text))
}

/// How long a run may take: `--duration`, or longer when the ramp and the turns need it (the
/// last device starts at `n / ramp`, then its turns each take at most the utterance, three
/// timeouts and the think time), so a big fleet is never cut by a fixed deadline.
pub fn run_length(run: &VoiceRun, n: u64) -> Duration {
    let plan = &run.plan;
    let ramp = Duration::from_secs_f64(n as f64 / run.ramp.max(0.001));
    let utterance = plan.utterance_length();
    let turn = utterance + plan.timeout * 3 + plan.think.most();
    run.duration.max(ramp + turn * plan.turns + Duration::from_secs(10))
}

/// The devices of shard `i/N`: `i, i+N, …` below `devices`.
pub fn shard_ids(devices: u32, shard: Shard) -> impl Iterator<Item = u32> {
    (shard.index..devices).step_by(shard.count.max(1) as usize)
}

/// What every thread of the fleet shares.
struct Fleet<'a> {
    run: &'a VoiceRun,
    board: Board,
    pool: Arc<dyn CodecPool>,
    plan: Arc<Plan>,
    metrics: Arc<Metrics>,
    counters: Arc<Counters>,
    /// Between device starts on one thread's turn (the ramp).
    gap: Duration,
    /// Connections the built-in backends have accepted (for `close-every:N`).
    connections: Arc<AtomicU64>,
    workers: usize,
}

/// What one thread of the fleet found.
#[derive(Default)]
struct Part {
    connect_failures: u64,
    connected: u64,
    /// Datagrams accepted after a sequence gap (MQTT + UDP).
    udp_gaps: u64,
    drops: BTreeMap<String, u64>,
    loud: Loudness,
}

/// What the fleet's watcher saw while it ran.
struct Watched {
    peak: u64,
    rss_peak: u64,
    /// Highest CPU use (cores) over a 1 s window with turns in flight.
    cpu_peak: f64,
}

/// CPU use over windows of about a second: the busiest window in which turns were in flight
/// (the ramp's start, think times and the quiet wait at the end do not dilute it).
struct CpuWindows {
    since: Instant,
    cpu_at: f64,
    busy: bool,
    peak: f64,
}

impl CpuWindows {
    const WINDOW: Duration = Duration::from_secs(1);

    fn new() -> CpuWindows {
        CpuWindows {
            since: Instant::now(),
            cpu_at: cpu_s(),
            busy: false,
            peak: 0.0,
        }
    }

    /// One sample: `in_flight` says whether a turn is under way now.
    fn sample(&mut self, in_flight: bool) {
        self.busy |= in_flight;
        let wall = self.since.elapsed();
        if wall < Self::WINDOW {
            return;
        }
        let cpu = cpu_s();
        if self.busy {
            self.peak = self.peak.max((cpu - self.cpu_at) / wall.as_secs_f64());
        }
        *self = CpuWindows {
            since: Instant::now(),
            cpu_at: cpu,
            busy: in_flight,
            peak: self.peak,
        };
    }
}

/// Runs one voice fleet; the summary covers this shard.
pub fn run(run: &VoiceRun) -> Result<VoiceSummary> {
    let ids: Vec<u32> = shard_ids(run.devices, run.shard).collect();
    let n = ids.len() as u64;
    let limit = open_files_for(n, run.external.is_none(), run.transport)?;
    if let Some(Target::WebSocket(u)) = &run.external {
        check_url(u)?;
    }
    let fleet = Fleet {
        run,
        board: Board::new(run.spec.clone()),
        pool: SharedCodecs::new(256 << 20),
        plan: Arc::new(run.plan.clone()),
        metrics: Arc::new(Metrics::default()),
        counters: Arc::new(Counters::default()),
        gap: Duration::from_secs_f64(1.0 / run.ramp.max(0.001)),
        connections: Arc::new(AtomicU64::new(0)),
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let title = format!("{n} devices × {} against {}", run.spec.name, run.backend_name());
    let dashboard = crate::fleet::web::Dashboard::of(run.web.as_deref(), title, &fleet.metrics, &fleet.counters)?;
    let started = Instant::now();
    let cpu0 = cpu_s();
    let rss_before = rss_kib();
    let planned = n * u64::from(fleet.plan.turns);
    let bar = progress_bar(
        planned,
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} turns ended · {msg}",
        run.quiet,
    );
    let (parts, watched) = fleet.drive(&ids, started + run_length(run, n), &bar, rss_before);
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    bar.finish_and_clear();
    let mut part = Part::default();
    for p in parts {
        part.add(p?);
    }
    let (dec, enc, _) = fleet.pool.stats();
    let w = wall.max(1e-9);
    let twin = TwinCost {
        cpu_s: cpu,
        cores: fleet.workers as u32,
        cores_busy: cpu / w,
        cores_busy_peak: watched.cpu_peak,
        rss_before_kib: rss_before,
        rss_peak_kib: watched.rss_peak,
        rss_per_device_kib: watched.rss_peak.saturating_sub(rss_before) as f64 / n.max(1) as f64,
        open_files_limit: limit,
        codec_memo_hits: dec.hits + enc.hits,
        codec_memo_computed: dec.computed + enc.computed + dec.private_steps + enc.private_steps,
    };
    let summary = fleet.summary(n, part, watched.peak, wall, twin);
    crate::fleet::web::Dashboard::end(dashboard, &summary)?;
    Ok(summary)
}

impl Fleet<'_> {
    /// Runs the threads until every device is done, the run's `deadline`, or a thread ends;
    /// the progress bar meanwhile.
    fn drive(
        &self,
        ids: &[u32],
        deadline: Instant,
        bar: &ProgressBar,
        rss_before: u64,
    ) -> (Vec<Result<Part>>, Watched) {
        let (stop_tx, stop_rx) = watch::channel(false);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.workers)
                .map(|w| {
                    let mine: Vec<(usize, u32)> = ids
                        .iter()
                        .copied()
                        .enumerate()
                        .filter(|(k, _)| k % self.workers == w)
                        .collect();
                    let stop = stop_rx.clone();
                    scope.spawn(move || self.run_part(mine, stop))
                })
                .collect();
            let watched = self.watch(ids.len() as u64, deadline, bar, rss_before, || {
                handles.iter().any(|h| h.is_finished())
            });
            let _ = stop_tx.send(true);
            let parts = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a fleet thread panicked")))
                })
                .collect();
            (parts, watched)
        })
    }

    /// Shows progress and samples the peaks until the fleet is done (`n` devices), the
    /// deadline, or `ended` says a thread has stopped.
    fn watch(
        &self,
        n: u64,
        deadline: Instant,
        bar: &ProgressBar,
        rss_before: u64,
        ended: impl Fn() -> bool,
    ) -> Watched {
        let (m, planned) = (&self.metrics, n * u64::from(self.plan.turns));
        let mut seen = Watched {
            peak: 0,
            rss_peak: rss_before,
            cpu_peak: 0.0,
        };
        let mut cpu = CpuWindows::new();
        loop {
            let open = self.counters.open.load(Ordering::Relaxed);
            seen.peak = seen.peak.max(open);
            let in_flight = m.in_flight.load(Ordering::Relaxed) > 0;
            if in_flight {
                seen.rss_peak = seen.rss_peak.max(rss_kib());
            }
            cpu.sample(in_flight);
            seen.cpu_peak = cpu.peak;
            let turns_ended = m.completed.load(Ordering::Relaxed) + m.failed.load(Ordering::Relaxed);
            bar.set_position(turns_ended.min(planned));
            bar.set_message(format!(
                "{open} connected · turns {} started, {} completed, {} failed · {} TTS frames in",
                m.started.load(Ordering::Relaxed),
                m.completed.load(Ordering::Relaxed),
                m.failed.load(Ordering::Relaxed),
                m.tts_frames.load(Ordering::Relaxed),
            ));
            let all_done = m.devices_done.load(Ordering::Relaxed) >= n;
            if all_done || Instant::now() >= deadline || ended() {
                if all_done {
                    // The last conversations are closing (a BOOT click each): let them.
                    std::thread::sleep(Duration::from_millis(300));
                }
                return seen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One thread's devices (`(k, id)`: start order and device id) and, without `--url`, its
    /// backend; runs until the stop signal.
    fn run_part(&self, mine: Vec<(usize, u32)>, stop: watch::Receiver<bool>) -> Result<Part> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let run = self.run;
        runtime.block_on(async {
            let (backend_stop_tx, backend_stop_rx) = watch::channel(false);
            let (device_stop_tx, device_stop_rx) = watch::channel(false);
            let (target, serving, server) = match &run.external {
                Some(t) => (t.clone(), None, None),
                None => {
                    let server = self.backend();
                    let (target, serving) =
                        loopback_backend(server.clone(), backend_stop_rx, run.transport, run.gateway).await?;
                    (target, Some(serving), Some(server))
                }
            };
            let made: Vec<(usize, u32, Device)> = mine
                .into_iter()
                .map(|(k, i)| {
                    (
                        k,
                        i,
                        fleet_device(&self.board, &target, run.seed.wrapping_add(u64::from(i))),
                    )
                })
                .collect();
            if let Some(server) = &server {
                // This thread's backend says each of its devices its own words: encoded now,
                // before the first device starts (no reply waits for its encoding).
                let listeners: Vec<String> = made.iter().map(|(_, _, d)| d.mac().to_string()).collect();
                server.prepare_speech(&listeners);
            }
            let mut devices = Devices::new();
            for (k, id, mut device) in made {
                device.share_codecs(self.pool.clone());
                device.set_durations_only(!run.decode.full_for(id));
                // Each reply's level is measured as it plays; the turn's PCM is not kept.
                device.measure_as_played(xiaozhi_sim::device::AsPlayed::Replies);
                let member = Member {
                    delay: self.gap.mul_f64(k as f64),
                    duration: run_length(run, u64::from(run.devices)) + Duration::from_secs(30),
                    stop: device_stop_rx.clone(),
                    counters: self.counters.clone(),
                    activate: target.activation(&self.board, run.seed.wrapping_add(u64::from(id))),
                };
                start(
                    &mut devices,
                    device,
                    member,
                    Some((self.plan.clone(), self.metrics.clone())),
                );
            }
            let mut stop = stop;
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
            while let Some(r) = devices.join_next().await {
                let Ok(Ok((device, stats))) = r else { continue };
                part.connect_failures += stats.connect_failures;
                part.connected += u64::from(stats.hellos > 0);
                part.measure(&device, !device.durations_only());
            }
            Ok(part)
        })
    }

    /// A thread's built-in backend (the fleet's codec pool and connection count).
    fn backend(&self) -> Arc<Server> {
        let run = self.run;
        let server = Server::with(
            run.personality.clone(),
            run.script.clone(),
            false,
            false,
            Some(self.pool.clone()),
            run.fault,
            Some(self.connections.clone()),
        );
        match &self.plan.ear_log {
            Some(log) => server.with_ear_log(log.clone()),
            None => server,
        }
    }

    /// The summary of `n` devices from what the parts found and the metrics counted.
    fn summary(&self, n: u64, part: Part, peak: u64, wall: f64, twin: TwinCost) -> VoiceSummary {
        let m = &self.metrics;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (completed, failed) = (load(&m.completed), load(&m.failed));
        let planned = n * u64::from(self.plan.turns);
        let failures = m.failures.lock().unwrap_or_else(|e| e.into_inner());
        let (tts, mic) = (load(&m.tts_frames), load(&m.mic_frames));
        let w = wall.max(1e-9);
        VoiceSummary {
            format: summary::FORMAT.into(),
            run: self.run_of(),
            shards: vec![self.run.shard],
            devices: n,
            devices_connected: part.connected,
            connected_peak: peak,
            peaks: summary::MEASURED.into(),
            backend_process: None,
            connect_failures: part.connect_failures,
            turns: summary::Turns {
                planned,
                started: load(&m.started),
                completed,
                failed,
                unfinished: planned.saturating_sub(completed + failed),
                failures: failures.iter().map(|(k, v)| (k.key().to_string(), *v)).collect(),
                stt_before_end_of_speech: load(&m.early_stt),
            },
            latency: phases(&m.latency.lock().unwrap_or_else(|e| e.into_inner())),
            pacing: Pacing {
                tts_frames_received: tts,
                mic_frames_sent: mic,
                gaps_over_120ms: load(&m.stutters),
                turns_with_gaps: load(&m.stuttered_turns),
                frames_dropped_by_devices: part.drops,
                udp_sequence_gaps: part.udp_gaps,
            },
            loudness: (self.run.decode != Decode::None).then_some(part.loud),
            turns_per_s: completed as f64 / w,
            tts_frames_per_s: tts as f64 / w,
            mic_frames_per_s: mic as f64 / w,
            wall_s: wall,
            twin,
        }
    }

    /// What the run was (a merge refuses shards of another).
    fn run_of(&self) -> RunOf {
        let (run, plan) = (self.run, &self.plan);
        RunOf {
            twin_version: env!("CARGO_PKG_VERSION").into(),
            board: run.spec.name.clone(),
            firmware: run.spec.firmware.version.clone(),
            backend: run.backend_name(),
            decode: run.decode.to_string(),
            audio: if plan.same_audio { "same" } else { "distinct" }.into(),
            utterance: run.utterance_name.clone(),
            utterance_s: plan.utterance.len() as f64 / f64::from(MIC_RATE),
            turns_per_device: plan.turns,
            devices_total: run.devices,
            seed: run.seed,
            think_s: plan.think.mean().as_secs_f64(),
            think: plan.think.to_string(),
            turn_timeout_s: plan.timeout.as_secs_f64(),
            ramp_per_s: run.ramp,
            backend_script: run.external.is_none().then(|| run.script_text.clone()),
        }
    }
}

/// The latency histograms as the summary shows them.
fn phases(l: &Latencies) -> Phases {
    Phases {
        stt: Latency::of(&l.stt),
        first_audio: Latency::of(&l.first_audio),
        tts_stop: Latency::of(&l.tts_stop),
        twin_added_first_audio: Latency::of(&l.twin_added_first_audio),
        mcp_reply: Latency::of(&l.mcp_reply),
        worst_frame_gap: Latency::of(&l.worst_gap),
    }
}

impl Part {
    fn add(&mut self, p: Part) {
        self.connect_failures += p.connect_failures;
        self.connected += p.connected;
        self.udp_gaps += p.udp_gaps;
        for (k, v) in p.drops {
            *self.drops.entry(k).or_insert(0) += v;
        }
        self.loud.add(&p.loud);
    }

    /// A finished device's drops by reason and (with decoding) the level of each reply.
    fn measure(&mut self, device: &Device, decode_full: bool) {
        let log = device.speech_log();
        for c in log.sessions.iter().map(|s| &s.counts).chain([&log.outside]) {
            self.udp_gaps += c.gaps;
            for (k, v) in [
                ("wrong_state", c.dropped_wrong_state),
                ("queue_full", c.dropped_queue_full),
                ("undecodable", c.dropped_undecodable),
                ("no_channel", c.dropped_no_channel),
                ("silenced", c.dropped_silenced),
                ("udp_refused", c.dropped_refused),
            ] {
                if v > 0 {
                    *self.drops.entry(k.into()).or_insert(0) += v;
                }
            }
        }
        if !decode_full {
            return;
        }
        let loud = &mut self.loud;
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
    fn the_shipped_utterance_is_two_seconds_of_voice_to_its_last_frame() {
        let (rate, pcm) = crate::wav::parse_pcm(DEFAULT_UTTERANCE).unwrap();
        assert_eq!((rate, pcm.len()), (16_000, 32_000));
        assert_eq!(crate::fleet::turns::voiced_end(&pcm, -40.0), pcm.len());
    }
}
