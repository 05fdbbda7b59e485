//! The backend's ear and voice: microphone frames in (counted, decoded, an utterance found with
//! a plain energy rule), `listen`/`abort` messages, and speech out (an [`Agenda`] of `tts`
//! messages and paced Opus packets), as the personality's [`VoiceSpec`] says.
//!
//! The end-of-utterance rule, documented because it stands in for a model: a 60 ms frame is
//! *voice* when its decoded RMS is at least `voice_dbfs` (sine-referenced dBFS); DTX packets
//! (≤ 2 bytes) are quiet. An utterance starts at the first voice frame and ends after
//! `end_of_speech` of quiet frames (or at `listen stop`, or at once for `listen detect` text).

use serde::Serialize;

use crate::backend::spec::{BinaryFraming, VoiceSpec};
use crate::backend::{Action, Session, ms};
use crate::time::{SimDuration, SimTime};
use crate::voice::codec::{FRAME_MS, MIC_RATE};
use crate::voice::memo::CodecPool;
use crate::voice::speak::{Agenda, Said, Timbre, llm_message, stt_message, synthesize_text};
use crate::voice::stream::DecodeStream;

/// How an utterance ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UtteranceEnd {
    /// Quiet after voice in the microphone audio (the energy rule).
    EndOfSpeech,
    /// The device sent `listen stop` (push-to-talk released).
    ListenStop,
    /// The device sent `listen detect` with a text (wake word, or typed input).
    Detect,
}

/// One utterance the backend received.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Utterance {
    /// When it started (first voice frame, or the detect message), ms.
    pub started_ms: f64,
    /// When the backend decided it was over, ms.
    pub ended_ms: f64,
    /// Voice duration, first to last voice frame, ms.
    pub voice_ms: f64,
    /// When the last voice frame arrived, ms (`ended_ms` less the end-of-speech wait).
    pub last_voice_ms: f64,
    /// Microphone frames received during it.
    pub frames: u64,
    /// How it ended.
    pub how: UtteranceEnd,
    /// The text (`listen detect` only; the twin has no speech recogniser).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// One sentence the backend spoke.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spoken {
    /// The `sentence_start` text.
    pub text: String,
    /// When its audio was ready (the `sentence_start` goes out then), ms.
    pub at_ms: f64,
    /// Opus packets.
    pub packets: usize,
    /// Audio duration, ms.
    pub audio_ms: f64,
    /// What it sounded like.
    pub timbre: String,
}

/// The voice part of a connection's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VoiceReport {
    /// Binary frames received (microphone).
    pub frames_in: u64,
    /// Bytes of those frames.
    pub bytes_in: u64,
    /// `listen` messages from the device, in order (`start auto`, `stop`, `detect 你好小智`).
    pub listen: Vec<String>,
    /// `abort` messages from the device (with their reason, if any).
    pub aborts: Vec<String>,
    /// Utterances found.
    pub utterances: Vec<Utterance>,
    /// Sentences spoken.
    pub spoken: Vec<Spoken>,
    /// Binary frames sent (speech).
    pub frames_out: u64,
}

#[derive(Default)]
struct Ear {
    decoder: Option<DecodeStream>,
    speech_start: Option<SimTime>,
    last_voice: Option<SimTime>,
    frames: u64,
}

/// A session's voice state.
#[derive(Default)]
pub(crate) struct VoiceSide {
    pub(crate) agenda: Agenda,
    ear: Ear,
    pub(crate) report: VoiceReport,
    version: i32,
    sentences_in_turn: usize,
    /// Where Opus work is done when many sessions share it (`Session::share_codecs`).
    codecs: Option<std::sync::Arc<dyn CodecPool>>,
}

impl std::fmt::Debug for VoiceSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoiceSide")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl VoiceSide {
    pub(crate) fn new(session_id: &str, protocol_version: i32) -> VoiceSide {
        VoiceSide {
            agenda: Agenda::new(session_id),
            version: protocol_version,
            ..VoiceSide::default()
        }
    }
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

