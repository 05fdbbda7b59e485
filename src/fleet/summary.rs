//! The voice fleet's summary: counts, latency histograms and the twin's own costs, as JSON that
//! shards of one run can be merged from exactly (`fleet merge`).
//!
//! Latencies are HdrHistogram histograms (the `hdrhistogram` crate, 3 significant digits, in
//! microseconds), written in the standard V2 + DEFLATE serialisation, base64-encoded, beside the
//! percentiles read from them, so merged percentiles are the percentiles of the merged
//! histogram (within the histogram's precision), not averages of percentiles.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

pub use super::hist::Hist;
use serde::{Deserialize, Serialize};

/// What `fleet --voice --json` writes; `merge` refuses files of another format.
/// `peaks` of a summary from one process.
pub const MEASURED: &str = "measured";

pub const FORMAT: &str = "xiaozhi-twin fleet voice summary 2";

/// A histogram as the summary shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// The histogram (µs): HdrHistogram V2 + DEFLATE, base64.
    pub hdr: String,
}

impl Default for Latency {
    /// Nothing measured.
    fn default() -> Self {
        Latency::of(&Hist::new())
    }
}

impl Latency {
    pub fn of(h: &Hist) -> Latency {
        Latency {
            count: h.len(),
            p50_ms: h.ms_at(50.0),
            p90_ms: h.ms_at(90.0),
            p99_ms: h.ms_at(99.0),
            max_ms: (!h.is_empty()).then(|| h.max_ms()),
            hdr: h.encode(),
        }
    }

    pub fn hist(&self) -> Result<Hist> {
        Hist::decode(&self.hdr)
    }
}

/// Which part of a sharded run this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// What a run was (merge refuses summaries that differ here, shard aside).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOf {
    pub twin_version: String,
    pub board: String,
    pub firmware: String,
    pub backend: String,
    pub decode: String,
    /// `distinct` (each device and turn says its own variation of the utterance, and the
    /// built-in backend's default reply names the device and turn) or `same` (`--same-audio`:
    /// one recording and one reply for all, the codec memo's best case).
    pub audio: String,
    pub utterance: String,
    pub utterance_s: f64,
    pub turns_per_device: u32,
    /// Devices of the whole run (all shards).
    pub devices_total: u32,
    pub seed: u64,
    /// The mean think time, s.
    pub think_s: f64,
    /// `--think` as given: `2s` (fixed) or `exp:30s` (exponential with that mean).
    #[serde(default)]
    pub think: String,
    pub turn_timeout_s: f64,
    /// Devices started per second (by each shard).
    pub ramp_per_s: f64,
    /// The built-in backend's script for one turn (`null` with `--url`).
    pub backend_script: Option<String>,
}

/// Turn counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turns {
    pub planned: u64,
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Planned turns that neither completed nor failed before the run ended (never started, or
    /// cut by `--duration`).
    pub unfinished: u64,
    /// Failed turns by reason.
    pub failures: BTreeMap<String, u64>,
    /// `stt` that arrived before the utterance's last voiced frame had left the device (the
    /// backend's VAD ended the utterance sooner); those are not in the stt latency.
    pub stt_before_end_of_speech: u64,
}

/// TTS as the devices received it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    pub tts_frames_received: u64,
    pub mic_frames_sent: u64,
    /// Gaps over 120 ms between TTS frames of one reply (the user hears a stutter).
    pub gaps_over_120ms: u64,
    pub turns_with_gaps: u64,
    /// Frames the devices dropped by the firmware's rules, by reason (over UDP `udp_refused`:
    /// a sequence at or below the last, i.e. a duplicate or one a later datagram overtook).
    pub frames_dropped_by_devices: BTreeMap<String, u64>,
    /// Over UDP: datagrams accepted after a sequence gap (`Received audio packet with wrong
    /// sequence`: datagrams lost, or overtaken, before them). Absent in WebSocket runs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub udp_sequence_gaps: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The backend's speech at the listener (`--decode full`): Leq dB SPL over each reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Loudness {
    pub replies_measured: u64,
    pub spl_db_min: Option<f64>,
    pub spl_db_max: Option<f64>,
    pub spl_db_mean: Option<f64>,
    /// Replies with a finite level, and the sum of those levels (for merging the mean).
    pub replies_with_level: u64,
    pub spl_db_sum: f64,
    /// Replies the listener could not hear (`silent` or `inaudible`).
    pub not_audible: u64,
}

