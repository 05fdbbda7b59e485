//! How the virtual-time runner performs each kind of step: MCP requests (`initialize`,
//! `list_tools`, `call`, `send`, `burst`, `readback`), the room (`play`, `listen`), the board
//! (`press`, `reboot`, power, faults, `busy`), and the voice turn (`speak`, `wake`, `say`,
//! `abort`). Each returns the step's summary and the expectations the checker judges.
//!
//! The runner is the backend on the direct link and speaks as xiaozhi-esp32-server does (`tts
//! start` before its LLM, the first audio [`FIRST_AUDIO_AFTER`] later, sentences paced 6 at once
//! then one per 60 ms, `tts stop` 420 ms after the queue; an `abort` answered with `tts stop` at
//! once). A `speak` after a `call` is that call's **claim** ([`acceptance::add_claim`]).

use crate::audio::source::Source;
use crate::harness::PROBE_GUARD;
use crate::mcp::strings;
use crate::scenario::acceptance::{self, CallSeen, DeviceCall, ScreenSeen, SeenFrom};
use crate::scenario::check::{ReplyLatency, Speech, level};
use crate::scenario::expect::Expect;
use crate::scenario::press;
use crate::scenario::record::{Check, Expectation, StepReport};
use crate::scenario::reply::{call_request, lossy, reply_id, reply_text};
use crate::scenario::runner::{Runner, StepOutcome};
use crate::scenario::runner_voice::{FIRST_AUDIO_AFTER, TTS_RATE};
use crate::scenario::{
    AbortStep, BurstStep, CallStep, FaultStep, InitializeStep, ListStep, ListenStep, PlayStep, ReadbackStep, SayStep,
    SendStep, SpeakStep, Step, Tone, WakeStep, step_key,
};
use crate::time::{Duration, SimDuration};
use crate::voice::codec::{MIC_RATE, resample_clip};
use crate::voice::speak::{Timbre, llm_message, natural_duration, synthesize_text};

