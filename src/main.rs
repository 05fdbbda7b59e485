//! `xiaozhi-twin`: the command line of the xiaozhi-esp32 digital twin.
//!
//! The binary only parses arguments and hands over to one module per subcommand (`cmd::*`);
//! every behaviour of the device lives in the `xiaozhi-sim` crate.

mod boards;
mod cmd;
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
    },
    /// List the shipped boards.
    Boards,
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
        } => cmd::run::run(&cmd::run::Options {
            paths,
            seed,
            json,
            out,
            quiet,
        }),
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
    eprintln!("xiaozhi-twin: {e:#}");
    ExitCode::from(2)
}
