//! `xiaozhi-twin tools`: the exact `tools/list` result objects a board sends, every page.

use std::io::Write;

use anyhow::{Result, bail};
use xiaozhi_sim::device::Device;
use xiaozhi_sim::mcp::ToolsPage;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::WorldSpec;

use crate::boards;

pub fn run(board: &str, with_user_tools: bool) -> Result<()> {
    let spec = boards::load(board)?;
    let mut device = Device::new(spec, WorldSpec::conformance(), 0);
    device.set_trace(false);
    device.power_on(SimTime::ZERO);
    let Some(mcp) = device.mcp() else {
        bail!("the board did not boot")
    };
    let mut out = std::io::stdout().lock();
    for page in mcp.pages(with_user_tools) {
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
    Ok(())
}
