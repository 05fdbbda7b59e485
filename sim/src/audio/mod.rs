//! The acoustic chain: from `set_volume` → `true` to sound pressure at the listener
//! (docs/reference/architecture.md §5, docs/reference/firmware.md §9, docs/reference/acoustics.md).
//!
//! The device records what happens to its audio path in an [`AudioLog`] (volume writes, I2S TX
//! enable, codec open/close and register writes, PA pin, playbacks, faults) as virtual time
//! passes; [`render::render`] turns any window of that log into I2S words, the listener's
//! pressure signal and the measurements (`playing`, `i2s_running`, `codec_gain`, `amp_enabled`,
//! dBFS, dB SPL, verdicts). Rendering is a pure function of the log and the board, so the same
//! run renders the same bytes.

pub mod chain;
pub mod codec;
pub mod measure;
pub mod render;
pub mod source;

use crate::time::SimTime;
use source::{Sampler, Source};

/// Faults of the analog chain, as data (docs/reference/architecture.md §5; docs/reference/firmware.md §9.3 board-level gating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChainFault {
    /// Amplifier shut down (SD pin low / PA never enabled).
    AmpShutdown,
    /// Speaker wire off.
    SpeakerDisconnected,
    /// A headphone-detect style speaker enable held low.
    SpeakerGated,
    /// The I2S TX channel never starts (no BCLK).
    I2sStopped,
    /// The codec object is a `DummyAudioCodec`: every call succeeds, `Write` discards.
    DummyCodec,
}

impl ChainFault {
    /// The fault's name in scenarios and the command line (`codec_dummy` for `DummyCodec`).
    pub fn name(self) -> &'static str {
        match self {
            ChainFault::AmpShutdown => "amp_shutdown",
            ChainFault::SpeakerDisconnected => "speaker_disconnected",
            ChainFault::SpeakerGated => "speaker_gated",
            ChainFault::I2sStopped => "i2s_stopped",
            ChainFault::DummyCodec => "codec_dummy",
        }
    }
}

/// One change of the audio path at a point in virtual time.
#[derive(Clone, Debug, PartialEq)]
pub enum AudioChange {
    /// `AudioCodec::output_volume_` changed (read by software-volume codecs at write time).
    Volume(i32),
    /// The I2S TX channel was enabled/disabled (NoAudioCodec `EnableOutput`).
    TxEnabled(bool),
    /// The ES8311 `esp_codec_dev` was opened/closed (DAC active, unmuted).
    CodecOpen(bool),
    /// An I2C write of ES8311 REG 0x32 (DAC volume).
    Register32(u8),
    /// The amplifier enable (PA pin level, logical).
    PaEnabled(bool),
    /// A chain fault set or cleared.
    Fault(ChainFault, bool),
}

/// A sound leaving the codec during `[start, end)`.
#[derive(Clone, Debug)]
pub struct Playback {
    /// When the sound starts leaving the codec.
    pub start: SimTime,
    /// When it stops (exclusive); `stop_playback` may cut it short.
    pub end: SimTime,
    /// What plays.
    pub source: Source,
    /// The source's sample generator at the codec's output rate.
    pub sampler: Sampler,
    /// Received speech (a decoded frame), which a device measuring as it plays lets go once
    /// every window that reads it has passed it ([`AudioLog::release_speech`]).
    pub speech: bool,
}

/// Changes and playbacks kept verbatim. Beyond twice this many, the oldest are folded into the
/// state they leave behind, so a device that runs forever keeps a bounded log.
pub const LOG_HISTORY: usize = 4096;

/// Everything that happened to the audio path, in time order. Persists across reboots (it is
/// the evidence, not device state). Bounded: see [`LOG_HISTORY`]; windows that start after the
/// oldest change kept verbatim render exactly as with the full history.
#[derive(Clone, Debug, Default)]
pub struct AudioLog {
    /// Path changes with their times, in time order (oldest folded, see [`LOG_HISTORY`]).
    pub changes: Vec<(SimTime, AudioChange)>,
    /// Sounds played, in start order (oldest dropped beyond twice [`LOG_HISTORY`]).
    pub playbacks: Vec<Playback>,
}

impl AudioChange {
    /// Changes with the same key overwrite each other's effect.
    fn key(&self) -> (u8, u8) {
        match self {
            AudioChange::Volume(_) => (0, 0),
            AudioChange::TxEnabled(_) => (1, 0),
            AudioChange::CodecOpen(_) => (2, 0),
            AudioChange::Register32(_) => (3, 0),
            AudioChange::PaEnabled(_) => (4, 0),
            AudioChange::Fault(f, _) => (5, *f as u8),
        }
    }
}

impl AudioLog {
    /// Appends a change at `at` (not before the last one), folding old history when the log is long.
    pub fn record(&mut self, at: SimTime, change: AudioChange) {
        debug_assert!(self.changes.last().is_none_or(|(t, _)| *t <= at));
        self.changes.push((at, change));
        if self.changes.len() > 2 * LOG_HISTORY {
            self.fold_oldest(self.changes.len() - LOG_HISTORY);
        }
    }

    /// Replaces the first `n` changes by the last one of each key among them (at its own time):
    /// the path is left in the same state, so later windows render as before.
    fn fold_oldest(&mut self, n: usize) {
        let mut last = std::collections::BTreeMap::new();
        for (i, (_, change)) in self.changes[..n].iter().enumerate() {
            last.insert(change.key(), i);
        }
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        let folded: Vec<(SimTime, AudioChange)> = keep.into_iter().map(|i| self.changes[i].clone()).collect();
        self.changes.splice(..n, folded);
    }

    /// Queues `source` to play during `[start, end)` at the codec's output `rate` (Hz).
    pub fn play(&mut self, start: SimTime, end: SimTime, source: Source, rate: u32) {
        let sampler = source.sampler(rate);
        self.playbacks.push(Playback {
            start,
            end,
            source,
            sampler,
            speech: false,
        });
        if self.playbacks.len() > 2 * LOG_HISTORY {
            self.playbacks.drain(..self.playbacks.len() - LOG_HISTORY);
        }
    }

    /// The playback queued last is received speech.
    pub fn mark_last_speech(&mut self) {
        if let Some(p) = self.playbacks.last_mut() {
            p.speech = true;
        }
    }

    /// Lets go of the received speech that ends at or before `before` (its samples are no longer
    /// read: `Device::measure_as_played`); other sounds stay.
    pub fn release_speech(&mut self, before: SimTime) {
        if self.playbacks.first().is_some_and(|p| p.end <= before) {
            self.playbacks.retain(|p| !(p.speech && p.end <= before));
        }
    }

    /// Sound stops (audio service stopped, restart, power cut): cut playbacks at `at`.
    pub fn stop_playback(&mut self, at: SimTime) {
        for p in self.playbacks.iter_mut().rev() {
            if p.end <= at {
                break;
            }
            p.end = p.end.min(at).max(p.start);
        }
    }
}
