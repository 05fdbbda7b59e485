//! Built-in tool behaviours that a board file can name (`behavior: {builtin: {name: …}}`) when a
//! callback does more than data can say (e.g. otto-robot's servo controller). The tool's texts
//! and schema still come from the board file.

/// Every built-in behaviour the device model implements.
const KNOWN: &[&str] = &[
    "otto.action",
    "otto.servo_sequences",
    "otto.stop",
    "otto.set_trim",
    "otto.get_trims",
    "otto.get_status",
    "battery.get_level",
    "otto.get_ip",
];

/// Whether a board uses the otto controller.
pub fn needs_otto<'a>(mut names: impl Iterator<Item = &'a str>) -> bool {
    names.any(|n| n.starts_with("otto."))
}

pub fn is_known(name: &str) -> bool {
    KNOWN.contains(&name)
}

pub fn known_names() -> Vec<&'static str> {
    KNOWN.to_vec()
}
