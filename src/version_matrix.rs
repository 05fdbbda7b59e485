//! The version matrix of `run --firmware A,B,…`: every scenario on every listed firmware version
//! (pass / fail / not applicable), and for each cell that differs from the newest version's the
//! one-line reason — what the device answered, and which firmware switch explains it.

use serde::Serialize;
use xiaozhi_sim::firmware::{AssetsTool, CallPath, Firmware, StopTail, ThemeTool};
use xiaozhi_sim::mcp::strings;
use xiaozhi_sim::scenario::record::{Check, Expectation, FrameCount, ScenarioReport};
use xiaozhi_sim::scenario::reply::{reply_error, reply_text};

/// One cell: a scenario on a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Cell {
    /// Every expectation held.
    Pass,
    /// An expectation failed: the first one, and why on this version.
    Fail { reason: String },
    /// The scenario's `firmware:` premise excludes the version.
    NotApplicable { needs: String },
}

impl Cell {
    fn word(&self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Fail { .. } => "FAIL",
            Cell::NotApplicable { .. } => "n/a",
        }
    }
}

/// One scenario's row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The scenario file's stem (`13-hidden-is-not-forbidden`).
    pub scenario: String,
    /// The file as given.
    pub file: String,
    /// One cell per version, in the order of [`Matrix::versions`].
    pub cells: Vec<Cell>,
}

/// A cell that differs from the reference version's, with its reason.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The scenario file's stem.
    pub scenario: String,
    /// The version of the cell.
    pub version: String,
    /// `13-hidden-is-not-forbidden on 1.9.4: …` without the prefix.
    pub reason: String,
}

/// The whole matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    /// The versions, as listed (each a modelled tag).
    pub versions: Vec<String>,
    /// The version the others are compared with (the newest listed).
    pub reference: String,
    /// One row per scenario, in run order.
    pub rows: Vec<Row>,
    /// Every cell that differs from the reference column, with its reason.
    pub changes: Vec<Change>,
}

impl Matrix {
    /// Builds the change list from the rows (`reference` is an index into `versions`).
    pub fn new(versions: Vec<String>, reference: usize, rows: Vec<Row>) -> Matrix {
        let mut changes = Vec::new();
        for row in &rows {
            let base = &row.cells[reference];
            for (v, cell) in versions.iter().zip(&row.cells) {
                if std::mem::discriminant(cell) == std::mem::discriminant(base) {
                    continue;
                }
                let reason = match cell {
                    Cell::Fail { reason } => reason.clone(),
                    Cell::NotApplicable { needs } if needs.starts_with("board ") => {
                        format!("not applicable: {needs} (as its board file describes it)")
                    }
                    Cell::NotApplicable { needs } => format!("not applicable: the premise needs firmware {needs}"),
                    Cell::Pass => match base {
                        Cell::Fail { reason } => format!("passes here; on {} it fails: {reason}", versions[reference]),
                        _ => "passes here".to_string(),
                    },
                };
                changes.push(Change {
                    scenario: row.scenario.clone(),
                    version: v.clone(),
                    reason,
                });
            }
        }
        Matrix {
            reference: versions[reference].clone(),
            versions,
            rows,
            changes,
        }
    }

    /// The table and the reasons, as printed.
    pub fn to_text(&self) -> String {
        let width = self.rows.iter().map(|r| r.scenario.len()).max().unwrap_or(8).max(8);
        let col = self.versions.iter().map(String::len).max().unwrap_or(5).max(5);
        let mut out = format!("{:<width$}", "scenario");
        for v in &self.versions {
            out.push_str(&format!("  {v:>col$}"));
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!("{:<width$}", row.scenario));
            for c in &row.cells {
                out.push_str(&format!("  {:>col$}", c.word()));
            }
            out.push('\n');
        }
        if self.changes.is_empty() {
            out.push_str(&format!("\nno cell differs from {}\n", self.reference));
        } else {
            let n = self.changes.len();
            out.push_str(&format!(
                "\n{n} {} from {} (the newest listed):\n",
                if n == 1 { "cell differs" } else { "cells differ" },
                self.reference
            ));
            for c in &self.changes {
                out.push_str(&format!("  {} on {}: {}\n", c.scenario, c.version, c.reason));
            }
        }
        out
    }
}

