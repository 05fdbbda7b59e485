//! cJSON's numbers as `parse_number` reads them: C `strtod` (glibc's, correctly rounded) of the
//! longest run of `0-9 + - e E .`, with the plain integers that ids and volumes are read without
//! the general path.

/// A plain integer of at most this many digits is exact in an f64, as strtod makes it.
pub(super) const EXACT_DIGITS: usize = 15;

/// What `strtod` makes of `[sign] digits` with at most [`EXACT_DIGITS`] digits (nothing when
/// there is no digit): the whole token, exactly.
pub(super) fn plain_integer(token: &[u8]) -> Option<(usize, f64)> {
    let sign = usize::from(matches!(token.first(), Some(b'+' | b'-')));
    if token.len() == sign {
        return None;
    }
    let magnitude = token[sign..].iter().fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
    let value = magnitude as f64;
    Some((token.len(), if token[0] == b'-' { -value } else { value }))
}

/// What C `strtod` consumes from `token` (which holds only `0-9 + - e E .`, C locale):
/// `[sign] digits [. digits] [e [sign] digits]`, at least one mantissa digit, an exponent only
/// when it has a digit. Returns the consumed length and the correctly rounded value.
pub fn strtod(token: &[u8]) -> Option<(usize, f64)> {
    let mut i = 0;
    if matches!(token.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while token.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if digits <= EXACT_DIGITS && !matches!(token.get(i), Some(b'.' | b'e' | b'E')) {
        return plain_integer(&token[..i]);
    }
    if token.get(i) == Some(&b'.') {
        let frac_start = i + 1;
        let mut j = frac_start;
        while token.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        digits += j - frac_start;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(token.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(token.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_digits_start = j;
        while token.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        if j > exp_digits_start {
            i = j;
        }
    }
    // The consumed prefix is plain ASCII in a grammar Rust's float parser accepts.
    let text = std::str::from_utf8(&token[..i]).ok()?;
    let value: f64 = match text.find(['e', 'E']) {
        // `str::parse` stops accumulating exponent digits once the exponent reaches 65536, which is
        // only wrong when a mantissa with that many digits compensates it (glibc strtod is exact).
        Some(e) if text.len() - e > 6 => normalized_value(&text[..e], &text[e + 1..])?,
        _ => text.parse().ok()?,
    };
    Some((i, value))
}

/// `mantissa × 10^exponent` for a long exponent: folds the mantissa's digit positions into a
/// saturated exponent, then lets `str::parse` round the significant digits exactly once.
fn normalized_value(mantissa: &str, exponent: &str) -> Option<f64> {
    let (negative, mantissa) = match mantissa.as_bytes()[0] {
        b'-' => (true, &mantissa[1..]),
        b'+' => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let (exp_negative, exp_digits) = match exponent.as_bytes()[0] {
        b'-' => (true, &exponent[1..]),
        b'+' => (false, &exponent[1..]),
        _ => (false, exponent),
    };
    const CAP: i64 = 1 << 50;
    let mut exp: i64 = 0;
    for d in exp_digits.bytes() {
        exp = (exp * 10 + i64::from(d - b'0')).min(CAP);
    }
    if exp_negative {
        exp = -exp;
    }
    let digits = || int_part.bytes().chain(frac_part.bytes());
    let signed = |v: f64| if negative { -v } else { v };
    let Some(first) = digits().position(|d| d != b'0') else {
        return Some(signed(0.0));
    };
    // value = 0.<significant digits> × 10^x
    let x = exp + int_part.len() as i64 - first as i64;
    if x > 311 {
        return Some(signed(f64::INFINITY));
    }
    if x < -325 {
        return Some(signed(0.0));
    }
    let significant: String = digits().skip(first).map(char::from).collect();
    let value: f64 = format!("0.{significant}e{x}").parse().ok()?;
    Some(signed(value))
}
