//! Narrow views of the platform (`device::platform`) for subsystems that need a few of its parts (quinn's
//! `Streams { state, conn_state }`): a subsystem that takes a view can touch only what it names,
//! and the compiler sees the borrows apart. The platform makes them (`Platform::trace`,
//! `Platform::playback_io`, `Platform::wire_io`, `Platform::board_io`). [`Trace`] is the trace
//! as a subsystem writes to it; [`PlaybackIo`] is what the playback of received speech reads and
//! writes; [`WireIo`] what a transport does; [`BoardIo`] what the board's objects (display,
//! backlight, camera, lamps, board tools) and the firmware's services (NVS writes, HTTP) do.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::audio::AudioLog;
use crate::board::BoardSpec;
use crate::device::output::Output;
use crate::firmware::Firmware;
use crate::hw::nvs::{EspErr, Nvs};
use crate::hw::screen::ScreenLog;
use crate::time::SimTime;
use crate::trace::{Event, LogLevel, LogText, NvsValue, TraceEvent};
use crate::voice::log::SpeechLog;
use crate::voice::memo::CodecPool;
use crate::world::{HttpOutcome, WorldSpec};

/// The trace at the platform's time: events and log lines, kept only while tracing.
pub(crate) struct Trace<'a> {
    now: SimTime,
    on: bool,
    events: &'a mut Vec<TraceEvent>,
}

impl Trace<'_> {
    /// The trace into `events` at `now`, kept only when `on`.
    pub(crate) fn new(now: SimTime, on: bool, events: &mut Vec<TraceEvent>) -> Trace<'_> {
        Trace { now, on, events }
    }

    /// An event, built only while tracing.
    pub(crate) fn emit(&mut self, kind: impl FnOnce() -> Event) {
        if self.on {
            self.events.push(TraceEvent {
                at: self.now,
                kind: kind(),
            });
        }
    }

    /// An `ESP_LOGx` line, built only while tracing.
    pub(crate) fn log<T: Into<LogText>>(&mut self, level: LogLevel, tag: &'static str, text: impl FnOnce() -> T) {
        self.emit(|| Event::Logged {
            level,
            tag,
            text: text().into(),
        });
    }
}

/// What the playback of received speech (`device::playback`) reads and writes of the platform.
pub(crate) struct PlaybackIo<'a> {
    /// The device's clock.
    pub(crate) now: SimTime,
    /// The audio path's record: frames played and cut.
    pub(crate) audio: &'a mut AudioLog,
    /// What became of the speech the device was sent.
    pub(crate) speech: &'a mut SpeechLog,
    pub(crate) trace: Trace<'a>,
    /// The codec's output rate (`AUDIO_OUTPUT_SAMPLE_RATE`).
    pub(crate) out_rate: u32,
    /// Where Opus work is done when devices share it.
    pub(crate) codecs: Option<&'a Arc<dyn CodecPool>>,
    /// Received speech is not decoded (`Device::set_durations_only`).
    pub(crate) durations_only: bool,
}

/// What a transport (`device::protocol::websocket`, `device::protocol::mqtt`) reads and writes
/// of the platform: the clock, the trace, the outputs, the firmware's switches, the NVS (the
/// `mqtt` settings), the MAC and the seeded generator (a WebSocket key).
pub(crate) struct WireIo<'a> {
    /// The device's clock.
    pub(crate) now: SimTime,
    pub(crate) trace: Trace<'a>,
    /// What leaves the device.
    pub(crate) outputs: &'a mut VecDeque<Output>,
    /// The firmware the board runs.
    pub(crate) firmware: &'a Firmware,
    /// The NVS partition.
    pub(crate) nvs: &'a Nvs,
    /// The Wi-Fi MAC (`Device-Id`).
    pub(crate) mac: &'a str,
    /// The seeded generator (`Sec-WebSocket-Key`).
    pub(crate) rng: &'a mut ChaCha8Rng,
}

