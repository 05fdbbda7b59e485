//! The generators of the bound properties: JSON spellings of numbers around and across a
//! parameter's range, values of every wrong JSON type, ASCII case variants of argument keys, and
//! valid values distinct from the current one (for a board author's own proptest cases too).

use proptest::prelude::*;

use crate::mcp::property::{Property, PropertyType, PropertyValue};

pub(super) fn signed(negative: bool, magnitude: &str) -> String {
    if negative {
        format!("-{magnitude}")
    } else {
        magnitude.to_string()
    }
}

/// The same integer `n` written as a JSON number in one of several equivalent spellings:
/// plain, leading zeros, `n.0…`, `D.DDDeK`, `NNN000e-K`, upper-case `E`, `n.e0`.
pub(super) fn spell_integer(n: i64, style: u8) -> String {
    let digits = n.unsigned_abs().to_string();
    let negative = n < 0;
    let body = match style % 7 {
        0 => digits.clone(),
        1 => format!("00{digits}"),
        2 => format!("{digits}.000"),
        3 if digits.len() > 1 => {
            let (head, tail) = digits.split_at(1);
            format!("{head}.{tail}e{}", tail.len())
        }
        4 => format!("{digits}000e-3"),
        5 => format!("{digits}E0"),
        6 => format!("{digits}.e0"),
        _ => digits.clone(),
    };
    signed(negative, &body)
}

/// JSON number tokens cJSON accepts (all satisfy `is_number_token`), weighted toward what
/// breaks range checks: integers and decimals around the range's edges, zero and ±2^31, the same
/// value in other spellings, decimals that truncate into or out of the range (`100.99`,
/// `-0.99`), huge and tiny magnitudes (`1e300`, 600-digit integers, `1e-300`), and arbitrary
/// finite doubles and 64-bit integers.
pub fn json_number(range: Option<(i32, i32)>) -> BoxedStrategy<String> {
    let (min, max) = range.map_or((0, 0), |(a, b)| (i64::from(a), i64::from(b)));
    let anchors = vec![min, max, 0, (min + max) / 2, i64::from(i32::MIN), i64::from(i32::MAX)];
    let near = (proptest::sample::select(anchors.clone()), -3i64..=3).prop_map(|(a, d)| a + d);
    let integers = (near.clone(), any::<u8>()).prop_map(|(n, style)| spell_integer(n, style));
    let decimals = (near, any::<bool>(), proptest::collection::vec(0u8..10, 1..8)).prop_map(|(n, neg, frac)| {
        let frac: String = frac.iter().map(|d| char::from(b'0' + d)).collect();
        // A negative zero whole part keeps its sign: `-0.99` truncates to 0.
        signed(n < 0 || (n == 0 && neg), &format!("{}.{frac}", n.unsigned_abs()))
    });
    let huge = prop_oneof![
        (any::<bool>(), 10u32..=400).prop_map(|(neg, k)| signed(neg, &format!("1e{k}"))),
        (any::<bool>(), 10usize..=600).prop_map(|(neg, n)| signed(neg, &"9".repeat(n))),
        (any::<bool>(), 0u32..=9).prop_map(|(neg, k)| signed(neg, &format!("1e99{k}"))),
    ];
    let tiny = prop_oneof![
        (any::<bool>(), 1u32..=330).prop_map(|(neg, k)| signed(neg, &format!("1e-{k}"))),
        (any::<bool>(), 0usize..=400).prop_map(|(neg, n)| signed(neg, &format!("0.{}1", "0".repeat(n)))),
        Just("-0".to_string()),
        Just("-0.0".to_string()),
        Just("0e5".to_string()),
    ];
    // Rust prints finite doubles as `-0`, `0.1`, `1e300` (with `{:e}`) or `1000…0`: all tokens.
    let doubles = (any::<f64>().prop_filter("finite", |d| d.is_finite()), any::<bool>())
        .prop_map(|(d, exp)| if exp { format!("{d:e}") } else { format!("{d}") });
    let wide = any::<i64>().prop_map(|n| n.to_string());
    prop_oneof![
        6 => integers,
        4 => decimals,
        1 => huge,
        1 => tiny,
        2 => doubles,
        1 => wide,
    ]
    .boxed()
}

