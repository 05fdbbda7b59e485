//! Loading data files (boards, worlds, scenarios) from YAML with one-line errors that name the
//! file, line, column and field (docs/reference/architecture.md §6; docs/reference/dependencies.md §3: serde-saphyr behind one function).
//!
//! Knows nothing about what the files mean.

use std::path::Path;

use serde::de::DeserializeOwned;

/// Why a data file could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{origin}: {message}")]
    Io {
        /// File the problem is in (path or the name the caller gave).
        origin: String,
        /// What went wrong (`no such file`, `permission denied`, …).
        message: String,
    },
    /// The file is not valid UTF-8 (YAML must be text).
    #[error("{origin}:{line}:{column}: not UTF-8 text (invalid byte sequence)")]
    NotUtf8 {
        /// File the problem is in (path or the name the caller gave).
        origin: String,
        /// 1-based line of the first invalid byte.
        line: u64,
        /// 1-based column of the first invalid byte, in characters.
        column: u64,
    },
    /// YAML syntax or shape (unknown key, wrong type, missing field…).
    #[error("{origin}:{line}:{column}: {message}")]
    Yaml {
        /// File the problem is in (path or the name the caller gave).
        origin: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
        /// The parser's message, on one line.
        message: String,
    },
    /// Parsed, but a value is impossible.
    #[error("{origin}:{line}:{column}: {field}: {message}")]
    Invalid {
        /// File the problem is in (path or the name the caller gave).
        origin: String,
        /// 1-based line of the offending field (best effort; 1 if not found).
        line: u64,
        /// 1-based column of the offending field.
        column: u64,
        /// Dotted path of the offending field (e.g. `target.tick_hz`).
        field: String,
        /// Why the value is impossible.
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
    let bytes = read_bounded(path, MAX_FILE_BYTES, "a data file")?;
    text_from_bytes(&path.display().to_string(), bytes)
}

/// Reads at most `cap` bytes of `path`, whatever it is: a regular file, a FIFO, `/dev/stdin`, a
/// character device such as `/dev/zero`, a process substitution. The one reader every input
/// file of the twin goes through (docs/guarantees.md, "Input limits"): a regular file's size
/// is checked before anything is read; anything else is read through `take(cap + 1)`, so at
/// most `cap + 1` bytes are ever held, and one byte past the cap refuses the input in the same
/// one line. `what` names the kind of file in that line (`a data file`, `a script`).
pub fn read_bounded(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, SpecError> {
    use std::io::Read;
    let origin = path.display().to_string();
    let io = |e: std::io::Error| SpecError::Io {
        origin: origin.clone(),
        message: io_message(&e),
    };
    let too_big = || SpecError::Io {
        origin: origin.clone(),
        message: format!("larger than the {cap} bytes {what} may have"),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(SpecError::Io {
            origin,
            message: "is a directory, not a file".into(),
        });
    }
    if meta.is_file() && meta.len() > cap {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(too_big());
    }
    Ok(bytes)
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

/// A value checked after parsing and refused: `(field, message)` located in `text` by the field's
/// dotted path ([`find_field`]).
pub fn invalid_at(origin: &str, text: &str, (field, message): (String, String)) -> SpecError {
    let (line, column) = find_field(text, &field);
    SpecError::Invalid {
        origin: origin.to_string(),
        line,
        column,
        field,
        message,
    }
}

/// `text` cut to its first `max` characters, with how long it was, for one-line messages that
/// quote an input (a 100,000-character tool name is not echoed whole).
pub fn elide(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((at, _)) => format!("{}… ({} bytes in all)", &text[..at], text.len()).into(),
    }
}

/// A physical quantity is a finite number in `lo..=hi` (NaN and the infinities never are);
/// otherwise why not, in `unit`s (board files, worlds, flags: docs/guarantees.md, "Input limits").
pub fn within(value: f64, lo: f64, hi: f64, unit: &str) -> Result<(), String> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        return Ok(());
    }
    Err(format!("{value} {unit} is outside {lo}..={hi} {unit}"))
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

/// At most this many problems of one file are reported in one run.
pub const MAX_ERRORS: usize = 20;

/// Every problem of one data file, in file order (`Display`: one `file:line:column: reason` per
/// line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl SpecErrors {
    /// Sorts by position, drops exact repeats, keeps at most [`MAX_ERRORS`] (saying how many more
    /// there were).
    pub fn tidy(mut errors: Vec<SpecError>) -> SpecErrors {
        errors.sort_by_key(|e| e.location().unwrap_or((0, 0)));
        errors.dedup();
        if errors.len() > MAX_ERRORS {
            let more = errors.len() - MAX_ERRORS;
            errors.truncate(MAX_ERRORS);
            let origin = match &errors[0] {
                SpecError::Io { origin, .. }
                | SpecError::NotUtf8 { origin, .. }
                | SpecError::Yaml { origin, .. }
                | SpecError::Invalid { origin, .. } => origin.clone(),
            };
            errors.push(SpecError::Io {
                origin,
                message: format!("{more} more problem(s) not shown"),
            });
        }
        SpecErrors(errors)
    }
}

