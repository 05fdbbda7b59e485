//! The virtual-time runner's voice bookkeeping: its pacing as the backend on the direct link,
//! the control messages the device sent, and which call the next speech is the claim of (a
//! `speak` after a `call`: the record gains a row saying what was said, when, whether a readback
//! came between, and whether the listener heard it).

use crate::audio::measure::Measurement;
use crate::time::SimDuration;

/// From `tts start` to the first audio of a reply (the LLM and TTS at work), in virtual time.
pub const FIRST_AUDIO_AFTER: SimDuration = SimDuration::from_millis(200);
/// The TTS encoder's rate (xiaozhi-esp32-server's default).
pub const TTS_RATE: u32 = 24_000;

/// The runner's voice bookkeeping.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunnerVoice {
    /// The last speech the listener's level was measured of.
    pub(crate) last_speech: Option<Measurement>,
    /// The record awaiting its claim, and the call's reply text.
    claim_for: Option<(usize, Option<String>)>,
    readback_since_call: bool,
    speech_before_call: Option<f64>,
    /// Control messages (`listen`, `abort`) the device sent since the step began, described.
    pub(crate) controls: Vec<String>,
}

/// A call whose claim the next speech is.
pub(crate) struct PendingClaim {
    /// The call's record, by index.
    pub(crate) index: usize,
    /// The call's reply text.
    pub(crate) reply: Option<String>,
    /// A readback came between the call and the speech.
    pub(crate) readback: bool,
    /// The level of the backend's speech before the call, dB SPL.
    pub(crate) before_db: Option<f64>,
}

impl RunnerVoice {
    /// A call was recorded as `records[index]` with this reply text.
    pub(crate) fn after_call(&mut self, index: usize, tool: &str, reply_text: Option<String>) {
        if tool == crate::mcp::strings::TOOL_GET_DEVICE_STATUS && self.claim_for.is_some() {
            self.readback_since_call = true;
            return;
        }
        self.claim_for = Some((index, reply_text));
        self.readback_since_call = false;
        self.speech_before_call = self.last_speech.as_ref().and_then(|m| m.spl_db);
    }

    /// A readback step ran.
    pub(crate) fn after_readback(&mut self) {
        self.readback_since_call = true;
    }

    /// The call the speech now playing is the claim of, if one waits for it (once).
    pub(crate) fn take_claim(&mut self) -> Option<PendingClaim> {
        let (index, reply) = self.claim_for.take()?;
        Some(PendingClaim {
            index,
            reply,
            readback: self.readback_since_call,
            before_db: self.speech_before_call,
        })
    }
}
