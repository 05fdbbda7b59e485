//! Board facts that change with the firmware version: where the upstream board files differ
//! between tags (otto-robot's 16-tool controller before v2.0.5, its camera from v2.1.0, its
//! forced `dark` theme missing in v2.2.6), a board file says so in `by_firmware:` entries.
//!
//! Each entry has a `firmware:` constraint and replaces only what it names; the first entry that
//! matches the board's version wins. The tools themselves are still registered by the firmware's
//! rules (`device::catalogue`): the entries are data, not per-version tool lists of the twin.

use std::sync::Arc;

use serde::Deserialize;

use crate::board::{BoardSpec, BoardTool, CameraSpec};
use crate::firmware::{Constraint, Firmware};

/// One `by_firmware:` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirmwareOverride {
    /// Which versions the entry holds for (`["<2.0.5"]`, `["=2.2.6"]`).
    pub firmware: Vec<String>,
    /// The board constructor's tools on those versions.
    #[serde(default)]
    pub board_tools: Option<Vec<BoardTool>>,
    /// The board constructs no camera on those versions.
    #[serde(default)]
    pub no_camera: bool,
    /// The board constructor sets no theme at boot on those versions.
    #[serde(default)]
    pub no_boot_theme: bool,
}

/// What the entries may replace, as the board file states it for its own version.
#[derive(Clone, Debug)]
pub(crate) struct BaseFacts {
    board_tools: Vec<BoardTool>,
    camera: Option<CameraSpec>,
    boot_theme: Option<String>,
}

impl BoardSpec {
    /// Remembers the facts as written, then applies the entry matching `firmware.version`.
    /// Returns the offending field and why when a constraint does not parse.
    pub(crate) fn resolve_by_firmware(&mut self) -> Result<(), (String, String)> {
        let base = self.base.get_or_insert_with(|| {
            Arc::new(BaseFacts {
                board_tools: self.board_tools.clone(),
                camera: self.camera.clone(),
                boot_theme: self.display.boot_theme.clone(),
            })
        });
        let base = Arc::clone(base);
        self.board_tools = base.board_tools.clone();
        self.camera = base.camera.clone();
        self.display.boot_theme = base.boot_theme.clone();
        let firmware =
            Firmware::parse(&self.firmware.version).map_err(|e| ("firmware.version".into(), e.to_string()))?;
        // Reports and summaries name the bare tag (`v1.9.4` in a file is 1.9.4).
        self.firmware.version = firmware.tag.to_string();
        let mut chosen = None;
        for (i, o) in self.by_firmware.iter().enumerate() {
            let c =
                Constraint::parse(&o.firmware).map_err(|e| (format!("by_firmware[{i}].firmware"), e.to_string()))?;
            if chosen.is_none() && c.matches(&firmware) {
                chosen = Some(o.clone());
            }
        }
        if let Some(o) = chosen {
            if let Some(tools) = o.board_tools {
                self.board_tools = tools;
            }
            if o.no_camera {
                self.camera = None;
            }
            if o.no_boot_theme {
                self.display.boot_theme = None;
            }
        }
        Ok(())
    }

    /// The board as it is on every version its entries name, for validation: one spec per entry
    /// that replaces the tools, with the index of the entry.
    pub(crate) fn override_variants(&self) -> Vec<(usize, BoardSpec)> {
        self.by_firmware
            .iter()
            .enumerate()
            .filter_map(|(i, o)| {
                let tools = o.board_tools.clone()?;
                let mut spec = self.clone();
                spec.board_tools = tools;
                spec.by_firmware = Vec::new();
                Some((i, spec))
            })
            .collect()
    }
}
