//! The WebSocket backend server: a small xiaozhi-compatible server that acts as the MCP client
//! of every device that connects, in the manner of a real backend (a *personality*). Used by
//! `xiaozhi-twin backend`, by the fleet's built-in backend and by scenarios over the wire.
//!
//! The decisions (what to answer, which ids, when to list, what the LLM sees) are the sans-IO
//! [`Session`] of the sim crate; this module owns the listener, the sockets, the timers, the
//! script runner and the report of each connection.

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
use xiaozhi_sim::backend::script::{Script, SpeakVoice, Step};
use xiaozhi_sim::backend::{Action, BackendSpec, Session, SessionReport, spec::SHIPPED};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::memo::CodecPool;
use xiaozhi_sim::voice::speak::{Timbre, natural_duration};

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
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
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

/// A misbehaving backend, for the fleet's fault runs (`fleet --voice --backend-fault`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendFault {
    /// Behaves.
    #[default]
    None,
    /// Never sends `tts start` (the audio still comes: the device drops it).
    NeverTtsStart,
    /// Stops mid-reply: after 10 audio frames of a reply, nothing more of it (no `tts stop`).
    StopMidReply,
    /// Floods: every audio frame sent 10 times (10× real time).
    Flood,
    /// Closes every Nth connection as its reply starts.
    CloseEvery(u64),
}

impl std::str::FromStr for BackendFault {
    type Err = String;
    fn from_str(s: &str) -> Result<BackendFault, String> {
        match s {
            "none" => Ok(BackendFault::None),
            "never-tts-start" => Ok(BackendFault::NeverTtsStart),
            "stop-mid-reply" => Ok(BackendFault::StopMidReply),
            "flood" => Ok(BackendFault::Flood),
            _ => match s.strip_prefix("close-every:").map(str::parse::<u64>) {
                Some(Ok(n)) if n >= 1 => Ok(BackendFault::CloseEvery(n)),
                _ => Err(format!(
                    "`{s}`: use none, never-tts-start, stop-mid-reply, flood or close-every:N (N ≥ 1)"
                )),
            },
        }
    }
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
    commands: broadcast::Sender<Step>,
    closed: watch::Sender<u64>,
    scripts_done: AtomicU64,
    /// The highest device connection number (1, 2 after a reboot, …) whose script has ended.
    last_script_done: watch::Sender<u32>,
    /// Opus work shared by every connection (a fleet's backend encodes a reply once).
    codecs: Option<Arc<dyn CodecPool>>,
    fault: BackendFault,
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
        if let Some(pool) = &codecs {
            prepare_speech(&spec, &script, pool);
        }
        Arc::new(Server {
            codecs,
            fault,
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
        })
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
    pub fn broadcast(&self, step: Step) {
        let _ = self.commands.send(step);
    }

