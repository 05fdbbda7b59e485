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

#[rustfmt::skip]
#[path = "boards_upstream.rs"]
mod generated;
pub use generated::{UPSTREAM, UPSTREAM_COMMIT};

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

/// The generated board of an upstream build id (`upstream/<id>` or the bare build name).
pub fn upstream(id: &str) -> Option<(&'static str, &'static str, &'static str)> {
    let id = id.strip_prefix("upstream/").unwrap_or(id);
    UPSTREAM.iter().copied().find(|(b, _, _)| *b == id)
}

fn generated(rel: &str, text: &str) -> Result<Arc<BoardSpec>> {
    Ok(Arc::new(BoardSpec::from_yaml(&format!("boards/upstream/{rel}"), text)?))
}

/// The hand-written board that stands for an upstream build, if one does (its BOARD_NAME is the
/// build's name).
pub fn hand_written_for(build: &str) -> Option<&'static str> {
    // The shipped files' BOARD_NAMEs, read once (the duplex variant reports the simplex name).
    static NAMES: std::sync::OnceLock<Vec<(String, &'static str)>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| {
            SHIPPED
                .iter()
                .filter(|(id, _)| !id.ends_with("-duplex"))
                .filter_map(|(id, text)| Some((shipped(id, text).ok()?.name.clone(), *id)))
                .collect()
        })
        .iter()
        .find_map(|(name, id)| (name == build).then_some(*id))
}

/// Resolves `--board`: a shipped board id, a path to a YAML file, the BOARD_NAME of a shipped
/// build (e.g. `lichuang-c3-dev` for `lckfb/szpi-esp32c3`), an upstream build id (the generated
/// board, `boards/upstream/`), or `upstream/<build>` for the generated board even where a
/// hand-written one stands for the build.
pub fn load(board: &str) -> Result<Arc<BoardSpec>> {
    if let Some((id, text)) = SHIPPED.iter().find(|(id, _)| *id == board) {
        return shipped(id, text);
    }
    if board.ends_with(".yaml") || board.ends_with(".yml") || Path::new(board).is_file() {
        return Ok(Arc::new(BoardSpec::load(Path::new(board))?));
    }
    if board.starts_with("upstream/")
        && let Some((_, rel, text)) = upstream(board)
    {
        return generated(rel, text);
    }
    if let Some(id) = hand_written_for(board) {
        return load(id);
    }
    if let Some((_, rel, text)) = upstream(board) {
        return generated(rel, text);
    }
    bail!(
        "unknown board `{board}`; the twin's boards: {}; and the {} upstream builds (`xiaozhi-twin boards`), or give a path to a board YAML file",
        shipped_ids().join(", "),
        UPSTREAM.len()
    )
}
