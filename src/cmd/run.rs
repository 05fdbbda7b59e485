//! `xiaozhi-twin run`: runs scenario files in virtual time, prints their acceptance records and
//! checks, writes a JSON report and WAV evidence, and exits 1 when an expectation fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::scenario::ScenarioSpec;
use xiaozhi_sim::scenario::record::ScenarioReport;
use xiaozhi_sim::scenario::runner::{self, Evidence, Resources, RunOptions};
use xiaozhi_sim::spec::{SpecError, SpecErrors, read_text};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;

use crate::{boards, wav};

pub struct Options {
    pub paths: Vec<PathBuf>,
    pub seed: Option<u64>,
    pub json: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub quiet: bool,
    /// Run over real sockets instead of the virtual-time runner.
    pub wire: Option<WireOptions>,
}

pub struct WireOptions {
    pub personality: String,
    pub limit: std::time::Duration,
}

/// Scenario files named on the command line: files as given, directories' `*.yaml` sorted.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("{}: cannot read the directory", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("{}: no .yaml scenarios in this directory", p.display());
            }
            files.extend(found);
        } else if p.exists() {
            files.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(files)
}

/// A scenario ready to run: parsed, its board resolved, checked against the board's tools.
pub struct Loaded {
    pub path: PathBuf,
    pub origin: String,
    pub spec: ScenarioSpec,
    pub board: Arc<BoardSpec>,
    /// The file's text (for positions in later checks).
    pub text: String,
}

pub fn load(path: &Path) -> Result<Loaded> {
    let origin = path.display().to_string();
    let text = read_text(path)?;
    // Every problem of the file in one run: shape errors, the board, unknown tools and buttons.
    let (spec, mut errors) = ScenarioSpec::parse_all(&origin, &text);
    let board = spec.as_ref().and_then(|spec| match resolve_board(path, &spec.board) {
        Ok(b) => Some(b),
        Err(e) => {
            let (line, column) = xiaozhi_sim::spec::find_field(&text, "board");
            errors.push(SpecError::Invalid {
                origin: origin.clone(),
                line,
                column,
                field: "board".into(),
                message: format!("{e:#}"),
            });
            None
        }
    });
    if let (Some(spec), Some(board)) = (&spec, &board) {
        let mut probe = Device::new(board.clone(), WorldSpec::conformance(), 0);
        probe.set_trace(false);
        probe.power_on(SimTime::ZERO);
        let tools: Vec<String> = probe
            .mcp()
            .map(|m| m.tools().iter().map(|t| t.name().to_string()).collect())
            .unwrap_or_default();
        if let Err(more) = spec.check_against(&origin, board, &tools) {
            errors.extend(more.0);
        }
    }
    let (Some(spec), Some(board), true) = (spec, board, errors.is_empty()) else {
        return Err(SpecErrors::tidy(errors).into());
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        origin,
        spec,
        board,
        text,
    })
}

fn resolve_board(scenario: &Path, board: &str) -> Result<Arc<BoardSpec>> {
    if board.ends_with(".yaml") || board.ends_with(".yml") {
        let p = scenario.parent().unwrap_or(Path::new(".")).join(board);
        if p.exists() {
            return boards::load(&p.display().to_string());
        }
    }
    boards::load(board)
}

/// WAV files named in scenarios, relative to the scenario file.
struct ScenarioFiles<'a> {
    dir: &'a Path,
}

impl Resources for ScenarioFiles<'_> {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        wav::read_pcm(&self.dir.join(path)).map_err(|e| format!("{e:#}"))
    }
}

/// Runs one loaded scenario.
pub fn run_one(l: &Loaded, seed: Option<u64>, keep_signals: bool) -> (ScenarioReport, Vec<Evidence>) {
    let dir = l.path.parent().unwrap_or(Path::new("."));
    runner::run(
        &l.spec,
        l.board.clone(),
        &l.origin,
        &RunOptions { seed, keep_signals },
        &ScenarioFiles { dir },
    )
}

/// Writes a report's evidence under `out/<scenario stem>/`.
pub fn write_evidence(out: &Path, l: &Loaded, report: &mut ScenarioReport, evidence: &[Evidence]) -> Result<()> {
    let stem = l
        .path
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let dir = out.join(stem);
    for e in evidence {
        let (a, b) = wav::write_signals(&dir, &e.label, e.rate, &e.signals)?;
        report.files.push(a.display().to_string());
        report.files.push(b.display().to_string());
    }
    Ok(())
}

pub fn run(opts: &Options) -> Result<bool> {
    let files = collect(&opts.paths)?;
    // Load everything first: a broken file stops the run before anything is reported.
    let mut loaded: Vec<Loaded> = files.iter().map(|f| load(f)).collect::<Result<_>>()?;
    let mut skipped = 0;
    let personality = match &opts.wire {
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
            Some(crate::cmd::backend::load_personality(&w.personality)?)
        }
        None => None,
    };
    let mut reports = Vec::new();
    let mut all_passed = true;
    for l in &loaded {
        let report = match (&opts.wire, &personality) {
            (Some(w), Some(p)) => {
                let mut result = crate::cmd::wire::run_one(l, p.clone(), opts.seed, w.limit, false)?;
                crate::cmd::wire::require_completion(&mut result, w.limit);
                result.report
            }
            _ => {
                let (mut report, evidence) = run_one(l, opts.seed, opts.out.is_some());
                if let Some(out) = &opts.out {
                    write_evidence(out, l, &mut report, &evidence)?;
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
                "FAILED: {} ({} of {} checks failed). Reproduce with: xiaozhi-twin run {}{} --seed {}",
                l.spec.name,
                report.failed_checks().count(),
                report.checks.len(),
                l.origin,
                opts.wire
                    .as_ref()
                    .map_or(String::new(), |w| format!(" --wire --personality {}", w.personality)),
                report.seed
            );
        }
        reports.push(report);
    }
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&reports)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    let checks: usize = reports.iter().map(|r| r.checks.len()).sum();
    let skipped = if skipped > 0 {
        format!(", {skipped} skipped: they cannot run over the wire")
    } else {
        String::new()
    };
    println!("{passed}/{} scenarios passed ({checks} checks){skipped}", reports.len());
    Ok(all_passed)
}
