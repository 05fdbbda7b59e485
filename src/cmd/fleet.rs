//! `xiaozhi-twin fleet`: many simulated devices, each with its own MAC, UUID and NVS, against
//! one backend from one process; a progress bar while they come up and a summary at the end.
//!
//! With `--voice` the devices talk: each runs voice turns (wake, an utterance, the reply heard)
//! and the summary gives turns, failures by reason, latencies per phase as mergeable
//! histograms, TTS pacing and the twin's own costs (`crate::fleet::talking`); `--find-capacity`
//! ramps the count until an SLO breaks (`crate::fleet::capacity`); `--shard i/N` runs one part of
//! a run and `fleet merge` adds the parts up (`crate::fleet::summary`).
//!
//! Without `--url` the fleet brings its own backend server (`crate::server`, as `xiaozhi-twin
//! backend` runs it) on a loopback port and runs a script on every device (default: 10 tool
//! calls), so the round trips are measured where a backend sees them. With `--url` the backend
//! is someone else's and latency is measured on the device side (request frame in → reply frame
//! out); `crate::fleet::mcp` runs it.
//!
//! This file holds the arguments, their help and their checks; the fleets live in
//! `crate::fleet`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use xiaozhi_sim::backend::script::Script;

use crate::args::{BoardArgs, parse_std_duration};
use crate::fleet::mcp::{self, McpRun};
use crate::fleet::summary::{Shard, merge_files};
use crate::fleet::talking::{self, VoiceRun, load_utterance, turn_script};
use crate::fleet::think::Think;
use crate::fleet::turns::{Plan, voiced_end};
use crate::fleet::{GatewayNet, Target, Transport, capacity, open_files_for};
use crate::server::{BackendFault, load_personality};

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
/// its codec, amplifier and speaker with --decode full, timed from the Opus TOC bytes with
/// --decode none, or decoded on every Nth device with --decode sample:N), --turns times with
/// --think between. Each device says and hears its own audio unless --same-audio. The summary gives turns started /
/// completed / failed (and why), latencies per phase (end of speech → stt, → first audio, →
/// tts stop; MCP request → reply), TTS pacing, throughput and what the twin itself used; exit
/// status 0 when every planned turn completed, 1 otherwise, 2 for bad input. --find-capacity
/// ramps the device count until --slo breaks. --transport mqtt sends every device to MQTT + UDP
/// (the built-in backend behind its xiaozhi-mqtt-gateway stand-in, or --mqtt for a real one). `fleet merge A.json B.json …` adds up the --json
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
    #[arg(long, conflicts_with_all = ["mqtt", "ota"], value_parser = crate::args::parse_ws_url)]
    pub url: Option<String>,
    /// An OTA URL (e.g. http://127.0.0.1:8003/xiaozhi/ota/): every device activates there with
    /// its own MAC and UUID before it powers on, and goes where the answer sends it, as the
    /// firmware chooses (an `mqtt` block wins; a `websocket` block alone is WebSocket).
    #[arg(long, value_name = "URL", conflicts_with = "mqtt")]
    pub ota: Option<String>,
    /// The devices' wire: `websocket`, or `mqtt` (MQTT + UDP, as an OTA answer with an `mqtt`
    /// block sends them: through the built-in backend's xiaozhi-mqtt-gateway stand-in, or to
    /// --mqtt).
    #[arg(long, value_enum, default_value_t = Transport::Websocket)]
    pub transport: Transport,
    /// A real gateway's MQTT endpoint HOST:PORT (implies --transport mqtt): every device gets the
    /// `mqtt` block xiaozhi-esp32-server's OTA hands out for it.
    #[arg(long, value_name = "HOST:PORT")]
    pub mqtt: Option<String>,
    /// With --mqtt: sign each device's password with this key (the gateway's
    /// MQTT_SIGNATURE_KEY, the server's mqtt_signature_key).
    #[arg(long, value_name = "KEY", requires = "mqtt")]
    pub mqtt_signature_key: Option<String>,
    /// With --transport mqtt: the built-in gateway stand-in sets TCP_NODELAY. The real gateway
    /// leaves Nagle's algorithm on, which holds a publish behind an unacked one for the
    /// device's delayed ACK (about 40 ms here): without this flag that is in the latencies.
    #[arg(long)]
    pub mqtt_nodelay: bool,
    /// With --transport mqtt: what the network does to the datagrams between the built-in
    /// gateway stand-in and each device, both ways, per mille and seeded (each device its own
    /// stream), e.g. loss:20,reorder:10; the summary counts the gaps and refusals it causes.
    #[arg(long, value_name = "SPEC")]
    pub udp_fault: Option<xiaozhi_sim::fault::UdpFaults>,
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
    /// utterance, set the volume to 40, read it back, say so; it runs once per turn).
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
    /// Run the built-in backend as `xiaozhi-twin backend` in another process (a fresh one per
    /// run, on a free loopback port, with --personality and the turn script), so the summary's
    /// "the twin itself" is the twin alone and the backend's CPU and peak memory are printed
    /// beside it (WebSocket).
    #[arg(long, requires = "voice", conflicts_with_all = ["url", "mqtt", "ota"])]
    pub backend_process: bool,
    /// Watch the fleet live in a browser: a dashboard on this address (e.g. 127.0.0.1:8089; port
    /// 0 picks one, printed on stderr) with devices connected, turns per second, first-audio
    /// p50/p99 over time and failures by reason; the page saves itself as an HTML report.
    #[arg(long, value_name = "ADDR", requires = "voice")]
    pub web: Option<String>,
    /// Voice turns per device (1–1000).
    #[arg(long, default_value_t = 1, requires = "voice", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub turns: u32,
    /// The wait before each turn: a fixed time between the end of a reply and the next utterance
    /// (the first turn at once), or exp:MEAN, waits drawn from an exponential distribution with
    /// that mean before every turn, the first included (users who talk now and then; seeded by
    /// --seed, the device and the turn).
    #[arg(long, default_value = "2s", value_parser = Think::parse, requires = "voice", value_name = "DURATION|exp:MEAN")]
    pub think: Think,
    /// What each device says: a WAV file (any rate hound reads; resampled to 16 kHz). Default:
    /// the shipped 2 s speech-like voice.
    #[arg(long, value_name = "FILE", requires = "voice")]
    pub utterance: Option<PathBuf>,
    /// Every device says the utterance exactly as recorded and hears the same words (the codec
    /// memo's best case: one device's Opus work serves all). Default: each device and turn says
    /// its own variation of the utterance (start, length, ±3 dB) and the built-in backend's
    /// reply names the device and turn, so every device decodes its own audio.
    #[arg(long, requires = "voice")]
    pub same_audio: bool,
    /// `full`: every device decodes the replies and measures their loudness; `none`: packet
    /// lengths from the Opus TOC bytes (for very large fleets); `sample:N`: devices 0, N, 2N, …
    /// decode and measure, the others time from TOC bytes (the loudness figures are those of
    /// the sample, and the summary says `decode sample:N`).
    #[arg(long, default_value = "full", value_name = "full|none|sample:N", requires = "voice")]
    pub decode: crate::fleet::talking::Decode,
    /// Devices started per second by this process (default: one per --stagger; N shards
    /// started together dial N times as fast).
    #[arg(long, value_name = "DEVICES_PER_S", requires = "voice", value_parser = parse_ramp, allow_negative_numbers = true)]
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
    /// metrics: stt, first_audio, tts_stop, mcp_reply, twin_added_first_audio with
    /// _p50/_p90/_p99/_max, and failed, failed_pct).
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

