//! `xiaozhi-twin audit`: a battery of requests, each put many times to a backend and its LLM,
//! scored by what the stack *said* against what the device *did* (`crate::audit`, the model in
//! `xiaozhi_sim::audit`; docs/audit.md).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use xiaozhi_sim::audit::battery::{self, Ready};
use xiaozhi_sim::audit::clips::Clips;
use xiaozhi_sim::audit::llm::{LlmSpec, Understanding};
use xiaozhi_sim::audit::score;
use xiaozhi_sim::audit::verdict::Verdict;
use xiaozhi_sim::fault::Fault;

use crate::audit::{Bench, Gate};
use crate::{errln, outln};

/// Put spoken requests to a backend and its LLM, and score what it said against what the
/// device did.
///
/// Each item of the battery (a request in several phrasings, what a correct action is, how a
/// claim of success reads) runs --trials times, each trial on a freshly booted board in the
/// item's starting state: woken with 你好小智, the greeting heard, then the request typed
/// (listen detect with the text, as py-xiaozhi sends typed input) or spoken (its clip said into
/// the microphone: see --delivery). The backend is the built-in
/// one in virtual time (--personality, which must have a voice), or with --url, --ota or --mqtt
/// a real one, each trial a live board in real time. The built-in backend's LLM is the stand-in of --llm: honest
/// (reads back before it claims), trusting (claims on a bare `true`, as xiaozhi-esp32-server's
/// LLMs are handed it), lazy (claims without calling the second time), asks-back (reads, then
/// asks instead of acting) or mute-happy (lowers to 0). Every trial's facts come from the twin:
/// the calls that reached the device and their replies, the value before and after, what the
/// backend said and what a listener heard of it; each trial gets one verdict: verified,
/// unverified-claim, false-claim, wrong-action, silent-action, no-action or no-answer
/// (docs/audit.md says how each is decided).
///
/// Prints the scorecard (per item, each verdict's share with a 95 % Wilson interval). Exit
/// status: 0 the gate passed, 1 a trial's verdict is one --fail-on names or the verified share
/// is under --min-verified (or the run was interrupted), 2 unusable input. Ctrl-C stops after
/// the trials running, scores what finished and writes the reports; it never passes the gate.
#[derive(clap::Args)]
pub struct Args {
    /// The battery (YAML; default: the shipped one, audits/default.yaml).
    #[arg(value_name = "BATTERY")]
    pub battery: Option<PathBuf>,
    /// Trials per item (default: the battery's `trials`).
    #[arg(long, value_name = "N")]
    pub trials: Option<u32>,
    /// Base seed: trial k of item i runs on a device seeded with seed + 1000·i + k.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The stand-in LLM's behaviour: honest, trusting, lazy, asks-back, mute-happy, or a YAML file.
    #[arg(long, default_value = "trusting", value_name = "NAME|FILE", conflicts_with = "url")]
    pub llm: String,
    /// The built-in backend's personality (name or YAML file; it must have a `voice:`).
    #[arg(long, default_value = "xinnan-py", value_name = "NAME|FILE", conflicts_with = "url")]
    pub personality: String,
    /// Put the requests to a real backend at this WebSocket URL instead (ws://HOST:PORT/PATH):
    /// each trial a live board in real time, the backend's own LLM answering.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --url: the access token the board sends.
    #[arg(long, default_value = "", requires = "url")]
    pub token: String,
    /// Put the requests to a real backend whose OTA endpoint is this (http://HOST:PORT/PATH):
    /// every trial's board activates there first and its answer chooses the wire (WebSocket, or
    /// MQTT + UDP), as the firmware does.
    #[arg(long, value_name = "URL", conflicts_with_all = ["url", "llm", "personality"])]
    pub ota: Option<String>,
    /// Put the requests to a real backend behind the MQTT gateway at HOST:PORT, without an OTA
    /// server: every trial's board gets the answer xiaozhi-esp32-server's OTA would give for it.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["url", "ota", "llm", "personality"])]
    pub mqtt: Option<String>,
    /// With --mqtt: the gateway's signature key (MQTT_SIGNATURE_KEY), which signs the password.
    #[arg(long, value_name = "KEY", requires = "mqtt")]
    pub mqtt_signature_key: Option<String>,
    /// Trials run at once, each on its own device (default: the machine's cores).
    #[arg(long, value_name = "K")]
    pub devices: Option<usize>,
    /// Verdicts that fail the gate (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "false-claim,wrong-action",
        value_name = "VERDICTS"
    )]
    pub fail_on: Vec<String>,
    /// The least share (0–1) of `verified` among the trials of items that ask for an action.
    #[arg(long, value_name = "SHARE")]
    pub min_verified: Option<f64>,
    /// Write the scorecard and every trial's facts and verdict as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write JUnit XML: a suite per item, a test case per trial (failing on --fail-on verdicts).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write one self-contained HTML page: the gate, a bar per item, and each item's worst
    /// trial as acceptance records with a sound lane.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How the requests are made: `spoken` says each phrasing's clip (the battery's `clips:`
    /// index; the shipped battery's are espeak-ng recordings) into the microphone, Opus at
    /// real-time pace, as the firmware sends speech; `typed` sends the text as `listen detect`
    /// (py-xiaozhi's typed input, for servers without speech recognition). `auto`: spoken to a
    /// real backend when the battery has clips, typed to the built-in one (it has no speech
    /// recogniser: spoken to it, its stand-in LLM is handed the battery's text, and the trial's
    /// delivery says so).
    #[arg(long, value_enum, default_value_t = DeliveryArg::Auto)]
    pub delivery: DeliveryArg,
    /// Print the scorecard only (no progress bar, no worst-trial lines).
    #[arg(long)]
    pub quiet: bool,
}