/// The reason a report failed on `firmware`: the first failed expectation, what the device
/// answered, and the firmware switch behind it when one explains it. Read from the check's
/// [`Expectation`] and the device's answers (an error reply's message, a result's JSON), never
/// from the words of the check.
pub fn reason(report: &ScenarioReport, firmware: &Firmware) -> String {
    let Some(check) = report.failed_checks().next() else {
        return "passed".into();
    };
    if let Expectation::Listed(tool) = &check.kind {
        return format!("`{tool}` is not listed — {}", why_absent(tool, firmware));
    }
    let step = report.steps.iter().find(|s| s.n == check.step);
    let replies: Vec<&[u8]> = step.map_or(Vec::new(), |s| s.replies.iter().map(|r| r.as_bytes()).collect());
    let errors: Vec<String> = replies
        .iter()
        .filter_map(|r| reply_error(r))
        .map(|m| String::from_utf8_lossy(&m).into_owned())
        .collect();
    if let Some(name) = errors.iter().find_map(|m| m.strip_prefix(strings::ERR_UNKNOWN_TOOL)) {
        return format!("`{}{name}` — {}", strings::ERR_UNKNOWN_TOOL, why_absent(name, firmware));
    }
    if errors.iter().any(|m| m == strings::ERR_INVALID_STACK_SIZE) {
        return format!(
            "`{}` — {} checks `params.stackSize` before the tool lookup",
            strings::ERR_INVALID_STACK_SIZE,
            firmware.line.range()
        );
    }
    if let Some(why) = why_voice(check, firmware) {
        let observed = one_line(&format!("step {}: {} — {}", check.step, check.what, check.detail), 160);
        return format!("{observed} — {why}");
    }
    // A result whose JSON says `"success": false` (a camera tool's failure as text).
    let failed_result = replies
        .iter()
        .filter_map(|r| reply_text(r))
        .any(|t| serde_json::from_str::<serde_json::Value>(&t).is_ok_and(|v| v["success"] == serde_json::json!(false)));
    let called_set_theme = step.is_some_and(|s| {
        s.sent.iter().any(|r| {
            serde_json::from_str::<serde_json::Value>(r).is_ok_and(|v| v["params"]["name"] == strings::TOOL_SET_THEME)
        })
    });
    let why = match firmware.call_path {
        CallPath::MainTaskSends if check.kind == Expectation::NoReplyWithin => {
            Some("the reply is sent from the main task at once, before the reboot or upgrade it queued runs")
        }
        CallPath::MainTaskSends if check.kind == Expectation::Order => {
            Some("the tool's reply is sent from inside its main-task task, so replies leave in arrival order")
        }
        CallPath::Thread if check.kind == Expectation::Order => {
            Some("the tool runs in its own thread at once and its reply leaves in batch 1 (arrival order)")
        }
        _ if failed_result => Some("1.x returns camera failures as text results, not errors"),
        _ if firmware.theme_tool == ThemeTool::Named && called_set_theme => {
            Some("1.x set_theme answers true whatever the name")
        }
        _ => None,
    };
    let observed = one_line(&format!("step {}: {} — {}", check.step, check.what, check.detail), 160);
    match why {
        Some(w) => format!("{observed} — {w}"),
        None => observed,
    }
}

/// The voice switches behind a changed voice cell: what became of the speech queued at
/// `tts stop` (or at an abort), docs/reference/voice.md §7.
fn why_voice(check: &Check, firmware: &Firmware) -> Option<String> {
    let tail = firmware.stop_tail;
    // The device sent `listen start` (auto) where the scenario expected it later.
    let early_listen = matches!(&check.kind, Expectation::ListenSent(sent) if sent.iter().any(|c| c == "start auto"));
    if early_listen && firmware.abort_silences {
        return Some(
            "1.7.x silences the speech at the abort (aborted_), so the server's tts stop finds the playback idle and listen start goes out at once"
                .into(),
        );
    }
    if early_listen && tail == StopTail::DrainBlocking {
        return Some(
            "the main task is blocked while the playback drains (2.2.2–2.3.0), so listen start goes out within this step instead of the next"
                .into(),
        );
    }
    let cuts = matches!(tail, StopTail::Discard | StopTail::DiscardWhileWaiting);
    if check.kind == Expectation::Frames(FrameCount::Played) || early_listen {
        return Some(tail.describe().into());
    }
    if cuts && check.kind == Expectation::Heard {
        return Some(format!(
            "the speech before was cut at its tts stop, which moves its measured level: {}",
            tail.describe()
        ));
    }
    None
}

fn why_absent(tool: &str, firmware: &Firmware) -> String {
    let user_only = [
        strings::TOOL_GET_SYSTEM_INFO,
        strings::TOOL_REBOOT,
        strings::TOOL_UPGRADE_FIRMWARE,
        strings::TOOL_SCREEN_GET_INFO,
        strings::TOOL_SCREEN_SNAPSHOT,
        strings::TOOL_SCREEN_PREVIEW_IMAGE,
        strings::TOOL_ASSETS_SET_DOWNLOAD_URL,
    ];
    if user_only.contains(&tool) && !firmware.user_only_tools {
        return "this version has no user-only tools".into();
    }
    if tool == strings::TOOL_ASSETS_SET_DOWNLOAD_URL && firmware.assets_tool == AssetsTool::WithAssetsPartition {
        return "this version registers it only with a valid assets partition".into();
    }
    if tool == strings::TOOL_SET_THEME && firmware.theme_tool == ThemeTool::Named {
        return "1.x registers it only on a display with a theme name (LCD), not on OLEDs".into();
    }
    format!(
        "the board's tools on {} do not include it (its board file differs by version)",
        firmware.label()
    )
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_the_cells_that_differ_from_the_reference() {
        let fail = |r: &str| Cell::Fail { reason: r.into() };
        let rows = vec![
            Row {
                scenario: "a".into(),
                file: "a.yaml".into(),
                cells: vec![fail("x"), Cell::Pass],
            },
            Row {
                scenario: "b".into(),
                file: "b.yaml".into(),
                cells: vec![Cell::Pass, Cell::Pass],
            },
        ];
        let m = Matrix::new(vec!["1.9.4".into(), "2.4.2".into()], 1, rows);
        assert_eq!(m.reference, "2.4.2");
        assert_eq!(m.changes.len(), 1);
        assert_eq!(
            (m.changes[0].scenario.as_str(), m.changes[0].reason.as_str()),
            ("a", "x")
        );
        let text = m.to_text();
        assert!(text.contains("a on 1.9.4: x"), "{text}");
        assert!(text.contains("FAIL") && text.contains("pass"), "{text}");
    }

    #[test]
    fn unknown_tools_are_explained_by_the_switch_that_removes_them() {
        let fw = Firmware::parse("1.9.4").unwrap();
        assert_eq!(
            why_absent(strings::TOOL_REBOOT, &fw),
            "this version has no user-only tools"
        );
        assert!(why_absent(strings::TOOL_SET_THEME, &fw).contains("theme name"));
    }
}