impl Session {
    fn voice_spec(&self) -> Option<&VoiceSpec> {
        self.spec.voice.as_ref()
    }

    /// A binary frame from the device (microphone audio; taken as raw Opus, as xinnan-py does).
    pub fn handle_binary(&mut self, now: SimTime, frame: &[u8]) {
        let v = &mut self.voice;
        v.report.frames_in += 1;
        v.report.bytes_in += frame.len() as u64;
        let Some((voice_dbfs, end_of_speech)) = self.spec.voice.as_ref().map(|v| (v.voice_dbfs, v.end_of_speech.0))
        else {
            return;
        };
        let ear = &mut self.voice.ear;
        if ear.speech_start.is_some() {
            ear.frames += 1;
        }
        let codecs = self.voice.codecs.clone();
        let voiced = frame.len() > 2 && {
            if ear.decoder.is_none() {
                ear.decoder = DecodeStream::open(codecs.as_ref(), MIC_RATE as i32, FRAME_MS as i32, MIC_RATE).ok();
            }
            ear.decoder
                .as_mut()
                .is_some_and(|d| d.decode(frame).is_ok_and(|pcm| rms_dbfs(&pcm) >= voice_dbfs))
        };
        if voiced {
            if ear.speech_start.is_none() {
                ear.speech_start = Some(now);
                ear.frames = 1;
            }
            ear.last_voice = Some(now);
        } else if let (Some(_), Some(last)) = (ear.speech_start, ear.last_voice)
            && now.saturating_since(last) >= end_of_speech
        {
            self.end_utterance(now, UtteranceEnd::EndOfSpeech, None);
        }
    }

    fn end_utterance(&mut self, now: SimTime, how: UtteranceEnd, text: Option<String>) {
        let ear = std::mem::take(&mut self.voice.ear);
        let started = ear.speech_start.unwrap_or(now);
        let voice_ms = match (ear.speech_start, ear.last_voice) {
            (Some(a), Some(b)) => ms(b) - ms(a) + f64::from(FRAME_MS),
            _ => 0.0,
        };
        self.voice.ear.decoder = ear.decoder;
        let u = Utterance {
            started_ms: ms(started),
            ended_ms: ms(now),
            voice_ms,
            last_voice_ms: ms(ear.last_voice.unwrap_or(now)),
            frames: ear.frames,
            how,
            text: text.clone(),
        };
        let shown = text.unwrap_or_else(|| {
            format!(
                "(speech of {:.1} s; the twin has no speech recogniser)",
                voice_ms / 1000.0
            )
        });
        self.voice.report.utterances.push(u);
        if self.voice_spec().is_some_and(|s| s.stt_then_tts_start) {
            let sid = self.session_id.clone();
            self.voice.agenda.message(now, stt_message(&shown, &sid));
            self.voice.agenda.start_turn(now);
            self.voice.sentences_in_turn = 0;
        }
        self.drain_agenda(now);
    }

    /// Utterances received so far (what `await utterance` waits for).
    pub fn utterances(&self) -> usize {
        self.voice.report.utterances.len()
    }

    /// A `listen` or `abort` message from the device.
    pub(crate) fn on_voice_text(&mut self, now: SimTime, v: &serde_json::Value) {
        match crate::backend::frame_type(v) {
            Some("listen") => {
                let state = v["state"].as_str().unwrap_or("");
                let shown = match state {
                    "start" => format!("start {}", v["mode"].as_str().unwrap_or("")),
                    "detect" => format!("detect {}", v["text"].as_str().unwrap_or("")),
                    other => other.to_string(),
                };
                self.voice.report.listen.push(shown);
                match state {
                    "stop" if self.voice.ear.speech_start.is_some() => {
                        self.end_utterance(now, UtteranceEnd::ListenStop, None)
                    }
                    "detect" => {
                        let text = v["text"].as_str().map(str::to_string);
                        self.end_utterance(now, UtteranceEnd::Detect, text);
                    }
                    _ => {}
                }
            }
            Some("abort") => {
                let why = v["reason"].as_str().unwrap_or("").to_string();
                self.voice.report.aborts.push(why);
                if self.voice_spec().is_some() {
                    self.voice.agenda.abort(now);
                    self.notes.push(format!(
                        "abort at {:.0} ms: queued speech dropped, tts stop sent",
                        ms(now)
                    ));
                    self.drain_agenda(now);
                }
            }
            _ => {}
        }
    }

