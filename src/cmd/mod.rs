//! One module per subcommand; each owns its arguments (`Args`, with the help text) and turns
//! them into output and an exit code (`run`). Commands do not use each other: what several of
//! them share lives in the library's other modules (`args`, `server`, `scenarios`, `wire`,
//! `live`, `fleet`, …). [`Command`] lists them for the binary's parser and [`dispatch`] runs one.

pub mod audit;
pub mod backend;
pub mod boards;
pub mod check_bounds;
pub mod connect;
pub mod console;
pub mod demo;
pub mod fleet;
pub mod render;
pub mod replay;
pub mod run;
pub mod stdio;
pub mod tools;

/// The subcommands, in the order `--help` lists them; each module owns its arguments and help.
#[derive(clap::Subcommand)]
pub enum Command {
    Demo(demo::Args),
    Replay(replay::Args),
    Tools(tools::Args),
    Render(render::Args),
    Run(run::Args),
    Audit(audit::Args),
    Connect(connect::Args),
    Console(console::Args),
    Backend(backend::Args),
    Stdio(stdio::Args),
    Fleet(fleet::Args),
    CheckBounds(check_bounds::Args),
    Boards(boards::Args),
}

/// Runs a command: `Ok(true)` success, `Ok(false)` an expectation failed, `Err` unusable input.
pub fn dispatch(command: Command) -> anyhow::Result<bool> {
    match command {
        Command::Demo(a) => demo::run(&a),
        Command::Replay(a) => replay::run(&a),
        Command::Tools(a) => tools::run(&a),
        Command::Render(a) => render::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Audit(a) => audit::run(&a),
        Command::Connect(a) => connect::run(&a),
        Command::Console(a) => console::run(&a),
        Command::Backend(a) => backend::run(&a),
        Command::Stdio(a) => stdio::run(&a),
        Command::Fleet(a) => fleet::run(&a),
        Command::CheckBounds(a) => check_bounds::run(&a),
        Command::Boards(a) => boards::run(&a),
    }
}

#[cfg(test)]
mod tests {
    use clap::Subcommand;

    use super::Command;

    /// `--help` explains every option: an argument without a doc comment shows a bare name
    /// (and a doc comment above the wrong field shows under the wrong option, as `run
    /// --transport`'s once did under `--board`).
    #[test]
    fn every_argument_of_every_subcommand_says_what_it_is() {
        let cli = Command::augment_subcommands(clap::Command::new("xiaozhi-twin"));
        cli.clone().debug_assert();
        let mut bare = Vec::new();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    bare.push(format!("{} {id}", sub.get_name()));
                }
            }
        }
        assert!(bare.is_empty(), "arguments without help: {bare:?}");
        let run = cli.find_subcommand("run").expect("run");
        let help = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(ToString::to_string)
                .unwrap_or_default()
        };
        assert!(
            help("transport").starts_with("With --wire: the wire"),
            "{}",
            help("transport")
        );
        assert!(
            help("board").starts_with("Run every scenario on these boards"),
            "{}",
            help("board")
        );
    }
}
