//! The backend's ear and voice: microphone frames in (counted, decoded, an utterance found by
//! the server's VAD rule with energy for the model: [`crate::backend::vad`]), `listen`/`abort`
//! messages, and speech out (an [`Agenda`] of `tts` messages and paced Opus packets), as the
//! personality's [`VoiceSpec`] says.
//!
//! What a turn is, as xinnan-py has it (docs/reference/voice.md §5): an utterance ends by the VAD
//! (auto mode), at `listen stop`, or with a `listen detect` text; it is then *chatted*
//! (`startToChat`, `receiveAudioHandle.py:43-103`): speech of the backend still going is
//! aborted first (not in manual mode), an exit command closes the connection, a wake word may be
//! answered from the server's response cache, and anything else is shown (`stt`), `tts start`
//! is sent and the LLM — the script — answers it. Only that last kind is an utterance the script's
//! `await utterance` gets.

use serde::Serialize;

use crate::backend::spec::{BinaryFraming, VoiceSpec};
pub use crate::backend::vad::rms_dbfs;
use crate::backend::vad::{Ear, Heard, remove_punctuation, trim_for_stt};
use crate::backend::{Action, Session, ms};
use crate::time::{MAX_SOUND, SimDuration, SimTime};
use crate::voice::codec::{FRAME_MS, MIC_RATE};
use crate::voice::memo::CodecPool;
use crate::voice::speak::{Agenda, Said, Timbre, llm_message, natural_duration, stt_message, synthesize_text};
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
    /// When the VAD's window last said voice, ms.
    pub last_voice_ms: f64,
    /// Microphone frames received during it (the ASR buffer's frames).
    pub frames: u64,
    /// Frames received after the last one whose own level was voice, up to the one that ended
    /// the utterance: the backend's own delay, in frames (0 for a detect text).
    pub frames_after_voice: u64,
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
    /// Microphone frames dropped because the backend had just been woken (a detect text).
    pub ignored_after_wake: u64,
    /// Voice that ended too short to be recognised (no turn).
    pub too_short: u64,
}

/// A session's voice state.
#[derive(Default)]
pub(crate) struct VoiceSide {
    pub(crate) agenda: Agenda,
    ear: Ear,
    pub(crate) report: VoiceReport,
    version: i32,
    sentences_in_turn: usize,
    /// The microphone decoder (one per connection, as the server's).
    decoder: Option<DecodeStream>,
    /// `client_listen_mode` (`auto` until a `listen` message names one).
    mode: String,
    /// `just_woken_up`: `Some(None)` until the next microphone frame, then `Some(Some(t))`:
    /// audio is ignored until `t` + `ignore_audio` (`receiveAudioHandle.py:21-40`).
    woken: Option<Option<SimTime>>,
    /// `client_abort`: the device aborted; the rest of the turn is not spoken
    /// (`sendAudioHandle.py:215-218, 240-242`, `tts/base.py:372-374`) until the next chat.
    aborted: bool,
    /// Wake words answered from the response cache (which reply comes next).
    wake_replies: usize,
    /// The microphone frame (1-based, of this connection) last voice by its own level.
    last_loud: u64,
    /// Where Opus work is done when many sessions share it (`Session::share_codecs`).
    codecs: Option<std::sync::Arc<dyn CodecPool>>,
    /// The connection came from xiaozhi-mqtt-gateway (`?from=mqtt_gateway`): audio both ways
    /// has a 16-byte header (`connection.py:228, 372-398`, `sendAudioHandle.py:81-113`).
    from_gateway: bool,
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
            mode: "auto".to_string(),
            ..VoiceSide::default()
        }
    }
}

impl Session {
    fn voice_spec(&self) -> Option<&VoiceSpec> {
        self.spec.voice.as_ref()
    }

