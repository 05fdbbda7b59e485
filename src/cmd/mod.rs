//! One module per subcommand; each turns parsed arguments into output and an exit code.

pub mod boards;
pub mod demo;
pub mod render;
pub mod replay;
pub mod run;
pub mod tools;
