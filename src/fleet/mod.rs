//! Fleets: many simulated devices, each with its own MAC, UUID and NVS, against one backend from
//! one process. Two kinds, one home:
//!
//! * `mcp`: the devices run hello, initialize, tools/list and a script of tool calls (the
//!   built-in backend's, or someone else's at `--url`); the summary counts round trips and drops.
//! * `voice`: the devices talk (wake, an utterance, the reply heard; their user is `turns`), with
//!   the summary a backend operator reads (`summary`, mergeable across shards), the knee
//!   search (`capacity`), and the wait before each turn (`think`).
//!
//! This module holds what both share: the process's own limits and costs (open files, resident
//! memory, CPU), the built-in backend on a loopback port (with the gateway stand-in in front of
//! it for a fleet on MQTT + UDP), and the start of one fleet device in the live driver
//! (`crate::live`).

pub mod capacity;
pub mod child;
pub mod hist;
pub mod mcp;
pub mod slo;
pub mod summary;
pub mod talking;
pub mod think;
pub mod turns;
pub mod web;

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
use crate::over_wire::MqttSockets;
pub use crate::over_wire::Transport;
use crate::server::{Server, serve, serve_mqtt};
use turns::{Driver, Metrics, Plan};
use xiaozhi_sim::backend::ota::mqtt_block;
use xiaozhi_sim::fault::UdpFaults;

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

/// Raises the open-files limit and checks that `devices` fit under it (a socket each, two over
/// MQTT + UDP, one more with the built-in backend in this process); returns the limit (0:
/// unknown).
pub fn open_files_for(devices: u64, built_in_backend: bool, transport: Transport) -> Result<u64> {
    let limit = raise_open_files_limit();
    let own = if transport == Transport::Mqtt { 2 } else { 1 };
    let needed = devices * (own + u64::from(built_in_backend)) + 64;
    if limit != 0 && limit < needed {
        bail!("{devices} devices need about {needed} open files, but the limit is {limit} (raise it with `ulimit -n`)");
    }
    Ok(limit)
}

/// CPU seconds of this process so far (user + system; Linux `/proc/self/stat`, 0 elsewhere).
pub fn cpu_s() -> f64 {
    cpu_s_of("self")
}

/// CPU seconds (user + system) of process `pid` (`self`: this one) so far, from `/proc`.
pub fn cpu_s_of(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
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

/// Where a fleet's devices connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Dial this WebSocket URL.
    WebSocket(String),
    /// Connect MQTT to this endpoint, with the `mqtt` block xiaozhi-esp32-server's OTA hands out
    /// for a gateway there (the password signed with `key`).
    Mqtt { endpoint: String, key: Option<String> },
    /// Activate at this OTA URL first, each device with its own MAC and UUID, and go where the
    /// answer sends it, as `application.cc` chooses (an `mqtt` block wins).
    Ota(Arc<str>),
}

impl Target {
    /// What a device of `board` and `seed` does before it powers on (`--ota`).
    pub fn activation(&self, board: &Board, seed: u64) -> Option<Activate> {
        match self {
            Target::Ota(url) => Some(Activate {
                url: url.clone(),
                board: board.clone(),
                seed,
            }),
            _ => None,
        }
    }
}

/// A fleet device's activation before it powers on: the URL, and its board and seed (the MAC
/// and UUID its request carries, the NVS the answer is written to).
#[derive(Clone, Debug)]
pub struct Activate {
    pub url: Arc<str>,
    pub board: Board,
    pub seed: u64,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::WebSocket(url) => f.write_str(url),
            Target::Mqtt { endpoint, .. } => write!(f, "mqtt://{endpoint} + UDP"),
            Target::Ota(url) => write!(f, "{url} (OTA: each device where its answer sends it)"),
        }
    }
}

/// How a built-in backend's name says the wire: nothing for WebSocket, ` over MQTT + UDP via
/// the gateway stand-in` otherwise.
pub fn via(target: &Target) -> &'static str {
    match target {
        Target::WebSocket(_) => "",
        Target::Mqtt { .. } | Target::Ota(_) => ", over MQTT + UDP via the gateway stand-in",
    }
}

