//! The real-time driver: one simulated device on real sockets (DESIGN.md §2, §8).
//!
//! The device model decides everything (what to dial, which bytes to write, what to send and
//! when); this layer only maps the tokio clock onto virtual time, carries bytes, and plays the
//! user who presses the button (`--wake`). Nothing here changes what the device does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use xiaozhi_sim::device::url::Endpoint;
use xiaozhi_sim::device::{Device, DeviceState, Output};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::voice::codec::MIC_RATE;

/// Virtual time that follows the wall clock from a starting instant.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    offset: SimTime,
}

impl Clock {
    pub fn new(offset: SimTime) -> Self {
        Clock {
            start: Instant::now(),
            offset,
        }
    }
    pub fn now(&self) -> SimTime {
        self.offset + SimDuration::from_micros(self.start.elapsed().as_micros() as u64)
    }
    pub fn instant(&self, t: SimTime) -> Instant {
        self.start + Duration::from_micros(t.saturating_since(self.offset).as_micros())
    }
}

/// When the simulated user opens the audio channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// After every boot, once the device is idle (the default: unattended runs keep going).
    OnBoot,
    /// Never by itself.
    Manual,
    /// Whenever the device has been idle with the channel closed for this long.
    Every(SimDuration),
}

impl std::str::FromStr for Wake {
    type Err = String;
    fn from_str(s: &str) -> Result<Wake, String> {
        match s {
            "on-boot" => Ok(Wake::OnBoot),
            "manual" => Ok(Wake::Manual),
            _ => match s.strip_prefix("every:") {
                Some(d) => xiaozhi_sim::time::parse_duration(d).map(Wake::Every),
                None => Err(format!(
                    "--wake `{s}`: use on-boot, manual or every:<duration> (e.g. every:30s)"
                )),
            },
        }
    }
}

/// Socket buffers sized for thousands of devices per process.
pub fn small_ws_config(max_message: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
}

type Ws = WebSocketStream<TcpStream>;

/// esp-ml307's client handshake: write the device's exact request bytes, read the response
/// header block, succeed iff it contains `HTTP/1.1 101`.
pub async fn dial(endpoint: &Endpoint, request: &[u8], max_message: usize) -> Result<Ws> {
    if endpoint.tls {
        bail!("wss:// is not supported by the twin (ws:// only)");
    }
    let mut stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .with_context(|| format!("connect {}:{}", endpoint.host, endpoint.port))?;
    let _ = stream.set_nodelay(true);
    stream.write_all(request).await?;
    let (head, end) = read_http_head(&mut stream).await.context("handshake response")?;
    let header = String::from_utf8_lossy(&head[..end]);
    if !header.contains("HTTP/1.1 101") {
        bail!("handshake refused: {}", header.lines().next().unwrap_or_default());
    }
    let leftover = head[end..].to_vec();
    Ok(WebSocketStream::from_partially_read(stream, leftover, Role::Client, Some(small_ws_config(max_message))).await)
}

/// Reads an HTTP header block (up to 16 KiB); returns the bytes read and the end of the block
/// (bytes after it already belong to the WebSocket stream).
pub async fn read_http_head(stream: &mut TcpStream) -> Result<(Vec<u8>, usize)> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("the peer closed before the end of the header");
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((head, i + 4));
        }
        if head.len() > 16 * 1024 {
            bail!("header larger than 16 KiB");
        }
    }
}

/// A text frame with any payload bytes (the firmware does not check its own UTF-8).
pub fn raw_text(bytes: Vec<u8>) -> Message {
    match String::from_utf8(bytes) {
        Ok(s) => Message::text(s),
        Err(e) => Message::Frame(Frame::message(e.into_bytes(), OpCode::Data(Data::Text), true)),
    }
}

/// What happened to a live device (for reports and the fleet summary).
#[derive(Clone, Debug, Default)]
pub struct DeviceStats {
    pub connects: u64,
    pub connect_failures: u64,
    pub hellos: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub binary_in: u64,
    pub binary_out: u64,
    pub boots: u32,
    pub closes: u64,
    /// With `record`: state transitions (ms, from, to).
    pub transitions: Vec<(f64, String, String)>,
    /// With `record`: `listen`/`abort` messages the device sent (ms, text).
    pub control_out: Vec<(f64, String)>,
    /// With `record`: MCP requests that arrived.
    pub requests_in: Vec<Request>,
    /// With `record`: MCP replies the device sent (ms, id, `content[0].text`).
    pub replies_out: Vec<(f64, Option<i64>, Option<String>)>,
    /// With a script: what the user did (ms, line, action).
    pub user: Vec<(f64, usize, String)>,
}