impl std::fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

impl From<SpecError> for SpecErrors {
    fn from(e: SpecError) -> SpecErrors {
        SpecErrors(vec![e])
    }
}

/// Like [`from_yaml`], but keeps going after a shape error: the list item (or top-level key)
/// holding the error is blanked out — line numbers kept — and the text parsed again, so one run
/// finds every independent mistake of a file (up to [`MAX_ERRORS`]). Returns the value parsed
/// from what was left (to validate further) and the errors, in file order.
///
/// The recovery is textual and indentation-based (block YAML as our files are written); it stops
/// when a blanked text fails at a place already reported, or with a `missing field` that only the
/// blanking caused.
pub fn from_yaml_recovering<T: DeserializeOwned>(origin: &str, text: &str) -> (Option<T>, Vec<SpecError>) {
    let mut work: Vec<String> = text.lines().map(str::to_string).collect();
    let mut errors: Vec<SpecError> = Vec::new();
    let mut blanked_keys: Vec<String> = Vec::new();
    loop {
        let joined = work.join("\n");
        let e = match from_yaml::<T>(origin, &joined) {
            Ok(v) => return (Some(v), errors),
            Err(e) => e,
        };
        let SpecError::Yaml { line, message, .. } = &e else {
            errors.push(e);
            return (None, errors);
        };
        if blanked_keys
            .iter()
            .any(|k| message.contains(&format!("missing field `{k}`")))
            || errors.contains(&e)
        {
            return (None, errors);
        }
        let line = *line as usize;
        // Blanking cannot supply what is absent.
        let absent = message.starts_with("missing field");
        errors.push(e);
        if absent {
            return (None, errors);
        }
        if errors.len() > MAX_ERRORS {
            return (None, errors);
        }
        match blank_block(&mut work, line) {
            Some(Blanked::TopLevelKey(k)) => blanked_keys.push(k),
            Some(Blanked::Item) => {}
            None => return (None, errors),
        }
        // Nothing left to learn from an empty document.
        if work
            .iter()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return (None, errors);
        }
    }
}

/// What [`blank_block`] removed.
enum Blanked {
    Item,
    TopLevelKey(String),
}

/// Blanks the innermost list item holding 1-based `line` (or, outside any item, the top-level
/// key holding it). A parent left without children gets `[]` (it held items) or `{}`.
fn blank_block(lines: &mut [String], line: usize) -> Option<Blanked> {
    let meaningful = |l: &str| {
        let t = l.trim_start();
        !t.is_empty() && !t.starts_with('#')
    };
    let indent = |l: &str| l.len() - l.trim_start().len();
    let is_item = |l: &str| {
        let t = l.trim_start();
        t == "-" || t.starts_with("- ")
    };
    let mut at = line.checked_sub(1)?.min(lines.len().checked_sub(1)?);
    while !meaningful(&lines[at]) {
        at = at.checked_sub(1)?;
    }
    // The innermost item starting at or above `at` whose content encloses `at`.
    let mut start = None;
    let mut reach = indent(&lines[at]) + 1;
    for i in (0..=at).rev() {
        let l = &lines[i];
        if !meaningful(l) {
            continue;
        }
        let d = indent(l);
        if d < reach {
            if is_item(l) {
                start = Some(i);
                break;
            }
            if d == 0 {
                start = None;
                at = i;
                break;
            }
            reach = d;
        }
    }
    let (first, kind) = match start {
        Some(i) => (i, Blanked::Item),
        None => {
            let mut i = at;
            while indent(&lines[i]) > 0 || !meaningful(&lines[i]) {
                i = i.checked_sub(1)?;
            }
            let key = lines[i].split(':').next().unwrap_or_default().trim().to_string();
            (i, Blanked::TopLevelKey(key))
        }
    };
    let own = indent(&lines[first]);
    let mut end = first + 1;
    while end < lines.len() && (!meaningful(&lines[end]) || indent(&lines[end]) > own) {
        end += 1;
    }
    for l in &mut lines[first..end] {
        l.clear();
    }
    // A parent key left with no items would turn into `null`: make it an empty list.
    if matches!(kind, Blanked::Item)
        && let Some(p) = (0..first)
            .rev()
            .find(|&i| meaningful(&lines[i]) && (indent(&lines[i]) < own || !is_item(&lines[i])))
    {
        let pd = indent(&lines[p]);
        let has_children = (p + 1..lines.len()).find(|&i| meaningful(&lines[i])).is_some_and(|j| {
            let jd = indent(&lines[j]);
            jd > pd || (jd == pd && is_item(&lines[j]) && !is_item(&lines[p]))
        });
        if !has_children && lines[p].trim_end().ends_with(':') {
            lines[p].push_str(" []");
        }
    }
    Some(kind)
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
    let mut last: Option<usize> = None;
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
                last = Some(i);
                from = if index.is_some() { i } else { i + 1 };
                min_indent = indent as isize + if index.is_some() { 0 } else { 1 };
            }
            None => {
                // A key inside a flow mapping on the line found last (`amplifier: { supply_v: -5 }`).
                if let Some(column) = last.and_then(|i| flow_key_column(lines[i], &key)) {
                    found.1 = column;
                }
                break;
            }
        }
    }
    found
}