/// `--ramp`: a positive, finite number of devices per second (at most a million).
fn parse_ramp(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(r),
        _ => Err(format!("`{s}`: give devices per second, a number above 0 (e.g. 500)")),
    }
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

pub fn run(opts: &Args) -> Result<bool> {
    if let Some(p) = &opts.json {
        crate::out::check_writable("--json", p)?;
    }
    crate::out::holding(opts.json.is_some(), || run_inner(opts))
}

/// [`run`] once its output files were checked.
fn run_inner(opts: &Args) -> Result<bool> {
    if let Some(Command::Merge { files, json, partial }) = &opts.command {
        let m = merge_files(files, *partial)?;
        m.print();
        if let Some(path) = json {
            m.write(path)?;
        }
        return Ok(m.all_completed());
    }
    if opts.devices == 0 {
        bail!("--devices must be at least 1");
    }
    if opts.voice {
        return run_voice(opts);
    }
    run_mcp(opts)
}

/// Someone else's backend (`--url` or `--mqtt`), if any.
fn external(opts: &Args) -> Option<Target> {
    if let Some(url) = &opts.ota {
        return Some(Target::Ota(url.as_str().into()));
    }
    match (&opts.url, &opts.mqtt) {
        (Some(url), _) => Some(Target::WebSocket(url.clone())),
        (None, Some(endpoint)) => Some(Target::Mqtt {
            endpoint: endpoint.clone(),
            key: opts.mqtt_signature_key.clone(),
        }),
        (None, None) => None,
    }
}

