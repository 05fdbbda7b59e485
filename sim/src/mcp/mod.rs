//! The firmware's MCP tool layer (`main/mcp_server.{h,cc}`, FIRMWARE.md §3–4).
//!
//! * [`wire`]: every wire string, once.
//! * [`property`]: parameters, their schema and argument coercion.
//! * [`tool`]: tools, their JSON and the result encoding.
//! * [`server`]: the registry and the receive-task half of `ParseMessage`.
//!
//! Knows nothing about hardware, scheduling or time: callbacks are run by the device model.

pub mod property;
pub mod server;
pub mod tool;
pub mod wire;

pub use property::{Property, PropertyType, PropertyValue};
pub use server::{DropReason, McpServer, Pages, Received, ToolsPage, Vision};
pub use tool::{McpTool, ReturnValue, ToolAction};
