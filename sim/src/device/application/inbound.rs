//! The receive tasks: what arrives outside the main task (the WebSocket's, the MQTT client's
//! and the UDP socket's receive callbacks, the conformance recorder's direct feed) and how each
//! is parsed and handed on, to the protocol (a server hello, a goodbye), the MCP server or the
//! application dispatcher (`OnIncomingJson`, `OnIncomingAudio`). Work they cause is scheduled
//! on the main task. Free functions over the [`Application`] of the boot.

use crate::audio::source::Prompt;
use crate::cjson::{Item, Limits, Parser, Terminator};
use crate::device::application::Application;
use crate::device::incoming::{self, Incoming, MessageType};
use crate::device::platform::Platform;
use crate::device::protocol::websocket::HelloCrash;
use crate::device::task::{RebootStage, Task, VoiceTask};
use crate::hw::screen::ScreenCall;
use crate::mcp::Received;
use crate::trace::{Event, LogLevel};
use crate::voice::log::Drop;

/// The WebSocket receive task, one text frame: the envelope parsed (length-bounded from
/// 2.2.6, as a C string before), then the server hello, the MCP server or the application
/// dispatcher; what the device read. `Err` is the panic of a hello without a string
/// `transport`.
pub(crate) fn ws_text(
    app: &mut Application,
    platform: &mut Platform,
    parser: &mut Parser,
    frame: &[u8],
) -> (Incoming, Result<(), HelloCrash>) {
    let limits = Limits {
        heap_bytes: Some(platform.spec.target.free_heap),
    };
    let terminator = if platform.firmware.ws_parse_with_length {
        Terminator::Length
    } else {
        Terminator::Nul
    };
    // Built only when the log is kept: a frame may be as large as a board's heap.
    let missing_type = |platform: &mut Platform| {
        platform.log(LogLevel::Error, "WS", || {
            format!("Missing message type, data: {}", String::from_utf8_lossy(frame))
        });
    };
    let mut read = Incoming {
        message: MessageType::Untyped,
        ..Incoming::default()
    };
    let received = match parser.parse(frame, terminator, limits) {
        Err(_) => {
            missing_type(platform);
            None
        }
        Ok(doc) => {
            let root = doc.root();
            let kind = root.get(b"type").and_then(|t| t.c_string());
            (read.message, read.request) = incoming::read(root, kind);
            match kind {
                None => {
                    missing_type(platform);
                    None
                }
                Some(b"hello") => match app.server_hello(platform, root) {
                    Ok(()) => None,
                    Err(crash) => return (read, Err(crash)),
                },
                Some(_) => incoming_json(app, platform, root),
            }
        }
    };
    if let Some(p) = app.protocol.as_mut() {
        p.touch(platform.now);
    }
    read.receipt = received.map(|received| app.receive(platform, received));
    (read, Ok(()))
}

/// A JSON message on the direct link (`OnIncomingJson` as MQTT delivers it); what the device
/// read.
pub(crate) fn json(app: &mut Application, platform: &mut Platform, parser: &mut Parser, frame: &[u8]) -> Incoming {
    let limits = Limits {
        heap_bytes: Some(platform.spec.target.free_heap),
    };
    let mut read = Incoming {
        message: MessageType::Untyped,
        ..Incoming::default()
    };
    let Ok(doc) = parser.parse(frame, Terminator::Length, limits) else {
        return read;
    };
    let root = doc.root();
    let kind = root.get(b"type").and_then(|t| t.c_string());
    (read.message, read.request) = incoming::read(root, kind);
    if kind.is_none() {
        platform.log(LogLevel::Warn, "Application", || "Incoming JSON message has no type");
        return read;
    }
    read.receipt = incoming_json(app, platform, root).map(|received| app.receive(platform, received));
    read
}

