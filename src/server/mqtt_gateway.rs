//! The backend's second wire (docs/reference/mqtt.md §5, §7): a stand-in of xiaozhi-mqtt-gateway
//! in front of the built-in server, on real sockets. Its own MQTT 3.1.1 server on TCP (packets
//! read and written with rumqttc's codec, `rumqttc::mqttbytes`), one UDP socket for every
//! device's audio, and for each device the sans-IO [`GatewayConn`]; the gateway's WebSocket
//! "bridge" to the chat server is the built-in server's session itself, in process (the same
//! [`Open`] a WebSocket connection has), so reports, scripts, stdin commands and faults are the
//! same on both wires.
//!
//! What is the gateway's and not a broker's: it delivers to `devices/p2p/<mac_>` without any
//! SUBSCRIBE (acked and ignored), sends CONNACK before it checks the password, runs MCP itself
//! at CONNECT, closes a connection whose packet is longer than `max_mqtt_payload_size` (8192) or
//! of a type it does not handle, and routes datagrams by their ssrc alone.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use rumqttc::mqttbytes::{self, QoS};
use rumqttc::{ConnAck, ConnectReturnCode, Packet, Publish, SubAck, SubscribeReasonCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use xiaozhi_sim::backend::gateway::{GatewayAction, GatewayConfig, GatewayConn, connection_id, route};
use xiaozhi_sim::backend::script::Command;
use xiaozhi_sim::backend::scripted::ScriptedAction;
use xiaozhi_sim::fault::{UdpFaults, UdpPath};

use super::{Ending, Open, Server};

/// The gateway's default `max_mqtt_payload_size` (`mqtt-protocol.js:56`): a whole packet longer
/// than this closes the connection.
pub const MAX_MQTT_PACKET: usize = 8192;

/// The gateway's settings on this machine.
#[derive(Clone, Debug)]
pub struct MqttWire {
    /// The sans-IO gateway's settings (signature key, the `udp.server`/`udp.port` it hands out,
    /// the tool cache's size, the chat server's URL).
    pub gateway: GatewayConfig,
    /// `max_mqtt_payload_size`.
    pub max_packet: usize,
    /// Set TCP_NODELAY on each device's connection. The gateway does not (`net.createServer`
    /// leaves Nagle's algorithm on), so a small publish written while an earlier one is unacked
    /// waits for the device's ACK (docs/reference/mqtt.md §7).
    pub nodelay: bool,
    /// What the network does to the datagrams, both ways (each connection and direction its
    /// own seeded stream; docs/reference/mqtt.md §6).
    pub udp_faults: UdpFaults,
}

/// The receive buffer asked for on the gateway's UDP socket: every device's microphone arrives
/// there (16.7 datagrams a second each while it listens), so the kernel's default (208 KiB here)
/// overflows with a few thousand devices. The kernel caps it at `net.core.rmem_max`.
const UDP_RECV_BUFFER: usize = 32 << 20;

/// The gateway's UDP socket on `addr`, with a large receive buffer.
pub fn bind_udp(addr: std::net::SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: a smaller buffer still works, it only drops sooner under load.
    let _ = socket.set_recv_buffer_size(UDP_RECV_BUFFER);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

/// Datagrams for each live connection, by its connection id (the ssrc).
type Routes = Mutex<HashMap<u32, mpsc::UnboundedSender<(SocketAddr, Vec<u8>)>>>;

/// Accepts devices on `listener` and carries every device's audio on `udp` until `stop` turns
/// true.
pub async fn serve_mqtt(
    listener: TcpListener,
    udp: UdpSocket,
    wire: MqttWire,
    server: Arc<Server>,
    stop: watch::Receiver<bool>,
) {
    let udp = Arc::new(udp);
    let routes: Arc<Routes> = Arc::default();
    let wire = Arc::new(wire);
    let mut tasks = JoinSet::new();
    tasks.spawn(route_datagrams(udp.clone(), routes.clone(), stop.clone()));
    let mut stop_accept = stop.clone();
    let mut n = 0u64;
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    if wire.nodelay {
                        let _ = stream.set_nodelay(true);
                    }
                    n += 1;
                    let id = connection_id(n);
                    let (tx, rx) = mpsc::unbounded_channel();
                    routes.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
                    let link = Link::new(&server, &wire, &udp, peer, id, n);
                    let routes = routes.clone();
                    let stop = stop.clone();
                    tasks.spawn(async move {
                        link.run(stream, rx, stop).await;
                        routes.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    });
                }
                Err(e) => {
                    if server.verbose {
                        crate::errln!("backend: MQTT accept failed: {e}");
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

/// The gateway's UDP server (`onUdpMessage`): a datagram goes to the connection its ssrc names;
/// one shorter than the header, not type 1 or shorter than its length is dropped first.
async fn route_datagrams(udp: Arc<UdpSocket>, routes: Arc<Routes>, mut stop: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 2048];
    loop {
        let (len, from) = tokio::select! {
            r = udp.recv_from(&mut buf) => match r {
                Ok(x) => x,
                // An ICMP error for an earlier send (a device that went away): keep serving.
                Err(_) => continue,
            },
            _ = stop.changed() => return,
        };
        let datagram = &buf[..len];
        if let Some(id) = route(datagram)
            && let Some(tx) = routes.lock().unwrap_or_else(|e| e.into_inner()).get(&id)
        {
            let _ = tx.send((from, datagram.to_vec()));
        }
    }
}

/// One device's MQTT connection through the gateway, and the bridge's backend session.
struct Link {
    server: Arc<Server>,
    wire: Arc<MqttWire>,
    udp: Arc<UdpSocket>,
    peer: SocketAddr,
    gateway: GatewayConn,
    bridge: Option<Open>,
    /// Bridges that ended in this round, reported to the server once the round's packets are
    /// written: the goodbye a closed bridge sends the device goes out before the connection
    /// counts as ended (with `--connections N` the backend may stop on that count).
    ended: Vec<(Open, Ending)>,
    /// The UDP addresses datagrams came from, as the gateway's address tokens (index + 1).
    addrs: Vec<SocketAddr>,
    /// The packet being written (each is written as soon as it is made, as the gateway's
    /// `socket.write` per packet does: with Nagle on, that is what makes a second small publish
    /// wait for an ACK).
    out: BytesMut,
    /// A CONNECT has come (the gateway ends a connection whose first packet is not one).
    connected: bool,
    /// The network between the gateway and the device: to it, and from it.
    down: UdpPath,
    up: UdpPath,
}

/// How a round ended the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Over {
    /// The gateway closed it (a bad password or client id, a protocol error, the keepalive).
    Closed,
    /// The device's TCP connection is gone.
    Gone,
    /// The backend stopped.
    Shutdown,
}

impl Link {
    fn new(
        server: &Arc<Server>,
        wire: &Arc<MqttWire>,
        udp: &Arc<UdpSocket>,
        peer: SocketAddr,
        id: u32,
        n: u64,
    ) -> Link {
        Link {
            server: server.clone(),
            wire: wire.clone(),
            udp: udp.clone(),
            peer,
            gateway: GatewayConn::new(wire.gateway.clone(), id, n),
            bridge: None,
            ended: Vec::new(),
            addrs: Vec::new(),
            out: BytesMut::with_capacity(1024),
            connected: false,
            down: UdpPath::new(wire.udp_faults.reseeded(2 * n)),
            up: UdpPath::new(wire.udp_faults.reseeded(2 * n + 1)),
        }
    }

    async fn run(
        mut self,
        stream: TcpStream,
        mut datagrams: mpsc::UnboundedReceiver<(SocketAddr, Vec<u8>)>,
        mut stop: watch::Receiver<bool>,
    ) {
        let (mut reader, mut writer) = stream.into_split();
        let mut commands = self.server.commands.subscribe();
        let mut inbuf = BytesMut::with_capacity(4096);
        let clock = self.server.clock;
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let over = loop {
            if let Some(over) = self.apply(&mut writer).await {
                break over;
            }
            let next = [
                self.gateway.poll_timeout(),
                self.bridge.as_ref().and_then(|b| b.backend.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let sleep = next.map_or_else(|| Instant::now() + Duration::from_secs(3600), |t| clock.instant(t));
            if timer.deadline() != sleep {
                timer.as_mut().reset(sleep);
            }
            tokio::select! {
                r = reader.read_buf(&mut inbuf) => match r {
                    Ok(0) | Err(_) => self.gateway.disconnected(),
                    Ok(_) => self.packets(&mut inbuf),
                },
                Some((from, datagram)) = datagrams.recv() => {
                    let token = self.token(from);
                    for d in self.up.carry(datagram) {
                        self.gateway.datagram(token, &d);
                    }
                }
                _ = &mut timer => {
                    let now = clock.now();
                    self.gateway.handle_timeout(now);
                    if let Some(b) = self.bridge.as_mut() {
                        b.backend.handle_timeout(now);
                    }
                }
                cmd = commands.recv(), if self.bridge.is_some() => match cmd {
                    Ok(step) => self.command(step),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {}
                },
                _ = stop.changed() => break Over::Shutdown,
            }
        };
        if let Some(open) = self.bridge.take() {
            let ending = if over == Over::Shutdown {
                Ending::Shutdown
            } else {
                Ending::GatewayClosed
            };
            self.server.close(open, ending);
        }
        if self.server.verbose {
            crate::errln!("backend: MQTT connection from {} ended ({over:?})", self.peer);
        }
        if self.gateway.undelivered() > 0 {
            crate::errln!(
                "backend: {} message(s) for {} were not delivered: the broker delivers only to subscribers, and the device subscribed to nothing",
                self.gateway.undelivered(),
                self.gateway.reply_topic().unwrap_or("the device")
            );
        }
    }

    /// A stdin command for the bridge's session.
    fn command(&mut self, step: Command) {
        if let Some(b) = self.bridge.as_mut() {
            b.backend.handle_command(self.server.clock.now(), step);
        }
    }

    /// The address token of a datagram's source (the gateway re-points its downlink at it).
    fn token(&mut self, from: SocketAddr) -> u64 {
        let i = match self.addrs.iter().position(|a| *a == from) {
            Some(i) => i,
            None => {
                self.addrs.push(from);
                self.addrs.len() - 1
            }
        };
        i as u64 + 1
    }

    /// Reads every whole packet in `inbuf` (`MqttProtocol`'s data handler).
    fn packets(&mut self, inbuf: &mut BytesMut) {
        let now = self.server.clock.now();
        while !self.gateway.is_closed() {
            // The claimed length is judged as soon as the fixed header is in, before the
            // packet's bytes are waited for: a connection that claims 256 MB is closed after a
            // few bytes, never buffered up to its claim (and before any password is checked).
            let too_long = |bytes: usize| {
                if self.server.verbose {
                    crate::errln!(
                        "backend: {}: a {bytes}-byte MQTT packet is over max_mqtt_payload_size ({}): the gateway closes the connection",
                        self.peer,
                        self.wire.max_packet
                    );
                }
            };
            let header = match mqttbytes::check(inbuf.iter(), self.wire.max_packet) {
                Ok(h) => h,
                Err(mqttbytes::Error::InsufficientBytes(_)) if inbuf.len() <= self.wire.max_packet + 5 => return,
                Err(mqttbytes::Error::PayloadSizeLimitExceeded(remaining)) => {
                    too_long(remaining);
                    return self.gateway.protocol_error();
                }
                Err(_) => return self.gateway.protocol_error(),
            };
            if header.frame_length() > self.wire.max_packet {
                too_long(header.frame_length());
                return self.gateway.protocol_error();
            }
            let Ok(packet) = Packet::read(inbuf, self.wire.max_packet) else {
                return self.gateway.protocol_error();
            };
            if !self.connected && !matches!(packet, Packet::Connect(_)) {
                return self.gateway.protocol_error();
            }
            self.gateway.activity(now);
            match packet {
                Packet::Connect(c) => {
                    self.connected = true;
                    let (user, pass) = c.login.map(|l| (l.username, l.password)).unwrap_or_default();
                    self.gateway.connect(now, &c.client_id, &user, &pass, c.keep_alive);
                }
                Packet::Publish(p) => self.gateway.publish_in(now, p.qos as u8, &p.payload),
                Packet::Subscribe(s) => {
                    // The gateway acks with return code 0 and ignores it (`handleSubscribe`); a
                    // plain broker delivers from now on if a filter matches the device's topic.
                    let topic = self.gateway.reply_topic().unwrap_or_default().to_string();
                    if s.filters.iter().any(|f| mqttbytes::matches(&topic, &f.path)) {
                        self.gateway.subscribed();
                    }
                    let ack = SubAck::new(s.pkid, vec![SubscribeReasonCode::Success(QoS::AtMostOnce)]);
                    let _ = Packet::SubAck(ack).write(&mut self.out, usize::MAX);
                }
                Packet::PingReq => {
                    let _ = Packet::PingResp.write(&mut self.out, usize::MAX);
                }
                Packet::Disconnect => self.gateway.disconnected(),
                // `未处理的包类型`: a protocol error closes the connection.
                _ => self.gateway.protocol_error(),
            }
        }
    }

    /// Carries out what the gateway and the bridge's backend decided, until neither has more;
    /// how the connection ended, if it did.
    async fn apply(&mut self, writer: &mut OwnedWriteHalf) -> Option<Over> {
        // The acks `packets` made (SUBACK, PINGRESP).
        let mut over = (!self.flush(writer).await).then_some(Over::Gone);
        loop {
            let backend = self.apply_backend();
            let (gateway, closed) = self.apply_gateway(writer).await;
            over = over.or(closed);
            if !backend && !gateway {
                break;
            }
        }
        // A gateway that closed without a `Close` action saw the device go.
        if over.is_none() && self.gateway.is_closed() {
            over = Some(Over::Gone);
        }
        for (open, ending) in std::mem::take(&mut self.ended) {
            self.server.close(open, ending);
        }
        over
    }

    /// Writes what is in `out`; false when the device's connection is gone.
    async fn flush(&mut self, writer: &mut OwnedWriteHalf) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let bytes = self.out.split();
        if writer.write_all(&bytes).await.is_err() {
            self.gateway.disconnected();
            return false;
        }
        true
    }

    /// The gateway's actions; whether there were any, and whether it closed the connection.
    async fn apply_gateway(&mut self, writer: &mut OwnedWriteHalf) -> (bool, Option<Over>) {
        let now = self.server.clock.now();
        let mut any = false;
        let mut over = None;
        while let Some(action) = self.gateway.poll_action() {
            any = true;
            match action {
                GatewayAction::ConnAck(code) => {
                    let code = if code == 0 {
                        ConnectReturnCode::Success
                    } else {
                        ConnectReturnCode::NotAuthorized
                    };
                    let _ = Packet::ConnAck(ConnAck::new(code, false)).write(&mut self.out, usize::MAX);
                    self.flush(writer).await;
                }
                GatewayAction::Publish { topic, payload } => {
                    if self.server.verbose {
                        crate::errln!(
                            "backend: gateway → {topic}: {}",
                            crate::out::elide(&String::from_utf8_lossy(payload.as_ref()), 2_000)
                        );
                    }
                    let publish = Publish::new(topic, QoS::AtMostOnce, payload);
                    let _ = Packet::Publish(publish).write(&mut self.out, usize::MAX);
                    self.flush(writer).await;
                }
                GatewayAction::Datagram { bytes, to } => {
                    let addr = usize::try_from(to).ok().and_then(|i| self.addrs.get(i.wrapping_sub(1)));
                    if let Some(addr) = addr.copied() {
                        for d in self.down.carry(bytes) {
                            let _ = self.udp.send_to(&d, addr).await;
                        }
                    }
                }
                GatewayAction::Close => over = Some(Over::Closed),
                GatewayAction::BridgeOpen { url, headers } => {
                    self.end_bridge(Ending::GatewayClosed);
                    let n = self.server.next_conn.fetch_add(1, Ordering::Relaxed) + 1;
                    let path = url
                        .split_once("://")
                        .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
                        .unwrap_or_default();
                    let mut open = self.server.open(n, self.peer, path, headers);
                    if url.ends_with("?from=mqtt_gateway") {
                        open.backend.session_mut().set_from_mqtt_gateway();
                    }
                    self.bridge = Some(open);
                    self.gateway.bridge_opened();
                }
                GatewayAction::BridgeText(text) => {
                    if let Some(b) = self.bridge.as_mut() {
                        if self.server.verbose {
                            crate::errln!(
                                "backend[{}] ← {}",
                                b.n,
                                crate::out::elide(&String::from_utf8_lossy(text.as_ref()), 2_000)
                            );
                        }
                        b.backend.handle_text(now, &text);
                    }
                }
                GatewayAction::BridgeBinary(frame) => {
                    if let Some(b) = self.bridge.as_mut() {
                        b.backend.handle_binary(now, &frame);
                        self.server.log_ear(&b.backend, &mut b.heard);
                    }
                }
                GatewayAction::BridgeClose => {
                    self.end_bridge(Ending::GatewayClosed);
                    self.gateway.bridge_closed(now);
                }
            }
        }
        (any, over)
    }

    /// The backend's actions, to the gateway's bridge; whether there were any.
    fn apply_backend(&mut self) -> bool {
        let now = self.server.clock.now();
        let mut any = false;
        while let Some(action) = self.bridge.as_mut().and_then(|b| b.backend.poll_action()) {
            any = true;
            match action {
                ScriptedAction::Text(text) => {
                    if self.server.verbose
                        && let Some(b) = &self.bridge
                    {
                        crate::errln!("backend[{}] → {}", b.n, crate::out::elide(&text, 2_000));
                    }
                    self.gateway.bridge_text(now, &text);
                }
                ScriptedAction::Binary(frame) => self.gateway.bridge_binary(&frame),
                // A frame the gateway's WebSocket cannot read ends the bridge as a close does.
                ScriptedAction::Raw(_) | ScriptedAction::Vanish => {
                    self.end_bridge(Ending::BackendVanished);
                    self.gateway.bridge_closed(now);
                }
                ScriptedAction::Close => {
                    self.end_bridge(Ending::BackendClosed);
                    self.gateway.bridge_closed(now);
                }
                // The gateway drops the device: the bridge closes, then the TCP connection.
                ScriptedAction::Disconnect => self.gateway.drop_connection(),
                ScriptedAction::ScriptDone => {
                    if let Some(b) = &self.bridge {
                        self.server.script_done(b.device_connection);
                    }
                }
            }
        }
        any
    }

    /// The bridge's session is over (its report goes out at the end of the round, `apply`).
    fn end_bridge(&mut self, ending: Ending) {
        if let Some(open) = self.bridge.take() {
            self.ended.push((open, ending));
        }
    }
}
