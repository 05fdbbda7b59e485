//! `xiaozhi-twin fleet`: many simulated devices, each with its own MAC, UUID and NVS, against
//! one backend from one process; a progress bar while they come up and a summary at the end.
//!
//! With `--voice` the devices talk: each runs voice turns (wake, an utterance, the reply heard)
//! and the summary gives turns, failures by reason, latencies per phase as mergeable
//! histograms, TTS pacing and the twin's own costs (`crate::fleet`); `--find-capacity` ramps
//! the count until an SLO breaks; `--shard i/N` runs one part of a run and `fleet merge` adds
//! the parts up.
//!
//! Without `--url` the fleet brings its own backend server (`crate::server`, as `xiaozhi-twin
//! backend` runs it) on a loopback port and runs a script on every device (default: 10 tool
//! calls), so the round trips are measured where a backend sees them. With `--url` the backend
//! is someone else's and latency is measured on the device side (request frame in → reply frame
//! out).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;
use xiaozhi_sim::backend::Outcome;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

use crate::args::{BoardArgs, parse_std_duration};
use crate::fleet::summary::{Shard, Summary as VoiceSummary};
use crate::fleet::{VOICE_SCRIPT, VoiceRun, raise_open_files_limit, rss_kib};
use crate::live::{Counters, LiveOptions, Wake, run_device};
use crate::server::BackendFault;
use crate::server::{Ending, Server, load_personality, serve};