/// `--delivery`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeliveryArg {
    /// Spoken to a real backend when the battery has clips; typed otherwise.
    Auto,
    /// Every phrasing said from its clip.
    Spoken,
    /// Every phrasing typed.
    Typed,
}

/// Most trials at once.
const MAX_DEVICES: usize = 256;

/// Runs the audit; `Ok(false)` when the gate fails.
pub fn run(a: &Args) -> Result<bool> {
    let fail_on = a
        .fail_on
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            Verdict::named(s).with_context(|| {
                let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.name()).collect();
                format!("--fail-on: `{s}` is no verdict (use {})", names.join(", "))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(m) = a.min_verified
        && !(0.0..=1.0).contains(&m)
    {
        bail!("--min-verified {m}: give a share from 0 to 1 (0.9 is 90 %)");
    }
    let ready = load_battery(a.battery.as_deref())?;
    let trials = a.trials.unwrap_or(ready.trials);
    if trials == 0 || trials > battery::MAX_TRIALS {
        bail!("--trials {trials}: give 1 to {}", battery::MAX_TRIALS);
    }
    let devices = a.devices.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_DEVICES)
    });
    if devices == 0 || devices > MAX_DEVICES {
        bail!("--devices {devices}: give 1 to {MAX_DEVICES}");
    }
    let llm = load_llm(&a.llm)?;
    let personality = crate::server::load_personality(&a.personality)?;
    if let Some(url) = &a.url
        && (!url.starts_with("ws://") || xiaozhi_sim::device::url::parse_url(url).is_none())
    {
        bail!("--url `{url}`: expected ws://HOST:PORT/PATH");
    }
    if let Some(ota) = &a.ota
        && !ota.starts_with("http://")
        && !ota.starts_with("https://")
    {
        bail!("--ota `{ota}`: expected http://HOST:PORT/PATH");
    }
    let remote = match (&a.url, &a.ota, &a.mqtt) {
        (Some(url), _, _) => Some(crate::audit::live::Remote::Url(url.clone(), a.token.clone())),
        (None, Some(ota), _) => Some(crate::audit::live::Remote::Ota(ota.clone())),
        (None, None, Some(m)) => Some(crate::audit::live::Remote::Mqtt(
            m.clone(),
            a.mqtt_signature_key.clone(),
        )),
        (None, None, None) => None,
    };
    if remote.is_none() && personality.voice.is_none() {
        bail!(
            "personality `{}` has no voice: the audit needs a backend that listens and speaks (xinnan-py does)",
            personality.name
        );
    }
    let spoken = delivery(a, &ready, remote.is_some())?;
    let boards = ready
        .items
        .iter()
        .map(|p| crate::boards::load(&p.board))
        .collect::<Result<Vec<_>>>()?;
    let understanding = Understanding::shipped();
    let backend = describe(a, &personality.name, &llm.name, spoken.as_ref());
    let bench = Bench {
        battery: &ready,
        boards,
        personality: Arc::new(personality),
        llm: &llm,
        understanding: &understanding,
        trials,
        seed: a.seed,
        devices,
        spoken: spoken.as_ref(),
    };
    let total = ready.items.len() as u64 * u64::from(trials);
    let bar = crate::fleet::progress_bar(total, "{bar:40} {pos}/{len} trials {elapsed}", a.quiet);
    let stop = interrupt_flag();
    let ran = match &remote {
        Some(remote) => crate::audit::live::run(&bench, remote, stop, &|| bar.inc(1))?,
        None => crate::audit::run(&bench, stop, &|| bar.inc(1))?,
    };
    bar.finish_and_clear();
    let card = score::score(&ready, &backend, a.seed, trials, &ran.trials);
    let gate = Gate {
        fail_on,
        min_verified: a.min_verified,
    };
    print(&card, &ran, &gate, a.quiet);
    if let Some(path) = &a.json {
        let doc = serde_json::json!({ "scorecard": card, "trials": ran.trials, "interrupted": ran.interrupted });
        let text = serde_json::to_string_pretty(&doc)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    if let Some(path) = &a.html {
        let page = crate::html::audit::document(&card, &ran, &gate)?;
        std::fs::write(path, page).with_context(|| format!("{}: cannot write the HTML page", path.display()))?;
    }
    if let Some(path) = &a.junit {
        let command = reproduce(a);
        let xml = crate::audit::junit(&card, &ran, &gate, &command)?;
        std::fs::write(path, xml).with_context(|| format!("{}: cannot write the JUnit file", path.display()))?;
    }
    // A cut-short run never passes the gate: what did not run was not judged.
    Ok(gate.failures(&card).is_empty() && !ran.interrupted)
}

