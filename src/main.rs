//! `xiaozhi-twin`: the command line of the xiaozhi-esp32 digital twin.
//!
//! The binary only parses arguments and hands over to one module per subcommand (`cmd::*`);
//! every behaviour of the device lives in the `xiaozhi-sim` crate.

mod boards;
mod cmd;
mod live;
mod ota;
mod state;
mod wav;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A digital twin of the xiaozhi-esp32 voice assistant, seen from its MCP tool layer.
///
/// The twin answers every MCP message byte for byte as the firmware (78/xiaozhi-esp32 2.4.2,
/// commit 48142026) does, quirks included, in deterministic virtual time.
#[derive(Parser)]
#[command(name = "xiaozhi-twin", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Narrated tour: `true`, readback and what a listener hears, on simulated boards.
    ///
    /// Runs a few curated scenarios in virtual time (seconds of wall time), prints their
    /// acceptance records and writes WAV evidence (I2S stream and listener pressure) per scene.
    Demo {
        /// Where to write the WAV evidence.
        #[arg(long, value_name = "DIR", default_value = "xiaozhi-twin-demo")]
        out: PathBuf,
        /// Play the before/after listener audio of the first scenes (needs the `playback` feature).
        #[arg(long)]
        play: bool,
    },
    /// Replay a conformance request file on a freshly flashed board and print what it sends.
    ///
    /// Each line of FILE is one inner MCP payload (raw bytes, JSON or not), `#burst [<payload
    /// strings>]` (all parsed before the main task runs) or `#sleep <ms>`. Prints one JSON object
    /// per line: {"n", "request", "replies", "events"}. Exit status 2 on a missing file, an
    /// unknown board or a malformed directive (nothing is printed then).
    Replay {
        /// Board id (see `xiaozhi-twin boards`) or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// Request file, one payload or directive per line.
        file: PathBuf,
        /// Print only the reply payloads, one per line (for piping and throughput runs).
        #[arg(long)]
        replies_only: bool,
        /// Seed of the device identity (MAC, UUID); replies do not depend on it.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print the exact `tools/list` result object(s) a board sends, one page per line.
    Tools {
        /// Board id or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// List user-only tools too (`withUserTools: true`).
        #[arg(long)]
        with_user_tools: bool,
    },
    /// Set the volume through the MCP path, play a probe, and measure what is heard.
    ///
    /// Boots the board in a quiet room (35 dBA, listener at 0.5 m), calls
    /// self.audio_speaker.set_volume as a backend would, plays the probe through the board's own
    /// audio path and prints the four factors (playing, i2s_running, codec_gain, amp_enabled),
    /// the I2S level, the sound pressure at the listener and the verdict.
    Render {
        /// Board id or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// Volume to set through `tools/call` first (0..100).
        #[arg(long)]
        volume: Option<i32>,
        /// Probe tone: tone:<Hz>:<dBFS>:<ms> (default tone:1000:-6:1000).
        #[arg(long, value_name = "tone:HZ:DBFS:MS")]
        probe: Option<String>,
        /// Play a WAV file instead of a tone.
        #[arg(long, value_name = "FILE")]
        wav: Option<PathBuf>,
        /// Inject a fault (repeatable): amp_shutdown, speaker_disconnected, speaker_gated,
        /// i2s_stopped, codec_dummy, oled_init_failure, camera_init_failure, nvs_write_failure.
        #[arg(long = "fault", value_name = "NAME")]
        faults: Vec<xiaozhi_sim::fault::Fault>,
        /// Write render.i2s.wav (32-bit PCM) and render.listener.wav (float, Pa) here.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Play the listener signal on the sound card (needs the `playback` feature).
        #[arg(long)]
        play: bool,
        /// Listener distance in metres (default 0.5).
        #[arg(long, value_name = "M")]
        distance: Option<f64>,
        /// Ambient level in dBA (default 35).
        #[arg(long, value_name = "DBA")]
        ambient: Option<f64>,
    },
    /// Run scenario files and print their acceptance records and checks.
    ///
    /// Each scenario boots its board in virtual time, runs its steps, and prints one 5-row
    /// acceptance record per tool call (discovery, decision, parameters, response, effect) and
    /// a pass/fail line per expectation. Exit status: 0 all passed, 1 an expectation failed
    /// (the seed and the command to reproduce are printed), 2 a file could not be used.
    ///
    /// With --wire, each scenario runs over real sockets instead: a backend of --personality
    /// listens on a loopback port, the twin dials it as `connect` does, and the backend performs
    /// the scenario's call, readback and wait steps (discovery its own way, ids its own). The
    /// record is what the backend can know; expectations about the device's insides are listed
    /// as not judged. Steps that act on the device itself (play, press, faults, …) are refused.
    Run {
        /// Scenario files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Seed of the device identity (overrides the scenarios' own).
        #[arg(long)]
        seed: Option<u64>,
        /// Write the full report (records, checks, traces) as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Write WAV evidence of every measurement under DIR/<scenario>/.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print only failures and the summary.
        #[arg(long)]
        quiet: bool,
        /// Run over real loopback sockets, through `xiaozhi-twin backend` in this process.
        #[arg(long, conflicts_with = "out")]
        wire: bool,
        /// With --wire: the backend personality (name or YAML file).
        #[arg(long, default_value = "xinnan-py", requires = "wire")]
        personality: String,
        /// With --wire: give up on a scenario after this long (real time).
        #[arg(long, value_parser = parse_std_duration, default_value = "60s", requires = "wire")]
        limit: std::time::Duration,
    },
    /// Dial a real xiaozhi backend over WebSocket as the firmware does.
    ///
    /// The board boots, and when the simulated user acts (--wake) it dials URL with the
    /// firmware's handshake headers, sends its hello, waits 10 s for the server hello, and then
    /// answers MCP inside the {"session_id","type":"mcp","payload"} envelope. A reboot closes
    /// TCP without a close frame; there is no automatic reconnection. Device events go to stderr.
    Connect {
        /// Board id or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// Backend WebSocket URL, e.g. ws://127.0.0.1:8000/xiaozhi/v1/.
        #[arg(long, required_unless_present = "ota")]
        url: Option<String>,
        /// OTA/activation URL (e.g. http://127.0.0.1:8002/xiaozhi/ota/): POST the system info as
        /// the firmware does and take the WebSocket URL and token from the answer.
        #[arg(long, value_name = "URL")]
        ota: Option<String>,
        /// Access token (sent as `Authorization: Bearer <token>`; empty = no header).
        #[arg(long, default_value = "")]
        token: String,
        /// Protocol-Version header and hello version.
        #[arg(long, default_value_t = 1)]
        protocol_version: i32,
        /// Device-Id (the MAC, aa:bb:cc:dd:ee:ff); default derived from --seed.
        #[arg(long, value_name = "MAC")]
        device_id: Option<String>,
        /// Client-Id (the UUID kept in NVS); default derived from --seed or the saved state.
        #[arg(long, value_name = "UUID")]
        client_id: Option<String>,
        /// When the simulated user opens the channel: on-boot, manual or every:<duration>.
        #[arg(long, default_value = "on-boot")]
        wake: live::Wake,
        /// Keep NVS (volume, UUID, settings) in DIR between runs, like flash.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Stop after this long (e.g. 30s); default: until Ctrl-C.
        #[arg(long, value_parser = parse_std_duration)]
        duration: Option<std::time::Duration>,
        /// Seed of the device identity.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Do not print device events and frames.
        #[arg(long)]
        quiet: bool,
    },
    /// A small xiaozhi server that drives devices as a real backend does (a personality).
    ///
    /// Answers each device's hello, runs initialize and tools/list the personality's way, then
    /// runs --script (or commands typed on stdin with `--script -`). Pairs every request with
    /// its reply by id; prints one JSON report per connection on stdout when it closes
    /// (headers, exchanges with timestamps, unanswered ids, how it ended). Personalities:
    /// xinnan-py (default), rust-first-page, go-eager, mcp-go-strict, cloud-gateway,
    /// java-cap32, or a YAML file. Script steps: call/send <tool> [json], wait <dur>,
    /// raw <payload>, frame <text>, garbage, vanish, close; `@N` limits a step to a device's
    /// Nth connection.
    ///
    /// With --scenario FILE the backend performs a scenario's steps on the first device that
    /// connects (across its reboots), prints the scenario's acceptance records and checks as
    /// judged from the backend's side, and exits 0 (passed) or 1 (failed or the device never
    /// finished within --duration, default 60 s).
    Backend {
        /// Address to listen on (port 0 picks a free one; the address is printed on stderr).
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        /// Personality name or YAML file.
        #[arg(long, default_value = "xinnan-py")]
        personality: String,
        /// Script run on every connection once discovery is done (`-`: read commands from stdin).
        #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
        script: Option<PathBuf>,
        /// A scenario file to perform on the first device that connects (see above).
        #[arg(long, value_name = "FILE", conflicts_with = "connections")]
        scenario: Option<PathBuf>,
        /// Stop after this long.
        #[arg(long, value_parser = parse_std_duration)]
        duration: Option<std::time::Duration>,
        /// Stop once this many connections have closed.
        #[arg(long, value_name = "N")]
        connections: Option<u64>,
        /// Log every frame on stderr.
        #[arg(long)]
        verbose: bool,
    },
    /// The board as a standard MCP server on stdin/stdout (newline-delimited JSON-RPC).
    ///
    /// Faithful mode by default: the firmware's replies exactly (protocol version 2024-11-05,
    /// errors without `code`, messages inserted unescaped, no `ping`). Compat mode (--compat)
    /// adds a JSON-RPC error code, escapes messages and answers ping, and changes nothing else.
    /// Clients that first probe with `server/discover` (fastmcp, the MCP Python SDK's `Client`
    /// in auto mode) wait out their 10 s discovery timeout in faithful mode: use --compat or the
    /// client's legacy mode. Logs go to stderr.
    Stdio {
        /// Board id or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// Repair what standard MCP clients cannot accept (see above).
        #[arg(long)]
        compat: bool,
        /// Seed of the device identity.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print device events on stderr.
        #[arg(long)]
        verbose: bool,
    },
    /// Many simulated devices against one backend, with a progress bar and a summary.
    ///
    /// Each device has its own MAC, UUID and NVS and starts --stagger after the previous one.
    /// Without --url the fleet runs its own backend on a loopback port and every device runs
    /// --script (default: 10 tool calls) after hello + initialize + tools/list and the fleet
    /// ends when all are done; with --url it runs for --duration. Exit status 0
    /// when every device finished without a drop, 1 otherwise.
    Fleet {
        /// Number of devices.
        #[arg(long, default_value_t = 100)]
        devices: u32,
        /// Backend URL (default: a built-in backend on a loopback port).
        #[arg(long)]
        url: Option<String>,
        /// Board id or path to a board YAML file.
        #[arg(long, default_value = "bread-compact-wifi")]
        board: String,
        /// Stop after this long at most.
        #[arg(long, default_value = "60s", value_parser = parse_std_duration)]
        duration: std::time::Duration,
        /// Gap between device starts.
        #[arg(long, default_value = "2ms", value_parser = parse_std_duration)]
        stagger: std::time::Duration,
        /// Personality of the built-in backend.
        #[arg(long, default_value = "xinnan-py")]
        personality: String,
        /// Script of the built-in backend (default: 10 calls).
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// First device seed (device i gets seed + i).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the summary as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Check the parameter-bound promises on every callable tool of a board (property tests).
    ///
    /// Integer parameters must accept exactly the JSON numbers whose cJSON `valueint` is in
    /// range and store them; rejected calls must answer the firmware's exact message and change
    /// nothing; wrong JSON types must give `Missing valid argument: <name>` or the default;
    /// argument keys match case-insensitively, first match wins. Works on user board files too.
    /// Exit status 0 all promises hold, 1 one is broken (the shrunk input is printed), 2 the board
    /// cannot be used. Deterministic: same board and --cases, same report.
    CheckBounds {
        /// Board id or path to a board YAML file.
        #[arg(long)]
        board: String,
        /// Generated cases per property.
        #[arg(long, default_value_t = 256)]
        cases: u32,
    },
    /// List the shipped boards.
    Boards,
}

/// `1500ms`, `2s`, `1m` as a wall-clock duration.
fn parse_std_duration(s: &str) -> Result<std::time::Duration, String> {
    xiaozhi_sim::time::parse_duration(s).map(|d| std::time::Duration::from_micros(d.as_micros()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => report_error(e),
    }
}

/// Runs a command: `Ok(true)` success, `Ok(false)` an expectation failed, `Err` unusable input.
fn dispatch(command: Command) -> anyhow::Result<bool> {
    match command {
        Command::Demo { out, play } => cmd::demo::run(&cmd::demo::Options { out, play }),
        Command::Replay {
            board,
            file,
            replies_only,
            seed,
        } => cmd::replay::run(&cmd::replay::Options {
            board: &board,
            file: &file,
            replies_only,
            seed,
        })
        .map(|()| true),
        Command::Tools { board, with_user_tools } => cmd::tools::run(&board, with_user_tools).map(|()| true),
        Command::Render {
            board,
            volume,
            probe,
            wav,
            faults,
            out,
            json,
            play,
            distance,
            ambient,
        } => cmd::render::run(&cmd::render::Options {
            board,
            volume,
            probe,
            wav,
            faults,
            out,
            json,
            play,
            distance_m: distance,
            ambient_dba: ambient,
        })
        .map(|()| true),
        Command::Run {
            paths,
            seed,
            json,
            out,
            quiet,
            wire,
            personality,
            limit,
        } => cmd::run::run(&cmd::run::Options {
            paths,
            seed,
            json,
            out,
            quiet,
            wire: wire.then_some(cmd::run::WireOptions { personality, limit }),
        }),
        Command::Connect {
            board,
            url,
            ota,
            token,
            protocol_version,
            device_id,
            client_id,
            wake,
            state,
            duration,
            seed,
            quiet,
        } => cmd::connect::run(&cmd::connect::Options {
            board,
            url,
            ota,
            token,
            protocol_version,
            device_id,
            client_id,
            wake,
            state_dir: state,
            duration,
            seed,
            quiet,
        }),
        Command::Backend {
            listen,
            personality,
            script,
            scenario,
            duration,
            connections,
            verbose,
        } => cmd::backend::run(&cmd::backend::Options {
            listen,
            personality,
            script,
            scenario,
            duration,
            connections,
            verbose,
        }),
        Command::Stdio {
            board,
            compat,
            seed,
            verbose,
        } => cmd::stdio::run(&cmd::stdio::Options {
            board,
            compat,
            seed,
            verbose,
        }),
        Command::Fleet {
            devices,
            url,
            board,
            duration,
            stagger,
            personality,
            script,
            seed,
            json,
        } => cmd::fleet::run(&cmd::fleet::Options {
            devices,
            url,
            board,
            duration,
            stagger,
            personality,
            script,
            seed,
            json,
        }),
        Command::CheckBounds { board, cases } => cmd::check_bounds::run(&board, cases),
        Command::Boards => cmd::boards::run().map(|()| true),
    }
}

/// One line on stderr and exit status 2; a broken pipe (`| head`) is not an error.
fn report_error(e: anyhow::Error) -> ExitCode {
    if e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    {
        return ExitCode::SUCCESS;
    }
    // One line per problem (a data file may have several).
    for line in format!("{e:#}").lines() {
        eprintln!("xiaozhi-twin: {line}");
    }
    ExitCode::from(2)
}
