//! Loading data files (boards, worlds, scenarios) from YAML with one-line errors that name the
//! file, line, column and field (DESIGN.md §6; DEPS.md §3: serde-saphyr behind one function).
//!
//! Knows nothing about what the files mean.

use std::path::Path;

use serde::de::DeserializeOwned;

/// Why a data file could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{origin}: {message}")]
    Io { origin: String, message: String },
    /// The file is not valid UTF-8 (YAML must be text).
    #[error("{origin}:{line}:{column}: not UTF-8 text (invalid byte sequence)")]
    NotUtf8 { origin: String, line: u64, column: u64 },
    /// YAML syntax or shape (unknown key, wrong type, missing field…).
    #[error("{origin}:{line}:{column}: {message}")]
    Yaml {
        origin: String,
        line: u64,
        column: u64,
        message: String,
    },
    /// Parsed, but a value is impossible.
    #[error("{origin}:{line}:{column}: {field}: {message}")]
    Invalid {
        origin: String,
        line: u64,
        column: u64,
        field: String,
        message: String,
    },
}

impl SpecError {
    /// Where the problem is, when known.
    pub fn location(&self) -> Option<(u64, u64)> {
        match self {
            SpecError::Io { .. } => None,
            SpecError::NotUtf8 { line, column, .. }
            | SpecError::Yaml { line, column, .. }
            | SpecError::Invalid { line, column, .. } => Some((*line, *column)),
        }
    }
}

/// Largest data file accepted (a board or scenario is a few KB; this bounds memory and time).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads a data file as UTF-8 text, refusing huge files and non-UTF-8 bytes with a position.
pub fn read_text(path: &Path) -> Result<String, SpecError> {
    let origin = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| SpecError::Io {
        origin: origin.clone(),
        message: io_message(&e),
    })?;
    if meta.is_dir() {
        return Err(SpecError::Io {
            origin,
            message: "is a directory, not a file".into(),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(SpecError::Io {
            origin,
            message: format!(
                "{} bytes is larger than the {} bytes a data file may have",
                meta.len(),
                MAX_FILE_BYTES
            ),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| SpecError::Io {
        origin: origin.clone(),
        message: io_message(&e),
    })?;
    text_from_bytes(&origin, bytes)
}

/// Turns bytes into text or a located UTF-8 error.
pub fn text_from_bytes(origin: &str, bytes: Vec<u8>) -> Result<String, SpecError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let column = String::from_utf8_lossy(&valid[line_start..]).chars().count() as u64 + 1;
        SpecError::NotUtf8 {
            origin: origin.to_string(),
            line,
            column,
        }
    })
}

fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// Deserialises YAML with serde-saphyr (duplicate keys rejected, aliases bounded by its budget).
pub fn from_yaml<T: DeserializeOwned>(origin: &str, text: &str) -> Result<T, SpecError> {
    serde_saphyr::from_str::<T>(text).map_err(|e| {
        let (line, column) = e.location().map_or((1, 1), |l| (l.line().max(1), l.column().max(1)));
        SpecError::Yaml {
            origin: origin.to_string(),
            line,
            column,
            message: one_line(&e),
        }
    })
}

/// serde-saphyr's message without its source snippet, on one line.
fn one_line(e: &serde_saphyr::Error) -> String {
    let full = e.without_snippet().to_string();
    let first = full
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid YAML");
    // Drop a leading "error:" and a trailing " at line N column M" that we print ourselves.
    let first = first.strip_prefix("error:").map(str::trim).unwrap_or(first);
    let first = match first.find(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    let first = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, m)| m),
        None => first,
    };
    first.to_string()
}

/// Best-effort position of a dotted field path (`display.default_theme`, `board_tools[2].tool.name`)
/// in YAML text: follows each key at a deeper indentation than its parent. Falls back to 1:1.
pub fn find_field(text: &str, path: &str) -> (u64, u64) {
    let mut segments = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((key, idx)) => {
                segments.push((key.to_string(), None));
                let n: usize = idx.trim_end_matches(']').parse().unwrap_or(0);
                segments.push((String::new(), Some(n)));
            }
            None => segments.push((part.to_string(), None)),
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0usize;
    let mut min_indent: isize = -1;
    let mut found = (1u64, 1u64);
    for (key, index) in segments {
        let mut hit = None;
        if let Some(n) = index {
            let mut count = 0;
            let mut item_indent = None;
            for (i, line) in lines.iter().enumerate().skip(from) {
                let indent = line.len() - line.trim_start().len();
                let trimmed = line.trim_start();
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    continue;
                }
                if (indent as isize) < min_indent {
                    break;
                }
                if trimmed.starts_with("- ") || trimmed == "-" {
                    if item_indent.is_none() {
                        item_indent = Some(indent);
                    }
                    if Some(indent) == item_indent {
                        if count == n {
                            hit = Some((i, indent, indent + 2));
                            break;
                        }
                        count += 1;
                    }
                }
            }
        } else {
            for (i, line) in lines.iter().enumerate().skip(from) {
                let trimmed_dash = line.trim_start().trim_start_matches("- ");
                let indent = line.len() - trimmed_dash.len();
                if line.trim().is_empty() || line.trim_start().starts_with('#') {
                    continue;
                }
                if (indent as isize) < min_indent {
                    break;
                }
                if trimmed_dash.starts_with(&format!("{key}:")) {
                    hit = Some((i, indent, indent));
                    break;
                }
            }
        }
        match hit {
            Some((i, indent, col)) => {
                found = (i as u64 + 1, col as u64 + 1);
                from = if index.is_some() { i } else { i + 1 };
                min_indent = indent as isize + if index.is_some() { 0 } else { 1 };
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_point_at_their_keys() {
        let text = "name: x\ndisplay:\n  kind: oled\n  default_theme: light\nboard_tools:\n  - lamp: {gpio: 99}\n  - tool:\n      name: a\n";
        assert_eq!(find_field(text, "display.default_theme"), (4, 3));
        assert_eq!(find_field(text, "board_tools[1].tool.name"), (8, 7));
        assert_eq!(find_field(text, "board_tools[0].lamp.gpio"), (6, 5));
        assert_eq!(find_field(text, "nope"), (1, 1));
    }

    #[test]
    fn non_utf8_is_located() {
        let err = text_from_bytes("f.yaml", b"a: 1\nb: \xff\n".to_vec()).unwrap_err();
        assert_eq!(err.location(), Some((2, 4)));
    }
}
