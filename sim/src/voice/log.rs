//! What the device did with the speech it was sent: per TTS session (from `tts start` to
//! `tts stop`, as received) and per sentence, frames received / decoded / dropped and why, and
//! when the decoded audio left the codec (evidence, like [`crate::audio::AudioLog`]; it
//! survives reboots). Measuring what a listener heard of it is a render of the audio log over
//! these windows.

use serde::Serialize;

use crate::time::{SimDuration, SimTime};

/// Sessions kept; older ones are dropped (a device that talks forever keeps a bounded log).
pub const MAX_SESSIONS: usize = 256;
/// Sentences kept per session.
pub const MAX_SENTENCES: usize = 256;

/// Why a received frame gave no sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Drop {
    /// The device was not in the speaking state (`OnIncomingAudio` drops it).
    WrongState,
    /// The decode queue held 40 packets (`PushPacketToDecodeQueue` returns false).
    QueueFull,
    /// The decoder refused it (or there was no decoder for the announced rate).
    Undecodable,
    /// The channel was not open, or the device was not running.
    NoChannel,
    /// The device took the packet and made no sound of it: 1.7.x after an abort (`aborted_`),
    /// 1.7.7 while its `tts stop` waits (docs/reference/voice.md §7).
    Silenced,
    /// A UDP datagram the channel refused: too short, not type 1, a length that does not match,
    /// or a sequence at or below the last one (duplicated or late; docs/reference/mqtt.md §2).
    Refused,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Frame counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Binary frames that arrived.
    pub received: u64,
    /// Packets decoded and queued for output.
    pub decoded: u64,
    /// Dropped because the device was not speaking.
    pub dropped_wrong_state: u64,
    /// Dropped because the decode queue was full.
    pub dropped_queue_full: u64,
    /// Dropped because they did not decode.
    pub dropped_undecodable: u64,
    /// Dropped because there was no open channel or running device.
    pub dropped_no_channel: u64,
    /// Taken and silenced (1.7.x after an abort, 1.7.7 while `tts stop` waits).
    pub dropped_silenced: u64,
    /// UDP datagrams refused by the channel's checks (MQTT + UDP only).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_refused: u64,
    /// UDP datagrams accepted after a sequence gap (`wrong sequence`: packets lost or overtaken
    /// on the way; MQTT + UDP only).
    #[serde(skip_serializing_if = "is_zero")]
    pub gaps: u64,
    /// Frames whose header announced more payload than the frame held (the firmware copies past
    /// its buffer; the twin fills the missing bytes with zeros).
    pub overread: u64,
    /// Decoded, but never played: the queues were cleared (`ResetDecoder`: an abort, the next
    /// `tts start`, a reboot) before their turn came. A frame cut part-way counts as played.
    pub discarded: u64,
}

impl Counts {
    /// Counts a drop.
    pub fn drop(&mut self, why: Drop) {
        match why {
            Drop::WrongState => self.dropped_wrong_state += 1,
            Drop::QueueFull => self.dropped_queue_full += 1,
            Drop::Undecodable => self.dropped_undecodable += 1,
            Drop::NoChannel => self.dropped_no_channel += 1,
            Drop::Silenced => self.dropped_silenced += 1,
            Drop::Refused => self.dropped_refused += 1,
        }
    }

    /// Frames that reached the speaker, whole or in part: decoded and not discarded.
    pub fn played(&self) -> u64 {
        self.decoded.saturating_sub(self.discarded)
    }

    /// All frames dropped, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_wrong_state
            + self.dropped_queue_full
            + self.dropped_undecodable
            + self.dropped_no_channel
            + self.dropped_silenced
            + self.dropped_refused
    }
}

/// When decoded audio of a session or sentence leaves the codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The first decoded sample's output time.
    pub start: SimTime,
    /// The end of the last decoded frame.
    pub end: SimTime,
}

impl Window {
    fn extend(w: &mut Option<Window>, start: SimTime, end: SimTime) {
        match w {
            Some(w) => {
                w.start = w.start.min(start);
                w.end = w.end.max(end);
            }
            None => *w = Some(Window { start, end }),
        }
    }
}

/// One `sentence_start` and the audio that followed it (until the next one).
#[derive(Clone, Debug, PartialEq)]
pub struct Sentence {
    /// The `text` (lossy UTF-8).
    pub text: String,
    /// When the `sentence_start` arrived.
    pub at: SimTime,
    /// Frames received after it.
    pub counts: Counts,
    /// Decoded audio duration.
    pub decoded: SimDuration,
    /// When its decoded audio left the codec.
    pub window: Option<Window>,
}

