//! The console's companion of the live device: carries out what the page asks (buttons, the
//! microphone, typed lines, faults) and tells the page what happens, as it happens: the state,
//! volume and brightness, the screen when it changes (drawn by the same renderer as `render
//! --screen`), what the listener hears (the listener's sound pressure, rendered through the
//! board's codec law, amplifier and speaker model over the virtual time just passed), the MCP
//! calls and their replies, the level of each sentence as the twin measures it, the wire and the
//! device's log (docs/console.md).

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use xiaozhi_sim::audio::ChainFault;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::{Device, Incoming, Sent};
use xiaozhi_sim::hw::screen::ScreenState;
use xiaozhi_sim::time::SimTime;

use super::backend::{Backend, Wire};
use crate::live::{Companion, Seen, Turn};

/// How many lines of the wire and the log, calls and levels the console keeps for a page that
/// opens later.
const KEPT: usize = 400;
/// How long a click holds the button down.
const CLICK: Duration = Duration::from_millis(100);

/// What the page (or the HTTP API) asks the device to do.
#[derive(Debug)]
pub enum Cmd {
    /// A board button goes down (`true`) or up.
    Button { name: String, pressed: bool },
    /// A click: down, and up 100 ms later.
    Click(String),
    /// The user says these 16 kHz samples into the microphone (queued after what is being said):
    /// a WAV upload, shown as a line.
    Say(Vec<i16>),
    /// A chunk of the browser's microphone, queued the same way (not shown line by line: the
    /// wire's frame counts show it).
    Mic(Vec<i16>),
    /// A typed line (listen detect with the text, as py-xiaozhi sends it; not firmware behaviour).
    Type(String),
    /// A fault of the analog chain set or cleared.
    Fault { fault: ChainFault, on: bool },
    /// Another board (and firmware), and perhaps another backend: the twin is reflashed and
    /// boots again.
    Switch {
        board: String,
        firmware: Option<String>,
        backend: Option<Backend>,
    },
}

/// A message to every open page: a JSON event, or a chunk of what the listener hears.
#[derive(Clone, Debug)]
pub enum Msg {
    Text(Arc<str>),
    Audio(Arc<[u8]>),
}

/// What a page that opens now is shown first, and what the HTTP API reads.
#[derive(Default)]
pub struct View {
    /// The board: name, display, buttons.
    pub board: Value,
    /// The backend the device dials (as the page shows it: `board.backend`).
    pub backend: Option<Backend>,
    /// The latest state, volume, brightness, faults.
    pub status: Value,
    /// The screen as PNG, and how many times it changed.
    pub screen: Option<Arc<[u8]>>,
    pub screen_version: u64,
    /// MCP calls, oldest first: request, reply, and the level of the speech around them.
    pub calls: Vec<Value>,
    /// Levels of the speech, by sentence, as the twin measured them.
    pub heard: Vec<Value>,
    /// The wire and the device log, newest last.
    pub lines: VecDeque<Value>,
}

/// What the console's parts share: the page's channel and the latest view.
pub struct Hub {
    pub events: broadcast::Sender<Msg>,
    pub view: Mutex<View>,
    pub cmds: mpsc::UnboundedSender<Cmd>,
    /// What the page asked for, taken by whichever device runs (one after each reflash).
    received: Mutex<mpsc::UnboundedReceiver<Cmd>>,
    /// The board to reflash to, once asked, and the switch that stops the running device.
    pub(super) reflash: Mutex<Reflash>,
    /// The backends the page may choose.
    pub choices: Choices,
}

/// A reflash asked for: the board to boot next (and the backend, when it changes), and what
/// stops the device running now.
#[derive(Default)]
pub(super) struct Reflash {
    pub(super) next: Option<(Arc<BoardSpec>, Option<Backend>)>,
    stop: Option<watch::Sender<bool>>,
}

/// The backends the page may choose: the built-in one's personalities and wires, and the real
/// server the console was started with, if any.
#[derive(Clone, Debug, Default)]
pub struct Choices {
    pub personalities: Vec<String>,
    pub server: Option<Backend>,
}

impl Choices {
    pub fn json(&self) -> Value {
        json!({
            "personalities": self.personalities,
            "wires": [Wire::Websocket.name(), Wire::Mqtt.name()],
            "server": self.server.as_ref().map(Backend::json),
        })
    }
}