/// The network of a fleet's built-in gateway stand-in (MQTT + UDP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayNet {
    /// TCP_NODELAY on each device's MQTT connection (the real gateway leaves Nagle on).
    pub nodelay: bool,
    /// What the network does to the datagrams, both ways.
    pub udp_faults: UdpFaults,
}

/// Serves `server` on a loopback port until `stop`, over `transport` (MQTT + UDP: the gateway
/// stand-in in front of it, on the network `net` says); returns where devices connect.
pub async fn loopback_backend(
    server: Arc<Server>,
    stop: watch::Receiver<bool>,
    transport: Transport,
    net: GatewayNet,
) -> Result<(Target, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr()?);
    match transport {
        Transport::Websocket => Ok((Target::WebSocket(url), tokio::spawn(serve(listener, server, stop)))),
        Transport::Mqtt => {
            let sockets = MqttSockets::loopback().await?;
            let endpoint = sockets.endpoint()?;
            let mut wire = sockets.wire(&url, None, None, net.nodelay, false)?;
            wire.udp_faults = net.udp_faults;
            let mqtt = tokio::spawn(serve_mqtt(
                sockets.mqtt,
                sockets.udp,
                wire,
                server.clone(),
                stop.clone(),
            ));
            let ws = tokio::spawn(serve(listener, server, stop));
            let serving = tokio::spawn(async move {
                let _ = tokio::join!(mqtt, ws);
            });
            Ok((Target::Mqtt { endpoint, key: None }, serving))
        }
    }
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
    /// Activate first (`--ota`).
    pub activate: Option<Activate>,
}

/// A device of the fleet connecting to `target` with the firmware's settings (its trace off).
pub fn fleet_device(board: &Board, target: &Target, seed: u64) -> Device {
    let mut device = match target {
        Target::WebSocket(url) => {
            let world = WorldSpec::dialling(WsConfig {
                url: url.to_string(),
                token: "test-token".into(),
                version: 1,
            });
            Device::new(board, world, seed)
        }
        Target::Mqtt { endpoint, key } => {
            let mut device = Device::new(board, WorldSpec::with_board_tasks(), seed);
            let block = mqtt_block(endpoint, &board.spec().board_type, device.mac(), key.as_deref());
            device.world_mut().mqtt = Some(block);
            device
        }
        // Its world comes from the OTA answer, before it powers on (`start`).
        Target::Ota(_) => Device::new(board, WorldSpec::with_board_tasks(), seed),
    };
    device.set_trace(false);
    device
}

/// Powers `device` on after the member's delay and runs it in the live driver (its user opens
/// the channel after every boot); with `talk` (a voice fleet) the talking user does that
/// instead, whose clock starts as the device does. (With both, the two clicked in the same
/// round: the first channel of every boot opened and closed at once.)
pub fn start(devices: &mut Devices, mut device: Device, member: Member, talk: Option<(Arc<Plan>, Arc<Metrics>)>) {
    let live = LiveOptions {
        wake: if talk.is_some() { Wake::Manual } else { Wake::OnBoot },
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
    let activate = member.activate;
    devices.spawn(async move {
        tokio::time::sleep(delay).await;
        let mut ota_failed = false;
        if let Some(a) = activate {
            let answer =
                tokio::task::spawn_blocking(move || crate::activation::activate_device(&a.board, a.seed, &a.url)).await;
            match answer {
                Ok(Ok((world, nvs))) => {
                    *device.world_mut() = world;
                    if let Some(nvs) = nvs {
                        *device.nvs_mut() = nvs;
                    }
                }
                // The device boots without a server: it never opens a channel.
                _ => ota_failed = true,
            }
        }
        device.power_on(SimTime::ZERO);
        let live = LiveOptions {
            companion: talk.map(|(plan, metrics)| {
                Box::new(Driver::new(plan, metrics, voice_seed, device_id)) as Box<dyn Companion + Send>
            }),
            ..live
        };
        let (device, mut stats) = run_device(device, live).await?;
        stats.connect_failures += u64::from(ota_failed);
        Ok((device, stats))
    });
}
