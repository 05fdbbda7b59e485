//! The server's ear as xinnan-py builds it (docs/reference/voice.md §5.1): Silero VAD's
//! windowing on 512-sample chunks and the ASR buffer's rules, with an energy level per chunk in
//! place of the model's speech probability, plus the server's text rules for `stt` and wake
//! words.
//!
//! Per microphone packet, in the server's order (`receiveAudioHandle.py:17-34`): the VAD runs on
//! the packet's chunks (`silero.py:55-114`), then — unless audio is ignored after waking — the
//! ASR buffer takes the packet (`asr/base.py:61-81`). Times are packet arrival times, as the
//! server's `time.time()` is.

use std::collections::VecDeque;

use crate::backend::spec::VadSpec;
use crate::time::SimTime;

/// The VAD and ASR-buffer state of one connection (`reset_audio_states` clears it,
/// `connection.py:1688-1703`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Ear {
    /// `client_audio_buffer`: samples not yet judged (less than a chunk).
    buf: Vec<i16>,
    /// `client_voice_window`.
    window: VecDeque<bool>,
    /// `last_is_voice`: the verdict of the chunk before (for levels between the thresholds).
    last_is_voice: bool,
    /// `client_have_voice`: voice was found since the reset.
    pub(crate) have_voice: bool,
    /// `client_voice_stop`: voice has stopped.
    pub(crate) voice_stop: bool,
    /// `vad_last_voice_time`: when the window last said voice.
    pub(crate) last_voice: Option<SimTime>,
    /// When the window first said voice (for the report).
    pub(crate) first_voice: Option<SimTime>,
    /// `len(asr_audio)`: 60 ms frames in the ASR buffer.
    pub(crate) frames: u64,
    /// A frame in the buffer was voice by its own level (what the twin's stand-in for the ASR
    /// hears: text, or nothing).
    pub(crate) heard: bool,
}

impl Ear {
    /// `is_vad` for one packet's samples at `now` (not called in manual mode, where the server
    /// takes every packet as voice); the window's last verdict.
    pub(crate) fn vad(&mut self, now: SimTime, pcm: &[i16], spec: &VadSpec) -> bool {
        let chunk = spec.chunk.max(1);
        let window = spec.window.max(1);
        self.buf.extend_from_slice(pcm);
        let mut have = false;
        let mut at = 0;
        while self.buf.len() - at >= chunk {
            let db = rms_dbfs(&self.buf[at..at + chunk]);
            at += chunk;
            let is_voice = if db >= spec.voice_dbfs {
                true
            } else if db <= spec.quiet_dbfs {
                false
            } else {
                self.last_is_voice
            };
            self.last_is_voice = is_voice;
            if self.window.len() == window {
                self.window.pop_front();
            }
            self.window.push_back(is_voice);
            have = self.window.iter().filter(|&&v| v).count() >= spec.voiced_in_window;
            if self.have_voice
                && !have
                && self
                    .last_voice
                    .is_none_or(|t| now.saturating_since(t) >= spec.min_silence.0)
            {
                self.voice_stop = true;
            }
            if have {
                self.have_voice = true;
                self.last_voice = Some(now);
                self.first_voice.get_or_insert(now);
            }
        }
        self.buf.drain(..at);
        have
    }

    /// `receive_audio` in auto mode (`asr/base.py:61-81`) for one packet the VAD judged
    /// (`have`; `loud`: its own level is voice): buffered (before any voice, only the newest `keep_before_voice` frames kept);
    /// once voice has stopped, the utterance ends — or is dropped as too short — and the ear is
    /// reset.
    pub(crate) fn buffer(&mut self, have: bool, loud: bool, spec: &VadSpec) -> Heard {
        self.frames += 1;
        self.heard |= loud;
        if !have && !self.have_voice {
            self.frames = self.frames.min(spec.keep_before_voice as u64);
            self.heard = false;
            return Heard::Nothing;
        }
        if !self.voice_stop {
            return Heard::Nothing;
        }
        if self.frames > spec.min_frames as u64 {
            Heard::Ended
        } else {
            Heard::TooShort
        }
    }
}

