//! `xiaozhi-twin tools`: the exact `tools/list` result objects a board sends, every page.

use std::io::Write;

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
    let mut out = std::io::stdout().lock();
    for page in mcp.pages(opts.with_user_tools) {
        match page {
            ToolsPage::Page { result, .. } => {
                out.write_all(&result)?;
                out.write_all(b"\n")?;
            }
            ToolsPage::Error { message } => {
                bail!("tools/list fails on this board: {}", String::from_utf8_lossy(&message))
            }
        }
    }
    Ok(true)
}
