//! The WebSocket backend server: a small xiaozhi-compatible server that acts as the MCP client
//! of every device that connects, in the manner of a real backend (a *personality*). Used by
//! `xiaozhi-twin backend`, by the fleet's built-in backend and by scenarios over the wire.
//!
//! The decisions (what to answer, which ids, when to list, what the LLM sees, how the script
//! runs, what a fault does) are the sans-IO [`ScriptedBackend`] of the sim crate; this module
//! owns the listener, the handshake, the sockets, the wall clock (a [`Clock`] maps tokio time
//! onto `SimTime`), the WAV files a script speaks, and the report of each connection. A
//! connection is a short drive loop in quinn's shape: carry out the backend's actions
//! (`Link::drive_transmit`), then wait for a frame, the backend's deadline, a stdin command or the
//! stop signal, and hand it in.
//!
//! Devices on MQTT + UDP meet the same server through a stand-in of xiaozhi-mqtt-gateway
//! (`mqtt_gateway.rs`), and `ota.rs` answers their activation requests as xiaozhi-esp32-server does.

mod mqtt_gateway;
mod ota;

pub use mqtt_gateway::{MAX_MQTT_PACKET, MqttWire, bind_udp, serve_mqtt};
pub use ota::serve_ota;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use xiaozhi_sim::backend::script::{Command, Script};
pub use xiaozhi_sim::backend::scripted::BackendFault;
use xiaozhi_sim::backend::scripted::{ScriptedAction, ScriptedBackend, prepare_speech};
use xiaozhi_sim::backend::{BackendSpec, Session, SessionReport, spec::SHIPPED};
use xiaozhi_sim::spec::Resources;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::voice::memo::CodecPool;

use crate::live::{Clock, read_http_head, small_ws_config};

/// Largest frame the backend accepts (the otto-robot's 8 KiB tools/list pages fit easily).
const MAX_FRAME: usize = 1 << 20;

/// A shipped personality by name, or a personality YAML file.
pub fn load_personality(name: &str) -> Result<BackendSpec> {
    if let Some(spec) = BackendSpec::shipped(name) {
        return Ok(spec);
    }
    let path = std::path::Path::new(name);
    if !path.exists() {
        let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
        bail!(
            "unknown personality `{name}` (shipped: {}; or give a YAML file)",
            names.join(", ")
        );
    }
    let text = xiaozhi_sim::spec::read_text(path)?;
    Ok(BackendSpec::from_yaml(&path.display().to_string(), &text)?)
}

/// How a connection ended, from the backend's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The device sent a WebSocket close frame.
    DeviceCloseFrame,
    /// TCP ended without a close frame (a reboot, a crash, a power cut).
    TcpClosedWithoutCloseFrame,
    /// The backend closed it (script `close`, a personality rule).
    BackendClosed,
    /// The script dropped the socket (`vanish`, `garbage`).
    BackendVanished,
    /// The MQTT gateway closed the bridge: the device said goodbye, or its MQTT connection ended
    /// (a device on MQTT + UDP).
    GatewayClosed,
    /// The backend stopped (duration over, Ctrl-C) with the connection open.
    Shutdown,
}

/// Everything about one connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnReport {
    pub connection: u64,
    pub peer: String,
    pub path: String,
    /// Handshake headers in arrival order.
    pub headers: Vec<(String, String)>,
    /// This device's connection count (1 = first, 2 = after a reboot, …).
    pub device_connection: u32,
    pub opened_ms: f64,
    pub closed_ms: f64,
    pub ending: Ending,
    pub unanswered: Vec<i64>,
    #[serde(flatten)]
    pub session: SessionReport,
}

/// State shared by every connection of one server.
pub struct Server {
    spec: Arc<BackendSpec>,
    script: Arc<Script>,
    clock: Clock,
    verbose: bool,
    /// Print each report as a JSON line on stdout when its connection ends.
    print: bool,
    per_device: Mutex<BTreeMap<String, u32>>,
    /// Connections accepted (shared by the backend instances of one fleet).
    next_conn: Arc<AtomicU64>,
    reports: Mutex<Vec<ConnReport>>,
    commands: broadcast::Sender<Command>,
    closed: watch::Sender<u64>,
    scripts_done: AtomicU64,
    /// The highest device connection number (1, 2 after a reboot, …) whose script has ended.
    last_script_done: watch::Sender<u32>,
    /// Opus work shared by every connection (a fleet's backend encodes a reply once).
    codecs: Option<Arc<dyn CodecPool>>,
    fault: BackendFault,
    /// The sound of a script's `speak … wav FILE` (read when the step runs).
    wavs: Arc<dyn Resources>,
    /// Where each device's latest utterance's own delay goes (a voice fleet's built-in backend).
    ear_log: Option<Arc<EarLog>>,
}