/// One TTS session: from a received `tts start` to the next received `tts stop` (or start).
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// 1-based session number on this device.
    pub n: u64,
    /// When `tts start` arrived.
    pub started: SimTime,
    /// When the device entered the speaking state (the scheduled task ran).
    pub speaking_at: Option<SimTime>,
    /// When `tts stop` arrived.
    pub stopped: Option<SimTime>,
    /// The decode rate (the rate the server announced) and the codec's output rate, Hz.
    pub rates: Option<(u32, u32)>,
    /// Frames received while the session was open.
    pub counts: Counts,
    /// Decoded audio duration.
    pub decoded: SimDuration,
    /// When its decoded audio left the codec.
    pub window: Option<Window>,
    /// The sentences, in arrival order.
    pub sentences: Vec<Sentence>,
    /// Frames before the first `sentence_start`.
    pub unsentenced: Counts,
}

/// Every session and the frames that arrived outside any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpeechLog {
    /// Sessions in order (oldest dropped beyond [`MAX_SESSIONS`]).
    pub sessions: Vec<Session>,
    /// Frames received with no session open.
    pub outside: Counts,
    /// Sessions dropped from the front.
    pub dropped_sessions: u64,
    open: bool,
    next: u64,
}

impl SpeechLog {
    /// A `tts start` arrived: a new session (an open one ends without a stop).
    pub fn start(&mut self, at: SimTime) {
        self.next += 1;
        self.sessions.push(Session {
            n: self.next,
            started: at,
            speaking_at: None,
            stopped: None,
            rates: None,
            counts: Counts::default(),
            decoded: SimDuration::ZERO,
            window: None,
            sentences: Vec::new(),
            unsentenced: Counts::default(),
        });
        if self.sessions.len() > MAX_SESSIONS {
            self.sessions.remove(0);
            self.dropped_sessions += 1;
        }
        self.open = true;
    }

    /// A `tts stop` arrived.
    pub fn stop(&mut self, at: SimTime) {
        if let Some(s) = self.current() {
            s.stopped = Some(at);
        }
        self.open = false;
    }

    /// A `sentence_start` arrived (outside a session it is kept in no session).
    pub fn sentence(&mut self, at: SimTime, text: String) {
        if let Some(s) = self.current()
            && s.sentences.len() < MAX_SENTENCES
        {
            s.sentences.push(Sentence {
                text,
                at,
                counts: Counts::default(),
                decoded: SimDuration::ZERO,
                window: None,
            });
        }
    }

    /// The device entered speaking.
    pub fn speaking(&mut self, at: SimTime) {
        if let Some(s) = self.current()
            && s.speaking_at.is_none()
        {
            s.speaking_at = Some(at);
        }
    }

    /// The number of the open session (the one decoded frames still join), if any.
    pub fn open_session(&self) -> Option<u64> {
        if self.open {
            self.sessions.last().map(|s| s.n)
        } else {
            None
        }
    }

    /// The open session, if any.
    pub fn current(&mut self) -> Option<&mut Session> {
        if self.open { self.sessions.last_mut() } else { None }
    }

    fn counts(&mut self) -> (&mut Counts, Option<&mut Counts>) {
        if !self.open || self.sessions.is_empty() {
            return (&mut self.outside, None);
        }
        let s = self.sessions.last_mut().expect("checked");
        let sentence = match s.sentences.last_mut() {
            Some(x) => &mut x.counts,
            None => &mut s.unsentenced,
        };
        (&mut s.counts, Some(sentence))
    }

    /// A frame arrived (`overread`: its header announced more than it held).
    pub fn received(&mut self, overread: bool) {
        let (c, s) = self.counts();
        c.received += 1;
        c.overread += u64::from(overread);
        if let Some(s) = s {
            s.received += 1;
            s.overread += u64::from(overread);
        }
    }

    /// A UDP datagram was accepted after a sequence gap.
    pub fn gap(&mut self) {
        let (c, s) = self.counts();
        c.gaps += 1;
        if let Some(s) = s {
            s.gaps += 1;
        }
    }

    /// A frame arrived with no audio channel to take it: received, and dropped for that.
    pub fn no_channel(&mut self) {
        self.received(false);
        self.dropped(Drop::NoChannel);
    }

    /// A frame gave no sound.
    pub fn dropped(&mut self, why: Drop) {
        let (c, s) = self.counts();
        c.drop(why);
        if let Some(s) = s {
            s.drop(why);
        }
    }