impl Hub {
    /// A hub for a console whose first board is `board`, whose page may choose a backend of
    /// `choices`.
    pub fn new(board: Value, choices: Choices) -> Arc<Hub> {
        let (events, _) = broadcast::channel(1024);
        let (cmds, rx) = mpsc::unbounded_channel();
        let view = View {
            board,
            ..View::default()
        };
        Arc::new(Hub {
            events,
            view: Mutex::new(view),
            cmds,
            received: Mutex::new(rx),
            reflash: Mutex::new(Reflash::default()),
            choices,
        })
    }

    /// A new device runs `board` against `backend`: the view starts over (the lines stay), every
    /// page is told.
    pub(super) fn reflashed(&self, board: Value, backend: &Backend, stop: watch::Sender<bool>) {
        let hello = {
            let mut view = self.view();
            let lines = std::mem::take(&mut view.lines);
            *view = View {
                board,
                backend: Some(backend.clone()),
                lines,
                ..View::default()
            };
            drop(view);
            super::web::hello(self)
        };
        self.reflash.lock().unwrap_or_else(|e| e.into_inner()).stop = Some(stop);
        self.send(&hello);
    }

    /// The view, however a panic elsewhere left its lock.
    pub fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, event: &Value) {
        let _ = self.events.send(Msg::Text(event.to_string().into()));
    }

    /// A line of the console's own (not at any time of the device's).
    pub(super) fn note(&self, text: &str) {
        self.line(json!({"kind": "user", "at_ms": null, "text": text}));
    }

    /// A wire or log line: kept for pages that open later, and sent.
    fn line(&self, line: Value) {
        self.send(&json!({"type": "line", "line": line}));
        let mut view = self.view();
        view.lines.push_back(line);
        if view.lines.len() > KEPT {
            view.lines.pop_front();
        }
    }
}

/// The console's companion of the live device.
pub struct Console {
    hub: Arc<Hub>,
    /// Buttons to let go of, and when.
    releases: Vec<(Instant, String)>,
    /// Virtual time up to which the listener's sound was sent.
    heard_until: Option<SimTime>,
    screen: Option<ScreenState>,
    status: Value,
    /// Speech windows whose level was sent: (session, sentence).
    measured: BTreeSet<(u64, Option<usize>)>,
    /// Frames of speech received and of microphone audio sent since the last wire line.
    audio_in: u64,
    mic_out: u64,
    faults: BTreeSet<&'static str>,
}

impl Console {
    pub fn new(hub: Arc<Hub>) -> Console {
        Console {
            hub,
            releases: Vec::new(),
            heard_until: None,
            screen: None,
            status: Value::Null,
            measured: BTreeSet::new(),
            audio_in: 0,
            mic_out: 0,
            faults: BTreeSet::new(),
        }
    }

    /// Carries out one command at `now`.
    fn run(&mut self, device: &mut Device, now: SimTime, cmd: Cmd) {
        let shown = match cmd {
            Cmd::Button { name, pressed } => match device.button(now, &name, pressed) {
                Ok(()) => format!("{name} {}", if pressed { "down" } else { "up" }),
                Err(e) => format!("{e}"),
            },
            Cmd::Click(name) => match device.button(now, &name, true) {
                Ok(()) => {
                    self.releases.push((Instant::now() + CLICK, name.clone()));
                    format!("{name} click")
                }
                Err(e) => format!("{e}"),
            },
            Cmd::Say(pcm) => {
                let secs = pcm.len() as f64 / 16_000.0;
                device.say(now, &pcm);
                format!("said {secs:.2} s into the microphone")
            }
            Cmd::Mic(pcm) => {
                device.say(now, &pcm);
                return;
            }
            Cmd::Type(text) => {
                device.type_text(now, &text);
                format!("typed {text:?} (listen detect with the text, as py-xiaozhi sends it; not firmware behaviour)")
            }
            Cmd::Fault { fault, on } => {
                device.set_chain_fault(now, fault, on);
                if on {
                    self.faults.insert(fault.name());
                } else {
                    self.faults.remove(fault.name());
                }
                format!("fault {} {}", fault.name(), if on { "set" } else { "cleared" })
            }
            Cmd::Switch {
                board,
                firmware,
                backend,
            } => match crate::boards::load_as(&board, firmware.as_deref()) {
                Ok(spec) => {
                    let mut shown = format!("reflash: {} on firmware {}", spec.name, spec.firmware.version);
                    if let Some(b) = &backend {
                        shown = format!("{shown}, against {}", b.text());
                    }
                    let mut reflash = self.hub.reflash.lock().unwrap_or_else(|e| e.into_inner());
                    reflash.next = Some((spec, backend));
                    if let Some(stop) = &reflash.stop {
                        let _ = stop.send(true);
                    }
                    shown
                }
                Err(e) => format!("cannot reflash to {board}: {e:#}"),
            },
        };
        self.hub.line(json!({"kind": "user", "at_ms": ms(now), "text": shown}));
    }

