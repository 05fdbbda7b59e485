//! `xiaozhi-twin render`: boots a board, sets the volume through the real MCP path, plays a
//! probe and reports what reaches the I2S bus and the listener.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use serde::Serialize;
use xiaozhi_sim::audio::measure::Measurement;
use xiaozhi_sim::audio::source::Source;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::fault::Fault;
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::mcp::strings;
use xiaozhi_sim::scenario::reply::call_request;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::world::WorldSpec;

use crate::args::BoardArgs;
use crate::wav;

/// Set the volume through the MCP path, play a probe, and measure what is heard.
///
/// Boots the board in a quiet room (35 dBA, listener at 0.5 m), calls
/// self.audio_speaker.set_volume as a backend would, plays the probe through the board's own
/// audio path and prints the four factors (playing, i2s_running, codec_gain, amp_enabled),
/// the I2S level, the sound pressure at the listener and the verdict.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub board: BoardArgs,
    /// Volume to set through `tools/call` first (0..100).
    #[arg(long)]
    pub volume: Option<i32>,
    /// Probe tone: tone:<Hz>:<dBFS>:<ms> (default tone:1000:-6:1000).
    #[arg(long, value_name = "tone:HZ:DBFS:MS")]
    pub probe: Option<String>,
    /// Play a WAV file instead of a tone.
    #[arg(long, value_name = "FILE")]
    pub wav: Option<PathBuf>,
    /// Inject a fault (repeatable): amp_shutdown, speaker_disconnected, speaker_gated,
    /// i2s_stopped, codec_dummy, oled_init_failure, camera_init_failure, nvs_write_failure.
    #[arg(long = "fault", value_name = "NAME")]
    pub faults: Vec<Fault>,
    /// Write render.i2s.wav (32-bit PCM) and render.listener.wav (float, Pa) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the sound lane of this render as a self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write what the screen shows at the end of the render as a PNG at the display's
    /// resolution (docs/screen.md); a board without a display writes nothing and says so.
    #[arg(long, value_name = "FILE")]
    pub screen: Option<PathBuf>,
    /// Play the listener signal on the sound card (needs the `playback` feature).
    #[arg(long)]
    pub play: bool,
    /// Listener distance in metres (default 0.5).
    #[arg(long, value_name = "M")]
    pub distance: Option<f64>,
    /// Ambient level in dBA (default 35).
    #[arg(long, value_name = "DBA")]
    pub ambient: Option<f64>,
}

/// A parsed `tone:<Hz>:<dBFS>:<ms>` probe.
pub fn parse_probe(text: &str) -> Result<(f64, f64, u64)> {
    let parts: Vec<&str> = text.split(':').collect();
    let bad = || anyhow::anyhow!("--probe `{text}`: expected tone:<Hz>:<dBFS>:<ms>, e.g. tone:1000:-6:1000");
    if parts.len() != 4 || parts[0] != "tone" {
        return Err(bad());
    }
    let hz: f64 = parts[1].parse().map_err(|_| bad())?;
    let dbfs: f64 = parts[2].parse().map_err(|_| bad())?;
    let ms: u64 = parts[3].parse().map_err(|_| bad())?;
    if !(20.0..=12_000.0).contains(&hz) || !(-120.0..=0.0).contains(&dbfs) || !(200..=600_000).contains(&ms) {
        bail!("--probe `{text}`: frequency 20..12000 Hz, level -120..0 dBFS, duration 200..600000 ms");
    }
    Ok((hz, dbfs, ms))
}

#[derive(Serialize)]
struct CodecReport {
    class: String,
    family: &'static str,
    law: &'static str,
}

#[derive(Serialize)]
struct Report<'a> {
    board: &'a str,
    call: Option<String>,
    reply: Option<String>,
    readback_volume: Option<i32>,
    /// The codec class and the volume law the twin applies for this board.
    codec: CodecReport,
    source: String,
    faults: Vec<String>,
    measurement: &'a Measurement,
    files: Vec<String>,
}

pub fn run(opts: &Args) -> Result<bool> {
    if let Some(p) = &opts.html {
        crate::out::check_writable("--html", p)?;
    }
    if let Some(p) = &opts.screen {
        crate::out::check_writable("--screen", p)?;
    }
    crate::out::holding(opts.html.is_some() || opts.screen.is_some(), || run_inner(opts))
}

