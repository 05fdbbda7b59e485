//! The MQTT + UDP transport (`main/protocols/mqtt_protocol.cc` at 2.4.2, esp-ml307
//! `src/esp/esp_mqtt.cc`, esp-mqtt's client task; docs/reference/mqtt.md §4): what
//! `MqttProtocol` adds to the base class.
//!
//! Control messages are MQTT publishes to `publish_topic` (the client subscribes to nothing);
//! the audio channel is a UDP socket the server hello names, its datagrams sealed and opened by
//! [`UdpChannel`]. The client connects when the protocol starts (on the activation task), when
//! an open finds it disconnected, and when the 60 s reconnect timer fires while the device is
//! idle; esp-mqtt itself also retries 10 s after every failed or broken connection. Each
//! `Connect()` blocks its caller until the CONNACK (or 10 s). Sans-IO: the driver is told to
//! connect, publish, open a socket, send a datagram, and reports back.

use crate::board::TextFontSpec;
use crate::cjson::{self, Item};
use crate::device::io::WireIo;
use crate::device::platform::{Output, Sent};
use crate::device::protocol::base::{
    ProtocolBase, SERVER_ERROR, SERVER_NOT_CONNECTED, SERVER_NOT_FOUND, SERVER_TIMEOUT,
};
use crate::device::protocol::websocket::HelloCrash;
use crate::device::protocol::websocket::text_font_capabilities;
use crate::firmware::ServerGoodbye;
use crate::provisioning::{Broker, MqttDial, MqttSettings};
use crate::time::{SimDuration, SimTime};
use crate::trace::{ChannelFailure, Event, LogLevel};
use crate::voice::udp::{OldUdp, Refused, UdpChannel, parse_udp, parse_udp_old};

/// `MQTT_CONNECT_TIMEOUT_MS` (esp-ml307 `esp_mqtt.h:13`): how long `Connect()` waits.
pub(crate) const CONNECT_TIMEOUT: SimDuration = SimDuration::from_secs(10);
/// esp-mqtt's `MQTT_RECON_DEFAULT_MS` (`mqtt_config.h:24`): its own retry after a failed or
/// broken connection (auto-reconnect is on: esp-ml307 does not disable it).
pub(crate) const AUTO_RECONNECT: SimDuration = SimDuration::from_secs(10);
/// `MQTT_RECONNECT_INTERVAL_MS` (`mqtt_protocol.h:22`): the firmware's one-shot timer after a
/// disconnect; it restarts the client only if the device is idle when it fires.
pub(crate) const RECONNECT_INTERVAL: SimDuration = SimDuration::from_secs(60);

/// Where esp-mqtt's client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Client {
    /// `mqtt_ == nullptr`.
    None,
    /// Connecting (TCP, CONNECT, waiting for the CONNACK).
    Connecting,
    /// `connected_`: the CONNACK accepted the client.
    Connected,
    /// The connection failed or broke; esp-mqtt tries again at this time.
    Retrying(SimTime),
}

/// Who is blocked in `Connect()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// Nobody.
    None,
    /// The main task (an open, or the reconnect timer's scheduled restart).
    MainTask,
    /// The activation task (`protocol_->Start()`), until this time.
    Activation(SimTime),
}

/// How `StartMqttClient` went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// The connect is under way: `Connect()` blocks until the CONNACK or 10 s.
    Waiting,
    /// It returned false at once (logged; `SetError` where the firmware sets one).
    Failed,
    /// `std::stoi` of the endpoint's port threw: nothing catches it, the device aborts.
    Abort(&'static str),
}

/// `MqttProtocol`'s own members.
#[derive(Clone, Debug)]
pub(crate) struct MqttProtocol {
    /// esp-mqtt's client.
    client: Client,
    /// What the client was started with (esp-mqtt reconnects with the same).
    dial: Option<MqttDial>,
    /// `publish_topic_`.
    publish_topic: String,
    /// Who waits for the connect.
    pub(crate) waiter: Waiter,
    /// The server hello arrived since the last open (`MQTT_PROTOCOL_SERVER_HELLO_EVENT`).
    hello_received: bool,
    /// The last accepted hello's key, nonce and counters, and where its datagrams go.
    crypto: Option<(UdpChannel, String, u16)>,
    /// `udp_ != nullptr`.
    udp_open: bool,
    /// `reconnect_timer_`, when armed.
    reconnect_at: Option<SimTime>,
}

