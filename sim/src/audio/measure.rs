//! Measurements and verdicts for a window of virtual time (docs/reference/acoustics.md §4, §6).
//!
//! Levels are sine-referenced dBFS (`20·log10(√2·rms/FS)`), dB SPL Leq at the listener, and
//! four verdicts: `silent`, `inaudible`, `audible`, `clearly_audible`. No level is ever −∞: an
//! all-zero window reports `None` (printed as `null`).

use serde::Serialize;

use crate::time::SimTime;

/// Threshold of hearing at 1 kHz (ISO 226:2003 Table 1).
pub const THRESHOLD_OF_HEARING_DB: f64 = 2.4;
/// ISO 7731 §5.2: a signal is clearly audible 15 dB above the noise.
pub const CLEARLY_AUDIBLE_DB: f64 = 15.0;
/// Just-noticeable level change (Jesteadt 1977; Rabinowitz 1970): 1 dB.
pub const JND_DB: f64 = 1.0;

/// What a listener concludes about a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No device sound at all (I2S stopped, amp/PA off, or all words zero).
    Silent,
    /// Device sound below the threshold of hearing or below ambient + margin.
    Inaudible,
    /// Device sound at or above ambient + margin and the threshold of hearing.
    Audible,
    /// Device sound at least 15 dB above ambient (ISO 7731).
    ClearlyAudible,
}

impl Verdict {
    /// `audible` or `clearly_audible`.
    pub fn is_audible(self) -> bool {
        matches!(self, Verdict::Audible | Verdict::ClearlyAudible)
    }
    /// The verdict as reports write it (`clearly_audible`, …).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Silent => "silent",
            Verdict::Inaudible => "inaudible",
            Verdict::Audible => "audible",
            Verdict::ClearlyAudible => "clearly_audible",
        }
    }
}

/// The audibility rule of docs/reference/acoustics.md §4.3.
pub fn verdict(spl_db: Option<f64>, ambient_dba: f64, margin_db: f64) -> Verdict {
    match spl_db {
        None => Verdict::Silent,
        Some(l) if l >= ambient_dba + CLEARLY_AUDIBLE_DB && l >= THRESHOLD_OF_HEARING_DB => Verdict::ClearlyAudible,
        Some(l) if l >= ambient_dba + margin_db && l >= THRESHOLD_OF_HEARING_DB => Verdict::Audible,
        Some(_) => Verdict::Inaudible,
    }
}

/// `perceived_change` between two windows: both audible and |ΔL| ≥ 1 dB, or exactly one audible.
pub fn perceived_change(a: &Measurement, b: &Measurement) -> bool {
    match (a.verdict.is_audible(), b.verdict.is_audible()) {
        (true, true) => match (a.spl_db, b.spl_db) {
            (Some(x), Some(y)) => (x - y).abs() >= JND_DB,
            _ => false,
        },
        (x, y) => x != y,
    }
}

/// Everything measured over one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measurement {
    /// Window start, ms of virtual time.
    pub from_ms: f64,
    /// Window end, ms of virtual time.
    pub to_ms: f64,
    /// Fraction of the window during which a source was playing.
    pub playing: f64,
    /// Fraction of the window during which the I2S output was clocked.
    pub i2s_running: f64,
    /// Codec gain at the end of the window, dB (software factor or ES8311 register); `None` when
    /// the gain is zero (volume 0 on a software codec) or the codec is closed.
    #[serde(serialize_with = "two_decimals")]
    pub codec_gain_db: Option<f64>,
    /// ES8311 REG 0x32 at the end of the window, when the board has one.
    pub codec_reg32: Option<u8>,
    /// Fraction of the window during which the amplifier was enabled and past its start-up.
    pub amp_enabled: f64,
    /// Level of the I2S words while clocked, dBFS (`None`: all zero or never clocked).
    #[serde(serialize_with = "two_decimals")]
    pub i2s_dbfs: Option<f64>,
    /// Level of what the amplifier takes in, dBFS.
    #[serde(serialize_with = "two_decimals")]
    pub amp_input_dbfs: Option<f64>,
    /// Device-only Leq at the listener, dB SPL (`None`: no device sound at all).
    #[serde(serialize_with = "two_decimals")]
    pub spl_db: Option<f64>,
    /// Listener distance the level is for, metres.
    pub distance_m: f64,
    /// Ambient level the verdict was judged against, dBA.
    pub ambient_dba: f64,
    /// What a listener concludes (docs/reference/acoustics.md §4.3).
    pub verdict: Verdict,
    /// A person at the listener position hears it (`audible` or `clearly_audible`); `false` for
    /// a shut-down amplifier, a stopped clock, or a level under ambient + margin.
    pub audible: bool,
}

impl Measurement {
    /// A window's bounds as fractional milliseconds, for `from_ms` and `to_ms`.
    pub fn window(from: SimTime, to: SimTime) -> (f64, f64) {
        (from.as_micros() as f64 / 1000.0, to.as_micros() as f64 / 1000.0)
    }

    /// Device sound and ambient combined (`10·log10(10^(L/10) + 10^(La/10))`).
    pub fn combined_db(&self) -> f64 {
        match self.spl_db {
            Some(l) => 10.0 * (10f64.powf(l / 10.0) + 10f64.powf(self.ambient_dba / 10.0)).log10(),
            None => self.ambient_dba,
        }
    }
}

/// Levels are reported with two decimals (docs/reference/acoustics.md §6).
fn two_decimals<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_some(&((x * 100.0).round() / 100.0)),
        None => s.serialize_none(),
    }
}

/// Sine-referenced level of a mean square relative to full scale 1.0.
pub fn dbfs_from_mean_square(ms: f64) -> Option<f64> {
    (ms > 0.0).then(|| 10.0 * (2.0 * ms).log10())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_audibility_rule() {
        assert_eq!(verdict(None, 35.0, 0.0), Verdict::Silent);
        assert_eq!(verdict(Some(39.1), 35.0, 0.0), Verdict::Audible);
        assert_eq!(verdict(Some(72.9), 35.0, 0.0), Verdict::ClearlyAudible);
        assert_eq!(verdict(Some(-14.0), 35.0, 0.0), Verdict::Inaudible);
        assert_eq!(
            verdict(Some(2.0), -10.0, 0.0),
            Verdict::Inaudible,
            "below the threshold of hearing"
        );
    }
}
