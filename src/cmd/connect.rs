//! `xiaozhi-twin connect`: one simulated board dialling a real xiaozhi backend over WebSocket or
//! MQTT + UDP, exactly as the firmware does (headers, hello, envelope, on-demand channel, the
//! protocol the OTA answer leads to).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::hw::nvs::{Nvs, names};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::trace::NvsValue;
use xiaozhi_sim::world::WorldSpec;
use xiaozhi_sim::world::WsConfig;

use crate::args::{BoardArgs, parse_std_duration};
use crate::live::{LiveOptions, Wake, run_device};
use crate::nvs_file;

/// Dial a real xiaozhi backend over WebSocket or MQTT + UDP as the firmware does.
///
/// The board boots, and when the simulated user acts (--wake, or --script) it dials URL with
/// the firmware's handshake headers, sends its hello, waits 10 s for the server hello, and then
/// answers MCP inside the {"session_id","type":"mcp","payload"} envelope, hears the server's
/// speech (Opus decoded, played through the board's codec, amplifier, speaker and room) and
/// speaks into its microphone at real-time pace. A reboot closes TCP without a close frame;
/// there is no automatic reconnection. Device events go to stderr.
///
/// With --ota the answer decides the wire as application.cc does: an `mqtt` block means MQTT +
/// UDP (even beside a `websocket` block), a `websocket` block alone WebSocket, neither MQTT with
/// whatever NVS holds. Over MQTT the client connects at boot (the device stays `activating`
/// until the CONNACK), answers MCP before any hello, and opens the audio channel as a hello over
/// MQTT and AES-CTR datagrams over UDP; esp-mqtt retries a lost connection after 10 s and the
/// firmware's own timer after 60 s when idle. --mqtt ENDPOINT configures the client as
/// xiaozhi-esp32-server's OTA would for a gateway there.
///
/// Script lines (--script): wait <dur>, wake [word] [file.wav], say <file.wav>, say "typed text",
/// press <button> [long|double|<n>x|<dur>], down <button>, up <button>, abort, forge (over MQTT +
/// UDP: a datagram with the channel's ssrc sent to the server from another socket, as a third
/// party on the network could; xiaozhi-mqtt-gateway then sends it the rest of the reply). A press acts
/// as the board's callbacks do: BOOT toggles the chat about 0.2 s after a click (a hold does
/// nothing), the touch button is push-to-talk (`press touch 3s`, or `down touch` … `up touch`).
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub board: BoardArgs,
    /// Backend WebSocket URL, e.g. ws://127.0.0.1:8000/xiaozhi/v1/.
    #[arg(long, required_unless_present_any = ["ota", "mqtt"], conflicts_with_all = ["ota", "mqtt"], value_parser = crate::args::parse_ws_url)]
    pub url: Option<String>,
    /// OTA/activation URL (e.g. http://127.0.0.1:8002/xiaozhi/ota/): POST the system info as
    /// the firmware does; the answer's blocks go to NVS and choose the wire (see above).
    #[arg(long, value_name = "URL", conflicts_with = "mqtt")]
    pub ota: Option<String>,
    /// MQTT endpoint HOST:PORT (plain TCP; 8883, the firmware's TLS default, is refused): the
    /// `mqtt` block xiaozhi-esp32-server's OTA hands out for a gateway there (client id
    /// GID_<board type>@@@<mac_>@@@<mac_>, username base64 {"ip": "unknown"}, publish topic
    /// device-server), changed by the --mqtt-* options.
    #[arg(long, value_name = "HOST:PORT")]
    pub mqtt: Option<String>,
    /// With --mqtt: sign the password as the server does (base64 HMAC-SHA256 of
    /// `client_id|username` under this key, the gateway's MQTT_SIGNATURE_KEY).
    #[arg(long, value_name = "KEY", requires = "mqtt")]
    pub mqtt_signature_key: Option<String>,
    /// With --mqtt: the client id instead of the server's.
    #[arg(long, value_name = "ID", requires = "mqtt")]
    pub mqtt_client_id: Option<String>,
    /// With --mqtt: the username instead of the server's.
    #[arg(long, value_name = "NAME", requires = "mqtt")]
    pub mqtt_username: Option<String>,
    /// With --mqtt: the password instead of the signed (or empty) one.
    #[arg(long, value_name = "PASSWORD", requires = "mqtt")]
    pub mqtt_password: Option<String>,
    /// With --mqtt: the topic every message is published to instead of device-server.
    #[arg(long, value_name = "TOPIC", requires = "mqtt")]
    pub mqtt_publish_topic: Option<String>,
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
    /// The simulated user's timed actions (replaces --wake): wait, wake, say, press, abort.
    /// Every line is checked (file:line:col, exit 2) before anything is dialled.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Inject a fault from power-on (repeatable): amp_shutdown, speaker_disconnected,
    /// speaker_gated, i2s_stopped, codec_dummy.
    #[arg(long = "fault", value_name = "NAME")]
    pub faults: Vec<xiaozhi_sim::fault::Fault>,
    /// Write the received speech of every TTS session here as WAV (I2S words and listener
    /// pressure), and the screen at each change as PNG (`screen-NNN-<ms>ms.png`, at most 500,
    /// drawn at full backlight; a board without a display writes none).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write a JSON report at exit: connections, state transitions, listen/abort messages,
    /// per TTS session frames, levels, verdicts, sentences and the MCP calls of the turn.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// The world the device boots in and the NVS it boots with (the OTA answer's writes included).
