//! The board matrix of `run --board A,B,… | all`: every scenario on every listed board instead
//! of its own (pass / FAIL / n/a), and for each cell that differs from the first board's the
//! one-line reason: what failed there, and the board's codec law or what the twin does not
//! model for it (docs/boards.md, "Every upstream build").

use std::sync::Arc;

use anyhow::Result;
use serde::Serialize;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::scenario::record::{Expectation, ScenarioReport};

use crate::boards;
use crate::version_matrix::Cell;

/// One board's row: a cell per scenario.
#[derive(Clone, Debug, Serialize)]
pub struct BoardRow {
    /// The board id as `--board` takes it.
    pub board: String,
    /// The codec class and law the board runs.
    pub codec: String,
    /// One cell per scenario, in the order of [`BoardMatrix::scenarios`].
    pub cells: Vec<Cell>,
}

/// The whole matrix (rows are boards: there are many more boards than scenarios).
#[derive(Clone, Debug, Serialize)]
pub struct BoardMatrix {
    /// The scenario stems, in run order.
    pub scenarios: Vec<String>,
    /// The board the others are compared with (the first listed).
    pub reference: String,
    /// One row per board.
    pub rows: Vec<BoardRow>,
}

/// `--board` values as board ids: `all` is the twin's boards, then every upstream build no
/// hand-written board stands for.
pub fn board_list(given: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for g in given {
        if g == "all" {
            out.extend(boards::shipped_ids().into_iter().map(String::from));
            out.extend(
                boards::UPSTREAM
                    .iter()
                    .filter(|(id, _, _)| boards::hand_written_for(id).is_none())
                    .map(|(id, _, _)| id.to_string()),
            );
        } else {
            boards::load(g)?;
            out.push(g.clone());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|b| seen.insert(b.clone()));
    Ok(out)
}

/// The codec a board runs, in a few words.
pub fn codec_words(spec: &BoardSpec) -> String {
    let class = spec
        .upstream
        .as_ref()
        .and_then(|u| u.codec.as_ref())
        .map_or_else(|| spec.audio.codec.class_name().to_string(), |c| c.class.clone());
    if class == spec.audio.codec.class_name() {
        class
    } else {
        format!("{class} as {}", spec.audio.codec.class_name())
    }
}

/// The reason a scenario failed on `board`: the first failed expectation, and what about the
/// board explains it (its codec law for a level, what the twin does not model for it).
pub fn reason(report: &ScenarioReport, board: &Arc<BoardSpec>) -> String {
    let Some(check) = report.failed_checks().next() else {
        return "passed".into();
    };
    let observed: String = format!("step {}: {} — {}", check.step, check.what, check.detail)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let observed: String = observed.chars().take(160).collect();
    // What the listener hears (levels, verdicts, a claim heard or not) is the codec law's.
    let acoustic = matches!(check.kind, Expectation::Sound | Expectation::Heard | Expectation::Claim);
    if acoustic {
        return format!("{observed} — codec {}: {}", codec_words(board), board.audio.codec.law());
    }
    match board.upstream.as_ref().and_then(|u| u.unmodelled.first()) {
        Some(n) => format!("{observed} — (the board file notes: {n})"),
        None => observed,
    }
}

impl BoardMatrix {
    /// The table and the reasons, as printed.
    pub fn to_text(&self) -> String {
        let width = self.rows.iter().map(|r| r.board.len()).max().unwrap_or(5).max(5);
        let col = self.scenarios.iter().map(String::len).max().unwrap_or(4).clamp(4, 28);
        let mut out = format!("{:<width$}", "board");
        for s in &self.scenarios {
            let short: String = s.chars().take(col).collect();
            out.push_str(&format!("  {short:>col$}"));
        }
        out.push_str("  codec\n");
        let word = |c: &Cell| match c {
            Cell::Pass => "pass",
            Cell::Fail { .. } => "FAIL",
            Cell::NotApplicable { .. } => "n/a",
        };
        for row in &self.rows {
            out.push_str(&format!("{:<width$}", row.board));
            for c in &row.cells {
                out.push_str(&format!("  {:>col$}", word(c)));
            }
            out.push_str(&format!("  {}\n", row.codec));
        }
        let (passed, failed, na) = self
            .rows
            .iter()
            .flat_map(|r| &r.cells)
            .fold((0, 0, 0), |(p, f, n), c| match c {
                Cell::Pass => (p + 1, f, n),
                Cell::Fail { .. } => (p, f + 1, n),
                Cell::NotApplicable { .. } => (p, f, n + 1),
            });
        out.push_str(&format!(
            "\n{} boards × {} scenarios: {passed} pass, {failed} FAIL, {na} n/a\n",
            self.rows.len(),
            self.scenarios.len()
        ));
        let mut first = true;
        for row in &self.rows {
            for (s, c) in self.scenarios.iter().zip(&row.cells) {
                let why = match c {
                    Cell::Fail { reason } => reason.clone(),
                    Cell::NotApplicable { needs } => format!("not applicable: {needs}"),
                    Cell::Pass => continue,
                };
                if first {
                    out.push_str("\nwhy, per cell that is not a pass:\n");
                    first = false;
                }
                out.push_str(&format!("  {s} on {}: {why}\n", row.board));
            }
        }
        out
    }
}
