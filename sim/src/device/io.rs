//! Narrow views of the platform (`device::platform`) for subsystems that need a few of its parts (quinn's
//! `Streams { state, conn_state }`): a subsystem that takes a view can touch only what it names,
//! and the compiler sees the borrows apart. The platform makes them (`Platform::trace`,
//! `Platform::playback_io`, `Platform::wire_io`). [`Trace`] is the trace as a subsystem writes to it;
//! [`PlaybackIo`] is what the playback of received speech reads and writes; [`WireIo`] what a
//! transport does.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::audio::AudioLog;
use crate::device::output::Output;
use crate::firmware::Firmware;
use crate::hw::nvs::Nvs;
use crate::time::SimTime;
use crate::trace::{Event, LogLevel, LogText, TraceEvent};
use crate::voice::log::SpeechLog;
use crate::voice::memo::CodecPool;

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