    /// A binary frame from the device (microphone audio; taken as raw Opus, as xinnan-py does):
    /// decoded (`connection.py:529-548`; a packet of 2 bytes or fewer is silence, not decoded),
    /// judged by the VAD, then — unless audio is ignored after waking — put in the ASR buffer,
    /// which ends the utterance once the VAD says voice has stopped (`asr/base.py:61-81`).
    pub fn handle_binary(&mut self, now: SimTime, frame: &[u8]) {
        // From the gateway: the Opus after its 16-byte header (`_process_mqtt_audio_message`).
        let frame = if self.voice.from_gateway && frame.len() >= 16 {
            &frame[16..]
        } else {
            frame
        };
        let v = &mut self.voice;
        v.report.frames_in += 1;
        v.report.bytes_in += frame.len() as u64;
        let Some(spec) = self.spec.voice.as_ref().map(|v| v.vad.clone()) else {
            return;
        };
        let codecs = self.voice.codecs.clone();
        let v = &mut self.voice;
        /// A packet of 2 bytes or fewer: a frame of silence, not decoded.
        static SILENCE: [i16; (MIC_RATE * FRAME_MS / 1000) as usize] = [0; (MIC_RATE * FRAME_MS / 1000) as usize];
        let decoded;
        let pcm: &[i16] = if frame.len() > 2 {
            if v.decoder.is_none() {
                v.decoder = DecodeStream::open(codecs.as_ref(), MIC_RATE as i32, FRAME_MS as i32, MIC_RATE).ok();
            }
            // What does not decode is dropped (`_decode_opus_packet` returns None).
            match v.decoder.as_mut().map(|d| d.decode(frame)) {
                Some(Ok(pcm)) => {
                    decoded = pcm;
                    &decoded
                }
                _ => return,
            }
        } else {
            &SILENCE
        };
        let loud = rms_dbfs(pcm) >= spec.voice_dbfs;
        if loud {
            v.last_loud = v.report.frames_in;
        }
        let manual = v.mode == "manual";
        // `is_vad` runs first, whatever follows (`receiveAudioHandle.py:19`); manual mode takes
        // every packet as voice without judging it (`silero.py:56-58`).
        let have = manual || v.ear.vad(now, pcm, &spec);
        // Just woken: the frame is dropped, and detection resumes 2 s after the first one
        // (`receiveAudioHandle.py:21-26, 37-40`).
        let ignore = self
            .spec
            .voice
            .as_ref()
            .and_then(|s| s.detect.as_ref())
            .map_or(SimDuration::ZERO, |d| d.ignore_audio.0);
        if let Some(w) = &mut v.woken {
            let since = *w.get_or_insert(now);
            if now < since + ignore {
                v.report.ignored_after_wake += 1;
                return;
            }
            v.woken = None;
        }
        if manual {
            v.ear.frames += 1;
            v.ear.heard |= loud;
            return;
        }
        match v.ear.buffer(have, loud, &spec) {
            Heard::Nothing => {}
            Heard::Ended => self.end_utterance(now, UtteranceEnd::EndOfSpeech, None),
            Heard::TooShort => {
                v.report.too_short += 1;
                self.notes.push(format!(
                    "{:.0} ms: voice of {} frames ended; {} or fewer are not recognised (asr/base.py:79), so no turn",
                    ms(now),
                    v.ear.frames,
                    spec.min_frames
                ));
                self.reset_ear();
            }
        }
    }

    /// The utterance in the ear ends at `now` (`how`; `text` for a `listen detect`): recorded,
    /// the ear reset, and chatted ([`Session::chat`]).
    fn end_utterance(&mut self, now: SimTime, how: UtteranceEnd, text: Option<String>) {
        let ear = std::mem::take(&mut self.voice.ear);
        let started = ear.first_voice.unwrap_or(now);
        let voice_ms = match (ear.first_voice, ear.last_voice) {
            (Some(a), Some(b)) => ms(b) - ms(a) + f64::from(FRAME_MS),
            _ => 0.0,
        };
        let u = Utterance {
            started_ms: ms(started),
            ended_ms: ms(now),
            voice_ms,
            last_voice_ms: ms(ear.last_voice.unwrap_or(now)),
            frames: ear.frames,
            frames_after_voice: if how == UtteranceEnd::Detect {
                0
            } else {
                self.voice.report.frames_in.saturating_sub(self.voice.last_loud)
            },
            how,
            text: text.clone(),
        };
        let shown = text.unwrap_or_else(|| {
            format!(
                "(speech of {:.1} s; the twin has no speech recogniser)",
                voice_ms.max(ear.frames as f64 * f64::from(FRAME_MS)) / 1000.0
            )
        });
        self.chat(now, &shown, u);
    }

