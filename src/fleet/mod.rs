//! Fleets: many simulated devices, each with its own MAC, UUID and NVS, against one backend from
//! one process. Two kinds, one home:
//!
//! * `mcp`: the devices run hello, initialize, tools/list and a script of tool calls (the
//!   built-in backend's, or someone else's at `--url`); the summary counts round trips and drops.
//! * `voice`: the devices talk (wake, an utterance, the reply heard; their user is `turns`), with
//!   the summary a backend operator reads (`summary`, mergeable across shards), and the knee
//!   search (`capacity`).
//!
//! This module holds what both share: the process's own limits and costs (open files, resident
//! memory, CPU), the built-in backend on a loopback port, and the start of one fleet device in
//! the live driver (`crate::live`).

pub mod capacity;
pub mod mcp;
pub mod summary;
pub mod turns;
pub mod voice;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use xiaozhi_sim::device::{Board, Device};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::{WorldSpec, WsConfig};

use crate::live::{Companion, Counters, DeviceStats, LiveOptions, Wake, run_device};
use crate::server::{Server, serve};
use turns::{Driver, Metrics, Plan};

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

/// Raises the open-files limit and checks that `devices` fit under it (a socket each, two with
/// the built-in backend in this process); returns the limit (0: unknown).
pub fn open_files_for(devices: u64, built_in_backend: bool) -> Result<u64> {
    let limit = raise_open_files_limit();
    let needed = devices * if built_in_backend { 2 } else { 1 } + 64;
    if limit != 0 && limit < needed {
        bail!("{devices} devices need about {needed} open files, but the limit is {limit} (raise it with `ulimit -n`)");
    }
    Ok(limit)
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

/// `--url` must be a WebSocket URL the device can dial.
pub fn check_url(url: &str) -> Result<()> {
    if xiaozhi_sim::device::url::parse_url(url).is_none() {
        bail!("--url `{url}`: expected ws://HOST:PORT/PATH");
    }
    Ok(())
}

/// Serves `server` on a loopback port until `stop`; returns the URL devices dial.
pub async fn loopback_backend(server: Arc<Server>, stop: watch::Receiver<bool>) -> Result<(String, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn(serve(listener, server, stop));
    Ok((format!("ws://{addr}/xiaozhi/v1/"), serving))
}

/// A progress bar on stderr (none when `hidden`).
pub fn progress_bar(len: u64, template: &str, hidden: bool) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(len)
    };
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}

/// The live devices of one runtime of a fleet.
pub type Devices = JoinSet<Result<(Device, DeviceStats)>>;

/// How one device of a fleet runs.
pub struct Member {
    /// When it powers on, after the fleet started.
    pub delay: Duration,
    /// How long it runs at most.
    pub duration: Duration,
    pub stop: watch::Receiver<bool>,
    pub counters: Arc<Counters>,
}

/// A device of the fleet dialling `url` with the firmware's settings (its trace off).
pub fn fleet_device(board: &Board, url: &str, seed: u64) -> Device {
    let world = WorldSpec::dialling(WsConfig {
        url: url.to_string(),
        token: "test-token".into(),
        version: 1,
    });
    let mut device = Device::new(board, world, seed);
    device.set_trace(false);
    device
}

/// Powers `device` on after the member's delay and runs it in the live driver (its user opens
/// the channel after every boot); with `talk` (a voice fleet) it also has a talking user, whose
/// clock starts as the device does.
pub fn start(devices: &mut Devices, mut device: Device, member: Member, talk: Option<(Arc<Plan>, Arc<Metrics>)>) {
    let live = LiveOptions {
        wake: Wake::OnBoot,
        duration: Some(member.duration),
        verbose: false,
        label: device.mac().to_string(),
        stop: Some(member.stop),
        counters: Some(member.counters),
        script: None,
        record: false,
        companion: None,
    };
    let delay = member.delay;
    // The user's voice varies with the device (its MAC comes from the fleet's seed).
    let voice_seed = device.mac().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let device_id = device.mac().to_string();
    devices.spawn(async move {
        tokio::time::sleep(delay).await;
        device.power_on(SimTime::ZERO);
        let live = LiveOptions {
            companion: talk.map(|(plan, metrics)| {
                Box::new(Driver::new(plan, metrics, voice_seed, device_id)) as Box<dyn Companion + Send>
            }),
            ..live
        };
        run_device(device, live).await
    });
}
