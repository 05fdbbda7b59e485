//! A backend's speaking side as data: what its TTS sounds like (a tone, a WAV, or a built-in
//! speech-like voice), its Opus encoding, and xiaozhi-esp32-server's pacing
//! (`core/handle/sendAudioHandle.py`, `core/utils/audioRateController.py` at 7475ea2b;
//! docs/reference/voice.md §5): the first 6 packets of a turn at once (the 5 pre-buffered and
//! the first paced one), then one per 60 ms of play position, and `tts stop` once the queue is
//! empty plus (5 + 2) × 60 ms.

use std::sync::Arc;

use crate::time::{MAX_SOUND, SimDuration, SimTime};
use crate::voice::codec::{Encoder, FRAME_MS, resample_clip};

/// `PRE_BUFFER_COUNT`: packets sent ahead of the play position at the start of a turn (with the
/// first paced packet, due at once too, 6 leave together).
pub const PRE_BUFFER: usize = 5;
/// After the last packet, `tts stop` waits `(PRE_BUFFER_COUNT + 2) × frame`.
pub const STOP_AFTER: SimDuration = SimDuration::from_millis((PRE_BUFFER as u64 + 2) * FRAME_MS as u64);
/// How long a text takes to say when no duration is given: per character.
pub const PER_CHAR: SimDuration = SimDuration::from_millis(250);
/// The shortest utterance a text gives.
pub const MIN_SPEECH: SimDuration = SimDuration::from_millis(600);

/// What the backend's speech sounds like.
#[derive(Clone, Debug, PartialEq)]
pub enum Timbre {
    /// A speech-like signal: harmonics of a voice gliding between 120 and 220 Hz with a
    /// syllable envelope at 4 Hz, never above `dbfs` peak (its peaks reach about half of it;
    /// the default voice). What it says shapes its samples: each text sets the phases of the
    /// harmonics ([`Timbre::render_text`]), so two texts never sound sample-for-sample alike
    /// while their spectrum and level are the same.
    Speechlike {
        /// Peak level, dBFS.
        dbfs: f64,
    },
    /// A steady sine.
    Tone {
        /// Frequency, Hz.
        freq_hz: f64,
        /// Level, dBFS (0 = full-scale sine).
        dbfs: f64,
    },
    /// Recorded PCM (a WAV file), looped or cut to the duration.
    Pcm {
        /// Sample rate, Hz.
        rate: u32,
        /// Mono int16 samples.
        samples: Arc<[i16]>,
    },
}

impl Default for Timbre {
    fn default() -> Self {
        Timbre::Speechlike { dbfs: -3.0 }
    }
}