/// What a packet did to the ASR buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heard {
    /// Nothing ended.
    Nothing,
    /// The utterance ended (the ear is to be read, then reset).
    Ended,
    /// Voice stopped, too short to be recognised (the ear is to be reset).
    TooShort,
}

/// RMS level of `pcm`, sine-referenced dBFS (a full-scale sine is 0 dBFS; silence is −∞): the
/// level the end-of-utterance rule compares with `voice_dbfs`.
pub fn rms_dbfs(pcm: &[i16]) -> f64 {
    if pcm.is_empty() {
        return f64::NEG_INFINITY;
    }
    let ms = pcm.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / pcm.len() as f64;
    if ms == 0.0 {
        return f64::NEG_INFINITY;
    }
    // Sine-referenced: a full-scale sine is 0 dBFS.
    20.0 * ((2.0 * ms).sqrt() / 32768.0).log10()
}

/// `remove_punctuation_and_length` (`core/utils/util.py:107-130`): the text without ASCII and
/// full-width punctuation and spaces (what wake words and exit commands are compared with).
pub fn remove_punctuation(text: &str) -> String {
    const FULL: &str = "！＂＃＄％＆＇（）＊＋，－。／：；＜＝＞？＠［＼］＾＿｀｛｜｝～";
    let out: String = text
        .chars()
        .filter(|&c| !(c.is_ascii_punctuation() || c == ' ' || c == '\u{3000}' || FULL.contains(c)))
        .collect();
    if out == "Yeah" { String::new() } else { out }
}