/// What the protocol's timers did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fired {
    /// The reconnect timer fired while idle: `StartMqttClient(false)` is scheduled.
    pub(crate) restart: bool,
    /// The activation task's `Connect()` gave up waiting.
    pub(crate) activation: bool,
}

impl MqttProtocol {
    /// A protocol object with no client yet.
    pub(crate) fn new() -> Self {
        MqttProtocol {
            client: Client::None,
            dial: None,
            publish_topic: String::new(),
            waiter: Waiter::None,
            hello_received: false,
            crypto: None,
            udp_open: false,
            reconnect_at: None,
        }
    }

    /// esp-mqtt's `connected_`.
    pub(crate) fn is_connected(&self) -> bool {
        self.client == Client::Connected
    }

    /// `udp_ != nullptr`.
    pub(crate) fn udp_open(&self) -> bool {
        self.udp_open
    }

    /// Destroys the client (`mqtt_.reset()`: esp-mqtt sends DISCONNECT if connected).
    pub(crate) fn destroy_client(&mut self, io: &mut WireIo<'_>) {
        if self.client != Client::None {
            let disconnect = self.is_connected();
            self.client = Client::None;
            let at = io.now;
            io.outputs.push_back(Output::MqttClose { disconnect, at });
        }
    }

    /// `~MqttProtocol` (`Reboot()` destroys the protocol): the socket goes, then the client
    /// (DISCONNECT if connected); no goodbye.
    pub(crate) fn destroy(&mut self, io: &mut WireIo<'_>) {
        if std::mem::take(&mut self.udp_open) {
            let at = io.now;
            io.outputs.push_back(Output::UdpClose { at });
        }
        self.destroy_client(io);
        self.reconnect_at = None;
    }

    /// The device resets: the socket and the client go without a goodbye or a DISCONNECT.
    pub(crate) fn reset(&mut self, io: &mut WireIo<'_>) {
        let at = io.now;
        if std::mem::take(&mut self.udp_open) {
            io.outputs.push_back(Output::UdpClose { at });
        }
        if self.client != Client::None {
            self.client = Client::None;
            io.outputs.push_back(Output::MqttClose { disconnect: false, at });
        }
    }

    /// `StartMqttClient(report_error)` up to the blocking `Connect()` (`mqtt_protocol.cc:71-157`).
    pub(crate) fn start_client(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>, report_error: bool) -> Start {
        if self.client != Client::None {
            io.trace.log(LogLevel::Warn, "MQTT", || "Mqtt client already started");
            self.destroy_client(io);
        }
        let settings = MqttSettings::from_nvs(io.nvs, io.firmware.mqtt.keepalive_default);
        self.publish_topic = settings.publish_topic.clone();
        let (host, port) = match settings.broker() {
            Broker::NotSpecified => {
                io.trace
                    .log(LogLevel::Warn, "MQTT", || "MQTT endpoint is not specified");
                if report_error {
                    base.set_error(SERVER_NOT_FOUND);
                }
                return Start::Failed;
            }
            Broker::Throws(what) => {
                let endpoint = settings.endpoint.clone();
                io.trace
                    .log(LogLevel::Info, "MQTT", || format!("Connecting to endpoint {endpoint}"));
                return Start::Abort(what);
            }
            Broker::At { host, port } => (host, port),
        };
        let endpoint = settings.endpoint.clone();
        io.trace
            .log(LogLevel::Info, "MQTT", || format!("Connecting to endpoint {endpoint}"));
        if port == 8883 {
            // esp-ml307 turns on TLS for 8883 (`esp_mqtt.cc:27-32`); the twin dials plain TCP.
            io.trace.log(
                LogLevel::Error,
                "MQTT",
                || "Failed to connect to endpoint, code=0 (port 8883 is MQTT over TLS; the twin dials plain TCP only)",
            );
            base.set_error(SERVER_NOT_CONNECTED);
            return Start::Failed;
        }
        let dial = MqttDial {
            host,
            port,
            client_id: settings.client_id,
            username: settings.username,
            password: settings.password,
            keepalive: settings.keepalive,
        };
        self.dial = Some(dial.clone());
        self.client = Client::Connecting;
        let at = io.now;
        io.outputs.push_back(Output::MqttConnect { dial, at });
        Start::Waiting
    }

