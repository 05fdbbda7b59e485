//! `xiaozhi-twin run`: runs scenario files in virtual time (`crate::scenarios`) or over real
//! sockets (`--wire`, `crate::over_wire`), prints their acceptance records and checks, writes a JSON
//! report and WAV evidence, and exits 1 when an expectation fails.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use xiaozhi_sim::backend::spec::BackendSpec;
use xiaozhi_sim::firmware::Firmware;
use xiaozhi_sim::scenario::record::ScenarioReport;

use crate::args::parse_std_duration;
use crate::over_wire::Transport;
use crate::scenarios::{self, Loaded};
use crate::version_matrix::{self, Cell, Matrix, Row};

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
/// --transport mqtt sends the device to MQTT + UDP instead (an OTA answer with an `mqtt` block),
/// through the twin's xiaozhi-mqtt-gateway stand-in in front of the same backend.
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
    /// Run every scenario on these boards instead of its own (board ids, comma-separated; `all`
    /// for the twin's boards and every upstream build): the board matrix, board × scenario →
    /// pass / FAIL / n/a, and the reason for each cell that is not a pass (its codec law for a
    /// level, what the twin does not model for the board). With --json the matrix is written as
    /// data. Exit status 1 only when a scenario fails on the first listed board.
    #[arg(long, value_name = "BOARDS", value_delimiter = ',', conflicts_with_all = ["wire", "junit", "html", "out"])]
    pub board: Vec<String>,
    /// With --wire: the wire the device uses (mqtt: MQTT + UDP through the gateway stand-in).
    #[arg(long, value_enum, default_value_t = Transport::Websocket, requires = "wire")]
    pub transport: Transport,
    /// With --wire: give up on a scenario after this long (real time).
    #[arg(long, value_parser = parse_std_duration, default_value = "60s", requires = "wire")]
    pub limit: Duration,
}

/// `--wire` and its settings.
struct Wire<'a> {
    /// The personality as given (for the command that reproduces a failure).
    personality: &'a str,
    backend: BackendSpec,
    limit: Duration,
    transport: Transport,
}

impl Wire<'_> {
    /// The flags that reproduce this wire on a command line.
    fn flags(&self) -> String {
        let transport = match self.transport {
            Transport::Websocket => "",
            Transport::Mqtt => " --transport mqtt",
        };
        format!(" --wire{transport} --personality {}", self.personality)
    }
}

impl Wire<'_> {
    /// Runs `l` over loopback sockets: its report, judged from the backend's side.
    fn run(&self, l: &Loaded, seed: Option<u64>) -> Result<ScenarioReport> {
        let mut result = crate::over_wire::run_one(l, self.backend.clone(), seed, self.limit, self.transport)?;
        crate::over_wire::require_completion(&mut result, self.limit);
        Ok(result.report)
    }
}

pub fn run(opts: &Args) -> Result<bool> {
    for (flag, path) in [("--json", &opts.json), ("--junit", &opts.junit), ("--html", &opts.html)] {
        if let Some(p) = path {
            crate::out::check_writable(flag, p)?;
        }
    }
    crate::out::holding(
        opts.json.is_some() || opts.junit.is_some() || opts.html.is_some(),
        || run_inner(opts),
    )
}

/// [`run`] once its output files were checked.
fn run_inner(opts: &Args) -> Result<bool> {
    let versions = firmware_list(&opts.firmware)?;
    if versions.len() > 1 && (opts.junit.is_some() || opts.out.is_some() || opts.html.is_some()) {
        anyhow::bail!("--junit, --html and --out take one firmware version at a time (a matrix run writes --json)");
    }
    let (mut loaded, not_applicable) = load(opts, &versions)?;
    let mut skipped = 0;
    let wire = if opts.wire {
        skipped = keep_what_runs_over_the_wire(&mut loaded)?;
        Some(Wire {
            personality: &opts.personality,
            backend: crate::server::load_personality(&opts.personality)?,
            limit: opts.limit,
            transport: opts.transport,
        })
    } else {
        None
    };
    if !opts.board.is_empty() {
        if versions.len() > 1 {
            anyhow::bail!("--board and several --firmware versions make a cube: give one of them");
        }
        return run_board_matrix(opts, &loaded);
    }
    if versions.len() > 1 {
        return run_matrix(opts, &loaded, &versions, wire.as_ref());
    }
    let (reports, all_passed) = run_each(opts, &loaded, versions.first(), wire.as_ref())?;
    write_reports(opts, &reports, versions.first(), wire.as_ref())?;
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
    crate::outln!("{passed}/{} scenarios passed ({checks} checks){skipped}", reports.len());
    Ok(all_passed)
}

