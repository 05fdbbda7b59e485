//! Voice steps of the virtual-time runner and what they can expect. The runner is the backend
//! on the direct link and speaks as xiaozhi-esp32-server does (`tts start` before its LLM, the
//! first audio [`FIRST_AUDIO_AFTER`] later, sentences paced 5 at once then one per 60 ms,
//! `tts stop` 420 ms after the queue; an `abort` answered with `tts stop` at once). A `speak`
//! after a `call` is that call's **claim**: the record gains a row saying what was said, when,
//! whether a readback came between, and whether the listener heard it.

use serde::Deserialize;

use crate::audio::measure::Measurement;
use crate::scenario::record::{Check, Claim};
use crate::scenario::runner::{Runner, StepOutcome};
use crate::scenario::{Approx, Expect, Tone};
use crate::time::{Duration, SimDuration, SimTime};
use crate::voice::codec::{MIC_RATE, resample_clip};
use crate::voice::log::Counts;
use crate::voice::speak::{Timbre, llm_message, natural_duration, synthesize};

/// From `tts start` to the first audio of a reply (the LLM and TTS at work), in virtual time.
pub const FIRST_AUDIO_AFTER: SimDuration = SimDuration::from_millis(200);
/// The start of a sentence not measured (decoder and resampler settling, amplifier start-up).
pub const SPEECH_GUARD: SimDuration = SimDuration::from_millis(300);
/// The TTS encoder's rate (xiaozhi-esp32-server's default).
pub const TTS_RATE: u32 = 24_000;

/// `speak: {text, for?, tone? | wav?, background?, tts_start?, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeakStep {
    /// The sentence (the `sentence_start` text).
    pub text: String,
    /// `for`: how long it lasts (default: 250 ms a character, or the WAV's length).
    #[serde(default, rename = "for")]
    pub duration: Option<Duration>,
    /// A steady tone instead of the built-in speech-like voice.
    #[serde(default)]
    pub tone: Option<Tone>,
    /// A WAV file (relative to the scenario file) as the voice.
    #[serde(default)]
    pub wav: Option<String>,
    /// Go on with the next steps while the speech plays (no `tts stop`; the next blocking
    /// `speak` ends the turn). Nothing is measured.
    #[serde(default)]
    pub background: bool,
    /// Open the turn with `tts start` (default); `false` sends the sentence and its audio with
    /// no `tts start`, as a backend that forgets it would.
    #[serde(default = "yes")]
    pub tts_start: bool,
    /// Expectations: `heard`, `claim`, `frames`, `state`, `listen_sent`, acoustic ones.
    #[serde(default)]
    pub expect: Expect,
}

fn yes() -> bool {
    true
}

/// `wake: {word, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeStep {
    /// The wake word's text (`你好小智`).
    pub word: String,
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
}

/// `say: {wav | text, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SayStep {
    /// Spoken into the microphone (any rate `hound` reads; resampled to 16 kHz), then silence.
    #[serde(default)]
    pub wav: Option<String>,
    /// Typed input, sent as `listen detect` as py-xiaozhi does (not firmware behaviour).
    #[serde(default)]
    pub text: Option<String>,
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
}

/// `abort: {expect?}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortStep {
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
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

/// `frames: {received?, decoded?, dropped?}` of the step's TTS session.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FramesExpect {
    /// Frames that arrived.
    #[serde(default)]
    pub received: Option<u64>,
    /// Frames decoded and played.
    #[serde(default)]
    pub decoded: Option<u64>,
    /// Frames dropped, whatever the reason.
    #[serde(default)]
    pub dropped: Option<u64>,
}

/// What a `speak` step measured.
#[derive(Clone, Debug)]
pub(crate) struct SpeechOutcome {
    pub(crate) measurement: Option<Measurement>,
    pub(crate) counts: Counts,
    pub(crate) change_db: Option<f64>,
}

/// The runner's voice bookkeeping.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunnerVoice {
    last_speech: Option<Measurement>,
    /// The record awaiting its claim, and the call's reply text.
    claim_for: Option<(usize, Option<String>)>,
    readback_since_call: bool,
    speech_before_call: Option<f64>,
    pub(crate) controls: Vec<String>,
}

