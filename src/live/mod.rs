//! The real-time driver: one simulated device on real sockets (docs/reference/architecture.md §2, §8).
//!
//! The device model decides everything (what to dial, which bytes to write, what to send and
//! when); this layer only maps the tokio clock onto virtual time, carries bytes, and lets the
//! device's companions act and watch: the simulated users (`--wake`, `--script`, a voice fleet's
//! talking user) and the observers (the record of `connect --report`, a fleet's counters), all
//! behind one small trait ([`Companion`]). Nothing here changes what the device does.
//!
//! One turn of the loop, in the manner of quinn's drive functions: the users act
//! (`drive_users`), what the device emits is carried (`drive_transmit`; a dial it asks for is
//! `drive_dial`), its trace is read (`drive_events`), and the driver waits for a frame, the
//! device's next timer or the stop signal (`drive_receive`). Every text frame is parsed once, by
//! the device: what it read ([`Incoming`]: its type, a request, the MCP server's receipt) is what
//! the driver and every companion read, and what it sends says what it is ([`Sent`]).
//!
//! A device an OTA answer sent to MQTT + UDP has an MQTT client and a UDP socket instead
//! (`mqtt_client.rs`): its publishes are the text frames, its datagrams the binary ones, and the same
//! companions see them.
//!
//! Files: `net.rs` the clock and the sockets, `mqtt_client.rs` the second wire, `companion.rs` the
//! trait, the users and the observers, `stats.rs` what a run leaves.

mod companion;
mod lenient;
mod mqtt_client;
mod net;
mod stats;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use xiaozhi_sim::device::Input;

use anyhow::Result;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::tungstenite::Message;
use xiaozhi_sim::device::url::Endpoint;
use xiaozhi_sim::device::{Device, Incoming, MessageType, Output, Sent};
use xiaozhi_sim::time::SimTime;

pub use companion::{Companion, Counters, Forged, Recorder, Scripted, Seen, Turn, Wake, Waker, arguments};
pub use lenient::{Kind, Lenient};
pub use mqtt_client::{Arrived, MqttEvent, MqttLink};
pub use net::{Clock, MAX_DEVICE_FRAME, Ws, dial, raw_text, read_http_head, small_ws_config};
pub use stats::{DeviceStats, Request};

/// The most characters of one frame or trace line `--verbose` prints (a 9 MB frame is one
/// line of its first 2,000 characters and its length).
const SHOWN: usize = 2_000;

/// How many unanswered requests the driver remembers for the reply latency.
const ASKED_KEPT: usize = 512;
/// How long a dial may take before it counts as failed.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The users look at the device at least this often (a `--wake every:` idle check).
const USER_CHECK: Duration = Duration::from_millis(200);

/// Options of one live device.
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
    /// The talking user of a voice fleet's device (`fleet --voice`: `crate::fleet::turns`), or
    /// any other companion of the device.
    pub companion: Option<Box<dyn Companion + Send>>,
}

impl LiveOptions {
    /// The companions these options ask for: the users first, in the order they act.
    fn companions(self) -> Vec<Box<dyn Companion + Send>> {
        let mut all: Vec<Box<dyn Companion + Send>> = Vec::new();
        if let Some(lines) = self.script {
            all.push(Box::new(Scripted::new(lines, self.verbose, self.label)));
        }
        all.extend(self.companion);
        if self.wake != Wake::Manual {
            all.push(Box::new(Waker::new(self.wake)));
        }
        if self.record {
            all.push(Box::new(Recorder::default()));
        }
        if let Some(c) = self.counters {
            all.push(Box::new(c));
        }
        all
    }
}

/// Runs `device` against the network until `duration` (or forever).
pub async fn run_device(device: Device, opts: LiveOptions) -> Result<(Device, DeviceStats)> {
    let mut live = Live::new(device, opts);
    live.run().await;
    Ok(live.finish())
}

/// One live device, its socket and its companions.
struct Live {
    device: Device,
    clock: Clock,
    ws: Option<Ws>,
    /// The MQTT client and UDP socket of a device on the second wire.
    mqtt: MqttLink,
    companions: Vec<Box<dyn Companion + Send>>,
    stats: DeviceStats,
    /// MCP requests that arrived and are not answered yet: id → when (wall).
    /// Requests in, by id, waiting for their replies (for the reply latency).
    asked: BTreeMap<i32, Instant>,
    stop_at: Option<Instant>,
    stop: Option<watch::Receiver<bool>>,
    verbose: bool,
    label: String,
}