impl Loudness {
    /// Adds `other` (another part of the fleet): counts and sums add, the extremes widen, the
    /// mean is the mean of all.
    pub fn add(&mut self, other: &Loudness) {
        self.replies_measured += other.replies_measured;
        self.spl_db_sum += other.spl_db_sum;
        self.replies_with_level += other.replies_with_level;
        self.not_audible += other.not_audible;
        self.spl_db_min = min_opt(self.spl_db_min, other.spl_db_min, f64::min);
        self.spl_db_max = min_opt(self.spl_db_max, other.spl_db_max, f64::max);
        self.spl_db_mean = (self.replies_with_level > 0).then(|| self.spl_db_sum / self.replies_with_level as f64);
    }
}

/// What the twin itself cost (so a user can tell it was not the bottleneck).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TwinCost {
    /// CPU seconds of this process (user + system): the built-in backend's included when it
    /// runs in this process (`run.backend_script` is set).
    pub cpu_s: f64,
    /// Cores this machine has.
    pub cores: u32,
    /// Average cores busy over the whole run (cpu_s / wall_s: ramp, think times and the quiet
    /// end included).
    pub cores_busy: f64,
    /// The busiest second with turns in flight (cores; sampled every 100 ms over windows of
    /// about 1 s). What the capacity search holds against the twin's CPU budget.
    pub cores_busy_peak: f64,
    pub rss_before_kib: u64,
    /// Highest resident size sampled while turns were in flight.
    pub rss_peak_kib: u64,
    /// (peak − before) / devices, built-in backend included when there is one.
    pub rss_per_device_kib: f64,
    pub open_files_limit: u64,
    /// Opus steps (decoder and encoder, devices and built-in backend): looked up in the shared
    /// codec memo / computed by a codec (new memo edges and the private codecs it handed out).
    pub codec_memo_hits: u64,
    pub codec_memo_computed: u64,
}

/// What the backend process cost over one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendCost {
    /// CPU seconds (user + system) of the backend process over the run.
    pub cpu_s: f64,
    /// Its peak resident size (`VmHWM`), KiB; after a merge, the sum of the shards' peaks.
    pub rss_peak_kib: u64,
}

/// Latency histograms, by phase.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Phases {
    /// End of utterance → `stt`.
    pub stt: Latency,
    /// End of utterance → first TTS audio frame (what the user feels).
    pub first_audio: Latency,
    /// End of utterance → `tts stop`.
    pub tts_stop: Latency,
    /// First-audio latency less the built-in backend's designed delay (empty for a backend that
    /// is not ours).
    pub twin_added_first_audio: Latency,
    /// MCP request in → reply out, at the device.
    pub mcp_reply: Latency,
    /// The longest gap between TTS frames of each reply.
    pub worst_frame_gap: Latency,
}

/// The summary of a voice fleet (one run or one shard; merged shards look like one run).
/// (The MCP fleet's is `crate::fleet::mcp::McpSummary`.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VoiceSummary {
    pub format: String,
    pub run: RunOf,
    /// The shards this summary covers (one, or all after a merge).
    pub shards: Vec<Shard>,
    pub devices: u64,
    pub devices_connected: u64,
    /// Most channels open at once. After a merge: the sum of the shards' peaks, an upper bound
    /// (shards peak at different moments), as `peaks` says.
    pub connected_peak: u64,
    /// How `connected_peak`, `twin.cores_busy_peak` and `twin.rss_peak_kib` were found:
    /// `measured` (one process), or `sum of N shards' peaks (upper bound)` after a merge.
    pub peaks: String,
    pub connect_failures: u64,
    pub turns: Turns,
    pub latency: Phases,
    pub pacing: Pacing,
    pub loudness: Option<Loudness>,
    /// Completed turns per second of wall time.
    pub turns_per_s: f64,
    pub tts_frames_per_s: f64,
    pub mic_frames_per_s: f64,
    pub wall_s: f64,
    pub twin: TwinCost,
    /// The backend's cost, when the fleet ran it in another process (`--backend-process`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_process: Option<BackendCost>,
}