/// `get_string_no_punctuation_or_emoji` (`core/utils/textUtils.py:42-72, 109-112`): the text with
/// spaces, some punctuation and emoji trimmed from both ends (what an `stt` frame shows).
pub fn trim_for_stt(text: &str) -> &str {
    fn trimmed(c: char) -> bool {
        const SET: &str = "，,。.！!“”\"：:-－、[]【】";
        const EMOJI: [(u32, u32); 7] = [
            (0x1F600, 0x1F64F),
            (0x1F300, 0x1F5FF),
            (0x1F680, 0x1F6FF),
            (0x1F900, 0x1F9FF),
            (0x1FA70, 0x1FAFF),
            (0x2600, 0x26FF),
            (0x2700, 0x27BF),
        ];
        c.is_whitespace() || SET.contains(c) || EMOJI.iter().any(|&(a, b)| (a..=b).contains(&(c as u32)))
    }
    text.trim_matches(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Duration, SimDuration};

    fn spec() -> VadSpec {
        VadSpec {
            chunk: 512,
            voice_dbfs: -40.0,
            quiet_dbfs: -50.0,
            window: 5,
            voiced_in_window: 3,
            min_silence: Duration(SimDuration::from_millis(200)),
            keep_before_voice: 10,
            min_frames: 15,
        }
    }

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    #[test]
    fn three_of_five_chunks_make_voice_and_the_window_outlasts_the_voice_by_two_chunks() {
        let s = spec();
        let mut ear = Ear::default();
        let loud = vec![8000i16; 512];
        let quiet = vec![0i16; 512];
        let verdicts: Vec<bool> = (0..8)
            .map(|i| ear.vad(at(i), if i < 4 { &loud } else { &quiet }, &s))
            .collect();
        // Voice from the third loud chunk; after the loud ones, two more chunks still voice.
        assert_eq!(verdicts, [false, false, true, true, true, true, false, false]);
        assert_eq!(ear.last_voice, Some(at(5)));
        assert!(!ear.voice_stop, "200 ms have not passed");
        ear.vad(at(205), &quiet, &s);
        assert!(ear.voice_stop);
    }

    #[test]
    fn a_level_between_the_thresholds_keeps_the_chunk_before_it() {
        let s = spec();
        let mut ear = Ear::default();
        // -45 dBFS (between -50 and -40): as the chunk before.
        let between: Vec<i16> = vec![(32768.0 * 10f64.powf(-45.0 / 20.0) / 2f64.sqrt()) as i16; 512];
        for _ in 0..5 {
            assert!(!ear.vad(at(0), &between, &s));
        }
        for _ in 0..3 {
            ear.vad(at(0), &[9000; 512], &s);
        }
        assert!(ear.vad(at(0), &between, &s), "voice carried through the between level");
    }

    #[test]
    fn chunks_straddle_packets() {
        let s = spec();
        let mut ear = Ear::default();
        ear.vad(at(0), &[0; 960], &s);
        assert_eq!(ear.buf.len(), 960 - 512);
        ear.vad(at(60), &[0; 960], &s);
        assert_eq!(ear.buf.len(), 1920 - 3 * 512);
    }

    /// The shipped utterance (16 kHz), read with hound-free parsing of its 44-byte header.
    fn clip() -> Vec<i16> {
        let wav = include_bytes!("../../../assets/utterance-2s.wav");
        wav[44..]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect()
    }

    /// What the backend's ear decides on the real chain: the device's encoder (DTX as the
    /// device sends it: all-zero frames as a TOC byte, not decoded), the server's decoder.
    fn decided(spec: &VadSpec, lead: u64, pcm: &[i16]) -> Option<u64> {
        let mut enc = crate::voice::codec::Encoder::mic();
        let mut dec = crate::voice::codec::Decoder::new(16_000, 60, 16_000).unwrap();
        let mut ear = Ear::default();
        let start = lead as usize * 960;
        for i in 0..(start + pcm.len()).div_ceil(960) as u64 + 100 {
            let f: Vec<i16> = (0..960)
                .map(|k| {
                    (i as usize * 960 + k)
                        .checked_sub(start)
                        .and_then(|j| pcm.get(j))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            let heard = if f.iter().all(|&x| x == 0) {
                vec![0; 960]
            } else {
                dec.decode(&enc.encode(&f)).unwrap()
            };
            let now = at(i * 60);
            let have = ear.vad(now, &heard, spec);
            match ear.buffer(have, rms_dbfs(&heard) >= spec.voice_dbfs, spec) {
                Heard::Nothing => {}
                Heard::Ended => return i.checked_sub(lead),
                Heard::TooShort => ear = Ear::default(),
            }
        }
        None
    }

    #[test]
    fn speech_ends_about_300_ms_after_its_last_voiced_frame_in_every_chunk_phase() {
        let s = spec();
        let pcm = clip();
        // The clip's last 60 ms frame is voice; it is frame 33 (0-based) of 2 s.
        let last_voiced = pcm.len().div_ceil(960) as u64 - 1;
        for lead in 0..8u64 {
            for cut in [0usize, 8000] {
                let p = &pcm[cut..];
                let last = last_voiced - (cut / 960) as u64;
                let end = decided(&s, lead, p).expect("an utterance");
                let after_ms = (end - last) * 60;
                assert!(
                    (240..=360).contains(&after_ms),
                    "lead {lead}, cut {cut}: ended {after_ms} ms after the last voiced frame"
                );
            }
        }
    }

    #[test]
    fn a_short_burst_after_listen_start_is_no_utterance() {
        let s = spec();
        let pcm = clip();
        // 0.3 s of voice right after listen start: at most 15 frames buffered when it stops.
        assert_eq!(decided(&s, 0, &pcm[4800..9600]), None);
        // 1.5 s is one.
        assert!(decided(&s, 0, &pcm[4800..28800]).is_some());
    }

    #[test]
    fn text_rules_are_the_servers() {
        assert_eq!(remove_punctuation("你好，小智！"), "你好小智");
        assert_eq!(remove_punctuation("Hello, world."), "Helloworld");
        assert_eq!(remove_punctuation("Yeah!"), "");
        assert_eq!(trim_for_stt("嘿，你好呀"), "嘿，你好呀");
        assert_eq!(trim_for_stt("  “你好”。🙂"), "你好");
        assert_eq!(trim_for_stt("(speech)"), "(speech)");
    }
}
