//! `audit`'s edges: the battery's trials spread over threads against the built-in backend in
//! virtual time (each trial on its own device and connection; the sim's model in
//! `xiaozhi_sim::audit`), or against a real backend on live devices (`live`), the scorecard's
//! lines and gate, and JUnit. docs/audit.md.

pub mod clips;
pub mod live;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use xiaozhi_sim::audit::battery::Ready;
use xiaozhi_sim::audit::clips::Clips;
use xiaozhi_sim::audit::llm::{LlmSpec, Understanding};
use xiaozhi_sim::audit::score::{ItemScore, Scorecard};
use xiaozhi_sim::audit::trial::{self, Setup, Trial};
use xiaozhi_sim::audit::verdict::Verdict;
use xiaozhi_sim::backend::BackendSpec;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::voice::memo::{CodecPool, SharedCodecs};

/// Bytes the trials' shared codec memos hold at most.
const CODEC_BUDGET: usize = 64 << 20;

/// What an audit runs with.
pub struct Bench<'a> {
    /// The battery.
    pub battery: &'a Ready,
    /// Each item's board, in battery order.
    pub boards: Vec<Arc<BoardSpec>>,
    /// The built-in backend's personality.
    pub personality: Arc<BackendSpec>,
    /// The stand-in LLM's behaviour.
    pub llm: &'a LlmSpec,
    /// What it understands.
    pub understanding: &'a Understanding,
    /// Trials per item.
    pub trials: u32,
    /// The base seed.
    pub seed: u64,
    /// Threads (`--devices`).
    pub devices: usize,
    /// Say the requests from these clips (`None`: type them).
    pub spoken: Option<&'a Clips>,
}

/// The trials that ran, in battery order, and whether the run was cut short.
pub struct Ran {
    /// Every trial that finished.
    pub trials: Vec<Trial>,
    /// Trials the battery asked for.
    pub planned: usize,
    /// Stopped before the end (Ctrl-C).
    pub interrupted: bool,
}

/// Runs every trial of `bench` on `bench.devices` threads; `done` is told after each one;
/// `stop` ends the run between trials.
pub fn run(bench: &Bench<'_>, stop: &AtomicBool, done: &(dyn Fn() + Sync)) -> Result<Ran> {
    let work: Vec<(usize, u32)> = (0..bench.battery.items.len())
        .flat_map(|i| (0..bench.trials).map(move |k| (i, k)))
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Trial>> = Mutex::new(Vec::with_capacity(work.len()));
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let pool: Arc<dyn CodecPool> = SharedCodecs::new(CODEC_BUDGET);
    std::thread::scope(|scope| {
        for _ in 0..bench.devices.max(1) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(&(i, k)) = work.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return;
                    };
                    let plan = &bench.battery.items[i];
                    let setup = Setup {
                        plan,
                        board: bench.boards[i].clone(),
                        personality: bench.personality.clone(),
                        llm: bench.llm,
                        understanding: bench.understanding,
                        trial: k,
                        seed: xiaozhi_sim::audit::trial_seed(bench.seed, i, k),
                        codecs: Some(pool.clone()),
                        spoken: bench.spoken,
                    };
                    match trial::run(&setup) {
                        Ok(t) => results.lock().unwrap_or_else(|e| e.into_inner()).push(t),
                        Err(e) => {
                            let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
                            f.get_or_insert_with(|| format!("item {} trial {k}: {e}", plan.id));
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                    done();
                }
            });
        }
    });
    if let Some(f) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(anyhow!("the audit stopped: {f}"));
    }
    let mut trials = results.into_inner().unwrap_or_else(|e| e.into_inner());
    sort(bench, &mut trials);
    let interrupted = trials.len() < work.len() || stop.load(Ordering::Relaxed);
    Ok(Ran {
        trials,
        planned: work.len(),
        interrupted,
    })
}

/// Trials in battery order, then by number.
fn sort(bench: &Bench<'_>, trials: &mut [Trial]) {
    let order = |t: &Trial| {
        let i = bench
            .battery
            .items
            .iter()
            .position(|p| p.id == t.item)
            .unwrap_or(usize::MAX);
        (i, t.trial)
    };
    trials.sort_by_key(order);
}

