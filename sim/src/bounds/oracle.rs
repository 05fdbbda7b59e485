//! The oracle of the bound properties, written from docs/reference/firmware.md §2.1–§2.3 and
//! §4.5 (not from [`crate::cjson`] or [`crate::mcp`]): which number tokens the firmware reads as
//! `strtod` does, the `valueint` it keeps, what an integer property makes of it, and the exact
//! error reply.

use crate::mcp::Property;

/// True for the number tokens `strtod` and Rust's `f64` parser read alike:
/// `-?D+(.D*)?([eE][+-]?D+)?` (so `01`, `4.`, `1.e5`, `-0` are in; `+5`, `.5`, `1e`, `0x10` out).
pub fn is_number_token(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        digits(&mut i);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// cJSON's `valueint` for a number token (docs/reference/firmware.md §2.3): `d` is the correctly rounded
/// double (as glibc's and newlib's `strtod` give it), then `INT_MAX` when `d ≥ 2147483647`,
/// `INT_MIN` when `d ≤ −2147483648`, otherwise `d` truncated toward zero. `None` when `text` is
/// not a token of `is_number_token` or its exponent has more than 4 digits (Rust's parser is
/// only exact below that when a long mantissa compensates the exponent).
pub fn expected_valueint(text: &str) -> Option<i32> {
    if !is_number_token(text) {
        return None;
    }
    if let Some(e) = text.find(['e', 'E'])
        && text[e + 1..].trim_start_matches(['+', '-']).len() > 4
    {
        return None;
    }
    let d: f64 = text.parse().ok()?;
    Some(if d >= 2_147_483_647.0 {
        i32::MAX
    } else if d <= -2_147_483_648.0 {
        i32::MIN
    } else {
        d.trunc() as i32
    })
}

/// The argument walk's verdict on an integer (docs/reference/firmware.md §4.5 step 2): the value, or the exact
/// error message the firmware replies with (interface data, so a string).
pub fn expected_integer(property: &Property, value: i32) -> Result<i32, String> {
    match property.range() {
        Some((min, _)) if value < min => Err(format!("Value is below minimum allowed: {min}")),
        Some((_, max)) if value > max => Err(format!("Value exceeds maximum allowed: {max}")),
        _ => Ok(value),
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"error":{"message":"<message>"}}`, message inserted raw (§4.6).
pub fn expected_error_reply(id: i32, message: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"message":"{message}"}}}}"#).into_bytes()
}
