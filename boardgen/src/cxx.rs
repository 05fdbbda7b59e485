//! Reading C++ source text without a C++ parser: balanced calls, top-level argument lists,
//! string literals, lambda bodies. Works on preprocessed text (no comments, no directives).

use crate::pp::skip_literal;

/// A call `name(…)` found in the text: where it starts and its argument text.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// Byte offset of the name.
    pub at: usize,
    /// The text between the parentheses.
    pub args: &'a str,
    /// Byte offset just after the closing parenthesis.
    pub end: usize,
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Walks `b` from `from`, keeping the bracket depth (string literals skipped), to the first
/// byte where `stop(byte, depth after it)` holds.
fn scan(b: &[u8], from: usize, stop: impl Fn(u8, i32) -> bool) -> Option<usize> {
    let mut depth = 0i32;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        if stop(b[i], depth) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The index just after the bracket matching the one at `open` (string literals skipped).
pub fn matching(b: &[u8], open: usize) -> Option<usize> {
    scan(b, open, |c, depth| matches!(c, b')' | b']' | b'}') && depth == 0).map(|i| i + 1)
}

/// Every call of `name` (a whole identifier, optionally qualified like `x.name` or `x->name`)
/// outside string literals, in text order.
pub fn calls<'a>(text: &'a str, name: &str) -> Vec<Call<'a>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' || b[i] == b'\'' {
            i = skip_literal(b, i);
            continue;
        }
        if text[i..].starts_with(name) && (i == 0 || !ident_byte(b[i - 1])) {
            let mut j = i + name.len();
            if j < b.len() && ident_byte(b[j]) {
                i += 1;
                continue;
            }
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if j < b.len()
                && b[j] == b'('
                && let Some(end) = matching(b, j)
            {
                out.push(Call {
                    at: i,
                    args: &text[j + 1..end - 1],
                    end,
                });
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The arguments of an argument list, split at top-level commas and trimmed.
pub fn split_args(args: &str) -> Vec<&str> {
    let b = args.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = top_level(b, start, b',');
        if end == b.len() {
            break;
        }
        out.push(args[start..end].trim());
        start = end + 1;
    }
    let last = args[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// The index of the first `stop` byte at bracket depth 0 from `from` (string literals skipped),
/// or the length of `b`.
fn top_level(b: &[u8], from: usize, stop: u8) -> usize {
    scan(b, from, |c, depth| c == stop && depth == 0).unwrap_or(b.len())
}

/// A string literal or several adjacent ones (`"a" "b"`, `u8"…"`), decoded; `None` when the
/// text is anything else (a variable, a `std::string` sum, a macro).
pub fn string_literal(text: &str) -> Option<String> {
    let t = text.trim();
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut any = false;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if t[i..].starts_with("u8\"") {
            i += 2;
        }
        if b[i] != b'"' {
            return None;
        }
        any = true;
        let end = skip_literal(b, i);
        decode_into(&b[i + 1..end - 1], &mut out)?;
        i = end;
    }
    if !any {
        return None;
    }
    String::from_utf8(out).ok()
}

fn decode_into(b: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'0' => out.push(0),
            b'\\' => out.push(b'\\'),
            b'"' => out.push(b'"'),
            b'\'' => out.push(b'\''),
            b'x' => {
                let s = i;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
                out.push(u8::from_str_radix(std::str::from_utf8(&b[s..i]).ok()?, 16).ok()?);
            }
            b'u' => {
                let h = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
                let ch = char::from_u32(u32::from_str_radix(h, 16).ok()?)?;
                let mut buf = [0; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                i += 4;
            }
            _ => return None,
        }
    }
    Some(())
}

/// 1-based line of byte `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].bytes().filter(|&c| c == b'\n').count() + 1
}

/// The body `{…}` of the first lambda in `text` (the text after its `{`, before its `}`).
pub fn lambda_body(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let start = text.find('[')?;
    let open = start + text[start..].find('{')?;
    let end = matching(b, open)?;
    Some(&text[open + 1..end - 1])
}

/// The `return` expressions of a function body, in order (nested lambdas' returns excluded).
pub fn returns(body: &str) -> Vec<String> {
    let b = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                i = skip_literal(b, i);
                continue;
            }
            b'[' => {
                // A nested lambda `[…](…) { … }` or `[…] { … }`: skip its body.
                if let Some(close) = matching(b, i) {
                    let mut j = close;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j < b.len()
                        && b[j] == b'('
                        && let Some(e) = matching(b, j)
                    {
                        j = e;
                    }
                    let rest = &body[j..];
                    let brace = rest.find('{');
                    let semi = rest.find([';', ')', ',']);
                    if let Some(br) = brace
                        && semi.is_none_or(|s| br < s)
                        && let Some(e) = matching(b, j + br)
                    {
                        i = e;
                        continue;
                    }
                }
            }
            _ => {}
        }
        if body[i..].starts_with("return")
            && (i == 0 || !ident_byte(b[i - 1]))
            && !b.get(i + 6).is_some_and(|c| ident_byte(*c))
        {
            let rest = &body[i + 6..];
            let j = top_level(rest.as_bytes(), 0, b';');
            out.push(rest[..j.min(rest.len())].trim().to_string());
            i += 6 + j;
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_concatenate_and_decode() {
        assert_eq!(string_literal(r#""a\n" "b\"c""#).as_deref(), Some("a\nb\"c"));
        assert_eq!(string_literal(r#"u8"音量""#).as_deref(), Some("音量"));
        assert_eq!(string_literal("desc + \"x\""), None);
        assert_eq!(string_literal("DESC"), None);
    }

    #[test]
    fn args_split_at_top_level_only() {
        assert_eq!(
            split_args(r#"a, f(b, c), "x,y", {1, 2}"#),
            vec!["a", "f(b, c)", "\"x,y\"", "{1, 2}"]
        );
        assert!(split_args("").is_empty());
    }

    #[test]
    fn returns_skip_nested_lambdas() {
        let body = "auto f = [](int x) { return x; }; if (a) return false; return \"ok\";";
        assert_eq!(returns(body), vec!["false".to_string(), "\"ok\"".to_string()]);
    }
}
