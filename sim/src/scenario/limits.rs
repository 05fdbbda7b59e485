//! What a step may ask of the twin's sound: at most [`MAX_SOUND`] in one piece, and a tone
//! that exists (docs/guarantees.md, "Input limits"). Checked when a scenario is read, so a
//! refused step names its line and nothing runs.

use super::Step;
use crate::time::{Duration, MAX_SOUND};
use crate::voice::speak::{TooLongSound, check_sound};

/// Why a step's sound is longer than the twin makes in one piece ([`MAX_SOUND`]): a `speak`
/// (its `for`, or its text's natural length when it has neither `for` nor a WAV), a `play`'s
/// `for`, a `listen`'s `for`.
pub(super) fn too_long_sound(step: &Step) -> Option<String> {
    let given = |d: Duration| (d.0 > MAX_SOUND).then(|| TooLongSound::Given(d.0).to_string());
    match step {
        Step::Speak(p) if p.wav.is_some() && p.duration.is_none() => None,
        Step::Speak(p) => check_sound(&p.text, p.duration.map(|d| d.0))
            .err()
            .map(|e| e.to_string()),
        Step::Play(p) => p.duration.and_then(given),
        Step::Listen(l) => given(l.duration),
        _ => None,
    }
}

/// Why a `play` or `speak` tone cannot be made: the frequency must be above 0 and below
/// 24,000 Hz and the level from -120 to 0 dBFS (the backend script's `tone` takes the same).
pub(super) fn impossible_tone(step: &Step) -> Option<String> {
    let tone = match step {
        Step::Play(p) => p.tone.as_ref(),
        Step::Speak(p) => p.tone.as_ref(),
        _ => None,
    }?;
    if !(tone.hz > 0.0 && tone.hz < 24_000.0) {
        return Some(format!(
            "tone.hz: {} is not a frequency above 0 and below 24000 Hz",
            tone.hz
        ));
    }
    if !(-120.0..=0.0).contains(&tone.dbfs) {
        return Some(format!("tone.dbfs: {} is not a level from -120 to 0 dBFS", tone.dbfs));
    }
    None
}
