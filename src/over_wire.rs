//! Scenarios over real sockets: the scenario's MCP steps run by the backend server
//! (`crate::server`, a personality) against a device on a WebSocket connection, judged from the
//! backend's side (`xiaozhi_sim::scenario::over_wire`).
//!
//! Two ways in: `xiaozhi-twin run --wire` starts both ends in this process on a loopback port;
//! `xiaozhi-twin backend --scenario FILE` serves the scenario to whatever device connects (a
//! `xiaozhi-twin connect` in another process, or a real board). Either wire: with
//! [`Transport::Mqtt`] the device is sent to MQTT + UDP and meets the server through the gateway
//! stand-in (`crate::server::serve_mqtt`), and the scenario runs on the gateway's bridge.

use std::time::Duration;

use anyhow::Result;
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::scenario::over_wire::{WireConnection, WireRun, judge};
use xiaozhi_sim::scenario::record::{Check, Expectation, ScenarioReport};
use xiaozhi_sim::scenario::wire_plan::WirePlan;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WsConfig;

use xiaozhi_sim::backend::gateway::GatewayConfig;
use xiaozhi_sim::backend::ota::mqtt_block;
use xiaozhi_sim::fault::UdpFaults;

use crate::live::{LiveOptions, Wake, run_device};
use crate::scenarios::Loaded;
use crate::server::{ConnReport, MAX_MQTT_PACKET, MqttWire, Server, bind_udp, serve, serve_mqtt};

/// The wire a scenario runs over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// One WebSocket (the default).
    #[default]
    Websocket,
    /// MQTT + UDP through the gateway stand-in, as an OTA answer with an `mqtt` block sends a
    /// device.
    Mqtt,
}

/// The gateway stand-in's sockets, bound: MQTT and UDP.
pub struct MqttSockets {
    pub mqtt: TcpListener,
    pub udp: tokio::net::UdpSocket,
}

impl MqttSockets {
    /// Both on loopback, any port.
    pub async fn loopback() -> Result<MqttSockets> {
        Ok(MqttSockets {
            mqtt: TcpListener::bind("127.0.0.1:0").await?,
            udp: bind_udp(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?,
        })
    }

    /// The MQTT endpoint (`host:port`).
    pub fn endpoint(&self) -> Result<String> {
        Ok(self.mqtt.local_addr()?.to_string())
    }

    /// The gateway's settings for these sockets in front of the server at `ws` (its WebSocket
    /// URL): the hello names the UDP socket (its IP, or 127.0.0.1 when it is 0.0.0.0, unless
    /// `public_ip`), passwords checked with `key` if any, Nagle left on unless `nodelay`; with
    /// `broker`, a plain broker's delivery (only to subscribers) instead of the gateway's.
    pub fn wire(
        &self,
        ws: &str,
        public_ip: Option<String>,
        key: Option<String>,
        nodelay: bool,
        broker: bool,
    ) -> Result<MqttWire> {
        let udp = self.udp.local_addr()?;
        let public_ip = public_ip.unwrap_or_else(|| {
            if udp.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                udp.ip().to_string()
            }
        });
        Ok(MqttWire {
            gateway: GatewayConfig {
                signature_key: key,
                public_ip,
                udp_port: udp.port(),
                max_tools: 32,
                // The integration doc's chat server URL: the suffix makes the server frame its
                // audio for the gateway (docs/reference/mqtt.md §5).
                chat_server: format!("{ws}?from=mqtt_gateway"),
                needs_subscribe: broker,
            },
            max_packet: MAX_MQTT_PACKET,
            nodelay,
            udp_faults: UdpFaults::default(),
        })
    }
}

/// What one scenario run over the wire produced.
pub struct WireResult {
    pub report: ScenarioReport,
    /// Every connection the backend saw, in the order they closed.
    pub connections: Vec<ConnReport>,
    /// The steps of every planned connection ran to their end before the time limit.
    pub completed: bool,
}

/// Serves `plan` on `listener` until the device's last planned connection has run its steps
/// (or `limit` passes), optionally with a twin device of `loaded`'s board dialing in from this
/// process. Returns the backend's reports of every connection.
pub async fn serve_plan(
    listener: TcpListener,
    plan: &WirePlan,
    personality: BackendSpec,
    limit: Duration,
    verbose: bool,
    device: Option<Device>,
    mqtt: Option<(MqttSockets, MqttWire)>,
) -> Result<(Vec<ConnReport>, bool)> {
    let server = Server::new(personality, plan.script.clone(), verbose, false);
    let (stop_tx, stop_rx) = watch::channel(false);
    if let Some((m, wire)) = mqtt {
        tokio::spawn(serve_mqtt(m.mqtt, m.udp, wire, server.clone(), stop_rx.clone()));
    }
    let serving = tokio::spawn(serve(listener, server.clone(), stop_rx));
    let (device_stop_tx, device_stop_rx) = watch::channel(false);
    let device_task = device.map(|device| {
        let live = LiveOptions {
            wake: Wake::OnBoot,
            duration: Some(limit + Duration::from_secs(5)),
            verbose,
            label: device.mac().to_string(),
            stop: Some(device_stop_rx),
            counters: None,
            script: None,
            record: false,
            companion: None,
        };
        tokio::spawn(run_device(device, live))
    });
    let mut done = server.last_script_done();
    let connections = plan.connections;
    let completed = tokio::time::timeout(limit, async {
        while *done.borrow_and_update() < connections {
            if done.changed().await.is_err() {
                break;
            }
        }
    })
    .await
    .is_ok();
    // The backend closes what is still open (ending `shutdown`), then the device stops.
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
    let _ = device_stop_tx.send(true);
    if let Some(t) = device_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    Ok((server.take_reports(), completed))
}

