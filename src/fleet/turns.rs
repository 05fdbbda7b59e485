//! The user of one fleet device: voice turns (wait until the device listens, say the utterance,
//! hear the reply), with what a backend operator reads off a run: latencies per phase, how each
//! failed turn failed, TTS pacing as the device received it.
//!
//! A turn, on the device's wall clock:
//!
//! 1. *ready*: the device is listening with its channel open and has sent `listen start` since
//!    the last reply (the firmware's own `listen start` after `tts stop`, auto mode);
//! 2. the user says the utterance (its samples go to the microphone at real-time pace);
//! 3. *end of utterance*: the microphone frame that carries the utterance's last voiced 60 ms
//!    leaves the device (the same frame the backend's end-of-speech rule waits after);
//! 4. `stt`, `tts start`, the first TTS audio frame, `tts stop` arrive: the turn completed.
//!
//! A turn fails with one reason: the device never got ready (`refused`: the connection was
//! refused; `no_hello`: it opened but no hello came; `not_listening` otherwise), `no_tts_start`
//! (nothing within the turn timeout after the end of the utterance), `no_audio` (`tts start`
//! and `tts stop` with no audio frame between), `stuck_in_speaking`
//! (`tts start` without `tts stop` within the timeout), `connection_lost` (mid-turn), or
//! `frames_dropped` (the reply completed but the device dropped frames by its own rules: the
//! user heard gaps). After a failure the user recovers as a person would: a BOOT click (abort
//! speech, or open the channel again) and the next turn after the think time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use xiaozhi_sim::device::{Device, DeviceState, MessageType, Sent, TtsState, Utterance};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::voice::codec::MIC_RATE;

use crate::fleet::summary::Hist;
use crate::fleet::think::Draw;
use crate::live::{Companion, Seen, Turn};

/// A gap between TTS frames longer than this is a stutter the user hears (two 60 ms frames).
pub const STUTTER: Duration = Duration::from_millis(120);

/// What every device of a voice fleet does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The utterance, 16 kHz (one copy for the whole fleet).
    pub utterance: Arc<[i16]>,
    /// Samples of the utterance captured when its last voiced 60 ms frame has been read.
    pub voiced_end: usize,
    /// Turns per device.
    pub turns: u32,
    /// The wait before each turn (after the previous reply's `tts stop`).
    pub think: crate::fleet::think::Think,
    /// How long each phase may take before the turn fails.
    pub timeout: Duration,
    /// Where the built-in backend logs its own delay for each device's latest utterance (from
    /// the last voiced frame to the frame its end-of-utterance rule ended it on; its script
    /// speaks at once): first-audio latency less this is what the twin added. `None` for a
    /// backend that is not ours.
    pub ear_log: Option<Arc<crate::server::EarLog>>,
    /// Every device says the utterance exactly as recorded, every turn (the codec memo's best
    /// case); otherwise each device and turn says its own variation of it ([`variation`]).
    pub same_audio: bool,
    /// The level from which a 60 ms frame is voice for the built-in backend (sine-referenced
    /// RMS, dBFS).
    pub voice_dbfs: f64,
}

impl Plan {
    /// How long saying the utterance takes (the microphone's rate).
    pub fn utterance_length(&self) -> Duration {
        Duration::from_micros(self.utterance.len() as u64 * 1_000_000 / u64::from(MIC_RATE))
    }
}

/// Why a turn failed (the summary's keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    Refused,
    NoHello,
    NotListening,
    NoTtsStart,
    NoAudio,
    StuckInSpeaking,
    ConnectionLost,
    FramesDropped,
}

impl Failure {
    pub fn key(self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::NoHello => "no_hello",
            Failure::NotListening => "not_listening",
            Failure::NoTtsStart => "no_tts_start",
            Failure::NoAudio => "no_audio",
            Failure::StuckInSpeaking => "stuck_in_speaking",
            Failure::ConnectionLost => "connection_lost",
            Failure::FramesDropped => "frames_dropped",
        }
    }
}