fn world(opts: &Args) -> Result<(WorldSpec, Option<Nvs>)> {
    let (ota_url, endpoint) = (opts.ota.as_deref(), opts.mqtt.as_deref());
    if ota_url.is_none() && endpoint.is_none() {
        return Ok((WorldSpec::dialling(websocket_config(opts, None)?), None));
    }
    // The same identity and NVS as the real run, booted once to make the request.
    let mut probe = identity(opts, WorldSpec::conformance(), None)?;
    probe.power_on(SimTime::ZERO);
    let at = SimTime::from_millis(100);
    probe.run_until(at);
    let body = match (ota_url, endpoint) {
        (Some(url), _) => crate::activation::activate(url, &probe)?,
        (None, Some(endpoint)) => {
            crate::activation::gateway_answer(endpoint, opts.mqtt_signature_key.as_deref(), &probe)?
        }
        (None, None) => unreachable!("checked above"),
    };
    let (activation, wire) = crate::activation::apply(&mut probe, at, &body)?;
    if let Some(code) = &activation.activation_code {
        crate::errln!("ota: the server asks for activation code {code}");
    }
    let mut nvs = match wire {
        crate::activation::Wire::WebSocket(ws) => {
            return Ok((WorldSpec::dialling(websocket_config(opts, Some(ws))?), None));
        }
        crate::activation::Wire::Mqtt(_, nvs) => *nvs,
    };
    for (key, value) in mqtt_overrides(opts) {
        nvs.set(names::MQTT, key, NvsValue::Str(value.into_bytes()))
            .map_err(|e| anyhow::anyhow!("--mqtt-{}: NVS refuses it ({e:?})", key.replace('_', "-")))?;
    }
    let block = crate::activation::block_of(&nvs);
    match activation.choice.warning() {
        Some(w) => crate::errln!("ota: {w} (docs/reference/mqtt.md §1)"),
        None if activation.websocket.is_some() => crate::errln!(
            "ota: the answer has both an `mqtt` and a `websocket` block: the firmware uses MQTT + UDP (docs/reference/mqtt.md §1)"
        ),
        None => {}
    }
    crate::errln!(
        "ota: mqtt {} as {} (publish topic {})",
        if block.endpoint.is_empty() {
            "(no endpoint)"
        } else {
            &block.endpoint
        },
        block.client_id,
        block.publish_topic
    );
    Ok((WorldSpec::over_mqtt(block), Some(nvs)))
}

