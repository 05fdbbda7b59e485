//! `fleet --voice --think`: how long a device's user waits before each turn. A fixed time (the
//! first turn at once, as soon as the device listens), or `exp:MEAN`, waits drawn from an
//! exponential distribution with that mean before every turn, the first included: each device's
//! turns then come as a Poisson process, users who talk now and then rather than all at once
//! (docs/fleet.md, "Realistic pacing"). Draws are seeded by the device and the turn, so the same
//! `--seed` gives the same waits.

use std::time::Duration;

/// splitmix64: a few numbers from one seed, the same on every machine.
pub(crate) struct Draw(pub(crate) u64);

impl Draw {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` ≥ 1).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The longest exponential wait, in means: longer draws are cut to it (1 draw in 22,026 is; the
/// mean moves by less than 0.05 %), so a run can plan for it.
pub const MOST_MEANS: u32 = 10;

/// The think time of a voice fleet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Think {
    /// The same wait between turns, none before the first.
    Fixed(Duration),
    /// A draw from an exponential distribution with this mean before every turn.
    Exponential(Duration),
}

impl Think {
    /// `2s`, `500ms` (fixed) or `exp:30s` (exponential with that mean).
    pub fn parse(text: &str) -> Result<Think, String> {
        let t = text.trim();
        let (exp, d) = match t.strip_prefix("exp:") {
            Some(rest) => (true, rest),
            None => (false, t),
        };
        let d = crate::args::parse_std_duration(d)?;
        match exp {
            true if d.is_zero() => Err(format!("`{t}`: an exponential think time needs a mean above 0")),
            true => Ok(Think::Exponential(d)),
            false => Ok(Think::Fixed(d)),
        }
    }

    /// The mean wait between turns.
    pub fn mean(&self) -> Duration {
        match *self {
            Think::Fixed(d) | Think::Exponential(d) => d,
        }
    }

    /// The wait before turn `turn` (from 0) of the device whose user is seeded `seed`.
    pub fn before(&self, seed: u64, turn: u32) -> Duration {
        match *self {
            Think::Fixed(_) if turn == 0 => Duration::ZERO,
            Think::Fixed(d) => d,
            Think::Exponential(mean) => {
                let mut draw = Draw(seed ^ u64::from(turn).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x7468_696e_6b00);
                // Uniform in [0, 1) from 53 bits; −ln(1 − u) is exponential with mean 1.
                let u = (draw.next() >> 11) as f64 / (1u64 << 53) as f64;
                let means = (-(1.0 - u).ln()).min(f64::from(MOST_MEANS));
                mean.mul_f64(means)
            }
        }
    }

    /// The longest wait before a turn.
    pub fn most(&self) -> Duration {
        match *self {
            Think::Fixed(d) => d,
            Think::Exponential(mean) => mean * MOST_MEANS,
        }
    }

    /// How long a device listens quietly after its last turn before its user ends the
    /// conversation: the fixed think time, at least 3 s (a backend may say more).
    pub fn settle(&self) -> Duration {
        match *self {
            Think::Fixed(d) => d.max(Duration::from_secs(3)),
            Think::Exponential(_) => Duration::from_secs(3),
        }
    }
}

impl std::fmt::Display for Think {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Think::Fixed(d) => write!(f, "{}", fmt_duration(*d)),
            Think::Exponential(d) => write!(f, "exp:{}", fmt_duration(*d)),
        }
    }
}

fn fmt_duration(d: Duration) -> String {
    match d.subsec_millis() {
        0 => format!("{}s", d.as_secs()),
        _ => format!("{}ms", d.as_millis()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_think_time_is_fixed_or_exponential_and_says_so_as_written() {
        assert_eq!(Think::parse("2s"), Ok(Think::Fixed(Duration::from_secs(2))));
        assert_eq!(Think::parse("exp:30s"), Ok(Think::Exponential(Duration::from_secs(30))));
        assert_eq!(Think::parse("exp:250ms").unwrap().to_string(), "exp:250ms");
        assert_eq!(Think::parse("2s").unwrap().to_string(), "2s");
        assert!(Think::parse("exp:0s").unwrap_err().contains("mean above 0"));
        assert!(Think::parse("exp:soon").is_err());
        assert!(Think::parse("poisson:3s").is_err());
    }

    #[test]
    fn a_fixed_think_time_waits_between_turns_only() {
        let t = Think::Fixed(Duration::from_secs(2));
        assert_eq!(t.before(7, 0), Duration::ZERO);
        assert_eq!(t.before(7, 1), Duration::from_secs(2));
        assert_eq!(t.settle(), Duration::from_secs(3));
    }

    #[test]
    fn exponential_waits_have_their_mean_are_seeded_and_bounded() {
        let mean = Duration::from_secs(30);
        let t = Think::Exponential(mean);
        let n = 20_000u32;
        let waits: Vec<f64> = (0..n).map(|k| t.before(u64::from(k), k % 7).as_secs_f64()).collect();
        let avg = waits.iter().sum::<f64>() / f64::from(n);
        assert!((avg - 30.0).abs() < 30.0 * 0.03, "mean {avg}");
        // Exponential: about e^-1 of the waits are longer than the mean, e^-3 longer than three.
        let over = |m: f64| waits.iter().filter(|&&w| w > 30.0 * m).count() as f64 / f64::from(n);
        assert!((over(1.0) - (-1f64).exp()).abs() < 0.02, "{}", over(1.0));
        assert!((over(3.0) - (-3f64).exp()).abs() < 0.01, "{}", over(3.0));
        assert!(waits.iter().all(|&w| w <= t.most().as_secs_f64()));
        assert_eq!(t.before(42, 3), t.before(42, 3));
        assert_ne!(t.before(42, 3), t.before(42, 4));
        assert!(t.before(42, 0) > Duration::ZERO, "the first turn waits too");
    }
}
