//! Received speech, from Opus packet to codec: the decode side of the audio service
//! (`main/audio/audio_service.cc`: `PushPacketToDecodeQueue`, `OpusCodecTask`,
//! `AudioOutputTask`, `ResetDecoder`, `IsIdle`; docs/reference/voice.md §3).
//!
//! Timing model. Decoding takes no virtual time; a decoded frame plays right after whatever the
//! output already holds (the [`AudioService`]), so output runs at real time and the queues fill
//! when frames arrive faster. A packet is dropped when 40 packets wait for decoding (the
//! two-entry playback queue holds the next two frames, so: 42 frames not yet started). Playback
//! counts as drained when the last frame has been written to I2S, one DMA ring (6 × 240 frames)
//! before it has been heard.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::audio::source::Source;
use crate::device::audio::{AudioService, dma_latency};
use crate::device::io::PlaybackIo;
use crate::firmware::StopTail;
use crate::time::{SimDuration, SimTime};
use crate::trace::LogLevel;
use crate::voice::codec::{OPUS_RATES, toc_duration_48k};
use crate::voice::log::Drop;
use crate::voice::stream::DecodeStream;

/// `MAX_DECODE_PACKETS_IN_QUEUE` (2400 ms / 60 ms).
pub(crate) const DECODE_QUEUE: usize = 40;
/// `MAX_PLAYBACK_TASKS_IN_QUEUE`.
pub(crate) const PLAYBACK_QUEUE: usize = 2;

/// What the Listening branch does with the speech still queued after `tts stop`
/// (docs/reference/voice.md §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterStop {
    /// `listen start` now (`ResetDecoder` discards what is queued, if anything).
    ListenNow,
    /// `listen start` once playback drains (2.4.x).
    Defer,
    /// The main task waits this long for the drain, then `listen start` (2.2.2–2.3.0).
    Block(SimDuration),
}

/// A decoded (or silent) frame: the decoder's `(input, output)` rates and the output samples.
type Decoded = ((u32, u32), Arc<[i16]>);

/// The decoder, the frames on their way to the codec, and the drained check of one boot.
#[derive(Debug)]
pub(crate) struct Playback {
    /// The application was told the playback drained since the last frame was queued.
    drained_notified: bool,
    /// When the playback-drained check is due.
    drain_at: Option<SimTime>,
    /// `opus_decoder_` (+ resampler), made at the first packet; `None` until then. Its own,
    /// or a position in the codec pool the device was given (`Device::share_codecs`).
    decoder: Option<DecodeStream>,
    /// The `(rate, frame ms)` the decoder was made for.
    decoder_for: (i32, i32),
    /// Making the decoder failed (logged once).
    decoder_failed: bool,
    /// Decoded frames not yet finished: `[start, end)` on the codec.
    frames: VecDeque<(SimTime, SimTime)>,
    /// Silence played for undecoded packets (`Device::set_durations_only`).
    silence: Option<Arc<[i16]>>,
}

impl Default for Playback {
    fn default() -> Self {
        Playback {
            drained_notified: true,
            drain_at: None,
            decoder: None,
            decoder_for: (0, 0),
            decoder_failed: false,
            frames: VecDeque::new(),
            silence: None,
        }
    }
}

impl Playback {
    /// Whether an Opus decoder exists (codec state is allocated lazily).
    pub(crate) fn has_decoder(&self) -> bool {
        self.decoder.is_some()
    }

