//! What sits beside a live device: the simulated users, who act on it (`--wake`, `connect
//! --script`, a voice fleet's talking user in `crate::fleet::turns`), and the observers, who only
//! watch (the record of `connect --report`, a fleet's counters). They are one small trait,
//! [`Companion`], fed by the driver with what crossed the link — every text frame as the device
//! read it ([`Incoming`]) or says it sent it ([`Sent`]) — and with the device's trace events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use xiaozhi_sim::device::{Device, DeviceState, Incoming, MessageType, Sent};
use xiaozhi_sim::time::{SimDuration, SimTime};
use xiaozhi_sim::trace::{Event, TraceEvent};
use xiaozhi_sim::voice::codec::MIC_RATE;

use super::net::Clock;
use super::stats::{DeviceStats, Request};
use crate::user::{Action, Line};

/// A simulated user or an observer of one live device.
pub trait Companion {
    /// The user's turn, once per loop of the driver before the device's output is carried
    /// (an observer does nothing here).
    fn act(&mut self, _device: &mut Device, _turn: &Turn<'_>) {}
    /// Something crossed the link or the device traced an event.
    fn seen(&mut self, _what: &Seen<'_>, _device: &Device) {}
    /// The run is over: leave what was kept in the device's stats.
    fn finish(&mut self, _stats: &mut DeviceStats) {}
    /// Datagrams a third party sends from a socket of its own (a user's `forge`), taken.
    fn forged(&mut self) -> Vec<Forged> {
        Vec::new()
    }
}

/// A datagram sent from outside the device: where to, and its bytes.
pub type Forged = (String, u16, Vec<u8>);

/// The payload of a `forge`d datagram: not Opus the device's key made (the forger has none).
const FORGED_PAYLOAD: [u8; 40] = [0xA5; 40];

/// What a user knows when it is its turn.
pub struct Turn<'a> {
    /// Virtual time at the top of this loop.
    pub now: SimTime,
    /// The driver's clock (a user whose actions take time reads it afresh).
    pub clock: &'a Clock,
    /// The WebSocket is open.
    pub open: bool,
}

/// What a companion sees.
#[derive(Clone, Copy, Debug)]
pub enum Seen<'a> {
    /// A text frame the device sent (at its virtual time), whether or not a socket was open to
    /// carry it: what it is, as the device says, and its text.
    Sent {
        at: SimTime,
        sent: &'a Sent,
        text: &'a [u8],
    },
    /// A text frame arrived (at this virtual time); the device has handled it and says what it
    /// read.
    Received {
        at: SimTime,
        text: &'a [u8],
        read: &'a Incoming,
    },
    /// An MCP reply left on the socket, this long (wall time) after its request arrived.
    Replied(Duration),
    /// A microphone frame left on the socket.
    MicSent,
    /// A binary frame (the server's speech) arrived.
    AudioIn,
    /// A dial ended: the socket is open (`true`), or it failed.
    Dialled(bool),
    /// An open socket went away (whoever closed it).
    Dropped,
    /// The channel closed for the user: the device closed it, the server did, or a write failed.
    Closed,
    /// The device traced an event.
    Traced(&'a TraceEvent),
}

fn ms(t: SimTime) -> f64 {
    t.as_micros() as f64 / 1000.0
}

/// When the simulated user opens the audio channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// After every boot, once the device is idle (the default: unattended runs keep going).
    OnBoot,
    /// Never by itself.
    Manual,
    /// Whenever the device has been idle with the channel closed for this long.
    Every(SimDuration),
}

impl std::str::FromStr for Wake {
    type Err = String;
    fn from_str(s: &str) -> Result<Wake, String> {
        match s {
            "on-boot" => Ok(Wake::OnBoot),
            "manual" => Ok(Wake::Manual),
            _ => match s.strip_prefix("every:") {
                Some(d) => xiaozhi_sim::time::parse_duration(d)
                    .map(Wake::Every)
                    .map_err(|e| e.to_string()),
                None => Err(format!(
                    "--wake `{s}`: use on-boot, manual or every:<duration> (e.g. every:30s)"
                )),
            },
        }
    }
}

/// `--wake`: the user who opens the channel with a BOOT click when the device is idle.
pub struct Waker {
    wake: Wake,
    woke_for_boot: u32,
    idle_since: Option<SimTime>,
}

