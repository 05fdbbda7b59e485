//! `xiaozhi-twin check-bounds`: the parameter-bound promises of `xiaozhi_sim::bounds` on any
//! board, shipped or a user's own file, as a short report (docs/reference/firmware.md §2.3, §4.5).
//!
//! Every integer parameter must accept exactly the JSON numbers whose `valueint` is in range
//! and store them; rejected calls must answer the firmware's exact message and change nothing;
//! wrong JSON types must give `Missing valid argument: <name>` or the default; argument keys must
//! match case-insensitively, first match wins. A broken promise is shown with the smallest input
//! proptest shrank it to. Deterministic: same board and case count, same report.

use anyhow::Result;
use xiaozhi_sim::bounds::{self, Settings};

use crate::boards;

/// Check the parameter-bound promises on every callable tool of a board (property tests).
///
/// Integer parameters must accept exactly the JSON numbers whose cJSON `valueint` is in
/// range and store them; rejected calls must answer the firmware's exact message and change
/// nothing; wrong JSON types must give `Missing valid argument: <name>` or the default;
/// argument keys match case-insensitively, first match wins. Works on user board files too.
/// Exit status 0 all promises hold, 1 one is broken (the shrunk input is printed), 2 the board
/// cannot be used. Deterministic: same board and --cases, same report.
#[derive(clap::Args)]
pub struct Args {
    /// Board id or path to a board YAML file.
    #[arg(long)]
    pub board: String,
    /// Generated cases per property.
    #[arg(long, default_value_t = 256)]
    pub cases: u32,
}

/// Runs every promise on every callable parameter of the board with `--cases` generated cases
/// each. `Ok(false)` when a promise does not hold; `Err` when the board cannot be loaded.
pub fn run(opts: &Args) -> Result<bool> {
    let board = &opts.board;
    let spec = boards::load(board)?;
    let settings = Settings {
        cases: opts.cases.max(1),
        ..Settings::default()
    };
    let report = bounds::check_board(spec, &settings);
    crate::out!("{}", report.to_text());
    if !report.passed() {
        crate::outln!(
            "reproduce with: xiaozhi-twin check-bounds --board {board} --cases {}",
            settings.cases
        );
    }
    Ok(report.passed())
}
