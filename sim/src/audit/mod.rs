//! `xiaozhi-twin audit`'s model: put spoken requests to a backend and its LLM many times, and
//! score what the stack *said* against what the device *did* (docs/audit.md).
//!
//! * [`battery`]: the requests and how to judge them, as data; [`condition`]: the quantities
//!   it watches and its conditions on them;
//! * [`clips`]: the recordings that say them into the microphone;
//! * [`llm`]: the built-in backend's stand-in LLM and its behaviours, as data;
//! * [`trial`]: one trial in virtual time against the built-in backend;
//! * [`verdict`]: a request's facts and the verdict drawn from them;
//! * [`score`]: the scorecard.
//!
//! Deterministic: a trial's device seed is the base seed plus `1000 × item + trial`, the
//! stand-in has no randomness, so the same battery, behaviour and seed give the same verdicts
//! whatever order (or on however many threads) the trials run.

pub mod battery;
pub mod clips;
pub mod condition;
pub mod llm;
pub mod score;
pub mod trial;
pub mod verdict;

/// The device seed of trial `k` of item `i`.
pub fn trial_seed(base: u64, item: usize, k: u32) -> u64 {
    base.wrapping_add(1000u64.wrapping_mul(item as u64))
        .wrapping_add(u64::from(k))
}