impl Waker {
    pub fn new(wake: Wake) -> Waker {
        Waker {
            wake,
            woke_for_boot: 0,
            idle_since: None,
        }
    }
}

impl Companion for Waker {
    fn act(&mut self, device: &mut Device, turn: &Turn<'_>) {
        let now = turn.now;
        let idle = device.state() == Some(DeviceState::Idle) && !turn.open;
        match self.wake {
            Wake::OnBoot if device.is_running() && idle && self.woke_for_boot < device.boots() => {
                self.woke_for_boot = device.boots();
                device.toggle_chat(now);
            }
            Wake::Every(d) if idle => match self.idle_since {
                Some(t) if now.saturating_since(t) >= d => {
                    self.idle_since = None;
                    device.toggle_chat(now);
                }
                None => self.idle_since = Some(now),
                _ => {}
            },
            _ => {}
        }
    }
}

/// `connect --script`: the user who carries out timed actions, one line after the other.
pub struct Scripted {
    lines: Vec<Line>,
    at: usize,
    next: Instant,
    verbose: bool,
    label: String,
    /// What was done (ms, line, action).
    done: Vec<(f64, usize, String)>,
    /// Datagrams forged and not yet sent.
    forged: Vec<Forged>,
}

impl Scripted {
    pub fn new(lines: Vec<Line>, verbose: bool, label: String) -> Scripted {
        Scripted {
            lines,
            at: 0,
            next: Instant::now(),
            verbose,
            label,
            done: Vec::new(),
            forged: Vec::new(),
        }
    }
}

impl Companion for Scripted {
    fn act(&mut self, device: &mut Device, turn: &Turn<'_>) {
        while self.at < self.lines.len() && Instant::now() >= self.next {
            let (at, n) = (self.at, self.lines[self.at].line);
            self.at += 1;
            let now = turn.clock.now();
            let (takes, shown) = match &self.lines[at].action {
                Action::Forge => (Duration::ZERO, self.forge(device, now)),
                action => act(device, now, action),
            };
            if self.verbose {
                crate::errln!("[{}] user (line {n}): {shown}", self.label);
            }
            self.done.push((ms(now), n, shown));
            self.next = Instant::now() + takes;
        }
    }

    fn finish(&mut self, stats: &mut DeviceStats) {
        stats.user = std::mem::take(&mut self.done);
    }

    fn forged(&mut self) -> Vec<Forged> {
        std::mem::take(&mut self.forged)
    }
}

impl Scripted {
    /// `forge`: a datagram with the device's channel's ssrc, queued for another socket; how the
    /// action is shown.
    fn forge(&mut self, device: &mut Device, now: SimTime) -> String {
        match device.forged_datagram(now, &FORGED_PAYLOAD) {
            Some((host, port, datagram)) => {
                let shown = format!(
                    "forge: a {}-byte datagram with this channel's ssrc, to {host}:{port} from another socket",
                    datagram.len()
                );
                self.forged.push((host, port, datagram));
                shown
            }
            None => "forge: no open MQTT + UDP audio channel, nothing sent".into(),
        }
    }
}

/// Carries out one user action on the device; returns how long it takes (a `say` lasts as
/// long as its audio, a `wait` its duration) and how it is shown.
fn act(device: &mut Device, now: SimTime, action: &Action) -> (Duration, String) {
    match action {
        Action::Wait(d) => (*d, format!("wait {d:?}")),
        Action::Wake(w, said) if said.is_empty() => {
            device.wake_word(now, w);
            (Duration::ZERO, format!("wake {w}"))
        }
        Action::Wake(w, said) => {
            // Detected now, as the word ends: the WAV is the end of the wake-word cache.
            device.wake_word_saying(now, w, said);
            let d = said.len() as f64 / f64::from(MIC_RATE);
            (
                Duration::ZERO,
                format!("wake {w} (said for {d:.2} s: the end of the audio sent before listen detect)"),
            )
        }
        Action::Say(pcm, file) => {
            device.say(now, pcm);
            let d = Duration::from_micros(pcm.len() as u64 * 1_000_000 / u64::from(MIC_RATE));
            (d, format!("say {file} ({:.2} s)", d.as_secs_f64()))
        }
        Action::Type(t) => {
            device.type_text(now, t);
            (
                Duration::ZERO,
                format!("typed input {t:?} (listen detect, as py-xiaozhi; not firmware behaviour)"),
            )
        }
        Action::Abort => {
            device.toggle_chat(now);
            (Duration::ZERO, "abort (BOOT click)".into())
        }
        Action::Forge => (Duration::ZERO, "forge (not by this user)".into()),
        Action::Button { button, pressed } => {
            // The script's buttons were checked against the board when it was read.
            let _ = device.button(now, button, *pressed);
            let how = if *pressed { "down" } else { "up" };
            (Duration::ZERO, format!("{button} {how}"))
        }
    }
}