    /// The end of the blocking `Connect()`: connected, or `Failed to connect to endpoint` and
    /// `SetError(SERVER_NOT_CONNECTED)` (esp-mqtt goes on retrying all the same).
    pub(crate) fn finish_connect(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>) -> bool {
        self.waiter = Waiter::None;
        if self.is_connected() {
            io.trace.log(LogLevel::Info, "MQTT", || "Connected to endpoint");
            return true;
        }
        if io.firmware.mqtt.connect_error_code {
            io.trace
                .log(LogLevel::Error, "MQTT", || "Failed to connect to endpoint, code=0");
        } else {
            io.trace
                .log(LogLevel::Error, "MQTT", || "Failed to connect to endpoint");
        }
        base.set_error(SERVER_NOT_CONNECTED);
        false
    }

    /// The driver's CONNACK (`accepted`) or connect failure; who was waiting for it.
    pub(crate) fn connack(&mut self, io: &mut WireIo<'_>, accepted: bool) -> Waiter {
        if self.client != Client::Connecting {
            return Waiter::None;
        }
        if accepted {
            // OnConnected: the application dismisses its alert; the reconnect timer stops.
            self.client = Client::Connected;
            self.reconnect_at = None;
            io.trace.emit(|| Event::MqttConnected);
        } else {
            self.client = Client::Retrying(io.now + AUTO_RECONNECT);
            io.trace.log(LogLevel::Error, "mqtt_client", || "MQTT connect failed");
        }
        self.waiter
    }

    /// The connection broke (or a connect failed before its CONNACK); who was waiting.
    /// A broken connection arms the 60 s reconnect timer; the UDP channel stays as it is.
    pub(crate) fn closed(&mut self, io: &mut WireIo<'_>) -> Waiter {
        match self.client {
            Client::Connected => {
                self.client = Client::Retrying(io.now + AUTO_RECONNECT);
                if io.firmware.mqtt.reconnect_timer {
                    io.trace.log(LogLevel::Info, "MQTT", || {
                        format!(
                            "MQTT disconnected, schedule reconnect in {} seconds",
                            RECONNECT_INTERVAL.as_micros() / 1_000_000
                        )
                    });
                    self.reconnect_at = Some(io.now + RECONNECT_INTERVAL);
                } else {
                    // Before 1.9.0 nothing but esp-mqtt's own retry and the next open reconnect.
                    io.trace.log(LogLevel::Info, "MQTT", || "Disconnected from endpoint");
                }
                Waiter::None
            }
            Client::Connecting => {
                self.client = Client::Retrying(io.now + AUTO_RECONNECT);
                self.waiter
            }
            Client::None | Client::Retrying(_) => Waiter::None,
        }
    }