impl Timbre {
    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            Timbre::Speechlike { dbfs } => format!("speech-like voice at {dbfs} dBFS"),
            Timbre::Tone { freq_hz, dbfs } => format!("tone {freq_hz} Hz at {dbfs} dBFS"),
            Timbre::Pcm { rate, samples } => format!("PCM {} samples at {rate} Hz", samples.len()),
        }
    }

    /// `duration` of this sound at `rate`, int16, saying nothing in particular (the speech-like
    /// voice as it sounds for the empty text).
    pub fn render(&self, duration: SimDuration, rate: u32) -> Vec<i16> {
        self.render_text("", duration, rate)
    }

    /// `duration` of this sound saying `text` at `rate`, int16; at most [`MAX_SOUND`] of it (the
    /// data files and scripts refuse longer sounds before they get here). Only the speech-like
    /// voice depends on the text.
    pub fn render_text(&self, text: &str, duration: SimDuration, rate: u32) -> Vec<i16> {
        let n = samples_in(duration.min(MAX_SOUND), rate);
        let fs = f64::from(rate.max(1));
        let amp = |dbfs: f64| (32768.0 * 10f64.powf(dbfs / 20.0)).min(32767.0);
        match self {
            Timbre::Tone { freq_hz, dbfs } => {
                let a = amp(*dbfs);
                (0..n)
                    .map(|i| (a * (2.0 * std::f64::consts::PI * freq_hz * i as f64 / fs).sin()).round() as i16)
                    .collect()
            }
            Timbre::Speechlike { dbfs } => {
                let a = amp(*dbfs);
                let mut phase = 0.0f64;
                let mut out = Vec::with_capacity(n);
                // Normalised so the harmonic sum never exceeds 1 (whatever the phases).
                let harmonics: Vec<usize> = (1..16).filter(|k| (*k as f64) * 220.0 < fs / 2.0).collect();
                let norm: f64 = harmonics.iter().map(|k| 0.6 / *k as f64).sum();
                let theta = text_phases(text);
                // Harmonic k's phase offset as a rotation (cos θ, sin θ), and its weight.
                let turn: Vec<(f64, f64, f64)> = harmonics
                    .iter()
                    .map(|&k| (theta[k].cos(), theta[k].sin(), 0.6 / k as f64))
                    .collect();
                for i in 0..n {
                    let t = i as f64 / fs;
                    let f0 = 120.0 + 100.0 * (0.5 + 0.5 * (2.0 * std::f64::consts::PI * 0.7 * t).sin());
                    phase += 2.0 * std::f64::consts::PI * f0 / fs;
                    let env = (2.0 * std::f64::consts::PI * 4.0 * t).sin().max(0.0).sqrt();
                    if env == 0.0 {
                        // Between syllables: silence (the harmonics need not be summed).
                        out.push(0);
                        continue;
                    }
                    // sin(kφ + θ) = Im(e^{ikφ}) cos θ + Re(e^{ikφ}) sin θ, with e^{ikφ} by
                    // repeated rotation (one sine and cosine a sample instead of one per harmonic).
                    let (s1, c1) = phase.sin_cos();
                    let (mut re, mut im) = (c1, s1);
                    let mut x = 0.0;
                    for &(ct, st, w) in &turn {
                        x += w * (im * ct + re * st);
                        (re, im) = (re * c1 - im * s1, re * s1 + im * c1);
                    }
                    out.push((a * env * x / norm).round().clamp(-32768.0, 32767.0) as i16);
                }
                out
            }
            Timbre::Pcm { rate: r, samples } => {
                let at_rate = resample_clip(samples, *r, rate);
                if at_rate.is_empty() {
                    return vec![0; n];
                }
                at_rate.iter().copied().cycle().take(n).collect()
            }
        }
    }
}

/// The phases (radians) the speech-like voice gives its 16 harmonics for `text`: all zero for
/// the empty text, otherwise drawn from a 64-bit FNV-1a hash of its bytes (splitmix64 steps).
/// A phase moves no energy between frequencies, so every text has the same spectrum and level.
fn text_phases(text: &str) -> [f64; 16] {
    let mut theta = [0.0; 16];
    if text.is_empty() {
        return theta;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    for t in theta.iter_mut().skip(1) {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        *t = std::f64::consts::TAU * (z >> 11) as f64 / (1u64 << 53) as f64;
    }
    theta
}

/// Samples in `duration` at `rate` (computed in 128 bits: no overflow for any duration).
fn samples_in(duration: SimDuration, rate: u32) -> usize {
    let n = u128::from(duration.as_micros()) * u128::from(rate) / 1_000_000;
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// How long `text` takes to say: [`PER_CHAR`] per character, at least [`MIN_SPEECH`] (a text
/// longer than [`MAX_SOUND`] to say is refused where it is read: [`check_sound`]).
pub fn natural_duration(text: &str) -> SimDuration {
    let n = text.chars().count() as u64;
    SimDuration::from_micros(PER_CHAR.as_micros().saturating_mul(n).max(MIN_SPEECH.as_micros()))
}

/// Why a sound is refused before it is made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TooLongSound {
    /// A `for` longer than [`MAX_SOUND`].
    #[error("{0} is longer than the {max} the twin makes in one sound", max = MAX_SOUND)]
    Given(SimDuration),
    /// A text whose natural length is longer than [`MAX_SOUND`].
    #[error(
        "a text of {chars} characters takes {took} to say at {per} a character, longer than the {max} the twin makes in one sound (give it `for`)",
        took = natural_duration_of(*chars), per = PER_CHAR, max = MAX_SOUND
    )]
    Text {
        /// Its characters.
        chars: usize,
    },
}