impl Live {
    fn new(device: Device, opts: LiveOptions) -> Live {
        let clock = Clock::new(device.now());
        Live {
            clock,
            ws: None,
            mqtt: MqttLink::new(device.spec().target.free_heap),
            stats: DeviceStats::default(),
            asked: BTreeMap::new(),
            stop_at: opts.duration.map(|d| Instant::now() + d),
            stop: opts.stop.clone(),
            verbose: opts.verbose,
            label: opts.label.clone(),
            device,
            companions: opts.companions(),
        }
    }

    async fn run(&mut self) {
        // One timer for the whole run, moved rather than made anew on every wake.
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        loop {
            let now = self.clock.now();
            self.device.run_until(now);
            self.drive_users(now);
            self.drive_forged().await;
            self.device.run_until(now);
            if let Some((endpoint, request)) = self.drive_transmit().await {
                self.drive_dial(&endpoint, &request).await;
                continue;
            }
            if self.stopping() {
                break;
            }
            self.drive_events();
            let until = self.next_wake();
            if timer.deadline() != until {
                timer.as_mut().reset(until);
            }
            self.drive_receive(timer.as_mut()).await;
        }
    }

    fn finish(mut self) -> (Device, DeviceStats) {
        self.drop_socket();
        self.mqtt.close(false);
        self.mqtt.close_udp();
        self.stats.boots = self.device.boots();
        for c in &mut self.companions {
            c.finish(&mut self.stats);
        }
        (self.device, self.stats)
    }

    /// Tells every companion.
    fn tell(&mut self, what: Seen<'_>) {
        for c in &mut self.companions {
            c.seen(&what, &self.device);
        }
    }

    fn drive_users(&mut self, now: SimTime) {
        let turn = Turn {
            now,
            clock: &self.clock,
            open: self.ws.is_some() || self.mqtt.udp_open(),
        };
        for c in &mut self.companions {
            c.act(&mut self.device, &turn);
        }
    }

    /// Sends what the companions forged, from a socket that is not the device's.
    async fn drive_forged(&mut self) {
        let forged: Vec<Forged> = self.companions.iter_mut().flat_map(|c| c.forged()).collect();
        for (host, port, datagram) in forged {
            let sent = async {
                let socket = tokio::net::UdpSocket::bind(("0.0.0.0", 0)).await?;
                socket.send_to(&datagram, (host.as_str(), port)).await
            };
            if let Err(e) = sent.await
                && self.verbose
            {
                crate::errln!("[{}] forge to {host}:{port}: {e}", self.label);
            }
        }
    }

    /// Carries what the device emits; returns the dial it asked for, if any.
    async fn drive_transmit(&mut self) -> Option<(Endpoint, Vec<u8>)> {
        let mut dial = None;
        while let Some(out) = self.device.poll_output() {
            match out {
                Output::WsOpen { endpoint, request, .. } => {
                    self.drop_socket();
                    dial = Some((endpoint, request));
                }
                Output::WsText { text, sent, at } => self.send_text(at, sent, text).await,
                Output::WsClose { .. } => self.device_closed(),
                Output::WsBinary { frame, .. } => self.send_binary(frame).await,
                Output::MqttConnect { dial, .. } => self.mqtt_connect(&dial),
                Output::MqttPublish {
                    topic,
                    payload,
                    sent,
                    at,
                } => self.publish(at, &topic, sent, payload),
                Output::MqttClose { disconnect, .. } => {
                    let was = self.mqtt.connected();
                    self.mqtt.close(disconnect);
                    if was {
                        self.tell(Seen::Dropped);
                    }
                }
                Output::UdpOpen { host, port, .. } => {
                    if let Err(e) = self.mqtt.open_udp(&host, port).await
                        && self.verbose
                    {
                        crate::errln!("[{}] UDP socket to {host}:{port}: {e}", self.label);
                    }
                }
                Output::UdpSend { datagram, .. } => {
                    self.stats.binary_out += 1;
                    if self.mqtt.send_udp(&datagram).await {
                        self.tell(Seen::MicSent);
                    }
                }
                Output::UdpClose { .. } => {
                    if self.mqtt.udp_open() {
                        self.mqtt.close_udp();
                        self.tell(Seen::Closed);
                    }
                }
                // The conformance recorder's direct link: nothing to carry.
                Output::Mcp { .. } | Output::Control { .. } => {}
            }
        }
        dial
    }