    /// The earliest of esp-mqtt's retry, the reconnect timer and the activation's wait.
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        let retry = match self.client {
            Client::Retrying(at) => Some(at),
            _ => None,
        };
        let activation = match self.waiter {
            Waiter::Activation(until) => Some(until),
            _ => None,
        };
        [retry, self.reconnect_at, activation].into_iter().flatten().min()
    }

    /// Fires what is due at `io.now` (`idle`: the device state when the timer fires).
    pub(crate) fn fire(&mut self, io: &mut WireIo<'_>, idle: bool) -> Fired {
        let now = io.now;
        let mut fired = Fired::default();
        if let Client::Retrying(at) = self.client
            && at <= now
            && let Some(dial) = self.dial.clone()
        {
            self.client = Client::Connecting;
            io.outputs.push_back(Output::MqttConnect { dial, at: now });
        }
        if self.reconnect_at.is_some_and(|at| at <= now) {
            self.reconnect_at = None;
            if idle {
                io.trace.log(LogLevel::Info, "MQTT", || "Reconnecting to MQTT server");
                fired.restart = true;
            }
        }
        if let Waiter::Activation(until) = self.waiter
            && until <= now
        {
            fired.activation = true;
        }
        fired
    }

    /// `SendText`: a publish to `publish_topic` (nothing when it is empty); on a client that is
    /// not connected, `Failed to publish message` and `SetError(SERVER_ERROR)`.
    pub(crate) fn send_text(
        &mut self,
        base: &mut ProtocolBase,
        io: &mut WireIo<'_>,
        sent: Sent,
        text: Vec<u8>,
    ) -> bool {
        if self.publish_topic.is_empty() {
            return false;
        }
        if !self.is_connected() {
            let shown = String::from_utf8_lossy(&text).into_owned();
            io.trace.log(LogLevel::Error, "MQTT", || {
                format!("Failed to publish message: {shown}")
            });
            base.set_error(SERVER_ERROR);
            return false;
        }
        let at = io.now;
        let topic = self.publish_topic.clone();
        io.outputs.push_back(Output::MqttPublish {
            topic,
            payload: text,
            sent,
            at,
        });
        true
    }

    /// `OpenAudioChannel` after the client is connected: a new session, the device hello.
    pub(crate) fn send_hello(
        &mut self,
        base: &mut ProtocolBase,
        io: &mut WireIo<'_>,
        font: Option<&TextFontSpec>,
        glyph_push: bool,
    ) -> bool {
        base.error_occurred = false;
        base.session_id.clear();
        self.hello_received = false;
        let hello = device_hello(font, glyph_push);
        self.send_text(base, io, Sent::Hello, hello)
    }

    /// After the wait for the server hello: the UDP socket to the hello's server, or (no hello)
    /// `Failed to receive server hello` and `SetError(SERVER_TIMEOUT)`.
    pub(crate) fn hello_arrived(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>) -> bool {
        let Some((_, host, port)) = self.crypto.as_ref().filter(|_| self.hello_received) else {
            io.trace
                .log(LogLevel::Error, "MQTT", || "Failed to receive server hello");
            base.set_error(SERVER_TIMEOUT);
            io.trace.emit(|| Event::AudioChannelFailed {
                why: ChannelFailure::NoServerHello,
            });
            return false;
        };
        // `udp->Connect(udp_server_, udp_port_)`: a new socket replaces any open one.
        let (host, port) = (host.clone(), *port);
        let at = io.now;
        io.outputs.push_back(Output::UdpOpen { host, port, at });
        self.udp_open = true;
        io.trace.emit(|| Event::AudioChannelOpened { udp: true });
        true
    }

    /// `ParseServerHello` (`mqtt_protocol.cc:377-467`): true when it was taken (the waiting
    /// open wakes); each refusal is logged and the hello ignored. Before 2.4.0 nothing is
    /// checked (v2.2.6 `:322-366`): `Err` is where that firmware crashes.
    pub(crate) fn parse_server_hello(
        &mut self,
        base: &mut ProtocolBase,
        io: &mut WireIo<'_>,
        root: Item<'_>,
    ) -> Result<bool, HelloCrash> {
        let strict = io.firmware.mqtt.strict;
        let transport = root.get(b"transport");
        let text = transport.filter(|t| t.is_string()).and_then(|t| t.c_string());
        if text != Some(b"udp".as_slice()) {
            if strict {
                io.trace
                    .log(LogLevel::Error, "MQTT", || "Unsupported or missing transport");
                return Ok(false);
            }
            // `strcmp(transport->valuestring, "udp")`, then the log prints it.
            let Some(text) = text else {
                return Err(HelloCrash::TransportNotAString);
            };
            let shown = String::from_utf8_lossy(text).into_owned();
            io.trace
                .log(LogLevel::Error, "MQTT", || format!("Unsupported transport: {shown}"));
            return Ok(false);
        }
        if let Some(sid) = root
            .get(b"session_id")
            .filter(|s| s.is_string())
            .and_then(|s| s.c_string())
        {
            base.session_id = sid.to_vec();
            let shown = String::from_utf8_lossy(sid).into_owned();
            io.trace.log(LogLevel::Info, "MQTT", || format!("Session ID: {shown}"));
        }
        if let Some(ap) = root.get(b"audio_params").filter(cjson::Item::is_object) {
            if let Some(r) = ap.get(b"sample_rate").filter(cjson::Item::is_number) {
                base.server_sample_rate = r.valueint();
            }
            if let Some(f) = ap.get(b"frame_duration").filter(cjson::Item::is_number) {
                base.server_frame_duration = f.valueint();
            }
        }
        let params = if strict {
            match parse_udp(root) {
                Ok(p) => p,
                Err(refused) => {
                    io.trace.log(LogLevel::Error, "MQTT", || refused.to_string());
                    return Ok(false);
                }
            }
        } else {
            match parse_udp_old(root) {
                Ok(p) => p,
                Err(OldUdp::NoUdp) => {
                    io.trace.log(LogLevel::Error, "MQTT", || OldUdp::NoUdp.to_string());
                    return Ok(false);
                }
                Err(crash) => return Err(HelloCrash::OldUdp(crash)),
            }
        };
        let sid = String::from_utf8_lossy(&base.session_id).into_owned();
        let udp = format!("{}:{}", params.server, params.port);
        io.trace.emit(|| Event::ServerHello {
            session: sid,
            udp: Some(udp),
        });
        self.crypto = Some((UdpChannel::new(&params), params.server, params.port));
        self.hello_received = true;
        Ok(true)
    }

    /// A `goodbye` on the MQTT task: logged; true when it closes the channel (on the main task).
    /// 2.3.0 onwards: a string `session_id` equal to the current one; before, a missing one too,
    /// and one that is not a string is compared as a NULL C string (`Err`: a crash).
    pub(crate) fn goodbye_matches(
        base: &ProtocolBase,
        io: &mut WireIo<'_>,
        root: Item<'_>,
    ) -> Result<bool, HelloCrash> {
        let item = root.get(b"session_id");
        let sid = item.filter(|s| s.is_string()).and_then(|s| s.c_string());
        let shown = match (item, sid) {
            (_, Some(s)) => String::from_utf8_lossy(s).into_owned(),
            // Before 2.3.0 the log prints `valuestring` of any item: NULL, as newlib prints it.
            (Some(_), None) if io.firmware.mqtt.goodbye != ServerGoodbye::StringEqual => "(null)".into(),
            _ => "null".into(),
        };
        io.trace.log(LogLevel::Info, "MQTT", || {
            format!("Received goodbye message, session_id: {shown}")
        });
        match io.firmware.mqtt.goodbye {
            ServerGoodbye::StringEqual => Ok(sid == Some(base.session_id.as_slice())),
            _ => match (item, sid) {
                (None, _) => Ok(true),
                (Some(_), Some(s)) => Ok(s == base.session_id.as_slice()),
                (Some(_), None) => Err(HelloCrash::GoodbyeSessionNotAString),
            },
        }
    }

    /// `CloseAudioChannel(send_goodbye)`: the socket goes, the goodbye is published when the
    /// device closes (not when the server did).
    pub(crate) fn close_channel(&mut self, base: &mut ProtocolBase, io: &mut WireIo<'_>, send_goodbye: bool) {
        if std::mem::take(&mut self.udp_open) {
            let at = io.now;
            io.outputs.push_back(Output::UdpClose { at });
        }
        // Up to 2.1.0 `CloseAudioChannel()` has no parameter and no log, and always publishes
        // the goodbye, after a server goodbye too (v1.7.5 `:151-164`).
        let send_goodbye = if io.firmware.mqtt.goodbye == ServerGoodbye::EchoedMissingOrEqual {
            true
        } else {
            io.trace.log(LogLevel::Info, "MQTT", || {
                format!("Closing audio channel, send_goodbye: {}", u8::from(send_goodbye))
            });
            send_goodbye
        };
        if send_goodbye {
            let mut text = b"{\"session_id\":\"".to_vec();
            text.extend_from_slice(&base.session_id);
            text.extend_from_slice(b"\",\"type\":\"goodbye\"}");
            self.send_text(base, io, Sent::Goodbye, text);
        }
    }

    /// A forged datagram for the channel's server (`UdpChannel::forged`) and where it goes;
    /// `None` without an open channel.
    pub(crate) fn forgery(&self, payload: &[u8]) -> Option<(String, u16, Vec<u8>)> {
        let (channel, host, port) = self.crypto.as_ref().filter(|_| self.udp_open)?;
        Some((host.clone(), *port, channel.forged(payload)))
    }

    /// `SendAudio`: one Opus packet as a datagram; false (the rest of the queue is dropped)
    /// without a socket or for a payload over 65535 bytes.
    pub(crate) fn send_audio(&mut self, io: &mut WireIo<'_>, payload: &[u8], timestamp: u32) -> bool {
        if !self.udp_open {
            return false;
        }
        let Some(datagram) = self.crypto.as_mut().and_then(|(c, _, _)| c.seal(payload, timestamp)) else {
            let n = payload.len();
            io.trace.log(LogLevel::Error, "MQTT", || {
                format!("Invalid AES nonce or audio payload length: {n}")
            });
            return false;
        };
        let at = io.now;
        io.outputs.push_back(Output::UdpSend { datagram, at });
        true
    }

    /// The UDP receive callback: the Opus packet of an accepted datagram and whether its
    /// sequence skipped, or `Err` with what became of it (no socket; refused, with the
    /// firmware's log line).
    pub(crate) fn open_datagram(
        &mut self,
        io: &mut WireIo<'_>,
        datagram: &[u8],
    ) -> Result<(Vec<u8>, bool), Option<Refused>> {
        if !self.udp_open {
            return Err(None);
        }
        let Some((channel, _, _)) = self.crypto.as_mut() else {
            return Err(None);
        };
        let opened = if io.firmware.mqtt.strict {
            channel.open(datagram)
        } else {
            channel.open_before_2_4(datagram)
        };
        match opened {
            Ok(opened) => {
                let gap = opened.gap.is_some();
                if let Some(line) = opened.gap {
                    io.trace.log(LogLevel::Warn, "MQTT", || line);
                }
                Ok((opened.payload, gap))
            }
            Err(refused) => {
                let level = if matches!(refused, Refused::Old { .. } | Refused::OldBefore24 { .. }) {
                    LogLevel::Warn
                } else {
                    LogLevel::Error
                };
                let line = refused.to_string();
                io.trace.log(level, "MQTT", || line);
                Err(Some(refused))
            }
        }
    }
}

