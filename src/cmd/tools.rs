//! `xiaozhi-twin tools`: the exact `tools/list` result objects a board sends, every page.

use anyhow::{Result, bail};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::mcp::ToolsPage;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;

use crate::args::BoardArgs;

/// Print the exact `tools/list` result object(s) a board sends, one page per line.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub board: BoardArgs,
    /// List user-only tools too (`withUserTools: true`).
    #[arg(long)]
    pub with_user_tools: bool,
}

pub fn run(opts: &Args) -> Result<bool> {
    let spec = opts.board.load()?;
    let mut device = Device::new(spec, WorldSpec::conformance(), 0);
    device.set_trace(false);
    device.power_on(SimTime::ZERO);
    let Some(mcp) = device.mcp() else {
        bail!("the board did not boot")
    };
    // Every page first: a board whose list fails on a later page prints nothing (exit 2).
    let mut text = Vec::new();
    for page in mcp.pages(opts.with_user_tools) {
        match page {
            ToolsPage::Page { result, .. } => {
                text.extend_from_slice(&result);
                text.push(b'\n');
            }
            ToolsPage::Error { message } => {
                bail!(
                    "tools/list fails on this board: {}",
                    crate::out::elide(&String::from_utf8_lossy(&message), 200)
                )
            }
        }
    }
    crate::out::stdout_bytes(&text);
    Ok(true)
}
