//! `xiaozhi-twin boards`: the shipped boards — the id `--board` takes, the BOARD_NAME the device
//! reports (`get_system_info`'s `board.name`), and a one-line summary.

use anyhow::Result;

use crate::boards;

/// List the shipped boards.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: &Args) -> Result<bool> {
    let rows = boards::shipped_ids()
        .into_iter()
        .map(|id| Ok((id, boards::load(id)?)))
        .collect::<Result<Vec<_>>>()?;
    let id_width = rows
        .iter()
        .map(|(id, _)| id.len())
        .max()
        .unwrap_or(0)
        .max("--board".len());
    let name_width = rows
        .iter()
        .map(|(_, s)| s.name.len())
        .max()
        .unwrap_or(0)
        .max("BOARD_NAME".len());
    println!("{:<id_width$}  {:<name_width$}  summary", "--board", "BOARD_NAME");
    for (id, spec) in rows {
        println!("{id:<id_width$}  {:<name_width$}  {}", spec.name, spec.summary);
    }
    Ok(true)
}
