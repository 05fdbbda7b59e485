//! A device and a backend connection joined by an in-memory "socket" in virtual time: the whole
//! WebSocket exchange (handshake, hellos, MCP both ways, speech, closes) without the network, so
//! personalities, backend scripts and backend faults can be tested deterministically. The live
//! version of the same pairing runs over real sockets in the binary (`src/server/mod.rs`).
//!
//! A device an OTA answer sent to MQTT meets the same backend through a
//! [`GatewayConn`] (xiaozhi-mqtt-gateway's behaviour): its MQTT publishes and UDP datagrams go to
//! the gateway, whose bridge frames go to the backend, and back.
//!
//! Each connection is a [`ScriptedBackend`]: with no script and no fault
//! ([`Loopback::new`]) it is a bare personality driven by hand; with [`Loopback::scripted`] it
//! runs a script (its waits in virtual time) and commits a [`BackendFault`]. What the device
//! sees of the backend's `garbage` and `vanish` is what a TCP close without a close frame is to
//! it: the connection breaking (at the garbage, which its WebSocket client cannot parse).

use crate::device::Input;
use std::sync::Arc;

use crate::backend::gateway::{GatewayAction, GatewayConfig, GatewayConn, connection_id, route};
use crate::backend::script::Script;
use crate::backend::scripted::{BackendFault, ScriptedAction, ScriptedBackend};
use crate::backend::{BackendSpec, Session, SessionReport};
use crate::device::{Device, Output};
use crate::fault::{UdpFaults, UdpPath};
use crate::spec::NoFiles;
use crate::time::SimTime;
use crate::voice::memo::CodecPool;