/// `MqttProtocol::GetHelloMessage` (cJSON, key order as built; `mqtt_protocol.cc:351-375`).
/// `CONFIG_USE_SERVER_AEC` (default off) would add `"aec":true` first in the features.
pub(crate) fn device_hello(font: Option<&TextFontSpec>, glyph_push: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"hello\",\"version\":3,\"transport\":\"udp\",\"features\":{\"mcp\":true");
    if glyph_push {
        text_font_capabilities(&mut out, font);
    } else {
        out.push(b'}');
    }
    out.extend_from_slice(
        b",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,\"channels\":1,\"frame_duration\":60}}",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_asks_for_udp_in_the_firmware_key_order() {
        let font = TextFontSpec {
            bundle: "b".into(),
            charset: "basic".into(),
            size: 14,
            bpp: 1,
        };
        assert_eq!(
            String::from_utf8(device_hello(None, true)).unwrap(),
            r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true,"glyph_push":false},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
        assert_eq!(
            String::from_utf8(device_hello(Some(&font), true)).unwrap(),
            r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true,"glyph_push":true},"text_font":{"bundle":"b","charset":"basic","size":14,"bpp":1},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
        assert_eq!(
            String::from_utf8(device_hello(Some(&font), false)).unwrap(),
            r#"{"type":"hello","version":3,"transport":"udp","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#
        );
    }
}