/// A binary frame on the WebSocket receive task: unpacked as the protocol version says,
/// trusting its size field as the firmware does, then `OnIncomingAudio`. `Err` carries the
/// payload size of a header that announces more than the heap holds (`std::bad_alloc`: the
/// device panics).
pub(crate) fn ws_binary(app: &mut Application, platform: &mut Platform, frame: &[u8]) -> Result<(), usize> {
    let version = match app.protocol.as_mut() {
        Some(p) => {
            p.touch(platform.now);
            p.incoming_version()
        }
        None => 1,
    };
    let unpacked = crate::voice::frame::unpack(version, frame);
    let mut payload = unpacked.payload;
    if unpacked.overread > 0 {
        if unpacked.announced as u64 > platform.spec.target.free_heap as u64 {
            return Err(unpacked.announced);
        }
        let past = unpacked.overread;
        platform.emit(|| Event::FrameOverread {
            len: frame.len(),
            announced: unpacked.announced,
            past,
        });
        payload.resize(unpacked.announced, 0);
    }
    app.incoming_audio(platform, &payload, unpacked.overread > 0);
    Ok(())
}

/// The MQTT task, one message (`OnMessage`, `mqtt_protocol.cc:113-146`): parsed as a C string;
/// `hello` goes to `ParseServerHello`, a `goodbye` for this session closes the channel (on the
/// main task, without a goodbye back), anything else to `OnIncomingJson`. Every message that
/// parsed with a string `type` counts as inbound traffic for the 120 s channel timeout. `Err`
/// is where firmware before 2.4.0 (hello) or 2.3.0 (goodbye) crashes. Also what the device read.
pub(crate) fn mqtt_message(
    app: &mut Application,
    platform: &mut Platform,
    parser: &mut Parser,
    payload: &[u8],
) -> (Incoming, Result<(), HelloCrash>) {
    let limits = Limits {
        heap_bytes: Some(platform.spec.target.free_heap),
    };
    let mut read = Incoming {
        message: MessageType::Untyped,
        ..Incoming::default()
    };
    let Ok(doc) = parser.parse(payload, Terminator::Nul, limits) else {
        let shown = String::from_utf8_lossy(crate::cjson::c_str(payload)).into_owned();
        platform.log(LogLevel::Error, "MQTT", || {
            format!("Failed to parse json message {shown}")
        });
        return (read, Ok(()));
    };
    let root = doc.root();
    let kind = root.get(b"type").filter(Item::is_string).and_then(|t| t.c_string());
    (read.message, read.request) = incoming::read(root, kind);
    let Some(kind) = kind else {
        platform.log(LogLevel::Error, "MQTT", || "Message type is invalid");
        return (read, Ok(()));
    };
    let received = match kind {
        b"hello" => match app.server_hello(platform, root) {
            Ok(()) => None,
            Err(crash) => return (read, Err(crash)),
        },
        b"goodbye" => {
            let matches = match app.protocol.as_mut().and_then(|p| p.mqtt_mut()) {
                Some((base, _)) => {
                    match crate::device::protocol::mqtt::MqttProtocol::goodbye_matches(
                        base,
                        &mut platform.wire_io(),
                        root,
                    ) {
                        Ok(m) => m,
                        Err(crash) => return (read, Err(crash)),
                    }
                }
                None => false,
            };
            if matches {
                app.main.schedule(Task::ServerGoodbye);
            }
            None
        }
        _ => incoming_json(app, platform, root),
    };
    if let Some(p) = app.protocol.as_mut() {
        p.touch(platform.now);
    }
    read.receipt = received.map(|received| app.receive(platform, received));
    (read, Ok(()))
}

/// The UDP socket's receive callback (`mqtt_protocol.cc:266-334`): a datagram the channel
/// accepts is inbound traffic and goes to `OnIncomingAudio`; one it refuses is logged and
/// counted; one that finds no socket is lost.
pub(crate) fn udp_datagram(app: &mut Application, platform: &mut Platform, datagram: &[u8]) {
    let Some((base, m)) = app.protocol.as_mut().and_then(|p| p.mqtt_mut()) else {
        platform.speech.no_channel();
        return;
    };
    match m.open_datagram(&mut platform.wire_io(), datagram) {
        Ok((payload, gap)) => {
            base.last_incoming = platform.now;
            if gap {
                platform.speech.gap();
            }
            app.incoming_audio(platform, &payload, false);
        }
        Err(refused) => {
            platform.speech.received(false);
            platform.speech.dropped(if refused.is_some() {
                Drop::Refused
            } else {
                Drop::NoChannel
            });
        }
    }
}