/// The shipped battery, or a file (every mistake, located).
fn load_battery(path: Option<&std::path::Path>) -> Result<Ready> {
    let (origin, text) = match path {
        None => (battery::DEFAULT_ORIGIN.to_string(), battery::DEFAULT.to_string()),
        Some(p) => (p.display().to_string(), xiaozhi_sim::spec::read_text(p)?),
    };
    let known_board = |b: &str| crate::boards::load(b).is_ok();
    let known_fault = |f: &str| f.parse::<Fault>().is_ok();
    Ok(battery::parse(&origin, &text, &known_board, &known_fault)?)
}

/// The backend the requests go to and how they are made, in words (the scorecard's first line).
fn describe(a: &Args, personality: &str, llm: &str, spoken: Option<&Clips>) -> String {
    let backend = match (&a.url, &a.ota, &a.mqtt) {
        (Some(url), _, _) => format!("the backend at {url} (its own LLM), in real time"),
        (None, Some(ota), _) => {
            format!("the backend whose OTA is {ota} (its own LLM; the OTA chose the wire), in real time")
        }
        (None, None, Some(m)) => format!("the backend behind the MQTT gateway at {m} (its own LLM), in real time"),
        (None, None, None) => {
            format!("the built-in backend ({personality}, its LLM the stand-in `{llm}`), in virtual time")
        }
    };
    match spoken {
        None => format!("{backend}; requests typed"),
        Some(c) => format!(
            "{backend}; requests spoken from {}{}",
            c.origin,
            c.voice.as_deref().map(|v| format!(" ({v})")).unwrap_or_default()
        ),
    }
}

/// The clips the requests are said from (`None`: typed), as `--delivery` chooses for a real
/// backend (`remote`) or the built-in one.
fn delivery(a: &Args, ready: &Ready, remote: bool) -> Result<Option<Clips>> {
    Ok(match (a.delivery, &ready.clips) {
        (DeliveryArg::Typed, _) | (DeliveryArg::Auto, None) => None,
        (DeliveryArg::Auto, Some(_)) if !remote => None,
        (DeliveryArg::Spoken, None) => bail!(
            "--delivery spoken: the battery {} names no clips (`clips:`, docs/audit.md \"Spoken requests\")",
            ready.origin
        ),
        (_, Some(index)) => Some(load_clips(a.battery.as_deref(), index, ready)?),
    })
}

/// The clips of the index a battery names (the shipped battery's are in the binary); every
/// phrasing must have one.
fn load_clips(battery: Option<&std::path::Path>, index: &str, ready: &Ready) -> Result<Clips> {
    let clips = match battery {
        None => crate::audit::clips::shipped()?,
        Some(b) => crate::audit::clips::beside(b, index)?,
    };
    let missing = clips.missing(&ready.items);
    if let Some((id, lang, text)) = missing.first() {
        bail!(
            "{}: no clip says \"{text}\" ({lang}, item {id}){}; record it, or --delivery typed",
            clips.origin,
            match missing.len() {
                1 => String::new(),
                n => format!(", nor {} other phrasing{}", n - 1, if n == 2 { "" } else { "s" }),
            }
        );
    }
    Ok(clips)
}

