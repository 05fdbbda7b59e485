//! `audit --url` / `--ota` / `--mqtt`: the trials against a real backend, each on a live device (`crate::live`) in
//! real time. The simulated user of a trial is an [`Asker`]: it wakes the board with 你好小智,
//! waits for the backend's discovery and greeting to be over, types the request (`listen detect`
//! with the text) or says it into the microphone from its clip, and ends the turn once the board
//! has been quiet a while. The calls come from
//! what the device received and answered; everything else is read off the device, as in virtual
//! time (`xiaozhi_sim::audit::trial::Start`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;
use tokio::sync::watch;
use xiaozhi_sim::audit::battery::Plan;
use xiaozhi_sim::audit::clips::Clip;
use xiaozhi_sim::audit::trial::{self, Request, Start, Trial, Turn as Judged, WAKE_WORD};
use xiaozhi_sim::audit::verdict::{self, Call, Verdict};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Board, Device, DeviceState, MessageType, Sent, TtsState};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::world::{WorldSpec, WsConfig};

use crate::live::{Companion, LiveOptions, Seen, Turn, Wake, run_device};

/// The key of a call the device will not answer (no reply can carry it: ids are `i32`).
const UNANSWERED: i64 = i64::MIN;

/// The board has been quiet this long: discovery and the greeting are over.
const SETTLED: SimDuration = SimDuration::from_millis(1500);
/// The board has been quiet this long after a request, with something said after the last
/// call's reply: the turn is over.
const TURN_OVER: SimDuration = SimDuration::from_millis(2500);
/// The board has been quiet this long after a call's reply with nothing said since: the turn is
/// over (a real LLM's second round and TTS take seconds).
const SPEECH_AWAITED: SimDuration = SimDuration::from_secs(10);
/// The longest a stage (greeting, turn) may take before the trial moves on.
const STAGE: SimDuration = SimDuration::from_secs(45);

/// Where the live trials go.
#[derive(Clone, Debug)]
pub enum Remote {
    /// A backend's WebSocket URL, and the access token (empty: none).
    Url(String, String),
    /// An OTA endpoint: every trial's board activates there first, and the answer chooses the
    /// wire (a `websocket` block, or an `mqtt` block: MQTT + UDP), as the firmware does.
    Ota(String),
    /// A gateway's MQTT endpoint and its signature key: every trial's board gets the answer
    /// xiaozhi-esp32-server's OTA would give for it, without an OTA server.
    Mqtt(String, Option<String>),
}

/// One live trial to run.
pub struct Job {
    /// The item.
    pub plan: Plan,
    /// Its board.
    pub board: Arc<BoardSpec>,
    /// Which trial of the item (chooses the phrasing).
    pub k: u32,
    /// The device's seed.
    pub seed: u64,
    /// The clip that says the request (`None`: it is typed).
    pub clip: Option<Arc<Clip>>,
}

/// One live trial on a fresh board; a trial that could not run (its activation failed) is one
/// that never reached a backend, with the reason in its notes.
pub async fn trial(remote: &Remote, job: &Job, interrupt: &'static AtomicBool) -> Trial {
    match attempt(remote, job, interrupt).await {
        Ok(t) => t,
        Err(e) => Trial {
            item: job.plan.id.clone(),
            trial: job.k,
            seed: job.seed,
            board: job.plan.board.clone(),
            wire: "none".into(),
            greeting: None,
            turns: Vec::new(),
            reached: false,
            verdict: Verdict::NoAnswer,
            notes: vec![format!("the trial could not run: {e:#}")],
        },
    }
}

