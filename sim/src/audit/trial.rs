//! One trial in virtual time: a freshly booted board in the item's starting state, paired with
//! the built-in backend whose LLM is the stand-in ([`crate::audit::llm`]); woken with 你好小智,
//! the greeting heard, then the request typed (`listen detect` with the text) or said into the
//! microphone from its clip ([`crate::audit::clips`]) as many times as the item repeats it, each
//! turn's facts read off the twin and judged (docs/audit.md, "A trial").

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::audit::battery::Plan;
use crate::audit::clips::{Clip, Clips};
use crate::audit::condition::{Quantity, Val};
use crate::audit::llm::{self, Backend, LlmSpec, Mind, Outcome, Understanding};
use crate::audit::verdict::{self, Call, Facts, Judgement, Perceived, Sentence, Verdict};
use crate::backend::{self, BackendSpec, Delivery};
use crate::board::BoardSpec;
use crate::device::Device;
use crate::fault::Fault;
use crate::firmware::state::DeviceState;
use crate::hw::nvs::names;
use crate::hw::screen::ScreenCall;
use crate::loopback::{Loopback, NeverRests};
use crate::time::{SimDuration, SimTime};
use crate::trace::NvsValue;
use crate::voice::memo::CodecPool;
use crate::voice::speak::{Timbre, natural_duration};
use crate::world::{WorldSpec, WsConfig};

/// The wake word every trial opens with.
pub const WAKE_WORD: &str = "你好小智";
/// How the request reaches the built-in backend.
pub const TYPED: &str = "typed: listen detect with the text (py-xiaozhi's typed input, not the firmware's own path)";
/// The longest a stage of a trial may take in virtual time (connect and greet, hear the
/// request, a call's outcome, the end of the reply) before the trial moves on.
pub const STAGE_LIMIT: SimDuration = SimDuration::from_secs(45);
/// How long a user who speaks waits once the board listens again before saying the request:
/// xinnan-py drops the first 2 s of microphone audio after it chats a text, the wake word's
/// included (docs/reference/voice.md §5.1), so a request said at once would lose its start.
pub const SPOKEN_PAUSE: SimDuration = SimDuration::from_millis(2500);
/// The step the driver runs the pairing in while it waits for something.
const STEP: SimDuration = SimDuration::from_millis(50);
/// The step it waits for the request to be heard in: the stand-in answers at the first step
/// after, so its timings are this fine (the stand-in itself takes no time).
const HEAR_STEP: SimDuration = SimDuration::from_millis(5);

/// What a trial needs.
pub struct Setup<'a> {
    /// The item.
    pub plan: &'a Plan,
    /// Its board.
    pub board: Arc<BoardSpec>,
    /// The built-in backend's personality (it must have a voice).
    pub personality: Arc<BackendSpec>,
    /// The stand-in LLM's behaviour.
    pub llm: &'a LlmSpec,
    /// What the stand-in understands.
    pub understanding: &'a Understanding,
    /// Which trial of the item (chooses the phrasing).
    pub trial: u32,
    /// The device's seed.
    pub seed: u64,
    /// Where the Opus work is done (trials share one: a sentence said in many trials is encoded
    /// once); `None`: each trial on its own.
    pub codecs: Option<Arc<dyn CodecPool>>,
    /// Say the requests from these clips (`None`: type them).
    pub spoken: Option<&'a Clips>,
}

/// A request as the user makes it: typed, or said from a clip.
#[derive(Clone, Copy, Debug)]
pub struct Request<'c> {
    /// Its language.
    pub lang: &'c str,
    /// Its text.
    pub text: &'c str,
    /// The clip that says it (`None`: typed).
    pub clip: Option<&'c Clip>,
}

impl<'c> Request<'c> {
    /// Phrasing `k` of `plan`, said from its clip in `spoken` if there is one.
    pub fn of(plan: &'c Plan, k: u32, spoken: Option<&'c Clips>) -> Request<'c> {
        let (lang, text) = plan.phrasing(k);
        Request {
            lang,
            text,
            clip: spoken.and_then(|c| c.get(lang, text)).map(|c| &**c),
        }
    }

    /// The user makes it on `device` at `now`: the text typed, or the clip said into the
    /// microphone (heard while the board listens).
    pub fn make(&self, device: &mut Device, now: SimTime) {
        match self.clip {
            Some(c) => device.say_shared(now, c.samples.clone()),
            None => device.type_text(now, self.text),
        }
    }

    /// How long it takes to make: the clip's length (typed: at once).
    pub fn length(&self) -> SimDuration {
        self.clip.map_or(SimDuration::ZERO, Clip::length)
    }

    /// How it reaches the backend, for the facts. `recognised`: the backend has a speech
    /// recogniser of its own (a real server); the built-in one has none, so its stand-in LLM is
    /// handed the battery's text.
    pub fn delivery(&self, recognised: bool) -> String {
        match self.clip {
            None => TYPED.into(),
            Some(c) => format!(
                "spoken: {} ({:.1} s) through the microphone, Opus at real-time pace; {}",
                c.file,
                c.length().as_millis() as f64 / 1000.0,
                if recognised {
                    "what the backend's own speech recogniser made of it is its stt"
                } else {
                    "the built-in backend has no speech recogniser: its stand-in LLM was handed the battery's text"
                }
            ),
        }
    }
}