    /// Sends the state, volume, brightness and faults when they changed.
    fn status(&mut self, device: &Device) {
        let s = device.snapshot();
        let status = json!({
            "state": s.state.map(|x| x.name()),
            "running": s.running,
            "boots": s.boots,
            "volume": s.volume,
            "brightness": s.brightness,
            "output_enabled": s.output_enabled,
            "pa_on": s.pa_on,
            "faults": self.faults.iter().collect::<Vec<_>>(),
        });
        if status != self.status {
            let mut shown = status.clone();
            shown["at_ms"] = json!(ms(device.now()));
            self.hub.send(&json!({"type": "status", "status": shown}));
            self.hub.view().status = shown;
            self.status = status;
        }
    }

    /// Draws the screen when what it shows changed.
    fn screen(&mut self, device: &Device) {
        let now = device.now();
        let state = device.screen_log().at(now);
        if self.screen.as_ref() == Some(&state) {
            return;
        }
        let brightness = device.snapshot().brightness.unwrap_or(100);
        let frame = xiaozhi_sim::hw::picture::Frame {
            spec: device.spec(),
            state: &state,
            at: now,
            brightness,
        };
        let png: Option<Arc<[u8]>> = xiaozhi_sim::hw::picture::render_png(&frame).map(Into::into);
        self.screen = Some(state);
        let version = {
            let mut view = self.hub.view();
            view.screen = png;
            view.screen_version += 1;
            view.screen_version
        };
        self.hub
            .send(&json!({"type": "screen", "version": version, "at_ms": ms(now)}));
    }

    /// Sends what the listener heard since the last chunk: the sound pressure at the listener,
    /// Pa, as 32-bit floats after a header (`from_ms` f64, `rate` u32, little-endian). Only time
    /// the device has passed is rendered: what is queued may still be cut.
    fn audio(&mut self, device: &Device) {
        let now = device.now();
        let from = *self.heard_until.get_or_insert(now);
        if now <= from {
            return;
        }
        let (_, signals) = device.render(from, now, true);
        self.heard_until = Some(now);
        let Some(signals) = signals else { return };
        if signals.listener_pa.is_empty() {
            return;
        }
        let rate = device.chain_setup().rate;
        let mut bytes = Vec::with_capacity(12 + 4 * signals.listener_pa.len());
        bytes.extend_from_slice(&ms(from).to_le_bytes());
        bytes.extend_from_slice(&rate.to_le_bytes());
        for x in &signals.listener_pa {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        let _ = self.hub.events.send(Msg::Audio(bytes.into()));
    }

    /// Sends the level of every speech window that is over, as the twin measured it.
    fn heard(&mut self, device: &Device) {
        let now = device.now();
        let log = device.speech_log();
        let last = log.sessions.last().map(|s| s.n);
        for s in &log.sessions {
            let windows = std::iter::once((None, s.window, String::new(), s.stopped.is_some() || Some(s.n) != last))
                .chain(s.sentences.iter().enumerate().map(|(i, x)| {
                    let over = i + 1 < s.sentences.len() || s.stopped.is_some() || Some(s.n) != last;
                    (Some(i), x.window, x.text.clone(), over)
                }));
            for (sentence, window, text, over) in windows {
                let Some(w) = window.filter(|w| over && w.end <= now) else {
                    continue;
                };
                if !self.measured.insert((s.n, sentence)) {
                    continue;
                }
                let (m, _) = device.heard(&w, false);
                let event = json!({
                    "session": s.n,
                    "sentence": sentence,
                    "text": text,
                    "from_ms": m.from_ms,
                    "to_ms": m.to_ms,
                    "spl_db": m.spl_db,
                    "verdict": m.verdict.name(),
                    "codec_gain_db": m.codec_gain_db,
                });
                self.hub.send(&json!({"type": "heard", "heard": event}));
                keep_last(&mut self.hub.view().heard, event);
            }
        }
    }

    /// What the device holds that a tool may change: a record's readback, taken when a request
    /// arrives (`before`) and when its reply leaves (`after`).
    fn held(device: &Device) -> Value {
        let s = device.snapshot();
        json!({"volume": s.volume, "brightness": s.brightness, "theme": s.theme})
    }

    /// An MCP request arrived: a new row of the calls' timeline.
    fn request(&mut self, at: SimTime, read: &Incoming, device: &Device) {
        let Some(r) = &read.request else {
            return;
        };
        let event = json!({
            "id": read.reply_id(), "method": r.method, "tool": r.tool, "arguments": crate::live::arguments(r),
            "at_ms": ms(at), "before": Self::held(device),
        });
        self.hub.send(&json!({"type": "call", "call": event}));
        keep_last(&mut self.hub.view().calls, event);
    }

    /// An MCP reply left (`id` and `is_error` as the device says, [`xiaozhi_sim::device::Sent`]):
    /// its text, and the tools a `tools/list` page listed (the records' discovery).
    fn reply(&mut self, at: SimTime, id: i32, is_error: bool, text: &[u8], device: &Device) {
        let v: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
        let result = &v["payload"]["result"];
        let listed: Option<Vec<&str>> = result["tools"]
            .as_array()
            .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect());
        let event = json!({
            "id": id,
            "reply_ms": ms(at),
            "text": result["content"][0]["text"],
            "is_error": is_error || result["isError"].as_bool().unwrap_or(false),
            "error": v["payload"]["error"]["message"],
            "listed": listed,
            "after": Self::held(device),
        });
        self.hub.send(&json!({"type": "reply", "call": event}));
        let mut view = self.hub.view();
        let call = view
            .calls
            .iter_mut()
            .rev()
            .find(|c| c["id"] == id && c.get("reply_ms").is_none());
        if let Some(c) = call {
            for (k, v) in event.as_object().into_iter().flatten() {
                c[k] = v.clone();
            }
        }
    }

