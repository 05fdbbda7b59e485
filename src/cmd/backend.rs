//! `xiaozhi-twin backend`: runs the WebSocket backend server (`crate::server`) on an address of
//! your choosing, with a script on every connection (or commands typed on stdin), or performs a
//! scenario on the first device that connects (`--scenario`, judged by `crate::over_wire`). One JSON
//! object per closed connection goes to stdout; logs go to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::script::{Command, Script, SpeakVoice};
use xiaozhi_sim::backend::{BackendSpec, Outcome};

use crate::args::parse_std_duration;
use crate::over_wire::MqttSockets;
use crate::server::{MqttWire, Server, load_personality, serve, serve_mqtt};

/// A small xiaozhi server that drives devices as a real backend does (a personality).
///
/// Answers each device's hello, runs initialize and tools/list the personality's way, then
/// runs --script (or commands typed on stdin with `--script -`). Pairs every request with
/// its reply by id; prints one JSON report per connection on stdout when it closes
/// (headers, exchanges with timestamps, unanswered ids, how it ended). Personalities: one of
/// the shipped ones (listed below the options) or a YAML file. Script steps: call/send <tool>
/// [json], wait <dur>,
/// raw <payload>, frame <text>, garbage, vanish, close, disconnect (the device's connection
/// drops: over MQTT the gateway drops its MQTT connection), await utterance,
/// speak "<text>" [for <dur>] [tone <Hz> <dBFS> | wav <file>]; `@N` limits a step to a
/// device's Nth connection.
///
/// `await utterance` waits for the next user turn the script has not had. Turns are found as
/// xinnan-tech/xiaozhi-esp32-server finds them (docs/reference/voice.md §5.1): the end of voice
/// by its VAD's rules (an energy level per chunk in place of Silero), `listen stop`, or a
/// `listen detect` text; a wake word is answered from the server's response cache without the
/// script, an exit command closes. Words said before the script runs (while discovery is still
/// going: a device opens its channel at the user's first action) are held for its first
/// `await utterance`, as the real server chats with them regardless. After the device aborts,
/// the rest of that turn's `speak` lines say nothing.
///
/// With --mqtt ADDR it also serves devices on MQTT + UDP the way xiaozhi-mqtt-gateway does in
/// front of xiaozhi-esp32-server (docs/reference/mqtt.md §5): its own MQTT server that delivers to
/// devices/p2p/<mac_> without a SUBSCRIBE, CONNACK before the password check (with
/// --mqtt-signature-key), MCP initialize and tools/list at CONNECT with a cached tool list, the
/// hello's UDP key and nonce, audio both ways over UDP once the device has sent a datagram, the
/// goodbye echoed, the keepalive closed at 1.5x. The same personality, script and reports serve
/// both wires. --ota ADDR answers activation requests as the server's OTA does: an mqtt block
/// with --mqtt, else a websocket block.
///
/// Without --script, a personality with a voice (xinnan-py) answers every turn as `fleet`'s
/// built-in backend does, the seed article's turn: set_volume 40, get_device_status, then
/// 好的，音量已经调小了 in words of its own for each device and turn; one without a voice only
/// answers discovery.
///
/// With --scenario FILE the backend performs a scenario's steps on the first device that
/// connects (across its reboots), prints the scenario's acceptance records and checks as
/// judged from the backend's side, and exits 0 (passed) or 1 (failed or the device never
/// finished within --duration, default 60 s).
#[derive(clap::Args)]
#[command(after_help = shipped_personalities())]
pub struct Args {
    /// Address to listen on (port 0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: String,
    /// Personality name or YAML file.
    #[arg(long, default_value = DEFAULT_PERSONALITY)]
    pub personality: String,
    /// Script run on every connection once discovery is done (`-`: read commands from stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    pub script: Option<PathBuf>,
    /// A scenario file to perform on the first device that connects (see above).
    #[arg(long, value_name = "FILE", conflicts_with = "connections")]
    pub scenario: Option<PathBuf>,
    /// Stop after this long.
    #[arg(long, value_parser = parse_std_duration)]
    pub duration: Option<Duration>,
    /// Stop once this many connections have closed.
    #[arg(long, value_name = "N")]
    pub connections: Option<u64>,
    /// Log every frame on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Also serve devices on MQTT + UDP, listening for MQTT here (the gateway's MQTT_PORT).
    #[arg(long, value_name = "ADDR")]
    pub mqtt: Option<String>,
    /// The UDP address of the audio (the gateway's UDP_PORT); default: --mqtt's host, any port.
    #[arg(long, value_name = "ADDR", requires = "mqtt")]
    pub udp: Option<String>,
    /// The address the hello's `udp.server` names (the gateway's PUBLIC_IP); default: --udp's
    /// host (127.0.0.1 when it is 0.0.0.0).
    #[arg(long, value_name = "IP", requires = "mqtt")]
    pub public_ip: Option<String>,
    /// Check each device's MQTT password against this key (the gateway's MQTT_SIGNATURE_KEY; the
    /// OTA endpoint signs with it too). Without it any password is taken.
    #[arg(long, value_name = "KEY", requires = "mqtt")]
    pub mqtt_signature_key: Option<String>,
    /// What serves MQTT: `gateway` (xiaozhi-mqtt-gateway: delivers to devices/p2p/<mac_>
    /// without a SUBSCRIBE) or `broker` (a plain broker such as mosquitto, or EMQX without
    /// auto-subscribe: delivers only to subscribers, so a device that subscribes to nothing never
    /// hears its server).
    #[arg(long, value_enum, default_value_t = MqttServer::Gateway, requires = "mqtt")]
    pub mqtt_server: MqttServer,
    /// Set TCP_NODELAY on the devices' MQTT connections. The gateway leaves Nagle's algorithm on,
    /// and so does the twin by default: a `tts start` written right after an `stt` then waits for
    /// the device's ACK while the reply's first datagrams overtake it (docs/mqtt.md).
    #[arg(long, requires = "mqtt")]
    pub mqtt_nodelay: bool,
    /// What the network does to the audio datagrams between the gateway and each device, both
    /// ways, per mille and seeded: e.g. loss:50,duplicate:20,reorder:10,corrupt:5,seed:7.
    #[arg(long, value_name = "SPEC", requires = "mqtt")]
    pub udp_fault: Option<xiaozhi_sim::fault::UdpFaults>,
    /// Serve the OTA endpoint (POST /xiaozhi/ota/, any path) here.
    #[arg(long, value_name = "ADDR")]
    pub ota: Option<String>,
}

