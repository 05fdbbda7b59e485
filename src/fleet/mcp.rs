//! The MCP fleet (`fleet` without `--voice`): every device runs hello, initialize, tools/list and
//! then, against the built-in backend, a script of tool calls (default: 10); the fleet ends when
//! every script is done, or after `--duration` against a backend at `--url`. The summary counts
//! connections, hellos, round trips, drops and gives reply latency percentiles — measured where
//! the backend sees them (built-in) or on the device side (request frame in → reply frame out).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::backend::{BackendSpec, Outcome};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Board;

use super::{
    Devices, GatewayNet, Member, Target, Transport, check_url, fleet_device, loopback_backend, progress_bar, rss_kib,
    start, via,
};
use crate::live::Counters;
use crate::server::{Ending, Server};

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

/// An MCP fleet to run.
#[derive(Clone)]
pub struct McpRun {
    pub spec: Arc<BoardSpec>,
    pub devices: u32,
    /// Someone else's backend (`None`: the built-in one on a loopback port).
    pub external: Option<Target>,
    /// The built-in backend's wire (MQTT + UDP: through the gateway stand-in).
    pub transport: Transport,
    /// The built-in gateway stand-in's network (MQTT + UDP).
    pub gateway: GatewayNet,
    /// The built-in backend's personality and script.
    pub personality: BackendSpec,
    pub script: Script,
    pub duration: Duration,
    /// Gap between device starts.
    pub stagger: Duration,
    /// First device seed (device i gets seed + i).
    pub seed: u64,
    /// The open-files limit in force (`super::open_files_for`).
    pub open_files_limit: u64,
}

/// The end-of-run summary of an MCP fleet (`--json`). (The voice fleet's is
/// `crate::fleet::summary::VoiceSummary`.)
#[derive(Clone, Debug, Serialize)]
pub struct McpSummary {
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
    /// The backend was the built-in one (its memory is in the resident size).
    #[serde(skip)]
    pub built_in: bool,
}

/// The nearest-rank percentile `p` of `sorted` (None when empty).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Runs the fleet on a runtime of its own (one worker per core).
pub fn run(run: &McpRun) -> Result<McpSummary> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    runtime.block_on(drive(run))
}

/// What the round trips came to, from the backend's reports or the devices' counters.
struct Trips {
    /// Latencies in ms, sorted.
    latency: Vec<f64>,
    count: u64,
    unanswered: u64,
    drops: u64,
    done: u64,
    measured_at: &'static str,
}

async fn drive(run: &McpRun) -> Result<McpSummary> {
    let started = Instant::now();
    // The backend stops first (close frames), then the devices.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (backend_stop_tx, backend_stop_rx) = watch::channel(false);
    // The backend: ours on a loopback port, or the one named by --url.
    let (target, server, serving) = match &run.external {
        Some(t) => (t.clone(), None, None),
        None => {
            let server = Server::new(run.personality.clone(), run.script.clone(), false, false);
            let (target, serving) =
                loopback_backend(server.clone(), backend_stop_rx, run.transport, run.gateway).await?;
            (target, Some(server), Some(serving))
        }
    };
    if let Target::WebSocket(url) = &target {
        check_url(url)?;
    }
    let rss_before = rss_kib();
    let counters = Arc::new(Counters::default());
    let mut devices = Devices::new();
    // One memo of the tool catalogue for every device of the fleet (they share the registry).
    let board = Board::new(run.spec.clone());
    for i in 0..run.devices {
        let member = Member {
            delay: run.stagger * i,
            duration: run.duration,
            stop: stop_rx.clone(),
            counters: counters.clone(),
            activate: target.activation(&board, run.seed.wrapping_add(u64::from(i))),
        };
        start(
            &mut devices,
            fleet_device(&board, &target, run.seed.wrapping_add(u64::from(i))),
            member,
            None,
        );
    }
    let (peak, rss_connected) = watch_progress(run, &counters, server.as_deref(), started).await;
    let _ = backend_stop_tx.send(true);
    if let Some(s) = serving {
        let _ = tokio::time::timeout(Duration::from_secs(10), s).await;
    }
    let _ = stop_tx.send(true);
    let mut connect_failures = 0;
    while let Some(r) = devices.join_next().await {
        if let Ok(Ok((_, stats))) = r {
            connect_failures += stats.connect_failures;
        }
    }
    let hellos = counters.hellos.load(Ordering::Relaxed);
    let trips = match &server {
        Some(s) => backend_trips(s),
        None => device_trips(&counters),
    };
    Ok(McpSummary {
        devices: run.devices,
        board: run.spec.name.clone(),
        firmware: run.spec.firmware.version.clone(),
        backend: match &run.external {
            Some(t) => t.to_string(),
            None => format!("built-in ({}{})", run.personality.name, via(&target)),
        },
        connected_peak: peak,
        hellos_completed: hellos,
        devices_done: trips.done,
        mcp_round_trips: trips.count,
        unanswered: trips.unanswered,
        latency_p50_ms: percentile(&trips.latency, 50.0),
        latency_p99_ms: percentile(&trips.latency, 99.0),
        latency_measured_at: trips.measured_at,
        drops: trips.drops,
        connect_failures,
        rss_before_kib: rss_before,
        rss_connected_kib: rss_connected,
        rss_per_device_kib: rss_connected.saturating_sub(rss_before) as f64 / f64::from(run.devices),
        open_files_limit: run.open_files_limit,
        wall_s: started.elapsed().as_secs_f64(),
        built_in: run.external.is_none(),
    })
}