/// The device a `run --wire` dials in with: the scenario's board, world and seed, its
/// WebSocket settings pointing at `url`, or with `mqtt` the `mqtt` block xiaozhi-esp32-server's
/// OTA hands out for a gateway at that endpoint (no password: the stand-in checks none).
pub fn twin_device(l: &Loaded, url: &str, mqtt: Option<&str>, seed: Option<u64>) -> Device {
    let mut world = l.spec.world();
    world.websocket = Some(WsConfig {
        url: url.to_string(),
        token: "test-token".into(),
        version: 1,
    });
    let seed = l.spec.seed(seed);
    let mut device = Device::new(l.board.clone(), world, seed);
    if let Some(endpoint) = mqtt {
        let block = mqtt_block(endpoint, &l.board.board_type, device.mac(), None);
        device.world_mut().mqtt = Some(block);
    }
    device.set_trace(false);
    device.power_on(SimTime::ZERO);
    device
}

/// Judges the connections of the first device that connected, as `serve_plan` returned them.
pub fn judge_reports(
    l: &Loaded,
    plan: &WirePlan,
    backend: &BackendSpec,
    over: String,
    seed: u64,
    (mut reports, completed): (Vec<ConnReport>, bool),
) -> WireResult {
    reports.sort_by_key(|r| r.connection);
    let first = reports.first().map(|r| r.session.device_id.clone());
    let endings: Vec<String> = reports
        .iter()
        .map(|r| {
            serde_json::to_value(r.ending)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    let conns: Vec<WireConnection<'_>> = reports
        .iter()
        .zip(&endings)
        .filter(|(r, _)| Some(&r.session.device_id) == first.as_ref())
        .map(|(r, ending)| WireConnection {
            number: r.device_connection,
            session: &r.session,
            ending,
            opened_ms: r.opened_ms,
            closed_ms: r.closed_ms,
        })
        .collect();
    let report = judge(
        &l.spec,
        plan,
        WireRun {
            origin: &l.origin,
            board: &l.board.name,
            firmware: &l.board.firmware.version,
            seed,
            over,
            backend,
        },
        &conns,
    );
    drop(conns);
    WireResult {
        report,
        connections: reports,
        completed,
    }
}

/// `run --wire` for one scenario: a backend on a loopback port, the twin dialing it over
/// `transport`.
pub fn run_one(
    l: &Loaded,
    personality: BackendSpec,
    seed: Option<u64>,
    limit: Duration,
    transport: Transport,
) -> Result<WireResult> {
    let plan = WirePlan::of(&l.spec, &l.origin, &l.text)?;
    let name = personality.name.clone();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}/xiaozhi/v1/", listener.local_addr()?);
        let mqtt = match transport {
            Transport::Websocket => None,
            Transport::Mqtt => {
                let sockets = MqttSockets::loopback().await?;
                let wire = sockets.wire(&url, None, None, false, false)?;
                Some((sockets, wire))
            }
        };
        let endpoint = mqtt.as_ref().map(|(m, _)| m.endpoint()).transpose()?;
        let device = twin_device(l, &url, endpoint.as_deref(), seed);
        let seed = l.spec.seed(seed);
        let over = match &endpoint {
            Some(e) => format!("mqtt://{e} + UDP (the gateway stand-in, backend {name})"),
            None => format!("{url} (backend {name})"),
        };
        let served = serve_plan(listener, &plan, personality.clone(), limit, false, Some(device), mqtt).await?;
        anyhow::Ok(judge_reports(l, &plan, &personality, over, seed, served))
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// A run that hit its time limit before the device's last planned connection finished fails,
/// with a check that says so (steps that never ran have no checks of their own to fail).
pub fn require_completion(result: &mut WireResult, limit: Duration) {
    if result.completed {
        return;
    }
    let seen: Vec<String> = result
        .connections
        .iter()
        .map(|c| format!("connection {} ({})", c.device_connection, c.session.device_id))
        .collect();
    result.report.checks.push(Check {
        step: 0,
        line: 0,
        what: "every step ran over the wire".into(),
        kind: Expectation::StepRan,
        passed: false,
        detail: format!(
            "time limit {limit:?} reached; the backend saw {}",
            if seen.is_empty() {
                "no device".to_string()
            } else {
                seen.join(", ")
            }
        ),
    });
    result.report.passed = false;
}
