//! A small C preprocessor: enough of one to read a board's `config.h` and `.cc` the way the
//! compiler sees them for one build. Comments are removed, `#if`/`#ifdef`/`#elif`/`#else`/
//! `#endif` select lines by the build's `sdkconfig` and the files' own `#define`s, local
//! `#include "…"` files of the board folder are read in place, and object-like macros are kept
//! for [`Defines::resolve`]. Function-like macros are recorded but never expanded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Macro values in effect (object-like macros: name → replacement text).
#[derive(Clone, Debug, Default)]
pub struct Defines {
    map: BTreeMap<String, String>,
}

impl Defines {
    /// Defines `name` as `value`.
    pub fn set(&mut self, name: &str, value: &str) {
        self.map.insert(name.to_string(), value.trim().to_string());
    }

    /// Removes `name`.
    pub fn unset(&mut self, name: &str) {
        self.map.remove(name);
    }

    /// Whether `name` is defined.
    pub fn defined(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// The raw replacement text of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// `text` with macros replaced until nothing changes (at most 16 rounds), outer parentheses
    /// and casts like `(gpio_num_t)` left in place.
    pub fn expand(&self, text: &str) -> String {
        let mut cur = text.trim().to_string();
        for _ in 0..16 {
            let next = replace_idents(&cur, |id| self.map.get(id).cloned());
            if next == cur {
                break;
            }
            cur = next;
        }
        cur
    }

    /// `text` as an integer after expansion and a few well-known ESP-IDF constants
    /// (`GPIO_NUM_n`, `I2C_NUM_n`, `GPIO_NUM_NC` = −1, `true`/`false`).
    pub fn resolve_int(&self, text: &str) -> Option<i64> {
        let e = self.expand(text);
        eval_int(&e, &|id| self.get(id).map(str::to_string))
    }
}

/// Replaces each identifier of `text` for which `f` answers.
fn replace_idents(text: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            let end = skip_literal(b, i);
            out.push_str(&text[i..end]);
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let id = &text[start..i];
            match f(id) {
                Some(v) => out.push_str(&v),
                None => out.push_str(id),
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            out.push_str(&text[start..i]);
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The end (exclusive) of the string or character literal starting at `i`.
pub fn skip_literal(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q {
            return j + 1;
        }
        j += 1;
    }
    b.len()
}

/// Comments removed (replaced by a space, newlines kept so line numbers hold), line
/// continuations joined.
/// Joins lines that end in a backslash, and puts the line ends it took out after the joined
/// line, so every later line keeps its number (citations count lines).
fn join_continuations(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut owed = 0;
    let mut lines = src.split('\n').peekable();
    while let Some(line) = lines.next() {
        match line.strip_suffix('\\') {
            Some(joined) if lines.peek().is_some() => {
                out.push_str(joined);
                owed += 1;
            }
            _ => {
                out.push_str(line);
                if lines.peek().is_some() {
                    out.push('\n');
                    for _ in 0..owed {
                        out.push('\n');
                    }
                }
                owed = 0;
            }
        }
    }
    out
}

pub fn strip_comments(src: &str) -> String {
    let src = join_continuations(&src.replace("\r\n", "\n"));
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' => {
                let end = skip_literal(b, i);
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        out.push(b'\n');
                    }
                    i += 1;
                }
                i += 2;
                out.push(b' ');
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// One `#if` level: whether a branch was taken, whether the current one is, whether the
/// enclosing level is active.
struct Level {
    taken: bool,
    active: bool,
    parent: bool,
}

/// Preprocesses `path` (read from `dir` for local includes) with `defs`, which it extends.
/// Returns the active text: the file's own lines at their line numbers, then what its local
/// includes hold.
pub fn preprocess(path: &Path, defs: &mut Defines, depth: u32) -> String {
    let Ok(raw) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let text = strip_comments(&raw);
    let mut out = String::new();
    let mut included = String::new();
    let mut stack: Vec<Level> = Vec::new();
    let active = |s: &Vec<Level>| s.last().is_none_or(|l| l.active);
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(d) = t.strip_prefix('#') {
            let d = d.trim_start();
            let (word, rest) = split_word(d);
            match word {
                "ifdef" | "ifndef" | "if" => {
                    let parent = active(&stack);
                    let cond = parent
                        && match word {
                            "ifdef" => defs.defined(first_ident(rest)),
                            "ifndef" => !defs.defined(first_ident(rest)),
                            _ => eval_cond(rest, defs),
                        };
                    stack.push(Level {
                        taken: cond,
                        active: cond,
                        parent,
                    });
                }
                "elif" | "elifdef" | "elifndef" => {
                    if let Some(l) = stack.last_mut() {
                        let cond = match word {
                            "elifdef" => defs.defined(first_ident(rest)),
                            "elifndef" => !defs.defined(first_ident(rest)),
                            _ => eval_cond(rest, defs),
                        };
                        let go = l.parent && !l.taken && cond;
                        l.active = go;
                        l.taken |= go;
                    }
                }
                "else" => {
                    if let Some(l) = stack.last_mut() {
                        l.active = l.parent && !l.taken;
                        l.taken = true;
                    }
                }
                "endif" => {
                    stack.pop();
                }
                "define" if active(&stack) => {
                    let (name, body) = split_macro(rest);
                    if !name.is_empty() {
                        defs.set(&name, &body);
                    }
                }
                "undef" if active(&stack) => defs.unset(first_ident(rest)),
                "include" if active(&stack) && depth < 8 => {
                    if let Some(f) = rest.trim().strip_prefix('"').and_then(|r| r.split('"').next()) {
                        let p: PathBuf = dir.join(f);
                        if p.is_file() {
                            // Read here (its defines count from this point on), placed after the
                            // file's own lines, which so keep their line numbers for citations.
                            included.push_str(&preprocess(&p, defs, depth + 1));
                        }
                    }
                }
                _ => {}
            }
            out.push('\n');
            continue;
        }
        if active(&stack) {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push_str(&included);
    out
}

/// A board folder: its `config.h` (the defines it leaves) and every other source (`.cc`, `.c`,
/// `.cpp`, `.h`), each preprocessed with `base`, in file-name order: (name, text, defines).
pub fn preprocess_folder(folder: &Path, base: &Defines) -> (Defines, Vec<(String, String, Defines)>) {
    let mut config_defs = base.clone();
    preprocess(&folder.join("config.h"), &mut config_defs, 0);
    let mut names: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    names.sort();
    let mut sources = Vec::new();
    for p in names {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        let name = p.file_name().unwrap_or_default().to_string_lossy().to_string();
        if !matches!(ext, "cc" | "c" | "h" | "cpp") || name == "config.h" {
            continue;
        }
        let mut defs = base.clone();
        let text = preprocess(&p, &mut defs, 0);
        sources.push((name, text, defs));
    }
    (config_defs, sources)
}

fn split_word(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn first_ident(s: &str) -> &str {
    split_word(s.trim_start()).0
}

/// `NAME value` or `NAME(args) body` → (name, value); function-like macros keep `(args) body`
/// as their value with a marker so they never resolve to a number.
fn split_macro(rest: &str) -> (String, String) {
    let rest = rest.trim_start();
    let (name, after) = split_word(rest);
    if after.starts_with('(') {
        return (name.to_string(), format!("\u{1}{after}"));
    }
    (name.to_string(), after.trim().to_string())
}

/// Evaluates a `#if` expression.
fn eval_cond(expr: &str, defs: &Defines) -> bool {
    // `defined(X)` / `defined X` first, before macro expansion.
    let mut s = String::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if expr[i..].starts_with("defined") && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) {
            let mut j = i + "defined".len();
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let paren = j < b.len() && b[j] == b'(';
            if paren {
                j += 1;
            }
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let start = j;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let name = &expr[start..j];
            if paren {
                while j < b.len() && b[j] != b')' {
                    j += 1;
                }
                j += 1;
            }
            s.push_str(if defs.defined(name) { " 1 " } else { " 0 " });
            i = j;
            continue;
        }
        let ch = expr[i..].chars().next().unwrap_or(' ');
        s.push(ch);
        i += ch.len_utf8();
    }
    eval_if(&defs.expand(&s)) != 0
}

/// Integer value of a C constant expression (identifiers unknown to `lookup` are 0 in `#if`,
/// but make the value unknown elsewhere: see [`Defines::resolve_int`]).
pub fn eval_int(expr: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Option<i64> {
    let toks = tokenize(expr)?;
    let mut p = Parser {
        toks,
        pos: 0,
        lookup,
        strict: true,
    };
    let v = p.ternary()?;
    if p.pos != p.toks.len() {
        return None;
    }
    Some(v)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(i64),
    Id(String),
    Op(&'static str),
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    const OPS: [&str; 22] = [
        "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "!", "<", ">", "+", "-", "*", "/", "%", "(", ")", "?", ":",
        "&", "|",
    ];
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            let lit = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = lit.strip_prefix("0x").or_else(|| lit.strip_prefix("0X")) {
                i64::from_str_radix(h, 16).ok()?
            } else if let Some(bin) = lit.strip_prefix("0b") {
                i64::from_str_radix(bin, 2).ok()?
            } else if lit.len() > 1 && lit.starts_with('0') {
                i64::from_str_radix(&lit[1..], 8).ok()?
            } else if lit.contains('.') {
                lit.parse::<f64>().ok()? as i64
            } else {
                lit.parse().ok()?
            };
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Id(s[start..i].to_string()));
        } else {
            let op = OPS.iter().find(|o| s[i..].starts_with(**o))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Some(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    strict: bool,
}

impl Parser<'_> {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.toks.get(self.pos), Some(Tok::Op(o)) if *o == op)
    }
    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn ternary(&mut self) -> Option<i64> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.ternary()?;
            if !self.eat(":") {
                return None;
            }
            let b = self.ternary()?;
            return Some(if c != 0 { a } else { b });
        }
        Some(c)
    }
    fn binary(&mut self, min_prec: u8) -> Option<i64> {
        let mut lhs = self.unary()?;
        while let Some(Tok::Op(op)) = self.toks.get(self.pos).cloned() {
            let prec = match op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "&" => 4,
                "==" | "!=" => 5,
                "<" | ">" | "<=" | ">=" => 6,
                "<<" | ">>" => 7,
                "+" | "-" => 8,
                "*" | "/" | "%" => 9,
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = match op {
                "||" => i64::from(lhs != 0 || rhs != 0),
                "&&" => i64::from(lhs != 0 && rhs != 0),
                "|" => lhs | rhs,
                "&" => lhs & rhs,
                "==" => i64::from(lhs == rhs),
                "!=" => i64::from(lhs != rhs),
                "<" => i64::from(lhs < rhs),
                ">" => i64::from(lhs > rhs),
                "<=" => i64::from(lhs <= rhs),
                ">=" => i64::from(lhs >= rhs),
                "<<" => lhs.checked_shl(u32::try_from(rhs).ok()?)?,
                ">>" => lhs.checked_shr(u32::try_from(rhs).ok()?)?,
                "+" => lhs.checked_add(rhs)?,
                "-" => lhs.checked_sub(rhs)?,
                "*" => lhs.checked_mul(rhs)?,
                "/" => lhs.checked_div(rhs)?,
                _ => lhs.checked_rem(rhs)?,
            };
        }
        Some(lhs)
    }
    fn unary(&mut self) -> Option<i64> {
        if self.eat("!") {
            return Some(i64::from(self.unary()? == 0));
        }
        if self.eat("-") {
            return self.unary()?.checked_neg();
        }
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("(") {
            // A cast `(gpio_num_t)x` or `(int)x`: skip it.
            if let (Some(Tok::Id(_)), true) = (
                self.toks.get(self.pos),
                self.toks.get(self.pos + 1) == Some(&Tok::Op(")")),
            ) {
                let save = self.pos;
                if let Some(Tok::Id(id)) = self.toks.get(self.pos).cloned()
                    && (id.ends_with("_t") || id == "int" || id == "uint8_t")
                {
                    self.pos += 2;
                    return self.unary();
                }
                self.pos = save;
            }
            let v = self.ternary()?;
            if !self.eat(")") {
                return None;
            }
            return Some(v);
        }
        match self.toks.get(self.pos).cloned()? {
            Tok::Num(n) => {
                self.pos += 1;
                Some(n)
            }
            Tok::Id(id) => {
                self.pos += 1;
                let found = known_constant(&id).or_else(|| {
                    let v = (self.lookup)(&id)?;
                    if v.starts_with('\u{1}') {
                        return None;
                    }
                    eval_int(&v, self.lookup)
                });
                // In `#if` an identifier left after expansion is 0, as in C.
                if self.strict { found } else { found.or(Some(0)) }
            }
            Tok::Op(_) => None,
        }
    }
}

