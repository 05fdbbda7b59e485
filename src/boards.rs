//! The boards the binary knows: the shipped `boards/**/*.yaml` (embedded, so the binary works
//! from any directory), plus any YAML file given by path.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use xiaozhi_sim::board::BoardSpec;

/// Shipped board files: (id = path under `boards/` without `.yaml`, text).
pub const SHIPPED: &[(&str, &str)] = &[
    ("bread-compact-wifi", include_str!("../boards/bread-compact-wifi.yaml")),
    (
        "bread-compact-wifi-128x64",
        include_str!("../boards/bread-compact-wifi-128x64.yaml"),
    ),
    (
        "bread-compact-wifi-duplex",
        include_str!("../boards/bread-compact-wifi-duplex.yaml"),
    ),
    (
        "bread-compact-wifi-lcd",
        include_str!("../boards/bread-compact-wifi-lcd.yaml"),
    ),
    (
        "bread-compact-wifi-s3cam",
        include_str!("../boards/bread-compact-wifi-s3cam.yaml"),
    ),
    ("otto-robot", include_str!("../boards/otto-robot.yaml")),
    (
        "waveshare/esp32-s3-audio-board",
        include_str!("../boards/waveshare/esp32-s3-audio-board.yaml"),
    ),
    ("lckfb/szpi-esp32c3", include_str!("../boards/lckfb/szpi-esp32c3.yaml")),
];

/// Ids of the shipped boards, in order.
pub fn shipped_ids() -> Vec<&'static str> {
    SHIPPED.iter().map(|(id, _)| *id).collect()
}

fn shipped(id: &str, text: &str) -> Result<Arc<BoardSpec>> {
    Ok(Arc::new(BoardSpec::from_yaml(&format!("boards/{id}.yaml"), text)?))
}

/// [`load`], then `--firmware` (when given) replaces the board file's firmware version.
pub fn load_as(board: &str, firmware: Option<&str>) -> Result<Arc<BoardSpec>> {
    let spec = load(board)?;
    match firmware {
        None => Ok(spec),
        Some(version) => Ok(Arc::new(spec.with_firmware(version)?)),
    }
}

/// Resolves `--board`: a shipped board id, a path to a YAML file, or the BOARD_NAME of a
/// shipped build (e.g. `lichuang-c3-dev` for `lckfb/szpi-esp32c3`).
pub fn load(board: &str) -> Result<Arc<BoardSpec>> {
    if let Some((id, text)) = SHIPPED.iter().find(|(id, _)| *id == board) {
        return shipped(id, text);
    }
    if board.ends_with(".yaml") || board.ends_with(".yml") || Path::new(board).is_file() {
        return Ok(Arc::new(BoardSpec::load(Path::new(board))?));
    }
    for (id, text) in SHIPPED {
        let spec = shipped(id, text)?;
        if spec.name == board && !id.ends_with("-duplex") {
            return Ok(spec);
        }
    }
    bail!(
        "unknown board `{board}`; known boards: {} (or give a path to a board YAML file)",
        shipped_ids().join(", ")
    )
}
