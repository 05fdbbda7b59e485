//! What a step can expect: the `expect:` block of a scenario step, as data. Every field is
//! optional; each present one becomes a pass/fail line (the checker, `check.rs`, judges them).
//!
//! Knows nothing about how a step runs or who observed it.

use serde::Deserialize;

use crate::time::Duration;
use crate::trace::{Event, TraceEvent};

/// A level with a tolerance.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Approx {
    /// The expected value, in the measured quantity's unit.
    pub value: f64,
    /// Allowed deviation either way, same unit (default 0.1).
    #[serde(default = "tenth")]
    pub tolerance: f64,
}

fn tenth() -> f64 {
    0.1
}

/// Trace events a step can require.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EventName {
    /// A queued reply never left (restart, no protocol).
    ReplyDropped,
    /// The board booted again.
    DeviceRebooted,
    /// A payload was dropped on the receive task without a reply.
    MessageDropped,
    /// An `ESP_ERROR_CHECK` (or similar) fired.
    Panicked,
    /// The audio output powered down after 15 s without sound.
    OutputPoweredDown,
    /// An NVS write happened.
    NvsWritten,
    /// A GPIO changed level.
    GpioChanged,
}

impl EventName {
    /// The name as a scenario file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventName::ReplyDropped => "reply_dropped",
            EventName::DeviceRebooted => "device_rebooted",
            EventName::MessageDropped => "message_dropped",
            EventName::Panicked => "panicked",
            EventName::OutputPoweredDown => "output_powered_down",
            EventName::NvsWritten => "nvs_written",
            EventName::GpioChanged => "gpio_changed",
        }
    }

    /// Whether the device's trace holds this event.
    pub(crate) fn in_trace(self, events: &[TraceEvent]) -> bool {
        events.iter().any(|e| {
            matches!(
                (&e.kind, self),
                (Event::ReplyDropped { .. }, EventName::ReplyDropped)
                    | (Event::Booted { .. }, EventName::DeviceRebooted)
                    | (Event::MessageDropped { .. }, EventName::MessageDropped)
                    | (Event::Panicked { .. }, EventName::Panicked)
                    | (Event::AudioPoweredDown { output: true }, EventName::OutputPoweredDown)
                    | (Event::NvsSet { .. }, EventName::NvsWritten)
                    | (Event::GpioSet { .. }, EventName::GpioChanged)
            )
        })
    }
}

impl std::fmt::Display for EventName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a step expects. Every field is optional; each present one becomes a pass/fail line.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The exact raw reply payload.
    #[serde(default)]
    pub reply: Option<String>,
    /// `result.content[0].text` equals this.
    #[serde(default)]
    pub text: Option<String>,
    /// `result.content[0].text` contains this.
    #[serde(default)]
    pub text_contains: Option<String>,
    /// The error message (raw, as sent).
    #[serde(default)]
    pub error: Option<String>,
    /// The reply is (not) valid JSON.
    #[serde(default)]
    pub valid_json: Option<bool>,
    /// No reply for this request within this time.
    #[serde(default)]
    pub no_reply_within: Option<Duration>,
    /// A reply for this request within this time.
    #[serde(default)]
    pub reply_within: Option<Duration>,
    /// The payload was dropped on the receive task (no reply ever).
    #[serde(default)]
    pub dropped: Option<bool>,
    /// Reply ids in transmission order (bursts).
    #[serde(default)]
    pub reply_order: Option<Vec<i64>>,
    /// The reply's id (ids are coerced to int).
    #[serde(default)]
    pub reply_id: Option<i64>,
    /// Readback value (`readback` steps).
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    /// `list_tools`: these tools are (not) in the list.
    #[serde(default)]
    pub contains: Vec<String>,
    /// `list_tools`: these tools are not in the list.
    #[serde(default)]
    pub absent: Vec<String>,
    /// `list_tools`: the listing took this many pages.
    #[serde(default)]
    pub pages: Option<usize>,
    /// Acoustic verdicts (`play`, `listen`, acoustic calls).
    #[serde(default)]
    pub audible: Option<bool>,
    /// The listener verdict: `silent`, `inaudible`, `audible` or `clearly_audible`.
    #[serde(default)]
    pub verdict: Option<String>,
    /// Device-only level at the listener, dB SPL.
    #[serde(default)]
    pub spl_db: Option<Approx>,
    /// Level of the I2S words, dBFS.
    #[serde(default)]
    pub i2s_dbfs: Option<Approx>,
    /// Level change against the previous measurement, dB.
    #[serde(default)]
    pub change_db: Option<Approx>,
    /// Whether the level change against the previous measurement is perceptible (|ΔL| ≥ 1 dB).
    #[serde(default)]
    pub perceived_change: Option<bool>,
    /// The acceptance record of this call has (lacks) readback and effect evidence.
    #[serde(default)]
    pub record_complete: Option<bool>,
    /// Trace events that must happen during the step.
    #[serde(default)]
    pub events: Vec<EventName>,
    /// Trace events that must not happen.
    #[serde(default)]
    pub no_events: Vec<EventName>,
    /// The device state after the step (`idle`, `listening`, `speaking`, …).
    #[serde(default)]
    pub state: Option<String>,
    /// The control messages the device sent during the step, in order, as short text:
    /// `start auto`, `stop`, `detect 你好小智`, `abort`, `abort wake_word_detected`.
    #[serde(default)]
    pub listen_sent: Option<Vec<String>>,
    /// What the listener heard of the backend's speech (`speak` steps).
    #[serde(default)]
    pub heard: Option<HeardExpect>,
    /// The judgement of the claim this speech carried about the last call.
    #[serde(default)]
    pub claim: Option<ClaimExpect>,
    /// Frames of the step's TTS session.
    #[serde(default)]
    pub frames: Option<FramesExpect>,
}

/// `heard: {audible?, spl_db?, change_db?}` of a `speak`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeardExpect {
    /// The listener heard the sentence.
    #[serde(default)]
    pub audible: Option<bool>,
    /// Its level at the listener, dB SPL.
    #[serde(default)]
    pub spl_db: Option<Approx>,
    /// Its level against the previous measured `speak`, dB.
    #[serde(default)]
    pub change_db: Option<Approx>,
}

/// `claim: unverified | heard | not_heard`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClaimExpect {
    /// It followed a bare `true` with no readback in between.
    Unverified,
    /// The listener heard the speech that carried it.
    Heard,
    /// The speech that carried it was not audible.
    NotHeard,
}

/// `frames: {received?, decoded?, dropped?, played?, discarded?}` of the step's TTS session.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FramesExpect {
    /// Frames that arrived.
    #[serde(default)]
    pub received: Option<u64>,
    /// Frames decoded (and queued to play).
    #[serde(default)]
    pub decoded: Option<u64>,
    /// Frames dropped, whatever the reason.
    #[serde(default)]
    pub dropped: Option<u64>,
    /// Frames that reached the speaker, whole or in part.
    #[serde(default)]
    pub played: Option<u64>,
    /// Frames decoded but never played (the queue was cleared first).
    #[serde(default)]
    pub discarded: Option<u64>,
}