/// What the board's objects (`device::peripherals`, `device::builtin`) and the firmware's
/// services read and write of the platform: the clock, the trace, the board's facts and the
/// firmware's switches, the NVS, the world (its hosts, its Wi-Fi), the screen's record and the
/// kept uploads.
pub(crate) struct BoardIo<'a> {
    /// The device's clock.
    pub(crate) now: SimTime,
    pub(crate) trace: Trace<'a>,
    /// The board's facts.
    pub(crate) spec: &'a Arc<BoardSpec>,
    /// The firmware the board runs.
    pub(crate) firmware: &'a Firmware,
    /// The NVS partition.
    pub(crate) nvs: &'a mut Nvs,
    /// The world around the device.
    pub(crate) world: &'a WorldSpec,
    /// Every call the display was given.
    pub(crate) screen: &'a mut ScreenLog,
    /// The newest uploads (evidence).
    pub(crate) uploads: &'a mut VecDeque<HttpUpload>,
}

/// How many uploads a device keeps.
pub(crate) const UPLOADS_KEPT: usize = 8;

/// An HTTP request with a body the device sent (`self.screen.snapshot`'s multipart POST).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUpload {
    /// When it was sent.
    pub at: SimTime,
    /// The method.
    pub method: &'static str,
    /// The URL.
    pub url: Vec<u8>,
    /// The `Content-Type` header.
    pub content_type: String,
    /// The body as written.
    pub body: Vec<u8>,
    /// The answer's status (a request whose open failed sent nothing and is not kept).
    pub status: i32,
}

impl BoardIo<'_> {
    /// An event, built only while tracing.
    pub(crate) fn emit(&mut self, kind: impl FnOnce() -> Event) {
        self.trace.emit(kind);
    }

    /// An `ESP_LOGx` line, built only while tracing.
    pub(crate) fn log<T: Into<LogText>>(&mut self, level: LogLevel, tag: &'static str, text: impl FnOnce() -> T) {
        self.trace.log(level, tag, text);
    }

    /// A `Settings::Set*` write with its event; the error name when NVS refuses it.
    pub(crate) fn nvs_set(&mut self, namespace: &str, key: &str, value: NvsValue) -> Result<(), EspErr> {
        let shown = self.trace.on.then(|| value.clone());
        match self.nvs.set(namespace, key, value) {
            Ok(()) => {
                if let Some(value) = shown {
                    self.emit(|| Event::NvsSet {
                        namespace: namespace.to_string(),
                        key: key.to_string(),
                        value,
                    });
                }
                Ok(())
            }
            Err(error) => {
                self.emit(|| Event::NvsFailed {
                    namespace: namespace.to_string(),
                    key: key.to_string(),
                    error,
                });
                Err(error)
            }
        }
    }

    /// An HTTP request to `url` in this world (`http->Open`), with its trace event.
    pub(crate) fn http(&mut self, method: &'static str, url: &[u8]) -> HttpOutcome {
        let outcome = self.world.http_open(url);
        self.emit(|| Event::HttpOpened {
            method,
            url: url.to_vec(),
            outcome: match &outcome {
                HttpOutcome::Unreachable { .. } => "fail".to_string(),
                HttpOutcome::Answered { status, .. } => format!("status {status}"),
            },
        });
        outcome
    }

    /// An HTTP request with a body (`http->Open` then `Write`s): what [`BoardIo::http`] gives,
    /// and the request kept as evidence when the host answered.
    pub(crate) fn http_upload(
        &mut self,
        method: &'static str,
        url: &[u8],
        content_type: String,
        body: Vec<u8>,
    ) -> HttpOutcome {
        let outcome = self.http(method, url);
        if let HttpOutcome::Answered { status, .. } = &outcome {
            if self.uploads.len() == UPLOADS_KEPT {
                self.uploads.pop_front();
            }
            self.uploads.push_back(HttpUpload {
                at: self.now,
                method,
                url: url.to_vec(),
                content_type,
                body,
                status: *status,
            });
        }
        outcome
    }
}
