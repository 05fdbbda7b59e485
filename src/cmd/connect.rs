//! `xiaozhi-twin connect`: one simulated board dialling a real xiaozhi backend over WebSocket,
//! exactly as the firmware does (headers, hello, envelope, on-demand channel, no reconnection).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::device::link::WsConfig;
use xiaozhi_sim::hw::nvs::Nvs;
use xiaozhi_sim::world::WorldSpec;

use crate::boards;
use crate::live::{LiveOptions, Wake, run_device};
use crate::state;

pub struct Options {
    pub board: String,
    pub url: String,
    pub token: String,
    pub protocol_version: i32,
    pub device_id: Option<String>,
    pub client_id: Option<String>,
    pub wake: Wake,
    pub state_dir: Option<PathBuf>,
    pub duration: Option<Duration>,
    pub seed: u64,
    pub quiet: bool,
}

pub fn build_device(opts: &Options) -> Result<Device> {
    let spec = boards::load(&opts.board)?;
    if xiaozhi_sim::device::link::parse_url(&opts.url).is_none() {
        bail!("--url `{}`: expected ws://HOST:PORT/PATH", opts.url);
    }
    let mut world = WorldSpec::conformance();
    world.board_tasks_run = true;
    world.websocket = Some(WsConfig {
        url: opts.url.clone(),
        token: opts.token.clone(),
        version: opts.protocol_version,
    });
    let mut device = Device::new(spec, world, opts.seed);
    if let Some(mac) = &opts.device_id {
        device.set_mac(mac).map_err(|e| anyhow::anyhow!("--device-id: {e}"))?;
    }
    if let Some(dir) = &opts.state_dir {
        let nvs = state::load(dir).with_context(|| format!("{}: cannot read the saved state", dir.display()))?;
        if let Some(nvs) = nvs {
            *device.nvs_mut() = nvs;
        }
    }
    if let Some(uuid) = &opts.client_id {
        let _ = device.nvs_mut().set(
            "board",
            "uuid",
            xiaozhi_sim::trace::NvsValue::Str(uuid.clone().into_bytes()),
        );
    }
    Ok(device)
}

pub fn run(opts: &Options) -> Result<bool> {
    let mut device = build_device(opts)?;
    device.set_trace(!opts.quiet);
    device.power_on(xiaozhi_sim::time::SimTime::ZERO);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let label = device.mac().to_string();
    let live = LiveOptions {
        wake: opts.wake,
        duration: opts.duration,
        verbose: !opts.quiet,
        label,
        stop: None,
        counters: None,
    };
    let (device, stats) = runtime.block_on(async {
        tokio::select! {
            r = run_device(device, live) => r,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    if let Some(dir) = &opts.state_dir {
        state::save(dir, device.nvs())?;
    }
    eprintln!(
        "connects {} (failed {}), frames in {} out {}, binary {}, boots {}, device-side closes {}",
        stats.connects,
        stats.connect_failures,
        stats.frames_in,
        stats.frames_out,
        stats.binary_in,
        stats.boots,
        stats.closes
    );
    let _: &Nvs = device.nvs();
    Ok(true)
}
