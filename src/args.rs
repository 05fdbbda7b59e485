//! Argument parsers and argument groups shared by several commands.

use std::sync::Arc;

use anyhow::Result;
use xiaozhi_sim::board::BoardSpec;

/// `1500ms`, `2s`, `1m` as a wall-clock duration.
pub fn parse_std_duration(s: &str) -> Result<std::time::Duration, String> {
    xiaozhi_sim::time::parse_duration(s)
        .map(|d| std::time::Duration::from_micros(d.as_micros()))
        .map_err(|e| e.to_string())
}

/// A backend's WebSocket URL as the firmware dials it: `ws://HOST:PORT/PATH` (the device parses
/// it with `device::url::parse_url`; `wss://` needs TLS, which the twin does not speak).
pub fn parse_ws_url(s: &str) -> Result<String, String> {
    if s.starts_with("ws://") && xiaozhi_sim::device::url::parse_url(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not a WebSocket URL: expected ws://HOST:PORT/PATH"))
    }
}

/// `--board` and `--firmware`: which board a command runs, on which firmware version. Flattened
/// into a command's `Args` (`#[command(flatten)]`), where the help lists them; a command whose
/// wording or default differs changes the one field with `#[command(mut_arg("board", …))]`.
#[derive(clap::Args, Clone, Debug)]
pub struct BoardArgs {
    /// Board id or path to a board YAML file.
    #[arg(long)]
    pub board: String,
    /// Firmware version to run (an upstream tag such as 2.4.2, 2.2.6, 1.9.4, 1.8.9; overrides
    /// the board file's `firmware.version`).
    #[arg(long, value_name = "VERSION")]
    pub firmware: Option<String>,
}

impl BoardArgs {
    /// The board (`crate::boards::load`), on `--firmware` when given.
    pub fn load(&self) -> Result<Arc<BoardSpec>> {
        crate::boards::load_as(&self.board, self.firmware.as_deref())
    }
}