/// One request of a trial, judged.
#[derive(Clone, Debug, Serialize)]
pub struct Turn {
    /// What happened.
    pub facts: Facts,
    /// What it comes to.
    pub judgement: Judgement,
}

/// One trial.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// The item's id.
    pub item: String,
    /// Its number, from 0.
    pub trial: u32,
    /// The device's seed.
    pub seed: u64,
    /// The board.
    pub board: String,
    /// The wire the board used: `virtual time` for the built-in backend, else the WebSocket URL
    /// or `mqtt://ENDPOINT + UDP`.
    pub wire: String,
    /// The greeting the backend said after the wake word, if any.
    pub greeting: Option<Sentence>,
    /// Each request, in order.
    pub turns: Vec<Turn>,
    /// The backend became ready (discovery over) and the request was made: a trial that never
    /// reached one fails the gate whatever its verdict.
    pub reached: bool,
    /// The worst verdict of the turns.
    pub verdict: Verdict,
    /// Things that went wrong with the trial itself (a backend that never became ready…).
    pub notes: Vec<String>,
}

/// The wire a world's board dials: the WebSocket URL, or `mqtt://ENDPOINT + UDP`.
pub fn wire_of(world: &WorldSpec) -> String {
    match (&world.mqtt, &world.websocket) {
        (Some(m), _) => format!("mqtt://{} + UDP", m.endpoint),
        (None, Some(w)) => w.url.clone(),
        (None, None) => "no wire".into(),
    }
}

/// Runs one trial.
pub fn run(s: &Setup<'_>) -> Result<Trial, NeverRests> {
    let world = WorldSpec::dialling(WsConfig {
        url: "ws://127.0.0.1:8000/xiaozhi/v1/".into(),
        token: String::new(),
        version: 1,
    });
    let mut device = Device::new(s.board.clone(), world, s.seed);
    preset(&mut device, s.plan);
    device.power_on(SimTime::ZERO);
    for name in &s.plan.faults {
        if let Ok(f) = name.parse::<Fault>() {
            device.set_fault(f, SimTime::ZERO, true);
        }
    }
    let mut lb = Loopback::new(device, s.personality.clone());
    if let Some(pool) = &s.codecs {
        lb.share_codecs(pool.clone());
    }
    let mut notes = Vec::new();
    lb.run_until(SimTime::from_millis(1000))?;
    let now = lb.now();
    lb.device.wake_word(now, WAKE_WORD);
    let started = lb.now();
    let ready = wait(&mut lb, started + STAGE_LIMIT, |lb| {
        lb.session().is_some_and(|s| s.is_ready()) && quiet(&lb.device)
    })?;
    if !ready {
        notes.push(format!(
            "the backend was not ready and listening {} s after the wake word",
            STAGE_LIMIT.as_millis() / 1000
        ));
    }
    let greeting = sentences_since(&lb.device, started).last().cloned();
    let mut reference = greeting.as_ref().map(|g| (g.level_db, g.audible));
    let request = Request::of(s.plan, s.trial, s.spoken);
    if s.spoken.is_some() && request.clip.is_none() {
        notes.push(format!("no clip says \"{}\": the request was typed", request.text));
    }
    let mut mind = Mind::new(s.llm, s.understanding);
    let mut turns = Vec::new();
    for _ in 0..s.plan.repeat {
        let facts = turn(&mut lb, s, &mut mind, &request, reference, &mut notes)?;
        if let Some(last) = facts.sentences.last() {
            reference = Some((last.level_db, last.audible));
        }
        let judgement = verdict::judge(s.plan, &facts);
        turns.push(Turn { facts, judgement });
    }
    let verdict = turns
        .iter()
        .map(|t| t.judgement.verdict)
        .min()
        .unwrap_or(Verdict::NoAnswer);
    Ok(Trial {
        item: s.plan.id.clone(),
        trial: s.trial,
        seed: s.seed,
        board: s.plan.board.clone(),
        wire: "virtual time".into(),
        greeting,
        reached: ready,
        turns,
        verdict,
        notes,
    })
}