    /// The `stt` frame this backend shows before a tool call (none when it has no voice).
    pub(crate) fn tool_call_stt(&self, llm_name: &str) -> Option<String> {
        let t = self.voice_spec()?.tool_call_stt.as_ref()?;
        Some(stt_message(&t.replace("{tool}", llm_name), &self.session_id))
    }

    /// Speaks `text` (its audio ready at `now`): in the open turn, or a new one.
    pub fn speak(&mut self, now: SimTime, text: &str, timbre: &Timbre, duration: SimDuration) {
        let Some(spec) = self.voice_spec().cloned() else {
            self.notes
                .push(format!("`speak {text}`: this personality has no voice"));
            return;
        };
        if !self.voice.agenda.in_turn() {
            self.voice.agenda.start_turn(now);
            self.voice.sentences_in_turn = 0;
        }
        if self.voice.sentences_in_turn == 0
            && let Some(e) = &spec.emotion
        {
            let sid = self.session_id.clone();
            self.voice.agenda.message(now, llm_message(e, &sid));
        }
        let packets = match &self.voice.codecs {
            Some(pool) => pool.speech(timbre, text, duration, spec.tts_rate).to_vec(),
            None => synthesize_text(timbre, text, duration, spec.tts_rate),
        };
        self.voice.report.spoken.push(Spoken {
            text: text.to_string(),
            at_ms: ms(now),
            packets: packets.len(),
            audio_ms: (packets.len() as u64 * u64::from(FRAME_MS)) as f64,
            timbre: timbre.describe(),
        });
        self.voice.sentences_in_turn += 1;
        self.voice.agenda.sentence(now, text, packets);
        self.drain_agenda(now);
    }

    /// Ends the open turn: `tts stop` once the queue is empty plus 7 frames.
    pub fn end_turn(&mut self, now: SimTime) {
        if self.voice.agenda.in_turn() {
            self.voice.agenda.stop_turn(now);
            self.drain_agenda(now);
        }
    }

    /// Whether the backend still has speech to send.
    pub fn is_speaking(&self) -> bool {
        !self.voice.agenda.is_empty()
    }

    /// Moves what is due of the agenda into the outbox.
    pub(crate) fn drain_agenda(&mut self, now: SimTime) {
        let framing = self.voice_spec().map_or(BinaryFraming::Raw, |s| s.binary);
        while let Some((_, said)) = self.voice.agenda.pop_due(now) {
            match said {
                Said::Json(t) => self.outbox.push_back(Action::Send(t)),
                Said::Audio(p) => {
                    self.voice.report.frames_out += 1;
                    let frame = match framing {
                        BinaryFraming::Raw => p,
                        BinaryFraming::DeviceVersion => crate::voice::frame::pack(self.voice.version, &p, 0),
                    };
                    self.outbox.push_back(Action::Binary(frame));
                }
            }
        }
    }

    /// Does this session's Opus work (its ear, its speech) in `pool`, shared with other
    /// sessions: the built-in backend of a fleet encodes a reply once for every device.
    pub fn share_codecs(&mut self, pool: std::sync::Arc<dyn CodecPool>) {
        self.voice.codecs = Some(pool);
    }

    /// The voice part of the report.
    pub fn voice_report(&self) -> &VoiceReport {
        &self.voice.report
    }
}
