//! The boards the binary knows: the shipped `boards/*.yaml` (embedded, so the binary works from
//! any directory), plus any YAML file given by path.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use xiaozhi_sim::board::BoardSpec;

/// Shipped board files: (id, file name, text).
pub const SHIPPED: &[(&str, &str)] = &[("bread-compact-wifi", include_str!("../boards/bread-compact-wifi.yaml"))];

/// Ids of the shipped boards, in order.
pub fn shipped_ids() -> Vec<&'static str> {
    SHIPPED.iter().map(|(id, _)| *id).collect()
}

/// Resolves `--board`: a path to a YAML file, or the id of a shipped board.
pub fn load(board: &str) -> Result<Arc<BoardSpec>> {
    let looks_like_path = board.ends_with(".yaml") || board.ends_with(".yml") || board.contains('/');
    if looks_like_path {
        let path = Path::new(board);
        return Ok(Arc::new(BoardSpec::load(path)?));
    }
    match SHIPPED.iter().find(|(id, _)| *id == board) {
        Some((id, text)) => Ok(Arc::new(BoardSpec::from_yaml(&format!("boards/{id}.yaml"), text)?)),
        None => bail!(
            "unknown board `{board}`; known boards: {} (or give a path to a board YAML file)",
            shipped_ids().join(", ")
        ),
    }
}
