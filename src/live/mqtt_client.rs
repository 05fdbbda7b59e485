//! The device's second wire on real sockets (docs/reference/mqtt.md §4, §7): esp-mqtt's client is
//! a rumqttc client, the audio channel's socket a tokio `UdpSocket`. The device model decides
//! when to connect, publish, open and close (and esp-mqtt's own 10 s retry); this file only
//! carries that out and reports back what the network did, so a rumqttc event loop is polled
//! until its connection ends and never reconnects by itself.

use std::time::Duration;

use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, Outgoing, Packet, QoS};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use xiaozhi_sim::provisioning::MqttDial;

/// esp-ml307's `Connect()` waits this long for the CONNACK (`MQTT_CONNECT_TIMEOUT_MS`); the
/// model gives up at the same time, this only ends the attempt on the socket.
const CONNECT_TIMEOUT_S: u64 = 10;
/// Requests the client may queue before `try_publish` refuses (control messages are few: the
/// audio goes over UDP).
const REQUESTS: usize = 64;
/// The largest datagram read (the firmware's payloads are a 60 ms Opus frame).
const DATAGRAM: usize = 2048;

/// What the network did to the MQTT connection.
#[derive(Debug)]
pub enum MqttEvent {
    /// The connect ended: CONNACK 0 (`true`), or a refusal, a failed or timed-out connect
    /// (`false`, with why).
    ConnAck(bool, String),
    /// A PUBLISH for the device (whatever its topic: the firmware subscribes to nothing and
    /// takes what the broker delivers).
    Message(Vec<u8>),
    /// The connection that was up broke (with why).
    Closed(String),
}

/// Something arrived.
#[derive(Debug)]
pub enum Arrived {
    /// From the MQTT client.
    Mqtt(MqttEvent),
    /// A datagram on the audio channel's socket (its length in the link's buffer).
    Datagram(usize),
}

/// One rumqttc client: the handle that publishes and the task that polls its event loop.
struct Client {
    handle: AsyncClient,
    task: JoinHandle<()>,
    connected: bool,
}

/// The MQTT client and the UDP socket of one device.
pub struct MqttLink {
    client: Option<Client>,
    /// Events of every client, tagged with its generation: a closed client's late events are
    /// dropped.
    tx: mpsc::UnboundedSender<(u64, MqttEvent)>,
    rx: mpsc::UnboundedReceiver<(u64, MqttEvent)>,
    generation: u64,
    max_packet: usize,
    udp: Option<UdpSocket>,
    buf: Vec<u8>,
}

impl MqttLink {
    /// A link with nothing open; packets up to `max_packet` bytes both ways.
    pub fn new(max_packet: usize) -> MqttLink {
        let (tx, rx) = mpsc::unbounded_channel();
        MqttLink {
            client: None,
            tx,
            rx,
            generation: 0,
            max_packet: max_packet.max(4096),
            udp: None,
            buf: vec![0; DATAGRAM],
        }
    }