/// An MCP request that arrived at a live device.
#[derive(Clone, Debug)]
pub struct Request {
    pub at_ms: f64,
    pub method: String,
    /// `params.name` (`tools/call`).
    pub tool: Option<String>,
    pub arguments: Option<serde_json::Value>,
    pub id: Option<i64>,
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}

/// Carries out one user action on the device; returns how long it takes (a `say` lasts as
/// long as its audio, a `wait` its duration) and how it is shown.
fn act(device: &mut Device, now: SimTime, action: &crate::user::Action) -> (Duration, String) {
    use crate::user::Action;
    match action {
        Action::Wait(d) => (*d, format!("wait {d:?}")),
        Action::Wake(w) => {
            device.wake_word(now, w);
            (Duration::ZERO, format!("wake {w}"))
        }
        Action::Say(pcm, file) => {
            device.say(now, pcm);
            let d = Duration::from_micros(pcm.len() as u64 * 1_000_000 / u64::from(MIC_RATE));
            (d, format!("say {file} ({:.2} s)", d.as_secs_f64()))
        }
        Action::Type(t) => {
            device.type_text(now, t);
            (
                Duration::ZERO,
                format!("typed input {t:?} (listen detect, as py-xiaozhi; not firmware behaviour)"),
            )
        }
        Action::Abort => {
            device.toggle_chat(now);
            (Duration::ZERO, "abort (BOOT click)".into())
        }
        Action::Press { button, long } => {
            device.press_button(now, button, *long);
            (
                Duration::ZERO,
                format!("press {button}{}", if *long { " long" } else { "" }),
            )
        }
    }
}

/// Counters shared by the devices of a fleet (read by the progress bar).
#[derive(Debug, Default)]
pub struct Counters {
    /// Devices whose WebSocket is open right now.
    pub open: AtomicU64,
    /// Server hellos received.
    pub hellos: AtomicU64,
    /// MCP replies sent.
    pub replies: AtomicU64,
    /// Request-in to reply-out times on the device, in microseconds.
    pub reply_us: Mutex<Vec<u32>>,
}

/// Options of one live device.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub wake: Wake,
    /// Stop after this long (None: run until Ctrl-C).
    pub duration: Option<Duration>,
    /// Print device trace events to stderr.
    pub verbose: bool,
    pub label: String,
    /// Stops the device when it turns true.
    pub stop: Option<watch::Receiver<bool>>,
    /// Fleet counters.
    pub counters: Option<Arc<Counters>>,
    /// The simulated user's timed actions (`connect --script`).
    pub script: Option<Vec<crate::user::Line>>,
    /// Keep state transitions, control messages and requests for a report.
    pub record: bool,
    /// Voice turns of a fleet device (`fleet --voice`): the plan and the fleet's counters.
    pub turns: Option<(Arc<crate::fleet::turns::Plan>, Arc<crate::fleet::turns::Metrics>)>,
}

/// The `id` of an MCP request (`method` present) or reply inside a xiaozhi frame.
fn mcp_id(frame: &[u8], request: bool) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(frame).ok()?;
    let p = v.get("payload")?;
    if p.get("method").is_some() != request {
        return None;
    }
    p.get("id")?.as_i64()
}