/// Latency histograms of a fleet (microseconds).
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    /// End of utterance → `stt`.
    pub stt: Hist,
    /// End of utterance → first TTS audio frame (what the user feels).
    pub first_audio: Hist,
    /// End of utterance → `tts stop`.
    pub tts_stop: Hist,
    /// First-audio latency less the built-in backend's designed delay.
    pub twin_added_first_audio: Hist,
    /// MCP request in → reply out, at the device.
    pub mcp_reply: Hist,
    /// Longest gap between TTS frames of each reply.
    pub worst_gap: Hist,
}

/// Counters shared by the devices of a voice fleet (the progress bar reads them live).
#[derive(Debug, Default)]
pub struct Metrics {
    pub started: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    /// TTS audio frames received by devices.
    pub tts_frames: AtomicU64,
    /// Microphone frames sent by devices.
    pub mic_frames: AtomicU64,
    /// Gaps over [`STUTTER`] between TTS frames of a reply.
    pub stutters: AtomicU64,
    /// Replies with at least one such gap.
    pub stuttered_turns: AtomicU64,
    /// Devices whose last planned turn has ended.
    pub devices_done: AtomicU64,
    /// Turns in flight (said, reply not over).
    pub in_flight: AtomicU64,
    /// `stt` that came before the utterance's last voiced frame had left (a backend whose VAD
    /// ended the utterance earlier than the energy rule): not in the stt histogram.
    pub early_stt: AtomicU64,
    pub failures: Mutex<BTreeMap<Failure, u64>>,
    pub latency: Mutex<Latencies>,
}

