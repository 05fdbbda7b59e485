//! The step's sound as a scenario's expectations judge it: what the listener heard (`audible`,
//! `verdict`, `level`, `i2s`, `level_change`, `perceived`), the voice turn (`state`,
//! `listen_sent`, `heard`, `claim`) and the TTS session's `frames`. The rest of the judging is
//! `check.rs`.

use crate::audio::measure::{Measurement, perceived_change};
use crate::scenario::check::{Inside, Verdicts, level};
use crate::scenario::expect::{Approx, ClaimExpect, Expect};
use crate::scenario::record::{Claim, Expectation, FrameCount};
use crate::voice::log::Counts;

impl Verdicts {
    /// The acoustic verdicts of the step's measurement.
    pub(super) fn sound(&mut self, e: &Expect, i: &Inside<'_>) {
        let m = i.measurement;
        if let Some(want) = e.audible {
            let got = m.map(|m| m.verdict.is_audible());
            self.check(
                Expectation::Sound,
                format!("audible: {want}"),
                got == Some(want),
                describe_measurement(m),
            );
        }
        if let Some(want) = &e.verdict {
            let got = m.map(|m| m.verdict.name());
            self.check(
                Expectation::Sound,
                format!("verdict {want}"),
                got == Some(want.as_str()),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.spl_db {
            self.check(
                Expectation::Sound,
                format!("level {} ± {} dB SPL", a.value, a.tolerance),
                approx(m.and_then(|m| m.spl_db), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.i2s_dbfs {
            self.check(
                Expectation::Sound,
                format!("I2S {} ± {} dBFS", a.value, a.tolerance),
                approx(m.and_then(|m| m.i2s_dbfs), a),
                describe_measurement(m),
            );
        }
        if let Some(a) = e.change_db {
            let change = match (i.previous.and_then(|p| p.spl_db), m.and_then(|m| m.spl_db)) {
                (Some(x), Some(y)) => Some(y - x),
                _ => None,
            };
            self.check(
                Expectation::Sound,
                format!("level change {:+} ± {} dB", a.value, a.tolerance),
                approx(change, a),
                change.map_or("no level to compare".into(), |c| format!("changed {c:+.2} dB")),
            );
        }
        if let Some(want) = e.perceived_change {
            let got = match (i.previous, m) {
                (Some(a), Some(b)) => Some(perceived_change(a, b)),
                _ => None,
            };
            self.check(
                Expectation::Sound,
                format!("perceived change: {want}"),
                got == Some(want),
                got.map_or("no measurement to compare".into(), |g| format!("got {g}")),
            );
        }
    }

    /// The voice expectations: state, control messages, what was heard, frames, the claim.
    pub(super) fn voice(&mut self, e: &Expect, i: &Inside<'_>) {
        if let Some(want) = &e.state {
            self.check(
                Expectation::State,
                format!("state is {want}"),
                i.state == want,
                format!("state {}", i.state),
            );
        }
        if let Some(want) = &e.listen_sent {
            self.check(
                Expectation::ListenSent(i.controls.to_vec()),
                format!("the device sent {want:?}"),
                i.controls == want.as_slice(),
                format!("sent {:?}", i.controls),
            );
        }
        if let Some(h) = &e.heard {
            let m = i.speech.and_then(|x| x.measurement.as_ref());
            let shown = m.map_or("nothing was played".to_string(), level);
            if let Some(want) = h.audible {
                let got = m.is_some_and(|m| m.audible);
                self.check(
                    Expectation::Heard,
                    format!("heard audible is {want}"),
                    got == want,
                    shown.clone(),
                );
            }
            if let Some(a) = h.spl_db {
                let got = m.and_then(|m| m.spl_db);
                self.check(
                    Expectation::Heard,
                    format!("heard at {} ± {} dB SPL", a.value, a.tolerance),
                    approx(got, a),
                    shown.clone(),
                );
            }
            if let Some(a) = h.change_db {
                let got = i.speech.and_then(|x| x.change_db);
                self.check(
                    Expectation::Heard,
                    format!("heard {:+} ± {} dB against the previous speech", a.value, a.tolerance),
                    approx(got, a),
                    got.map_or("no earlier speech to compare".into(), |c| format!("{c:+.2} dB")),
                );
            }
        }
        self.frames(e, i.speech.map(|x| &x.counts));
        if let Some(want) = e.claim {
            let got = i.claim.map(|c| match want {
                ClaimExpect::Unverified => c.judgements.iter().any(|j| j.starts_with("unverified")),
                ClaimExpect::Heard => c.heard,
                ClaimExpect::NotHeard => !c.heard,
            });
            let label = match want {
                ClaimExpect::Unverified => "unverified",
                ClaimExpect::Heard => "heard",
                ClaimExpect::NotHeard => "not heard",
            };
            self.check(
                Expectation::Claim,
                format!("the claim is {label}"),
                got == Some(true),
                i.claim.map_or("no claim (no speech after a call)".into(), Claim::row),
            );
        }
    }

    /// `frames` of the step's TTS session.
    fn frames(&mut self, e: &Expect, counts: Option<&Counts>) {
        let Some(f) = &e.frames else { return };
        let c = counts.cloned().unwrap_or_default();
        let shown = format!(
            "{} received, {} decoded, {} played, {} discarded, {} dropped (wrong state {}, queue full {}, undecodable {}, no channel {}, silenced {})",
            c.received,
            c.decoded,
            c.played(),
            c.discarded,
            c.dropped(),
            c.dropped_wrong_state,
            c.dropped_queue_full,
            c.dropped_undecodable,
            c.dropped_no_channel,
            c.dropped_silenced
        );
        for (count, name, want, got) in [
            (FrameCount::Received, "received", f.received, c.received),
            (FrameCount::Decoded, "decoded", f.decoded, c.decoded),
            (FrameCount::Dropped, "dropped", f.dropped, c.dropped()),
            (FrameCount::Played, "played", f.played, c.played()),
            (FrameCount::Discarded, "discarded", f.discarded, c.discarded),
        ] {
            if let Some(w) = want {
                self.check(
                    Expectation::Frames(count),
                    format!("{w} frames {name}"),
                    w == got,
                    shown.clone(),
                );
            }
        }
    }
}

fn approx(v: Option<f64>, a: Approx) -> bool {
    v.is_some_and(|x| (x - a.value).abs() <= a.tolerance)
}

fn describe_measurement(m: Option<&Measurement>) -> String {
    match m {
        None => "nothing measured".to_string(),
        Some(m) => format!(
            "{} ({}; I2S {}; playing {:.2}, i2s_running {:.2}, amp_enabled {:.2})",
            m.verdict.name(),
            level(m),
            m.i2s_dbfs.map_or("null".into(), |x| format!("{x:.2} dBFS")),
            m.playing,
            m.i2s_running,
            m.amp_enabled
        ),
    }
}