/// The application dispatcher for a non-hello JSON frame (`OnIncomingJson`).
pub(crate) fn incoming_json(app: &mut Application, platform: &mut Platform, root: Item<'_>) -> Option<Received> {
    let kind = root.get(b"type").and_then(|t| t.c_string())?;
    match kind {
        b"mcp" => {
            let payload = root.get(b"payload").filter(Item::is_object)?;
            Some(app.mcp.receive(payload))
        }
        b"system" => {
            if root.get(b"command").and_then(|c| c.c_string()) == Some(b"reboot") {
                platform.log(LogLevel::Info, "Application", || "System command: reboot");
                app.main.schedule(Task::Reboot {
                    stage: RebootStage::Enter,
                });
            }
            None
        }
        b"tts" | b"stt" | b"llm" => {
            incoming_voice_json(app, platform, kind, root);
            None
        }
        b"alert" => {
            // `application.cc:624-633`: all three strings, or a warning.
            let field = |k: &[u8]| {
                root.get(k)
                    .and_then(|v| v.c_string())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            match (field(b"status"), field(b"message"), field(b"emotion")) {
                (Some(status), Some(message), Some(emotion)) => {
                    app.alert(platform, &status, &message, &emotion, Prompt::Vibration)
                }
                _ => platform.log(
                    LogLevel::Warn,
                    "Application",
                    || "Alert command requires status, message and emotion",
                ),
            }
            None
        }
        _ => None,
    }
}

/// `OnIncomingJson` for `tts`, `stt` and `llm` (the receive task: texts are logged here, the
/// state changes are scheduled on the main task).
fn incoming_voice_json(app: &mut Application, platform: &mut Platform, kind: &[u8], root: Item<'_>) {
    match kind {
        b"tts" => {
            let Some(state) = root.get(b"state").and_then(|s| s.c_string()) else {
                if !platform.firmware.tts_state_checked {
                    // Before 2.4.0: `strcmp(state->valuestring, …)` on a missing string.
                    platform.emit(|| Event::Panicked {
                        reason: "LoadProhibited: tts without a string state".into(),
                    });
                    app.abort_pending = true;
                }
                return;
            };
            match state {
                b"start" => {
                    platform.speech.start(platform.now);
                    app.main.schedule(Task::Voice(VoiceTask::TtsStart));
                }
                b"stop" => {
                    platform.speech.stop(platform.now);
                    app.main.schedule(Task::Voice(VoiceTask::TtsStop));
                }
                b"sentence_start" => {
                    if let Some(text) = text_of(root, b"text") {
                        let shown = text.clone();
                        platform.log(LogLevel::Info, "Application", || format!("<< {shown}"));
                        app.main.schedule(Task::Screen(ScreenCall::SetChatMessage {
                            role: "assistant".into(),
                            content: text.clone(),
                        }));
                        platform.speech.sentence(platform.now, text);
                    }
                }
                _ => {}
            }
        }
        b"stt" => {
            if let Some(text) = text_of(root, b"text") {
                let shown = text.clone();
                platform.log(LogLevel::Info, "Application", || format!(">> {shown}"));
                app.main.schedule(Task::Screen(ScreenCall::SetChatMessage {
                    role: "user".into(),
                    content: text,
                }));
            }
        }
        b"llm" => {
            if let Some(emotion) = text_of(root, b"emotion") {
                let shown = emotion.clone();
                platform.emit(|| Event::EmotionReceived { emotion: shown });
                app.main.schedule(Task::Screen(ScreenCall::SetEmotion(emotion)));
            }
        }
        _ => {}
    }
}

fn text_of(root: Item<'_>, key: &[u8]) -> Option<String> {
    root.get(key)
        .and_then(|t| t.c_string())
        .map(|t| String::from_utf8_lossy(t).into_owned())
}
