//! The `sdkconfig` of one upstream build, as `scripts/build.py` assembles it: the repository's
//! `sdkconfig.defaults` and `sdkconfig.defaults.<target>`, the build's `sdkconfig_append`, the
//! board's `CONFIG_BOARD_TYPE_*` symbol, then the defaults of `main/Kconfig.projbuild` for what
//! is still unset (choices, bools, ints, strings; `depends on` and `if` blocks honoured). Kconfig
//! files of other components (ESP-IDF, LVGL, esp-sr) are not read: their defaults are absent.

use std::collections::BTreeMap;

use crate::pp::{Defines, eval_if};

/// Symbol → value (`y`, `n`, a number or a quoted string), without the `CONFIG_` prefix.
#[derive(Clone, Debug, Default)]
pub struct Sdkconfig {
    /// The assignments in effect.
    pub values: BTreeMap<String, String>,
}

impl Sdkconfig {
    /// Applies `CONFIG_X=v` lines (comments and blanks skipped; `# CONFIG_X is not set` is `n`).
    pub fn apply_lines<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) {
        for line in lines {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("# CONFIG_") {
                if let Some(sym) = rest.strip_suffix(" is not set") {
                    self.values.insert(sym.to_string(), "n".into());
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix("CONFIG_")
                && let Some((k, v)) = rest.split_once('=')
            {
                self.values.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }

    /// `y` symbols and numbers/strings as preprocessor macros (`CONFIG_X` → `1`).
    pub fn defines(&self) -> Defines {
        let mut d = Defines::default();
        for (k, v) in &self.values {
            match v.as_str() {
                "n" => {}
                "y" => d.set(&format!("CONFIG_{k}"), "1"),
                _ => d.set(&format!("CONFIG_{k}"), v),
            }
        }
        d
    }

    fn is_set(&self, sym: &str) -> bool {
        self.values.contains_key(sym)
    }

    /// Whether a bool symbol is `y`.
    pub fn yes(&self, sym: &str) -> bool {
        self.values.get(sym).is_some_and(|v| v == "y")
    }

    /// A Kconfig expression (`A && !(B || C = y)`) evaluated on the current values.
    fn eval(&self, expr: &str) -> bool {
        let mut c = String::new();
        let b = expr.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let ch = b[i];
            if ch.is_ascii_alphabetic() || ch == b'_' {
                let s = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let sym = &expr[s..i];
                let v = match sym {
                    "y" => "1".to_string(),
                    "n" => "0".to_string(),
                    _ => match self.values.get(sym).map(String::as_str) {
                        Some("y") => "1".into(),
                        Some("n") | None => "0".into(),
                        Some(v) if v.parse::<i64>().is_ok() => v.to_string(),
                        Some(_) => "1".into(),
                    },
                };
                c.push_str(&v);
                continue;
            }
            if ch == b'=' && (i == 0 || (b[i - 1] != b'!' && b[i - 1] != b'<' && b[i - 1] != b'>')) {
                c.push_str("==");
                i += 1;
                continue;
            }
            c.push(ch as char);
            i += 1;
        }
        eval_if(&c) != 0
    }

    /// Sets the defaults of `kconfig` (the text of `main/Kconfig.projbuild`) for unset symbols.
    pub fn apply_kconfig_defaults(&mut self, kconfig: &str) {
        let entries = parse(kconfig);
        // Two passes: a default may depend on a symbol defined further down.
        for _ in 0..2 {
            for e in &entries {
                self.apply_entry(e);
            }
        }
    }

    fn visible(&self, deps: &[String]) -> bool {
        deps.iter().all(|d| self.eval(d))
    }

    fn apply_entry(&mut self, e: &Entry) {
        match e {
            Entry::Choice {
                deps,
                defaults,
                options,
            } => {
                if !self.visible(deps) {
                    return;
                }
                let visible: Vec<&(String, Vec<String>)> = options.iter().filter(|(_, d)| self.visible(d)).collect();
                if visible.iter().any(|(sym, _)| self.yes(sym)) {
                    for (sym, _) in &visible {
                        if !self.is_set(sym) {
                            self.values.insert(sym.clone(), "n".into());
                        }
                    }
                    return;
                }
                let chosen = defaults
                    .iter()
                    .find(|(sym, cond)| {
                        cond.as_ref().is_none_or(|c| self.eval(c)) && visible.iter().any(|(s, _)| s == sym)
                    })
                    .map(|(s, _)| s.clone())
                    .or_else(|| visible.first().map(|(s, _)| s.clone()));
                if let Some(sym) = chosen {
                    for (s, _) in &visible {
                        self.values
                            .insert(s.clone(), if *s == sym { "y".into() } else { "n".into() });
                    }
                }
            }
            Entry::Config { sym, deps, defaults } => {
                if self.is_set(sym) || !self.visible(deps) {
                    return;
                }
                if let Some((v, _)) = defaults.iter().find(|(_, c)| c.as_ref().is_none_or(|c| self.eval(c))) {
                    let v = if v == "y"
                        || v == "n"
                        || v.starts_with('"')
                        || v.parse::<i64>().is_ok()
                        || v.starts_with("0x")
                    {
                        v.clone()
                    } else {
                        // `default OTHER_SYMBOL`.
                        if self.yes(v) { "y".into() } else { "n".into() }
                    };
                    self.values.insert(sym.clone(), v);
                }
            }
        }
    }
}

/// A Kconfig entry with the conditions of the blocks around it folded into `deps`.
#[derive(Debug)]
enum Entry {
    Choice {
        deps: Vec<String>,
        defaults: Vec<(String, Option<String>)>,
        options: Vec<(String, Vec<String>)>,
    },
    Config {
        sym: String,
        deps: Vec<String>,
        defaults: Vec<(String, Option<String>)>,
    },
}

fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    // Conditions of enclosing `if` / `menu … depends on` blocks.
    let mut blocks: Vec<Option<String>> = Vec::new();
    let mut choice: Option<Entry> = None;
    // The entry whose attributes the following lines give: a config (in or out of a choice).
    let mut current: Option<Entry> = None;
    let mut in_menu_header = false;
    let outer = |blocks: &Vec<Option<String>>| -> Vec<String> { blocks.iter().flatten().cloned().collect() };
    // A `help` text runs while lines are indented deeper than its keyword: free text, never
    // keywords (a line of it may well start with "if" or "default").
    let mut help_indent: Option<usize> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        match help_indent {
            Some(h) if indent > h => continue,
            _ => help_indent = None,
        }
        if line == "help" || line == "---help---" {
            help_indent = Some(indent);
            continue;
        }
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match word {
            "menu" | "mainmenu" => {
                flush(&mut current, &mut choice, &mut out);
                blocks.push(None);
                in_menu_header = true;
            }
            "endmenu" => {
                flush(&mut current, &mut choice, &mut out);
                blocks.pop();
                in_menu_header = false;
            }
            "if" => {
                flush(&mut current, &mut choice, &mut out);
                blocks.push(Some(rest.to_string()));
            }
            "endif" => {
                flush(&mut current, &mut choice, &mut out);
                blocks.pop();
            }
            "choice" => {
                flush(&mut current, &mut choice, &mut out);
                in_menu_header = false;
                choice = Some(Entry::Choice {
                    deps: outer(&blocks),
                    defaults: Vec::new(),
                    options: Vec::new(),
                });
            }
            "endchoice" => {
                flush_config(&mut current, &mut choice, &mut out);
                if let Some(c) = choice.take() {
                    out.push(c);
                }
            }
            "config" | "menuconfig" => {
                flush_config(&mut current, &mut choice, &mut out);
                in_menu_header = false;
                current = Some(Entry::Config {
                    sym: rest.to_string(),
                    deps: outer(&blocks),
                    defaults: Vec::new(),
                });
            }
            "depends" => {
                let cond = rest.strip_prefix("on").unwrap_or(rest).trim().to_string();
                if let Some(Entry::Config { deps, .. }) = current.as_mut() {
                    deps.push(cond);
                } else if let Some(Entry::Choice { deps, .. }) = choice.as_mut() {
                    deps.push(cond);
                } else if in_menu_header && let Some(last) = blocks.last_mut() {
                    *last = Some(cond);
                }
            }
            "default" => {
                let (val, cond) = match rest.split_once(" if ") {
                    Some((v, c)) => (v.trim().to_string(), Some(c.trim().to_string())),
                    None => (rest.to_string(), None),
                };
                if let Some(Entry::Config { defaults, .. }) = current.as_mut() {
                    defaults.push((val, cond));
                } else if let Some(Entry::Choice { defaults, .. }) = choice.as_mut() {
                    defaults.push((val, cond));
                }
            }
            "bool" | "int" | "string" | "hex" | "prompt" | "range" | "select" | "imply" | "source" | "comment"
            | "visible" | "orsource" | "rsource" | "osource" => {}
            _ => {}
        }
    }
    flush(&mut current, &mut choice, &mut out);
    out
}

