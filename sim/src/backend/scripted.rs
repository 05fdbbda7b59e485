//! A scripted backend connection: one [`Session`] (the personality's MCP client, ear and voice)
//! plus the [`Script`] it runs once discovery is over and the [`BackendFault`] it may be told to
//! commit. What `xiaozhi-twin backend` and a fleet's built-in backend run per connection, and
//! what [`crate::loopback::Loopback`] replays in virtual time.
//!
//! # The contract (quinn-proto's `Connection` shape)
//!
//! A [`ScriptedBackend`] never reads a clock, a socket or a file. Its driver hands it what
//! happened, with the time it happened at:
//!
//! * [`handle_text`](ScriptedBackend::handle_text) / [`handle_binary`](ScriptedBackend::handle_binary):
//!   a frame from the device;
//! * [`handle_timeout`](ScriptedBackend::handle_timeout): the deadline [`poll_timeout`](ScriptedBackend::poll_timeout)
//!   gave has passed;
//! * [`handle_command`](ScriptedBackend::handle_command): a step typed by a person (stdin), run at
//!   once on a ready connection, outside the script (its waits are not waited for);
//! * [`handle_closed`](ScriptedBackend::handle_closed): the connection is gone, whoever ended it.
//!
//! After each input the driver takes every [`poll_action`](ScriptedBackend::poll_action) in
//! order ([`ScriptedAction`]: frames, raw bytes, close, vanish, "script done") and then sleeps
//! until [`poll_timeout`](ScriptedBackend::poll_timeout) or the next input. A
//! [`ScriptedAction::Close`] or [`ScriptedAction::Vanish`] is the last action: the backend has
//! ended the connection and takes nothing more; the driver calls `handle_closed` and reads the
//! [`report`](ScriptedBackend::report). While [`takes_input`](ScriptedBackend::takes_input) is
//! false (a `garbage` step was written and the backend lingers 100 ms before it vanishes) the
//! driver does not read the socket: nothing the device sends reaches the backend any more.
//!
//! # How the script runs
//!
//! Nothing runs before discovery is done ([`Session::is_ready`]). Then steps run in order as
//! far as they go: `call` waits for its reply (or its timeout), `await utterance` for the next
//! utterance the script has not had — one that came before (the first words of a connection,
//! said while discovery ran, which the real server chats with regardless) is held for it and
//! taken at once, in the turn it opened — `wait` until its time; any other step that is not
//! `speak`/`call`/`send` first ends the open speaking turn, and so does the end of the script. The script is *done* (one
//! [`ScriptedAction::ScriptDone`]) once the last step has run and no `call` waits for its reply.
//!
//! # Faults
//!
//! A [`BackendFault`] filters what the session decided to send: `never-tts-start` drops every
//! `tts start`; `stop-mid-reply` sends the first 10 audio frames of a reply and nothing more of
//! it, its `tts stop` included; `flood` sends every audio frame 10 times; `close-every:N` closes
//! the Nth, 2Nth, … connection right after its `tts start`.
//!
//! `speak … wav FILE` sounds come from a [`Resources`] the driver gives (the binary reads the
//! WAV files). Depends on the session, the script grammar and the speech types; nothing else.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::backend::script::{Command, PLACEHOLDERS, Script, SpeakVoice, fill};
use crate::backend::{Action, BackendSpec, Session, SessionReport};
use crate::spec::{NoFiles, Resources};
use crate::time::{MAX_SOUND, SimDuration, SimTime, earliest};
use crate::voice::memo::CodecPool;
use crate::voice::speak::{Timbre, natural_duration};

/// The bytes a `garbage` step writes: a reserved opcode (0x3) with the RSV bits set, then
/// "hello". No WebSocket peer can parse them.
pub const GARBAGE: &[u8] = &[0xF3, 0x05, b'h', b'e', b'l', b'l', b'o'];
/// How long the backend lingers after `garbage` before it drops the connection.
pub const GARBAGE_LINGER: SimDuration = SimDuration::from_millis(100);
/// Audio frames of a reply that a `stop-mid-reply` backend still sends.
pub const STOP_MID_REPLY_AFTER: u32 = 10;
/// How many times a `flood` backend sends each audio frame.
pub const FLOOD_COPIES: usize = 10;