impl Metrics {
    fn fail(&self, why: Failure) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        *self
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(why)
            .or_insert(0) += 1;
    }

    fn record(&self, f: impl FnOnce(&mut Latencies)) {
        f(&mut self.latency.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for the device to be ready (since), or for the think time (until `next`).
    Waiting { since: Instant },
    /// The utterance is going out.
    Saying { at: Instant },
    /// Said; the reply has not started.
    Awaiting { eou: Instant, stt: bool },
    /// `tts start` came.
    Speaking {
        eou: Instant,
        started: Instant,
        first: Option<Instant>,
        last: Option<Instant>,
        worst: Duration,
        stutters: u64,
    },
    /// Every turn ended; the user ends the conversation once the device is quiet.
    Finishing { since: Instant, entered: Instant },
    /// The conversation is over (channel closed, or given up on).
    Finished,
}

/// One device's user.
pub struct Driver {
    plan: Arc<Plan>,
    metrics: Arc<Metrics>,
    phase: Phase,
    next: Instant,
    done: u32,
    listen_started: bool,
    hello: bool,
    opened: bool,
    refused: bool,
    last_click: Option<Instant>,
    drops_seen: u64,
    /// A turn failed: what is left of its utterance goes (the next turn starts clean).
    clear_mic: bool,
    /// Seeds this user's variations of the utterance.
    voice_seed: u64,
    /// Samples of this turn's utterance, and how many are captured when its last voiced frame
    /// has been read.
    said: (usize, usize),
    /// The `Device-Id` the backend knows this device by (its [`Plan::ear_log`] key).
    device_id: String,
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Driver {
    /// The user of a device; `voice_seed` seeds how it says the utterance each turn.
    pub fn new(plan: Arc<Plan>, metrics: Arc<Metrics>, voice_seed: u64, device_id: String) -> Driver {
        let now = Instant::now();
        let said = (plan.utterance.len(), plan.voiced_end);
        let next = now + plan.think.before(voice_seed, 0);
        Driver {
            plan,
            metrics,
            phase: Phase::Waiting { since: now },
            next,
            done: 0,
            listen_started: false,
            hello: false,
            opened: false,
            refused: false,
            last_click: None,
            drops_seen: 0,
            clear_mic: false,
            voice_seed,
            said,
            device_id,
        }
    }

    fn end_turn(&mut self, failure: Option<Failure>, now: Instant) {
        if matches!(
            self.phase,
            Phase::Saying { .. } | Phase::Awaiting { .. } | Phase::Speaking { .. }
        ) {
            self.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        match failure {
            Some(f) => {
                self.metrics.fail(f);
                self.clear_mic = true;
            }
            None => {
                self.metrics.completed.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.done += 1;
        self.listen_started = false;
        self.next = now + self.plan.think.before(self.voice_seed, self.done);
        self.phase = if self.done >= self.plan.turns {
            Phase::Finishing {
                since: now,
                entered: now,
            }
        } else {
            Phase::Waiting { since: now }
        };
    }

    /// Called every loop of the device: starts turns, times them out, recovers.
    fn tick(&mut self, device: &mut Device, now: SimTime, channel_open: bool) {
        let wall = Instant::now();
        let t = self.plan.timeout;
        if std::mem::take(&mut self.clear_mic) {
            device.mic_clear();
        }
        let state = device.state();
        match self.phase {
            Phase::Finished => {}
            Phase::Finishing { since, entered } => {
                // A backend may say more after the last turn (a tool's result spoken): wait
                // until the device has been listening quietly for a while, then a BOOT click
                // closes the channel as the firmware does, so no backend is cut off mid-speech.
                let quiet = state == Some(DeviceState::Listening) || !channel_open;
                let since = if quiet { since } else { wall };
                self.phase = Phase::Finishing { since, entered };
                let settled = quiet && wall.duration_since(since) >= self.plan.think.settle();
                if settled || wall.duration_since(entered) > t {
                    if channel_open && state == Some(DeviceState::Listening) {
                        device.toggle_chat(now);
                    }
                    self.metrics.devices_done.fetch_add(1, Ordering::Relaxed);
                    self.phase = Phase::Finished;
                }
            }
            Phase::Waiting { since } => {
                if wall < self.next {
                    return;
                }
                let since = since.max(self.next);
                let ready = channel_open && state == Some(DeviceState::Listening) && self.listen_started;
                if ready {
                    self.drops_seen = drops(device);
                    self.metrics.started.fetch_add(1, Ordering::Relaxed);
                    self.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
                    let (said, voiced_end) = variation(&self.plan, self.voice_seed, self.done);
                    self.said = (said.len(), voiced_end);
                    device.say_utterance(now, said);
                    self.phase = Phase::Saying { at: wall };
                    return;
                }
                if wall.duration_since(since) > t {
                    let why = if self.refused {
                        Failure::Refused
                    } else if self.opened && !self.hello {
                        Failure::NoHello
                    } else {
                        Failure::NotListening
                    };
                    self.metrics.started.fetch_add(1, Ordering::Relaxed);
                    self.end_turn(Some(why), wall);
                    return;
                }
                // Recover: a BOOT click stops stuck speech or opens the channel again.
                let stuck = state == Some(DeviceState::Speaking)
                    || (state == Some(DeviceState::Idle) && !channel_open && device.is_running());
                if stuck
                    && self
                        .last_click
                        .is_none_or(|c| wall.duration_since(c) > Duration::from_secs(1))
                {
                    self.last_click = Some(wall);
                    device.toggle_chat(now);
                }
            }
            Phase::Saying { at } => {
                let length = Duration::from_micros(self.said.0 as u64 * 1_000_000 / u64::from(MIC_RATE));
                if wall.duration_since(at) > length + t {
                    self.end_turn(Some(Failure::NotListening), wall);
                }
            }
            Phase::Awaiting { eou, .. } => {
                if wall.duration_since(eou) > t {
                    self.end_turn(Some(Failure::NoTtsStart), wall);
                }
            }
            Phase::Speaking { started, last, .. } => {
                if wall.duration_since(last.unwrap_or(started).max(started)) > t {
                    self.end_turn(Some(Failure::StuckInSpeaking), wall);
                }
            }
        }
    }

    /// A microphone frame left the device.
    fn mic_frame_sent(&mut self, device: &Device) {
        self.metrics.mic_frames.fetch_add(1, Ordering::Relaxed);
        if let Phase::Saying { .. } = self.phase {
            let consumed = self.said.0.saturating_sub(device.mic_pending());
            if consumed >= self.said.1 {
                self.phase = Phase::Awaiting {
                    eou: Instant::now(),
                    stt: false,
                };
            }
        }
    }

    /// A text frame the device sent.
    fn text_sent(&mut self, sent: &Sent) {
        if matches!(sent, Sent::ListenStart(_)) {
            self.listen_started = true;
        }
    }

    /// A text frame that arrived (handled by `device` already).
    fn text_in(&mut self, message: MessageType, device: &Device) {
        let wall = Instant::now();
        match message {
            MessageType::Hello => self.hello = true,
            MessageType::Stt => {
                if let Phase::Saying { .. } = self.phase {
                    self.metrics.early_stt.fetch_add(1, Ordering::Relaxed);
                }
                if let Phase::Awaiting { eou, stt: false } = self.phase {
                    self.metrics.record(|l| l.stt.record(us(wall.duration_since(eou))));
                    self.phase = Phase::Awaiting { eou, stt: true };
                }
            }
            MessageType::Tts(Some(state)) => match state {
                TtsState::Start => {
                    let eou = match self.phase {
                        Phase::Awaiting { eou, .. } => Some(eou),
                        // A reply that starts before the utterance's end: measured from there.
                        Phase::Saying { .. } => Some(wall),
                        _ => None,
                    };
                    if let Some(eou) = eou {
                        self.phase = Phase::Speaking {
                            eou,
                            started: wall,
                            first: None,
                            last: None,
                            worst: Duration::ZERO,
                            stutters: 0,
                        };
                    }
                }
                TtsState::Stop => {
                    if let Phase::Speaking {
                        eou,
                        first,
                        worst,
                        stutters,
                        ..
                    } = self.phase
                    {
                        let nominal = self.plan.ear_log.as_ref().and_then(|log| {
                            log.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get(&self.device_id)
                                .copied()
                        });
                        self.metrics.record(|l| {
                            l.tts_stop.record(us(wall.duration_since(eou)));
                            if let Some(f) = first {
                                let fa = f.duration_since(eou);
                                l.first_audio.record(us(fa));
                                if let Some(n) = nominal {
                                    l.twin_added_first_audio.record(us(fa.saturating_sub(n)));
                                }
                                l.worst_gap.record(us(worst));
                            }
                        });
                        if stutters > 0 {
                            self.metrics.stutters.fetch_add(stutters, Ordering::Relaxed);
                            self.metrics.stuttered_turns.fetch_add(1, Ordering::Relaxed);
                        }
                        let dropped = drops(device);
                        let lost = dropped > self.drops_seen;
                        self.drops_seen = dropped;
                        let failure = if first.is_none() {
                            Some(Failure::NoAudio)
                        } else if lost {
                            Some(Failure::FramesDropped)
                        } else {
                            None
                        };
                        self.end_turn(failure, wall);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// A binary frame (TTS audio) arrived.
    fn audio_in(&mut self) {
        self.metrics.tts_frames.fetch_add(1, Ordering::Relaxed);
        let wall = Instant::now();
        if let Phase::Speaking {
            first,
            last,
            worst,
            stutters,
            ..
        } = &mut self.phase
        {
            if first.is_none() {
                *first = Some(wall);
            }
            if let Some(l) = *last {
                let gap = wall.duration_since(l);
                *worst = (*worst).max(gap);
                if gap > STUTTER {
                    *stutters += 1;
                }
            }
            *last = Some(wall);
        }
    }

    /// An MCP request → reply time at the device.
    fn mcp_reply(&self, d: Duration) {
        self.metrics.record(|l| l.mcp_reply.record(us(d)));
    }

    /// The channel opened (or failed to).
    fn connected(&mut self, ok: bool) {
        self.refused = !ok;
        self.opened |= ok;
        if ok {
            self.hello = false;
        }
    }

    /// The channel closed.
    fn closed(&mut self) {
        if matches!(
            self.phase,
            Phase::Saying { .. } | Phase::Awaiting { .. } | Phase::Speaking { .. }
        ) {
            self.end_turn(Some(Failure::ConnectionLost), Instant::now());
        }
        self.listen_started = false;
    }
}

/// The user of a voice fleet's device, beside it in the live driver.
impl Companion for Driver {
    fn act(&mut self, device: &mut Device, turn: &Turn<'_>) {
        self.tick(device, turn.now, turn.open);
    }

    fn seen(&mut self, what: &Seen<'_>, device: &Device) {
        match *what {
            Seen::Sent { sent, .. } => self.text_sent(sent),
            Seen::Received { read, .. } => self.text_in(read.message, device),
            Seen::Replied(d) => self.mcp_reply(d),
            Seen::MicSent => self.mic_frame_sent(device),
            Seen::AudioIn => self.audio_in(),
            Seen::Dialled(ok) => self.connected(ok),
            Seen::Closed => self.closed(),
            Seen::Dropped | Seen::Traced(_) => {}
        }
    }
}

/// Frames `device` dropped by its own rules (wrong state, queue full, undecodable, no channel).
pub fn drops(device: &Device) -> u64 {
    let log = device.speech_log();
    log.sessions.iter().map(|s| s.counts.dropped()).sum::<u64>() + log.outside.dropped()
}

/// What the user of a device says on turn `turn` (0-based), and the index after its last voiced
/// 60 ms frame. With `same_audio`, the utterance as recorded. Otherwise a variation of it drawn
/// from `(voice_seed, turn)`: it starts 0–100 ms into the clip, ends 0–100 ms before the clip's
/// end (and up to 20 ms more, so that it ends at least 20 ms before a 60 ms frame does), and is
/// 3 dB quieter to 3 dB louder (0.1 dB steps). No copy is made: the device reads
/// the shared clip at its gain. A variation with no voiced frame left (a quiet clip made
/// quieter) is said at the recorded level.
pub fn variation(plan: &Plan, voice_seed: u64, turn: u32) -> (Utterance, usize) {
    let clip = plan.utterance.clone();
    if plan.same_audio {
        return (Utterance::whole(clip), plan.voiced_end);
    }
    let mut draw = Draw(voice_seed ^ u64::from(turn).wrapping_mul(0xd1b5_4a32_d192_ed03));
    let len = clip.len();
    let most = (MIC_RATE as usize / 10).min(len / 4);
    let start = draw.below(most as u64 + 1) as usize;
    let mut end = len - draw.below(most as u64 + 1) as usize;
    // End at least 20 ms before a 60 ms microphone frame does (the shipped clip ends 40 ms
    // before): the Opus encoder's delay carries up to 10 ms of the last audio into the next
    // frame, loud enough to be voice (-39 dBFS measured with 10 ms to spare, -17 dBFS with none),
    // so the backend would hear one more voiced frame than the utterance has and answer 60 ms
    // after the end of speech measured here — latency that is not the twin's.
    let (frame, last) = (MIC_RATE as usize * 60 / 1000, MIC_RATE as usize * 40 / 1000);
    match (end - start) % frame {
        0 if end - start >= frame => end -= frame - last,
        r if r > last => end -= r - last,
        _ => {}
    }
    let db = (draw.below(61) as f64 - 30.0) / 10.0;
    for gain in [db, 0.0] {
        let u = Utterance::part(clip.clone(), start..end, gain);
        let samples: Vec<i16> = u.samples().collect();
        let end_of_voice = voiced_end(&samples, plan.voice_dbfs);
        if end_of_voice > 0 {
            return (u, end_of_voice);
        }
    }
    (Utterance::whole(clip), plan.voiced_end)
}

/// Index into `utterance` after the last 60 ms frame whose level is voice for the built-in
/// backend's rule (sine-referenced RMS ≥ `voice_dbfs`).
pub fn voiced_end(utterance: &[i16], voice_dbfs: f64) -> usize {
    let mut end = 0;
    for (i, f) in utterance.chunks(960).enumerate() {
        if xiaozhi_sim::backend::voice_side::rms_dbfs(f) >= voice_dbfs {
            end = i * 960 + f.len();
        }
    }
    end
}

/// How devices hear the replies (`--decode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decode {
    /// Every device decodes and measures (`full`).
    Full,
    /// Every device times packets from their TOC bytes (`none`).
    None,
    /// Device ids 0, N, 2N, … decode and measure, the others time from TOC bytes (`sample:N`).
    Sample(u32),
}

impl Decode {
    /// Whether device `id` decodes its replies.
    pub fn full_for(self, id: u32) -> bool {
        match self {
            Decode::Full => true,
            Decode::None => false,
            Decode::Sample(n) => id.is_multiple_of(n.max(1)),
        }
    }
}

impl std::fmt::Display for Decode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decode::Full => f.write_str("full"),
            Decode::None => f.write_str("none"),
            Decode::Sample(n) => write!(f, "sample:{n}"),
        }
    }
}

impl std::str::FromStr for Decode {
    type Err = String;
    fn from_str(s: &str) -> Result<Decode, String> {
        match s {
            "full" => Ok(Decode::Full),
            "none" => Ok(Decode::None),
            _ => match s.strip_prefix("sample:").map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 1 => Ok(Decode::Sample(n)),
                _ => Err(format!(
                    "`{s}`: use full, none or sample:N (N ≥ 1: every Nth device decodes)"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(same_audio: bool) -> Plan {
        // 2 s of a voiced square-ish wave (every frame far above -40 dBFS).
        let utterance: Arc<[i16]> = (0..32_000).map(|i| if i % 40 < 20 { 4000 } else { -4000 }).collect();
        let voiced_end = voiced_end(&utterance, -40.0);
        Plan {
            utterance,
            voiced_end,
            turns: 1,
            think: crate::fleet::think::Think::Fixed(Duration::ZERO),
            timeout: Duration::from_secs(15),
            ear_log: None,
            same_audio,
            voice_dbfs: -40.0,
        }
    }

    #[test]
    fn each_user_and_turn_says_its_own_stretch_at_its_own_level() {
        let p = plan(false);
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200u64 {
            for turn in 0..3 {
                let (u, end) = variation(&p, seed, turn);
                let again = variation(&p, seed, turn);
                assert!(
                    u.samples().eq(again.0.samples()),
                    "the same seed and turn, the same audio"
                );
                // 0–100 ms off the start, 0–120 ms off the end; the last frame ends early.
                assert!((32_000 - 3_520..=32_000).contains(&u.len()), "{}", u.len());
                assert!(
                    (1..=640).contains(&(u.len() % 960)),
                    "ends 20 ms before a frame: {}",
                    u.len()
                );
                assert_eq!(end, u.len(), "every frame is voiced");
                let peak = u.samples().map(|x| i32::from(x).abs()).max().unwrap();
                assert!((2830..=5650).contains(&peak), "±3 dB of 4000: {peak}");
                seen.insert(u.samples().take(2000).collect::<Vec<i16>>());
            }
        }
        assert!(seen.len() > 500, "600 turns, {} distinct openings", seen.len());
        let (u, end) = variation(&plan(true), 7, 1);
        assert!(
            u.samples().eq(plan(true).utterance.iter().copied()),
            "--same-audio: as recorded"
        );
        assert_eq!(end, 32_000);
    }
}