    /// The CONNACK accepted the current client.
    pub fn connected(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.connected)
    }

    /// The audio channel's socket exists.
    pub fn udp_open(&self) -> bool {
        self.udp.is_some()
    }

    /// The bytes of the datagram [`Arrived::Datagram`] announced.
    pub fn datagram(&self, len: usize) -> &[u8] {
        &self.buf[..len]
    }

    /// Starts a client for `dial` (MQTT 3.1.1, clean session, its keepalive); the outcome comes
    /// as [`MqttEvent::ConnAck`]. `Err` when it cannot even be tried (the port is not a TCP
    /// port: the firmware hands esp-mqtt the `std::stoi` value unchecked).
    pub fn connect(&mut self, dial: &MqttDial) -> Result<(), String> {
        self.close(false);
        let port = u16::try_from(dial.port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port {} is not a TCP port", dial.port))?;
        let mut options = MqttOptions::new(dial.client_id.clone(), dial.host.clone(), port);
        // MQTT carries the keepalive as 16 bits; rumqttc takes whole seconds or zero.
        let keepalive = u64::try_from(dial.keepalive.clamp(0, i32::from(u16::MAX))).unwrap_or(0);
        options
            .set_keep_alive(Duration::from_secs(keepalive))
            .set_clean_session(true)
            .set_max_packet_size(self.max_packet, self.max_packet)
            // QoS 0 only: no publish is ever in flight (rumqttc keeps a slot per allowed one).
            .set_inflight(1);
        if !dial.username.is_empty() || !dial.password.is_empty() {
            options.set_credentials(dial.username.clone(), dial.password.clone());
        }
        let (handle, mut eventloop) = AsyncClient::new(options, REQUESTS);
        let mut network = eventloop.network_options();
        network.set_connection_timeout(CONNECT_TIMEOUT_S);
        network.set_tcp_nodelay(true);
        eventloop.set_network_options(network);
        self.generation += 1;
        let task = tokio::spawn(poll_client(eventloop, self.generation, self.tx.clone()));
        self.client = Some(Client {
            handle,
            task,
            connected: false,
        });
        Ok(())
    }

    /// Publishes at QoS 0, not retained; false when no connected client took it.
    pub fn publish(&mut self, topic: &str, payload: Vec<u8>) -> bool {
        match &self.client {
            Some(c) if c.connected => c.handle.try_publish(topic, QoS::AtMostOnce, false, payload).is_ok(),
            _ => false,
        }
    }

    /// The client is gone: DISCONNECT first when `disconnect` and connected (the task ends once
    /// it is written), else the TCP connection just closes.
    pub fn close(&mut self, disconnect: bool) {
        if let Some(c) = self.client.take() {
            self.generation += 1;
            if !(disconnect && c.connected && c.handle.try_disconnect().is_ok()) {
                c.task.abort();
            }
        }
    }

    /// Makes the socket and connects it to `host:port` (lwIP's connected PCB: only that address
    /// is heard from).
    pub async fn open_udp(&mut self, host: &str, port: u16) -> std::io::Result<()> {
        self.udp = None;
        let socket = UdpSocket::bind(("0.0.0.0", 0)).await?;
        socket.connect((host, port)).await?;
        self.udp = Some(socket);
        Ok(())
    }

    /// Sends one datagram; false when there is no socket or the send failed.
    pub async fn send_udp(&self, datagram: &[u8]) -> bool {
        match &self.udp {
            Some(s) => s.send(datagram).await.is_ok(),
            None => false,
        }
    }

    /// Drops the socket.
    pub fn close_udp(&mut self) {
        self.udp = None;
    }

    /// The next thing that arrives (cancel-safe; pending forever when nothing is open).
    pub async fn next(&mut self) -> Arrived {
        loop {
            // The client's messages come through its own task: let a task the same readiness
            // woke run first, so that a message sent before a datagram is handed over before it
            // (the network's order; the gateway writes a `tts start` before the audio after it).
            if self.udp.is_some() {
                tokio::task::yield_now().await;
            }
            let udp = self.udp.as_ref();
            // A message that is there is handed over before a datagram that is there too.
            tokio::select! {
                biased;
                Some((generation, event)) = self.rx.recv() => {
                    if generation != self.generation {
                        continue;
                    }
                    match &event {
                        MqttEvent::ConnAck(ok, _) => {
                            if let Some(c) = self.client.as_mut() {
                                c.connected = *ok;
                            }
                            if !ok {
                                self.client = None;
                            }
                        }
                        MqttEvent::Closed(_) => self.client = None,
                        MqttEvent::Message(_) => {}
                    }
                    return Arrived::Mqtt(event);
                }
                r = recv(udp, &mut self.buf) => match r {
                    Ok(n) => return Arrived::Datagram(n),
                    // An ICMP port unreachable on a connected socket (the server is not there):
                    // the firmware's socket reports nothing and keeps waiting.
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                },
            }
        }
    }
}

impl Drop for MqttLink {
    fn drop(&mut self) {
        self.close(false);
    }
}

/// Receives on `socket`, or waits forever without one.
async fn recv(socket: Option<&UdpSocket>, buf: &mut [u8]) -> std::io::Result<usize> {
    match socket {
        Some(s) => s.recv(buf).await,
        None => std::future::pending().await,
    }
}

/// Polls one client's event loop until its connection ends (no reconnection: the device model
/// decides that), reporting the CONNACK, every PUBLISH and the end.
async fn poll_client(mut eventloop: EventLoop, generation: u64, tx: mpsc::UnboundedSender<(u64, MqttEvent)>) {
    let mut connected = false;
    loop {
        let event = match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                connected = ack.code == ConnectReturnCode::Success;
                MqttEvent::ConnAck(connected, format!("{:?}", ack.code))
            }
            Ok(Event::Incoming(Packet::Publish(p))) => MqttEvent::Message(p.payload.to_vec()),
            // DISCONNECT is written: the client is done.
            Ok(Event::Outgoing(Outgoing::Disconnect)) => return,
            Ok(_) => continue,
            Err(e) if connected => {
                // rumqttc ends a read batch at the EOF behind the last packets and returns the
                // error, keeping those packets queued for a later poll (which would reconnect):
                // hand them over first, as esp-mqtt delivers data before the disconnect.
                for queued in eventloop.state.events.drain(..) {
                    if let Event::Incoming(Packet::Publish(p)) = queued {
                        let _ = tx.send((generation, MqttEvent::Message(p.payload.to_vec())));
                    }
                }
                MqttEvent::Closed(e.to_string())
            }
            Err(e) => MqttEvent::ConnAck(false, e.to_string()),
        };
        let end = !matches!(event, MqttEvent::Message(_) | MqttEvent::ConnAck(true, _));
        if tx.send((generation, event)).is_err() || end {
            return;
        }
    }
}