/// The script every device runs against the built-in backend: 10 calls.
pub const DEFAULT_SCRIPT: &str = "\
call self.get_device_status
call self.audio_speaker.set_volume {\"volume\": 30}
call self.get_device_status
call self.audio_speaker.set_volume {\"volume\": 55}
call self.get_device_status
call self.audio_speaker.set_volume {\"volume\": 80}
call self.get_device_status
call self.audio_speaker.set_volume {\"volume\": 0}
call self.get_device_status
call self.audio_speaker.set_volume {\"volume\": 45}
";

/// Many simulated devices against one backend, with a progress bar and a summary.
///
/// Each device has its own MAC, UUID and NVS and starts --stagger after the previous one.
/// Without --url the fleet runs its own backend on a loopback port and every device runs
/// --script (default: 10 tool calls) after hello + initialize + tools/list and the fleet
/// ends when all are done; with --url it runs for --duration. Exit status 0
/// when every device finished without a drop, 1 otherwise.
///
/// With --voice every device talks: it wakes, says --utterance (a shipped 2 s voice by
/// default) into its microphone in real time, and hears the reply (TTS frames decoded through
/// its codec, amplifier and speaker with --decode full, or timed from the Opus TOC bytes with
/// --decode none), --turns times with --think between. The summary gives turns started /
/// completed / failed (and why), latencies per phase (end of speech → stt, → first audio, →
/// tts stop; MCP request → reply), TTS pacing, throughput and what the twin itself used; exit
/// status 0 when every planned turn completed, 1 otherwise, 2 for bad input. --find-capacity
/// ramps the device count until --slo breaks. `fleet merge A.json B.json …` adds up the --json
/// summaries of --shard runs.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
#[command(mut_arg("board", |a| a.required(false).default_value("bread-compact-wifi")))]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Number of devices.
    #[arg(long, default_value_t = 100)]
    pub devices: u32,
    /// Backend URL (default: a built-in backend on a loopback port).
    #[arg(long)]
    pub url: Option<String>,
    #[command(flatten)]
    pub board: BoardArgs,
    /// Stop after this long at most (with --voice: at least as long as the ramp and the turns
    /// need).
    #[arg(long, default_value = "60s", value_parser = parse_std_duration)]
    pub duration: Duration,
    /// Gap between device starts.
    #[arg(long, default_value = "2ms", value_parser = parse_std_duration)]
    pub stagger: Duration,
    /// Personality of the built-in backend.
    #[arg(long, default_value = "xinnan-py")]
    pub personality: String,
    /// Script of the built-in backend (default: 10 calls; with --voice, one turn: hear the
    /// utterance, say that the volume is down; it runs once per turn).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// First device seed (device i gets seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the summary as JSON (with --voice: mergeable HDR histograms).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Devices talk: voice turns instead of the MCP script.
    #[arg(long)]
    pub voice: bool,
    /// Voice turns per device (1–1000).
    #[arg(long, default_value_t = 1, requires = "voice", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub turns: u32,
    /// Between the end of a reply and the next utterance.
    #[arg(long, default_value = "2s", value_parser = parse_std_duration, requires = "voice")]
    pub think: Duration,
    /// What each device says: a WAV file (any rate hound reads; resampled to 16 kHz). Default:
    /// the shipped 2 s speech-like voice.
    #[arg(long, value_name = "FILE", requires = "voice")]
    pub utterance: Option<PathBuf>,
    /// `full`: decode the replies and measure their loudness; `none`: packet lengths from the
    /// Opus TOC bytes (for very large fleets).
    #[arg(long, default_value = "full", value_parser = ["full", "none"], requires = "voice")]
    pub decode: String,
    /// Devices started per second by this process (default: one per --stagger; N shards
    /// started together dial N times as fast).
    #[arg(long, value_name = "DEVICES_PER_S", requires = "voice")]
    pub ramp: Option<f64>,
    /// How long each phase of a turn may take before the turn fails.
    #[arg(long, default_value = "15s", value_parser = parse_std_duration, requires = "voice")]
    pub turn_timeout: Duration,
    /// Run one part of the fleet: devices i, i+N, … (ids, MACs and UUIDs as in the whole run).
    #[arg(long, value_name = "i/N", value_parser = parse_shard, requires = "voice")]
    pub shard: Option<Shard>,
    /// The built-in backend misbehaves: never-tts-start, stop-mid-reply (nothing more after 10
    /// audio frames of a reply), flood (each audio frame 10 times), close-every:N (the Nth,
    /// 2Nth, … connection of the fleet is closed as its reply starts).
    #[arg(long, value_name = "FAULT", default_value = "none", requires = "voice")]
    pub backend_fault: BackendFault,
    /// Ramp the device count (from --devices, doubling, then bisecting) until --slo breaks or
    /// the twin's own budget does; report the largest count that held.
    #[arg(long, requires = "slo")]
    pub find_capacity: bool,
    /// Service level for --find-capacity, e.g. `first_audio_p99<1500ms` (several with `,`;
    /// metrics: stt, first_audio, tts_stop, mcp_reply with _p50/_p90/_p99/_max, and failed,
    /// failed_pct).
    #[arg(long, value_name = "EXPR", requires = "voice")]
    pub slo: Option<String>,
    /// Largest count --find-capacity tries.
    #[arg(long, default_value_t = 20_000, requires = "find_capacity", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_devices: u32,
    /// --find-capacity: the curve as an SVG picture.
    #[arg(long, value_name = "FILE.svg", requires = "find_capacity")]
    pub out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `fleet` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Merge the --json summaries of `fleet --voice --shard i/N` runs into one (counts add,
    /// histograms merge); refuses files of other runs, versions or boards.
    Merge {
        /// Summary files.
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Merge even when some shards of the run are missing (the summary covers those given).
        #[arg(long)]
        partial: bool,
        /// Write the merged summary here.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("`{s}`: use i/N with 0 ≤ i < N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (index, count): (u32, u32) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if count == 0 || index >= count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

/// The end-of-run summary.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub devices: u32,
    pub board: String,
    pub firmware: String,
    pub backend: String,
    pub connected_peak: u64,
    pub hellos_completed: u64,
    pub devices_done: u64,
    pub mcp_round_trips: u64,
    pub unanswered: u64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_measured_at: &'static str,
    pub drops: u64,
    pub connect_failures: u64,
    pub rss_before_kib: u64,
    pub rss_connected_kib: u64,
    pub rss_per_device_kib: f64,
    pub open_files_limit: u64,
    pub wall_s: f64,
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn run(opts: &Args) -> Result<bool> {
    if let Some(Command::Merge { files, json, partial }) = &opts.command {
        return merge(files, json.as_deref(), *partial);
    }
    if opts.voice {
        return run_voice(opts);
    }
    run_mcp(opts)
}

fn merge(files: &[PathBuf], json: Option<&std::path::Path>, partial: bool) -> Result<bool> {
    let mut merged: Option<VoiceSummary> = None;
    for f in files {
        let s = VoiceSummary::read(f)?;
        match merged.as_mut() {
            None => merged = Some(s),
            Some(m) => m.merge(&s, &f.display().to_string())?,
        }
    }
    let Some(m) = merged else { bail!("no summary files") };
    let count = m.shards.first().map_or(1, |s| s.count);
    if m.shards.len() as u32 != count {
        let have: Vec<String> = m.shards.iter().map(|s| format!("{}/{}", s.index, s.count)).collect();
        let what = format!("{} of {count} shards ({})", m.shards.len(), have.join(", "));
        if !partial {
            bail!("only {what}: give every shard, or --partial to merge these alone");
        }
        eprintln!("fleet merge: {what} merged (--partial); the summary covers those only");
    }
    m.print();
    if let Some(path) = json {
        m.write(path)?;
    }
    Ok(m.all_completed())
}

fn voice_run(opts: &Args) -> Result<VoiceRun> {
    if opts.devices == 0 {
        bail!("--devices must be at least 1");
    }
    let spec = opts.board.load()?;
    let (utterance, name) = match &opts.utterance {
        Some(p) => {
            let (rate, pcm) = crate::wav::read_pcm(p)?;
            if pcm.is_empty() {
                bail!("{}: the utterance is empty", p.display());
            }
            let pcm = xiaozhi_sim::voice::codec::resample_clip(&pcm, rate, xiaozhi_sim::voice::codec::MIC_RATE);
            (pcm, p.display().to_string())
        }
        None => {
            let (rate, pcm) = crate::wav::parse_pcm(crate::fleet::DEFAULT_UTTERANCE)?;
            (pcm, format!("built-in ({rate} Hz speech-like, 2 s)"))
        }
    };
    let personality = load_personality(&opts.personality)?;
    // The backend's script is one turn; it runs once per turn (repeated --turns times).
    let (origin, text, default_script) = match &opts.script {
        Some(p) => (
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?,
            false,
        ),
        None => ("default voice fleet script".to_string(), VOICE_SCRIPT.to_string(), true),
    };
    Script::parse(&origin, &text)?;
    let mut turns_text = text.clone();
    if !turns_text.ends_with('\n') {
        turns_text.push('\n');
    }
    let script = Script::parse(&origin, &turns_text.repeat(opts.turns as usize))?;
    let voice_dbfs = personality.voice.as_ref().map_or(-40.0, |v| v.voice_dbfs);
    let voiced_end = crate::fleet::turns::voiced_end(&utterance, voice_dbfs);
    if voiced_end == 0 {
        bail!("{name}: no 60 ms frame of the utterance is voice (RMS ≥ {voice_dbfs} dBFS)");
    }
    let nominal = if opts.url.is_none() && default_script {
        crate::fleet::nominal_first_audio(&personality)
    } else {
        None
    };
    Ok(VoiceRun {
        spec,
        devices: opts.devices,
        shard: opts.shard.unwrap_or(Shard { index: 0, count: 1 }),
        url: opts.url.clone(),
        personality,
        script,
        script_text: text,
        fault: opts.backend_fault,
        plan: crate::fleet::turns::Plan {
            utterance: utterance.into(),
            voiced_end,
            turns: opts.turns,
            think: opts.think,
            timeout: opts.turn_timeout,
            nominal_first_audio: nominal,
        },
        utterance_name: name,
        decode_full: opts.decode == "full",
        ramp: opts.ramp.unwrap_or_else(|| 1.0 / opts.stagger.as_secs_f64().max(1e-6)),
        duration: opts.duration,
        seed: opts.seed,
        quiet: opts.quiet,
    })
}

fn run_voice(opts: &Args) -> Result<bool> {
    let run = voice_run(opts)?;
    if opts.find_capacity {
        let slo = crate::fleet::capacity::Slo::parse(opts.slo.as_deref().unwrap_or_default())?;
        return crate::fleet::capacity::find(&run, &slo, opts.max_devices, opts.out.as_deref(), opts.json.as_deref());
    }
    if opts.slo.is_some() {
        bail!("--slo is read by --find-capacity only");
    }
    let summary = crate::fleet::run_voice(&run)?;
    summary.print();
    if let Some(path) = &opts.json {
        summary.write(path)?;
    }
    Ok(summary.all_completed())
}

fn run_mcp(opts: &Args) -> Result<bool> {
    if opts.devices == 0 {
        bail!("--devices must be at least 1");
    }
    let spec = opts.board.load()?;
    // One memo of the tool catalogue for every device of the fleet (they share the registry).
    let board = xiaozhi_sim::device::Board::new(spec.clone());
    let limit = raise_open_files_limit();
    let needed = u64::from(opts.devices) * if opts.url.is_some() { 1 } else { 2 } + 64;
    if limit != 0 && limit < needed {
        bail!(
            "{} devices need about {needed} open files, but the limit is {limit} (raise it with `ulimit -n`)",
            opts.devices
        );
    }
    eprintln!("fleet: open-files limit {limit} (raised to the hard limit when lower)");
    let script = match &opts.script {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
            Script::parse(&p.display().to_string(), &text)?
        }
        None => Script::parse("default fleet script", DEFAULT_SCRIPT)?,
    };
    let expected_calls = script.steps_for(1).count() as u64;
    let personality = load_personality(&opts.personality)?;
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let summary = runtime.block_on(async {
        let started = Instant::now();
        // The backend stops first (close frames), then the devices.
        let (stop_tx, stop_rx) = watch::channel(false);
        let (backend_stop_tx, backend_stop_rx) = watch::channel(false);
        // The backend: ours on a loopback port, or the one named by --url.
        let (url, server, serving) = match &opts.url {
            Some(u) => (u.clone(), None, None),
            None => {
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let server = Server::new(personality.clone(), script, false, false);
                let serving = tokio::spawn(serve(listener, server.clone(), backend_stop_rx));
                (format!("ws://{addr}/xiaozhi/v1/"), Some(server), Some(serving))
            }
        };
        if xiaozhi_sim::device::channel::parse_url(&url).is_none() {
            bail!("--url `{url}`: expected ws://HOST:PORT/PATH");
        }
        let rss_before = rss_kib();
        let counters = Arc::new(Counters::default());
        let bar = ProgressBar::new(u64::from(opts.devices));
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} devices done · {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..opts.devices {
            let world = WorldSpec::dialling(WsConfig {
                url: url.clone(),
                token: "test-token".into(),
                version: 1,
            });
            let mut device = Device::new(&board, world, opts.seed.wrapping_add(u64::from(i)));
            device.set_trace(false);
            let live = LiveOptions {
                wake: Wake::OnBoot,
                duration: Some(opts.duration),
                verbose: false,
                label: device.mac().to_string(),
                stop: Some(stop_rx.clone()),
                counters: Some(counters.clone()),
                script: None,
                record: false,
                turns: None,
            };
            let delay = opts.stagger * i;
            tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                device.power_on(SimTime::ZERO);
                run_device(device, live).await
            });
        }
        // Wait: every device done (its script finished), or the duration.
        let deadline = started + opts.duration;
        let mut peak = 0u64;
        let mut rss_connected = 0u64;
        loop {
            let open = counters.open.load(Ordering::Relaxed);
            peak = peak.max(open);
            let done = match &server {
                Some(s) => s.scripts_done(),
                None => counters.hellos.load(Ordering::Relaxed),
            };
            bar.set_position(done.min(u64::from(opts.devices)));
            bar.set_message(format!(
                "{open} connected, {} hellos, {} MCP replies",
                counters.hellos.load(Ordering::Relaxed),
                counters.replies.load(Ordering::Relaxed)
            ));
            // A foreign backend decides when its devices are done: run for the whole duration.
            if (server.is_some() && done >= u64::from(opts.devices)) || Instant::now() >= deadline {
                rss_connected = rss_connected.max(rss_kib());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bar.finish_and_clear();
        let _ = backend_stop_tx.send(true);
        if let Some(s) = serving {
            let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
        }
        let _ = stop_tx.send(true);
        let mut connect_failures = 0;
        while let Some(r) = tasks.join_next().await {
            if let Ok(Ok((_, stats))) = r {
                connect_failures += stats.connect_failures;
            }
        }
        let hellos = counters.hellos.load(Ordering::Relaxed);
        let (mut lat, trips, unanswered, drops, done, measured_at);
        match &server {
            Some(s) => {
                let reports = s.take_reports();
                lat = Vec::new();
                let mut u = 0;
                for r in &reports {
                    for e in &r.session.exchanges {
                        match (e.outcome.clone(), e.reply_ms) {
                            (Outcome::Replied | Outcome::Error, Some(at)) => lat.push(at - e.sent_ms),
                            _ => u += 1,
                        }
                    }
                }
                trips = lat.len() as u64;
                unanswered = u;
                drops = reports.iter().filter(|r| r.ending != Ending::Shutdown).count() as u64;
                done = s.scripts_done();
                measured_at = "backend (request sent → reply received)";
            }
            None => {
                lat = counters
                    .reply_us
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|us| f64::from(*us) / 1000.0)
                    .collect();
                trips = counters.replies.load(Ordering::Relaxed);
                unanswered = 0;
                drops = 0;
                done = hellos;
                measured_at = "device (request frame in → reply frame out)";
            }
        }
        lat.sort_by(f64::total_cmp);
        let _ = expected_calls;
        Ok::<_, anyhow::Error>(Summary {
            devices: opts.devices,
            board: spec.name.clone(),
            firmware: spec.firmware.version.clone(),
            backend: match &opts.url {
                Some(u) => u.clone(),
                None => format!("built-in ({})", personality.name),
            },
            connected_peak: peak,
            hellos_completed: hellos,
            devices_done: done,
            mcp_round_trips: trips,
            unanswered,
            latency_p50_ms: percentile(&lat, 50.0),
            latency_p99_ms: percentile(&lat, 99.0),
            latency_measured_at: measured_at,
            drops,
            connect_failures,
            rss_before_kib: rss_before,
            rss_connected_kib: rss_connected,
            rss_per_device_kib: rss_connected.saturating_sub(rss_before) as f64 / f64::from(opts.devices),
            open_files_limit: limit,
            wall_s: started.elapsed().as_secs_f64(),
        })
    })?;
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2} ms"));
    println!(
        "devices            {} × {} {} against {}",
        summary.devices, summary.board, summary.firmware, summary.backend
    );
    println!("connected (peak)   {}", summary.connected_peak);
    println!("hellos completed   {}", summary.hellos_completed);
    println!("devices done       {}", summary.devices_done);
    println!(
        "MCP round trips    {} ({} unanswered)",
        summary.mcp_round_trips, summary.unanswered
    );
    println!(
        "reply latency      p50 {}  p99 {}  (at the {})",
        fmt(summary.latency_p50_ms),
        fmt(summary.latency_p99_ms),
        summary.latency_measured_at
    );
    println!(
        "drops              {} (connect failures {})",
        summary.drops, summary.connect_failures
    );
    println!(
        "memory             {:.1} KiB per device ({} KiB → {} KiB resident{})",
        summary.rss_per_device_kib,
        summary.rss_before_kib,
        summary.rss_connected_kib,
        if opts.url.is_none() {
            ", built-in backend included"
        } else {
            ""
        }
    );
    println!("wall time          {:.2} s", summary.wall_s);
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("{}", path.display()))?;
    }
    Ok(summary.devices_done >= u64::from(summary.devices) && summary.drops == 0)
}