/// Runs `device` against the network until `duration` (or forever).
pub async fn run_device(mut device: Device, opts: LiveOptions) -> Result<(Device, DeviceStats)> {
    let clock = Clock::new(device.now());
    let mut stats = DeviceStats::default();
    let mut ws: Option<Ws> = None;
    let mut pending_dial: Option<(Endpoint, Vec<u8>)> = None;
    let stop_at = opts.duration.map(|d| Instant::now() + d);
    let mut woke_for_boot = 0u32;
    let mut idle_since: Option<SimTime> = None;
    let max_message = device.spec().target.free_heap;
    let mut asked: BTreeMap<i64, Instant> = BTreeMap::new();
    let mut stop = opts.stop.clone();
    let counters = opts.counters.clone();
    let set_open = |open: bool| {
        if let Some(c) = &counters {
            if open {
                c.open.fetch_add(1, Ordering::Relaxed);
            } else {
                c.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    };
    let mut script_at = 0usize;
    let mut script_next = Instant::now();
    // One timer for the whole run, moved rather than made anew on every wake.
    let timer = tokio::time::sleep_until(Instant::now());
    tokio::pin!(timer);
    let mut driver = opts
        .turns
        .as_ref()
        .map(|(plan, metrics)| crate::fleet::turns::Driver::new(plan.clone(), metrics.clone()));
    loop {
        let now = clock.now();
        device.run_until(now);
        // The scripted user.
        if let Some(lines) = &opts.script {
            while script_at < lines.len() && Instant::now() >= script_next {
                let line = &lines[script_at];
                script_at += 1;
                let now = clock.now();
                let (takes, shown) = act(&mut device, now, &line.action);
                if opts.verbose {
                    eprintln!("[{}] user (line {}): {shown}", opts.label, line.line);
                }
                stats.user.push((ms(now), line.line, shown));
                script_next = Instant::now() + takes;
            }
        }
        // The fleet's talking user.
        if let Some(d) = driver.as_mut() {
            d.tick(&mut device, now, ws.is_some());
        }
        // The simulated user.
        let state = device.state();
        let channel_down = ws.is_none() && pending_dial.is_none();
        match opts.wake {
            Wake::OnBoot
                if device.is_running()
                    && state == Some(DeviceState::Idle)
                    && woke_for_boot < device.boots()
                    && channel_down =>
            {
                woke_for_boot = device.boots();
                device.toggle_chat(now);
            }
            Wake::Every(d) if state == Some(DeviceState::Idle) && channel_down => match idle_since {
                Some(t) if now.saturating_since(t) >= d => {
                    idle_since = None;
                    device.toggle_chat(now);
                }
                None => idle_since = Some(now),
                _ => {}
            },
            _ => {}
        }
        device.run_until(now);
        // Carry what the device emits.
        while let Some(out) = device.poll_output() {
            match out {
                Output::WsOpen { endpoint, request, .. } => {
                    if ws.take().is_some() {
                        set_open(false);
                    }
                    pending_dial = Some((endpoint, request));
                }
                Output::WsText { text, at } => {
                    if opts.record
                        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
                        && matches!(v["type"].as_str(), Some("listen" | "abort"))
                    {
                        stats
                            .control_out
                            .push((ms(at), String::from_utf8_lossy(&text).into_owned()));
                    }
                    if opts.record
                        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
                        && v["type"] == "mcp"
                        && v["payload"].get("method").is_none()
                    {
                        let p = &v["payload"];
                        let text = p["result"]["content"][0]["text"].as_str().map(str::to_string);
                        stats.replies_out.push((ms(at), p["id"].as_i64(), text));
                    }
                    if let Some(d) = driver.as_mut()
                        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
                    {
                        d.text_sent(&v);
                    }
                    if let Some(sock) = ws.as_mut() {
                        stats.frames_out += 1;
                        if let Some(c) = &opts.counters
                            && let Some(at) = mcp_id(&text, false).and_then(|id| asked.remove(&id))
                        {
                            if let Some(d) = driver.as_ref() {
                                d.mcp_reply(at.elapsed());
                            }
                            c.replies.fetch_add(1, Ordering::Relaxed);
                            let us = at.elapsed().as_micros().min(u32::MAX as u128) as u32;
                            c.reply_us.lock().unwrap_or_else(|e| e.into_inner()).push(us);
                        }
                        if opts.verbose {
                            eprintln!("[{}] → {}", opts.label, String::from_utf8_lossy(&text));
                        }
                        if sock.send(raw_text(text)).await.is_err() {
                            ws = None;
                            set_open(false);
                            device.handle_ws_closed(clock.now());
                            if let Some(d) = driver.as_mut() {
                                d.closed();
                            }
                        }
                    }
                }
                Output::WsClose { .. } => {
                    if let Some(d) = driver.as_mut() {
                        d.closed();
                    }
                    if ws.take().is_some() {
                        set_open(false);
                        stats.closes += 1;
                        if opts.verbose {
                            eprintln!("[{}] TCP closed by the device (no close frame)", opts.label);
                        }
                    }
                }
                Output::WsBinary { frame, .. } => {
                    stats.binary_out += u64::from(ws.is_some());
                    if let Some(sock) = ws.as_mut() {
                        if sock.send(Message::Binary(frame.into())).await.is_err() {
                            ws = None;
                            set_open(false);
                            device.handle_ws_closed(clock.now());
                            if let Some(d) = driver.as_mut() {
                                d.closed();
                            }
                        } else if let Some(d) = driver.as_mut() {
                            d.mic_frame_sent(&device);
                        }
                    }
                }
                Output::Mcp { .. } | Output::Control { .. } => {}
            }
        }
        if let Some((endpoint, request)) = pending_dial.take() {
            stats.connects += 1;
            let deadline = Duration::from_secs(10);
            match tokio::time::timeout(deadline, dial(&endpoint, &request, max_message)).await {
                Ok(Ok(sock)) => {
                    ws = Some(sock);
                    set_open(true);
                    device.handle_ws_open_result(clock.now(), true);
                    if let Some(d) = driver.as_mut() {
                        d.connected(true);
                    }
                }
                Ok(Err(e)) => {
                    stats.connect_failures += 1;
                    if opts.verbose {
                        eprintln!("[{}] connect failed: {e:#}", opts.label);
                    }
                    device.handle_ws_open_result(clock.now(), false);
                    if let Some(d) = driver.as_mut() {
                        d.connected(false);
                    }
                }
                Err(_) => {
                    stats.connect_failures += 1;
                    device.handle_ws_open_result(clock.now(), false);
                    if let Some(d) = driver.as_mut() {
                        d.connected(false);
                    }
                }
            }
            continue;
        }
        if stop_at.is_some_and(|t| Instant::now() >= t) || stop.as_ref().is_some_and(|s| *s.borrow()) {
            break;
        }
        for e in device.drain_events() {
            if opts.record
                && let xiaozhi_sim::trace::Event::StateChanged { from, to } = &e.kind
            {
                stats.transitions.push((ms(e.at), from.to_string(), to.to_string()));
            }
            if opts.verbose {
                eprintln!("[{}] {e}", opts.label);
            }
        }
        let next = device.poll_timeout().map(|t| clock.instant(t));
        let wake_check = Instant::now() + Duration::from_millis(200);
        let mut until = next.map_or(wake_check, |n| n.min(wake_check));
        if let Some(s) = stop_at {
            until = until.min(s);
        }
        if timer.deadline() != until {
            timer.as_mut().reset(until);
        }
        match ws.as_mut() {
            Some(sock) => {
                tokio::select! {
                    msg = sock.next() => {
                        let now = clock.now();
                        match msg {
                            Some(Ok(Message::Text(t))) => {
                                stats.frames_in += 1;
                                if opts.verbose {
                                    eprintln!("[{}] ← {}", opts.label, t.as_str());
                                }
                                if t.as_str().contains("\"hello\"") {
                                    stats.hellos += 1;
                                    if let Some(c) = &opts.counters {
                                        c.hellos.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                                if opts.counters.is_some()
                                    && let Some(id) = mcp_id(t.as_bytes(), true) {
                                        asked.insert(id, Instant::now());
                                    }
                                if opts.record
                                    && let Ok(v) = serde_json::from_str::<serde_json::Value>(t.as_str())
                                    && let Some(m) = v["payload"]["method"].as_str()
                                {
                                    let p = &v["payload"]["params"];
                                    stats.requests_in.push(Request {
                                        at_ms: ms(now),
                                        method: m.to_string(),
                                        tool: p["name"].as_str().map(str::to_string),
                                        arguments: p.get("arguments").cloned(),
                                        id: v["payload"]["id"].as_i64(),
                                    });
                                }
                                device.handle_ws_text(now, t.as_bytes());
                                if let Some(d) = driver.as_mut()
                                    && let Ok(v) = serde_json::from_str::<serde_json::Value>(t.as_str())
                                {
                                    d.text_in(&v, &device);
                                }
                            }
                            Some(Ok(Message::Binary(b))) => {
                                stats.binary_in += 1;
                                device.handle_ws_binary(now, &b);
                                if let Some(d) = driver.as_mut() {
                                    d.audio_in();
                                }
                            }
                            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                                ws = None;
                                set_open(false);
                                device.handle_ws_closed(now);
                                if let Some(d) = driver.as_mut() {
                                    d.closed();
                                }
                            }
                        }
                    }
                    _ = &mut timer => {}
                    _ = stopped(&mut stop) => {}
                }
            }
            None => {
                tokio::select! {
                    _ = &mut timer => {}
                    _ = stopped(&mut stop) => {}
                }
            }
        }
    }
    if ws.take().is_some() {
        set_open(false);
    }
    stats.boots = device.boots();
    Ok((device, stats))
}

/// Resolves when the stop signal changes (never without one).
async fn stopped(stop: &mut Option<watch::Receiver<bool>>) {
    match stop {
        Some(s) => {
            if s.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}