    /// Tells the companions of a text the device sends (what it is, as the device says: the
    /// text is not parsed); whether a link is there to carry it.
    fn sending(&mut self, at: SimTime, sent: Sent, text: &[u8], linked: bool) -> bool {
        self.tell(Seen::Sent { at, sent: &sent, text });
        if !linked {
            return false;
        }
        self.stats.frames_out += 1;
        if let Sent::Reply { id, .. } = sent
            && let Some(asked) = self.asked.remove(&id)
        {
            self.tell(Seen::Replied(asked.elapsed()));
        }
        if self.verbose {
            crate::errln!(
                "[{}] → {}",
                self.label,
                crate::out::elide(&String::from_utf8_lossy(text), SHOWN)
            );
        }
        true
    }

    async fn send_text(&mut self, at: SimTime, sent: Sent, text: Vec<u8>) {
        if !self.sending(at, sent, &text, self.ws.is_some()) {
            return;
        }
        if let Some(sock) = self.ws.as_mut()
            && sock.send(raw_text(text)).await.is_err()
        {
            self.lost(self.clock.now());
        }
    }

    /// A publish to `publish_topic` (the model publishes only on a connected client; one the
    /// network loses meanwhile is reported by the client's end).
    fn publish(&mut self, at: SimTime, topic: &str, sent: Sent, payload: Vec<u8>) {
        if self.sending(at, sent, &payload, self.mqtt.connected()) && !self.mqtt.publish(topic, payload) && self.verbose
        {
            crate::errln!("[{}] the MQTT client did not take the publish", self.label);
        }
    }

    /// Starts the MQTT client the device asked for.
    fn mqtt_connect(&mut self, dial: &xiaozhi_sim::provisioning::MqttDial) {
        self.stats.connects += 1;
        if let Err(why) = self.mqtt.connect(dial) {
            self.mqtt_connected(false, &why);
        }
    }

    /// The MQTT connect ended.
    fn mqtt_connected(&mut self, ok: bool, why: &str) {
        self.stats.connect_failures += u64::from(!ok);
        if !ok && self.verbose {
            crate::errln!("[{}] MQTT connect failed: {why}", self.label);
        }
        self.device
            .handle(self.clock.now(), Input::MqttConnack { accepted: ok });
        self.tell(Seen::Dialled(ok));
    }

    async fn send_binary(&mut self, frame: Vec<u8>) {
        let Some(sock) = self.ws.as_mut() else { return };
        self.stats.binary_out += 1;
        if sock.send(Message::Binary(frame.into())).await.is_err() {
            self.lost(self.clock.now());
        } else {
            self.tell(Seen::MicSent);
        }
    }

    /// The device closed TCP (a reboot: no close frame).
    fn device_closed(&mut self) {
        self.tell(Seen::Closed);
        if self.drop_socket() {
            self.stats.closes += 1;
            if self.verbose {
                crate::errln!("[{}] TCP closed by the device (no close frame)", self.label);
            }
        }
    }

    async fn drive_dial(&mut self, endpoint: &Endpoint, request: &[u8]) {
        self.stats.connects += 1;
        let ok = match tokio::time::timeout(DIAL_TIMEOUT, dial(endpoint, request)).await {
            Ok(Ok(sock)) => {
                self.ws = Some(sock);
                true
            }
            Ok(Err(e)) => {
                if self.verbose {
                    crate::errln!("[{}] connect failed: {e:#}", self.label);
                }
                false
            }
            Err(_) => false,
        };
        self.stats.connect_failures += u64::from(!ok);
        self.device.handle(self.clock.now(), Input::WsOpened { ok });
        self.tell(Seen::Dialled(ok));
    }

    fn stopping(&self) -> bool {
        self.stop_at.is_some_and(|t| Instant::now() >= t) || self.stop.as_ref().is_some_and(|s| *s.borrow())
    }

    fn drive_events(&mut self) {
        for e in self.device.drain_events() {
            self.tell(Seen::Traced(&e));
            if self.verbose {
                crate::errln!("[{}] {}", self.label, crate::out::elide(&e.to_string(), SHOWN));
            }
        }
    }

