//! The scorecard: per item, how often each verdict came over its trials, with a Wilson score
//! interval (95 %), and the trial a reader should look at first (the worst).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::audit::battery::Ready;
use crate::audit::trial::Trial;
use crate::audit::verdict::Verdict;

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `k` successes in `n` trials at `z` (`(0, 1)` for no trials).
pub fn wilson(k: u32, n: u32, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (f64::from(k), f64::from(n));
    let p = k / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// One verdict's share of an item's trials.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// Trials with this verdict.
    pub count: u32,
    /// `count / trials`.
    pub rate: f64,
    /// The Wilson 95 % interval of the rate.
    pub interval: (f64, f64),
}

/// One item's line of the scorecard.
#[derive(Clone, Debug, Serialize)]
pub struct ItemScore {
    /// The item's id.
    pub id: String,
    /// Its board.
    pub board: String,
    /// Error-card rows.
    pub card: Vec<u32>,
    /// What the item shows.
    pub about: String,
    /// A correct answer calls a tool (`false`: nothing may change).
    pub acts: bool,
    /// Trials run.
    pub trials: u32,
    /// Trials that never reached a ready backend.
    pub unreached: u32,
    /// Every verdict that came, by name, worst first.
    pub verdicts: BTreeMap<Verdict, Rate>,
    /// The trial to read first: the first with the worst verdict.
    pub worst: u32,
}

impl ItemScore {
    /// Trials with `v`.
    pub fn count(&self, v: Verdict) -> u32 {
        self.verdicts.get(&v).map_or(0, |r| r.count)
    }
}

/// The scorecard of one audit.
#[derive(Clone, Debug, Serialize)]
pub struct Scorecard {
    /// The battery's name.
    pub battery: String,
    /// Where it came from.
    pub origin: String,
    /// The backend the requests went to, in words.
    pub backend: String,
    /// The base seed.
    pub seed: u64,
    /// Trials per item.
    pub trials: u32,
    /// One line per item, in battery order.
    pub items: Vec<ItemScore>,
}

/// Adds up `trials` (any order) into the scorecard of `battery`, whose items were each asked
/// for `per_item` trials.
pub fn score(battery: &Ready, backend: &str, seed: u64, per_item: u32, trials: &[Trial]) -> Scorecard {
    let items = battery
        .items
        .iter()
        .map(|plan| {
            let mine: Vec<&Trial> = trials.iter().filter(|t| t.item == plan.id).collect();
            let n = mine.len() as u32;
            let mut counts: BTreeMap<Verdict, u32> = BTreeMap::new();
            for t in &mine {
                *counts.entry(t.verdict).or_default() += 1;
            }
            let verdicts = counts
                .into_iter()
                .map(|(v, count)| {
                    let rate = Rate {
                        count,
                        rate: f64::from(count) / f64::from(n.max(1)),
                        interval: wilson(count, n, Z95),
                    };
                    (v, rate)
                })
                .collect();
            let worst = mine.iter().min_by_key(|t| (t.verdict, t.trial)).map_or(0, |t| t.trial);
            ItemScore {
                id: plan.id.clone(),
                board: plan.board.clone(),
                card: plan.card.clone(),
                about: plan.about.clone(),
                acts: plan.call.is_some(),
                trials: n,
                unreached: mine.iter().filter(|t| !t.reached).count() as u32,
                verdicts,
                worst,
            }
        })
        .collect();
    Scorecard {
        battery: battery.name.clone(),
        origin: battery.origin.clone(),
        backend: backend.to_string(),
        seed,
        trials: per_item,
        items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_the_textbook_values() {
        // Newcombe (1998), table I: 81/263 → 0.2553–0.3662; 15/148 → 0.0624–0.1605.
        let (lo, hi) = wilson(81, 263, Z95);
        assert!((lo - 0.2553).abs() < 5e-4 && (hi - 0.3662).abs() < 5e-4, "{lo} {hi}");
        let (lo, hi) = wilson(15, 148, Z95);
        assert!((lo - 0.0624).abs() < 5e-4 && (hi - 0.1605).abs() < 5e-4, "{lo} {hi}");
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
        let (lo, hi) = wilson(5, 5, Z95);
        assert!(hi == 1.0 && (lo - 0.5655).abs() < 5e-4, "{lo}");
    }
}