async fn attempt(remote: &Remote, job: &Job, interrupt: &'static AtomicBool) -> Result<Trial> {
    let (plan, board, k, seed) = (&job.plan, job.board.clone(), job.k, job.seed);
    let (world, nvs) = match remote {
        Remote::Url(url, token) => (
            WorldSpec::dialling(WsConfig {
                url: url.clone(),
                token: token.clone(),
                version: 1,
            }),
            None,
        ),
        Remote::Ota(url) => {
            let (url, b) = (url.clone(), Board::new(board.clone()));
            tokio::task::spawn_blocking(move || crate::activation::activate_device(&b, seed, &url)).await??
        }
        Remote::Mqtt(endpoint, key) => {
            crate::activation::gateway_device(&Board::new(board.clone()), seed, endpoint, key.as_deref())?
        }
    };
    let wire = trial::wire_of(&world);
    let mut device = Device::new(board.clone(), world, seed);
    if let Some(nvs) = nvs {
        *device.nvs_mut() = nvs;
    }
    trial::preset(&mut device, plan);
    for name in &plan.faults {
        if let Ok(f) = name.parse() {
            device.set_fault(f, SimTime::ZERO, true);
        }
    }
    device.power_on(SimTime::ZERO);
    let (stop, stopped) = watch::channel(false);
    let out = Arc::new(Mutex::new(Outcome::default()));
    let (lang, request) = plan.phrasing(k).clone();
    let asker = Asker {
        plan: plan.clone(),
        board: board.clone(),
        lang,
        request,
        clip: job.clip.clone(),
        phase: Phase::Boot,
        calls: Vec::new(),
        last_heard: SimTime::ZERO,
        last_reply: None,
        last_sentence: None,
        reference: None,
        listed: false,
        stop,
        interrupt,
        out: out.clone(),
    };
    let limit = STAGE.as_secs_f64() * (2.0 + f64::from(plan.repeat)) + 10.0;
    let live = LiveOptions {
        wake: Wake::Manual,
        duration: Some(Duration::from_secs_f64(limit)),
        verbose: false,
        label: format!("{} trial {k}", plan.id),
        stop: Some(stopped),
        counters: None,
        script: None,
        record: false,
        companion: Some(Box::new(asker)),
    };
    run_device(device, live).await?;
    let o = std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()));
    let mut notes = o.notes;
    if o.turns.len() < plan.repeat as usize {
        notes.push(format!(
            "{} of {} requests were made before the trial's time ran out",
            o.turns.len(),
            plan.repeat
        ));
    }
    let verdict = o
        .turns
        .iter()
        .map(|t| t.judgement.verdict)
        .min()
        .unwrap_or(Verdict::NoAnswer);
    let reached = o.reached;
    Ok(Trial {
        reached,
        item: plan.id.clone(),
        trial: k,
        seed,
        board: plan.board.clone(),
        wire,
        greeting: o.greeting,
        turns: o.turns,
        verdict,
        notes,
    })
}

/// What a trial's user leaves behind.
#[derive(Default)]
struct Outcome {
    /// The backend listed the tools before the first request.
    reached: bool,
    greeting: Option<verdict::Sentence>,
    turns: Vec<Judged>,
    notes: Vec<String>,
}

/// Where the user is.
enum Phase {
    /// Waiting for the board to be up and idle.
    Boot,
    /// Woken at this time; waiting for discovery and the greeting.
    Greeting(SimTime),
    /// The board listens again; the request is said at this time (a spoken request waits
    /// [`trial::SPOKEN_PAUSE`]).
    Pause(SimTime),
    /// A request is in its turn.
    Asking(Box<Start>),
    /// Done.
    Done,
}

/// The simulated user of one live trial.
struct Asker {
    plan: Plan,
    board: Arc<BoardSpec>,
    lang: String,
    request: String,
    /// The clip that says the request (`None`: it is typed).
    clip: Option<Arc<Clip>>,
    phase: Phase,
    /// The `tools/call` requests of this turn in arrival order, with their ids.
    calls: Vec<(i64, Call)>,
    /// When the board last received or sent a text frame.
    last_heard: SimTime,
    /// When the board last sent a reply to a call, and last got a `sentence_start`.
    last_reply: Option<SimTime>,
    last_sentence: Option<SimTime>,
    /// The reference level the next request is heard against.
    reference: Option<(Option<f64>, bool)>,
    /// The backend has listed the tools.
    listed: bool,
    stop: watch::Sender<bool>,
    /// Ctrl-C: end the trial now.
    interrupt: &'static AtomicBool,
    out: Arc<Mutex<Outcome>>,
}

impl Asker {
    fn settled(&self, device: &Device, now: SimTime, quiet_for: SimDuration) -> bool {
        trial::quiet(device) && now.saturating_since(self.last_heard) >= quiet_for
    }

