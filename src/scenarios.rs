//! Scenario files: finding them on the command line, loading them (parsed, board resolved,
//! checked against the board's tools, every mistake of a file reported at once), running one in
//! virtual time and writing its WAV evidence. Used by `xiaozhi-twin run`, `demo` and
//! `backend --scenario`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::firmware::Firmware;
use xiaozhi_sim::scenario::ScenarioSpec;
use xiaozhi_sim::scenario::record::ScenarioReport;
use xiaozhi_sim::scenario::runner::{self, Evidence, Resources, RunOptions};
use xiaozhi_sim::spec::{SpecError, SpecErrors, read_text};
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;

use crate::{boards, wav};

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
#[derive(Clone)]
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

/// A scenario's `firmware:` premise must hold somewhere: on its board's own version when no
/// `--firmware` is given, else on at least one listed version (`file:line:col`, exit 2).
pub fn check_premise(l: &Loaded, versions: &[Firmware]) -> Result<()> {
    let Some(c) = l.spec.firmware_constraint() else {
        return Ok(());
    };
    let own = [l.board.firmware()];
    let candidates = if versions.is_empty() { &own[..] } else { versions };
    if candidates.iter().any(|f| c.matches(f)) {
        return Ok(());
    }
    let (line, column) = xiaozhi_sim::spec::find_field(&l.text, "firmware");
    let listed: Vec<&str> = candidates.iter().map(|f| f.tag).collect();
    Err(SpecError::Invalid {
        origin: l.origin.clone(),
        line,
        column,
        field: "firmware".into(),
        message: format!(
            "the premise needs firmware {}, which no version run here meets ({})",
            c.text(),
            listed.join(", ")
        ),
    }
    .into())
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
    let opts = RunOptions {
        seed,
        keep_signals,
        ..RunOptions::default()
    };
    run_with(l, &opts)
}

/// Runs one loaded scenario with every run option.
pub fn run_with(l: &Loaded, opts: &RunOptions) -> (ScenarioReport, Vec<Evidence>) {
    let dir = l.path.parent().unwrap_or(Path::new("."));
    runner::run(&l.spec, l.board.clone(), &l.origin, opts, &ScenarioFiles { dir })
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