/// The `--mqtt-*` settings that replace the server's, as NVS `mqtt` keys.
fn mqtt_overrides(opts: &Args) -> Vec<(&'static str, String)> {
    [
        ("client_id", &opts.mqtt_client_id),
        ("username", &opts.mqtt_username),
        ("password", &opts.mqtt_password),
        ("publish_topic", &opts.mqtt_publish_topic),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
    .collect()
}

/// The WebSocket configuration: from --url/--token, or from the OTA answer's `websocket` block.
fn websocket_config(opts: &Args, answer: Option<crate::activation::WsAnswer>) -> Result<WsConfig> {
    let mut config = WsConfig {
        url: opts.url.clone().unwrap_or_default(),
        token: opts.token.clone(),
        version: opts.protocol_version,
    };
    if let Some(answer) = answer {
        crate::errln!(
            "ota: websocket {} (token {})",
            answer.url,
            if answer.token.is_empty() { "none" } else { "set" }
        );
        config.url = answer.url;
        config.token = answer.token;
        if let Some(v) = answer.version {
            config.version = v;
        }
    }
    if !config.url.starts_with("ws://") || xiaozhi_sim::device::url::parse_url(&config.url).is_none() {
        bail!(
            "websocket URL `{}`: expected ws://HOST:PORT/PATH (give --url, or --ota)",
            config.url
        );
    }
    Ok(config)
}

pub fn build_device(opts: &Args) -> Result<Device> {
    let (world, nvs) = world(opts)?;
    identity(opts, world, nvs)
}

/// A device with this run's identity (MAC, UUID, saved NVS, or `nvs` when given).
fn identity(opts: &Args, world: WorldSpec, nvs: Option<Nvs>) -> Result<Device> {
    let spec = opts.board.load()?;
    let mut device = Device::new(spec, world, opts.seed);
    if let Some(mac) = &opts.device_id {
        device.set_mac(mac).map_err(|e| anyhow::anyhow!("--device-id: {e}"))?;
    }
    if let Some(nvs) = nvs {
        *device.nvs_mut() = nvs;
    } else if let Some(dir) = &opts.state {
        let nvs = nvs_file::load(dir).with_context(|| format!("{}: cannot read the saved state", dir.display()))?;
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

/// The most screen frames `--out` writes.
const MAX_FRAMES: usize = 500;

/// The screen at each change of `log` as `screen-NNN-<ms>ms.png` in `dir` (through a round
/// panel's glass, at full backlight); how many were written.
pub fn write_screen_frames(
    dir: &std::path::Path,
    spec: &xiaozhi_sim::board::BoardSpec,
    log: &xiaozhi_sim::hw::screen::ScreenLog,
) -> Result<usize> {
    let mut n = 0;
    for (t, state) in log.changes().iter().take(MAX_FRAMES) {
        let frame = xiaozhi_sim::hw::picture::Frame {
            spec,
            state,
            at: *t,
            brightness: 100,
        };
        let Some(png) = xiaozhi_sim::hw::picture::render_png(&frame) else {
            break;
        };
        let path = dir.join(format!("screen-{n:03}-{}ms.png", t.as_millis()));
        std::fs::write(&path, png).with_context(|| format!("{}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

pub fn run(opts: &Args) -> Result<bool> {
    if let Some(p) = &opts.report {
        crate::out::check_writable("--report", p)?;
    }
    crate::out::holding(opts.report.is_some(), || run_inner(opts))
}

/// [`run`] once its output files were checked.
fn run_inner(opts: &Args) -> Result<bool> {
    let mut device = build_device(opts)?;
    let script = match &opts.script {
        Some(p) => {
            let text = xiaozhi_sim::spec::read_text(p)?;
            Some(crate::user::parse(p, &text, &device.spec().buttons)?)
        }
        None => None,
    };
    let record = opts.report.is_some() || opts.out.is_some();
    device.set_trace(!opts.quiet || record);
    for f in &opts.faults {
        device.set_fault(*f, SimTime::ZERO, true);
    }
    device.power_on(SimTime::ZERO);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let label = device.mac().to_string();
    let live = LiveOptions {
        wake: if script.is_some() { Wake::Manual } else { opts.wake },
        duration: opts.duration,
        verbose: !opts.quiet,
        label,
        stop: None,
        counters: None,
        script,
        record,
        companion: None,
    };
    let (device, stats) = runtime.block_on(async {
        tokio::select! {
            r = run_device(device, live) => r,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    if let Some(dir) = &opts.state {
        nvs_file::save(dir, device.nvs())?;
    }
    crate::errln!(
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
    let dialled = crate::connect_report::Dialled {
        url: opts.url.as_deref(),
        protocol_version: opts.protocol_version,
        faults: &opts.faults,
    };
    let report = crate::connect_report::build(&dialled, &device, &stats);
    if let Some(dir) = &opts.out {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        for s in &device.speech_log().sessions {
            if let Some(w) = s.window {
                let (_, signals) = device.render(w.start, w.end, true);
                if let Some(signals) = signals {
                    let rate = device.spec().audio.output_sample_rate;
                    let (a, b) = crate::wav::write_signals(dir, &format!("tts{}", s.n), rate, &signals)?;
                    crate::errln!("wrote {} and {}", a.display(), b.display());
                }
            }
        }
        let frames = write_screen_frames(dir, device.spec(), device.screen_log())?;
        if frames > 0 {
            crate::errln!("wrote {frames} screen frames to {}", dir.display());
        }
    }
    if let Some(path) = &opts.report {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?).with_context(|| format!("{}", path.display()))?;
        crate::errln!("wrote {}", path.display());
    }
    for line in crate::connect_report::summary(&report) {
        crate::errln!("{line}");
    }
    Ok(true)
}