fn natural_duration_of(chars: usize) -> SimDuration {
    SimDuration::from_micros(PER_CHAR.as_micros().saturating_mul(chars as u64))
}

/// The length a speech will have (`duration`, else the text's natural length), refused beyond
/// [`MAX_SOUND`].
pub fn check_sound(text: &str, duration: Option<SimDuration>) -> Result<SimDuration, TooLongSound> {
    match duration {
        Some(d) if d > MAX_SOUND => Err(TooLongSound::Given(d)),
        Some(d) => Ok(d),
        None => {
            let d = natural_duration(text);
            if d > MAX_SOUND {
                Err(TooLongSound::Text {
                    chars: text.chars().count(),
                })
            } else {
                Ok(d)
            }
        }
    }
}

/// Encodes `duration` of `timbre` as the server's TTS encoder does at `rate`: 60 ms packets
/// (the voice saying nothing in particular: [`synthesize_text`] with the empty text).
pub fn synthesize(timbre: &Timbre, duration: SimDuration, rate: u32) -> Vec<Vec<u8>> {
    synthesize_text(timbre, "", duration, rate)
}

/// Encodes `duration` of `timbre` saying `text` as the server's TTS encoder does at `rate`.
pub fn synthesize_text(timbre: &Timbre, text: &str, duration: SimDuration, rate: u32) -> Vec<Vec<u8>> {
    let mut enc = Encoder::tts(rate);
    let pcm = timbre.render_text(text, duration, enc.rate());
    pcm.chunks(enc.frame_len()).map(|c| enc.encode(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_is_six_at_once_then_one_per_frame() {
        let t0 = SimTime::from_millis(1000);
        let mut agenda = Agenda::new("s");
        agenda.sentence(t0, "x", vec![vec![0]; 9]);
        let mut times = Vec::new();
        while let Some((at, said)) = agenda.pop_due(SimTime::from_millis(u64::MAX / 2)) {
            if matches!(said, Said::Audio(_)) {
                times.push(at.as_millis());
            }
        }
        assert_eq!(times, [1000, 1000, 1000, 1000, 1000, 1000, 1060, 1120, 1180]);
        assert_eq!(STOP_AFTER, SimDuration::from_millis(420));
    }

    #[test]
    fn synthesized_speech_is_60_ms_packets_at_the_requested_level() {
        let ps = synthesize(
            &Timbre::Tone {
                freq_hz: 1000.0,
                dbfs: -6.0,
            },
            SimDuration::from_millis(600),
            24_000,
        );
        assert_eq!(ps.len(), 10);
        assert!(ps.iter().all(|p| !p.is_empty()));
        let x = Timbre::default().render(SimDuration::from_secs(1), 24_000);
        let peak = x.iter().map(|s| i32::from(*s).abs()).max().unwrap();
        let want = 32768.0 * 10f64.powf(-3.0 / 20.0);
        assert!(
            (f64::from(peak) / want) > 0.4 && (f64::from(peak) / want) <= 1.0,
            "{peak}"
        );
        assert_eq!(natural_duration("音量已调小"), SimDuration::from_millis(1250));
        assert_eq!(natural_duration("好"), MIN_SPEECH);
    }

    #[test]
    fn each_text_sounds_different_at_the_same_level() {
        let voice = Timbre::default();
        let d = SimDuration::from_secs(2);
        let rms = |x: &[i16]| (x.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / x.len() as f64).sqrt();
        let a = voice.render_text("音量已经调小了", d, 24_000);
        let b = voice.render_text("好的，我来看看", d, 24_000);
        assert_eq!(voice.render_text("", d, 24_000), voice.render(d, 24_000));
        assert_eq!(
            a,
            voice.render_text("音量已经调小了", d, 24_000),
            "the same text, the same samples"
        );
        assert_ne!(a, b);
        // The syllable envelope is silent half the time; where either voice sounds, they differ.
        let sounding = a.iter().zip(&b).filter(|(x, y)| **x != 0 || **y != 0).count();
        let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(
            differ * 10 > sounding * 9,
            "different wherever they sound: {differ} of {sounding}"
        );
        let db = 20.0 * (rms(&a) / rms(&b)).log10();
        assert!(db.abs() < 0.05, "the same level: {db:.3} dB apart");
        let tone = Timbre::Tone {
            freq_hz: 440.0,
            dbfs: -12.0,
        };
        assert_eq!(
            tone.render_text("a", d, 8000),
            tone.render_text("b", d, 8000),
            "a tone says nothing"
        );
        // The harmonics summed by rotation are the sines of the definition (within 1 LSB).
        let theta = text_phases("音量已经调小了");
        let (fs, top) = (24_000.0, 32768.0 * 10f64.powf(-3.0 / 20.0));
        let ks: Vec<usize> = (1..16).filter(|k| (*k as f64) * 220.0 < fs / 2.0).collect();
        let norm: f64 = ks.iter().map(|k| 0.6 / *k as f64).sum();
        let mut phase = 0.0f64;
        for (i, &got) in a.iter().enumerate() {
            let t = i as f64 / fs;
            phase +=
                std::f64::consts::TAU * (120.0 + 100.0 * (0.5 + 0.5 * (std::f64::consts::TAU * 0.7 * t).sin())) / fs;
            let x: f64 = ks
                .iter()
                .map(|&k| (0.6 / k as f64) * (k as f64 * phase + theta[k]).sin())
                .sum();
            let env = (std::f64::consts::TAU * 4.0 * t).sin().max(0.0).sqrt();
            let want = (top * env * x / norm).round().clamp(-32768.0, 32767.0);
            assert!((f64::from(got) - want).abs() <= 1.0, "sample {i}: {got} vs {want}");
        }
    }

    #[test]
    fn a_speech_longer_than_ten_minutes_is_refused_and_never_rendered() {
        assert_eq!(
            check_sound("hi", Some(SimDuration::from_secs(600))),
            Ok(SimDuration::from_secs(600))
        );
        assert_eq!(
            check_sound("hi", Some(SimDuration::from_secs(100_000))),
            Err(TooLongSound::Given(SimDuration::from_secs(100_000)))
        );
        let long = "字".repeat(2401);
        assert_eq!(check_sound(&long, None), Err(TooLongSound::Text { chars: 2401 }));
        assert!(check_sound(&"字".repeat(2400), None).is_ok());
        // Whatever reaches the renderer, it makes at most ten minutes (no multiplication overflows).
        let x = Timbre::Tone {
            freq_hz: 440.0,
            dbfs: -12.0,
        }
        .render(SimDuration::from_micros(u64::MAX), 8000);
        assert_eq!(x.len(), 600 * 8000);
    }
}

/// What a speaking backend sends, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// A text frame (`tts` start/stop/sentence_start, `stt`, `llm`).
    Json(String),
    /// One Opus packet (raw; the link packs it for its protocol version).
    Audio(Vec<u8>),
}

/// JSON text as Python's `json.dumps` writes it (`", "`, `": "`, non-ASCII as `\uXXXX`):
/// xiaozhi-esp32-server's `send_tts_message` and `send_stt_message`.
pub fn tts_message(state: &str, text: Option<&str>, session_id: &str) -> String {
    let mut out = format!(
        "{{\"type\": \"tts\", \"state\": {}, \"session_id\": {}",
        py_str(state),
        py_str(session_id)
    );
    if let Some(t) = text {
        out.push_str(&format!(", \"text\": {}", py_str(t)));
    }
    out.push('}');
    out
}

/// `{"type": "stt", "text": …, "session_id": …}`.
pub fn stt_message(text: &str, session_id: &str) -> String {
    format!(
        "{{\"type\": \"stt\", \"text\": {}, \"session_id\": {}}}",
        py_str(text),
        py_str(session_id)
    )
}

/// `{"type": "llm", "text": …, "emotion": …, "session_id": …}`.
pub fn llm_message(emotion: &str, session_id: &str) -> String {
    format!(
        "{{\"type\": \"llm\", \"text\": {}, \"emotion\": {}, \"session_id\": {}}}",
        py_str(emotion_emoji(emotion)),
        py_str(emotion),
        py_str(session_id)
    )
}

fn emotion_emoji(emotion: &str) -> &'static str {
    match emotion {
        "happy" => "🙂",
        "sad" => "😔",
        _ => "😶",
    }
}

