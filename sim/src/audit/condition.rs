//! The audit's conditions on a device quantity (docs/audit.md, "The battery"): which quantity
//! a tool sets ([`Quantity`]), its value as read off the twin ([`Val`]: a number or a word), and
//! a condition as a battery writes it (`< before`, `= dark`, `>= 55`: [`Cond`]), parsed and
//! judged.

use serde::Serialize;

/// A device quantity the audit reads off the twin (never through MCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// `AudioCodec::output_volume_`.
    Volume,
    /// Where the backlight is fading to.
    Brightness,
    /// The display's theme.
    Theme,
    /// Boots since power-on (`rebooted`).
    Boots,
}

impl Quantity {
    /// The quantity by its battery name.
    pub fn named(name: &str) -> Option<Quantity> {
        match name {
            "volume" => Some(Quantity::Volume),
            "brightness" => Some(Quantity::Brightness),
            "theme" => Some(Quantity::Theme),
            _ => None,
        }
    }

    /// The quantity a tool changes, for the tools the audit knows.
    pub fn of_tool(tool: &str) -> Option<Quantity> {
        match tool {
            "self.audio_speaker.set_volume" => Some(Quantity::Volume),
            "self.screen.set_brightness" => Some(Quantity::Brightness),
            "self.screen.set_theme" => Some(Quantity::Theme),
            "self.reboot" => Some(Quantity::Boots),
            _ => None,
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Quantity::Volume => "volume",
            Quantity::Brightness => "brightness",
            Quantity::Theme => "theme",
            Quantity::Boots => "boots",
        }
    }
}

/// A value a condition compares: a number or a word.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Val {
    /// A number (volume, brightness, boots).
    Num(f64),
    /// A word (a theme).
    Word(String),
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::Num(n) => write!(f, "{n}"),
            Val::Word(w) => f.write_str(w),
        }
    }
}

impl Val {
    /// A JSON argument as a value (numbers and strings; anything else is not comparable).
    pub fn of_json(v: &serde_json::Value) -> Option<Val> {
        match v {
            serde_json::Value::Number(n) => n.as_f64().map(Val::Num),
            serde_json::Value::String(s) => Some(Val::Word(s.clone())),
            _ => None,
        }
    }
}

/// How a condition compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=`
    Eq,
    /// `!=`
    Ne,
}

/// What a condition compares with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Rhs {
    /// The device's value before the request.
    Before,
    /// A fixed value.
    Fixed(Val),
}

/// One parsed condition: `< before`, `= 50`, `= dark`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cond {
    /// The comparison.
    pub op: Op,
    /// What it compares with.
    pub rhs: Rhs,
    /// As written.
    pub text: String,
}

impl Cond {
    /// Parses `OP VALUE` (`<`, `<=`, `>`, `>=`, `=`, `!=`; `before`, a number or a word).
    pub fn parse(text: &str) -> Result<Cond, String> {
        let t = text.trim();
        let ops = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
            ("=", Op::Eq),
        ];
        let Some((sym, op)) = ops.iter().find(|(s, _)| t.starts_with(s)) else {
            return Err(format!(
                "`{}`: a condition is an operator (<, <=, >, >=, =, !=) and a value, e.g. \"< before\" or \"= 50\"",
                crate::spec::elide(t, 40)
            ));
        };
        let rest = t[sym.len()..].trim();
        if rest.is_empty() {
            return Err(format!("`{t}`: the condition has no value after `{sym}`"));
        }
        let rhs = if rest == "before" {
            Rhs::Before
        } else if let Ok(n) = rest.parse::<f64>() {
            if !n.is_finite() {
                return Err(format!("`{t}`: {rest} is not a finite number"));
            }
            Rhs::Fixed(Val::Num(n))
        } else if rest.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_') {
            Rhs::Fixed(Val::Word(rest.to_string()))
        } else {
            return Err(format!("`{t}`: the value must be `before`, a number or one word"));
        };
        if matches!(rhs, Rhs::Fixed(Val::Word(_))) && !matches!(op, Op::Eq | Op::Ne) {
            return Err(format!("`{t}`: a word is compared with = or != only"));
        }
        Ok(Cond {
            op: *op,
            rhs,
            text: t.to_string(),
        })
    }

    /// Whether `v` meets the condition, `before` being the device's value before the request.
    pub fn holds(&self, v: &Val, before: Option<&Val>) -> bool {
        let rhs = match &self.rhs {
            Rhs::Before => match before {
                Some(b) => b,
                None => return false,
            },
            Rhs::Fixed(x) => x,
        };
        match (v, rhs) {
            (Val::Num(a), Val::Num(b)) => match self.op {
                Op::Lt => a < b,
                Op::Le => a <= b,
                Op::Gt => a > b,
                Op::Ge => a >= b,
                Op::Eq => a == b,
                Op::Ne => a != b,
            },
            (Val::Word(a), Val::Word(b)) => match self.op {
                Op::Eq => a.eq_ignore_ascii_case(b),
                Op::Ne => !a.eq_ignore_ascii_case(b),
                _ => false,
            },
            // A number is never a word: `= dark` does not hold for 50.
            _ => self.op == Op::Ne,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_and_compare_as_written() {
        let c = Cond::parse("< before").unwrap();
        assert!(c.holds(&Val::Num(40.0), Some(&Val::Num(70.0))));
        assert!(!c.holds(&Val::Num(70.0), Some(&Val::Num(70.0))));
        assert!(!c.holds(&Val::Num(40.0), None), "no before, no verdict of less");
        let d = Cond::parse("= dark").unwrap();
        assert!(d.holds(&Val::Word("DARK".into()), None));
        assert!(!d.holds(&Val::Num(1.0), None));
        assert!(Cond::parse("!= dark").unwrap().holds(&Val::Num(1.0), None));
        assert!(Cond::parse(">= 55").unwrap().holds(&Val::Num(55.5), None));
        for bad in ["before", "<", "~ 3", "< dark", "= inf", "= two words"] {
            assert!(Cond::parse(bad).is_err(), "{bad}");
        }
    }
}