    /// The next request: made now when typed, after [`trial::SPOKEN_PAUSE`] when spoken.
    fn next(&mut self, device: &mut Device, now: SimTime) {
        if self.clip.is_some() {
            self.phase = Phase::Pause(now + trial::SPOKEN_PAUSE);
        } else {
            self.ask(device, now);
        }
    }

    fn ask(&mut self, device: &mut Device, now: SimTime) {
        self.calls.clear();
        self.last_reply = None;
        self.last_sentence = None;
        let start = Start::now(device, &self.plan, self.reference);
        let request = self.request();
        request.make(device, now);
        // The quiet clock starts when the request is made: at the end of its clip.
        self.last_heard = now + request.length();
        self.phase = Phase::Asking(Box::new(start));
    }

    fn end_turn(&mut self, device: &mut Device, now: SimTime, start: &Start) {
        let calls = std::mem::take(&mut self.calls).into_iter().map(|(_, c)| c).collect();
        let facts = start.facts(device, &self.plan, &self.board, &self.request(), true, calls);
        // As in virtual time: the last speech heard is the next request's reference.
        if let Some(last) = facts.sentences.last() {
            self.reference = Some((last.level_db, last.audible));
        }
        let judgement = verdict::judge(&self.plan, &facts);
        let made = {
            let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
            out.turns.push(Judged { facts, judgement });
            out.turns.len()
        };
        if made < self.plan.repeat as usize {
            self.next(device, now);
        } else {
            self.finish();
        }
    }