    /// A frame was decoded and plays during `[start, end)`.
    pub fn decoded(&mut self, start: SimTime, end: SimTime, rates: (u32, u32)) {
        let (c, s) = self.counts();
        c.decoded += 1;
        if let Some(s) = s {
            s.decoded += 1;
        }
        if !self.open {
            return;
        }
        let Some(session) = self.sessions.last_mut() else {
            return;
        };
        session.rates = Some(rates);
        session.decoded += end.saturating_since(start);
        Window::extend(&mut session.window, start, end);
        if let Some(x) = session.sentences.last_mut() {
            x.decoded += end.saturating_since(start);
            Window::extend(&mut x.window, start, end);
        }
    }

    /// Playback was cut at `at` (decoder reset, reboot): windows end there at the latest, and
    /// the frames that were queued to start at or after `at` (`queued`: their start times) are
    /// counted as discarded in the session and sentence they belong to.
    pub fn cut(&mut self, at: SimTime, queued: &[SimTime]) {
        for s in self.sessions.iter_mut().rev() {
            let within = |w: &Option<Window>, t: SimTime| w.is_some_and(|w| w.start <= t && t < w.end);
            let mut touched = false;
            for &t in queued.iter().filter(|t| **t >= at) {
                if within(&s.window, t) {
                    s.counts.discarded += 1;
                    touched = true;
                    match s.sentences.iter_mut().rev().find(|x| within(&x.window, t)) {
                        Some(x) => x.counts.discarded += 1,
                        None => s.unsentenced.discarded += 1,
                    }
                }
            }
            for w in s
                .window
                .iter_mut()
                .chain(s.sentences.iter_mut().filter_map(|x| x.window.as_mut()))
            {
                if w.end > at {
                    w.end = at.max(w.start);
                    touched = true;
                }
            }
            if !touched {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_land_in_their_session_and_sentence() {
        let t = SimTime::from_millis;
        let mut log = SpeechLog::default();
        log.received(false);
        log.dropped(Drop::WrongState);
        log.start(t(10));
        log.received(false);
        log.dropped(Drop::WrongState);
        log.sentence(t(20), "音量已调小".into());
        log.received(true);
        log.decoded(t(30), t(90), (16_000, 24_000));
        log.received(false);
        log.decoded(t(90), t(150), (16_000, 24_000));
        log.stop(t(200));
        log.received(false);
        log.dropped(Drop::WrongState);
        assert_eq!(log.outside.received, 2);
        assert_eq!(log.outside.dropped_wrong_state, 2);
        let s = &log.sessions[0];
        assert_eq!(
            (
                s.counts.received,
                s.counts.decoded,
                s.counts.dropped(),
                s.counts.overread
            ),
            (3, 2, 1, 1)
        );
        assert_eq!(s.unsentenced.dropped_wrong_state, 1);
        assert_eq!(s.sentences[0].counts.decoded, 2);
        assert_eq!(s.decoded, SimDuration::from_millis(120));
        assert_eq!(
            s.window,
            Some(Window {
                start: t(30),
                end: t(150)
            })
        );
        log.cut(t(100), &[t(90)]);
        assert_eq!(log.sessions[0].window.unwrap().end, t(100));
        assert_eq!(log.sessions[0].sentences[0].window.unwrap().end, t(100));
        assert_eq!(
            log.sessions[0].counts.discarded, 0,
            "the frame at 90 had started: played in part"
        );
        assert_eq!(log.sessions[0].counts.played(), 2);

        log.start(t(300));
        log.sentence(t(300), "最后一句".into());
        for i in 0..5 {
            log.decoded(t(400 + 60 * i), t(460 + 60 * i), (16_000, 24_000));
        }
        let queued: Vec<SimTime> = (0..5).map(|i| t(400 + 60 * i)).collect();
        log.cut(t(500), &queued);
        let s = &log.sessions[1];
        assert_eq!((s.counts.decoded, s.counts.discarded, s.counts.played()), (5, 3, 2));
        assert_eq!(s.sentences[0].counts.discarded, 3, "the sentence's own count");
        assert_eq!(
            log.sessions[0].counts.discarded, 0,
            "the earlier session is not touched"
        );
    }

    #[test]
    fn the_log_stays_bounded() {
        let mut log = SpeechLog::default();
        for i in 0..(MAX_SESSIONS as u64 + 10) {
            log.start(SimTime::from_millis(i));
            for _ in 0..(MAX_SENTENCES + 5) {
                log.sentence(SimTime::from_millis(i), "x".into());
            }
        }
        assert_eq!(log.sessions.len(), MAX_SESSIONS);
        assert_eq!(log.dropped_sessions, 10);
        assert_eq!(log.sessions[0].n, 11);
        assert!(log.sessions.iter().all(|s| s.sentences.len() == MAX_SENTENCES));
    }
}
