//! `xiaozhi-twin run`: runs scenario files in virtual time (`crate::scenarios`) or over real
//! sockets (`--wire`, `crate::wire`), prints their acceptance records and checks, writes a JSON
//! report and WAV evidence, and exits 1 when an expectation fails.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use xiaozhi_sim::backend::spec::BackendSpec;
use xiaozhi_sim::firmware::Firmware;

use crate::args::parse_std_duration;
use crate::matrix::{self, Cell, Matrix, Row};
use crate::scenarios::{self, Loaded};

/// Run scenario files and print their acceptance records and checks.
///
/// Each scenario boots its board in virtual time, runs its steps, and prints one 5-row
/// acceptance record per tool call (discovery, decision, parameters, response, effect) and
/// a pass/fail line per expectation. Exit status: 0 all passed, 1 an expectation failed
/// (the seed and the command to reproduce are printed), 2 a file could not be used.
///
/// With --wire, each scenario runs over real sockets instead: a backend of --personality
/// listens on a loopback port, the twin dials it as `connect` does, and the backend performs
/// the scenario's call, readback and wait steps (discovery its own way, ids its own). The
/// record is what the backend can know; expectations about the device's insides are listed
/// as not judged. Steps that act on the device itself (play, press, faults, …) are refused.
#[derive(clap::Args)]
pub struct Args {
    /// Scenario files or directories of them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Seed of the device identity (overrides the scenarios' own).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the full report (records, checks, traces) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write JUnit XML for CI: a testsuite per scenario file, a testcase per expectation,
    /// failures with what was observed, the seed and the reproducing command (virtual seconds).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write one self-contained HTML report (verdicts, acceptance records as tables, every
    /// expectation, and a timeline per scenario: MCP, main task, volume, device, sound).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write WAV evidence of every measurement under DIR/<scenario>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print only failures and the summary.
    #[arg(long)]
    pub quiet: bool,
    /// Run over real loopback sockets, through `xiaozhi-twin backend` in this process.
    #[arg(long, conflicts_with = "out")]
    pub wire: bool,
    /// With --wire: the backend personality (name or YAML file).
    #[arg(long, default_value = "xinnan-py", requires = "wire")]
    pub personality: String,
    /// Firmware versions to run on, comma-separated (e.g. 1.8.9,1.9.4,2.2.6,2.4.2): one version
    /// overrides the boards' own; several print the version matrix (scenario × version: pass,
    /// FAIL, n/a) and, for each cell that differs from the newest listed, the reason. With
    /// --json the matrix is written as data. Exit status 1 only when a scenario fails on the
    /// newest listed version. A scenario whose `firmware:` premise no listed version meets is an
    /// error (exit 2), except that a one-version run skips such scenarios found in directories.
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',')]
    pub firmware: Vec<String>,
    /// With --wire: give up on a scenario after this long (real time).
    #[arg(long, value_parser = parse_std_duration, default_value = "60s", requires = "wire")]
    pub limit: Duration,
}

/// `--wire` and its settings.
struct Wire<'a> {
    personality: &'a str,
    limit: Duration,
}