/// A Python `json.dumps` string literal.
pub fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A speaking backend's outbox in time order: turns, their sentences and paced packets.
#[derive(Clone, Debug, Default)]
pub struct Agenda {
    items: std::collections::VecDeque<(SimTime, Said)>,
    session_id: String,
    turn_packets: usize,
    last_paced: Option<SimTime>,
    last_at: Option<SimTime>,
    in_turn: bool,
}

impl Agenda {
    /// An empty agenda whose messages carry `session_id`.
    pub fn new(session_id: &str) -> Agenda {
        Agenda {
            session_id: session_id.to_string(),
            ..Agenda::default()
        }
    }

    fn push(&mut self, at: SimTime, said: Said) {
        let at = self.last_at.map_or(at, |l| l.max(at));
        self.last_at = Some(at);
        self.items.push_back((at, said));
    }

    /// Whether a turn is open (`tts start` queued, no `tts stop` yet).
    pub fn in_turn(&self) -> bool {
        self.in_turn
    }

    /// `tts start` at `at` (xinnan sends it before its LLM runs); pacing starts afresh.
    pub fn start_turn(&mut self, at: SimTime) {
        let m = tts_message("start", None, &self.session_id);
        self.push(at, Said::Json(m));
        self.turn_packets = 0;
        self.last_paced = None;
        self.in_turn = true;
    }