/// The 1-based column of `key:` inside a flow mapping of `line` (after a `{` or a `,`).
fn flow_key_column(line: &str, key: &str) -> Option<u64> {
    if key.is_empty() {
        return None;
    }
    let pattern = format!("{key}:");
    let open = line.find('{')?;
    let mut at = open;
    while let Some(off) = line[at..].find(&pattern) {
        let start = at + off;
        let before = line[open..start].trim_end().chars().last();
        if matches!(before, Some('{' | ',')) {
            return Some(line[..start].chars().count() as u64 + 1);
        }
        at = start + pattern.len();
    }
    None
}

/// The files a data file or a script names (WAV recordings), loaded by whoever drives the sim:
/// the sim crate reads no files itself.
pub trait Resources: Send + Sync {
    /// Loads the WAV file `path` as mono int16 PCM: `(rate, samples)`, or why it cannot be had.
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String>;
}

/// No files: every WAV named fails with a clear message.
pub struct NoFiles;

impl Resources for NoFiles {
    fn load_wav(&self, path: &str) -> Result<(u32, Vec<i16>), String> {
        Err(format!("{path}: WAV files are not available here"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_point_at_their_keys() {
        let text = "name: x\ndisplay:\n  kind: oled\n  default_theme: light\nboard_tools:\n  - lamp: {gpio: 99}\n  - tool:\n      name: a\n";
        assert_eq!(find_field(text, "display.default_theme"), (4, 3));
        assert_eq!(find_field(text, "board_tools[1].tool.name"), (8, 7));
        // Inside a flow mapping: the key itself.
        assert_eq!(find_field(text, "board_tools[0].lamp.gpio"), (6, 12));
        assert_eq!(find_field(text, "nope"), (1, 1));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        items: Vec<Item>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        n: u32,
    }

    fn positions(text: &str) -> Vec<(u64, u64)> {
        let (_, errors) = from_yaml_recovering::<Doc>("d.yaml", text);
        errors.iter().filter_map(SpecError::location).collect()
    }

    #[test]
    fn every_independent_mistake_is_reported_once_in_file_order() {
        let text = "name: x\nitems:\n  - n: 1\n  - n: two\n  - m: 3\n  - n: 4\nextra: 1\n";
        assert_eq!(positions(text), [(4, 8), (5, 5), (7, 1)]);
    }

    #[test]
    fn blanking_the_only_item_leaves_an_empty_list_not_null() {
        let (doc, errors) = from_yaml_recovering::<Doc>("d.yaml", "name: x\nitems:\n  - n: bad\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(doc.is_some_and(|d| d.items.is_empty()));
    }

    #[test]
    fn a_missing_field_or_a_syntax_error_ends_the_search() {
        assert_eq!(
            positions("items: []\nnaem: x\n").len(),
            2,
            "unknown key, then the missing name"
        );
        assert_eq!(positions("name: [\n").len(), 1);
        assert_eq!(positions("name: x\n").len(), 0);
    }

    #[test]
    fn errors_are_capped() {
        let mut text = "name: x\nitems:\n".to_string();
        for _ in 0..50 {
            text.push_str("  - n: bad\n");
        }
        let (_, errors) = from_yaml_recovering::<Doc>("d.yaml", &text);
        let tidy = SpecErrors::tidy(errors);
        assert_eq!(tidy.0.len(), MAX_ERRORS + 1);
        assert!(tidy.to_string().ends_with("more problem(s) not shown"), "{tidy}");
    }

    #[test]
    fn non_utf8_is_located() {
        let err = text_from_bytes("f.yaml", b"a: 1\nb: \xff\n".to_vec()).unwrap_err();
        assert_eq!(err.location(), Some((2, 4)));
    }
}
