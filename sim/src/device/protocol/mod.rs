//! The protocol object (`Application::protocol_`): the base class's members ([`ProtocolBase`],
//! `base.rs`) and the transport under them.
//!
//! * `Direct` is the conformance recorder's feed: `ParseMessage` is called directly and every
//!   reply leaves while the protocol object exists, with nothing to open or close (as over
//!   MQTT).
//! * `WebSocket` is the on-demand audio channel (`websocket.rs`, `WebsocketProtocol`).
//!
//! Each further wire (MQTT + UDP) is a sibling file and one more [`Transport`] variant; what
//! the application asks of a protocol (send an MCP payload or a control message, pack audio,
//! is the channel open, close it) is answered here per transport.

pub(crate) mod base;
pub(crate) mod websocket;

use crate::device::platform::{Output, Platform};
use crate::time::SimTime;
use crate::trace::Event;
use crate::world::WsConfig;
pub(crate) use base::ProtocolBase;
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
}

/// What carries the protocol's messages.
#[derive(Clone, Debug)]
pub(crate) enum Transport {
    /// Replies go straight out while the protocol object exists (the conformance recorder's
    /// stand-in; behaves like MQTT: nothing to close, nothing to open).
    Direct,
    /// The on-demand WebSocket audio channel (`WebsocketProtocol`).
    WebSocket(Box<WebsocketProtocol>),
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

    /// `WebsocketProtocol` built from the OTA answer's `websocket` object, with no socket yet.
    pub(crate) fn websocket(config: &WsConfig) -> Self {
        Protocol {
            base: ProtocolBase::default(),
            transport: Transport::WebSocket(Box::new(WebsocketProtocol::new(config))),
        }
    }

    /// One step of `OpenAudioChannel` (`uuid`: the board's `Client-Id`).
    pub(crate) fn open_step(&mut self, stage: OpenStage, platform: &mut Platform, uuid: &str) -> OpenNext {
        let Some((base, ws)) = self.websocket_mut() else {
            return OpenNext::Nothing;
        };
        let ok = match stage {
            OpenStage::Begin => ws.begin_open(base, platform, uuid),
            OpenStage::AwaitConnect => {
                let font = platform.spec.text_font();
                let glyph_push = platform.firmware.glyph_push;
                ws.send_hello(base, platform, font.as_ref(), glyph_push)
            }
            OpenStage::AwaitHello => ws.hello_arrived(base, platform),
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
        self.websocket_mut().and_then(|(_, ws)| ws.closed(platform))
    }

    /// The server hello (`ParseServerHello` of the transport). `Ok(true)` when it was taken (a
    /// waiting open wakes); `Err` is the firmware's crash on a hello without a string
    /// `transport`. The direct link has no hello to take.
    pub(crate) fn server_hello(
        &mut self,
        platform: &mut Platform,
        root: crate::cjson::Item<'_>,
    ) -> Result<bool, HelloCrash> {
        match self.websocket_mut() {
            Some((base, ws)) => ws.parse_server_hello(base, platform, root),
            None => Ok(false),
        }
    }

    /// The transport is the WebSocket (an audio channel has to be opened before use).
    pub(crate) fn is_websocket(&self) -> bool {
        matches!(self.transport, Transport::WebSocket(_))
    }

    /// The base and the WebSocket, when that is the transport.
    fn websocket_mut(&mut self) -> Option<(&mut ProtocolBase, &mut WebsocketProtocol)> {
        match &mut self.transport {
            Transport::WebSocket(ws) => Some((&mut self.base, ws)),
            Transport::Direct => None,
        }
    }

    /// `IsAudioChannelOpened`: on the WebSocket, connected, no error, no timeout; never on the
    /// direct link (it has no channel to open).
    pub(crate) fn is_audio_channel_opened(&self, now: SimTime) -> bool {
        match &self.transport {
            Transport::WebSocket(ws) => ws.is_connected() && !self.base.error_occurred && !self.base.is_timeout(now),
            Transport::Direct => false,
        }
    }

    /// An inbound frame arrived (`last_incoming_time_`).
    pub(crate) fn touch(&mut self, now: SimTime) {
        if self.is_websocket() {
            self.base.last_incoming = now;
        }
    }

    /// The server's audio parameters: `(sample rate Hz, frame duration ms)`.
    pub(crate) fn server_audio(&self) -> (i32, i32) {
        (self.base.server_sample_rate, self.base.server_frame_duration)
    }

    /// `SendMcpMessage` on the main task: enveloped on a connected WebSocket, the bare payload
    /// on the direct link; on a closed socket `SendText` returns false without a log.
    #[inline]
    pub(crate) fn send_mcp(&self, platform: &mut Platform, payload: Vec<u8>) {
        match &self.transport {
            Transport::Direct => platform.transmit(payload),
            Transport::WebSocket(ws) if ws.is_connected() => {
                let text = self.base.mcp_envelope(&payload);
                platform.emit(|| Event::ReplySent { payload });
                let at = platform.now;
                platform.push_output(Output::WsText { text, at });
            }
            Transport::WebSocket(_) => platform.emit(|| Event::ReplyDropped {
                payload,
                why: "socket closed",
            }),
        }
    }

    /// `SendText` of a control message: on the WebSocket while connected, as a publish on the
    /// direct link (MQTT-like); nothing otherwise.
    pub(crate) fn send_text(&self, platform: &mut Platform, text: Vec<u8>) {
        let at = platform.now;
        match &self.transport {
            Transport::WebSocket(ws) if ws.is_connected() => platform.push_output(Output::WsText { text, at }),
            Transport::Direct => platform.push_output(Output::Control { text, at }),
            Transport::WebSocket(_) => {}
        }
    }

    /// The binary protocol version microphone packets are packed with, when `SendAudio` can
    /// send at all (`None`: no connected socket).
    pub(crate) fn audio_version(&self) -> Option<i32> {
        match &self.transport {
            Transport::WebSocket(ws) if ws.is_connected() => Some(ws.version),
            Transport::WebSocket(_) => None,
            Transport::Direct => Some(1),
        }
    }

    /// The binary protocol version inbound frames are unpacked with.
    pub(crate) fn incoming_version(&self) -> i32 {
        match &self.transport {
            Transport::WebSocket(ws) => ws.version,
            Transport::Direct => 1,
        }
    }

    /// `CloseAudioChannel` / destroying the protocol: the WebSocket object goes, if there is one
    /// (the peer sees TCP close, no close frame).
    pub(crate) fn close_audio_channel(&mut self, platform: &mut Platform, why: &'static str) {
        if let Transport::WebSocket(ws) = &mut self.transport {
            ws.drop_socket(platform, why);
        }
    }
}
