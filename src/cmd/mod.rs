//! One module per subcommand; each owns its arguments (`Args`, with the help text) and turns
//! them into output and an exit code (`run`). Commands do not use each other: what several of
//! them share lives in the library's other modules (`args`, `server`, `scenarios`, `wire`,
//! `live`, `fleet`, …).

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