/// [`run`] once its output files were checked.
fn run_inner(opts: &Args) -> Result<bool> {
    let spec = opts.board.load()?;
    if let Some(v) = opts.volume
        && !(0..=100).contains(&v)
    {
        crate::errln!("note: volume {v} is outside 0..=100; the device will answer with a range error");
    }
    let (source, duration) = source(opts)?;
    let mut h = boot(opts, &spec)?;
    let (call, reply) = match opts.volume {
        Some(v) => set_volume(&mut h, v)?,
        None => (None, None),
    };
    let readback = h.device.snapshot().volume;
    let want_signals = opts.out.is_some() || opts.play;
    let described = source.describe();
    let Some(listening) = h.play_and_measure(source, duration, want_signals) else {
        bail!("the board is not running (a fault stopped it?)")
    };
    let mut files = Vec::new();
    if let (Some(dir), Some(signals)) = (&opts.out, &listening.signals) {
        let (a, b) = wav::write_signals(dir, "render", spec.audio.output_sample_rate, signals)?;
        files.push(a.display().to_string());
        files.push(b.display().to_string());
    }
    let m = &listening.measurement;
    let board = opts.board.board.as_str();
    if let Some(path) = &opts.screen {
        write_screen(&h, &spec, path, &mut files)?;
    }
    if let Some(path) = &opts.html {
        let summary = format!(
            "board {board} ({}), {described}; call {}; reply {}; readback {}; levels I2S {}, amp input {}; listener {} at {:.2} m (ambient {:.1} dBA); verdict {}",
            spec.firmware.version,
            call.as_deref().unwrap_or("(none)"),
            reply.as_deref().unwrap_or("(none)"),
            readback.map_or("-".to_string(), |v| v.to_string()),
            db(m.i2s_dbfs, "dBFS"),
            db(m.amp_input_dbfs, "dBFS"),
            db(m.spl_db, "dB SPL"),
            m.distance_m,
            m.ambient_dba,
            m.verdict.name()
        );
        let html = crate::html::sound_document(&format!("xiaozhi-twin render: {board}"), m, &summary)?;
        std::fs::write(path, html).map_err(|e| anyhow::anyhow!("{}: cannot write the HTML: {e}", path.display()))?;
    }
    if opts.json {
        let report = Report {
            board,
            call,
            reply,
            readback_volume: readback,
            codec: CodecReport {
                class: spec
                    .upstream
                    .as_ref()
                    .and_then(|u| u.codec.as_ref())
                    .map_or_else(|| spec.audio.codec.class_name().to_string(), |c| c.class.clone()),
                family: spec.audio.codec.class_name(),
                law: spec.audio.codec.law(),
            },
            source: described,
            faults: opts.faults.iter().map(|f| f.name().to_string()).collect(),
            measurement: m,
            files,
        };
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(
            board,
            &spec,
            call.as_deref(),
            reply.as_deref(),
            readback,
            &described,
            &opts.faults,
            m,
            &files,
        );
    }
    if opts.play
        && let Some(signals) = &listening.signals
    {
        wav::play(spec.audio.output_sample_rate, signals)?;
    }
    Ok(true)
}

/// What is played (`--wav`, or the `--probe` tone) and for how long.
fn source(opts: &Args) -> Result<(Source, SimDuration)> {
    match (&opts.probe, &opts.wav) {
        (Some(_), Some(_)) => bail!("give either --probe or --wav, not both"),
        (None, Some(path)) => {
            let (rate, samples) = wav::read_pcm(path)?;
            if samples.is_empty() {
                bail!("{}: no samples", path.display());
            }
            let source = Source::Pcm {
                rate,
                samples: samples.into(),
            };
            let d = source.natural_duration().unwrap_or(SimDuration::from_secs(1));
            Ok((source, d))
        }
        (probe, None) => {
            let (hz, dbfs, ms) = parse_probe(probe.as_deref().unwrap_or("tone:1000:-6:1000"))?;
            Ok((
                Source::probe(hz, dbfs),
                SimDuration::from_millis(ms) + xiaozhi_sim::harness::PROBE_GUARD,
            ))
        }
    }
}

