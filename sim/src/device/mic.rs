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
use crate::voice::stream::EncodeStream;

/// `MAX_SEND_PACKETS_IN_QUEUE` (2400 ms / 60 ms).
pub(crate) const SEND_QUEUE: usize = 40;

/// `EnableVoiceProcessing(true)` sets `audio_input_need_warmup_`; `AudioInputTask` then sleeps
/// 120 ms before it reads the microphone (`audio_service.cc:661-662`, `269-271`).
pub(crate) const WARM_UP_MS: u32 = 120;

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
    /// Consecutive all-zero frames.
    silent_frames: u32,
    /// The TOC byte of the last encoded packet (code 0), sent alone in DTX.
    toc: u8,
    /// What the user said as the wake word (16 kHz): the end of the wake-word cache.
    wake_audio: Option<Arc<[i16]>>,
    /// `EncodeWakeWord`'s packets, waiting for `PopWakeWordPacket`.
    wake_packets: VecDeque<Arc<[u8]>>,
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
            // SILK wideband, 60 ms, mono: what the firmware's settings produce.
            silent_frames: 1,
            toc: 0x58,
            wake_audio: None,
            wake_packets: VecDeque::new(),
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
    /// Switching on arms the input task's warm-up: it sleeps [`WARM_UP_MS`] before it reads the
    /// microphone again, so the first frame is captured a warm-up and a frame later
    /// (docs/reference/voice.md §3).
    pub(crate) fn set_processing(&mut self, on: bool, now: SimTime) {
        self.processing = on;
        if on {
            // Also when it was on already: every call arms the warm-up.
            self.tick = Some(now + SimDuration::from_millis(u64::from(WARM_UP_MS + FRAME_MS)));
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
    pub(crate) fn say(&mut self, said: Utterance) {
        self.said.push(said);
    }

    /// Forgets what the user said that has not been captured yet.
    pub(crate) fn forget(&mut self) {
        self.said = MicQueue::default();
    }

    /// The user says the wake word: `samples` (16 kHz) end the wake-word cache.
    pub(crate) fn say_wake_word(&mut self, samples: Arc<[i16]>) {
        self.wake_audio = Some(samples);
    }

    /// `EncodeWakeWord` (`afe_audio_engine.cc:470-557`): the wake-word cache — `cached` samples
    /// (at most 2 s, `:104`), silence ending with what the user said as the wake word — in
    /// whole 60 ms frames through a fresh encoder with the microphone's settings (`:495`,
    /// `:520-522`), DTX as the microphone does it; the cache is cleared (`:545`).
    pub(crate) fn encode_wake_word(&mut self, platform: &Platform, cached: usize, said: Option<Arc<[i16]>>) {
        let frame = MIC_RATE as usize * FRAME_MS as usize / 1000;
        let cached = cached.min(MIC_RATE as usize * 2);
        let mut pcm = vec![0i16; cached];
        if let Some(said) = said {
            let n = said.len().min(cached);
            pcm[cached - n..].copy_from_slice(&said[said.len() - n..]);
        }
        let mut encoder = None;
        let (mut silent_frames, mut toc) = (1u32, 0x58u8);
        self.wake_packets = pcm[..cached / frame * frame]
            .chunks(frame)
            .map(|f| encode_frame(platform, &mut encoder, &mut silent_frames, &mut toc, f))
            .collect();
    }

    /// What the user said as the wake word, taken (the detection it belongs to uses it or not).
    pub(crate) fn take_wake_audio(&mut self) -> Option<Arc<[i16]>> {
        self.wake_audio.take()
    }

    /// `PopWakeWordPacket`: the wake word's packets, in order, taken.
    pub(crate) fn take_wake_packets(&mut self) -> VecDeque<Arc<[u8]>> {
        std::mem::take(&mut self.wake_packets)
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
        let packet = encode_frame(
            platform,
            &mut self.encoder,
            &mut self.silent_frames,
            &mut self.toc,
            &frame,
        );
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

    /// Takes the next queued packet for sending (counted as sent).
    pub(crate) fn pop_send(&mut self) -> Option<Arc<[u8]>> {
        let p = self.send_queue.pop_front()?;
        self.sent += 1;
        Some(p)
    }
}

/// One 60 ms frame through `encoder` (made when first needed), with DTX: libopus 1.3.1 sends
/// the TOC byte alone for continued digital silence (seen in the committed mic vector); opus-rs
/// has no DTX, so the twin does the same without running the encoder (and makes no encoder
/// for a microphone that only ever hears silence).
fn encode_frame(
    platform: &Platform,
    encoder: &mut Option<EncodeStream>,
    silent_frames: &mut u32,
    toc: &mut u8,
    frame: &[i16],
) -> Arc<[u8]> {
    let silent = frame.iter().all(|&x| x == 0);
    let packet = if silent && *silent_frames > 0 {
        Arc::from(&[*toc][..])
    } else {
        let e = encoder.get_or_insert_with(|| EncodeStream::open(platform.codecs.as_ref()));
        let p = e.encode(frame);
        if let Some(&t) = p.first() {
            *toc = t & 0xfc;
        }
        p
    };
    *silent_frames = if silent { silent_frames.saturating_add(1) } else { 0 };
    packet
}

/// What a user says into the microphone (16 kHz): a stretch of a clip at a gain. The clip is
/// shared, not copied, so a fleet's thousand devices can each say their own variation of one
/// recording (another start, length and level) for the memory of one.
#[derive(Clone, Debug)]
pub struct Utterance {
    samples: Arc<[i16]>,
    start: usize,
    end: usize,
    /// Linear gain, Q14 (16384: as recorded).
    gain: i32,
}

impl Utterance {
    /// Unity gain in Q14.
    const UNITY: i32 = 1 << 14;

    /// The whole clip, as recorded.
    pub fn whole(samples: Arc<[i16]>) -> Utterance {
        let end = samples.len();
        Utterance {
            samples,
            start: 0,
            end,
            gain: Self::UNITY,
        }
    }

    /// `samples[range]` (clamped to the clip) at `gain_db` (clamped to ±24 dB; each sample
    /// rounded and saturated to int16).
    pub fn part(samples: Arc<[i16]>, range: std::ops::Range<usize>, gain_db: f64) -> Utterance {
        let end = range.end.min(samples.len());
        let start = range.start.min(end);
        let db = if gain_db.is_finite() {
            gain_db.clamp(-24.0, 24.0)
        } else {
            0.0
        };
        let gain = (f64::from(Self::UNITY) * 10f64.powf(db / 20.0)).round() as i32;
        Utterance {
            samples,
            start,
            end,
            gain,
        }
    }

    /// Samples said.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether nothing is said.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Sample `i` of what is said (`i < len()`), at its gain.
    #[inline]
    fn at(&self, i: usize) -> i16 {
        let x = self.samples[self.start + i];
        if self.gain == Self::UNITY {
            return x;
        }
        // At +24 dB the gain is ~2.6e5: the product needs 64 bits.
        ((i64::from(x) * i64::from(self.gain) + (1 << 13)) >> 14).clamp(-32768, 32767) as i16
    }

    /// Every sample of what is said, at its gain.
    pub fn samples(&self) -> impl Iterator<Item = i16> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }
}

/// What the user says, not yet captured: utterances (their clips shared, not copied) and how
/// far into the first one the microphone has read. At most 10 minutes are kept (older audio
/// is forgotten).
#[derive(Debug, Default)]
pub(crate) struct MicQueue {
    said: VecDeque<Utterance>,
    read: usize,
    len: usize,
}

impl MicQueue {
    const MAX: usize = MIC_RATE as usize * 600;

    pub(crate) fn push(&mut self, mut u: Utterance) {
        if u.is_empty() {
            return;
        }
        u.end = u.end.min(u.start + Self::MAX);
        self.len += u.len();
        self.said.push_back(u);
        while self.len > Self::MAX {
            let over = self.len - Self::MAX;
            let first = self.said.front().map_or(0, |u| u.len() - self.read);
            if over >= first {
                self.said.pop_front();
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
            let Some(u) = self.said.front() else { break };
            let k = (n - out.len()).min(u.len() - self.read);
            if u.gain == Utterance::UNITY {
                out.extend_from_slice(&u.samples[u.start + self.read..u.start + self.read + k]);
            } else {
                out.extend((self.read..self.read + k).map(|i| u.at(i)));
            }
            self.read += k;
            self.len -= k;
            if self.read == u.len() {
                self.said.pop_front();
                self.read = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_utterance_is_its_stretch_of_the_clip_at_its_gain() {
        let clip: Arc<[i16]> = (0..100).map(|i| i * 300 - 15_000).collect::<Vec<i16>>().into();
        let whole = Utterance::whole(clip.clone());
        assert!(
            whole.samples().eq(clip.iter().copied()),
            "unity gain leaves every sample as is"
        );
        let part = Utterance::part(clip.clone(), 10..20, 6.0);
        assert_eq!(part.len(), 10);
        let want: Vec<i16> = clip[10..20]
            .iter()
            .map(|&x| (f64::from(x) * 10f64.powf(6.0 / 20.0)).round().clamp(-32768.0, 32767.0) as i16)
            .collect();
        let got: Vec<i16> = part.samples().collect();
        for (g, w) in got.iter().zip(&want) {
            assert!((i32::from(*g) - i32::from(*w)).abs() <= 1, "{g} vs {w}");
        }
        let loud = Utterance::part(clip.clone(), 0..1, 24.0);
        assert_eq!(loud.samples().next(), Some(-32768), "saturates");
        assert!(
            Utterance::part(clip.clone(), 150..200, 0.0).is_empty(),
            "a range past the end is empty"
        );
        assert_eq!(
            Utterance::part(clip, 90..200, f64::NAN).len(),
            10,
            "NaN is no gain, the range clamped"
        );
    }

    #[test]
    fn the_queue_reads_utterances_in_order_across_their_ends() {
        let clip: Arc<[i16]> = (1..=10).collect::<Vec<i16>>().into();
        let mut q = MicQueue::default();
        q.push(Utterance::part(clip.clone(), 2..5, 0.0));
        q.push(Utterance::whole(clip.clone()));
        q.push(Utterance::part(clip, 3..3, 0.0));
        assert_eq!(q.len(), 13);
        assert_eq!(q.take(5), [3, 4, 5, 1, 2]);
        assert_eq!(q.take(100), [3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(q.len(), 0);
        assert!(q.take(4).is_empty());
    }
}
