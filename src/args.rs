//! Argument parsers shared by several commands.

/// `1500ms`, `2s`, `1m` as a wall-clock duration.
pub fn parse_std_duration(s: &str) -> Result<std::time::Duration, String> {
    xiaozhi_sim::time::parse_duration(s).map(|d| std::time::Duration::from_micros(d.as_micros()))
}