/// What serves the devices' MQTT (`--mqtt-server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MqttServer {
    /// xiaozhi-mqtt-gateway's delivery.
    Gateway,
    /// A plain broker's: only to subscribers.
    Broker,
}

/// `--mqtt`/`--udp`, bound, and the gateway's settings in front of the server at `ws`; printed.
async fn bind_mqtt(opts: &Args, ws: std::net::SocketAddr) -> Result<Option<(MqttSockets, MqttWire)>> {
    let Some(addr) = &opts.mqtt else { return Ok(None) };
    let mqtt = TcpListener::bind(addr)
        .await
        .with_context(|| format!("--mqtt {addr}"))?;
    let at = mqtt.local_addr()?;
    let udp_addr = opts.udp.clone().unwrap_or_else(|| format!("{}:0", at.ip()));
    let udp_at = tokio::net::lookup_host(&udp_addr)
        .await
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("--udp {udp_addr}: not an address"))?;
    let udp = crate::server::bind_udp(udp_at).with_context(|| format!("--udp {udp_addr}"))?;
    let sockets = MqttSockets { mqtt, udp };
    let mut wire = sockets.wire(
        &format!("ws://{ws}/xiaozhi/v1/"),
        opts.public_ip.clone(),
        opts.mqtt_signature_key.clone(),
        opts.mqtt_nodelay,
        opts.mqtt_server == MqttServer::Broker,
    )?;
    if let Some(f) = opts.udp_fault {
        wire.udp_faults = f;
        crate::errln!("backend: UDP faults per mille: {f:?}");
    }
    if opts.mqtt_server == MqttServer::Broker {
        crate::errln!(
            "backend: as a plain MQTT broker: messages reach a device only on topics it subscribed to (the firmware subscribes to none)"
        );
    }
    crate::errln!(
        "backend: MQTT gateway on {at} (UDP {}, hello names {}:{}){}",
        sockets.udp.local_addr()?,
        wire.gateway.public_ip,
        wire.gateway.udp_port,
        if wire.gateway.signature_key.is_some() {
            ", passwords checked"
        } else {
            ""
        }
    );
    Ok(Some((sockets, wire)))
}