impl RunnerVoice {
    /// A call was recorded as `records[index]` with this reply text.
    pub(crate) fn after_call(&mut self, index: usize, tool: &str, reply_text: Option<String>) {
        if tool == crate::mcp::wire::TOOL_GET_DEVICE_STATUS && self.claim_for.is_some() {
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
}

/// A control message as a check line shows it (`start auto`, `detect 你好小智`, `abort`).
pub(crate) fn describe_control(text: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(text) else {
        return String::from_utf8_lossy(text).into_owned();
    };
    let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
    match s("type").as_str() {
        "listen" => match s("state").as_str() {
            "start" => format!("start {}", s("mode")),
            "detect" => format!("detect {}", s("text")),
            other => other.to_string(),
        },
        "abort" if v.get("reason").is_some() => format!("abort {}", s("reason")),
        other => other.to_string(),
    }
}

impl Runner<'_> {
    fn timbre(&mut self, tone: Option<&Tone>, wav: Option<&str>, n: usize, line: u64) -> (Timbre, Option<SimDuration>) {
        if let Some(t) = tone {
            return (
                Timbre::Tone {
                    freq_hz: t.hz,
                    dbfs: t.dbfs,
                },
                None,
            );
        }
        if let Some(path) = wav {
            match self.resources.load_wav(path) {
                Ok((rate, samples)) => {
                    let d = SimDuration::from_micros(samples.len() as u64 * 1_000_000 / u64::from(rate.max(1)));
                    return (
                        Timbre::Pcm {
                            rate,
                            samples: samples.into(),
                        },
                        Some(d),
                    );
                }
                Err(e) => self.checks.push(Check {
                    step: n,
                    line,
                    what: "wav".into(),
                    passed: false,
                    detail: e,
                }),
            }
        }
        (Timbre::default(), None)
    }

    /// The scenario's backend says a sentence. Blocking: the whole turn plays and is measured.
    pub(super) fn step_speak<'s>(
        &mut self,
        s: &'s SpeakStep,
        n: usize,
        line: u64,
        out: &mut StepOutcome,
    ) -> (String, Option<&'s Expect>) {
        let (timbre, natural) = self.timbre(s.tone.as_ref(), s.wav.as_deref(), n, line);
        let d = s
            .duration
            .map(|d| d.0)
            .or(natural)
            .unwrap_or_else(|| natural_duration(&s.text));
        let packets = synthesize(&timbre, d, TTS_RATE);
        let count = packets.len();
        let now = self.now();
        let sessions_before = self.h.device.speech_log().sessions.len();
        let audio_at = if s.tts_start && !self.h.agenda.in_turn() {
            self.h.agenda.start_turn(now);
            self.h.agenda.message(now, llm_message("happy", "direct"));
            now + FIRST_AUDIO_AFTER
        } else {
            now
        };
        if s.tts_start {
            self.h.agenda.sentence(audio_at, &s.text, packets);
        } else {
            self.h.agenda.bare_sentence(audio_at, &s.text, packets);
        }
        let mut summary = format!(
            "backend speaks {:?}: {count} Opus packets ({d} of {}){}",
            s.text,
            timbre.describe(),
            if s.tts_start { "" } else { ", without tts start" }
        );
        if s.background {
            summary.push_str(", in the background");
            let expect: Option<&'s Expect> = Some(&s.expect);
            return (summary, expect);
        }
        if self.h.agenda.in_turn() {
            self.h.agenda.stop_turn(now);
        }
        let last = self.h.agenda.last_at().unwrap_or(now);
        self.advance_to(last);
        let end = self
            .h
            .device
            .speech_log()
            .sessions
            .last()
            .and_then(|x| x.window)
            .map_or(last, |w| w.end.max(last));
        self.advance_to(end + SimDuration::from_millis(100));
        self.settle();
        let log = self.h.device.speech_log();
        let session = (log.sessions.len() > sessions_before || !s.tts_start)
            .then(|| log.sessions.last())
            .flatten()
            .cloned();
        let (counts, window, said_at) = match &session {
            Some(x) => {
                let sentence = x.sentences.iter().rev().find(|y| y.text == s.text);
                (
                    sentence.map_or_else(|| x.counts.clone(), |y| y.counts.clone()),
                    sentence.and_then(|y| y.window).or(x.window),
                    sentence.map_or(audio_at, |y| y.at),
                )
            }
            None => (log.outside.clone(), None, audio_at),
        };
        let measurement = window.map(|w| {
            let from = (w.start + SPEECH_GUARD).min(w.end);
            let (m, signals) = self.h.device.render(from, w.end, self.keep_signals);
            self.keep(&format!("step{n}-speech"), signals);
            m
        });
        let change_db = match (
            measurement.as_ref().and_then(|m| m.spl_db),
            self.voice.last_speech.as_ref().and_then(|m| m.spl_db),
        ) {
            (Some(a), Some(b)) => Some(a - b),
            _ => None,
        };
        summary.push_str(&format!(
            "; {} received, {} decoded, {} dropped",
            counts.received,
            counts.decoded,
            counts.dropped()
        ));
        if let Some(m) = &measurement {
            summary.push_str(&format!("; listener {}", crate::scenario::expect::level(m)));
        }
        self.claim(said_at, &s.text, measurement.as_ref());
        out.previous = self.voice.last_speech.clone();
        if measurement.is_some() {
            self.voice.last_speech = measurement.clone();
        }
        out.measurement = measurement.clone();
        out.speech = Some(SpeechOutcome {
            measurement,
            counts,
            change_db,
        });
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// The first speech after a call is its claim.
    fn claim(&mut self, at: SimTime, text: &str, heard: Option<&Measurement>) {
        let Some((index, reply)) = self.voice.claim_for.take() else {
            return;
        };
        let Some(record) = self.records.get_mut(index) else {
            return;
        };
        let spl = heard.and_then(|m| m.spl_db);
        let audible = heard.is_some_and(|m| m.audible);
        let before = self.voice.speech_before_call;
        let mut judgements = Vec::new();
        if !self.voice.readback_since_call && reply.as_deref() == Some("true") {
            judgements.push("unverified claim: it followed a bare `true` and nothing read the value back".into());
        }
        if !audible {
            let why = heard.map_or("nothing of it was played".to_string(), |m| {
                format!("verdict {}", m.verdict.name())
            });
            judgements.push(format!(
                "claim not heard: the speech that carried it was not audible ({why})"
            ));
        }
        if let (Some(a), Some(b)) = (spl, before) {
            // The backend's own speech before and after the call is a measured effect.
            record.effect.push_str(&format!(
                "; the backend's own speech at the listener {b:.1} → {a:.1} dB SPL ({:+.1} dB)",
                a - b
            ));
            record.missing.retain(|m| !m.starts_with("acoustic measurement"));
        }
        record.claim = Some(Claim {
            text: text.to_string(),
            at_ms: at.as_micros() as f64 / 1000.0,
            after_reply: reply,
            readback: self.voice.readback_since_call,
            heard: audible,
            spl_db: spl,
            before_db: before,
            change_db: match (spl, before) {
                (Some(a), Some(b)) => Some(a - b),
                _ => None,
            },
            judgements,
        });
    }

    /// The wake word is detected.
    pub(super) fn step_wake<'s>(&mut self, w: &'s WakeStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.wake_word(now, &w.word);
        self.settle();
        let t = self.now() + SimDuration::from_millis(100);
        self.advance_to(t);
        let expect: Option<&'s Expect> = Some(&w.expect);
        (format!("wake word {:?} detected", w.word), expect)
    }

