//! The microphone side of the audio service (`main/audio/audio_service.cc`:
//! `EnableVoiceProcessing`, `AudioInputTask`, `OpusCodecTask`'s encode half, `PopPacketFromSendQueue`;
//! docs/reference/voice.md §3): while voice processing runs, a 60 ms frame is captured on every tick (what the
//! user says, else silence), encoded with the firmware's settings and queued for the main loop's
//! `SendAudio`. What the user says waits in a [`MicQueue`]: the clips themselves, shared with
//! every device that says the same thing.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::device::platform::Platform;
use crate::time::{SimDuration, SimTime};
use crate::voice::codec::{FRAME_MS, MIC_RATE};
use crate::voice::memo::EncodeStream;

/// `MAX_SEND_PACKETS_IN_QUEUE` (2400 ms / 60 ms).
pub(crate) const SEND_QUEUE: usize = 40;

/// The microphone, its encoder and the send queue of one boot.
#[derive(Debug)]
pub(crate) struct Microphone {
    /// `AS_EVENT_AUDIO_PROCESSOR_RUNNING`.
    processing: bool,
    /// What the user says (16 kHz), not yet captured.
    said: MicQueue,
    /// The next 60 ms frame is captured at this time (while voice processing runs).
    tick: Option<SimTime>,
    /// `opus_encoder_`, made when voice processing first runs.
    encoder: Option<EncodeStream>,
    /// `audio_send_queue_`: encoded packets waiting for the main loop.
    send_queue: VecDeque<Arc<[u8]>>,
    /// Packets dropped because the send queue was full.
    dropped: u64,
    /// Packets sent.
    sent: u64,
    /// Milliseconds of audio captured this boot (the v2 header's timestamp).
    clock_ms: u32,
    /// Consecutive all-zero frames.
    silent_frames: u32,
    /// The TOC byte of the last encoded packet (code 0), sent alone in DTX.
    toc: u8,
}

impl Default for Microphone {
    fn default() -> Self {
        Microphone {
            processing: false,
            said: MicQueue::default(),
            tick: None,
            encoder: None,
            send_queue: VecDeque::new(),
            dropped: 0,
            sent: 0,
            clock_ms: 0,
            // SILK wideband, 60 ms, mono: what the firmware's settings produce.
            silent_frames: 1,
            toc: 0x58,
        }
    }
}

impl Microphone {
    /// `AS_EVENT_AUDIO_PROCESSOR_RUNNING` is set.
    pub(crate) fn is_processing(&self) -> bool {
        self.processing
    }

    /// When the next frame is captured.
    #[inline]
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        self.tick
    }

    /// Whether an Opus encoder exists.
    pub(crate) fn has_encoder(&self) -> bool {
        self.encoder.is_some()
    }

    /// Packets sent this boot.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Packets dropped from the full send queue this boot.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Voice processing on or off (`EnableVoiceProcessing`): the microphone frames start or stop.
    pub(crate) fn set_processing(&mut self, on: bool, now: SimTime) {
        self.processing = on;
        if on {
            if self.tick.is_none() {
                self.tick = Some(now + SimDuration::from_millis(u64::from(FRAME_MS)));
            }
        } else {
            self.tick = None;
            // The firmware keeps its encoder; the twin frees opus-rs's (~227 KiB) while the
            // microphone is off and makes a fresh one when it streams again (the first packets
            // of the next listening start from a clean encoder state: the bytes differ, the
            // sound does not).
            self.encoder = None;
            self.silent_frames = 1;
        }
    }

    /// The user speaks: `clip` (16 kHz) is captured after what is already waiting.
    pub(crate) fn say(&mut self, clip: Arc<[i16]>) {
        self.said.push(clip);
    }

    /// Forgets what the user said that has not been captured yet.
    pub(crate) fn forget(&mut self) {
        self.said = MicQueue::default();
    }

    /// Samples said and not captured yet.
    pub(crate) fn pending(&self) -> usize {
        self.said.len()
    }

    /// The tick due at `platform.now`: capture 60 ms, encode, queue for sending (the oldest
    /// packet goes when 40 wait). True when a packet was queued (the main loop's `SendAudio`
    /// event is due).
    #[inline]
    pub(crate) fn on_tick(&mut self, platform: &Platform) -> bool {
        let Some(due) = self.tick else { return false };
        if due > platform.now {
            return false;
        }
        self.tick = Some(due + SimDuration::from_millis(u64::from(FRAME_MS)));
        let n = MIC_RATE as usize * FRAME_MS as usize / 1000;
        let frame = self.said.take(n);
        let silent = frame.iter().all(|&x| x == 0);
        let packet = if silent && self.silent_frames > 0 {
            // DTX: libopus 1.3.1 sends the TOC byte alone for continued digital silence
            // (seen in the committed mic vector); opus-rs has no DTX, so the twin does the same
            // without running the encoder (and makes no encoder for a microphone that only
            // ever hears silence).
            Arc::from(&[self.toc][..])
        } else {
            let encoder = self
                .encoder
                .get_or_insert_with(|| EncodeStream::open(platform.codecs.as_ref()));
            let p = encoder.encode(&frame);
            if let Some(&toc) = p.first() {
                self.toc = toc & 0xfc;
            }
            p
        };
        self.silent_frames = if silent {
            self.silent_frames.saturating_add(1)
        } else {
            0
        };
        self.clock_ms = self.clock_ms.wrapping_add(FRAME_MS);
        if self.send_queue.len() >= SEND_QUEUE {
            self.send_queue.pop_front();
            self.dropped += 1;
        }
        self.send_queue.push_back(packet);
        true
    }

    /// `SendAudio` on a channel that cannot send: the queued packets are dropped.
    pub(crate) fn clear_send_queue(&mut self) {
        self.send_queue.clear();
    }

    /// Takes every queued packet for sending, with the timestamp the v2 header carries.
    pub(crate) fn drain_send_queue(&mut self) -> (u32, std::collections::vec_deque::Drain<'_, Arc<[u8]>>) {
        self.sent += self.send_queue.len() as u64;
        (self.clock_ms, self.send_queue.drain(..))
    }
}

/// What the user says, not yet captured: clips (shared, not copied) and how far into the first
/// one the microphone has read. At most 10 minutes are kept (older audio is forgotten).
#[derive(Debug, Default)]
pub(crate) struct MicQueue {
    clips: VecDeque<Arc<[i16]>>,
    read: usize,
    len: usize,
}

impl MicQueue {
    const MAX: usize = MIC_RATE as usize * 600;

    pub(crate) fn push(&mut self, clip: Arc<[i16]>) {
        if clip.is_empty() {
            return;
        }
        let clip = if clip.len() > Self::MAX {
            clip[..Self::MAX].into()
        } else {
            clip
        };
        self.len += clip.len();
        self.clips.push_back(clip);
        while self.len > Self::MAX {
            let over = self.len - Self::MAX;
            let first = self.clips.front().map_or(0, |c| c.len() - self.read);
            if over >= first {
                self.clips.pop_front();
                self.read = 0;
                self.len -= first;
            } else {
                self.read += over;
                self.len -= over;
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The next `n` samples (fewer when less is queued).
    pub(crate) fn take(&mut self, n: usize) -> Vec<i16> {
        let mut out = Vec::with_capacity(n.min(self.len));
        while out.len() < n {
            let Some(c) = self.clips.front() else { break };
            let k = (n - out.len()).min(c.len() - self.read);
            out.extend_from_slice(&c[self.read..self.read + k]);
            self.read += k;
            self.len -= k;
            if self.read == c.len() {
                self.clips.pop_front();
                self.read = 0;
            }
        }
        out
    }
}
