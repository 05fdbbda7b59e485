//! `xiaozhi-twin connect`: one simulated board dialling a real xiaozhi backend over WebSocket,
//! exactly as the firmware does (headers, hello, envelope, on-demand channel, no reconnection).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::hw::nvs::Nvs;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

use crate::args::parse_std_duration;
use crate::boards;
use crate::live::{LiveOptions, Wake, run_device};
use crate::state;

/// Dial a real xiaozhi backend over WebSocket as the firmware does.
///
/// The board boots, and when the simulated user acts (--wake) it dials URL with the
/// firmware's handshake headers, sends its hello, waits 10 s for the server hello, and then
/// answers MCP inside the {"session_id","type":"mcp","payload"} envelope. A reboot closes
/// TCP without a close frame; there is no automatic reconnection. Device events go to stderr.
#[derive(clap::Args)]
pub struct Args {
    /// Board id or path to a board YAML file.
    #[arg(long)]
    pub board: String,
    /// Backend WebSocket URL, e.g. ws://127.0.0.1:8000/xiaozhi/v1/.
    #[arg(long, required_unless_present = "ota")]
    pub url: Option<String>,
    /// OTA/activation URL (e.g. http://127.0.0.1:8002/xiaozhi/ota/): POST the system info as
    /// the firmware does and take the WebSocket URL and token from the answer.
    #[arg(long, value_name = "URL")]
    pub ota: Option<String>,
    /// Access token (sent as `Authorization: Bearer <token>`; empty = no header).
    #[arg(long, default_value = "")]
    pub token: String,
    /// Protocol-Version header and hello version.
    #[arg(long, default_value_t = 1)]
    pub protocol_version: i32,
    /// Device-Id (the MAC, aa:bb:cc:dd:ee:ff); default derived from --seed.
    #[arg(long, value_name = "MAC")]
    pub device_id: Option<String>,
    /// Client-Id (the UUID kept in NVS); default derived from --seed or the saved state.
    #[arg(long, value_name = "UUID")]
    pub client_id: Option<String>,
    /// When the simulated user opens the channel: on-boot, manual or every:<duration>.
    #[arg(long, default_value = "on-boot")]
    pub wake: Wake,
    /// Keep NVS (volume, UUID, settings) in DIR between runs, like flash.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Stop after this long (e.g. 30s); default: until Ctrl-C.
    #[arg(long, value_parser = parse_std_duration)]
    pub duration: Option<Duration>,
    /// Seed of the device identity.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Do not print device events and frames.
    #[arg(long)]
    pub quiet: bool,
}

/// The WebSocket configuration: from --url/--token, or from the OTA answer with --ota.
fn websocket_config(opts: &Args) -> Result<WsConfig> {
    let mut config = WsConfig {
        url: opts.url.clone().unwrap_or_default(),
        token: opts.token.clone(),
        version: opts.protocol_version,
    };
    if let Some(ota_url) = &opts.ota {
        // The same identity and NVS as the real run, booted once to build the request.
        let mut probe = identity(opts, WorldSpec::conformance())?;
        probe.power_on(SimTime::ZERO);
        probe.run_until(SimTime::from_millis(100));
        let answer = crate::ota::activate(ota_url, &probe)?;
        eprintln!(
            "ota: websocket {} (token {})",
            answer.url,
            if answer.token.is_empty() { "none" } else { "set" }
        );
        if let Some(code) = &answer.activation_code {
            eprintln!("ota: the server asks for activation code {code}");
        }
        config.url = answer.url;
        config.token = answer.token;
        if let Some(v) = answer.version {
            config.version = v;
        }
    }
    if !config.url.starts_with("ws://") || xiaozhi_sim::device::channel::parse_url(&config.url).is_none() {
        bail!(
            "websocket URL `{}`: expected ws://HOST:PORT/PATH (give --url, or --ota)",
            config.url
        );
    }
    Ok(config)
}

pub fn build_device(opts: &Args) -> Result<Device> {
    let world = WorldSpec::dialling(websocket_config(opts)?);
    identity(opts, world)
}

/// A device with this run's identity (MAC, UUID, saved NVS).
fn identity(opts: &Args, world: WorldSpec) -> Result<Device> {
    let spec = boards::load(&opts.board)?;
    let mut device = Device::new(spec, world, opts.seed);
    if let Some(mac) = &opts.device_id {
        device.set_mac(mac).map_err(|e| anyhow::anyhow!("--device-id: {e}"))?;
    }
    if let Some(dir) = &opts.state {
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

pub fn run(opts: &Args) -> Result<bool> {
    let mut device = build_device(opts)?;
    device.set_trace(!opts.quiet);
    device.power_on(SimTime::ZERO);
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
    if let Some(dir) = &opts.state {
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
