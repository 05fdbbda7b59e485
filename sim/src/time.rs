//! Virtual time: integer microseconds since the simulation started (docs/reference/architecture.md §3).
//!
//! Mirrors FreeRTOS `pdMS_TO_TICKS` rounding and `esp_timer` microsecond periods. There is no
//! wall clock anywhere in the sim crate; the harness (or a live driver) hands `now` in.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in virtual time (µs since the simulation started).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of virtual time in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    /// The moment the simulation starts.
    pub const ZERO: SimTime = SimTime(0);
    /// The latest representable time (saturating arithmetic stops here).
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// The time `us` µs after the start.
    pub const fn from_micros(us: u64) -> Self {
        SimTime(us)
    }
    /// The time `ms` ms after the start (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        SimTime(ms.saturating_mul(1000))
    }
    /// Microseconds since the start.
    pub const fn as_micros(self) -> u64 {
        self.0
    }
    /// Whole milliseconds (truncated), as the recorder prints `t=`.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1000
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);

    /// A span of `us` µs.
    pub const fn from_micros(us: u64) -> Self {
        SimDuration(us)
    }
    /// A span of `ms` ms (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        SimDuration(ms.saturating_mul(1000))
    }
    /// A span of `s` seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s.saturating_mul(1_000_000))
    }
    /// The span in µs.
    pub const fn as_micros(self) -> u64 {
        self.0
    }
    /// Whole milliseconds (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1000
    }
    /// The span in seconds, as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Whether the span is empty.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    fn sub(self, earlier: SimTime) -> SimDuration {
        self.saturating_since(earlier)
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}

impl std::ops::AddAssign for SimDuration {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 += d.0;
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_duration(f, self.0)
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_duration(f, self.0)
    }
}

fn write_duration(f: &mut fmt::Formatter<'_>, us: u64) -> fmt::Result {
    if !us.is_multiple_of(1000) {
        write!(f, "{}.{:03}ms", us / 1000, us % 1000)
    } else if us.is_multiple_of(1_000_000) && us != 0 {
        write!(f, "{}s", us / 1_000_000)
    } else {
        write!(f, "{}ms", us / 1000)
    }
}

/// The FreeRTOS tick rate of a target (`CONFIG_FREERTOS_HZ`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickRate(pub u32);

impl TickRate {
    /// `pdMS_TO_TICKS(ms)` = `ms * configTICK_RATE_HZ / 1000` (integer division), then back to
    /// time: what a `vTaskDelay(pdMS_TO_TICKS(ms))` actually blocks for (ignoring the partial
    /// first tick, which the twin does not model).
    pub fn delay(self, ms: u64) -> SimDuration {
        let hz = u64::from(self.0.max(1));
        let ticks = ms.saturating_mul(hz) / 1000;
        SimDuration::from_micros(ticks.saturating_mul(1_000_000) / hz)
    }
}

/// The earlier of two optional deadlines (`None` when neither is set).
#[inline]
pub fn earliest(a: Option<SimTime>, b: Option<SimTime>) -> Option<SimTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Why a duration text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Digits without a unit (`1500`).
    #[error("`{0}` has no unit: write e.g. `1500ms` or `2s`")]
    NoUnit(String),
    /// A unit without digits (`soon`).
    #[error("`{0}` does not start with a number")]
    NoNumber(String),
    /// A unit the parser does not know.
    #[error("unknown time unit `{unit}` in `{text}` (use us, ms, s, m or h)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// Digits and dots that are no number (`1.2.3s`).
    #[error("`{number}` is not a number in `{text}`")]
    NotANumber {
        /// The number part.
        number: String,
        /// The whole text.
        text: String,
    },
    /// Negative or not finite.
    #[error("`{0}` is out of range")]
    OutOfRange(String),
    /// Longer than [`MAX_SPAN`].
    #[error("`{0}` is longer than a day, the longest span the twin takes")]
    TooLong(String),
}

/// The longest span a duration may give in a data file, a script or on the command line: one day
/// (as long as the harness runs a device before it calls it stuck,
/// [`crate::harness::IDLE_HORIZON`]).
pub const MAX_SPAN: SimDuration = SimDuration::from_secs(24 * 3600);

/// The longest sound the twin makes or reads in one piece: a speech, a probe, a listening
/// window, a WAV file (ten minutes; what it costs grows with the length and the sample rate).
pub const MAX_SOUND: SimDuration = SimDuration::from_secs(600);

/// Parses a human duration with a unit: `1500ms`, `2s`, `1.5s`, `250us`, `3m`.
pub fn parse_duration(text: &str) -> Result<SimDuration, DurationError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::NoUnit(t.to_string()))?;
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(DurationError::NoNumber(t.to_string()));
    }
    let per_unit_us: f64 = match unit.trim() {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        other => {
            return Err(DurationError::UnknownUnit {
                unit: other.to_string(),
                text: t.to_string(),
            });
        }
    };
    let value: f64 = num.parse().map_err(|_| DurationError::NotANumber {
        number: num.to_string(),
        text: t.to_string(),
    })?;
    let us = value * per_unit_us;
    if !us.is_finite() || us < 0.0 {
        return Err(DurationError::OutOfRange(t.to_string()));
    }
    if us > MAX_SPAN.as_micros() as f64 {
        return Err(DurationError::TooLong(t.to_string()));
    }
    Ok(SimDuration::from_micros(us.round() as u64))
}

/// A duration written with a unit (`1500ms`, `2s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duration(pub SimDuration);

impl<'de> serde::Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(f64),
        }
        match <Raw as serde::Deserialize>::deserialize(d)? {
            Raw::Text(t) => parse_duration(&t).map(Duration).map_err(serde::de::Error::custom),
            Raw::Number(n) => Err(serde::de::Error::custom(format!(
                "a duration needs a unit: write `{n}ms` or `{n}s`"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_rounding_matches_pd_ms_to_ticks() {
        assert_eq!(TickRate(1000).delay(1000), SimDuration::from_millis(1000));
        assert_eq!(TickRate(100).delay(1000), SimDuration::from_millis(1000));
        assert_eq!(TickRate(100).delay(15), SimDuration::from_millis(10));
        assert_eq!(TickRate(100).delay(5), SimDuration::ZERO);
    }

    #[test]
    fn durations_need_units() {
        assert_eq!(parse_duration("1500ms").unwrap(), SimDuration::from_millis(1500));
        assert_eq!(parse_duration("2s").unwrap(), SimDuration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), SimDuration::from_millis(1500));
        assert!(parse_duration("1500").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn a_duration_is_at_most_a_day() {
        assert_eq!(parse_duration("24h").unwrap(), MAX_SPAN);
        assert_eq!(parse_duration("100000s"), Err(DurationError::TooLong("100000s".into())));
        assert!(matches!(
            parse_duration("99999999999999999999h"),
            Err(DurationError::TooLong(_))
        ));
    }

    #[test]
    fn display_picks_a_readable_unit() {
        assert_eq!(SimDuration::from_millis(1500).to_string(), "1500ms");
        assert_eq!(SimDuration::from_secs(2).to_string(), "2s");
        assert_eq!(SimDuration::from_micros(1500).to_string(), "1.500ms");
    }
}