/// The built-in backend's own delay for each device's latest utterance (by `Device-Id`): from the
/// last microphone frame that was voice to the one on which its rule ended the utterance, in
/// whole 60 ms frames. What a voice fleet subtracts from first-audio latency to get what the
/// twin added.
pub type EarLog = Mutex<std::collections::HashMap<String, Duration>>;

/// A script's WAV files, read from disk when a `speak` step runs; one that cannot be read
/// speaks with the built-in voice (and says so on stderr).
struct WavFiles;

impl Resources for WavFiles {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        crate::wav::read_pcm(std::path::Path::new(path)).map_err(|e| {
            crate::errln!("backend: speak: {e:#}; speaking with the built-in voice");
            format!("{e:#}")
        })
    }
}

impl Server {
    pub fn new(spec: BackendSpec, script: Script, verbose: bool, print: bool) -> Arc<Server> {
        Server::with(spec, script, verbose, print, None, BackendFault::None, None)
    }

    /// [`Server::new`] with a shared codec pool, a fault, and a connection counter shared with
    /// other instances (a fleet runs one per core; `close-every:N` counts the fleet's
    /// connections).
    pub fn with(
        spec: BackendSpec,
        script: Script,
        verbose: bool,
        print: bool,
        codecs: Option<Arc<dyn CodecPool>>,
        fault: BackendFault,
        connections: Option<Arc<AtomicU64>>,
    ) -> Arc<Server> {
        Arc::new(Server {
            codecs,
            fault,
            wavs: Arc::new(WavFiles),
            spec: Arc::new(spec),
            script: Arc::new(script),
            clock: Clock::new(SimTime::ZERO),
            verbose,
            print,
            per_device: Mutex::new(BTreeMap::new()),
            next_conn: connections.unwrap_or_default(),
            reports: Mutex::new(Vec::new()),
            commands: broadcast::channel(64).0,
            closed: watch::channel(0).0,
            scripts_done: AtomicU64::new(0),
            last_script_done: watch::channel(0).0,
            ear_log: None,
        })
    }

    /// Logs each device's latest utterance's own delay in `log` ([`EarLog`]).
    pub fn with_ear_log(mut self: Arc<Server>, log: Arc<EarLog>) -> Arc<Server> {
        if let Some(s) = Arc::get_mut(&mut self) {
            s.ear_log = Some(log);
        }
        self
    }

    /// Encodes the script's sentences into the shared codec pool before anyone connects, the
    /// personal ones (`{device}`, `{turn}`) for each of `listeners` (device ids); without a pool
    /// nothing (each connection encodes what it says).
    pub fn prepare_speech(&self, listeners: &[String]) {
        if let Some(pool) = &self.codecs {
            prepare_speech(&self.spec, &self.script, pool, &WavFiles, listeners);
        }
    }