/// Writes `text` to `path` through a temporary file beside it and a rename.
pub fn write_atomically(path: &std::path::Path, text: &str) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("{}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}", path.display()))
}

/// `fleet merge`: the summaries in `files` merged into one; the shards of the run must all be
/// there unless `partial` (then a line on stderr says which are).
pub fn merge_files(files: &[std::path::PathBuf], partial: bool) -> Result<VoiceSummary> {
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
        crate::errln!("fleet merge: {what} merged (--partial); the summary covers those only");
    }
    Ok(m)
}

fn add_map(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_insert(0) += v;
    }
}

fn merge_latency(a: &Latency, b: &Latency) -> Result<Latency> {
    let mut h = a.hist()?;
    h.add(&b.hist()?)?;
    Ok(Latency::of(&h))
}

fn min_opt(a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, y) => x.or(y),
    }
}

impl VoiceSummary {
    /// Every planned turn completed (the exit status of a run and of a merge).
    pub fn all_completed(&self) -> bool {
        self.turns.failed == 0 && self.turns.unfinished == 0 && self.turns.completed == self.turns.planned
    }

    /// Writes the summary as JSON, whole or not at all (a temporary file, then a rename: a
    /// merge reading a shared volume never sees half a file).
    pub fn write(&self, path: &std::path::Path) -> Result<()> {
        write_atomically(path, &(serde_json::to_string_pretty(self)? + "\n"))
    }

    /// Reads a summary file; one-line errors name the file.
    pub fn read(path: &std::path::Path) -> Result<VoiceSummary> {
        let text = xiaozhi_sim::spec::read_text(path)?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        if v["format"] != FORMAT {
            bail!(
                "{}: not a voice fleet summary of this twin (format {}; expected \"{FORMAT}\")",
                path.display(),
                v["format"]
            );
        }
        serde_json::from_value(v).with_context(|| format!("{}: malformed summary", path.display()))
    }