/// A misbehaving backend, for the fleet's fault runs (`fleet --voice --backend-fault`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendFault {
    /// Behaves.
    #[default]
    None,
    /// Never sends `tts start` (the audio still comes: the device drops it).
    NeverTtsStart,
    /// Stops mid-reply: after 10 audio frames of a reply, nothing more of it (no `tts stop`).
    StopMidReply,
    /// Floods: every audio frame sent 10 times (10× real time).
    Flood,
    /// Closes every Nth connection as its reply starts.
    CloseEvery(u64),
}

/// A `--backend-fault` value that names no fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: use none, never-tts-start, stop-mid-reply, flood or close-every:N (N ≥ 1)")]
pub struct UnknownBackendFault(pub String);

impl std::str::FromStr for BackendFault {
    type Err = UnknownBackendFault;
    fn from_str(s: &str) -> Result<BackendFault, UnknownBackendFault> {
        match s {
            "none" => Ok(BackendFault::None),
            "never-tts-start" => Ok(BackendFault::NeverTtsStart),
            "stop-mid-reply" => Ok(BackendFault::StopMidReply),
            "flood" => Ok(BackendFault::Flood),
            _ => match s.strip_prefix("close-every:").map(str::parse::<u64>) {
                Some(Ok(n)) if n >= 1 => Ok(BackendFault::CloseEvery(n)),
                _ => Err(UnknownBackendFault(s.to_string())),
            },
        }
    }
}

/// What a `speak` line sounds like, and for how long (default: from the text's length, at most
/// [`MAX_SOUND`]: a filled-in placeholder may lengthen a sentence the script checked).
pub fn sound_of(
    text: &str,
    duration: Option<SimDuration>,
    voice: &SpeakVoice,
    wavs: &dyn Resources,
) -> (Timbre, SimDuration) {
    let timbre = match voice {
        SpeakVoice::Default => Timbre::default(),
        SpeakVoice::Tone(freq_hz, dbfs) => Timbre::Tone {
            freq_hz: *freq_hz,
            dbfs: *dbfs,
        },
        SpeakVoice::Wav(path) => match wavs.load_wav(path) {
            Ok((rate, samples)) => Timbre::Pcm {
                rate,
                samples: samples.into(),
            },
            // What cannot be read speaks with the built-in voice.
            Err(_) => Timbre::default(),
        },
    };
    (
        timbre,
        duration.unwrap_or_else(|| natural_duration(text).min(MAX_SOUND)),
    )
}

/// Encodes every sentence of `script` into `pool` before the first device connects, so no
/// connection waits (and no runtime worker blocks) while a reply is encoded. A sentence that
/// names its listener ([`fill`]) is encoded for each of `listeners` (device ids) on the turn it
/// comes in (the `await utterance` lines before it); for anyone else it is encoded when said.
pub fn prepare_speech(
    spec: &BackendSpec,
    script: &Script,
    pool: &Arc<dyn CodecPool>,
    wavs: &dyn Resources,
    listeners: &[String],
) {
    let Some(rate) = spec.voice.as_ref().map(|v| v.tts_rate) else {
        return;
    };
    for n in 1..=3 {
        let mut heard = 0u64;
        for line in script.steps_for(n) {
            match &line.step {
                Command::AwaitUtterance => heard += 1,
                Command::Speak { text, duration, voice } => {
                    let personal = PLACEHOLDERS.iter().any(|p| text.contains(p));
                    let who: &[String] = if personal { listeners } else { &[String::new()] };
                    for device in who {
                        let said = fill(text, device, heard.max(1));
                        let (timbre, d) = sound_of(&said, *duration, voice, wavs);
                        let _ = pool.speech(&timbre, &said, d, rate);
                    }
                }
                _ => {}
            }
        }
    }
}

/// What the driver of a scripted connection must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptedAction {
    /// Send one text frame.
    Text(String),
    /// Send one binary frame (speech).
    Binary(Vec<u8>),
    /// Write these bytes on the TCP stream as they are, outside any WebSocket frame.
    Raw(Vec<u8>),
    /// Send a WebSocket close frame; the connection is over (the backend closed it).
    Close,
    /// Drop TCP without a close frame; the connection is over (the backend vanished).
    Vanish,
    /// The device's connection drops (`disconnect`): over WebSocket as [`ScriptedAction::Vanish`];
    /// over MQTT + UDP the gateway drops the device's MQTT connection.
    Disconnect,
    /// Not a frame: the script has run to its end (no `call` waits for its reply).
    ScriptDone,
}

/// What a step leaves the script waiting for.
enum Wait {
    /// The replies of the calls sent so far.
    Reply,
    /// An utterance the script has not had.
    Utterance,
    /// This time.
    Until(SimTime),
}