    fn request(&self) -> Request<'_> {
        Request {
            lang: &self.lang,
            text: &self.request,
            clip: self.clip.as_deref(),
        }
    }

    fn note(&self, text: String) {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).notes.push(text);
    }

    fn finish(&mut self) {
        self.phase = Phase::Done;
        let _ = self.stop.send(true);
    }

    /// A reply the device sent: its text (`content[0].text` or the error's message).
    fn replied(&mut self, at: SimTime, id: i64, is_error: bool, frame: &[u8]) {
        let Phase::Asking(start) = &self.phase else {
            return;
        };
        let asked = start.asked;
        // The latest call with that id that has no reply yet (ids may be reused).
        let Some((_, call)) = self
            .calls
            .iter_mut()
            .rev()
            .find(|(i, c)| *i == id && c.reply_ms.is_none())
        else {
            return;
        };
        self.last_reply = Some(at);
        self.last_heard = self.last_heard.max(at);
        let v: Value = serde_json::from_slice(frame).unwrap_or(Value::Null);
        let payload = v.get("payload").unwrap_or(&v);
        let text = payload
            .pointer("/error/message")
            .or_else(|| payload.pointer("/result/content/0/text"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let is_error = is_error || payload.pointer("/result/isError").and_then(Value::as_bool) == Some(true);
        call.reply = text;
        call.failed = is_error;
        call.reply_ms = Some(ms(at.saturating_since(asked)));
    }
}

fn ms(d: SimDuration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

impl Companion for Asker {
    fn act(&mut self, device: &mut Device, turn: &Turn<'_>) {
        let now = turn.now;
        if self.interrupt.load(Ordering::Relaxed) && !matches!(self.phase, Phase::Done) {
            self.note("interrupted (Ctrl-C) before the trial was over".into());
            self.finish();
            return;
        }
        match &self.phase {
            Phase::Boot => {
                if now >= SimTime::from_millis(1000) && device.state() == Some(DeviceState::Idle) {
                    device.wake_word(now, WAKE_WORD);
                    self.last_heard = now;
                    self.phase = Phase::Greeting(now);
                }
            }
            Phase::Greeting(woke) => {
                let woke = *woke;
                let ready = self.listed && turn.open && self.settled(device, now, SETTLED);
                let late = now.saturating_since(woke) >= STAGE;
                if ready || late {
                    if late {
                        self.note(format!(
                            "the backend had not listed the tools and gone quiet {} s after the wake word; the request was made anyway",
                            STAGE.as_secs_f64()
                        ));
                    }
                    let greeting = trial::sentences_since(device, woke).last().cloned();
                    self.reference = greeting.as_ref().map(|g| (g.level_db, g.audible));
                    {
                        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
                        out.greeting = greeting;
                        out.reached = self.listed;
                    }
                    self.next(device, now);
                }
            }
            Phase::Pause(at) => {
                if now >= *at {
                    self.ask(device, now);
                }
            }
            Phase::Asking(start) => {
                // A call answered with nothing said since waits longer: the backend's LLM may be
                // on its second round.
                let unanswered = self
                    .last_reply
                    .is_some_and(|r| self.last_sentence.is_none_or(|t| t < r));
                let quiet_for = if unanswered { SPEECH_AWAITED } else { TURN_OVER };
                let over = now.saturating_since(start.asked) >= SimDuration::from_millis(1000)
                    && self.settled(device, now, quiet_for);
                let late = now.saturating_since(start.asked) >= STAGE;
                if over || late {
                    if late {
                        self.note(format!("a turn was cut off after {} s", STAGE.as_secs_f64()));
                    }
                    let Phase::Asking(start) = std::mem::replace(&mut self.phase, Phase::Done) else {
                        return;
                    };
                    self.end_turn(device, now, &start);
                }
            }
            Phase::Done => {}
        }
    }

    fn seen(&mut self, what: &Seen<'_>, _device: &Device) {
        match what {
            Seen::Received { at, read, .. } => {
                self.last_heard = self.last_heard.max(*at);
                if read.message == MessageType::Tts(Some(TtsState::SentenceStart)) {
                    self.last_sentence = Some(*at);
                }
                let Some(r) = &read.request else {
                    return;
                };
                match r.method.as_str() {
                    "tools/list" => self.listed = true,
                    "tools/call" => {
                        if let Phase::Asking(start) = &self.phase {
                            // A call the device drops is never answered: kept, unpaired.
                            let id = read.reply_id().map_or(UNANSWERED, i64::from);
                            let call = Call {
                                tool: r.tool.clone().unwrap_or_default(),
                                args: crate::live::arguments(r).unwrap_or(Value::Null),
                                at_ms: ms(at.saturating_since(start.asked)),
                                reply: None,
                                failed: true,
                                reply_ms: None,
                            };
                            self.calls.push((id, call));
                        }
                    }
                    _ => {}
                }
            }
            Seen::Sent {
                at,
                sent: Sent::Reply { id, is_error },
                text,
            } => self.replied(*at, i64::from(*id), *is_error, text),
            // The board could not reach the backend: nothing more can happen in this trial.
            Seen::Dialled(false) if matches!(self.phase, Phase::Greeting(_)) => {
                self.note("the board could not connect to the backend".into());
                self.finish();
            }
            _ => {}
        }
    }
}

/// Runs every trial of `bench` against `remote`, `bench.devices` at a time; `done` is told after
/// each one; `stop` ends the run: no trial starts after it, and the trials running end their
/// turn at once (a trial cut short has a note, and the run counts as interrupted).
pub fn run(
    bench: &super::Bench<'_>,
    remote: &Remote,
    stop: &'static std::sync::atomic::AtomicBool,
    done: &(dyn Fn() + Sync),
) -> Result<super::Ran> {
    let work: Vec<(usize, u32)> = (0..bench.battery.items.len())
        .flat_map(|i| (0..bench.trials).map(move |k| (i, k)))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let trials = runtime.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut next = work.iter();
        let mut trials = Vec::new();
        loop {
            while set.len() < bench.devices.max(1) && !stop.load(Ordering::Relaxed) {
                let Some(&(i, k)) = next.next() else { break };
                let plan = bench.battery.items[i].clone();
                let (lang, text) = plan.phrasing(k);
                let job = Job {
                    clip: bench.spoken.and_then(|c| c.get(lang, text)).cloned(),
                    board: bench.boards[i].clone(),
                    k,
                    seed: xiaozhi_sim::audit::trial_seed(bench.seed, i, k),
                    plan,
                };
                let remote = remote.clone();
                set.spawn(async move { trial(&remote, &job, stop).await });
            }
            let Some(joined) = set.join_next().await else { break };
            trials.push(joined?);
            done();
        }
        anyhow::Ok(trials)
    })?;
    let mut trials = trials;
    super::sort(bench, &mut trials);
    let interrupted = trials.len() < work.len() || stop.load(Ordering::Relaxed);
    Ok(super::Ran {
        trials,
        planned: work.len(),
        interrupted,
    })
}