/// The scenarios to run, every file loaded first (a broken file stops the run before anything
/// is reported), and how many do not apply on the one version run (left out).
fn load(opts: &Args, versions: &[Firmware]) -> Result<(Vec<Loaded>, usize)> {
    let files = scenarios::collect(&opts.paths)?;
    let mut loaded: Vec<Loaded> = files.iter().map(|f| scenarios::load(f)).collect::<Result<_>>()?;
    let named = |l: &Loaded| opts.paths.iter().any(|p| p == &l.path);
    for l in &loaded {
        // A scenario named on the command line (or any, in a matrix) whose premise holds on no
        // version run here is a mistake; one found in a directory is skipped as not applicable.
        if named(l) || versions.len() > 1 {
            scenarios::check_premise(l, versions)?;
        }
    }
    if versions.len() > 1 {
        return Ok((loaded, 0));
    }
    let before = loaded.len();
    loaded.retain(|l| {
        let fw = versions.first().cloned().unwrap_or_else(|| l.board.firmware());
        l.spec.firmware_constraint().is_none_or(|c| c.matches(&fw))
    });
    let mut not_applicable = before - loaded.len();
    let [only] = versions else {
        return Ok((loaded, not_applicable));
    };
    let mut kept = Vec::new();
    for mut l in loaded {
        match l.board.with_firmware(only.tag) {
            Ok(b) => {
                l.board = std::sync::Arc::new(b);
                kept.push(l);
            }
            // A board that does not exist on that tag: an error for a file named on the
            // command line, not applicable for one found in a directory.
            Err(e) if named(&l) => return Err(anyhow::anyhow!("{}: {e}", l.origin)),
            Err(_) => not_applicable += 1,
        }
    }
    Ok((kept, not_applicable))
}

