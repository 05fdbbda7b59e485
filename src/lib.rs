//! `xiaozhi_twin`: the edges of the xiaozhi-esp32 digital twin. The device itself is the sans-IO
//! `xiaozhi-sim` crate; this library puts it on real sockets and files: the live driver, the
//! backend server, fleets, scenario files and their reports, and the commands.
//!
//! Why the commands live here rather than in the binary: as mini-redis keeps its `cmd` in its
//! library, each command is a module with a `clap::Args` struct (its flags and help) and a plain
//! `run(&Args)`, so a test can build the arguments and run a command, or any part below it (the
//! live driver, a fleet, a report), in-process without spawning the process. The binary,
//! `src/main.rs`, keeps only the subcommand enum: it parses the command line and dispatches.
//!
//! The map (one line per module; `src/main.rs` is the binary):
//!
//! * `args`: argument parsers and argument groups several commands share (`BoardArgs`).
//! * `audit`: `audit`'s trials on threads, its scorecard lines, gate and JUnit; `audit::live`: its
//!   trials on live boards against a real backend (`--url`); `audit::clips`: the recordings that
//!   say the requests (the shipped ones in the binary).
//! * `boards`: the shipped board files, hand-written and generated for every upstream build
//!   (embedded), and `--board` resolution.
//! * `board_matrix`: the board matrix of `run --board A,B,… | all`.
//! * `cmd`: one module per subcommand, each its `Args` (the help text) and `run`:
//!   * `cmd::audit`: `audit`, a battery of requests scored by what was said against what was done;
//!   * `cmd::backend`: `backend`, the backend server on addresses of your choosing (WebSocket,
//!     and MQTT + UDP and OTA when asked);
//!   * `cmd::boards`: `boards`, the twin's boards and every upstream build;
//!   * `cmd::check_bounds`: `check-bounds`, the parameter-bound promises of a board;
//!   * `cmd::connect`: `connect`, one board dialling a real backend (WebSocket or MQTT + UDP);
//!   * `cmd::console`: `console`, the twin live in a browser;
//!   * `cmd::demo`: `demo`, the narrated scenes;
//!   * `cmd::fleet`: `fleet`, its arguments and checks, and a call into `fleet`;
//!   * `cmd::render`: `render`, set the volume, play a probe, measure what is heard;
//!   * `cmd::replay`: `replay`, a conformance request file on a fresh board;
//!   * `cmd::run`: `run`, scenario files in virtual time, over the wire, as a version matrix or
//!     as a board matrix;
//!   * `cmd::stdio`: `stdio`, a board as a standard MCP server on stdin/stdout;
//!   * `cmd::tools`: `tools`, the exact `tools/list` pages of a board.
//! * `connect_report`: the JSON report of `connect --report`.
//! * `console`: the twin live in a browser: one device in real time and its backend;
//!   `console::companion`: what the page asks of the device and what it is told;
//!   `console::web`: the page, its WebSocket and the HTTP API (axum); `console::backend`: the
//!   server the device dials (the built-in one over a WebSocket or MQTT + UDP, or a real one).
//! * `fleet`: many devices against one backend; what both kinds of fleet share (limits, costs,
//!   the loopback backend, the start of a device):
//!   * `fleet::capacity`: `--find-capacity`, the knee search under an SLO;
//!   * `fleet::slo`: `--slo EXPR`, terms over the summary's figures, parsed and judged;
//!   * `fleet::child`: `--backend-process`, the built-in backend in a child process and its cost;
//!   * `fleet::hist`: the latency histogram and its checked text form;
//!   * `fleet::mcp`: the MCP fleet, its summary (`McpSummary`) and percentile;
//!   * `fleet::summary`: the voice fleet's mergeable summary (`VoiceSummary`, HDR histograms);
//!   * `fleet::think`: `--think`, the wait before each turn (fixed, or exponential: `exp:MEAN`);
//!   * `fleet::turns`: the talking user of one voice-fleet device, how it hears (`--decode`) and
//!     the fleet's metrics;
//!   * `fleet::talking`: the voice fleet, one thread per core, whole or one shard;
//!   * `fleet::web`: `--web`, the live dashboard of a voice fleet (axum) and its saved report.
//! * `html`: the self-contained HTML report (`--html`); `html::screen` draws the screen in it;
//!   `html::audit` is `audit --html`'s page.
//! * `junit`: the JUnit XML of `run --junit`.
//! * `live`: the real-time driver of one device on real sockets, in short drive functions:
//!   * `live::companion`: the `Companion` trait, the simulated users and the observers;
//!   * `live::lenient`: the device's WebSocket reads text frames as bytes, as the firmware does;
//!   * `live::mqtt_client`: the second wire: the MQTT client (rumqttc) and the audio's UDP socket;
//!   * `live::net`: the wall clock as virtual time, the firmware's handshake, socket settings;
//!   * `live::stats`: what a run leaves (`DeviceStats`: counts, the record, the user's actions).
//! * `lines`: lines from a stream, each at most a stated size (stdin of `stdio` and `backend`).
//! * `version_matrix`: the firmware-version matrix of `run --firmware A,B,…`.
//! * `nvs_file`: `--state DIR`, the twin's NVS between runs.
//! * `activation`: the firmware's OTA/activation request and the protocol its answer leads to
//!   (`connect --ota`).
//! * `out`: standard output and error without a panic (`outln!`, `errln!`): a closed standard
//!   output ends the process quietly.
//! * `over_wire`: scenarios over real sockets, judged from the backend's side.
//! * `scenarios`: scenario files found, loaded, run in virtual time, their WAV evidence.
//! * `server`: the backend server (a personality) of `backend`, fleets and `--wire`:
//!   * `server::mqtt_gateway`: xiaozhi-mqtt-gateway's stand-in on real sockets (MQTT server, UDP);
//!   * `server::ota`: the OTA endpoint of `backend --ota`.
//! * `user`: the simulated user's script of `connect --script`.
//! * `wav`: WAV evidence and optional playback.

pub mod activation;
pub mod args;
pub mod audit;
pub mod board_matrix;
pub mod boards;
pub mod cmd;
pub mod connect_report;
pub mod console;
pub mod fleet;
pub mod html;
pub mod junit;
pub mod lines;
pub mod live;
pub mod nvs_file;
pub mod out;
pub mod over_wire;
pub mod scenarios;
pub mod server;
pub mod user;
pub mod version_matrix;
pub mod wav;