    /// Reports of the connections closed so far.
    pub fn take_reports(&self) -> Vec<ConnReport> {
        std::mem::take(&mut *self.reports.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Number of connections closed so far.
    pub fn closed(&self) -> watch::Receiver<u64> {
        self.closed.subscribe()
    }

    /// Connections whose script ran to its end (replies included).
    pub fn scripts_done(&self) -> u64 {
        self.scripts_done.load(Ordering::Relaxed)
    }

    /// The highest device connection number whose script has ended (scenarios over the wire).
    pub fn last_script_done(&self) -> watch::Receiver<u32> {
        self.last_script_done.subscribe()
    }

    /// Sends a step to every ready connection (stdin commands).
    pub fn broadcast(&self, step: Command) {
        let _ = self.commands.send(step);
    }

    /// Counts a connection of the device `device_id`: its 1-based number (2 after a reboot, …).
    fn device_connection(&self, device_id: &str) -> u32 {
        let mut m = self.per_device.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.entry(device_id.to_string()).or_insert(0);
        *c += 1;
        *c
    }

    /// The script of a device's `device_connection`th connection has ended.
    fn script_done(&self, device_connection: u32) {
        self.scripts_done.fetch_add(1, Ordering::Relaxed);
        self.last_script_done.send_modify(|k| *k = (*k).max(device_connection));
    }

    fn finish(&self, report: ConnReport) {
        if self.print
            && let Ok(line) = serde_json::to_string(&report)
        {
            crate::outln!("{line}");
        }
        if self.verbose || self.print {
            crate::errln!(
                "backend: connection {} ({}) ended: {}, {} exchanges, unanswered ids {:?}",
                report.connection,
                report.session.device_id,
                serde_json::to_value(report.ending)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                report.session.exchanges.len(),
                report.unanswered
            );
        }
        self.reports.lock().unwrap_or_else(|e| e.into_inner()).push(report);
        self.closed.send_modify(|n| *n += 1);
    }
}

/// Accepts devices until `stop` turns true; then closes every connection (ending `shutdown`).
pub async fn serve(listener: TcpListener, server: Arc<Server>, stop: watch::Receiver<bool>) {
    let mut stop_accept = stop.clone();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let n = server.next_conn.fetch_add(1, Ordering::Relaxed) + 1;
                    tasks.spawn(connection(stream, peer, n, server.clone(), stop.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    if server.verbose {
                        crate::errln!("backend: accept failed: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop_accept.changed() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// The server side of the opening handshake, by hand so the report can show the device's
/// header lines exactly as sent (name case and order are part of the firmware's behaviour).
async fn handshake(mut stream: TcpStream) -> Result<(ServerWs, String, Vec<(String, String)>)> {
    let (head, end) = read_http_head(&mut stream).await.context("request header")?;
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default().to_string(),
    );
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.to_string(), v.trim().to_string())))
        .collect();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let key = match (method, find("upgrade"), find("sec-websocket-key")) {
        ("GET", Some(u), Some(k)) if u.eq_ignore_ascii_case("websocket") => k.to_string(),
        _ => {
            let _ = stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
            bail!("not a WebSocket upgrade: {request_line}");
        }
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await?;
    let leftover = head[end..].to_vec();
    let ws = tokio_tungstenite::WebSocketStream::from_partially_read(
        stream,
        leftover,
        Role::Server,
        Some(small_ws_config(MAX_FRAME)),
    )
    .await;
    Ok((ws, path, headers))
}

/// The handshake, within 10 s; `None` (logged when verbose) when it fails.
async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    verbose: bool,
) -> Option<(ServerWs, String, Vec<(String, String)>)> {
    match tokio::time::timeout(Duration::from_secs(10), handshake(stream)).await {
        Ok(Ok(x)) => Some(x),
        Ok(Err(e)) => {
            if verbose {
                crate::errln!("backend: {peer}: handshake failed: {e:#}");
            }
            None
        }
        Err(_) => {
            if verbose {
                crate::errln!("backend: {peer}: no handshake within 10 s");
            }
            None
        }
    }
}

/// One device connection, handshake to close.
async fn connection(stream: TcpStream, peer: SocketAddr, n: u64, server: Arc<Server>, stop: watch::Receiver<bool>) {
    let Some((mut ws, path, headers)) = accept(stream, peer, server.verbose).await else {
        return;
    };
    let mut open = server.open(n, peer, path, headers);
    let commands = server.commands.subscribe();
    let link = Link {
        server: &server,
        n,
        device_connection: open.device_connection,
    };
    let ending = link.drive(&mut open.backend, &mut ws, commands, stop).await;
    server.close(open, ending);
}

/// A backend session on a connection that is open (a WebSocket, or a gateway's bridge).
struct Open {
    backend: ScriptedBackend,
    n: u64,
    peer: SocketAddr,
    path: String,
    headers: Vec<(String, String)>,
    device_connection: u32,
    opened: SimTime,
    /// Utterances already written to the ear log.
    heard: usize,
}

impl Server {
    /// The backend of connection `n`, opened with these handshake headers.
    fn open(&self, n: u64, peer: SocketAddr, path: String, headers: Vec<(String, String)>) -> Open {
        let opened = self.clock.now();
        let mut session = Session::accept(self.spec.clone(), opened, &headers, n);
        if let Some(pool) = &self.codecs {
            session.share_codecs(pool.clone());
        }
        let device_connection = self.device_connection(session.device_id());
        if self.verbose {
            crate::errln!("backend: connection {n} from {peer} ({}), {path}", session.device_id());
        }
        let backend = ScriptedBackend::new(
            session,
            &self.script,
            device_connection,
            n,
            self.fault,
            self.wavs.clone(),
        );
        Open {
            backend,
            n,
            peer,
            path,
            headers,
            device_connection,
            opened,
            heard: 0,
        }
    }

    /// The connection is over: its report.
    fn close(&self, mut open: Open, ending: Ending) {
        let closed = self.clock.now();
        open.backend.handle_closed(closed);
        self.finish(ConnReport {
            connection: open.n,
            peer: open.peer.to_string(),
            path: open.path,
            headers: open.headers,
            device_connection: open.device_connection,
            opened_ms: open.opened.as_micros() as f64 / 1000.0,
            closed_ms: closed.as_micros() as f64 / 1000.0,
            ending,
            unanswered: open.backend.session().unanswered(),
            session: open.backend.report(),
        });
    }

    /// After microphone audio: the backend's own delay for a newly ended utterance goes to the
    /// ear log (a voice fleet's built-in backend).
    fn log_ear(&self, backend: &ScriptedBackend, heard: &mut usize) {
        let Some(log) = &self.ear_log else { return };
        let s = backend.session();
        if s.utterances() > *heard {
            *heard = s.utterances();
            if let Some(u) = s.voice_report().utterances.last() {
                let own = Duration::from_millis(u.frames_after_voice * 60);
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(s.device_id().to_string(), own);
            }
        }
    }
}

type ServerWs = tokio_tungstenite::WebSocketStream<TcpStream>;

/// What the drive loop of one connection needs to know about it.
struct Link<'a> {
    server: &'a Server,
    /// The server's connection number.
    n: u64,
    /// The device's connection number (1, 2 after a reboot, …).
    device_connection: u32,
}

impl Link<'_> {
    /// Runs `backend` on `ws` until the connection ends; how it ended.
    async fn drive(
        &self,
        backend: &mut ScriptedBackend,
        ws: &mut ServerWs,
        mut commands: broadcast::Receiver<Command>,
        mut stop: watch::Receiver<bool>,
    ) -> Ending {
        let clock = self.server.clock;
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut heard = 0;
        loop {
            if let Some(ending) = self.drive_transmit(backend, ws).await {
                return ending;
            }
            let sleep = backend
                .poll_timeout()
                .map_or_else(|| Instant::now() + Duration::from_secs(3600), |t| clock.instant(t));
            if timer.deadline() != sleep {
                timer.as_mut().reset(sleep);
            }
            // After `garbage` the backend reads nothing until it vanishes.
            let open = backend.takes_input();
            tokio::select! {
                msg = ws.next(), if open => {
                    let now = clock.now();
                    match msg {
                        Some(Ok(Message::Text(t))) => {
                            if self.server.verbose {
                                crate::errln!("backend[{}] ← {}", self.n, crate::out::elide(t.as_str(), 2_000));
                            }
                            backend.handle_text(now, t.as_str());
                        }
                        Some(Ok(Message::Binary(b))) => {
                            backend.handle_binary(now, &b);
                            self.server.log_ear(backend, &mut heard);
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                        Some(Ok(Message::Close(_))) => return Ending::DeviceCloseFrame,
                        Some(Err(_)) | None => return Ending::TcpClosedWithoutCloseFrame,
                    }
                }
                _ = &mut timer => backend.handle_timeout(clock.now()),
                cmd = commands.recv(), if open => {
                    if let Ok(step) = cmd {
                        backend.handle_command(clock.now(), step);
                    }
                }
                _ = stop.changed(), if open => {
                    let _ = ws.close(None).await;
                    return Ending::Shutdown;
                }
            }
        }
    }

    /// Carries out every action the backend has decided, in order; how the connection ended,
    /// if one of them ended it.
    async fn drive_transmit(&self, backend: &mut ScriptedBackend, ws: &mut ServerWs) -> Option<Ending> {
        while let Some(action) = backend.poll_action() {
            let sent = match action {
                ScriptedAction::Text(text) => {
                    if self.server.verbose {
                        crate::errln!("backend[{}] → {}", self.n, crate::out::elide(&text, 2_000));
                    }
                    ws.send(Message::text(text)).await
                }
                ScriptedAction::Binary(frame) => ws.send(Message::Binary(frame.into())).await,
                ScriptedAction::Raw(bytes) => {
                    let _ = ws.flush().await;
                    let _ = ws.get_mut().write_all(&bytes).await;
                    let _ = ws.get_mut().flush().await;
                    Ok(())
                }
                ScriptedAction::Close => {
                    let _ = ws.close(None).await;
                    return Some(Ending::BackendClosed);
                }
                // Over WebSocket, the device's connection dropping is the backend vanishing.
                ScriptedAction::Vanish | ScriptedAction::Disconnect => return Some(Ending::BackendVanished),
                ScriptedAction::ScriptDone => {
                    self.server.script_done(self.device_connection);
                    Ok(())
                }
            };
            if sent.is_err() {
                return Some(Ending::TcpClosedWithoutCloseFrame);
            }
        }
        None
    }
}