    /// When the playback-drained check is due.
    #[inline]
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        self.drain_at
    }

    /// `IsPlaybackIdle`: nothing left to write to I2S.
    pub(crate) fn is_idle(audio: &AudioService, now: SimTime) -> bool {
        audio.last_output_end.max(SimTime::ZERO) <= now + dma_latency(audio.rate())
    }

    /// How long until nothing is left to write to I2S (what a main task waiting for the drain
    /// waits: `WaitForCompletion` on 1.7.x, `WaitForPlaybackQueueEmpty` on 2.2.2–2.3.0; both
    /// return within a frame of it).
    pub(crate) fn until_idle(audio: &AudioService, now: SimTime) -> SimDuration {
        Self::idle_at(audio).saturating_since(now)
    }

    /// When the last queued frame has been written to I2S (one DMA ring before it is heard).
    fn idle_at(audio: &AudioService) -> SimTime {
        let latency = dma_latency(audio.rate());
        SimTime::from_micros(audio.last_output_end.as_micros().saturating_sub(latency.as_micros()))
    }

    /// The Listening branch after speaking, by the version's rule (auto mode only waits).
    pub(crate) fn after_stop(audio: &AudioService, now: SimTime, tail: StopTail, auto: bool) -> AfterStop {
        if !auto || Self::is_idle(audio, now) {
            return AfterStop::ListenNow;
        }
        match tail {
            StopTail::DrainDeferred => AfterStop::Defer,
            StopTail::DrainBlocking => AfterStop::Block(Self::until_idle(audio, now)),
            _ => AfterStop::ListenNow,
        }
    }

    /// 1.7.x's `tts stop` lambda waits for the audio pipeline before anything else (1.7.7's wait
    /// discards all but two frames first, and `discarding` silences what arrives meanwhile):
    /// how long, or `None` when it goes on at once.
    pub(crate) fn stop_wait(
        &mut self,
        io: &mut PlaybackIo<'_>,
        audio: &mut AudioService,
        tail: StopTail,
        discarding: &mut bool,
    ) -> Option<SimDuration> {
        let waits = matches!(tail, StopTail::WaitWhileSpeaking | StopTail::DiscardWhileWaiting);
        if waits && !Self::is_idle(audio, io.now) {
            if tail == StopTail::DiscardWhileWaiting && !*discarding {
                *discarding = true;
                self.keep_two(io, audio);
            }
            let wait = Self::until_idle(audio, io.now);
            if !wait.is_zero() {
                return Some(wait);
            }
        }
        *discarding = false;
        None
    }

    /// 1.7.7's `tts stop` wait: the frame playing and the next are kept, every later one is
    /// discarded (the audio loop takes them and throws them away).
    fn keep_two(&mut self, io: &mut PlaybackIo<'_>, audio: &mut AudioService) {
        let now = io.now;
        self.frames.retain(|(_, e)| *e > now);
        let Some(&(_, keep_end)) = self.frames.get(1) else {
            return;
        };
        if self.frames.iter().any(|(_, e)| *e > keep_end) {
            audio.cut_playback(io.audio, keep_end);
            self.discard_from(io, keep_end);
            self.frames.retain(|(_, e)| *e <= keep_end);
        }
    }

    /// Arms the drained check for when the last queued frame has been written.
    pub(crate) fn arm_drain_check(&mut self, audio: &AudioService, now: SimTime) {
        self.drain_at = Some(Self::idle_at(audio).max(now));
    }

    /// Marks the playback drained; true when the application is to be told (once per drain).
    fn mark_drained(&mut self) -> bool {
        !std::mem::replace(&mut self.drained_notified, true)
    }

    /// `ResetDecoder`: the decoder forgets the stream, the decode and playback queues are
    /// cleared (speech and any sound still queued); the frame being written and the DMA ring
    /// still play. True when the application
    /// is to be told the playback drained.
    pub(crate) fn reset(&mut self, io: &mut PlaybackIo<'_>, audio: &mut AudioService) -> bool {
        let now = io.now;
        if let Some(d) = self.decoder.as_mut() {
            d.reset();
        }
        let in_flight = self.frames.iter().find(|(s, e)| *s <= now && now < *e).map(|f| f.1);
        let cut = in_flight.unwrap_or(now);
        // A sound's packets wait in the same decode queue (`PlaySound`), so a prompt still
        // playing is cut too (the twin cuts it at once, not at its 60 ms packet's end).
        if audio.last_output_end > cut {
            audio.cut_playback(io.audio, cut);
            self.discard_from(io, cut);
        }
        self.frames.clear();
        self.mark_drained()
    }

    /// The board stops at `now` (a reboot, a power cut): nothing more plays.
    pub(crate) fn stop(&mut self, io: &mut PlaybackIo<'_>) {
        let now = io.now;
        self.discard_from(io, now);
        self.frames.clear();
    }

    /// The speech log learns that playback ends at `cut`, and which queued frames never play.
    fn discard_from(&self, io: &mut PlaybackIo<'_>, cut: SimTime) {
        if self.frames.iter().any(|(_, e)| *e > cut) {
            let queued: Vec<SimTime> = self.frames.iter().map(|f| f.0).filter(|s| *s >= cut).collect();
            io.speech.cut(cut, &queued);
        }
    }

    /// The drained check fired at `now` (the output task wrote the last frame). True when the
    /// application is to be told: a new drain, or a deferred listen start (`pending_start`)
    /// that waits for the event even when nothing new was queued.
    #[inline]
    pub(crate) fn on_drain_timer(&mut self, audio: &AudioService, now: SimTime, pending_start: bool) -> bool {
        let Some(due) = self.drain_at else { return false };
        if due > now {
            return false;
        }
        self.drain_at = None;
        if !Self::is_idle(audio, now) {
            self.arm_drain_check(audio, now);
            return false;
        }
        self.frames.retain(|(_, e)| *e > now);
        if self.drained_notified {
            pending_start
        } else {
            self.mark_drained()
        }
    }

    /// `PushPacketToDecodeQueue` → decode → output (the decoded frame plays after what the output
    /// holds; the rates are the decoder's `(input, output)`), for a packet that arrived while speaking;
    /// `server` is the server's `(sample rate, frame duration)` from its hello.
    pub(crate) fn push(
        &mut self,
        io: &mut PlaybackIo<'_>,
        audio: &mut AudioService,
        volume: i32,
        server: (i32, i32),
        packet: &[u8],
    ) {
        let now = io.now;
        self.frames.retain(|(_, e)| *e > now);
        let waiting = self.frames.iter().filter(|(s, _)| *s > now).count();
        if waiting >= DECODE_QUEUE + PLAYBACK_QUEUE {
            io.speech.dropped(Drop::QueueFull);
            return;
        }
        // The PCM buffer holds one announced frame (`decoder_frame_size_`, audio_service.cc:391,
        // 518); esp_opus_dec documents ESP_AUDIO_ERR_BUFF_NOT_ENOUGH (-8) for output that does
        // not fit, and the packet is dropped with this log line (docs/reference/voice.md §3).
        let fits = |n48: u32| i64::from(n48) <= 48 * i64::from(server.1.max(0));
        if toc_duration_48k(packet).is_some_and(|n| !fits(n)) {
            io.trace.log(
                LogLevel::Error,
                "AudioService",
                || "Failed to decode audio after resize, error code: -8",
            );
            io.speech.dropped(Drop::Undecodable);
            return;
        }
        let decoded = if io.durations_only {
            self.silence_for(io, server.0, packet)
        } else {
            self.decode(io, server, packet)
        };
        let Some((rates, samples)) = decoded else { return };
        let out = rates.1;
        let duration = SimDuration::from_micros(samples.len() as u64 * 1_000_000 / u64::from(out.max(1)));
        let source = Source::Pcm { rate: out, samples };
        let (start, end) = audio.play(io.audio, now, source, duration, volume);
        io.audio.mark_last_speech();
        io.speech.decoded(start, end, rates);
        self.frames.push_back((start, end));
        self.drained_notified = false;
        self.arm_drain_check(audio, now);
    }

    /// `--decode none`: the packet's length from its TOC byte, played as silence of that length
    /// (the queues, timing and power-down are the same; levels are not measured).
    fn silence_for(&mut self, io: &mut PlaybackIo<'_>, rate: i32, packet: &[u8]) -> Option<Decoded> {
        let Some(n48) = toc_duration_48k(packet) else {
            io.speech.dropped(Drop::Undecodable);
            return None;
        };
        // The rates a decoder would run at; a rate no decoder runs at drops the packet as the
        // full path does.
        let Some(dec) = u32::try_from(rate).ok().filter(|r| OPUS_RATES.contains(r)) else {
            io.trace
                .log(LogLevel::Error, "AudioService", || "Audio decoder is not configured");
            io.speech.dropped(Drop::Undecodable);
            return None;
        };
        let out_rate = io.out_rate;
        let out = if out_rate > 0 { out_rate } else { dec };
        let n = (u64::from(n48) * u64::from(out) / 48_000) as usize;
        let samples = match &self.silence {
            Some(z) if z.len() == n => z.clone(),
            _ => {
                let z: Arc<[i16]> = vec![0; n].into();
                self.silence = Some(z.clone());
                z
            }
        };
        Some(((dec, out), samples))
    }

    /// Decodes one packet with the decoder made for the server's parameters (`SetDecodeSampleRate`:
    /// a changed rate closes the decoder and opens a new one).
    fn decode(&mut self, io: &mut PlaybackIo<'_>, server: (i32, i32), packet: &[u8]) -> Option<Decoded> {
        let (rate, frame_ms) = server;
        let out_rate = io.out_rate;
        if self.decoder.is_none() || self.decoder_for != server {
            self.decoder_for = server;
            match DecodeStream::open(io.codecs, rate, frame_ms, out_rate) {
                Ok(d) => {
                    if rate as u32 != out_rate {
                        io.trace.log(LogLevel::Info, "AudioService", || {
                            format!("Resampling audio from {rate} to {out_rate}")
                        });
                    }
                    self.decoder = Some(d);
                    self.decoder_failed = false;
                }
                Err(_) => {
                    self.decoder = None;
                    if !self.decoder_failed {
                        self.decoder_failed = true;
                        io.trace.log(
                            LogLevel::Error,
                            "AudioService",
                            || "Failed to create audio decoder, error code: -1",
                        );
                    }
                }
            }
        }
        let Some(decoder) = self.decoder.as_mut() else {
            io.trace
                .log(LogLevel::Error, "AudioService", || "Audio decoder is not configured");
            io.speech.dropped(Drop::Undecodable);
            return None;
        };
        let rates = decoder.rates();
        let Ok(samples) = decoder.decode(packet) else {
            io.trace.log(
                LogLevel::Error,
                "AudioService",
                || "Failed to decode audio after resize, error code: -1",
            );
            io.speech.dropped(Drop::Undecodable);
            return None;
        };
        Some((rates, samples))
    }
}
