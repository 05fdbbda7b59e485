//! One module per subcommand; each turns parsed arguments into output and an exit code.

pub mod backend;
pub mod boards;
pub mod check_bounds;
pub mod connect;
pub mod demo;
pub mod fleet;
pub mod render;
pub mod replay;
pub mod run;
pub mod stdio;
pub mod tools;
pub mod wire;