    /// Any other text frame at `at` (after what is already queued).
    pub fn message(&mut self, at: SimTime, text: String) {
        self.push(at, Said::Json(text));
    }

    /// One sentence whose audio is ready at `at`: `sentence_start`, then its packets paced.
    pub fn sentence(&mut self, at: SimTime, text: &str, packets: Vec<Vec<u8>>) {
        if !self.in_turn {
            self.start_turn(at);
        }
        let m = tts_message("sentence_start", Some(text), &self.session_id);
        self.push(at, Said::Json(m));
        for p in packets {
            let i = self.turn_packets;
            self.turn_packets += 1;
            let t = if i < PRE_BUFFER {
                at
            } else {
                match self.last_paced {
                    None => at,
                    Some(prev) => (prev + SimDuration::from_millis(u64::from(FRAME_MS))).max(at),
                }
            };
            if i >= PRE_BUFFER {
                self.last_paced = Some(t);
            }
            self.push(t, Said::Audio(p));
        }
    }

    /// A sentence and its paced audio with no `tts start` before it (a backend that forgets it).
    pub fn bare_sentence(&mut self, at: SimTime, text: &str, packets: Vec<Vec<u8>>) {
        let was = self.in_turn;
        self.in_turn = true;
        if !was {
            self.turn_packets = 0;
            self.last_paced = None;
        }
        self.sentence(at, text, packets);
        self.in_turn = was;
    }

    /// `tts stop` once the queue is empty plus [`STOP_AFTER`].
    pub fn stop_turn(&mut self, at: SimTime) {
        self.stop_turn_after(at, STOP_AFTER);
    }

    /// `tts stop` once the queue is empty plus `wait` (a server that stops early: 0).
    pub fn stop_turn_after(&mut self, at: SimTime, wait: SimDuration) {
        let after = self.last_at.map_or(at, |l| l.max(at));
        let m = tts_message("stop", None, &self.session_id);
        self.push(after + wait, Said::Json(m));
        self.in_turn = false;
    }

    /// `tts stop` at `at` (after what is queued), without the playback wait: a turn the
    /// backend ends as soon as it starts (a wake word with the greeting off).
    pub fn stop_now(&mut self, at: SimTime) {
        let m = tts_message("stop", None, &self.session_id);
        self.push(at, Said::Json(m));
        self.in_turn = false;
    }