/// Shows progress until every device is done (the built-in backend's scripts) or the duration
/// is over; returns the peak of open connections and the resident size then.
async fn watch_progress(run: &McpRun, counters: &Counters, server: Option<&Server>, started: Instant) -> (u64, u64) {
    let bar = progress_bar(
        u64::from(run.devices),
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} devices done · {msg}",
        false,
    );
    let deadline = started + run.duration;
    let mut peak = 0u64;
    loop {
        let open = counters.open.load(Ordering::Relaxed);
        peak = peak.max(open);
        let hellos = counters.hellos.load(Ordering::Relaxed);
        let done = server.map_or(hellos, Server::scripts_done);
        bar.set_position(done.min(u64::from(run.devices)));
        bar.set_message(format!(
            "{open} connected, {hellos} hellos, {} MCP replies",
            counters.replies.load(Ordering::Relaxed)
        ));
        // A foreign backend decides when its devices are done: run for the whole duration.
        if (server.is_some() && done >= u64::from(run.devices)) || Instant::now() >= deadline {
            bar.finish_and_clear();
            return (peak, rss_kib());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Round trips as the built-in backend saw them (request sent → reply received).
fn backend_trips(server: &Server) -> Trips {
    let reports = server.take_reports();
    let mut latency = Vec::new();
    let mut unanswered = 0;
    for e in reports.iter().flat_map(|r| &r.session.exchanges) {
        match (e.outcome.clone(), e.reply_ms) {
            (Outcome::Replied | Outcome::Error, Some(at)) => latency.push(at - e.sent_ms),
            _ => unanswered += 1,
        }
    }
    latency.sort_by(f64::total_cmp);
    Trips {
        count: latency.len() as u64,
        latency,
        unanswered,
        drops: reports.iter().filter(|r| r.ending != Ending::Shutdown).count() as u64,
        done: server.scripts_done(),
        measured_at: "backend (request sent → reply received)",
    }
}

/// Round trips as the devices saw them (request frame in → reply frame out).
fn device_trips(counters: &Counters) -> Trips {
    let mut latency: Vec<f64> = counters
        .reply_us
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|us| f64::from(*us) / 1000.0)
        .collect();
    latency.sort_by(f64::total_cmp);
    Trips {
        latency,
        count: counters.replies.load(Ordering::Relaxed),
        unanswered: 0,
        drops: 0,
        done: counters.hellos.load(Ordering::Relaxed),
        measured_at: "device (request frame in → reply frame out)",
    }
}

impl McpSummary {
    /// Every device finished its script without a drop (the exit status).
    pub fn all_done(&self) -> bool {
        self.devices_done >= u64::from(self.devices) && self.drops == 0
    }

    /// The summary as the terminal shows it.
    pub fn print(&self) {
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2} ms"));
        crate::outln!(
            "devices            {} × {} {} against {}",
            self.devices,
            self.board,
            self.firmware,
            self.backend
        );
        crate::outln!("connected (peak)   {}", self.connected_peak);
        crate::outln!("hellos completed   {}", self.hellos_completed);
        crate::outln!("devices done       {}", self.devices_done);
        crate::outln!(
            "MCP round trips    {} ({} unanswered)",
            self.mcp_round_trips,
            self.unanswered
        );
        crate::outln!(
            "reply latency      p50 {}  p99 {}  (at the {})",
            fmt(self.latency_p50_ms),
            fmt(self.latency_p99_ms),
            self.latency_measured_at
        );
        crate::outln!(
            "drops              {} (connect failures {})",
            self.drops,
            self.connect_failures
        );
        crate::outln!(
            "memory             {:.1} KiB per device ({} KiB → {} KiB resident{})",
            self.rss_per_device_kib,
            self.rss_before_kib,
            self.rss_connected_kib,
            if self.built_in {
                ", built-in backend included"
            } else {
                ""
            }
        );
        crate::outln!("wall time          {:.2} s", self.wall_s);
    }

    /// Writes the summary as JSON.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n").with_context(|| format!("{}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_is_the_nearest_rank_of_the_sorted_samples() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&s, 50.0), Some(50.0));
        assert_eq!(percentile(&s, 99.0), Some(99.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0], 0.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