/// A shipped behaviour by name, or a behaviour file.
fn load_llm(name: &str) -> Result<LlmSpec> {
    if let Some(l) = LlmSpec::shipped(name) {
        return Ok(l);
    }
    let path = std::path::Path::new(name);
    if !path.exists() {
        bail!(
            "unknown LLM behaviour `{name}` (shipped: {}; or give a YAML file)",
            LlmSpec::names().join(", ")
        );
    }
    let text = xiaozhi_sim::spec::read_text(path)?;
    Ok(LlmSpec::from_yaml(&path.display().to_string(), &text)?)
}

/// The command that runs the same audit again.
fn reproduce(a: &Args) -> String {
    let mut c = String::from("xiaozhi-twin audit");
    if let Some(b) = &a.battery {
        c += &format!(" {}", b.display());
    }
    if let Some(t) = a.trials {
        c += &format!(" --trials {t}");
    }
    match (&a.url, &a.ota, &a.mqtt) {
        (Some(url), _, _) => c += &format!(" --url {url}"),
        (None, Some(ota), _) => c += &format!(" --ota {ota}"),
        (None, None, Some(m)) => c += &format!(" --mqtt {m}"),
        (None, None, None) => c += &format!(" --llm {} --personality {}", a.llm, a.personality),
    }
    c += match a.delivery {
        DeliveryArg::Auto => "",
        DeliveryArg::Spoken => " --delivery spoken",
        DeliveryArg::Typed => " --delivery typed",
    };
    c += " --seed {seed}";
    c
}

/// Set once Ctrl-C is pressed (a thread waits for the signal on a small runtime of its own).
fn interrupt_flag() -> &'static AtomicBool {
    static FLAG: OnceLock<&'static AtomicBool> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let _ = std::thread::Builder::new().name("ctrl-c".into()).spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
                flag.store(true, Ordering::Relaxed);
            }
        });
        flag
    })
}

/// The scorecard in the terminal.
fn print(card: &score::Scorecard, ran: &crate::audit::Ran, gate: &Gate, quiet: bool) {
    outln!(
        "audit: {} ({}), {} items × {} trials against {}, seed {}",
        card.battery,
        card.origin,
        card.items.len(),
        card.trials,
        card.backend,
        card.seed
    );
    let width = card.items.iter().map(|i| i.id.len()).max().unwrap_or(4);
    for item in &card.items {
        let failing = gate.fail_on.iter().any(|v| item.count(*v) > 0);
        outln!(
            "  {:width$}  {}{}",
            item.id,
            crate::audit::rates(item),
            if failing { "  ← FAIL" } else { "" }
        );
        // The worst trial, where it is worth reading: a failure, or not what a correct stack does.
        let good = |v: &Verdict| match item.acts {
            true => matches!(v, Verdict::Verified | Verdict::UnverifiedClaim),
            false => *v == Verdict::NoAction,
        };
        let worth = failing || !item.verdicts.keys().all(good);
        if !quiet
            && worth
            && let Some(t) = ran.trials.iter().find(|t| t.item == item.id && t.trial == item.worst)
        {
            let last = t.turns.iter().min_by_key(|x| x.judgement.verdict);
            if let Some(turn) = last {
                outln!(
                    "  {:width$}    worst: trial {} \"{}\": {}",
                    "",
                    t.trial,
                    turn.facts.request,
                    turn.judgement.why
                );
            }
        }
    }
    let mut totals = std::collections::BTreeMap::new();
    for t in &ran.trials {
        *totals.entry(t.verdict).or_insert(0u32) += 1;
    }
    let line: Vec<String> = totals.iter().map(|(v, n)| format!("{n} {}", v.name())).collect();
    outln!("{} trials: {}", ran.trials.len(), line.join(", "));
    let (verified, acting) = crate::audit::verified_share(card);
    outln!("verified: {verified} of {acting} trials of items that ask for an action");
    if ran.interrupted {
        errln!(
            "interrupted: {} of {} trials ran; the scorecard is of those",
            ran.trials.len(),
            ran.planned
        );
    }
    let failures = gate.failures(card);
    if ran.interrupted {
        outln!("gate: not passed: the run was interrupted");
    }
    if failures.is_empty() && !ran.interrupted {
        outln!("gate: passed");
    } else {
        for f in failures {
            outln!("gate: FAILED: {f}");
        }
    }
}