/// The starting state, stored where the firmware reads it at boot.
pub fn preset(device: &mut Device, plan: &Plan) {
    let nvs = device.nvs_mut();
    if let Some(v) = plan.start.volume {
        let _ = nvs.set(names::AUDIO, names::OUTPUT_VOLUME, NvsValue::I32(v));
    }
    if let Some(b) = plan.start.brightness {
        let _ = nvs.set(names::DISPLAY, names::BRIGHTNESS, NvsValue::I32(b));
    }
    if let Some(t) = &plan.start.theme {
        let _ = nvs.set(names::DISPLAY, names::THEME, NvsValue::Str(t.as_bytes().to_vec()));
    }
}

/// One request: made, answered by the stand-in once the backend has heard it (the whole clip,
/// when spoken), run until the reply is over; its facts.
fn turn(
    lb: &mut Loopback,
    s: &Setup<'_>,
    mind: &mut Mind<'_>,
    request: &Request<'_>,
    reference: Option<(Option<f64>, bool)>,
    notes: &mut Vec<String>,
) -> Result<Facts, NeverRests> {
    if request.clip.is_some() {
        let t = lb.now() + SPOKEN_PAUSE;
        lb.run_until(t)?;
    }
    let start = Start::now(&lb.device, s.plan, reference);
    let heard_before = lb.session().map_or(0, |x| x.utterances());
    let asked = start.asked;
    request.make(&mut lb.device, asked);
    let heard = wait_in(lb, asked + request.length() + STAGE_LIMIT, HEAR_STEP, |lb| {
        lb.session().is_some_and(|x| x.utterances() > heard_before)
    })?;
    let early = lb.now() < asked + request.length();
    if heard && early {
        notes.push(format!(
            "the backend ended the utterance {:.0} ms into a {:.0} ms clip",
            lb.now().saturating_since(asked).as_millis(),
            request.length().as_millis()
        ));
    }
    if heard {
        let mut drive = Drive { lb, failed: None };
        mind.respond(&mut drive, request.text);
        if let Some(e) = drive.failed {
            return Err(e);
        }
        let now = lb.now();
        if let Some(x) = lb.session() {
            x.end_turn(now);
        }
    } else {
        notes.push(format!("the backend never heard \"{}\"", request.text));
    }
    let end = lb.now() + STAGE_LIMIT;
    wait(lb, end, |lb| {
        quiet(&lb.device) && !lb.session().is_some_and(|x| x.is_speaking())
    })?;
    let settle = lb.now() + SimDuration::from_millis(500);
    lb.run_until(settle)?;
    let calls = calls_since(lb, asked);
    Ok(start.facts(&lb.device, s.plan, &s.board, request, false, calls))
}

/// What a request's facts start from: when it was made, the watched value and the screen then,
/// and the reference level.
pub struct Start {
    /// When the request was made.
    pub asked: SimTime,
    before: Option<Val>,
    screen_before: crate::hw::screen::ScreenState,
    reference: Option<(Option<f64>, bool)>,
}

impl Start {
    /// A request is made now on `device`.
    pub fn now(device: &Device, plan: &Plan, reference: Option<(Option<f64>, bool)>) -> Start {
        let asked = device.now();
        Start {
            asked,
            before: value(device, plan.watch),
            screen_before: device.screen_log().at(asked),
            reference,
        }
    }

    /// The request's facts once its turn is over: `calls` as the device got them, the rest read
    /// off `device`; `recognised`: the backend recognises speech itself.
    pub fn facts(
        &self,
        device: &Device,
        plan: &Plan,
        board: &BoardSpec,
        request: &Request<'_>,
        recognised: bool,
        calls: Vec<Call>,
    ) -> Facts {
        let after = value(device, plan.watch);
        let sentences = sentences_since(device, self.asked);
        let perceived = perceive(device, plan, board, self, &after, &calls, &sentences);
        let length = request.length().as_micros() as f64 / 1000.0;
        Facts {
            request: request.text.to_string(),
            lang: request.lang.to_string(),
            delivery: request.delivery(recognised),
            request_ms: length,
            stt: shown_for_user(device, self.asked),
            first_call_ms: calls.first().map(|c| micros_exact(c.at_ms - length)),
            first_sentence_ms: sentences.first().map(|x| micros_exact(x.at_ms - length)),
            first_audio_ms: first_audio(device, self.asked).map(|t| micros_exact(ms_after(t, self.asked) - length)),
            calls,
            sentences,
            before: self.before.clone(),
            after,
            level_before: self.reference,
            perceived,
        }
    }
}