/// Scenarios that act on the device itself cannot run over the wire: alone, that is an error;
/// among others, they are left out with their reason. Returns how many were.
fn keep_what_runs_over_the_wire(loaded: &mut Vec<Loaded>) -> Result<usize> {
    let mut refusals = Vec::new();
    loaded.retain(
        |l| match xiaozhi_sim::scenario::wire_plan::WirePlan::of(&l.spec, &l.origin, &l.text) {
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
    for e in &refusals {
        crate::errln!("skipped: {e}");
    }
    Ok(refusals.len())
}

/// Runs every scenario (on `version` when one is given), printing its record; the reports and
/// whether all passed.
fn run_each(
    opts: &Args,
    loaded: &[Loaded],
    version: Option<&Firmware>,
    wire: Option<&Wire<'_>>,
) -> Result<(Vec<ScenarioReport>, bool)> {
    let mut reports = Vec::new();
    let mut all_passed = true;
    for l in loaded {
        let report = match wire {
            Some(w) => w.run(l, opts.seed)?,
            None => {
                let (mut report, evidence) = scenarios::run_one(l, opts.seed, opts.out.is_some());
                if let Some(out) = &opts.out {
                    scenarios::write_evidence(out, l, &mut report, &evidence)?;
                }
                report
            }
        };
        if !opts.quiet || !report.passed {
            crate::out!("{}", report.to_text());
            crate::outln!();
        }
        if !report.passed {
            all_passed = false;
            crate::errln!(
                "FAILED: {} ({} of {} checks failed). Reproduce with: xiaozhi-twin run {}{}{} --seed {}",
                l.spec.name,
                report.failed_checks().count(),
                report.checks.len(),
                l.origin,
                wire.map_or(String::new(), Wire::flags),
                version.map_or(String::new(), |f| format!(" --firmware {}", f.tag)),
                report.seed
            );
        }
        reports.push(report);
    }
    Ok((reports, all_passed))
}

/// `--json`, `--html` and `--junit`.
fn write_reports(
    opts: &Args,
    reports: &[ScenarioReport],
    version: Option<&Firmware>,
    wire: Option<&Wire<'_>>,
) -> Result<()> {
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&reports)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    if let Some(path) = &opts.html {
        let html = crate::html::document("xiaozhi-twin run", reports)?;
        std::fs::write(path, html).with_context(|| format!("{}: cannot write the HTML report", path.display()))?;
    }
    if let Some(path) = &opts.junit {
        let command = match wire {
            Some(w) => format!("xiaozhi-twin run {{file}}{} --seed {{seed}}", w.flags()),
            None => "xiaozhi-twin run {file} --seed {seed}".to_string(),
        };
        let command = match version {
            Some(f) => command.replace(" --seed", &format!(" --firmware {} --seed", f.tag)),
            None => command,
        };
        let xml = crate::junit::document(reports, &command)?;
        std::fs::write(path, xml).with_context(|| format!("{}: cannot write the JUnit file", path.display()))?;
    }
    Ok(())
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
fn run_matrix(opts: &Args, loaded: &[Loaded], versions: &[Firmware], wire: Option<&Wire<'_>>) -> Result<bool> {
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
            let report = match wire {
                Some(w) => w.run(&on, opts.seed)?,
                None => scenarios::run_one(&on, opts.seed, false).0,
            };
            if report.passed {
                cells.push(Cell::Pass);
            } else {
                reference_failed |= i == reference;
                cells.push(Cell::Fail {
                    reason: version_matrix::reason(&report, fw),
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
    crate::out!("{}", matrix.to_text());
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&matrix)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the matrix", path.display()))?;
    }
    Ok(!reference_failed)
}

/// Every scenario on every listed board: the board matrix.
fn run_board_matrix(opts: &Args, loaded: &[Loaded]) -> Result<bool> {
    use crate::board_matrix::{self, BoardMatrix, BoardRow};
    let ids = board_matrix::board_list(&opts.board)?;
    let mut rows = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let board = crate::boards::load(id)?;
        let mut cells = Vec::new();
        for l in loaded {
            let fw = board.firmware();
            if let Some(c) = l.spec.firmware_constraint().filter(|c| !c.matches(&fw)) {
                cells.push(Cell::NotApplicable {
                    needs: format!("the premise needs firmware {} (the board runs {})", c.text(), fw.tag),
                });
                continue;
            }
            let mut on = l.clone();
            on.board = board.clone();
            let report = scenarios::run_one(&on, opts.seed, false).0;
            cells.push(if report.passed {
                Cell::Pass
            } else {
                Cell::Fail {
                    reason: board_matrix::reason(&report, &board),
                }
            });
        }
        if !opts.quiet && ids.len() > 20 && (i + 1) % 20 == 0 {
            crate::errln!("{} of {} boards run", i + 1, ids.len());
        }
        rows.push(BoardRow {
            board: id.clone(),
            codec: board_matrix::codec_words(&board),
            cells,
        });
    }
    let reference_failed = rows
        .first()
        .is_some_and(|r| r.cells.iter().any(|c| matches!(c, Cell::Fail { .. })));
    let matrix = BoardMatrix {
        scenarios: loaded
            .iter()
            .map(|l| {
                l.path
                    .file_stem()
                    .map_or_else(|| l.origin.clone(), |s| s.to_string_lossy().into_owned())
            })
            .collect(),
        reference: ids.first().cloned().unwrap_or_default(),
        rows,
    };
    crate::out!("{}", matrix.to_text());
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&matrix)?;
        std::fs::write(path, text + "\n").with_context(|| format!("{}: cannot write the matrix", path.display()))?;
    }
    Ok(!reference_failed)
}
