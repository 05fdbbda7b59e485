//! `xiaozhi_twin`: the edges of the xiaozhi-esp32 digital twin — everything of the command line
//! but its argument parsing. The device itself is the sans-IO `xiaozhi-sim` crate; this library
//! puts it on real sockets and files: the live driver, the backend server, fleets, scenario files
//! and their reports.
//!
//! The commands live here too (`cmd::*`, one module per subcommand, as mini-redis keeps its
//! `cmd` in its library): each `Args` is a `clap::Args` and each `run` a plain function, so a
//! test can build the arguments and run a command, or any part below it, in-process without
//! spawning the binary. `src/main.rs` only parses the command line and dispatches.
//!
//! The map (one line per module):
//!
//! * `args`: argument parsers and argument groups several commands share (`--board`/`--firmware`).
//! * `boards`: the shipped board files (embedded) and `--board` resolution.
//! * `cmd`: one module per subcommand, each its `Args` (the help text) and `run`:
//!   * `cmd::backend`: `backend`, the WebSocket backend server on an address of your choosing;
//!   * `cmd::boards`: `boards`, the shipped boards;
//!   * `cmd::check_bounds`: `check-bounds`, the parameter-bound promises of a board;
//!   * `cmd::connect`: `connect`, one board dialling a real backend;
//!   * `cmd::demo`: `demo`, the narrated scenes;
//!   * `cmd::fleet`: `fleet`, its arguments, validation and a call into `fleet`;
//!   * `cmd::render`: `render`, set the volume, play a probe, measure what is heard;
//!   * `cmd::replay`: `replay`, a conformance request file on a fresh board;
//!   * `cmd::run`: `run`, scenario files in virtual time, over the wire or as a version matrix;
//!   * `cmd::stdio`: `stdio`, a board as a standard MCP server on stdin/stdout;
//!   * `cmd::tools`: `tools`, the exact `tools/list` pages of a board.
//! * `fleet`: many devices against one backend (the MCP fleet and the voice fleet, shards);
//!   * `fleet::capacity`: `--find-capacity`, the knee search under an SLO;
//!   * `fleet::summary`: the voice fleet's mergeable summary (HDR histograms);
//!   * `fleet::turns`: the talking user of one voice-fleet device and its metrics.
//! * `html`: the self-contained HTML report (`--html`).
//! * `junit`: the JUnit XML of `run --junit`.
//! * `live`: the real-time driver of one device on real sockets.
//! * `matrix`: the version matrix of `run --firmware A,B,…`.
//! * `ota`: the firmware's OTA/activation request (`connect --ota`).
//! * `scenarios`: scenario files found, loaded, run in virtual time, their WAV evidence.
//! * `server`: the WebSocket backend server (a personality) of `backend`, fleets and `--wire`.
//! * `state`: `--state DIR`, the twin's NVS between runs.
//! * `user`: the simulated user's script of `connect --script`.
//! * `voice_report`: the JSON report of `connect --report`.
//! * `wav`: WAV evidence and optional playback.
//! * `wire`: scenarios over real sockets, judged from the backend's side.

pub mod args;
pub mod boards;
pub mod cmd;
pub mod fleet;
pub mod html;
pub mod junit;
pub mod live;
pub mod matrix;
pub mod ota;
pub mod scenarios;
pub mod server;
pub mod state;
pub mod user;
pub mod voice_report;
pub mod wav;
pub mod wire;