/// The devices' wire: --transport, or MQTT for --mqtt.
fn transport(opts: &Args) -> Transport {
    // Behind an OTA the answer decides: count the sockets of the wire that needs more.
    if opts.mqtt.is_some() || opts.ota.is_some() {
        Transport::Mqtt
    } else {
        opts.transport
    }
}

/// The built-in gateway stand-in's network.
fn gateway_net(opts: &Args) -> GatewayNet {
    GatewayNet {
        nodelay: opts.mqtt_nodelay,
        udp_faults: opts.udp_fault.unwrap_or_default(),
    }
}

fn voice_run(opts: &Args) -> Result<VoiceRun> {
    let spec = opts.board.load()?;
    let (utterance, name) = load_utterance(opts.utterance.as_deref())?;
    let personality = load_personality(&opts.personality)?;
    let (script, script_text) = turn_script(opts.script.as_deref(), opts.turns, opts.same_audio)?;
    let voice_dbfs = personality.voice.as_ref().map_or(-40.0, |v| v.vad.voice_dbfs);
    let voiced_end = voiced_end(&utterance, voice_dbfs);
    if voiced_end == 0 {
        bail!("{name}: no 60 ms frame of the utterance is voice (RMS ≥ {voice_dbfs} dBFS)");
    }
    // The built-in backend's own delay is known for its own script only.
    let ear_log = (external(opts).is_none() && opts.script.is_none()).then(Default::default);
    Ok(VoiceRun {
        spec,
        devices: opts.devices,
        shard: opts.shard.unwrap_or(Shard { index: 0, count: 1 }),
        external: external(opts),
        transport: transport(opts),
        gateway: gateway_net(opts),
        personality,
        script,
        script_text,
        fault: opts.backend_fault,
        plan: Plan {
            utterance: utterance.into(),
            voiced_end,
            turns: opts.turns,
            think: opts.think,
            timeout: opts.turn_timeout,
            ear_log,
            same_audio: opts.same_audio,
            voice_dbfs,
        },
        utterance_name: name,
        decode: opts.decode,
        ramp: opts.ramp.unwrap_or_else(|| 1.0 / opts.stagger.as_secs_f64().max(1e-6)),
        duration: opts.duration,
        seed: opts.seed,
        quiet: opts.quiet,
        web: opts.web.clone(),
    })
}

fn run_voice(opts: &Args) -> Result<bool> {
    let run = voice_run(opts)?;
    if opts.backend_process && (run.transport != Transport::Websocket || run.fault != BackendFault::None) {
        bail!(
            "--backend-process runs the backend over WebSocket without faults: drop --transport mqtt and --backend-fault"
        );
    }
    let measure = |r: &VoiceRun| match opts.backend_process {
        true => crate::fleet::child::run(r, &opts.personality),
        false => talking::run(r),
    };
    if opts.find_capacity {
        let slo = crate::fleet::slo::Slo::parse(opts.slo.as_deref().unwrap_or_default())?;
        let out = (opts.out.as_deref(), opts.json.as_deref());
        return capacity::find(&run, &slo, opts.max_devices, out, &measure);
    }
    if opts.slo.is_some() {
        bail!("--slo is read by --find-capacity only");
    }
    let summary = measure(&run)?;
    summary.print();
    if let Some(path) = &opts.json {
        summary.write(path)?;
    }
    Ok(summary.all_completed())
}

fn run_mcp(opts: &Args) -> Result<bool> {
    let spec = opts.board.load()?;
    let limit = open_files_for(u64::from(opts.devices), external(opts).is_none(), transport(opts))?;
    crate::errln!("fleet: open-files limit {limit} (raised to the hard limit when lower)");
    let script = match &opts.script {
        Some(p) => {
            let text = xiaozhi_sim::spec::read_text(p)?;
            Script::parse(&p.display().to_string(), &text)?
        }
        None => Script::parse("default fleet script", mcp::DEFAULT_SCRIPT)?,
    };
    let run = McpRun {
        spec,
        devices: opts.devices,
        external: external(opts),
        transport: transport(opts),
        gateway: gateway_net(opts),
        personality: load_personality(&opts.personality)?,
        script,
        duration: opts.duration,
        stagger: opts.stagger,
        seed: opts.seed,
        open_files_limit: limit,
    };
    let summary = mcp::run(&run)?;
    summary.print();
    if let Some(path) = &opts.json {
        summary.write(path)?;
    }
    Ok(summary.all_done())
}
