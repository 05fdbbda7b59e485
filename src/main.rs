//! `xiaozhi-twin`: the command line of the xiaozhi-esp32 digital twin.
//!
//! The binary only parses arguments and hands over to one module per subcommand (`cmd::*` of
//! the `xiaozhi_twin` library); every behaviour of the device lives in the `xiaozhi-sim` crate.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use xiaozhi_twin::cmd;

/// A digital twin of the xiaozhi-esp32 voice assistant, seen from its MCP tool layer.
///
/// The twin answers every MCP message byte for byte as the firmware (78/xiaozhi-esp32 2.4.2,
/// commit 48142026) does, quirks included, in deterministic virtual time.
#[derive(Parser)]
#[command(name = "xiaozhi-twin", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match cmd::dispatch(cli.command) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => report_error(e),
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
        xiaozhi_twin::errln!("xiaozhi-twin: {line}");
    }
    ExitCode::from(2)
}

/// `--help` and `--version` as clap prints them (exit 0); a usage error in one line on stderr
/// with the command's usage, exit status 2 (clap's own message takes 3–7 lines); no command at
/// all: the help on stderr, exit status 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            xiaozhi_twin::out!("{}", e.render());
            return ExitCode::SUCCESS;
        }
        // No subcommand: the help is the message, on stderr (nothing on stdout when refused).
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            xiaozhi_twin::err!("{}", e.render());
            return ExitCode::from(2);
        }
        _ => {}
    }
    let text = e.render().to_string();
    let what: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage: ") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.strip_prefix("error: ")
                .or_else(|| l.strip_prefix("tip: "))
                .unwrap_or(l)
        })
        .collect();
    let what = what.join("; ").replace(":; ", ": ");
    let usage = text.lines().find_map(|l| l.trim().strip_prefix("Usage: "));
    match usage {
        Some(u) => xiaozhi_twin::errln!("xiaozhi-twin: {what} (usage: {u}; see --help)"),
        None => xiaozhi_twin::errln!("xiaozhi-twin: {what} (see --help)"),
    }
    ExitCode::from(2)
}