/// ESP-IDF and esp_codec_dev constants boards use in `config.h`.
fn known_constant(id: &str) -> Option<i64> {
    if let Some(n) = id.strip_prefix("GPIO_NUM_") {
        return if n == "NC" { Some(-1) } else { n.parse().ok() };
    }
    if let Some(n) = id.strip_prefix("I2C_NUM_") {
        return n.parse().ok();
    }
    if let Some(n) = id.strip_prefix("I2S_NUM_") {
        return n.parse().ok();
    }
    match id {
        "true" => Some(1),
        "false" | "NULL" | "nullptr" => Some(0),
        _ => None,
    }
}

/// `#if` evaluation: identifiers left after expansion count as 0, as in C.
pub fn eval_if(expr: &str) -> i64 {
    let Some(toks) = tokenize(expr) else {
        return 0;
    };
    let mut p = Parser {
        toks,
        pos: 0,
        lookup: &|_| None,
        strict: false,
    };
    p.ternary().filter(|_| p.pos == p.toks.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_lines_and_includes_leave_every_line_at_its_number() {
        assert_eq!(join_continuations("a \\\nb\nc\n"), "a b\n\nc\n");
        let dir = std::env::temp_dir().join(format!("boardgen-pp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("h.h"), "#define X 1\nclass H {};\n").unwrap();
        std::fs::write(
            dir.join("a.cc"),
            "#include \"h.h\"\n#define Y \\\n 2\nint a;\nint b = X;\n",
        )
        .unwrap();
        let mut defs = Defines::default();
        let text = preprocess(&dir.join("a.cc"), &mut defs, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[3], "int a;", "{text}");
        assert_eq!(lines[4], "int b = X;", "{text}");
        assert!(text.contains("class H"), "{text}");
        assert_eq!(defs.resolve_int("X"), Some(1));
        assert_eq!(defs.resolve_int("Y"), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