/// Where the connection is, from the backend's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Frames go both ways.
    Open,
    /// `garbage` written: the backend reads nothing and vanishes at this time.
    Lingering(SimTime),
    /// The backend ended the connection (close or vanish), or was told it is gone.
    Over,
}

/// A fault and what it has counted on this connection.
#[derive(Debug)]
struct FaultRun {
    fault: BackendFault,
    /// The server's connection number (`close-every:N` counts every connection).
    connection: u64,
    /// Audio frames since the last `tts start`.
    reply_frames: u32,
    /// `stop-mid-reply` stopped this reply.
    muted: bool,
}

impl FaultRun {
    fn new(fault: BackendFault, connection: u64) -> FaultRun {
        FaultRun {
            fault,
            connection,
            reply_frames: 0,
            muted: false,
        }
    }

    /// What becomes of one text frame: whether it is sent, and whether the connection closes
    /// right after it.
    fn text(&mut self, text: &str) -> (bool, bool) {
        if self.fault == BackendFault::None {
            return (true, false);
        }
        let state = serde_json::from_str::<Value>(text)
            .ok()
            .filter(|v| v["type"] == "tts")
            .and_then(|v| v["state"].as_str().map(str::to_string));
        let tts = |s: &str| state.as_deref() == Some(s);
        let starts = tts("start");
        if starts {
            self.reply_frames = 0;
            self.muted = false;
        }
        let dropped = match self.fault {
            BackendFault::NeverTtsStart => starts,
            BackendFault::StopMidReply => self.muted && tts("stop"),
            _ => false,
        };
        let close = starts && matches!(self.fault, BackendFault::CloseEvery(k) if self.connection.is_multiple_of(k));
        (!dropped, close)
    }

    /// How many times one audio frame goes out (0: dropped).
    fn audio(&mut self) -> usize {
        self.reply_frames = self.reply_frames.saturating_add(1);
        match self.fault {
            BackendFault::StopMidReply if self.reply_frames > STOP_MID_REPLY_AFTER => {
                self.muted = true;
                0
            }
            BackendFault::Flood => FLOOD_COPIES,
            _ => 1,
        }
    }
}

/// One device connection of a backend that runs a script (see the module doc for the contract).
pub struct ScriptedBackend {
    session: Session,
    /// The steps for this connection of the device; `None`: no script runs at all (a session
    /// driven by hand, whose turns only its caller ends).
    steps: Option<Vec<Command>>,
    next_step: usize,
    waiting_reply: bool,
    /// Waiting for an utterance the script has not had yet.
    waiting_utterance: bool,
    /// Utterances the script's `await utterance` lines have had. One that came before the
    /// script asked (the first words of a connection, said while discovery ran) is held for it.
    heard: usize,
    resume_at: Option<SimTime>,
    script_done: bool,
    fault: FaultRun,
    wavs: Arc<dyn Resources>,
    life: Life,
    outbox: VecDeque<ScriptedAction>,
}

impl ScriptedBackend {
    /// Runs `script`'s steps for the device's `device_connection`th connection (1-based) on
    /// `session`, committing `fault`; `connection` is the server's connection number
    /// (what `close-every:N` counts), `wavs` gives the sound of `speak … wav FILE`.
    pub fn new(
        session: Session,
        script: &Script,
        device_connection: u32,
        connection: u64,
        fault: BackendFault,
        wavs: Arc<dyn Resources>,
    ) -> ScriptedBackend {
        let steps = script.steps_for(device_connection).map(|l| l.step.clone()).collect();
        ScriptedBackend {
            steps: Some(steps),
            fault: FaultRun::new(fault, connection),
            wavs,
            ..ScriptedBackend::unscripted(session)
        }
    }

    /// `session` with no script and no fault: it answers the device as its personality does,
    /// and does only what its caller tells it (through [`ScriptedBackend::session_mut`]).
    pub fn unscripted(session: Session) -> ScriptedBackend {
        ScriptedBackend {
            session,
            steps: None,
            next_step: 0,
            waiting_reply: false,
            waiting_utterance: false,
            heard: 0,
            resume_at: None,
            script_done: false,
            fault: FaultRun::new(BackendFault::None, 0),
            wavs: Arc::new(NoFiles),
            life: Life::Open,
            outbox: VecDeque::new(),
        }
    }

