//! The protocol object (`Application::protocol_`): the base class's members ([`ProtocolBase`],
//! `base.rs`) and the transport under them.
//!
//! * `Direct` is the conformance recorder's feed: `ParseMessage` is called directly and every
//!   reply leaves while the protocol object exists, with nothing to open or close (as over
//!   MQTT).
//! * `WebSocket` is the on-demand audio channel (`websocket.rs`, `WebsocketProtocol`).
//! * `Mqtt` is MQTT for control and UDP for audio (`mqtt.rs`, `MqttProtocol`).
//!
//! What the application asks of a protocol (start, send an MCP payload or a control message,
//! send audio, is the channel open, close it) is answered here per transport; which transport a
//! boot makes is [`Protocol::initialize`] (`InitializeProtocol`).

pub(crate) mod base;
pub(crate) mod mqtt;
pub(crate) mod websocket;

use crate::device::platform::{Output, Platform, Sent};
use crate::hw::nvs::names;
use crate::time::SimTime;
use crate::trace::{Event, NvsValue};
pub(crate) use base::ProtocolBase;
use mqtt::{MqttProtocol, Start, Waiter};
use websocket::{HelloCrash, WebsocketProtocol};

/// Where opening the audio channel resumes (`OpenAudioChannel`, split where it blocks the main
/// task): the same three waits for every transport that has to open one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenStage {
    /// Start the transport's connection (the WebSocket: a new socket and its handshake).
    Begin,
    /// Woken by the connection's result (or after 10 s): send the device hello or give up.
    AwaitConnect,
    /// Woken by the server hello (or after 10 s): the channel is open, or the open failed.
    AwaitHello,
}

/// What one open step leaves the application to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenNext {
    /// Block the main task (up to 10 s) and resume at this stage.
    Wait(OpenStage),
    /// The channel is open.
    Opened,
    /// The open failed (logged, `error_occurred_` set): the device goes idle.
    Failed,
    /// This transport has no channel to open: nothing happens.
    Nothing,
    /// The connect's `std::stoi` threw: the device aborts.
    Abort(&'static str),
}

/// What carries the protocol's messages.
#[derive(Clone, Debug)]
pub(crate) enum Transport {
    /// Replies go straight out while the protocol object exists (the conformance recorder's
    /// stand-in; behaves like MQTT: nothing to close, nothing to open).
    Direct,
    /// The on-demand WebSocket audio channel (`WebsocketProtocol`).
    WebSocket(Box<WebsocketProtocol>),
    /// MQTT for control, UDP for audio (`MqttProtocol`).
    Mqtt(Box<MqttProtocol>),
}

/// `Application::protocol_`: the base members and the transport.
#[derive(Clone, Debug)]
pub(crate) struct Protocol {
    /// The base class's members.
    pub(crate) base: ProtocolBase,
    /// The transport under them.
    pub(crate) transport: Transport,
}

impl Protocol {
    /// The direct link.
    pub(crate) fn direct() -> Self {
        Protocol {
            base: ProtocolBase::default(),
            transport: Transport::Direct,
        }
    }

    /// `InitializeProtocol` (`application.cc:495-509`) after the OTA check of this boot: an
    /// `mqtt` block makes `MqttProtocol` (even beside a `websocket` one), a `websocket` block
    /// alone `WebsocketProtocol`; each block's members were written to NVS by the check. With
    /// neither the firmware makes `MqttProtocol` with no endpoint; the twin keeps the
    /// conformance recorder's direct link there.
    pub(crate) fn initialize(platform: &mut Platform) -> Self {
        if let Some(block) = platform.world.mqtt.clone() {
            for (key, value) in block.nvs_writes() {
                let unchanged = match &value {
                    NvsValue::Str(s) => platform.nvs.get_str(names::MQTT, key).unwrap_or_default() == s.as_slice(),
                    NvsValue::I32(v) => platform.nvs.get_i32(names::MQTT, key, 0) == *v,
                    _ => false,
                };
                if !unchanged {
                    let _ = platform.nvs_set(names::MQTT, key, value);
                }
            }
            return Protocol {
                base: ProtocolBase::default(),
                transport: Transport::Mqtt(Box::new(MqttProtocol::new())),
            };
        }
        let Some(cfg) = platform.world.websocket.clone() else {
            return Protocol::direct();
        };
        let _ = platform.nvs_set(
            names::WEBSOCKET,
            names::URL,
            NvsValue::Str(cfg.url.clone().into_bytes()),
        );
        if !cfg.token.is_empty() {
            let _ = platform.nvs_set(
                names::WEBSOCKET,
                names::TOKEN,
                NvsValue::Str(cfg.token.clone().into_bytes()),
            );
        }
        if cfg.version != 0 {
            let _ = platform.nvs_set(names::WEBSOCKET, names::VERSION, NvsValue::I32(cfg.version));
        }
        Protocol {
            base: ProtocolBase::default(),
            transport: Transport::WebSocket(Box::new(WebsocketProtocol::new(&cfg))),
        }
    }