/// `--ota`: the OTA endpoint, handing out the gateway at `mqtt` if any, else the WebSocket at
/// `ws`; printed.
async fn start_ota(
    opts: &Args,
    ws: std::net::SocketAddr,
    mqtt: Option<String>,
    stop: &watch::Receiver<bool>,
) -> Result<()> {
    let Some(addr) = &opts.ota else { return Ok(()) };
    let listener = TcpListener::bind(addr).await.with_context(|| format!("--ota {addr}"))?;
    let at = listener.local_addr()?;
    let config = xiaozhi_sim::backend::ota::OtaConfig {
        websocket_url: format!("ws://{ws}/xiaozhi/v1/"),
        mqtt_gateway: mqtt,
        signature_key: opts.mqtt_signature_key.clone(),
        timezone_offset_hours: 8,
    };
    crate::errln!(
        "backend: OTA on http://{at}/xiaozhi/ota/ (hands out {})",
        if config.mqtt_gateway.is_some() {
            "mqtt"
        } else {
            "websocket"
        }
    );
    tokio::spawn(crate::server::serve_ota(listener, config, opts.verbose, stop.clone()));
    Ok(())
}

/// The longest stdin command line read (`--script -`): a script line is a command and at most
/// a sentence of ten minutes (2,400 characters); a longer line is skipped unread.
pub const MAX_COMMAND_LINE: usize = 64 * 1024;

/// Reads stdin lines as script steps and broadcasts them to every ready connection.
async fn stdin_commands(server: Arc<Server>) {
    use crate::lines::{BoundedLines, Line};
    let mut lines = BoundedLines::new(tokio::io::BufReader::new(tokio::io::stdin()), MAX_COMMAND_LINE);
    let mut n = 0usize;
    while let Ok(Some(line)) = lines.next_line().await {
        n += 1;
        let text = match line {
            Line::TooLong { bytes } => {
                crate::errln!(
                    "stdin:{n}: a line of {bytes} bytes is longer than a command may be ({MAX_COMMAND_LINE} bytes): skipped"
                );
                continue;
            }
            Line::Whole(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) => {
                    crate::errln!("stdin:{n}: not UTF-8 text: skipped");
                    continue;
                }
            },
        };
        match xiaozhi_sim::backend::script::parse_line(&text) {
            Ok(Some(l)) if l.step == Command::Repeat => {
                crate::errln!("stdin:{n}: `repeat` belongs in a script file: a typed command runs once");
            }
            Ok(Some(l)) => server.broadcast(l.step),
            Ok(None) => {}
            Err(e) => crate::errln!("stdin:{n}:{e}"),
        }
    }
}

/// The steps every connection runs: `--script FILE` (its WAVs checked now), `-` (steps from
/// stdin: true), or with no script the fleet's default turn for a personality that speaks.
fn load_script(opts: &Args, spec: &BackendSpec) -> Result<(Script, bool)> {
    Ok(match &opts.script {
        Some(p) if p.as_os_str() == "-" => (Script::default(), true),
        Some(p) => {
            let text = xiaozhi_sim::spec::read_text(p)?;
            let script = Script::parse(&p.display().to_string(), &text)?;
            // A `speak … wav FILE` must name a readable WAV before anything is served.
            for line in &script.lines {
                if let Command::Speak {
                    voice: SpeakVoice::Wav(f),
                    ..
                } = &line.step
                    && let Err(e) = crate::wav::read_pcm(std::path::Path::new(f))
                {
                    anyhow::bail!("{}:{}: {e:#}", p.display(), line.line);
                }
            }
            (script, false)
        }
        // No script: a personality that speaks answers every turn as the fleet's built-in
        // backend does, so `fleet --url` against this process gets the turns it gets in-process.
        None if spec.voice.is_some() => (
            Script::parse(
                "the default turn",
                &format!("{}repeat\n", crate::fleet::talking::VOICE_SCRIPT),
            )?,
            false,
        ),
        None => (Script::default(), false),
    })
}

