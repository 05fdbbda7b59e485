//! The firmware's MCP tool layer (`main/mcp_server.{h,cc}`, docs/reference/firmware.md §3–4).
//!
//! * [`strings`]: every wire string, once.
//! * [`property`]: parameters, their schema and argument coercion.
//! * [`tool`]: tools, their JSON and the result encoding.
//! * [`server`]: the registry and the receive-task half of `ParseMessage`.
//!
//! Knows nothing about hardware, scheduling or time: callbacks are run by the device model.

pub mod property;
pub mod server;
pub mod strings;
pub mod tool;

pub use crate::trace::DropReason;
pub use property::{Arguments, Property, PropertyType, PropertyValue};
pub use server::{McpServer, Pages, Received, ToolsPage, Vision};
pub use tool::{McpTool, ReturnValue, ToolAction};