/// What a person perceives of the change of the watched quantity.
fn perceive(
    device: &Device,
    plan: &Plan,
    board: &BoardSpec,
    start: &Start,
    after: &Option<Val>,
    calls: &[Call],
    sentences: &[Sentence],
) -> Perceived {
    let (before, reference) = (&start.before, start.reference);
    match (plan.watch, before, after) {
        (Some(Quantity::Volume), Some(Val::Num(b)), Some(Val::Num(a))) => {
            let changed_at = calls
                .iter()
                .find(|c| !c.is_read())
                .map(|c| c.reply_ms.unwrap_or(c.at_ms));
            let reply = changed_at.and_then(|t| sentences.iter().find(|x| x.at_ms >= t));
            verdict::heard_volume(*b, *a, reference, reply)
        }
        (Some(Quantity::Brightness), Some(b), Some(a)) if b != a => {
            Perceived::Yes(format!("the backlight goes from {b} % to {a} %"))
        }
        (Some(Quantity::Theme), Some(b), Some(a)) if b != a => {
            let now = device.now();
            let state = device.screen_log().at(now);
            let mut was = state.clone();
            was.theme = start.screen_before.theme.clone();
            let draw = |st| {
                crate::hw::picture::panel(&crate::hw::picture::Frame {
                    spec: board,
                    state: st,
                    at: now,
                    brightness: 100,
                })
            };
            match (draw(&was), draw(&state)) {
                (Some(x), Some(y)) if x != y => Perceived::Yes(format!("the screen is drawn in the {a} theme")),
                (Some(_), Some(_)) => Perceived::No(format!(
                    "the theme is {a}, but the screen is drawn with the same pixels as in {b}"
                )),
                _ => Perceived::No("the board has no screen to show a theme on".into()),
            }
        }
        (Some(Quantity::Boots), Some(b), Some(a)) if b != a => Perceived::Yes("the device restarted".into()),
        (Some(_), b, a) if b == a => Perceived::Yes("nothing to perceive: the value did not change".into()),
        (None, _, _) => Perceived::Yes("nothing to perceive: the item watches no value".into()),
        _ => Perceived::No("the value could not be read off the device".into()),
    }
}

/// When the first sound of a speech session opened at or after `from` left the codec.
fn first_audio(device: &Device, from: SimTime) -> Option<SimTime> {
    device
        .speech_log()
        .sessions
        .iter()
        .filter(|s| s.started >= from)
        .find_map(|s| s.window.map(|w| w.start))
}

/// `t` after `from`, ms.
fn ms_after(t: SimTime, from: SimTime) -> f64 {
    t.saturating_since(from).as_micros() as f64 / 1000.0
}

/// The first text the screen showed as the user's since `from` (the backend's `stt`; boards
/// with a display only).
fn shown_for_user(device: &Device, from: SimTime) -> Option<String> {
    device.screen_log().calls().iter().find_map(|(at, c)| match c {
        ScreenCall::SetChatMessage { role, content } if *at >= from && role == "user" => Some(content.clone()),
        _ => None,
    })
}

/// The watched value, read off the twin (never through MCP).
pub fn value(d: &Device, watch: Option<Quantity>) -> Option<Val> {
    let s = d.snapshot();
    match watch? {
        Quantity::Volume => s.volume.map(|v| Val::Num(f64::from(v))),
        Quantity::Brightness => s.backlight_target.map(|v| Val::Num(f64::from(v))),
        Quantity::Theme => s.theme.map(Val::Word),
        Quantity::Boots => Some(Val::Num(f64::from(s.boots))),
    }
}

/// Whether the device is back to listening (or idle, or off: rebooting) with no speech of
/// the backend's playing.
pub fn quiet(device: &Device) -> bool {
    let playing = device.speech_log().sessions.last().is_some_and(|s| s.stopped.is_none());
    let state = device.state();
    !playing && matches!(state, Some(DeviceState::Listening | DeviceState::Idle) | None)
}

/// Runs the pairing until `done` holds (checked every [`STEP`]) or `until`; whether it held.
fn wait(lb: &mut Loopback, until: SimTime, done: impl Fn(&mut Loopback) -> bool) -> Result<bool, NeverRests> {
    wait_in(lb, until, STEP, done)
}