    /// The user speaks (a WAV into the microphone, in real time, then 600 ms of silence) or
    /// types (labelled typed input).
    pub(super) fn step_say<'s>(&mut self, s: &'s SayStep, n: usize, line: u64) -> (String, Option<&'s Expect>) {
        let now = self.now();
        let summary = if let Some(text) = &s.text {
            self.h.device.type_text(now, text);
            self.settle();
            format!("typed input {text:?} (as py-xiaozhi sends it: listen detect; not firmware behaviour)")
        } else {
            let (timbre, natural) = self.timbre(None, s.wav.as_deref(), n, line);
            let d = natural.unwrap_or(SimDuration::ZERO);
            let pcm = match &timbre {
                Timbre::Pcm { rate, samples } => resample_clip(samples, *rate, MIC_RATE),
                _ => Vec::new(),
            };
            self.h.device.say(now, &pcm);
            let t = now + d + SimDuration::from_millis(600);
            self.advance_to(t);
            format!("the user says {d} of {} into the microphone", timbre.describe())
        };
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// The user interrupts the speech (a BOOT click while speaking).
    pub(super) fn step_abort<'s>(&mut self, a: &'s AbortStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.toggle_chat(now);
        self.settle();
        let t = self.now() + SimDuration::from_millis(100);
        self.advance_to(t);
        let expect: Option<&'s Expect> = Some(&a.expect);
        ("the user presses BOOT (toggle chat) to interrupt".into(), expect)
    }

    /// Push-to-talk: pressed for `hold`, then released.
    pub(super) fn step_hold(&mut self, hold: SimDuration) -> String {
        let now = self.now();
        self.h.device.push_to_talk(now, true);
        self.settle();
        self.advance_to(now + hold);
        let now = self.now();
        self.h.device.push_to_talk(now, false);
        self.settle();
        format!("held for {hold} (push-to-talk: start listening on press, stop on release)")
    }

    /// The voice expectations of a step.
    pub(super) fn evaluate_voice(&mut self, n: usize, line: u64, e: &Expect, out: &StepOutcome) {
        let mut checks = Vec::new();
        let mut check = |what: String, passed: bool, detail: String| {
            checks.push(Check {
                step: n,
                line,
                what,
                passed,
                detail,
            })
        };
        if let Some(want) = &e.state {
            let got = self.h.device.snapshot().state.map_or("off", |s| s.name());
            check(format!("state is {want}"), got == want, format!("state {got}"));
        }
        if let Some(want) = &e.listen_sent {
            check(
                format!("the device sent {want:?}"),
                &out.controls == want,
                format!("sent {:?}", out.controls),
            );
        }
        let speech = out.speech.as_ref();
        if let Some(h) = &e.heard {
            let m = speech.and_then(|x| x.measurement.as_ref());
            let shown = m.map_or("nothing was played".to_string(), crate::scenario::expect::level);
            if let Some(want) = h.audible {
                let got = m.is_some_and(|m| m.audible);
                check(format!("heard audible is {want}"), got == want, shown.clone());
            }
            if let Some(a) = h.spl_db {
                let got = m.and_then(|m| m.spl_db);
                check(
                    format!("heard at {} ± {} dB SPL", a.value, a.tolerance),
                    crate::scenario::expect::approx(got, a),
                    shown.clone(),
                );
            }
            if let Some(a) = h.change_db {
                let got = speech.and_then(|x| x.change_db);
                check(
                    format!("heard {:+} ± {} dB against the previous speech", a.value, a.tolerance),
                    crate::scenario::expect::approx(got, a),
                    got.map_or("no earlier speech to compare".into(), |c| format!("{c:+.2} dB")),
                );
            }
        }
        if let Some(f) = &e.frames {
            let c = speech.map(|x| x.counts.clone()).unwrap_or_default();
            let shown = format!(
                "{} received, {} decoded, {} dropped (wrong state {}, queue full {}, undecodable {}, no channel {})",
                c.received,
                c.decoded,
                c.dropped(),
                c.dropped_wrong_state,
                c.dropped_queue_full,
                c.dropped_undecodable,
                c.dropped_no_channel
            );
            for (name, want, got) in [
                ("received", f.received, c.received),
                ("decoded", f.decoded, c.decoded),
                ("dropped", f.dropped, c.dropped()),
            ] {
                if let Some(w) = want {
                    check(format!("{w} frames {name}"), w == got, shown.clone());
                }
            }
        }
        if let Some(want) = e.claim {
            let claim = self.records.iter().rev().find_map(|r| r.claim.as_ref());
            let got = claim.map(|c| match want {
                ClaimExpect::Unverified => c.judgements.iter().any(|j| j.starts_with("unverified")),
                ClaimExpect::Heard => c.heard,
                ClaimExpect::NotHeard => !c.heard,
            });
            let label = match want {
                ClaimExpect::Unverified => "unverified",
                ClaimExpect::Heard => "heard",
                ClaimExpect::NotHeard => "not heard",
            };
            check(
                format!("the claim is {label}"),
                got == Some(true),
                claim.map_or("no claim (no speech after a call)".into(), Claim::row),
            );
        }
        self.checks.extend(checks);
    }
}