/// The board booted in its room (`--distance`, `--ambient`) with `--fault`s: those that act at
/// boot set before power-on, the others once it is idle.
fn boot(opts: &Args, spec: &Arc<BoardSpec>) -> Result<Harness> {
    let mut world = WorldSpec::conformance();
    if let Some(d) = opts.distance {
        world.room.listener_distance_m = d;
    }
    if let Some(a) = opts.ambient {
        world.room.ambient_dba = a;
    }
    if let Err((field, message)) = world.check() {
        let flag = if field.ends_with("distance_m") {
            "--distance"
        } else {
            "--ambient"
        };
        bail!("{flag}: {message}");
    }
    let mut h = Harness::new(Device::new(spec.clone(), world, 0));
    h.device.set_trace(false);
    let start = h.now();
    for f in opts.faults.iter().filter(|f| f.needs_boot()) {
        h.device.set_fault(*f, start, true);
    }
    h.power_on();
    h.sleep(SimDuration::from_millis(1000));
    h.run_until_idle()?;
    for f in opts.faults.iter().filter(|f| !f.needs_boot()) {
        let now = h.now();
        h.device.set_fault(*f, now, true);
    }
    Ok(h)
}

/// `self.audio_speaker.set_volume` as a backend calls it: the request and the reply.
fn set_volume(h: &mut Harness, volume: i32) -> Result<(Option<String>, Option<String>)> {
    let args = serde_json::json!({ "volume": volume });
    let msg = String::from_utf8_lossy(&call_request(1, strings::TOOL_SET_VOLUME, Some(&args))).into_owned();
    h.deliver(msg.as_bytes());
    h.run_until_idle()?;
    let reply = h
        .take_outputs()
        .into_iter()
        .filter_map(|o| o.mcp().map(|(p, _)| String::from_utf8_lossy(p).into_owned()))
        .next();
    h.sleep(SimDuration::from_millis(200));
    Ok((Some(msg), reply))
}

fn db(v: Option<f64>, unit: &str) -> String {
    v.map_or_else(|| "null (silent)".to_string(), |x| format!("{x:.2} {unit}"))
}

#[allow(clippy::too_many_arguments)]
fn print_table(
    board: &str,
    spec: &xiaozhi_sim::board::BoardSpec,
    call: Option<&str>,
    reply: Option<&str>,
    readback: Option<i32>,
    source: &str,
    faults: &[Fault],
    m: &Measurement,
    files: &[String],
) {
    let a = &spec.audio;
    crate::outln!(
        "board      {board}: {} -> {} {:.2} dB -> speaker {} dB/1W/1m {} ohm",
        a.codec.class_name(),
        a.amplifier.model.part(),
        a.amplifier.gain_db,
        a.speaker.sensitivity_db,
        a.speaker.impedance_ohm
    );
    if !faults.is_empty() {
        let names: Vec<&str> = faults.iter().map(|f| f.name()).collect();
        crate::outln!("faults     {}", names.join(", "));
    }
    if let Some(c) = call {
        crate::outln!("call       {c}");
        crate::outln!("reply      {}", reply.unwrap_or("(none)"));
    }
    if let Some(v) = readback {
        crate::outln!("readback   audio_speaker.volume = {v}");
    }
    crate::outln!("source     {source}, measured {:.0}..{:.0} ms", m.from_ms, m.to_ms);
    crate::outln!(
        "factors    playing {:.2}  i2s_running {:.2}  codec_gain {}  amp_enabled {:.2}",
        m.playing,
        m.i2s_running,
        db(m.codec_gain_db, "dB"),
        m.amp_enabled
    );
    crate::outln!(
        "levels     I2S {}   amp input {}",
        db(m.i2s_dbfs, "dBFS"),
        db(m.amp_input_dbfs, "dBFS")
    );
    crate::outln!(
        "listener   {} at {:.2} m (ambient {:.1} dBA)",
        db(m.spl_db, "dB SPL"),
        m.distance_m,
        m.ambient_dba
    );
    crate::outln!("verdict    {}", m.verdict.name());
    for f in files {
        crate::outln!("wrote      {f}");
    }
}

/// The screen at the harness's instant, as a PNG (`--screen`).
fn write_screen(h: &Harness, spec: &Arc<BoardSpec>, path: &std::path::Path, files: &mut Vec<String>) -> Result<()> {
    let now = h.now();
    let state = h.device.screen_log().at(now);
    let frame = xiaozhi_sim::hw::picture::Frame {
        spec,
        state: &state,
        at: now,
        brightness: h.device.snapshot().brightness.unwrap_or(100),
    };
    match xiaozhi_sim::hw::picture::render_png(&frame) {
        Some(png) => {
            std::fs::write(path, png)
                .map_err(|e| anyhow::anyhow!("{}: cannot write the screen: {e}", path.display()))?;
            files.push(path.display().to_string());
        }
        None => crate::errln!("note: {} has no display: no screen written", spec.name),
    }
    Ok(())
}
