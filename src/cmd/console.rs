//! `xiaozhi-twin console`: the twin live in a browser (docs/console.md).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use xiaozhi_sim::backend::script::Script;

use crate::args::parse_std_duration;
use xiaozhi_sim::backend::spec::SHIPPED;

use crate::console::{Backend, CONSOLE_SCRIPT, Choices, Server, Setup, Wire};

/// See, press, talk to and hear the twin in a browser.
///
/// Serves one page (embedded in the binary, works offline) on --listen and runs one board in
/// real time against the built-in backend on loopback ports, over a WebSocket or over MQTT + UDP
/// through its gateway stand-in (--wire), or against a real server (--url, --ota or --mqtt).
/// The page can reflash to any board and firmware, and switch between the built-in backend's
/// personalities and wires and the server given here. The page shows the
/// screen as `render --screen` draws it, the state, volume and brightness, and the board's
/// buttons (a click presses and lets go; hold for a long press or push-to-talk). Talk with the
/// browser's microphone (16 kHz into the device's microphone, Opus to the backend as the
/// firmware sends it), a WAV upload or a typed line (labelled: not firmware behaviour). Hear
/// what the listener hears, through the board's codec, amplifier and speaker, with a dB SPL
/// meter; toggle chain faults. Every MCP call shows its reply (`true`, isError) beside the level
/// of each sentence as the twin measured it and as the page received it, with the wire and the
/// device log. The built-in backend's turn: a sentence, `set_volume 40`, the readback, a second
/// sentence (so the drop is heard). An HTTP API drives the same actions (docs/console.md).
#[derive(clap::Args)]
pub struct Args {
    /// Board id or path to a board YAML file.
    #[arg(long, default_value = "bread-compact-wifi")]
    pub board: String,
    /// Firmware version to run (overrides the board file's).
    #[arg(long, value_name = "VERSION")]
    pub firmware: Option<String>,
    /// Where the page is served (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8088")]
    pub listen: String,
    /// A real server's WebSocket URL instead of the built-in backend.
    #[arg(long, value_name = "URL", conflicts_with_all = ["ota", "mqtt"])]
    pub url: Option<String>,
    /// A real server's OTA endpoint instead: the device activates there and goes where the
    /// answer sends it, a WebSocket or MQTT + UDP (an `mqtt` block wins, as in the firmware).
    #[arg(long, value_name = "URL", conflicts_with = "mqtt")]
    pub ota: Option<String>,
    /// A real MQTT gateway (HOST:PORT) instead: the device is configured as
    /// xiaozhi-esp32-server's OTA configures it for a gateway there, audio over UDP.
    #[arg(long, value_name = "ENDPOINT")]
    pub mqtt: Option<String>,
    /// With --mqtt: sign the MQTT password as the server does with this key.
    #[arg(long, value_name = "KEY", requires = "mqtt")]
    pub mqtt_signature_key: Option<String>,
    /// Personality of the built-in backend (a shipped one or a YAML file).
    #[arg(long, default_value = "xinnan-py")]
    pub personality: String,
    /// The wire to the built-in backend: a WebSocket, or MQTT + UDP through its gateway
    /// stand-in.
    #[arg(long, value_enum, default_value_t = Wire::Websocket)]
    pub wire: Wire,
    /// Script of the built-in backend (default: the console's turn, repeated).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The device's seed (MAC, UUID).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_std_duration)]
    pub duration: Option<Duration>,
}

pub fn run(opts: &Args) -> Result<bool> {
    let board = crate::boards::load_as(&opts.board, opts.firmware.as_deref())?;
    let server = match (&opts.url, &opts.ota, &opts.mqtt) {
        (Some(url), _, _) => {
            if !url.starts_with("ws://") || xiaozhi_sim::device::url::parse_url(url).is_none() {
                anyhow::bail!("--url `{url}`: expected ws://HOST:PORT/PATH");
            }
            Some(Backend::Server(Server::Url(url.clone())))
        }
        (_, Some(ota), _) => {
            if !ota.starts_with("http://") {
                anyhow::bail!("--ota `{ota}`: expected http://HOST:PORT/PATH");
            }
            Some(Backend::Server(Server::Ota(ota.clone())))
        }
        (_, _, Some(endpoint)) => {
            if !endpoint.contains(':') {
                anyhow::bail!("--mqtt `{endpoint}`: expected HOST:PORT");
            }
            Some(Backend::Server(Server::Mqtt {
                endpoint: endpoint.clone(),
                key: opts.mqtt_signature_key.clone(),
            }))
        }
        _ => None,
    };
    // The personality is loaded now, so a wrong name or file is said before anything is served.
    crate::server::load_personality(&opts.personality)?;
    let script = match &opts.script {
        Some(p) => Script::parse(&p.display().to_string(), &xiaozhi_sim::spec::read_text(p)?)?,
        None => Script::parse("the console's turn", CONSOLE_SCRIPT)?,
    };
    let mut personalities: Vec<String> = SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
    if !personalities.contains(&opts.personality) {
        personalities.insert(0, opts.personality.clone());
    }
    let built_in = Backend::BuiltIn {
        personality: opts.personality.clone(),
        wire: opts.wire,
    };
    let setup = Setup {
        board,
        seed: opts.seed,
        listen: opts.listen.clone(),
        backend: server.clone().unwrap_or(built_in),
        script,
        choices: Choices { personalities, server },
        duration: opts.duration,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::console::serve(setup))?;
    Ok(true)
}
