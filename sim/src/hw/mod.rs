//! Virtual hardware: each module mirrors one firmware driver or board component and knows
//! nothing about MCP (docs/reference/architecture.md §2, `hw::*`).

pub mod backlight;
pub mod camera;
pub mod display;
pub mod layout;
pub mod nvs;
pub mod picture;
pub mod screen;
