//! `xiaozhi-twin boards`: the shipped boards and what their catalogues hold.

use anyhow::Result;

use crate::boards;

pub fn run() -> Result<()> {
    for id in boards::shipped_ids() {
        let spec = boards::load(id)?;
        println!("{:<32} {}", spec.name, spec.summary);
    }
    Ok(())
}