/// JSON values whose type the argument walk does not accept for a `ty` parameter (docs/reference/firmware.md
/// §4.5 step 2: booleans only from `true`/`false`, integers from any number, strings from
/// strings; `null`, arrays and objects never).
pub fn wrong_type_value(ty: PropertyType) -> BoxedStrategy<String> {
    let always = proptest::sample::select(vec![
        "null".to_string(),
        "[]".to_string(),
        "{}".to_string(),
        "[1]".to_string(),
        r#"{"value":1}"#.to_string(),
        "[true]".to_string(),
    ]);
    let quoted_number = json_number(None).prop_map(|n| json_string(&n));
    match ty {
        PropertyType::Integer => prop_oneof![
            always,
            quoted_number,
            proptest::sample::select(vec!["true".to_string(), "false".to_string(), "\"\"".to_string()]),
        ]
        .boxed(),
        PropertyType::Boolean => prop_oneof![
            always,
            json_number(None),
            proptest::sample::select(vec![
                "\"true\"".to_string(),
                "\"false\"".to_string(),
                "\"\"".to_string()
            ]),
        ]
        .boxed(),
        PropertyType::String => prop_oneof![
            always,
            json_number(None),
            proptest::sample::select(vec!["true".to_string(), "false".to_string(), "[\"x\"]".to_string()]),
        ]
        .boxed(),
    }
}

/// `name` with the case of each ASCII letter flipped or kept at random (bytes ≥ 0x80 kept:
/// cJSON folds ASCII only).
pub fn key_spelling(name: &str) -> BoxedStrategy<String> {
    let name = name.to_string();
    proptest::collection::vec(any::<bool>(), name.chars().count())
        .prop_map(move |flips| {
            name.chars()
                .zip(flips)
                .map(|(c, flip)| match (flip, c) {
                    (true, c) if c.is_ascii_lowercase() => c.to_ascii_uppercase(),
                    (true, c) if c.is_ascii_uppercase() => c.to_ascii_lowercase(),
                    (_, c) => c,
                })
                .collect()
        })
        .boxed()
}

/// A JSON string literal (serde_json's escaping, independent of the twin's printer).
pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// An accepted value for `p` as JSON text and the value the callback then receives: the
/// default, or the range's lower end, or `true` / a short string.
pub fn valid_value(p: &Property) -> (String, PropertyValue) {
    if let Some(d) = p.default() {
        return (value_json(d), d.clone());
    }
    match p.ty() {
        PropertyType::Boolean => ("true".into(), PropertyValue::Bool(true)),
        PropertyType::Integer => {
            let v = p.range().map_or(1, |(min, _)| min);
            (v.to_string(), PropertyValue::Int(v))
        }
        PropertyType::String => ("\"bounds\"".into(), PropertyValue::Str(b"bounds".to_vec())),
    }
}

/// An accepted value for `p` that differs from its default whenever the type allows it (so
/// that taking it can be told apart from falling back to the default).
pub(super) fn distinct_valid_value(p: &Property) -> (String, PropertyValue) {
    let candidates: Vec<PropertyValue> = match p.ty() {
        PropertyType::Boolean => vec![PropertyValue::Bool(true), PropertyValue::Bool(false)],
        PropertyType::Integer => match p.range() {
            Some((min, max)) => vec![PropertyValue::Int(max), PropertyValue::Int(min)],
            None => vec![PropertyValue::Int(7), PropertyValue::Int(8)],
        },
        PropertyType::String => vec![
            PropertyValue::Str(b"first-match".to_vec()),
            PropertyValue::Str(b"first-match-2".to_vec()),
        ],
    };
    let pick = candidates
        .iter()
        .find(|c| Some(*c) != p.default())
        .unwrap_or(&candidates[0])
        .clone();
    (value_json(&pick), pick)
}

pub(super) fn value_json(v: &PropertyValue) -> String {
    match v {
        PropertyValue::Bool(b) => b.to_string(),
        PropertyValue::Int(i) => i.to_string(),
        PropertyValue::Str(s) => json_string(&String::from_utf8_lossy(s)),
    }
}