pub fn run(opts: &Args) -> Result<bool> {
    let spec = load_personality(&opts.personality)?;
    if let Some(path) = &opts.scenario {
        return run_scenario(opts, spec, path);
    }
    let (script, from_stdin) = load_script(opts, &spec)?;
    // One worker per core: a backend in its own process serves a whole fleet (docs/fleet.md).
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(async {
        let listener = TcpListener::bind(&opts.listen)
            .await
            .with_context(|| format!("--listen {}", opts.listen))?;
        let addr = listener.local_addr()?;
        crate::errln!(
            "backend: listening on ws://{addr}/xiaozhi/v1/ as {} (Ctrl-C stops)",
            spec.name
        );
        let server = Server::new(spec, script, opts.verbose, true);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mqtt = bind_mqtt(opts, addr).await?;
        let endpoint = mqtt.as_ref().map(|(m, _)| m.endpoint()).transpose()?;
        start_ota(opts, addr, endpoint, &stop_rx).await?;
        let mqtt_serving =
            mqtt.map(|(m, wire)| tokio::spawn(serve_mqtt(m.mqtt, m.udp, wire, server.clone(), stop_rx.clone())));
        let serving = tokio::spawn(serve(listener, server.clone(), stop_rx));
        if from_stdin {
            tokio::spawn(stdin_commands(server.clone()));
        }
        let mut closed = server.closed();
        let limit = opts.connections;
        let enough = async {
            loop {
                if limit.is_some_and(|l| *closed.borrow() >= l) {
                    break;
                }
                if closed.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        let deadline = async {
            match opts.duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        // A closed standard output stops the server as Ctrl-C does: its reports have nowhere
        // to go (src/out.rs).
        let orphaned = async {
            while !crate::out::stdout_closed() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::select! {
            _ = enough => {}
            _ = deadline => {}
            _ = orphaned => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        let _ = stop_tx.send(true);
        // Both wires close their connections (ending `shutdown`) and write what they owe the
        // devices before the reports are read and the process ends.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = serving.await;
            if let Some(m) = mqtt_serving {
                let _ = m.await;
            }
        })
        .await;
        let reports = server.take_reports();
        let calls = reports
            .iter()
            .flat_map(|r| &r.session.exchanges)
            .filter(|e| e.method == "tools/call");
        let (mut replied, mut lost) = (0, 0);
        for e in calls {
            match e.outcome {
                Outcome::Replied | Outcome::Error => replied += 1,
                _ => lost += 1,
            }
        }
        crate::errln!(
            "backend: {} connections, {} tool calls answered, {} never answered",
            reports.len(),
            replied,
            lost
        );
        Ok(true)
    });
    // The stdin reader is a blocking thread that may wait forever: do not wait for it.
    runtime.shutdown_background();
    result
}

/// `backend --scenario`: serve one scenario to the first device that connects, then judge it.
fn run_scenario(opts: &Args, spec: BackendSpec, path: &std::path::Path) -> Result<bool> {
    let loaded = crate::scenarios::load(path)?;
    let plan = xiaozhi_sim::scenario::wire_plan::WirePlan::of(&loaded.spec, &loaded.origin, &loaded.text)?;
    let limit = opts.duration.unwrap_or(Duration::from_secs(60));
    let name = spec.name.clone();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(async {
        let listener = TcpListener::bind(&opts.listen)
            .await
            .with_context(|| format!("--listen {}", opts.listen))?;
        let ws = listener.local_addr()?;
        let url = format!("ws://{ws}/xiaozhi/v1/");
        crate::errln!(
            "backend: listening on {url} as {name}; scenario {} ({} step(s) over {} connection(s)), waiting up to {:?} for a device",
            loaded.origin,
            loaded.spec.steps.len(),
            plan.connections,
            limit
        );
        let mqtt = bind_mqtt(opts, ws).await?;
        let endpoint = mqtt.as_ref().map(|(m, _)| m.endpoint()).transpose()?;
        let (_stop_ota, stop_rx) = watch::channel(false);
        start_ota(opts, ws, endpoint.clone(), &stop_rx).await?;
        let served = crate::over_wire::serve_plan(listener, &plan, spec.clone(), limit, opts.verbose, None, mqtt).await?;
        let seed = loaded.spec.seed(None);
        let over = match endpoint {
            Some(e) => format!("{url} and mqtt://{e} + UDP (the gateway stand-in, backend {name})"),
            None => format!("{url} (backend {name})"),
        };
        anyhow::Ok(crate::over_wire::judge_reports(&loaded, &plan, &spec, over, seed, served))
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    let mut result = result?;
    crate::over_wire::require_completion(&mut result, limit);
    crate::out!("{}", result.report.to_text());
    Ok(result.report.passed)
}

/// The personality a backend has without `--personality`.
const DEFAULT_PERSONALITY: &str = "xinnan-py";

/// The help's list of shipped personalities, from the one list the binary embeds.
fn shipped_personalities() -> String {
    let names: Vec<&str> = xiaozhi_sim::backend::spec::SHIPPED
        .iter()
        .map(|(name, _)| *name)
        .collect();
    format!(
        "Shipped personalities: {} (default {DEFAULT_PERSONALITY}).",
        names.join(", ")
    )
}