    /// Adds `other` (another shard of the same run).
    pub fn merge(&mut self, other: &VoiceSummary, name: &str) -> Result<()> {
        if other.run != self.run {
            let a = serde_json::to_value(&self.run)?;
            let b = serde_json::to_value(&other.run)?;
            let field = a
                .as_object()
                .and_then(|m| {
                    m.iter()
                        .find(|(k, v)| b.get(k.as_str()) != Some(v))
                        .map(|(k, _)| k.clone())
                })
                .unwrap_or_default();
            bail!(
                "{name}: not a shard of the same run ({field}: {} here, {} in the first file)",
                b[&field],
                a[&field]
            );
        }
        for s in &other.shards {
            if self.shards.iter().any(|x| x == s) {
                bail!("{name}: shard {}/{} is already merged", s.index, s.count);
            }
            if self.shards.first().is_some_and(|f| f.count != s.count) {
                bail!(
                    "{name}: shard {}/{} belongs to a run of {} shards, not {}",
                    s.index,
                    s.count,
                    s.count,
                    self.shards[0].count
                );
            }
        }
        self.shards.extend(other.shards.iter().copied());
        self.shards.sort_by_key(|s| s.index);
        self.peaks = format!("sum of {} shards' peaks (upper bound)", self.shards.len());
        self.devices += other.devices;
        self.devices_connected += other.devices_connected;
        self.connected_peak += other.connected_peak;
        self.connect_failures += other.connect_failures;
        let t = &mut self.turns;
        t.planned += other.turns.planned;
        t.started += other.turns.started;
        t.completed += other.turns.completed;
        t.failed += other.turns.failed;
        t.unfinished += other.turns.unfinished;
        t.stt_before_end_of_speech += other.turns.stt_before_end_of_speech;
        add_map(&mut t.failures, &other.turns.failures);
        let (a, b) = (&self.latency, &other.latency);
        self.latency = Phases {
            stt: merge_latency(&a.stt, &b.stt)?,
            first_audio: merge_latency(&a.first_audio, &b.first_audio)?,
            tts_stop: merge_latency(&a.tts_stop, &b.tts_stop)?,
            twin_added_first_audio: merge_latency(&a.twin_added_first_audio, &b.twin_added_first_audio)?,
            mcp_reply: merge_latency(&a.mcp_reply, &b.mcp_reply)?,
            worst_frame_gap: merge_latency(&a.worst_frame_gap, &b.worst_frame_gap)?,
        };
        let p = &mut self.pacing;
        p.tts_frames_received += other.pacing.tts_frames_received;
        p.mic_frames_sent += other.pacing.mic_frames_sent;
        p.gaps_over_120ms += other.pacing.gaps_over_120ms;
        p.turns_with_gaps += other.pacing.turns_with_gaps;
        p.udp_sequence_gaps += other.pacing.udp_sequence_gaps;
        add_map(
            &mut p.frames_dropped_by_devices,
            &other.pacing.frames_dropped_by_devices,
        );
        self.loudness = match (self.loudness.take(), &other.loudness) {
            (Some(mut a), Some(b)) => {
                a.add(b);
                Some(a)
            }
            (a, b) => a.or_else(|| b.clone()),
        };
        // Shards run side by side: the run lasts as long as its longest shard.
        self.wall_s = self.wall_s.max(other.wall_s);
        let w = self.wall_s.max(1e-9);
        self.turns_per_s = self.turns.completed as f64 / w;
        self.tts_frames_per_s = self.pacing.tts_frames_received as f64 / w;
        self.mic_frames_per_s = self.pacing.mic_frames_sent as f64 / w;
        let tw = &mut self.twin;
        let o = &other.twin;
        let before = (tw.rss_per_device_kib * (self.devices - other.devices) as f64)
            + o.rss_per_device_kib * other.devices as f64;
        tw.rss_per_device_kib = before / self.devices.max(1) as f64;
        tw.cpu_s += o.cpu_s;
        tw.cores += o.cores;
        tw.cores_busy += o.cores_busy;
        tw.cores_busy_peak += o.cores_busy_peak;
        tw.rss_before_kib += o.rss_before_kib;
        tw.rss_peak_kib += o.rss_peak_kib;
        tw.codec_memo_hits += o.codec_memo_hits;
        tw.codec_memo_computed += o.codec_memo_computed;
        tw.open_files_limit = tw.open_files_limit.min(o.open_files_limit);
        self.backend_process = match (self.backend_process.take(), &other.backend_process) {
            (Some(a), Some(b)) => Some(BackendCost {
                cpu_s: a.cpu_s + b.cpu_s,
                rss_peak_kib: a.rss_peak_kib + b.rss_peak_kib,
            }),
            _ => None,
        };
        Ok(())
    }