    /// The device's next timer, the users' next look, or the end of the run.
    fn next_wake(&self) -> Instant {
        let next = self.device.poll_timeout().map(|t| self.clock.instant(t));
        let check = Instant::now() + USER_CHECK;
        let until = next.map_or(check, |n| n.min(check));
        self.stop_at.map_or(until, |s| until.min(s))
    }

    /// Waits for a frame, a message or a datagram, the timer or the stop signal; hands what came
    /// to the device.
    async fn drive_receive(&mut self, timer: Pin<&mut Sleep>) {
        let msg = tokio::select! {
            msg = next_frame(self.ws.as_mut()) => msg,
            arrived = self.mqtt.next() => return self.arrived(arrived),
            _ = timer => return,
            _ = stop_signal(&mut self.stop) => return,
        };
        let now = self.clock.now();
        match msg {
            // Text frames arrive as binary, their kind kept aside (`Lenient`): the firmware
            // reads a text frame's bytes without checking their UTF-8.
            Some(Ok(Message::Text(t))) => self.receive_text(now, t.as_bytes(), false),
            Some(Ok(Message::Binary(b))) => match self.ws.as_mut().map(|w| w.get_mut().next_kind()) {
                Some(Kind::Text) => self.receive_text(now, &b, false),
                _ => {
                    self.stats.binary_in += 1;
                    self.device.handle(now, Input::WsBinary(&b));
                    self.tell(Seen::AudioIn);
                }
            },
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Ok(Message::Close(_)) | Err(_)) | None => self.lost(now),
        }
    }

    /// What the MQTT client or the UDP socket brought.
    fn arrived(&mut self, arrived: Arrived) {
        let now = self.clock.now();
        match arrived {
            Arrived::Mqtt(MqttEvent::ConnAck(ok, why)) => self.mqtt_connected(ok, &why),
            Arrived::Mqtt(MqttEvent::Message(payload)) => self.receive_text(now, &payload, true),
            Arrived::Mqtt(MqttEvent::Closed(why)) => {
                if self.verbose {
                    crate::errln!("[{}] MQTT connection lost: {why}", self.label);
                }
                self.device.handle(now, Input::MqttClosed);
                self.tell(Seen::Dropped);
            }
            Arrived::Datagram(n) => {
                self.stats.binary_in += 1;
                self.device.handle(now, Input::Udp(self.mqtt.datagram(n)));
                self.tell(Seen::AudioIn);
            }
        }
    }

    /// A text frame, or an MQTT message (`mqtt`), for the device.
    fn receive_text(&mut self, now: SimTime, text: &[u8], mqtt: bool) {
        self.stats.frames_in += 1;
        if self.verbose {
            crate::errln!(
                "[{}] ← {}",
                self.label,
                crate::out::elide(&String::from_utf8_lossy(text), SHOWN)
            );
        }
        let arrived = Instant::now();
        let read: Incoming = if mqtt {
            self.device.handle(now, Input::MqttMessage(text))
        } else {
            self.device.handle(now, Input::WsText(text))
        };
        self.stats.hellos += u64::from(read.message == MessageType::Hello);
        if let Some(id) = read.reply_id() {
            // Requests the device never answers (a reboot's, a dropped one) are forgotten, oldest
            // first, once more than a few hundred wait: a long `connect` stays small.
            if self.asked.len() >= ASKED_KEPT
                && let Some(oldest) = self.asked.iter().min_by_key(|(_, at)| **at).map(|(id, _)| *id)
            {
                self.asked.remove(&oldest);
            }
            self.asked.insert(id, arrived);
        }
        self.tell(Seen::Received {
            at: now,
            text,
            read: &read,
        });
    }

    /// The socket is gone under the device (the server closed it, or a read or write failed).
    fn lost(&mut self, now: SimTime) {
        self.drop_socket();
        self.device.handle(now, Input::WsClosed);
        self.tell(Seen::Closed);
    }

    /// Drops the WebSocket; whether one was open.
    fn drop_socket(&mut self) -> bool {
        let open = self.ws.take().is_some();
        if open {
            self.tell(Seen::Dropped);
        }
        open
    }
}

/// The next frame of the WebSocket, or never without one.
async fn next_frame(ws: Option<&mut Ws>) -> Option<Result<Message, tokio_tungstenite::tungstenite::Error>> {
    match ws {
        Some(sock) => sock.next().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the stop signal changes (never without one).
async fn stop_signal(stop: &mut Option<watch::Receiver<bool>>) {
    match stop {
        Some(s) => {
            if s.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}