    /// `startToChat` (`receiveAudioHandle.py:43-103`) with the user's words `text`: aborts the
    /// backend's speech still going (not in manual mode), closes on an exit command
    /// (`intentHandler.py:53-63`), answers a wake word from the response cache
    /// (`helloHandle.py:66-124`), or shows the words (`stt`, then `tts start`) and hands them
    /// to the script as an utterance.
    fn chat(&mut self, now: SimTime, text: &str, u: Utterance) {
        let Some(spec) = self.voice_spec().cloned() else {
            self.voice.report.utterances.push(u);
            return;
        };
        let sid = self.session_id.clone();
        if self.voice.mode != "manual" && (self.voice.agenda.in_turn() || self.is_speaking()) {
            self.voice.agenda.abort(now);
            self.voice.aborted = true;
            self.notes.push(format!(
                "{:.0} ms: the user spoke while the backend was speaking: its speech aborted (tts stop) before the new turn (receiveAudioHandle.py:86-88)",
                ms(now)
            ));
        }
        let filtered = remove_punctuation(text);
        if let Some(d) = &spec.detect {
            if d.exit_commands.contains(&filtered) {
                self.voice.agenda.message(now, stt_message(&filtered, &sid));
                self.voice.agenda.start_turn(now);
                self.notes.push(format!(
                    "{:.0} ms: `{filtered}` is an exit command: the backend closes the connection",
                    ms(now)
                ));
                self.drain_agenda(now);
                self.close();
                return;
            }
            if d.reply_cache && d.wake_words.contains(&filtered) {
                self.voice.woken.get_or_insert(None);
                let n = self.voice.wake_replies;
                self.voice.wake_replies += 1;
                let (reply, length) = match n.checked_sub(1).filter(|_| !d.replies.is_empty()) {
                    None => (d.first_reply.clone(), d.first_reply_for.0),
                    Some(i) => {
                        let r = d.replies[i % d.replies.len()].clone();
                        let l = natural_duration(&r).min(MAX_SOUND);
                        (r, l)
                    }
                };
                self.notes.push(format!(
                    "{:.0} ms: `{text}` is a wake word: answered from the response cache ({reply}), no stt, no LLM (helloHandle.py:66-124)",
                    ms(now)
                ));
                self.voice.aborted = false;
                self.voice.agenda.start_turn(now);
                self.voice.sentences_in_turn = 0;
                self.say(now, &reply, &Timbre::default(), length, &spec);
                self.voice.agenda.stop_turn(now);
                self.drain_agenda(now);
                return;
            }
        }
        self.voice.report.utterances.push(u);
        if spec.stt_then_tts_start {
            self.voice.agenda.message(now, stt_message(trim_for_stt(text), &sid));
            self.voice.agenda.start_turn(now);
            self.voice.sentences_in_turn = 0;
        }
        self.voice.aborted = false;
        self.drain_agenda(now);
    }

    /// Utterances received so far (what `await utterance` waits for).
    pub fn utterances(&self) -> usize {
        self.voice.report.utterances.len()
    }