    /// The session inside (its report, its counters).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session inside, to drive by hand; what it decides comes out of
    /// [`ScriptedBackend::poll_action`] (through the fault).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// Whether the backend still reads what the device sends (false from a `garbage` step on,
    /// and once the connection is over).
    pub fn takes_input(&self) -> bool {
        self.life == Life::Open
    }

    /// A text frame from the device.
    pub fn handle_text(&mut self, now: SimTime, text: &str) {
        if self.takes_input() {
            self.session.handle_text(now, text);
            self.advance(now);
        }
    }

    /// A binary frame from the device (microphone audio).
    pub fn handle_binary(&mut self, now: SimTime, frame: &[u8]) {
        if self.takes_input() {
            self.session.handle_binary(now, frame);
            self.advance(now);
        }
    }

    /// The time [`ScriptedBackend::poll_timeout`] gave (or a later one) has come.
    pub fn handle_timeout(&mut self, now: SimTime) {
        match self.life {
            Life::Open => {
                self.session.handle_timeout(now);
                self.advance(now);
            }
            Life::Lingering(at) if now >= at => {
                self.outbox.push_back(ScriptedAction::Vanish);
                self.life = Life::Over;
            }
            Life::Lingering(_) | Life::Over => {}
        }
    }

    /// A step given from outside the script (a command typed on stdin): run at once if
    /// discovery is done (ignored before), its waits not waited for, the script not moved (a
    /// `repeat` is ignored).
    pub fn handle_command(&mut self, now: SimTime, step: Command) {
        if self.takes_input() && self.session.is_ready() && step != Command::Repeat {
            let _ = self.run_step(now, step);
            self.advance(now);
        }
    }

    /// The connection is gone (the device closed it, TCP broke, the backend stopped, or the
    /// backend's own close or vanish has been carried out).
    pub fn handle_closed(&mut self, now: SimTime) {
        self.life = Life::Over;
        self.session.handle_closed(now);
    }

    /// The next thing the driver must do, in order.
    pub fn poll_action(&mut self) -> Option<ScriptedAction> {
        if self.outbox.is_empty() {
            self.take_session_actions();
        }
        self.outbox.pop_front()
    }