impl Runner<'_> {
    /// Performs step `n` (at `line`), judges its expectations and reports it.
    pub(super) fn step(&mut self, n: usize, line: u64, step: &Step) {
        let now = self.now();
        self.advance_to(now);
        let started = self.now();
        let mut out = StepOutcome::new(started);
        let (summary, expect) = match step {
            Step::Initialize(s) => self.step_initialize(s, &mut out),
            Step::ListTools(s) => self.step_list_tools(s, &mut out),
            Step::Call(c) => self.step_call(c, n, &mut out),
            Step::Send(s) => self.step_send(s, &mut out),
            Step::Burst(b) => self.step_burst(b, &mut out),
            Step::Wait(d) => self.step_wait(d),
            Step::Readback(r) => self.step_readback(r, &mut out),
            Step::Play(p) => self.step_play(p, n, line, &mut out),
            Step::Listen(l) => self.step_listen(l, n, &mut out),
            Step::Press(p) => press::press(self, p),
            Step::ButtonDown(b) => press::button_down(self, b),
            Step::ButtonUp(b) => press::button_up(self, b),
            Step::Reboot => self.step_reboot(),
            Step::CutPower => self.step_cut_power(),
            Step::PowerOn => self.step_power_on(),
            Step::Fault(f) => self.step_fault(f),
            Step::Busy(d) => self.step_busy(d),
            Step::Note(text) => self.step_note(text),
            Step::Speak(s) => self.step_speak(s, n, line, &mut out),
            Step::Wake(w) => self.step_wake(w, n, line),
            Step::Say(s) => self.step_say(s, n, line),
            Step::Abort(a) => self.step_abort(a),
            Step::Server(text) => self.step_server(text),
        };
        if !matches!(step, Step::Call(_) | Step::ListTools(_) | Step::Readback(_)) {
            out.replies.extend(self.take_replies());
        }
        out.controls = std::mem::take(&mut self.voice.controls);
        self.collect_trace(&mut out);
        if let (Step::Call(_), Some(p)) = (step, &out.previous) {
            self.timeline.windows.push(p.clone());
        }
        if let Some(m) = &out.measurement {
            self.timeline.windows.push(m.clone());
            if !matches!(step, Step::Speak(_)) {
                self.last = Some(m.clone());
            }
        }
        if let Some(e) = expect {
            self.evaluate(n, line, e, &out);
        }
        self.steps.push(StepReport {
            n,
            line,
            kind: step_key(step),
            at_ms: started.as_micros() as f64 / 1000.0,
            summary,
            sent: out.sent.iter().map(|p| lossy(p)).collect(),
            replies: out.replies.iter().map(|(p, _)| lossy(p)).collect(),
            measurement: out.measurement.take(),
        });
        let mut events = std::mem::take(&mut out.events).into_iter();
        for len in out.chunks {
            self.trace.push_chunk(events.by_ref().take(len));
        }
    }

    /// `initialize`, with the vision capability when the step gives one. Returns the step's summary
    /// and expectations.
    fn step_initialize<'s>(&mut self, s: &'s InitializeStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(s.id);
        out.id = Some(id);
        let caps = match &s.vision_url {
            Some(url) => {
                let mut vision = serde_json::Map::new();
                vision.insert("url".into(), url.clone().into());
                if let Some(t) = &s.vision_token {
                    vision.insert("token".into(), t.clone().into());
                }
                serde_json::json!({ "vision": vision })
            }
            None => serde_json::json!({}),
        };
        let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":caps}});
        self.deliver(out, payload.to_string().into_bytes());
        self.settle();
        let summary = format!("initialize id {id}");
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// `tools/list`, following `nextCursor` unless told not to; records what was discoverable.
    /// Returns the step's summary and expectations.
    fn step_list_tools<'s>(&mut self, s: &'s ListStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let mut names = Vec::new();
        let mut pages = 0;
        let mut cursor = s.cursor.clone();
        let mut last_cursor = None;
        loop {
            let id = self.alloc_id(None);
            let mut params = serde_json::Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), c.clone().into());
            }
            if s.with_user_tools {
                params.insert("withUserTools".into(), true.into());
            }
            let payload = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params});
            self.deliver(out, payload.to_string().into_bytes());
            self.settle();
            let replies = self.take_replies();
            let page = replies
                .iter()
                .find(|(p, _)| reply_id(p) == Some(id))
                .map(|(p, _)| p.clone());
            out.replies.extend(replies);
            let Some(page) = page else { break };
            let v: serde_json::Value = serde_json::from_slice(&page).unwrap_or_default();
            let Some(tools) = v["result"]["tools"].as_array() else {
                break;
            };
            pages += 1;
            names.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_string)));
            last_cursor = v["result"]["nextCursor"].as_str().map(str::to_string);
            match (&last_cursor, s.follow) {
                (Some(c), true) if pages < 64 => cursor = Some(c.clone()),
                _ => break,
            }
        }
        let summary = format!(
            "tools/list{}: {} tools on {pages} page(s){}",
            if s.with_user_tools { " withUserTools" } else { "" },
            names.len(),
            last_cursor
                .as_ref()
                .map(|c| format!(", nextCursor {c} not followed"))
                .filter(|_| !s.follow)
                .unwrap_or_default()
        );
        out.listed = Some((names, pages, last_cursor));
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// `tools/call`: the request, its replies, the acceptance record and the software readback
    /// around it. Returns the step's summary and expectations.
    fn step_call<'s>(&mut self, c: &'s CallStep, n: usize, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(c.id);
        out.id = Some(id);
        let tool = c.tool.value.clone();
        let before = self.h.device.snapshot();
        if c.acoustic {
            out.previous = self.measure_probe(&format!("step{n}-before"));
            let now = self.now();
            self.advance_to(now + SimDuration::from_millis(200));
        }
        let at = self.now();
        let has_display = self.board.display.kind != crate::board::DisplayKind::None;
        let screen_before = has_display.then(|| self.h.device.screen_log().at(at));
        self.deliver(out, call_request(id, &tool, c.args.as_ref()));
        self.settle();
        out.replies.extend(self.take_replies());
        if c.acoustic && self.h.device.is_running() {
            let now = self.now();
            self.advance_to(now + SimDuration::from_millis(200));
            out.measurement = self.measure_probe(&format!("step{n}-after"));
        }
        let after = self.h.device.snapshot();
        let done = self.now();
        let screen_after = screen_before.map(|b| (b, self.h.device.screen_log().at(done)));
        self.collect_trace(out);
        let board = self.board.clone();
        let screen = screen_after.map(|(b, a)| {
            Box::new(ScreenSeen {
                spec: &board,
                before: (b, at),
                after: (a, done),
            })
        });
        let record = acceptance::record(&CallSeen {
            step: n,
            tool: &tool,
            id,
            decision: c.decision.as_deref(),
            reply: out
                .reply_for(id)
                .map(|(p, t)| (p.as_slice(), ReplyLatency::Virtual(t.saturating_since(at)))),
            seen: SeenFrom::Device(DeviceCall {
                discovery: self.discovery.describe(&tool, &self.board),
                at,
                before: &before,
                after: &after,
                call_path: self.board.firmware().call_path,
                receipt: out.receipts.first(),
                registered: self
                    .h
                    .device
                    .mcp()
                    .and_then(|m| m.find(tool.as_bytes()).map(|i| m.tool(i))),
                events: &out.events,
                probe_before: out.previous.as_ref(),
                probe_after: out.measurement.as_ref(),
                screen,
            }),
        });
        let summary = format!("tools/call {tool} id {id}");
        self.records.push(record);
        let text = out.reply_for(id).and_then(|(p, _)| reply_text(p));
        self.voice.after_call(self.records.len() - 1, &tool, text);
        let expect: Option<&'s Expect> = Some(&c.expect);
        (summary, expect)
    }

    /// A raw payload, exactly as written. Returns the step's summary and expectations.
    fn step_send<'s>(&mut self, s: &'s SendStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let payload = s.payload.clone().into_bytes();
        out.id = serde_json::from_slice::<serde_json::Value>(&payload)
            .ok()
            .and_then(|v| v["id"].as_f64())
            .map(|f| crate::cjson::valueint(f) as i64);
        self.deliver(out, payload);
        self.settle();
        let summary = format!("sent {} bytes", s.payload.len());
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// Several payloads parsed by the receive task before the main task runs. Returns the step's
    /// summary and expectations.
    fn step_burst<'s>(&mut self, b: &'s BurstStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        for p in &b.payloads {
            self.deliver(out, p.clone().into_bytes());
        }
        self.settle();
        let summary = format!("burst of {} payloads parsed before the main task ran", b.payloads.len());
        let expect: Option<&'s Expect> = Some(&b.expect);
        (summary, expect)
    }

    /// Lets virtual time pass. Returns the step's summary and expectations.
    fn step_wait<'s>(&mut self, d: &'s Duration) -> (String, Option<&'s Expect>) {
        let t = self.now() + d.0;
        self.advance_to(t);
        let summary = format!("waited {}", d.0);
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Reads a status value through `self.get_device_status`, as a backend would. Returns the
    /// step's summary and expectations.
    fn step_readback<'s>(&mut self, r: &'s ReadbackStep, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        let id = self.alloc_id(None);
        out.id = Some(id);
        self.deliver(out, call_request(id, strings::TOOL_GET_DEVICE_STATUS, None));
        self.settle();
        out.replies.extend(self.take_replies());
        self.voice.after_readback();
        let status = out
            .reply_for(id)
            .and_then(|(p, _)| reply_text(p))
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        let value = status.as_ref().map(|s| r.path.split('.').fold(s, |v, k| &v[k]).clone());
        let summary = format!(
            "readback {} = {}",
            r.path,
            value
                .as_ref()
                .map_or_else(|| "(no status reply)".to_string(), |v| v.to_string())
        );
        out.readback = value;
        let expect: Option<&'s Expect> = Some(&r.expect);
        (summary, expect)
    }

    /// Plays a probe (tone, WAV or prompt) and measures what the listener hears. Returns the step's
    /// summary and expectations.
    fn step_play<'s>(
        &mut self,
        p: &'s PlayStep,
        n: usize,
        line: u64,
        out: &mut StepOutcome,
    ) -> (String, Option<&'s Expect>) {
        let mut summary;
        let (source, natural) = if let Some(wav) = &p.wav {
            match self.resources.load_wav(wav) {
                Ok((rate, samples)) => {
                    let s = Source::Pcm {
                        rate,
                        samples: samples.into(),
                    };
                    let d = s.natural_duration().unwrap_or(SimDuration::from_secs(1));
                    (Some(s), d)
                }
                Err(e) => {
                    self.checks.push(Check {
                        step: n,
                        line,
                        what: "play wav".into(),
                        passed: false,
                        detail: e,
                        kind: Expectation::StepRan,
                    });
                    (None, SimDuration::ZERO)
                }
            }
        } else {
            let t = p.tone.clone().unwrap_or(Tone { hz: 1000.0, dbfs: -6.0 });
            (Some(Source::probe(t.hz, t.dbfs)), SimDuration::from_millis(1000))
        };
        summary = "play: nothing".to_string();
        if let Some(source) = source {
            let d = p.duration.map_or(natural, |d| d.0) + PROBE_GUARD;
            summary = format!("played {} for {d}", source.describe());
            out.previous = self.last.clone();
            match self.h.play_and_measure(source, d, self.keep_signals) {
                Some(l) => {
                    self.keep(&format!("step{n}-play"), l.signals);
                    out.measurement = Some(l.measurement);
                }
                None => summary.push_str(" (the device is not running: nothing played)"),
            }
        }
        let expect: Option<&'s Expect> = Some(&p.expect);
        (summary, expect)
    }

    /// Measures what the listener hears for a while. Returns the step's summary and expectations.
    fn step_listen<'s>(&mut self, l: &'s ListenStep, n: usize, out: &mut StepOutcome) -> (String, Option<&'s Expect>) {
        out.previous = self.last.clone();
        let listening = self.h.listen(l.duration.0, self.keep_signals);
        self.keep(&format!("step{n}-listen"), listening.signals);
        out.measurement = Some(listening.measurement);
        let summary = format!("listened for {}", l.duration.0);
        let expect: Option<&'s Expect> = Some(&l.expect);
        (summary, expect)
    }

    /// Hardware reset (EN pin). Returns the step's summary and expectations.
    fn step_reboot<'s>(&mut self) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.reset(now);
        self.settle();
        let summary = "hardware reset".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Pulls the plug. Returns the step's summary and expectations.
    fn step_cut_power<'s>(&mut self) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.cut_power(now);
        let summary = "power cut".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Plugs it back in. Returns the step's summary and expectations.
    fn step_power_on<'s>(&mut self) -> (String, Option<&'s Expect>) {
        self.h.power_on();
        self.settle();
        let summary = "power on".to_string();
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Sets or clears a fault now. Returns the step's summary and expectations.
    fn step_fault<'s>(&mut self, f: &'s FaultStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        let (fault, on) = match (f.set, f.clear) {
            (Some(x), _) => (x, true),
            (None, Some(x)) => (x, false),
            (None, None) => unreachable!("validated at load"),
        };
        self.h.device.set_fault(fault, now, on);
        self.timeline.faults.push((now, fault.name(), on));
        let summary = format!(
            "{} fault {}{}",
            if on { "set" } else { "cleared" },
            fault.name(),
            if fault.needs_boot() {
                " (takes effect at the next boot)"
            } else {
                ""
            }
        );
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// Keeps the main task busy. Returns the step's summary and expectations.
    fn step_busy<'s>(&mut self, d: &'s Duration) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.busy(now, d.0);
        let summary = format!("main task busy for {}", d.0);
        let expect: Option<&'s Expect> = None;
        (summary, expect)
    }

    /// A note in the report; nothing happens. Returns the step's summary and expectations.
    fn step_note<'s>(&mut self, text: &str) -> (String, Option<&'s Expect>) {
        (text.to_string(), None)
    }

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
                    kind: Expectation::StepRan,
                }),
            }
        }
        (Timbre::default(), None)
    }

    /// The scenario's backend says a sentence. Blocking: the whole turn plays and is measured.
    fn step_speak<'s>(
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
        let packets = synthesize_text(&timbre, &s.text, d, TTS_RATE);
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
            match s.stop_after {
                Some(d) => self.h.agenda.stop_turn_after(now, d.0),
                None => self.h.agenda.stop_turn(now),
            }
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
            let (m, signals) = self.h.device.heard(&w, self.keep_signals);
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
            "; {} received, {} decoded, {} played, {} dropped",
            counts.received,
            counts.decoded,
            counts.played(),
            counts.dropped()
        ));
        if let Some(m) = &measurement {
            summary.push_str(&format!("; listener {}", level(m)));
        }
        if let Some(pending) = self.voice.take_claim()
            && let Some(record) = self.records.get_mut(pending.index)
        {
            acceptance::add_claim(record, pending, &s.text, said_at, measurement.as_ref());
        }
        out.previous = self.voice.last_speech.clone();
        if measurement.is_some() {
            self.voice.last_speech = measurement.clone();
        }
        out.measurement = measurement.clone();
        out.speech = Some(Speech {
            measurement,
            counts,
            change_db,
        });
        let expect: Option<&'s Expect> = Some(&s.expect);
        (summary, expect)
    }

    /// The wake word is detected.
    fn step_wake<'s>(&mut self, w: &'s WakeStep, n: usize, line: u64) -> (String, Option<&'s Expect>) {
        let now = self.now();
        match w.wav.as_deref() {
            Some(path) => {
                let pcm = match self.timbre(None, Some(path), n, line).0 {
                    Timbre::Pcm { rate, samples } => resample_clip(&samples, rate, MIC_RATE),
                    _ => Vec::new(),
                };
                self.h.device.wake_word_saying(now, &w.word, &pcm);
            }
            None => self.h.device.wake_word(now, &w.word),
        }
        self.settle();
        let t = self.now() + SimDuration::from_millis(100);
        self.advance_to(t);
        let expect: Option<&'s Expect> = Some(&w.expect);
        (format!("wake word {:?} detected", w.word), expect)
    }

    /// The user speaks (a WAV into the microphone, in real time, then 600 ms of silence) or
    /// types (labelled typed input).
    fn step_say<'s>(&mut self, s: &'s SayStep, n: usize, line: u64) -> (String, Option<&'s Expect>) {
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
    /// A text frame from the backend, delivered now; 100 ms pass for the main task to show it.
    fn step_server(&mut self, text: &str) -> (String, Option<&'static Expect>) {
        let now = self.now();
        self.h.agenda.message(now, text.to_string());
        self.settle();
        let t = self.now() + SimDuration::from_millis(100);
        self.advance_to(t);
        (format!("the backend sends {text}"), None)
    }

    fn step_abort<'s>(&mut self, a: &'s AbortStep) -> (String, Option<&'s Expect>) {
        let now = self.now();
        self.h.device.toggle_chat(now);
        self.settle();
        let t = self.now() + SimDuration::from_millis(100);
        self.advance_to(t);
        let expect: Option<&'s Expect> = Some(&a.expect);
        ("the user presses BOOT (toggle chat) to interrupt".into(), expect)
    }
}