fn flush_config(current: &mut Option<Entry>, choice: &mut Option<Entry>, out: &mut Vec<Entry>) {
    if let Some(Entry::Config { sym, deps, defaults }) = current.take() {
        match choice.as_mut() {
            Some(Entry::Choice {
                options, deps: cdeps, ..
            }) => {
                let own: Vec<String> = deps.into_iter().filter(|d| !cdeps.contains(d)).collect();
                options.push((sym, own));
            }
            _ => out.push(Entry::Config { sym, deps, defaults }),
        }
    }
}

fn flush(current: &mut Option<Entry>, choice: &mut Option<Entry>, out: &mut Vec<Entry>) {
    flush_config(current, choice, out);
    if let Some(c) = choice.take() {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_defaults_follow_conditions_and_help_text_is_not_read() {
        let kconfig = "
choice PANEL
    prompt \"panel\"
    default PANEL_B if BOARD_X
    default PANEL_A
    config PANEL_A
        bool \"A\"
        help
            if BOARD_X is set
            default PANEL_B
    config PANEL_B
        bool \"B\"
endchoice
config FEATURE
    bool \"f\"
    depends on PANEL_B
    default y
";
        let mut sdk = Sdkconfig::default();
        sdk.apply_kconfig_defaults(kconfig);
        assert!(sdk.yes("PANEL_A") && !sdk.yes("PANEL_B") && !sdk.yes("FEATURE"));
        let mut sdk = Sdkconfig::default();
        sdk.apply_lines(["CONFIG_BOARD_X=y"]);
        sdk.apply_kconfig_defaults(kconfig);
        assert!(sdk.yes("PANEL_B") && !sdk.yes("PANEL_A") && sdk.yes("FEATURE"));
        // An explicit choice wins over the default.
        let mut sdk = Sdkconfig::default();
        sdk.apply_lines(["CONFIG_BOARD_X=y", "CONFIG_PANEL_A=y"]);
        sdk.apply_kconfig_defaults(kconfig);
        assert!(sdk.yes("PANEL_A") && !sdk.yes("PANEL_B"));
    }
}