    /// `protocol_->Start()` at the end of `InitializeProtocol`, on the activation task: over
    /// MQTT the client connects and the activation waits for it (true; it ends with
    /// [`Protocol::finish_activation`]). `Err` is the abort of an endpoint `std::stoi` throws on.
    pub(crate) fn start(&mut self, platform: &mut Platform) -> Result<bool, &'static str> {
        let Transport::Mqtt(m) = &mut self.transport else {
            return Ok(false);
        };
        match m.start_client(&mut self.base, &mut platform.wire_io(), false) {
            Start::Waiting => {
                m.waiter = Waiter::Activation(platform.now + mqtt::CONNECT_TIMEOUT);
                Ok(true)
            }
            Start::Failed => Ok(false),
            Start::Abort(what) => Err(what),
        }
    }

    /// The activation task's `Connect()` returns (connected, or the failure logged and set).
    pub(crate) fn finish_activation(&mut self, platform: &mut Platform) {
        if let Transport::Mqtt(m) = &mut self.transport
            && matches!(m.waiter, Waiter::Activation(_))
        {
            m.finish_connect(&mut self.base, &mut platform.wire_io());
        }
    }

    /// The reconnect timer's `StartMqttClient(false)` on the main task: true when its
    /// `Connect()` blocks the main task (resume with [`Protocol::finish_restart`]). `Err`: abort.
    pub(crate) fn restart_client(&mut self, platform: &mut Platform) -> Result<bool, &'static str> {
        let Transport::Mqtt(m) = &mut self.transport else {
            return Ok(false);
        };
        match m.start_client(&mut self.base, &mut platform.wire_io(), false) {
            Start::Waiting => {
                m.waiter = Waiter::MainTask;
                Ok(true)
            }
            Start::Failed => Ok(false),
            Start::Abort(what) => Err(what),
        }
    }

    /// The restarted client's `Connect()` returns.
    pub(crate) fn finish_restart(&mut self, platform: &mut Platform) {
        if let Transport::Mqtt(m) = &mut self.transport {
            m.finish_connect(&mut self.base, &mut platform.wire_io());
        }
    }

    /// One step of `OpenAudioChannel` (`uuid`: the board's `Client-Id`).
    pub(crate) fn open_step(&mut self, stage: OpenStage, platform: &mut Platform, uuid: &str) -> OpenNext {
        if let Transport::Mqtt(m) = &mut self.transport {
            return open_mqtt(m, &mut self.base, stage, platform);
        }
        let Some((base, ws)) = self.websocket_mut() else {
            return OpenNext::Nothing;
        };
        let ok = match stage {
            OpenStage::Begin => ws.begin_open(base, &mut platform.wire_io(), uuid),
            OpenStage::AwaitConnect => {
                let font = platform.spec.text_font();
                let glyph_push = platform.firmware.glyph_push;
                ws.send_hello(base, &mut platform.wire_io(), font.as_ref(), glyph_push)
            }
            OpenStage::AwaitHello => ws.hello_arrived(base, &mut platform.wire_io()),
        };
        match (ok, stage) {
            (false, _) => OpenNext::Failed,
            (true, OpenStage::Begin) => OpenNext::Wait(OpenStage::AwaitConnect),
            (true, OpenStage::AwaitConnect) => OpenNext::Wait(OpenStage::AwaitHello),
            (true, OpenStage::AwaitHello) => OpenNext::Opened,
        }
    }

    /// The driver finished (or failed) the transport's connection; true when an open waits for
    /// it (the main task wakes).
    pub(crate) fn connect_result(&mut self, ok: bool) -> bool {
        self.websocket_mut().is_some_and(|(_, ws)| ws.open_result(ok))
    }

    /// The peer closed or the connection broke. `None` when nothing was open; otherwise whether
    /// a connect was in progress (its wait ends early).
    pub(crate) fn peer_closed(&mut self, platform: &mut Platform) -> Option<bool> {
        self.websocket_mut()
            .and_then(|(_, ws)| ws.closed(&mut platform.wire_io()))
    }

    /// The server hello (`ParseServerHello` of the transport). `Ok(true)` when it was taken (a
    /// waiting open wakes); `Err` is the WebSocket firmware's crash on a hello without a string
    /// `transport`. The direct link has no hello to take.
    pub(crate) fn server_hello(
        &mut self,
        platform: &mut Platform,
        root: crate::cjson::Item<'_>,
    ) -> Result<bool, HelloCrash> {
        match &mut self.transport {
            Transport::WebSocket(ws) => ws.parse_server_hello(&mut self.base, &mut platform.wire_io(), root),
            Transport::Mqtt(m) => m.parse_server_hello(&mut self.base, &mut platform.wire_io(), root),
            Transport::Direct => Ok(false),
        }
    }

    /// The transport has an audio channel to open before use (WebSocket, MQTT + UDP).
    pub(crate) fn has_channel(&self) -> bool {
        !matches!(self.transport, Transport::Direct)
    }

    /// The MQTT transport, when that is the one.
    pub(crate) fn mqtt_mut(&mut self) -> Option<(&mut ProtocolBase, &mut MqttProtocol)> {
        match &mut self.transport {
            Transport::Mqtt(m) => Some((&mut self.base, m)),
            _ => None,
        }
    }

    /// The base and the WebSocket, when that is the transport.
    fn websocket_mut(&mut self) -> Option<(&mut ProtocolBase, &mut WebsocketProtocol)> {
        match &mut self.transport {
            Transport::WebSocket(ws) => Some((&mut self.base, ws)),
            _ => None,
        }
    }

    /// `IsAudioChannelOpened`: the WebSocket connected (or the UDP socket made), no error, no
    /// timeout; never on the direct link (it has no channel to open).
    pub(crate) fn is_audio_channel_opened(&self, now: SimTime) -> bool {
        let up = match &self.transport {
            Transport::WebSocket(ws) => ws.is_connected(),
            Transport::Mqtt(m) => m.udp_open(),
            Transport::Direct => false,
        };
        up && !self.base.error_occurred && !self.base.is_timeout(now)
    }

    /// An inbound message or frame arrived (`last_incoming_time_`).
    pub(crate) fn touch(&mut self, now: SimTime) {
        if self.has_channel() {
            self.base.last_incoming = now;
        }
    }

    /// The protocol's timers: esp-mqtt's retry, the 60 s reconnect timer, the activation's wait.
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        match &self.transport {
            Transport::Mqtt(m) => m.timer_deadline(),
            _ => None,
        }
    }

    /// Fires the protocol's timers due now (`idle`: the device is idle).
    pub(crate) fn fire_timers(&mut self, platform: &mut Platform, idle: bool) -> mqtt::Fired {
        match &mut self.transport {
            Transport::Mqtt(m) => m.fire(&mut platform.wire_io(), idle),
            _ => mqtt::Fired::default(),
        }
    }

    /// The server's audio parameters: `(sample rate Hz, frame duration ms)`.
    pub(crate) fn server_audio(&self) -> (i32, i32) {
        (self.base.server_sample_rate, self.base.server_frame_duration)
    }

    /// `SendMcpMessage` on the main task: enveloped on a connected WebSocket or MQTT client,
    /// the bare payload on the direct link; on a closed socket `SendText` returns false without
    /// a log, on a disconnected MQTT client with one and `SetError(SERVER_ERROR)`.
    #[inline]
    pub(crate) fn send_mcp(&mut self, platform: &mut Platform, payload: Vec<u8>, sent: Sent) {
        match &mut self.transport {
            Transport::Direct => platform.transmit(payload),
            Transport::WebSocket(ws) if ws.is_connected() => {
                let text = self.base.mcp_envelope(&payload);
                platform.emit(|| Event::ReplySent { payload });
                let at = platform.now;
                platform.push_output(Output::WsText { text, sent, at });
            }
            Transport::WebSocket(_) => platform.emit(|| Event::ReplyDropped {
                payload,
                why: "socket closed",
            }),
            Transport::Mqtt(m) => {
                let text = self.base.mcp_envelope(&payload);
                if m.send_text(&mut self.base, &mut platform.wire_io(), sent, text) {
                    platform.emit(|| Event::ReplySent { payload });
                } else {
                    platform.emit(|| Event::ReplyDropped {
                        payload,
                        why: "MQTT not connected (or no publish topic)",
                    });
                }
            }
        }
    }

    /// `SendText` of a control message: on the WebSocket while connected, as a publish over
    /// MQTT (and on the direct link); nothing otherwise.
    pub(crate) fn send_text(&mut self, platform: &mut Platform, sent: Sent, text: Vec<u8>) {
        let at = platform.now;
        match &mut self.transport {
            Transport::WebSocket(ws) if ws.is_connected() => platform.push_output(Output::WsText { text, sent, at }),
            Transport::Direct => platform.push_output(Output::Control { text, sent, at }),
            Transport::WebSocket(_) => {}
            Transport::Mqtt(m) => {
                m.send_text(&mut self.base, &mut platform.wire_io(), sent, text);
            }
        }
    }

    /// `SendAudio` of one microphone packet (the timestamp is 0: it is copied from the playback
    /// timestamps only server-side AEC fills, `CONFIG_USE_SERVER_AEC`, default off); false when
    /// it could not be sent (the rest of the send queue is then dropped).
    pub(crate) fn send_audio(&mut self, platform: &mut Platform, payload: &[u8]) -> bool {
        let version = match &mut self.transport {
            Transport::WebSocket(ws) if ws.is_connected() => ws.version,
            Transport::WebSocket(_) => return false,
            Transport::Direct => 1,
            Transport::Mqtt(m) => return m.send_audio(&mut platform.wire_io(), payload, 0),
        };
        let frame = crate::voice::frame::pack(version, payload, 0);
        let at = platform.now;
        platform.push_output(Output::WsBinary { frame, at });
        true
    }

    /// The binary protocol version inbound frames are unpacked with.
    pub(crate) fn incoming_version(&self) -> i32 {
        match &self.transport {
            Transport::WebSocket(ws) => ws.version,
            _ => 1,
        }
    }

    /// `CloseAudioChannel()` (the device closes): the WebSocket object goes (the peer sees TCP
    /// close, no close frame); over MQTT the UDP socket goes and a goodbye is published.
    pub(crate) fn close_audio_channel(&mut self, platform: &mut Platform, why: &'static str) {
        match &mut self.transport {
            Transport::WebSocket(ws) => ws.drop_socket(&mut platform.wire_io(), why),
            Transport::Mqtt(m) => m.close_channel(&mut self.base, &mut platform.wire_io(), true),
            Transport::Direct => {}
        }
    }

    /// The protocol object is destroyed (`Reboot()`): the WebSocket goes without a close
    /// frame; over MQTT the socket goes and the client sends DISCONNECT.
    pub(crate) fn destroy(&mut self, platform: &mut Platform, why: &'static str) {
        match &mut self.transport {
            Transport::WebSocket(ws) => ws.drop_socket(&mut platform.wire_io(), why),
            Transport::Mqtt(m) => m.destroy(&mut platform.wire_io()),
            Transport::Direct => {}
        }
    }

    /// The device resets: every connection goes at once, nothing is sent first.
    pub(crate) fn reset(&mut self, platform: &mut Platform, why: &'static str) {
        match &mut self.transport {
            Transport::WebSocket(ws) => ws.drop_socket(&mut platform.wire_io(), why),
            Transport::Mqtt(m) => m.reset(&mut platform.wire_io()),
            Transport::Direct => {}
        }
    }
}

