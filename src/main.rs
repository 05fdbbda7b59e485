//! `xiaozhi-twin`: the command line of the xiaozhi-esp32 digital twin.
//!
//! The binary only parses arguments and hands over to one module per subcommand (`cmd::*`);
//! every behaviour of the device lives in the `xiaozhi-sim` crate.

mod boards;
mod cmd;

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
    /// List the shipped boards.
    Boards,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Replay {
            board,
            file,
            replies_only,
            seed,
        } => cmd::replay::run(&cmd::replay::Options {
            board,
            file,
            replies_only: *replies_only,
            seed: *seed,
        }),
        Command::Tools { board, with_user_tools } => cmd::tools::run(board, *with_user_tools),
        Command::Boards => cmd::boards::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Broken pipe (e.g. `| head`) is not an error worth a message.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("xiaozhi-twin: {e:#}");
            ExitCode::from(2)
        }
    }
}