    /// Frame counts since the last line, as one wire line.
    fn counts(&mut self, now: SimTime) {
        if self.audio_in + self.mic_out == 0 {
            return;
        }
        let text = format!(
            "audio: {} speech frames in, {} microphone frames out",
            self.audio_in, self.mic_out
        );
        self.hub.line(json!({"kind": "audio", "at_ms": ms(now), "text": text}));
        self.audio_in = 0;
        self.mic_out = 0;
    }
}

impl Companion for Console {
    fn act(&mut self, device: &mut Device, turn: &Turn<'_>) {
        let now = turn.clock.now();
        loop {
            let cmd = self.hub.received.lock().unwrap_or_else(|e| e.into_inner()).try_recv();
            let Ok(cmd) = cmd else { break };
            self.run(device, now, cmd);
        }
        let due: Vec<String> = {
            let t = Instant::now();
            let (due, wait): (Vec<_>, Vec<_>) = self.releases.drain(..).partition(|(at, _)| *at <= t);
            self.releases = wait;
            due.into_iter().map(|(_, n)| n).collect()
        };
        for name in due {
            let _ = device.button(now, &name, false);
        }
        device.run_until(now);
        // The screen first: a reader that sees the new status finds the screen drawn.
        self.screen(device);
        self.status(device);
        self.audio(device);
        self.heard(device);
    }

    fn seen(&mut self, what: &Seen<'_>, device: &Device) {
        match *what {
            Seen::Sent { at, sent, text } => {
                self.counts(at);
                if let Sent::Reply { id, is_error } = *sent {
                    self.reply(at, id, is_error, text, device);
                }
                let text = String::from_utf8_lossy(text);
                self.hub.line(json!({"kind": "out", "at_ms": ms(at), "text": text}));
            }
            Seen::Received { at, text, read } => {
                self.counts(at);
                self.request(at, read, device);
                let text = String::from_utf8_lossy(text);
                self.hub.line(json!({"kind": "in", "at_ms": ms(at), "text": text}));
            }
            Seen::AudioIn => self.audio_in += 1,
            Seen::MicSent => self.mic_out += 1,
            Seen::Dialled(ok) => {
                let text = if ok { "connected" } else { "dial failed" };
                self.hub
                    .line(json!({"kind": "link", "at_ms": ms(device.now()), "text": text}));
            }
            Seen::Closed => {
                self.hub
                    .line(json!({"kind": "link", "at_ms": ms(device.now()), "text": "channel closed"}));
            }
            Seen::Traced(e) => {
                self.hub
                    .line(json!({"kind": "log", "at_ms": ms(device.now()), "text": e.to_string()}));
            }
            Seen::Replied(_) | Seen::Dropped => {}
        }
    }
}

/// Appends `item`, keeping the newest [`KEPT`] (a backend that calls without end holds no more).
fn keep_last(list: &mut Vec<Value>, item: Value) {
    list.push(item);
    if list.len() > KEPT {
        list.drain(..list.len() - KEPT);
    }
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}
