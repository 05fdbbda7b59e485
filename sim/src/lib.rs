//! xiaozhi-sim — the deterministic, sans-IO twin of a xiaozhi-esp32 device, seen from its MCP
//! tool layer.
//!
//! Contract: the firmware's behaviour (`FIRMWARE.md`), byte for byte, quirks included. The crate
//! has no tokio, no wall clock, no threads and one seeded RNG (ChaCha8): the same board, inputs
//! and seed give the same bytes out. Time is virtual ([`time::SimTime`]) and is handed in by
//! whoever drives a [`device::Device`].
//!
//! Map (each module names the firmware file it mirrors):
//! * [`cjson`] — the cJSON 1.7.19 dialect (parse, case-insensitive lookup, print).
//! * [`mcp`] — `McpServer`, `McpTool`, `Property`, every wire string.
//! * [`device`] — one board: boot, receive task, main-task batches, callbacks, reboot, power.
//! * [`hw`] — virtual hardware: NVS, backlight, display, camera.
//! * [`board`], [`world`] — data: what a board is, what surrounds it.
//! * [`harness`] — the owner of virtual time for offline runs (replay, scenarios).
//! * [`trace`], [`time`], [`spec`] — events, virtual time, data-file loading.

#![warn(missing_docs, unreachable_pub)]

pub mod audio;
pub mod backend;
pub mod board;
#[cfg(feature = "bounds")]
pub mod bounds;
pub mod cjson;
pub mod device;
pub mod fault;
pub mod harness;
pub mod hw;
pub mod loopback;
pub mod mcp;
pub mod scenario;
pub mod spec;
pub mod time;
pub mod trace;
pub mod world;