    /// When to call [`ScriptedBackend::handle_timeout`] next (session timers, a script `wait`,
    /// the end of a `garbage` linger). Its answer can change after every input.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        match self.life {
            Life::Open => earliest(self.session.poll_timeout(), self.resume_at),
            Life::Lingering(at) => Some(at),
            Life::Over => None,
        }
    }

    /// A snapshot of this connection for the report.
    pub fn report(&self) -> SessionReport {
        self.session.report()
    }

    /// Moves what the session decided into the outbox, through the fault.
    fn take_session_actions(&mut self) {
        while self.life == Life::Open
            && let Some(action) = self.session.poll_action()
        {
            match action {
                Action::Send(text) => {
                    let (send, close) = self.fault.text(&text);
                    if send {
                        self.outbox.push_back(ScriptedAction::Text(text));
                    }
                    if close {
                        self.end_with(ScriptedAction::Close);
                    }
                }
                Action::Binary(frame) => match self.fault.audio() {
                    0 => {}
                    1 => self.outbox.push_back(ScriptedAction::Binary(frame)),
                    n => self
                        .outbox
                        .extend(std::iter::repeat_n(ScriptedAction::Binary(frame), n)),
                },
                Action::Close => self.end_with(ScriptedAction::Close),
            }
        }
    }

    fn end_with(&mut self, last: ScriptedAction) {
        self.outbox.push_back(last);
        self.life = Life::Over;
    }

    /// Runs the script as far as it goes at `now`, with what the session decided on the way
    /// taken out before each next step.
    fn advance(&mut self, now: SimTime) {
        loop {
            self.take_session_actions();
            let Some(len) = self.steps.as_ref().map(Vec::len) else {
                return;
            };
            if self.life != Life::Open || !self.session.is_ready() {
                return;
            }
            if self.waiting_reply && self.session.pending_len() == 0 {
                self.waiting_reply = false;
            }
            if self.waiting_utterance && self.session.utterances() > self.heard {
                self.waiting_utterance = false;
                self.heard += 1;
            }
            if self.run_steps(now) {
                continue;
            }
            if self.life != Life::Open {
                return;
            }
            let at_end = !self.waiting_reply && self.next_step == len;
            if at_end {
                self.session.end_turn(now);
                if self.session.has_actions() {
                    continue;
                }
            }
            if at_end && !self.script_done {
                self.script_done = true;
                self.outbox.push_back(ScriptedAction::ScriptDone);
            }
            return;
        }
    }

    /// Runs steps until one waits, the script ends, the backend ends the connection, or a step
    /// leaves the session with something to send (then `true`: take it out first).
    fn run_steps(&mut self, now: SimTime) -> bool {
        let len = self.steps.as_ref().map_or(0, Vec::len);
        while self.life == Life::Open
            && !self.waiting_reply
            && !self.waiting_utterance
            && self.resume_at.is_none_or(|t| now >= t)
            && self.next_step < len
        {
            self.resume_at = None;
            let Some(step) = self.steps.as_ref().and_then(|s| s.get(self.next_step)).cloned() else {
                return false;
            };
            self.next_step += 1;
            // An utterance already here opened the turn this step's answer belongs to.
            let held = matches!(step, Command::AwaitUtterance) && self.session.utterances() > self.heard;
            if !step.continues_turn() && !held {
                self.session.end_turn(now);
            }
            match self.run_step(now, step) {
                Some(Wait::Reply) => self.waiting_reply = true,
                Some(Wait::Utterance) => self.waiting_utterance = true,
                Some(Wait::Until(t)) => self.resume_at = Some(t),
                None => {}
            }
            if self.life == Life::Open && self.session.has_actions() {
                return true;
            }
        }
        false
    }

    /// One step; what it leaves the script waiting for.
    fn run_step(&mut self, now: SimTime, step: Command) -> Option<Wait> {
        match step {
            Command::Call { tool, args, wait } => {
                let before = self.session.pending_len();
                self.session.call(now, &tool, args);
                return (wait && self.session.pending_len() > before).then_some(Wait::Reply);
            }
            Command::Wait(d) => return Some(Wait::Until(now + d)),
            Command::AwaitUtterance => {
                if self.session.utterances() > self.heard {
                    self.heard += 1;
                } else {
                    return Some(Wait::Utterance);
                }
            }
            Command::Raw(text) => self.session.raw(&text),
            Command::Frame(text) => self.session.frame(text),
            Command::Garbage => {
                self.outbox.push_back(ScriptedAction::Raw(GARBAGE.to_vec()));
                self.life = Life::Lingering(now + GARBAGE_LINGER);
            }
            Command::Vanish => self.end_with(ScriptedAction::Vanish),
            Command::Disconnect => self.end_with(ScriptedAction::Disconnect),
            Command::Close => self.session.close(),
            // Start over, if the steps before it wait for something on this connection (the
            // `@N` lines of another connection do not); otherwise the script ends here.
            Command::Repeat => {
                let steps = self.steps.as_deref().unwrap_or_default();
                let here = self.next_step.saturating_sub(1);
                if steps[..here.min(steps.len())].iter().any(Command::pauses) {
                    self.next_step = 0;
                } else {
                    self.next_step = steps.len();
                }
            }
            Command::Speak { text, duration, voice } => {
                let text = fill(&text, self.session.device_id(), self.heard.max(1) as u64);
                let (timbre, d) = sound_of(&text, duration, &voice, self.wavs.as_ref());
                self.session.speak(now, &text, &timbre, d);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_by_their_cli_names_and_refuse_the_rest_in_words() {
        assert_eq!("none".parse(), Ok(BackendFault::None));
        assert_eq!("never-tts-start".parse(), Ok(BackendFault::NeverTtsStart));
        assert_eq!("stop-mid-reply".parse(), Ok(BackendFault::StopMidReply));
        assert_eq!("flood".parse(), Ok(BackendFault::Flood));
        assert_eq!("close-every:3".parse(), Ok(BackendFault::CloseEvery(3)));
        let e = "close-every:0".parse::<BackendFault>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "`close-every:0`: use none, never-tts-start, stop-mid-reply, flood or close-every:N (N ≥ 1)"
        );
    }

    #[test]
    fn stop_mid_reply_mutes_the_rest_of_a_reply_until_the_next_tts_start() {
        let mut f = FaultRun::new(BackendFault::StopMidReply, 1);
        assert_eq!(f.text(r#"{"type":"tts","state":"start"}"#), (true, false));
        let sent: Vec<usize> = (0..12).map(|_| f.audio()).collect();
        assert_eq!(sent, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0]);
        assert_eq!(f.text(r#"{"type":"tts","state":"stop"}"#), (false, false));
        assert_eq!(f.text(r#"{"type":"tts","state":"start"}"#), (true, false));
        assert_eq!(f.audio(), 1);
    }
}