/// The record of `connect --report`: state transitions, the `listen`/`abort` messages the device
/// sent, the MCP requests that arrived and the replies it sent.
#[derive(Default)]
pub struct Recorder {
    transitions: Vec<(f64, String, String)>,
    control_out: Vec<(f64, String)>,
    requests_in: Vec<Request>,
    replies_out: Vec<(f64, Option<i64>, Option<String>)>,
}

impl Companion for Recorder {
    fn seen(&mut self, what: &Seen<'_>, _: &Device) {
        match *what {
            Seen::Sent { at, sent, text } => match sent {
                Sent::ListenStart(_) | Sent::ListenStop | Sent::ListenDetect(_) | Sent::Abort(_) => {
                    self.control_out
                        .push((ms(at), String::from_utf8_lossy(text).into_owned()));
                }
                Sent::Reply { id, .. } => {
                    self.replies_out.push((ms(at), Some(i64::from(*id)), result_text(text)));
                }
                Sent::Hello | Sent::Goodbye => {}
            },
            Seen::Received { at, read, .. } => {
                if let Some(r) = &read.request {
                    self.requests_in.push(Request {
                        at_ms: ms(at),
                        method: r.method.clone(),
                        tool: r.tool.clone(),
                        arguments: arguments(r),
                        id: read.reply_id().map(i64::from),
                    });
                }
            }
            Seen::Traced(e) => {
                if let Event::StateChanged { from, to } = &e.kind {
                    self.transitions
                        .push((ms(e.at), from.name().to_string(), to.name().to_string()));
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, stats: &mut DeviceStats) {
        stats.transitions = std::mem::take(&mut self.transitions);
        stats.control_out = std::mem::take(&mut self.control_out);
        stats.requests_in = std::mem::take(&mut self.requests_in);
        stats.replies_out = std::mem::take(&mut self.replies_out);
    }
}

/// A request's arguments as the device printed them, as JSON (`None` without any).
pub fn arguments(request: &xiaozhi_sim::device::Request) -> Option<serde_json::Value> {
    serde_json::from_str(request.arguments.as_deref()?).ok()
}

/// A reply's `result.content[0].text`: the report keeps it, so only the report reads it from
/// the payload the device sent (the device says the rest: [`Sent::Reply`]).
fn result_text(text: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(text).ok()?;
    v["payload"]["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_string)
}

/// Counters shared by the devices of a fleet (read by the progress bar).
#[derive(Debug, Default)]
pub struct Counters {
    /// Devices whose WebSocket is open right now.
    pub open: AtomicU64,
    /// Server hellos received.
    pub hellos: AtomicU64,
    /// MCP replies sent.
    pub replies: AtomicU64,
    /// Request-in to reply-out times on the device, in microseconds.
    pub reply_us: Mutex<Vec<u32>>,
}

/// Each device of a fleet counts into the fleet's one set of counters.
impl Companion for Arc<Counters> {
    fn seen(&mut self, what: &Seen<'_>, _: &Device) {
        match what {
            Seen::Dialled(true) => {
                self.open.fetch_add(1, Ordering::Relaxed);
            }
            Seen::Dropped => {
                self.open.fetch_sub(1, Ordering::Relaxed);
            }
            Seen::Received { read, .. } if read.message == MessageType::Hello => {
                self.hellos.fetch_add(1, Ordering::Relaxed);
            }
            Seen::Replied(d) => {
                self.replies.fetch_add(1, Ordering::Relaxed);
                let us = d.as_micros().min(u32::MAX as u128) as u32;
                self.reply_us.lock().unwrap_or_else(|e| e.into_inner()).push(us);
            }
            _ => {}
        }
    }
}