/// The pairing never came to rest: device and backend kept answering each other (more than
/// [`MAX_OUTPUTS`] frames without a pause, or [`MAX_STEPS`] timer steps before the target time).
/// A modelling bug, reported like [`crate::harness::NeverIdle`] instead of stopping quietly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the device and the backend never came to rest: {0}")]
pub struct NeverRests(pub &'static str);

/// Frames moved in one pump before the pairing counts as runaway.
pub const MAX_OUTPUTS: usize = 10_000;
/// Timer steps in one `run_until` before the pairing counts as runaway.
pub const MAX_STEPS: usize = 10_000_000;

/// Device ↔ backend in one clock.
pub struct Loopback {
    /// The device side of the pairing.
    pub device: Device,
    spec: Arc<BackendSpec>,
    /// The script and fault of every connection (`None`: sessions driven by hand).
    script: Option<(Script, BackendFault)>,
    backend: Option<ScriptedBackend>,
    /// The device has been told the live connection broke (a `garbage` step), though the backend
    /// still lingers.
    device_told: bool,
    finished: Vec<SessionReport>,
    connections: u64,
    /// Every frame the device sent, when asked for ([`Loopback::tap`]): binary or text, when.
    tapped: Option<Vec<(SimTime, bool, Vec<u8>)>>,
    /// The gateway of a device on MQTT + UDP, and its settings.
    gateway: Option<GatewayConn>,
    gateway_config: GatewayConfig,
    /// The device has a UDP socket (the gateway's datagrams reach it).
    udp_open: bool,
    /// The network between the gateway and the device, downlink.
    downlink: UdpPath,
    /// Where every connection's backend does its Opus work, when shared.
    codecs: Option<Arc<dyn CodecPool>>,
}

/// The address token of the device's UDP socket (a forged datagram comes from another).
pub const DEVICE_UDP: u64 = 1;

/// The handshake headers of a request as the server reads them.
pub fn request_headers(request: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(request)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(": ").map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

impl Loopback {
    /// Pairs `device` with a backend of `spec`; no connection yet.
    pub fn new(device: Device, spec: Arc<BackendSpec>) -> Self {
        Loopback {
            device,
            spec,
            script: None,
            backend: None,
            device_told: false,
            finished: Vec::new(),
            connections: 0,
            tapped: None,
            gateway: None,
            gateway_config: GatewayConfig::local(8884, "ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway"),
            udp_open: false,
            downlink: UdpPath::new(UdpFaults::default()),
            codecs: None,
        }
    }

    /// What the network does to the datagrams the gateway sends the device (from now on; for
    /// the crate's tests).
    #[cfg(feature = "test-api")]
    pub fn set_downlink_faults(&mut self, faults: UdpFaults) {
        self.downlink = UdpPath::new(faults);
    }

    /// The device and every backend connection to come do their Opus work in `pool` (the
    /// same bytes as on their own; a speech said twice is encoded once).
    pub fn share_codecs(&mut self, pool: Arc<dyn CodecPool>) {
        self.device.share_codecs(pool.clone());
        self.codecs = Some(pool);
    }

    /// The gateway's settings for the MQTT connections to come.
    pub fn set_gateway_config(&mut self, config: GatewayConfig) {
        self.gateway_config = config;
    }

    /// The gateway of the live MQTT connection, if any.
    pub fn gateway(&self) -> Option<&GatewayConn> {
        self.gateway.as_ref()
    }

    /// A datagram reaches the gateway from address `from` (not the device's: a forged one, with
    /// the ssrc of the live connection), as the gateway's server routes it (for the crate's
    /// tests).
    #[cfg(feature = "test-api")]
    pub fn inject_datagram(&mut self, from: u64, datagram: &[u8]) {
        if let Some(g) = self.gateway.as_mut()
            && route(datagram) == Some(g.connection_id)
        {
            g.datagram(from, datagram);
        }
        self.apply();
    }

    /// From now on, keeps a copy of every WebSocket frame the device sends (for tests of the
    /// wire's shape; off by default, so long runs keep nothing).
    pub fn tap(&mut self) {
        self.tapped.get_or_insert_with(Vec::new);
    }

    /// The frames kept since [`Loopback::tap`]: (time, binary?, bytes), taken.
    pub fn tapped(&mut self) -> Vec<(SimTime, bool, Vec<u8>)> {
        self.tapped.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Pairs `device` with a backend of `spec` that runs `script` on every connection and
    /// commits `fault`, as `xiaozhi-twin backend` does (a `speak … wav FILE` line speaks with the
    /// built-in voice: the sim reads no files).
    pub fn scripted(device: Device, spec: Arc<BackendSpec>, script: Script, fault: BackendFault) -> Self {
        Loopback {
            script: Some((script, fault)),
            ..Loopback::new(device, spec)
        }
    }

    /// The device's clock (the pairing's only clock).
    pub fn now(&self) -> SimTime {
        self.device.now()
    }

    /// The backend session of the live connection, if any.
    pub fn session(&mut self) -> Option<&mut Session> {
        self.backend.as_mut().map(ScriptedBackend::session_mut)
    }

    /// [`Loopback::session`], to read.
    pub fn session_ref(&self) -> Option<&Session> {
        self.backend.as_ref().map(ScriptedBackend::session)
    }

    /// Reports of every connection so far (closed ones first, then the live one).
    pub fn reports(&self) -> Vec<SessionReport> {
        let mut all = self.finished.clone();
        all.extend(self.backend.as_ref().map(ScriptedBackend::report));
        all
    }

    fn next_deadline(&self) -> Option<SimTime> {
        let d = self.device.poll_timeout();
        let b = self.backend.as_ref().and_then(ScriptedBackend::poll_timeout);
        let g = self.gateway.as_ref().and_then(GatewayConn::poll_timeout);
        d.into_iter().chain(b).chain(g).min()
    }

    /// A backend for the connection the device (or its gateway) just opened.
    fn accept(&mut self, now: SimTime, headers: &[(String, String)]) -> ScriptedBackend {
        self.connections += 1;
        let mut session = Session::accept(self.spec.clone(), now, headers, self.connections);
        if let Some(pool) = &self.codecs {
            session.share_codecs(pool.clone());
        }
        match &self.script {
            // One device: its connection count is the pairing's.
            Some((script, fault)) => ScriptedBackend::new(
                session,
                script,
                u32::try_from(self.connections).unwrap_or(u32::MAX),
                self.connections,
                *fault,
                Arc::new(NoFiles),
            ),
            None => ScriptedBackend::unscripted(session),
        }
    }

    /// The live connection is over: its report joins the closed ones.
    fn finish(&mut self, now: SimTime) {
        if let Some(mut b) = self.backend.take() {
            b.handle_closed(now);
            self.finished.push(b.report());
        }
        self.device_told = false;
    }

    /// Runs both sides until `t`.
    pub fn run_until(&mut self, t: SimTime) -> Result<(), NeverRests> {
        // Every step moves a deadline forward; the cap only guards against a modelling bug.
        let mut rested = false;
        for _ in 0..MAX_STEPS {
            self.pump()?;
            let Some(d) = self.next_deadline() else {
                rested = true;
                break;
            };
            if d > t {
                rested = true;
                break;
            }
            self.device.run_until(d);
            if let Some(b) = self.backend.as_mut() {
                b.handle_timeout(d);
            }
            if let Some(g) = self.gateway.as_mut() {
                g.handle_timeout(d);
            }
            self.apply();
        }
        if !rested {
            return Err(NeverRests("a deadline at or before the target time after every step"));
        }
        self.device.run_until(t);
        self.pump()
    }

    /// Moves every pending device output to the backend and back until both are quiet.
    fn pump(&mut self) -> Result<(), NeverRests> {
        for _ in 0..MAX_OUTPUTS {
            let Some(out) = self.device.poll_output() else {
                return Ok(());
            };
            let now = self.now();
            match out {
                Output::WsOpen { request, .. } => {
                    self.finish(now);
                    self.backend = Some(self.accept(now, &request_headers(&request)));
                    self.device.handle(now, Input::WsOpened { ok: true });
                    self.apply();
                }
                Output::WsText { text, .. } => {
                    if let Some(t) = self.tapped.as_mut() {
                        t.push((now, false, text.clone()));
                    }
                    if let Some(b) = self.backend.as_mut() {
                        b.handle_text(now, &String::from_utf8_lossy(&text));
                    }
                    self.apply();
                }
                // A lingering backend reads nothing: it ends at its own time.
                Output::WsClose { .. } if self.backend.as_ref().is_some_and(|b| !b.takes_input()) => {}
                Output::WsClose { .. } => self.finish(now),
                Output::WsBinary { frame, .. } => {
                    if let Some(t) = self.tapped.as_mut() {
                        t.push((now, true, frame.clone()));
                    }
                    if let Some(b) = self.backend.as_mut() {
                        b.handle_binary(now, &frame);
                    }
                    self.apply();
                }
                Output::MqttConnect { dial, .. } => {
                    // A new TCP connection to the gateway (its random id: from the count).
                    self.finish(now);
                    let n = self.connections + 1;
                    let mut g = GatewayConn::new(self.gateway_config.clone(), connection_id(n), n);
                    let keepalive = u16::try_from(dial.keepalive).unwrap_or(u16::MAX);
                    g.connect(now, &dial.client_id, &dial.username, &dial.password, keepalive);
                    self.gateway = Some(g);
                    self.apply();
                }
                Output::MqttPublish { payload, .. } => {
                    if let Some(t) = self.tapped.as_mut() {
                        t.push((now, false, payload.clone()));
                    }
                    if let Some(g) = self.gateway.as_mut() {
                        g.publish_in(now, 0, &payload);
                    }
                    self.apply();
                }
                Output::MqttClose { .. } => {
                    if let Some(mut g) = self.gateway.take() {
                        g.disconnected();
                    }
                    self.finish(now);
                }
                Output::UdpOpen { .. } => self.udp_open = true,
                Output::UdpClose { .. } => self.udp_open = false,
                Output::UdpSend { datagram, .. } => {
                    if let Some(t) = self.tapped.as_mut() {
                        t.push((now, true, datagram.clone()));
                    }
                    if let Some(g) = self.gateway.as_mut()
                        && route(&datagram) == Some(g.connection_id)
                    {
                        g.datagram(DEVICE_UDP, &datagram);
                    }
                    self.apply();
                }
                Output::Mcp { .. } | Output::Control { .. } => {}
            }
        }
        Err(NeverRests("the device kept producing output"))
    }

    /// Takes every action the backend and the gateway have decided, in order, until neither has
    /// more.
    fn apply(&mut self) {
        for _ in 0..MAX_OUTPUTS {
            let backend = self.apply_backend();
            let gateway = self.apply_gateway();
            if !backend && !gateway {
                return;
            }
        }
    }

    /// The gateway's actions (to the device and to its bridge); whether there were any.
    fn apply_gateway(&mut self) -> bool {
        let now = self.now();
        let mut any = false;
        while let Some(a) = self.gateway.as_mut().and_then(GatewayConn::poll_action) {
            any = true;
            match a {
                GatewayAction::ConnAck(code) => {
                    self.device.handle(now, Input::MqttConnack { accepted: code == 0 });
                }
                GatewayAction::Publish { payload, .. } => {
                    self.device.handle(now, Input::MqttMessage(payload.as_bytes()));
                }
                GatewayAction::Datagram { bytes, to } => {
                    if to == DEVICE_UDP && self.udp_open {
                        for d in self.downlink.carry(bytes) {
                            self.device.handle(now, Input::Udp(&d));
                        }
                    }
                }
                GatewayAction::Close => {
                    self.gateway = None;
                    self.device.handle(now, Input::MqttClosed);
                }
                GatewayAction::BridgeOpen { url, headers } => {
                    self.finish(now);
                    let mut b = self.accept(now, &headers);
                    if url.ends_with("?from=mqtt_gateway") {
                        b.session_mut().set_from_mqtt_gateway();
                    }
                    self.backend = Some(b);
                    if let Some(g) = self.gateway.as_mut() {
                        g.bridge_opened();
                    }
                }
                GatewayAction::BridgeText(text) => {
                    if let Some(b) = self.backend.as_mut() {
                        b.handle_text(now, &text);
                    }
                }
                GatewayAction::BridgeBinary(frame) => {
                    if let Some(b) = self.backend.as_mut() {
                        b.handle_binary(now, &frame);
                    }
                }
                GatewayAction::BridgeClose => {
                    self.finish(now);
                    if let Some(g) = self.gateway.as_mut() {
                        g.bridge_closed(now);
                    }
                }
            }
        }
        any
    }

    /// The backend's actions: to the device's WebSocket, or to the gateway's bridge; whether
    /// there were any.
    fn apply_backend(&mut self) -> bool {
        let now = self.now();
        let mut any = false;
        while let Some(a) = self.backend.as_mut().and_then(ScriptedBackend::poll_action) {
            any = true;
            if let Some(g) = self.gateway.as_mut() {
                match a {
                    ScriptedAction::Text(text) => g.bridge_text(now, &text),
                    ScriptedAction::Binary(frame) => g.bridge_binary(&frame),
                    ScriptedAction::Raw(_) | ScriptedAction::Close | ScriptedAction::Vanish => {
                        self.finish(now);
                        if let Some(g) = self.gateway.as_mut() {
                            g.bridge_closed(now);
                        }
                    }
                    // The gateway's bridge closes and the device's MQTT connection drops.
                    ScriptedAction::Disconnect => g.drop_connection(),
                    ScriptedAction::ScriptDone => {}
                }
                continue;
            }
            match a {
                ScriptedAction::Text(text) => {
                    self.device.handle(now, Input::WsText(text.as_bytes()));
                }
                ScriptedAction::Binary(frame) => {
                    self.device.handle(now, Input::WsBinary(&frame));
                }
                ScriptedAction::Raw(_) => {
                    // Not a frame: the device's WebSocket client gives up on the connection.
                    self.device.handle(now, Input::WsClosed);
                    self.device_told = true;
                }
                ScriptedAction::Close | ScriptedAction::Vanish | ScriptedAction::Disconnect => {
                    if !self.device_told {
                        self.device.handle(now, Input::WsClosed);
                    }
                    self.finish(now);
                }
                ScriptedAction::ScriptDone => {}
            }
        }
        any
    }

    /// The backend calls a tool (as its LLM decided).
    pub fn call(&mut self, tool: &str, args: serde_json::Value) {
        let now = self.now();
        if let Some(s) = self.session() {
            s.call(now, tool, args);
        }
        self.apply();
    }
}