    fn finish(&self, report: ConnReport) {
        if self.print
            && let Ok(line) = serde_json::to_string(&report)
        {
            println!("{line}");
        }
        if self.verbose || self.print {
            eprintln!(
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
                        eprintln!("backend: accept failed: {e}");
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

/// One device connection, handshake to close.
async fn connection(stream: TcpStream, peer: SocketAddr, n: u64, server: Arc<Server>, mut stop: watch::Receiver<bool>) {
    let accepted = tokio::time::timeout(Duration::from_secs(10), handshake(stream)).await;
    let (mut ws, path, headers) = match accepted {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            if server.verbose {
                eprintln!("backend: {peer}: handshake failed: {e:#}");
            }
            return;
        }
        Err(_) => {
            if server.verbose {
                eprintln!("backend: {peer}: no handshake within 10 s");
            }
            return;
        }
    };
    let clock = server.clock;
    let opened = clock.now();
    let mut session = Session::accept(server.spec.clone(), opened, &headers, n);
    if let Some(pool) = &server.codecs {
        session.share_codecs(pool.clone());
    }
    let mut reply_frames = 0u32;
    let mut muted = false;
    let device_connection = {
        let mut m = server.per_device.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.entry(session.device_id().to_string()).or_insert(0);
        *c += 1;
        *c
    };
    if server.verbose {
        eprintln!("backend: connection {n} from {peer} ({}), {path}", session.device_id());
    }
    let mut commands = server.commands.subscribe();
    let steps: Vec<Step> = server
        .script
        .steps_for(device_connection)
        .map(|l| l.step.clone())
        .collect();
    let mut next_step = 0usize;
    let mut resume_at: Option<Instant> = None;
    let mut waiting_reply = false;
    let mut waiting_utterance: Option<usize> = None;
    let mut script_done = false;
    let timer = tokio::time::sleep_until(Instant::now());
    tokio::pin!(timer);
    let ending = 'conn: loop {
        // Send what the session decided.
        while let Some(action) = session.poll_action() {
            match action {
                Action::Send(text) => {
                    // Only a fault run looks into what it sends.
                    let tts_state = if server.fault == BackendFault::None {
                        None
                    } else {
                        serde_json::from_str::<serde_json::Value>(&text)
                            .ok()
                            .filter(|v| v["type"] == "tts")
                            .and_then(|v| v["state"].as_str().map(str::to_string))
                    };
                    let tts = |state: &str| tts_state.as_deref() == Some(state);
                    let starts = tts("start");
                    if starts {
                        reply_frames = 0;
                        muted = false;
                    }
                    let skip = match server.fault {
                        BackendFault::NeverTtsStart => starts,
                        BackendFault::StopMidReply => muted && tts("stop"),
                        _ => false,
                    };
                    if skip {
                        continue;
                    }
                    if server.verbose {
                        eprintln!("backend[{n}] → {text}");
                    }
                    if ws.send(Message::text(text)).await.is_err() {
                        break 'conn Ending::TcpClosedWithoutCloseFrame;
                    }
                    if starts && matches!(server.fault, BackendFault::CloseEvery(k) if n.is_multiple_of(k)) {
                        let _ = ws.close(None).await;
                        break 'conn Ending::BackendClosed;
                    }
                }
                Action::Binary(frame) => {
                    reply_frames += 1;
                    if server.fault == BackendFault::StopMidReply && reply_frames > 10 {
                        muted = true;
                        continue;
                    }
                    let copies = if server.fault == BackendFault::Flood { 10 } else { 1 };
                    let frame = tokio_tungstenite::tungstenite::Bytes::from(frame);
                    for _ in 0..copies {
                        if ws.send(Message::Binary(frame.clone())).await.is_err() {
                            break 'conn Ending::TcpClosedWithoutCloseFrame;
                        }
                    }
                }
                Action::Close => {
                    let _ = ws.close(None).await;
                    break 'conn Ending::BackendClosed;
                }
            }
        }
        // Run the script as far as it goes.
        if session.is_ready() {
            if waiting_reply && session.pending_len() == 0 {
                waiting_reply = false;
            }
            if waiting_utterance.is_some_and(|n| session.utterances() > n) {
                waiting_utterance = None;
            }
            while !waiting_reply
                && waiting_utterance.is_none()
                && resume_at.is_none_or(|t| Instant::now() >= t)
                && next_step < steps.len()
            {
                resume_at = None;
                let step = steps[next_step].clone();
                next_step += 1;
                if !step.continues_turn() {
                    session.end_turn(clock.now());
                }
                match run_step(&mut session, &mut ws, clock.now(), step).await {
                    StepResult::Continue => {}
                    StepResult::WaitReply => waiting_reply = true,
                    StepResult::WaitUtterance(n) => waiting_utterance = Some(n),
                    StepResult::Sleep(d) => resume_at = Some(Instant::now() + d),
                    StepResult::End(e) => break 'conn e,
                }
                if session.has_actions() {
                    continue 'conn;
                }
            }
            if !waiting_reply && next_step == steps.len() {
                session.end_turn(clock.now());
                if session.has_actions() {
                    continue 'conn;
                }
            }
            if !script_done && !waiting_reply && next_step == steps.len() {
                script_done = true;
                server.scripts_done.fetch_add(1, Ordering::Relaxed);
                server
                    .last_script_done
                    .send_modify(|k| *k = (*k).max(device_connection));
            }
        }
        let mut until = session.poll_timeout().map(|t| clock.instant(t));
        if let Some(r) = resume_at {
            until = Some(until.map_or(r, |u| u.min(r)));
        }
        let sleep = until.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        if timer.deadline() != sleep {
            timer.as_mut().reset(sleep);
        }
        tokio::select! {
            msg = ws.next() => {
                let now = clock.now();
                match msg {
                    Some(Ok(Message::Text(t))) => {
                        if server.verbose {
                            eprintln!("backend[{n}] ← {}", t.as_str());
                        }
                        session.handle_text(now, t.as_str());
                    }
                    Some(Ok(Message::Binary(b))) => session.handle_binary(now, &b),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) => break 'conn Ending::DeviceCloseFrame,
                    Some(Err(_)) | None => break 'conn Ending::TcpClosedWithoutCloseFrame,
                }
            }
            _ = &mut timer => {
                session.handle_timeout(clock.now());
            }
            cmd = commands.recv() => {
                if let Ok(step) = cmd
                    && session.is_ready() {
                        match run_step(&mut session, &mut ws, clock.now(), step).await {
                            StepResult::End(e) => break 'conn e,
                            StepResult::Continue
                            | StepResult::WaitReply
                            | StepResult::WaitUtterance(_)
                            | StepResult::Sleep(_) => {}
                        }
                    }
            }
            _ = stop.changed() => {
                let _ = ws.close(None).await;
                break 'conn Ending::Shutdown;
            }
        }
    };
    let closed = clock.now();
    session.handle_closed(closed);
    let report = session.report();
    server.finish(ConnReport {
        connection: n,
        peer: peer.to_string(),
        path,
        headers,
        device_connection,
        opened_ms: opened.as_micros() as f64 / 1000.0,
        closed_ms: closed.as_micros() as f64 / 1000.0,
        ending,
        unanswered: session.unanswered(),
        session: report,
    });
}

enum StepResult {
    Continue,
    WaitReply,
    /// Until the session has found more utterances than this.
    WaitUtterance(usize),
    Sleep(Duration),
    End(Ending),
}

type ServerWs = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn run_step(session: &mut Session, ws: &mut ServerWs, now: SimTime, step: Step) -> StepResult {
    match step {
        Step::Call { tool, args, wait } => {
            let before = session.pending_len();
            session.call(now, &tool, args);
            if wait && session.pending_len() > before {
                StepResult::WaitReply
            } else {
                StepResult::Continue
            }
        }
        Step::Wait(d) => StepResult::Sleep(Duration::from_micros(d.as_micros())),
        Step::Raw(text) => {
            session.raw(&text);
            StepResult::Continue
        }
        Step::Frame(text) => {
            session.frame(text);
            StepResult::Continue
        }
        Step::Garbage => {
            // A reserved opcode (0x3) with the RSV bits set: no WebSocket peer can parse it.
            let _ = ws.flush().await;
            let _ = ws
                .get_mut()
                .write_all(&[0xF3, 0x05, b'h', b'e', b'l', b'l', b'o'])
                .await;
            let _ = ws.get_mut().flush().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            StepResult::End(Ending::BackendVanished)
        }
        Step::Vanish => StepResult::End(Ending::BackendVanished),
        Step::Close => {
            session.close();
            StepResult::Continue
        }
        Step::AwaitUtterance => StepResult::WaitUtterance(session.utterances()),
        Step::Speak { text, duration, voice } => {
            let (timbre, d) = sound_of(&text, duration, &voice);
            session.speak(now, &text, &timbre, d);
            StepResult::Continue
        }
    }
}

/// What a `speak` line sounds like, and for how long.
fn sound_of(text: &str, duration: Option<SimDuration>, voice: &SpeakVoice) -> (Timbre, SimDuration) {
    let timbre = match voice {
        SpeakVoice::Default => Timbre::default(),
        SpeakVoice::Tone(freq_hz, dbfs) => Timbre::Tone {
            freq_hz: *freq_hz,
            dbfs: *dbfs,
        },
        SpeakVoice::Wav(path) => match crate::wav::read_pcm(std::path::Path::new(path)) {
            Ok((rate, samples)) => Timbre::Pcm {
                rate,
                samples: samples.into(),
            },
            Err(e) => {
                eprintln!("backend: speak: {e:#}; speaking with the built-in voice");
                Timbre::default()
            }
        },
    };
    (timbre, duration.unwrap_or_else(|| natural_duration(text)))
}

/// Encodes every sentence of `script` into `pool` before the first device connects, so no
/// connection waits (and no runtime worker blocks) while a reply is encoded.
fn prepare_speech(spec: &BackendSpec, script: &Script, pool: &Arc<dyn CodecPool>) {
    let Some(rate) = spec.voice.as_ref().map(|v| v.tts_rate) else {
        return;
    };
    for line in (1..=3).flat_map(|n| script.steps_for(n)) {
        if let Step::Speak { text, duration, voice } = &line.step {
            let (timbre, d) = sound_of(text, *duration, voice);
            let _ = pool.speech(&timbre, d, rate);
        }
    }
}