    /// Resets the ear (`reset_audio_states`), keeping the decoder.
    fn reset_ear(&mut self) {
        self.voice.ear = Ear::default();
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
                // `listenMessageHandler.py:30-31`: any listen message may set the mode.
                if let Some(mode) = v.get("mode").and_then(serde_json::Value::as_str) {
                    self.voice.mode = mode.to_string();
                }
                match state {
                    // `listenMessageHandler.py:35-37`.
                    "start" => self.reset_ear(),
                    // `listenMessageHandler.py:38-54`: what is buffered goes to the ASR, whatever
                    // its length; the twin's stand-in hears words if a frame was voice.
                    "stop" if self.voice.ear.frames > 0 => {
                        if self.voice.ear.heard {
                            self.end_utterance(now, UtteranceEnd::ListenStop, None);
                        } else {
                            self.notes.push(format!(
                                "{:.0} ms: listen stop with {} frames and no voice in them: the ASR hears nothing, no turn",
                                ms(now),
                                self.voice.ear.frames
                            ));
                            self.reset_ear();
                        }
                    }
                    "detect" => {
                        self.reset_ear();
                        if let Some(text) = v["text"].as_str() {
                            self.detect(now, text);
                        }
                    }
                    _ => {}
                }
            }
            Some("abort") => {
                let why = v["reason"].as_str().unwrap_or("").to_string();
                self.voice.report.aborts.push(why);
                if self.voice_spec().is_some() {
                    self.voice.agenda.abort(now);
                    self.voice.aborted = true;
                    self.notes.push(format!(
                        "abort at {:.0} ms: queued speech dropped, tts stop sent; the rest of the turn is not spoken",
                        ms(now)
                    ));
                    self.drain_agenda(now);
                }
            }
            _ => {}
        }
    }

    /// A `listen detect` text (`listenMessageHandler.py:55-116`): a wake word with the greeting
    /// off is shown and stopped; a wake word chats the greeting text; anything else chats as it
    /// is. A chat started here ignores the microphone for a while.
    fn detect(&mut self, now: SimTime, text: &str) {
        let utterance = |text: &str| Utterance {
            started_ms: ms(now),
            ended_ms: ms(now),
            voice_ms: 0.0,
            last_voice_ms: ms(now),
            frames: 0,
            frames_after_voice: 0,
            how: UtteranceEnd::Detect,
            text: Some(text.to_string()),
        };
        let Some(d) = self.voice_spec().and_then(|s| s.detect.clone()) else {
            self.chat(now, text, utterance(text));
            return;
        };
        let wake = d.wake_words.iter().any(|w| *w == remove_punctuation(text));
        if wake && !d.greeting {
            let sid = self.session_id.clone();
            self.voice.agenda.message(now, stt_message(trim_for_stt(text), &sid));
            self.voice.agenda.start_turn(now);
            self.voice.agenda.stop_now(now);
            self.drain_agenda(now);
            return;
        }
        self.voice.woken.get_or_insert(None);
        let said = if wake {
            d.greeting_text.clone()
        } else {
            text.to_string()
        };
        self.chat(now, &said, utterance(&said));
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
        if self.voice.aborted {
            self.notes.push(format!(
                "{:.0} ms: `speak {text}` not spoken: the device aborted this turn (client_abort, sendAudioHandle.py:240-242)",
                ms(now)
            ));
            return;
        }
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
        self.say(now, text, timbre, duration, &spec);
        self.drain_agenda(now);
    }

    /// One sentence into the open turn: its audio encoded (or shared), recorded, queued.
    fn say(&mut self, now: SimTime, text: &str, timbre: &Timbre, duration: SimDuration, spec: &VoiceSpec) {
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
                        BinaryFraming::Raw if self.voice.from_gateway => {
                            let sequence = (self.voice.report.frames_out - 1) as u32;
                            gateway_frame(&p, sequence, now)
                        }
                        BinaryFraming::Raw => p,
                        BinaryFraming::DeviceVersion => crate::voice::frame::pack(self.voice.version, &p, 0),
                    };
                    self.outbox.push_back(Action::Binary(frame));
                }
            }
        }
    }

    /// The connection came from xiaozhi-mqtt-gateway (its URL ends in `?from=mqtt_gateway`):
    /// audio both ways carries the gateway's 16-byte header.
    pub fn set_from_mqtt_gateway(&mut self) {
        self.voice.from_gateway = true;
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

/// `_send_to_mqtt_gateway`'s frame: type 1, the length (u16) at 2, the sequence at 4, the
/// timestamp (wall-clock ms mod 2^32; here virtual) at 8, the length (u32) at 12, then the Opus.
fn gateway_frame(opus: &[u8], sequence: u32, now: SimTime) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + opus.len());
    out.push(1);
    out.push(0);
    out.extend_from_slice(&(opus.len() as u16).to_be_bytes());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&((now.as_micros() / 1000) as u32).to_be_bytes());
    out.extend_from_slice(&(opus.len() as u32).to_be_bytes());
    out.extend_from_slice(opus);
    out
}
