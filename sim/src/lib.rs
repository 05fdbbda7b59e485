//! xiaozhi-sim — the deterministic, sans-IO twin of a xiaozhi-esp32 device, seen from its MCP
//! tool layer.
//!
//! Contract: the firmware's behaviour (`FIRMWARE.md`), byte for byte, quirks included. The crate
//! has no tokio, no wall clock, no threads and one seeded RNG (ChaCha8): the same board, inputs
//! and seed give the same bytes out. Time is virtual ([`time::SimTime`]) and is handed in by
//! whoever drives a [`device::Device`].
//!
//! **Start here**: [`device::Device`] is one board (`handle_*` in, `poll_*` out); a
//! [`harness::Harness`] drives one in virtual time; [`scenario::runner::run`] runs a scenario
//! file and builds its acceptance records.
//!
//! Map, by layer (each module names the firmware file it mirrors; imports only point down, and
//! `tests/tidy.rs` checks it):
//!
//! * **Foundations** — [`time`] (virtual time, durations with units), [`trace`] (events),
//!   [`spec`] (data-file loading with `file:line:column` errors), [`cjson`] (the cJSON 1.7.19
//!   dialect: parse, case-insensitive lookup, print).
//! * **Data and protocol** (nothing here imports the device or the drivers) —
//!   [`board`] (what a board is), [`firmware`] (versions and their behaviour lines), [`world`] (what surrounds it), [`fault`] (faults as data),
//!   [`mcp`] (`McpServer`, `McpTool`, `Property`, every wire string), [`audio`] (the acoustic
//!   chain: codec laws, amplifier, speaker, room, measurements), [`hw`] (NVS, backlight,
//!   display, camera), [`voice`] (binary audio frames, Opus, resampling).
//! * **The device** — [`device`]: boot, receive task, main-task batches, tool callbacks, the
//!   WebSocket channel, reboot, power.
//! * **Drivers** — [`harness`] (offline runs and replay), [`loopback`] (device and backend in one
//!   clock), [`scenario`] (scenario files, runner, acceptance records, runs over the wire),
//!   [`backend`] (a backend as MCP client, driven by a personality; [`backend::scripted`] runs
//!   its script and faults, sans-IO), and `bounds` (the bound properties of every integer
//!   parameter, behind the cargo feature `bounds`).

#![warn(missing_docs, unreachable_pub)]

pub mod audio;
pub mod backend;
pub mod board;
#[cfg(feature = "bounds")]
pub mod bounds;
pub mod cjson;
pub mod device;
pub mod fault;
pub mod firmware;
pub mod harness;
pub mod hw;
pub mod loopback;
pub mod mcp;
pub mod scenario;
pub mod spec;
pub mod time;
pub mod trace;
pub mod voice;
pub mod world;
