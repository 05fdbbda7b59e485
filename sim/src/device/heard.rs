//! Speech windows measured while they play ([`crate::device::Device::measure_as_played`]): each
//! session's and sentence's heard window (the window after `Device::HEARD_GUARD`, as
//! `Device::heard` renders it) is rendered as the device's clock passes its samples, with the
//! same running sums in the same order as a render after the fact
//! ([`crate::audio::render::Meter`]), so the figures are the same to the bit
//! (docs/fleet.md, "Measured as it plays"). Once no window still to be measured reads a decoded
//! frame, its samples are let go: a device in a fleet does not keep its turn's PCM.

use std::collections::BTreeMap;

use crate::audio::AudioLog;
use crate::audio::measure::Measurement;
use crate::audio::render::{ChainSetup, Meter, render};
use crate::time::{SimDuration, SimTime};
use crate::voice::log::{SpeechLog, Window};

/// A session (`None`) or one of its sentences (`Some(index)`), by session number.
type Key = (u64, Option<usize>);

/// How far the clock moves between two steps of the meters (a step renders what was passed
/// and lets go of what no window reads any more; the figures do not depend on it).
const STEP: SimDuration = SimDuration::from_millis(50);

/// How many announced windows are kept (the oldest go first).
const ANNOUNCED: usize = 256;

/// Which speech windows a device measures as they play (`Device::measure_as_played`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsPlayed {
    /// None: every decoded frame is kept, and windows are rendered when asked.
    Off,
    /// Each reply's (a TTS session's) window: what a fleet reports.
    Replies,
    /// Each reply's and each sentence's: what the scenario runner reports.
    All,
}

/// The meters of one device's speech windows.
#[derive(Debug, Default)]
pub(crate) struct HeardMeters {
    /// Sentences are measured too, not only whole replies.
    sentences: bool,
    /// Windows being rendered: the window's start after the guard, and the meter.
    live: BTreeMap<Key, (SimTime, Meter)>,
    /// Windows that ended in a closed session or sentence, measured.
    done: BTreeMap<Key, (Window, Measurement)>,
    /// Other windows announced before they play (`Device::measure_window`), by `(from, to)`:
    /// a meter once begun, and the figures once over.
    announced: BTreeMap<(SimTime, SimTime), (Option<Meter>, Option<Measurement>)>,
    /// When the meters last stepped.
    stepped: Option<SimTime>,
}

/// The window a listener's measurement covers: from after the guard (or the end) to the end.
fn heard_from(w: &Window) -> SimTime {
    (w.start + crate::device::Device::HEARD_GUARD).min(w.end)
}

/// Every speech window of the log (the sentences' too when `sentences`), with whether more
/// frames can still join it.
fn windows(speech: &SpeechLog, sentences: bool) -> impl Iterator<Item = (Key, Option<Window>, bool)> + '_ {
    let open = speech.open_session();
    speech.sessions.iter().flat_map(move |s| {
        let session_open = open == Some(s.n);
        let last = s.sentences.len().saturating_sub(1);
        let sentences = s.sentences.iter().take(if sentences { usize::MAX } else { 0 });
        std::iter::once(((s.n, None), s.window, session_open)).chain(
            sentences
                .enumerate()
                .map(move |(i, x)| ((s.n, Some(i)), x.window, session_open && i == last)),
        )
    })
}

impl HeardMeters {
    /// Meters for every reply, and every sentence when `sentences`.
    pub(crate) fn new(sentences: bool) -> HeardMeters {
        HeardMeters {
            sentences,
            ..HeardMeters::default()
        }
    }

    /// Whether the clock moved far enough since the last step for another.
    pub(crate) fn due(&self, now: SimTime) -> bool {
        self.stepped.is_none_or(|t| now >= t + STEP)
    }

    /// The device's clock reached `now`: renders what every window has passed, files the windows
    /// that are over, and lets go of the speech no window still reads.
    pub(crate) fn step(&mut self, speech: &SpeechLog, audio: &mut AudioLog, setup: &ChainSetup, now: SimTime) {
        self.stepped = Some(now);
        let mut keep_from = now;
        for (key, window, open) in windows(speech, self.sentences) {
            if self.done.contains_key(&key) {
                continue;
            }
            // No frame yet: the first one plays at `now` or later.
            let Some(w) = window else { continue };
            let from = heard_from(&w);
            let to = now.min(w.end);
            if to > from {
                let (_, meter) = self
                    .live
                    .entry(key)
                    .or_insert_with(|| (from, Meter::new(audio, setup, from)));
                meter.advance(audio, setup, to, None);
            }
            if !open && now >= w.end {
                let m = match self.live.remove(&key) {
                    Some((_, meter)) => meter.finish(setup, from, w.end),
                    None => render(audio, setup, from, w.end, false).0,
                };
                self.done.insert(key, (w, m));
                continue;
            }
            let next = self.live.get(&key).map_or(from, |(_, m)| m.next_sample_at(setup));
            keep_from = keep_from.min(next);
        }
        for (&(from, to), (meter, done)) in self.announced.iter_mut().filter(|(_, x)| x.1.is_none()) {
            let until = now.min(to);
            if until > from {
                meter
                    .get_or_insert_with(|| Meter::new(audio, setup, from))
                    .advance(audio, setup, until, None);
            }
            if now >= to {
                *done = Some(match meter.take() {
                    Some(m) => m.finish(setup, from, to),
                    None => render(audio, setup, from, to, false).0,
                });
                continue;
            }
            keep_from = keep_from.min(meter.as_ref().map_or(from, |m| m.next_sample_at(setup)));
        }
        // Sessions the speech log no longer holds are no longer asked for.
        if let Some(first) = speech.sessions.first().map(|s| s.n) {
            self.done.retain(|k, _| k.0 >= first);
            self.live.retain(|k, _| k.0 >= first);
        }
        audio.release_speech(keep_from);
    }

    /// Measures `[from, to)` as it plays too (a window that starts now or later).
    pub(crate) fn announce(&mut self, from: SimTime, to: SimTime) {
        self.announced.entry((from, to)).or_default();
        if self.announced.len() > ANNOUNCED {
            self.announced.pop_first();
        }
    }

    /// The figures of an announced window, as `Device::render` gives them (the samples queued
    /// until `to` play as queued); `None` for a window not announced.
    pub(crate) fn rendered(
        &self,
        from: SimTime,
        to: SimTime,
        audio: &AudioLog,
        setup: &ChainSetup,
    ) -> Option<Measurement> {
        match self.announced.get(&(from, to))? {
            (_, Some(m)) => Some(m.clone()),
            (Some(meter), None) => {
                let mut meter = meter.clone();
                meter.advance(audio, setup, to, None);
                Some(meter.finish(setup, from, to))
            }
            (None, None) => Some(render(audio, setup, from, to, false).0),
        }
    }

    /// What the listener heard of `w` (a window of the speech log now), as `Device::heard`
    /// renders it: filed, or the live meter rendered on to the window's end (the frames queued
    /// until then play as queued). `None` for a window no meter knows.
    pub(crate) fn heard(&self, w: &Window, audio: &AudioLog, setup: &ChainSetup) -> Option<Measurement> {
        if let Some((_, m)) = self.done.values().find(|(x, _)| x == w) {
            return Some(m.clone());
        }
        let from = heard_from(w);
        let (_, meter) = self
            .live
            .values()
            .find(|(f, m)| *f == from && m.is_before(setup, w.end))?;
        let mut meter = meter.clone();
        meter.advance(audio, setup, w.end, None);
        Some(meter.finish(setup, from, w.end))
    }
}