pub fn run(opts: &Args) -> Result<bool> {
    let wire = opts.wire.then_some(Wire {
        personality: &opts.personality,
        limit: opts.limit,
    });
    let versions = firmware_list(&opts.firmware)?;
    if versions.len() > 1 && (opts.junit.is_some() || opts.out.is_some() || opts.html.is_some()) {
        anyhow::bail!("--junit, --html and --out take one firmware version at a time (a matrix run writes --json)");
    }
    let files = scenarios::collect(&opts.paths)?;
    // Load everything first: a broken file stops the run before anything is reported.
    let mut loaded: Vec<Loaded> = files.iter().map(|f| scenarios::load(f)).collect::<Result<_>>()?;
    for l in &loaded {
        // A scenario named on the command line (or any, in a matrix) whose premise holds on no
        // version run here is a mistake; one found in a directory is skipped as not applicable.
        let named = opts.paths.iter().any(|p| p == &l.path);
        if named || versions.len() > 1 {
            scenarios::check_premise(l, &versions)?;
        }
    }
    let mut not_applicable = 0;
    if versions.len() <= 1 {
        let before = loaded.len();
        loaded.retain(|l| {
            let fw = versions.first().cloned().unwrap_or_else(|| l.board.firmware());
            l.spec.firmware_constraint().is_none_or(|c| c.matches(&fw))
        });
        not_applicable = before - loaded.len();
    }
    if let [only] = versions.as_slice() {
        let mut kept = Vec::new();
        for mut l in loaded {
            match l.board.with_firmware(only.tag) {
                Ok(b) => {
                    l.board = std::sync::Arc::new(b);
                    kept.push(l);
                }
                // A board that does not exist on that tag: an error for a file named on the
                // command line, not applicable for one found in a directory.
                Err(e) if opts.paths.iter().any(|p| p == &l.path) => {
                    return Err(anyhow::anyhow!("{}: {e}", l.origin));
                }
                Err(_) => not_applicable += 1,
            }
        }
        loaded = kept;
    }
    let mut skipped = 0;
    let personality = match &wire {
        Some(w) => {
            // Scenarios that act on the device itself cannot run over the wire: alone, that is
            // an error; among others, they are skipped with their reason.
            let mut refusals = Vec::new();
            loaded.retain(
                |l| match xiaozhi_sim::scenario::wire::WirePlan::of(&l.spec, &l.origin, &l.text) {
                    Ok(_) => true,
                    Err(e) => {
                        refusals.push(e);
                        false
                    }
                },
            );
            if loaded.is_empty() && !refusals.is_empty() {
                return Err(refusals.swap_remove(0).into());
            }
            skipped = refusals.len();
            for e in &refusals {
                eprintln!("skipped: {e}");
            }
            Some(crate::server::load_personality(w.personality)?)
        }
        None => None,
    };
    if versions.len() > 1 {
        return run_matrix(opts, &loaded, &versions, wire.as_ref(), personality.as_ref());
    }
    let mut reports = Vec::new();
    let mut all_passed = true;
    for l in &loaded {
        let report = match (&wire, &personality) {
            (Some(w), Some(p)) => {
                let mut result = crate::wire::run_one(l, p.clone(), opts.seed, w.limit, false)?;
                crate::wire::require_completion(&mut result, w.limit);
                result.report
            }
            _ => {
                let (mut report, evidence) = scenarios::run_one(l, opts.seed, opts.out.is_some());
                if let Some(out) = &opts.out {
                    scenarios::write_evidence(out, l, &mut report, &evidence)?;
                }
                report
            }
        };
        if !opts.quiet || !report.passed {
            print!("{}", report.to_text());
            println!();
        }
        if !report.passed {
            all_passed = false;
            eprintln!(
                "FAILED: {} ({} of {} checks failed). Reproduce with: xiaozhi-twin run {}{}{} --seed {}",
                l.spec.name,
                report.failed_checks().count(),
                report.checks.len(),
                l.origin,
                wire.as_ref()
                    .map_or(String::new(), |w| format!(" --wire --personality {}", w.personality)),
                versions
                    .first()
                    .map_or(String::new(), |f| format!(" --firmware {}", f.tag)),
                report.seed
            );
        }
        reports.push(report);
    }
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&reports)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    if let Some(path) = &opts.html {
        let html = crate::html::document("xiaozhi-twin run", &reports)?;
        std::fs::write(path, html).with_context(|| format!("{}: cannot write the HTML report", path.display()))?;
    }
    if let Some(path) = &opts.junit {
        let command = match &wire {
            Some(w) => format!(
                "xiaozhi-twin run {{file}} --wire --personality {} --seed {{seed}}",
                w.personality
            ),
            None => "xiaozhi-twin run {file} --seed {seed}".to_string(),
        };
        let command = match versions.first() {
            Some(f) => command.replace(" --seed", &format!(" --firmware {} --seed", f.tag)),
            None => command,
        };
        let xml = crate::junit::document(&reports, &command)?;
        std::fs::write(path, xml).with_context(|| format!("{}: cannot write the JUnit file", path.display()))?;
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    let checks: usize = reports.iter().map(|r| r.checks.len()).sum();
    let skipped = if skipped > 0 {
        format!(", {skipped} skipped: they cannot run over the wire")
    } else {
        String::new()
    };
    let skipped = if not_applicable > 0 {
        let on = versions
            .first()
            .map_or("their boards' firmware".to_string(), |f| f.tag.to_string());
        format!("{skipped}, {not_applicable} not applicable on {on}")
    } else {
        skipped
    };
    println!("{passed}/{} scenarios passed ({checks} checks){skipped}", reports.len());
    Ok(all_passed)
}

/// `--firmware` values as modelled versions (duplicates refused).
fn firmware_list(given: &[String]) -> Result<Vec<Firmware>> {
    let mut out: Vec<Firmware> = Vec::new();
    for v in given {
        let f = Firmware::parse(v.trim())?;
        if out.iter().any(|o| o.tag == f.tag) {
            anyhow::bail!("--firmware lists {} twice", f.tag);
        }
        out.push(f);
    }
    Ok(out)
}

/// Every scenario on every version: the matrix.
fn run_matrix(
    opts: &Args,
    loaded: &[Loaded],
    versions: &[Firmware],
    wire: Option<&Wire<'_>>,
    personality: Option<&BackendSpec>,
) -> Result<bool> {
    let reference = (0..versions.len())
        .max_by_key(|&i| xiaozhi_sim::firmware::tags().position(|t| t == versions[i].tag))
        .unwrap_or(0);
    let mut rows = Vec::new();
    let mut reference_failed = false;
    for l in loaded {
        let mut cells = Vec::new();
        for (i, fw) in versions.iter().enumerate() {
            if let Some(c) = l.spec.firmware_constraint().filter(|c| !c.matches(fw)) {
                cells.push(Cell::NotApplicable {
                    needs: c.text().to_string(),
                });
                continue;
            }
            let mut on = l.clone();
            match l.board.with_firmware(fw.tag) {
                Ok(b) => on.board = std::sync::Arc::new(b),
                Err(_) => {
                    let tags = l.board.firmware.tags.as_deref().unwrap_or_default().join(", ");
                    cells.push(Cell::NotApplicable {
                        needs: format!("board `{}` only on tags {tags}", l.board.name),
                    });
                    continue;
                }
            }
            let report = match (wire, personality) {
                (Some(w), Some(p)) => {
                    let mut result = crate::wire::run_one(&on, p.clone(), opts.seed, w.limit, false)?;
                    crate::wire::require_completion(&mut result, w.limit);
                    result.report
                }
                _ => scenarios::run_one(&on, opts.seed, false).0,
            };
            if report.passed {
                cells.push(Cell::Pass);
            } else {
                reference_failed |= i == reference;
                cells.push(Cell::Fail {
                    reason: matrix::reason(&report, fw),
                });
            }
        }
        rows.push(Row {
            scenario: l
                .path
                .file_stem()
                .map_or_else(|| l.origin.clone(), |s| s.to_string_lossy().into_owned()),
            file: l.origin.clone(),
            cells,
        });
    }
    let matrix = Matrix::new(versions.iter().map(|f| f.tag.to_string()).collect(), reference, rows);
    print!("{}", matrix.to_text());
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&matrix)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the matrix", path.display()))?;
    }
    Ok(!reference_failed)
}