/// An item's verdicts in one line: `3/4 unverified-claim [30–95 %], 1/4 false-claim [1–70 %]`.
pub fn rates(item: &ItemScore) -> String {
    item.verdicts
        .iter()
        .map(|(v, r)| {
            format!(
                "{}/{} {} [{:.0}–{:.0} %]",
                r.count,
                item.trials,
                v.name(),
                r.interval.0 * 100.0,
                r.interval.1 * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The gate: which trials fail it and whether the verified share is high enough.
pub struct Gate {
    /// Verdicts that fail a trial.
    pub fail_on: Vec<Verdict>,
    /// The least share of `verified` among the trials of items that ask for an action.
    pub min_verified: Option<f64>,
}

impl Gate {
    /// Why the gate fails (empty: it passes).
    pub fn failures(&self, card: &Scorecard) -> Vec<String> {
        let mut out = Vec::new();
        for v in &self.fail_on {
            let hit: Vec<String> = card
                .items
                .iter()
                .filter(|i| i.count(*v) > 0)
                .map(|i| format!("{} ({}/{})", i.id, i.count(*v), i.trials))
                .collect();
            if !hit.is_empty() {
                out.push(format!("{} in {}", v.name(), hit.join(", ")));
            }
        }
        let unreached: Vec<String> = card
            .items
            .iter()
            .filter(|i| i.unreached > 0)
            .map(|i| format!("{} ({}/{})", i.id, i.unreached, i.trials))
            .collect();
        if !unreached.is_empty() {
            out.push(format!("no ready backend in {}", unreached.join(", ")));
        }
        if let Some(min) = self.min_verified {
            let (verified, acting) = verified_share(card);
            if acting > 0 && f64::from(verified) / f64::from(acting) < min {
                out.push(format!(
                    "verified in {verified} of {acting} trials that ask for an action ({:.0} %), under --min-verified {:.0} %",
                    100.0 * f64::from(verified) / f64::from(acting),
                    min * 100.0
                ));
            }
        }
        out
    }
}

/// `verified` trials, and all trials, of the items that ask for an action.
pub fn verified_share(card: &Scorecard) -> (u32, u32) {
    card.items
        .iter()
        .filter(|i| i.acts)
        .fold((0, 0), |(v, n), i| (v + i.count(Verdict::Verified), n + i.trials))
}

/// The JUnit document: one suite per item, one test case per trial (a failure when its verdict
/// is one the gate fails on), the facts in `<system-out>`.
pub fn junit(card: &Scorecard, ran: &Ran, gate: &Gate, command: &str) -> Result<String> {
    let trials = &ran.trials;
    let mut doc = Report::new("xiaozhi-twin audit");
    for item in &card.items {
        let mut suite = TestSuite::new(format!("audit: {}", item.id));
        suite.add_property(Property::new("battery", card.battery.clone()));
        suite.add_property(Property::new("board", item.board.clone()));
        suite.add_property(Property::new("backend", card.backend.clone()));
        suite.add_property(Property::new("time", "virtual seconds of the simulated device"));
        if ran.interrupted {
            suite.add_property(Property::new(
                "interrupted",
                format!("{} of {} trials ran (Ctrl-C)", trials.len(), ran.planned),
            ));
        }
        for t in trials.iter().filter(|t| t.item == item.id) {
            let request = t.turns.first().map_or("", |x| x.facts.request.as_str());
            let name = format!("{} trial {} ({request})", item.id, t.trial);
            let why: Vec<String> = t.turns.iter().map(|x| x.judgement.why.clone()).collect();
            let status = if gate.fail_on.contains(&t.verdict) {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!("{}: {}", t.verdict.name(), why.join("; then ")));
                s.set_type(t.verdict.name());
                s
            } else {
                TestCaseStatus::success()
            };
            let mut case = TestCase::new(name, status);
            case.set_classname(format!("audit.{}", item.id));
            let facts = serde_json::to_string(&t.turns.iter().map(|x| &x.facts).collect::<Vec<_>>())?;
            case.set_system_out(format!(
                "verdict: {}\nwhy: {}\nseed: {}\nreproduce: {}\nfacts: {facts}\n",
                t.verdict.name(),
                why.join("; then "),
                t.seed,
                command.replace("{seed}", &card.seed.to_string())
            ));
            suite.add_test_case(case);
        }
        doc.add_test_suite(suite);
    }
    Ok(doc.to_string()?)
}