    /// The summary as the terminal shows it.
    pub fn print(&self) {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1} ms"));
        let l = |name: &str, x: &Latency| {
            crate::outln!(
                "  {name:<24} p50 {:>10}  p90 {:>10}  p99 {:>10}  max {:>10}  (n={})",
                f(x.p50_ms),
                f(x.p90_ms),
                f(x.p99_ms),
                f(x.max_ms),
                x.count
            );
        };
        let r = &self.run;
        let shards = if self.shards.len() == 1 && self.shards[0].count == 1 {
            String::new()
        } else {
            let ix: Vec<String> = self.shards.iter().map(|s| s.index.to_string()).collect();
            format!(
                " · shards {} of {}",
                ix.join(","),
                self.shards.first().map_or(1, |s| s.count)
            )
        };
        crate::outln!(
            "voice fleet        {} devices × {} {} against {}{shards}",
            self.devices,
            r.board,
            r.firmware,
            r.backend
        );
        crate::outln!(
            "plan               {} turn(s) each · utterance {} ({:.2} s) · {} audio · decode {}",
            r.turns_per_device,
            r.utterance,
            r.utterance_s,
            r.audio,
            r.decode
        );
        let bound = if self.peaks == MEASURED { "" } else { "≤ " };
        crate::outln!(
            "devices            {} connected (peak {bound}{}), {} connect failures",
            self.devices_connected,
            self.connected_peak,
            self.connect_failures
        );
        let t = &self.turns;
        let why: Vec<String> = t.failures.iter().map(|(k, v)| format!("{k} {v}")).collect();
        crate::outln!(
            "turns              {} planned, {} started, {} completed, {} failed{}{}",
            t.planned,
            t.started,
            t.completed,
            t.failed,
            if t.unfinished > 0 {
                format!(", {} unfinished (the run ended first: raise --duration)", t.unfinished)
            } else {
                String::new()
            },
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        );
        if t.stt_before_end_of_speech > 0 {
            crate::outln!(
                "                   {} stt before the utterance's last voiced frame had left (the backend's VAD ended it sooner; not in the stt row)",
                t.stt_before_end_of_speech
            );
        }
        crate::outln!("latency (device side)");
        l("end of speech → stt", &self.latency.stt);
        l("end of speech → audio", &self.latency.first_audio);
        l("end of speech → tts stop", &self.latency.tts_stop);
        l("twin-added first audio", &self.latency.twin_added_first_audio);
        l("MCP request → reply", &self.latency.mcp_reply);
        self.print_costs();
    }

    /// The pacing, loudness, throughput and cost rows of [`VoiceSummary::print`].
    fn print_costs(&self) {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1} ms"));
        let bound = if self.peaks == MEASURED { "" } else { "≤ " };
        let p = &self.pacing;
        let drops: u64 = p.frames_dropped_by_devices.values().sum();
        crate::outln!(
            "TTS pacing         {} frames, {} gaps > 120 ms in {} replies, worst gap p99 {}, {} frames dropped by devices",
            p.tts_frames_received,
            p.gaps_over_120ms,
            p.turns_with_gaps,
            f(self.latency.worst_frame_gap.p99_ms),
            drops
        );
        let refused = p.frames_dropped_by_devices.get("udp_refused").copied().unwrap_or(0);
        if p.udp_sequence_gaps > 0 || refused > 0 {
            crate::outln!(
                "UDP                {} sequence gaps (lost or overtaken datagrams), {} duplicate or late datagrams refused",
                p.udp_sequence_gaps,
                refused
            );
        }
        if let Some(ld) = &self.loudness {
            crate::outln!(
                "loudness           {} replies at the listener: {} … {} dB SPL (mean {}), {} not audible",
                ld.replies_measured,
                ld.spl_db_min.map_or("-".into(), |x| format!("{x:.1}")),
                ld.spl_db_max.map_or("-".into(), |x| format!("{x:.1}")),
                ld.spl_db_mean.map_or("-".into(), |x| format!("{x:.1}")),
                ld.not_audible
            );
        }
        crate::outln!(
            "throughput         {:.1} turns/s, {:.0} TTS frames/s in, {:.0} mic frames/s out, {:.1} s wall",
            self.turns_per_s,
            self.tts_frames_per_s,
            self.mic_frames_per_s,
            self.wall_s
        );
        let tw = &self.twin;
        crate::outln!(
            "the twin itself    {:.1} CPU s ({:.2} of {} cores busy on average, {bound}{:.2} in the busiest second), {:.1} KiB per device mid-turn ({} → {} KiB{}), Opus steps {} looked up / {} computed ({:.0} % shared)",
            tw.cpu_s,
            tw.cores_busy,
            tw.cores,
            tw.cores_busy_peak,
            tw.rss_per_device_kib,
            tw.rss_before_kib,
            tw.rss_peak_kib,
            if self.peaks == MEASURED { "" } else { ", peaks summed" },
            tw.codec_memo_hits,
            tw.codec_memo_computed,
            100.0 * tw.codec_memo_hits as f64 / (tw.codec_memo_hits + tw.codec_memo_computed).max(1) as f64
        );
        if let Some(b) = &self.backend_process {
            crate::outln!(
                "the backend        {:.1} CPU s ({:.2} cores on average), {bound}{:.1} MiB peak: `xiaozhi-twin backend` in another process, not counted above",
                b.cpu_s,
                b.cpu_s / self.wall_s.max(1e-9),
                b.rss_peak_kib as f64 / 1024.0
            );
        } else if self.run.backend_script.is_some() {
            crate::outln!(
                "                   (the built-in backend's work included; the twin alone: --backend-process)"
            );
        }
    }
}