    /// The device aborted at `at` (`handleAbortMessage`): queued audio is dropped and
    /// `tts stop` goes out at once, in a turn or not. A turn's own `tts stop` already on its way
    /// (the script had ended the turn) still comes: the server's `send_tts_message("stop")` was
    /// waiting for the audio queue, which the abort empties, then sleeps its 420 ms and sends
    /// (`sendAudioHandle.py:58-76, 285-311`): a second `tts stop` at the earlier of its own time
    /// and `at` + 420 ms (seen against the real server, docs/voice.md "Manual checks").
    pub fn abort(&mut self, at: SimTime) {
        let stop = tts_message("stop", None, &self.session_id);
        let pending_stop = self
            .items
            .iter()
            .filter(|(t, _)| *t > at)
            .find_map(|(t, s)| matches!(s, Said::Json(m) if *m == stop).then_some(*t));
        self.items.retain(|(t, _)| *t <= at);
        self.last_at = self.items.back().map(|(t, _)| *t);
        self.push(at, Said::Json(stop.clone()));
        if let Some(t) = pending_stop {
            self.push(t.min(at + STOP_AFTER), Said::Json(stop));
        }
        self.in_turn = false;
    }

    /// When the next item is due.
    pub fn next_at(&self) -> Option<SimTime> {
        self.items.front().map(|(t, _)| *t)
    }

    /// When the last queued item is due.
    pub fn last_at(&self) -> Option<SimTime> {
        self.items.back().map(|(t, _)| *t)
    }

    /// The next item due at or before `now`.
    pub fn pop_due(&mut self, now: SimTime) -> Option<(SimTime, Said)> {
        if self.next_at()? <= now {
            self.items.pop_front()
        } else {
            None
        }
    }

    /// Nothing left to send.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod agenda_tests {
    use super::*;

    #[test]
    fn a_turn_is_start_sentence_paced_audio_stop() {
        let mut a = Agenda::new("s");
        let t0 = SimTime::from_millis(100);
        a.sentence(t0, "音量已调小", vec![vec![1]; 8]);
        a.stop_turn(t0);
        let mut seen = Vec::new();
        while let Some((t, s)) = a.pop_due(SimTime::from_millis(10_000)) {
            seen.push((t.as_millis(), matches!(s, Said::Audio(_))));
        }
        assert_eq!(seen[0], (100, false)); // tts start
        assert_eq!(seen[1], (100, false)); // sentence_start
        let audio: Vec<u64> = seen.iter().filter(|x| x.1).map(|x| x.0).collect();
        assert_eq!(audio, [100, 100, 100, 100, 100, 100, 160, 220]);
        assert_eq!(seen.last(), Some(&(640, false)));
        assert_eq!(
            tts_message("sentence_start", Some("音量"), "s"),
            r#"{"type": "tts", "state": "sentence_start", "session_id": "s", "text": "\u97f3\u91cf"}"#
        );
    }

    #[test]
    fn abort_drops_what_was_not_sent_and_stops_at_once() {
        let mut a = Agenda::new("s");
        a.sentence(SimTime::ZERO, "x", vec![vec![1]; 20]);
        a.stop_turn(SimTime::ZERO);
        while a.pop_due(SimTime::from_millis(200)).is_some() {}
        a.abort(SimTime::from_millis(200));
        let rest: Vec<_> = std::iter::from_fn(|| a.pop_due(SimTime::from_millis(5_000))).collect();
        // The abort's stop at once, then the turn's own stop (it was waiting for the queue) 420 ms on.
        let times: Vec<u64> = rest.iter().map(|(t, _)| t.as_micros() / 1000).collect();
        assert_eq!(times, [200, 620]);
        assert!(
            rest.iter()
                .all(|(_, s)| matches!(s, Said::Json(j) if j.contains("\"stop\"")))
        );
        // Without a turn stop queued (the LLM still talking), one stop only.
        let mut b = Agenda::new("s");
        b.sentence(SimTime::ZERO, "x", vec![vec![1]; 20]);
        while b.pop_due(SimTime::from_millis(200)).is_some() {}
        b.abort(SimTime::from_millis(200));
        assert_eq!(std::iter::from_fn(|| b.pop_due(SimTime::from_millis(5_000))).count(), 1);
    }
}