/// [`wait`], checking every `step`.
fn wait_in(
    lb: &mut Loopback,
    until: SimTime,
    step: SimDuration,
    done: impl Fn(&mut Loopback) -> bool,
) -> Result<bool, NeverRests> {
    while lb.now() < until {
        if done(lb) {
            return Ok(true);
        }
        let t = (lb.now() + step).min(until);
        lb.run_until(t)?;
    }
    Ok(done(lb))
}

/// `ms` to the nearest microsecond (a difference of two times in ms, without its float dust).
fn micros_exact(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

fn ms_since(t: f64, from: SimTime) -> f64 {
    t - from.as_micros() as f64 / 1000.0
}

/// Every `tools/call` sent since `from`, over every connection, with its outcome.
fn calls_since(lb: &Loopback, from: SimTime) -> Vec<Call> {
    let from_ms = from.as_micros() as f64 / 1000.0;
    lb.reports()
        .iter()
        .flat_map(|r| r.exchanges.iter())
        .filter(|e| e.method == "tools/call" && e.sent_ms >= from_ms && e.id >= 0)
        .map(|e| {
            let (reply, failed) = reply_text(e);
            Call {
                tool: e.tool.clone().unwrap_or_default(),
                args: e.args.clone().unwrap_or(Value::Null),
                at_ms: ms_since(e.sent_ms, from),
                reply,
                failed,
                reply_ms: e.reply_ms.map(|t| ms_since(t, from)),
            }
        })
        .collect()
}

/// A reply's text (`content[0].text`, or the error's message) and whether it is a failure.
fn reply_text(e: &backend::Exchange) -> (Option<String>, bool) {
    let v: Option<Value> = e.reply.as_deref().and_then(|r| serde_json::from_str(r).ok());
    let failed = e.outcome != backend::Outcome::Replied;
    let Some(v) = v else {
        return (None, true);
    };
    if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
        return (Some(m.to_string()), true);
    }
    let text = v
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .map(str::to_string);
    let is_error = v.pointer("/result/isError").and_then(Value::as_bool).unwrap_or(false);
    (text, failed || is_error)
}

/// Every sentence the device got since `from`, with what the listener heard of it.
pub fn sentences_since(device: &Device, from: SimTime) -> Vec<Sentence> {
    device
        .speech_log()
        .sessions
        .iter()
        .flat_map(|s| s.sentences.iter())
        .filter(|x| x.at >= from)
        .map(|x| {
            let (level_db, audible) = match &x.window {
                Some(w) => {
                    let (m, _) = device.heard(w, false);
                    (m.spl_db, m.audible)
                }
                None => (None, false),
            };
            Sentence {
                text: x.text.clone(),
                at_ms: ms_after(x.at, from),
                level_db,
                audible,
            }
        })
        .collect()
}

/// The stand-in's hands on the loopback's live session.
struct Drive<'l> {
    lb: &'l mut Loopback,
    /// The pairing ran away while a call waited.
    failed: Option<NeverRests>,
}

impl Backend for Drive<'_> {
    fn offers(&self, tool: &str) -> bool {
        self.lb.session_ref().is_some_and(|s| s.offers(tool))
    }

    fn call(&mut self, tool: &str, args: Value) -> Outcome {
        let Some(index) = self.lb.session().map(|x| x.exchanges_len()) else {
            return Outcome::Nothing;
        };
        self.lb.call(tool, args);
        let limit = self.lb.now() + STAGE_LIMIT;
        let done = wait(self.lb, limit, |lb| match lb.session() {
            None => true,
            Some(s) => s
                .exchange(index)
                .is_some_and(|e| e.outcome != backend::Outcome::Pending),
        });
        if let Err(e) = done {
            self.failed = Some(e);
            return Outcome::Nothing;
        }
        let Some(e) = self.lb.session().and_then(|x| x.exchange(index).cloned()) else {
            return Outcome::Nothing;
        };
        match (e.result_to, &e.spoken, &e.llm_sees) {
            (Some(Delivery::User), Some(text), _) => {
                let text = text.clone();
                self.say(&text);
                Outcome::Spoken
            }
            (_, _, Some(seen)) => Outcome::Result {
                text: seen.clone(),
                failed: reply_text(&e).1,
            },
            _ => match reply_text(&e) {
                (Some(text), failed) => Outcome::Result { text, failed },
                (None, _) => Outcome::Nothing,
            },
        }
    }

    fn say(&mut self, text: &str) {
        let now = self.lb.now();
        if let Some(x) = self.lb.session() {
            x.speak(now, text, &Timbre::default(), natural_duration(text));
        }
    }
}

/// The stand-in's language detection, re-exported for reports.
pub use llm::language;