/// One step of `MqttProtocol::OpenAudioChannel` (`mqtt_protocol.cc:239-349`): connect the
/// client if it is not connected (`StartMqttClient(true)`, blocking), the hello, the 10 s wait
/// for the server hello, the UDP socket.
fn open_mqtt(m: &mut MqttProtocol, base: &mut ProtocolBase, stage: OpenStage, platform: &mut Platform) -> OpenNext {
    let hello = |m: &mut MqttProtocol, base: &mut ProtocolBase, platform: &mut Platform| {
        let font = platform.spec.text_font();
        let glyph_push = platform.firmware.glyph_push;
        if m.send_hello(base, &mut platform.wire_io(), font.as_ref(), glyph_push) {
            OpenNext::Wait(OpenStage::AwaitHello)
        } else {
            OpenNext::Failed
        }
    };
    match stage {
        OpenStage::Begin if m.is_connected() => hello(m, base, platform),
        OpenStage::Begin => {
            platform.log(
                crate::trace::LogLevel::Info,
                "MQTT",
                || "MQTT is not connected, try to connect now",
            );
            match m.start_client(base, &mut platform.wire_io(), true) {
                Start::Waiting => {
                    m.waiter = Waiter::MainTask;
                    OpenNext::Wait(OpenStage::AwaitConnect)
                }
                Start::Failed => OpenNext::Failed,
                Start::Abort(what) => OpenNext::Abort(what),
            }
        }
        OpenStage::AwaitConnect => {
            if m.finish_connect(base, &mut platform.wire_io()) {
                hello(m, base, platform)
            } else {
                OpenNext::Failed
            }
        }
        OpenStage::AwaitHello => {
            if m.hello_arrived(base, &mut platform.wire_io()) {
                OpenNext::Opened
            } else {
                OpenNext::Failed
            }
        }
    }
}
