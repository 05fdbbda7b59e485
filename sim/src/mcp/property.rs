//! Tool parameters: `Property` and `PropertyList` of `main/mcp_server.h` (docs/reference/firmware.md §3.1).
//!
//! A property is a name, a type, an optional default and an optional integer range. Its schema
//! JSON is what cJSON prints for it; its argument coercion is `McpServer::DoToolCall`'s walk
//! (§4.5). Knows nothing about devices or time.

use crate::cjson::{self, Item};
use crate::mcp::strings;

/// The coerced arguments of one call, one per property in declaration order. A single one (most
/// tools take none or one) is held in place, so such a call and its receipt allocate nothing.
#[derive(Clone, Debug)]
pub enum Arguments {
    /// Exactly one argument.
    One([PropertyValue; 1]),
    /// None, or more than one.
    List(Vec<PropertyValue>),
}

impl Arguments {
    /// No arguments yet.
    pub fn new() -> Self {
        Arguments::List(Vec::new())
    }

    /// Appends the next property's value.
    pub fn push(&mut self, value: PropertyValue) {
        *self = match std::mem::take(self) {
            Arguments::List(list) if list.is_empty() => Arguments::One([value]),
            Arguments::One([first]) => Arguments::List(vec![first, value]),
            Arguments::List(mut list) => {
                list.push(value);
                Arguments::List(list)
            }
        };
    }
}

impl Default for Arguments {
    fn default() -> Self {
        Self::new()
    }
}

impl std::ops::Deref for Arguments {
    type Target = [PropertyValue];
    fn deref(&self) -> &[PropertyValue] {
        match self {
            Arguments::One(one) => one,
            Arguments::List(list) => list,
        }
    }
}

impl<'a> IntoIterator for &'a Arguments {
    type Item = &'a PropertyValue;
    type IntoIter = std::slice::Iter<'a, PropertyValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Arguments {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Arguments {}

impl<const N: usize> PartialEq<[PropertyValue; N]> for Arguments {
    fn eq(&self, other: &[PropertyValue; N]) -> bool {
        **self == other[..]
    }
}

/// `kPropertyType*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PropertyType {
    /// `kPropertyTypeBoolean`: accepts JSON `true`/`false` only.
    Boolean,
    /// `kPropertyTypeInteger`: accepts any JSON number, coerced by `valueint`.
    Integer,
    /// `kPropertyTypeString`: accepts JSON strings only (NUL-truncated).
    String,
}

/// A coerced argument (or default) value. Strings are bytes: the firmware accepts invalid UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PropertyValue {
    /// A boolean value.
    Bool(bool),
    /// An integer value (after `valueint` truncation/saturation).
    Int(i32),
    /// A string value, as raw bytes.
    Str(Vec<u8>),
}

impl PropertyValue {
    /// The integer value; `true`/`false` give 1/0, a string gives 0.
    pub fn as_int(&self) -> i32 {
        match self {
            PropertyValue::Int(v) => *v,
            PropertyValue::Bool(b) => i32::from(*b),
            PropertyValue::Str(_) => 0,
        }
    }
    /// True only for `Bool(true)`.
    pub fn as_bool(&self) -> bool {
        matches!(self, PropertyValue::Bool(true))
    }
    /// The string bytes; empty for non-string values.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            PropertyValue::Str(s) => s,
            _ => b"",
        }
    }
    fn type_of(&self) -> PropertyType {
        match self {
            PropertyValue::Bool(_) => PropertyType::Boolean,
            PropertyValue::Int(_) => PropertyType::Integer,
            PropertyValue::Str(_) => PropertyType::String,
        }
    }
}

/// Why a property could not be constructed (the firmware throws at registration: boot failure).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PropertyError {
    /// `Range limits only apply to integer properties`
    #[error("property `{0}`: range limits only apply to integer properties")]
    RangeOnNonInteger(String),
    /// `Default value must be within the specified range`
    #[error("property `{0}`: default value must be within the specified range")]
    DefaultOutOfRange(String),
    /// The default's type differs from the property's (a `std::variant` that `value<T>()` would
    /// later throw on).
    #[error("property `{0}`: default value has the wrong type")]
    DefaultWrongType(String),
    /// `min > max` makes every value fail; allowed by the firmware, refused for board files.
    #[error("property `{0}`: minimum {1} is greater than maximum {2}")]
    EmptyRange(String, i32, i32),
}

/// One tool parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    name: String,
    ty: PropertyType,
    default: Option<PropertyValue>,
    range: Option<(i32, i32)>,
}

impl Property {
    /// `Property(name, type)`: required, no range.
    pub fn required(name: &str, ty: PropertyType) -> Self {
        Property {
            name: name.to_string(),
            ty,
            default: None,
            range: None,
        }
    }

    /// `Property(name, type, default)`: optional.
    pub fn with_default(name: &str, ty: PropertyType, default: PropertyValue) -> Result<Self, PropertyError> {
        if default.type_of() != ty {
            return Err(PropertyError::DefaultWrongType(name.to_string()));
        }
        Ok(Property {
            name: name.to_string(),
            ty,
            default: Some(default),
            range: None,
        })
    }

    /// `Property(name, integer, min, max)`: required, ranged.
    pub fn ranged(name: &str, ty: PropertyType, min: i32, max: i32) -> Result<Self, PropertyError> {
        if ty != PropertyType::Integer {
            return Err(PropertyError::RangeOnNonInteger(name.to_string()));
        }
        Ok(Property {
            name: name.to_string(),
            ty,
            default: None,
            range: Some((min, max)),
        })
    }

    /// `Property(name, integer, default, min, max)`: optional, ranged, default checked.
    pub fn ranged_with_default(
        name: &str,
        ty: PropertyType,
        default: i32,
        min: i32,
        max: i32,
    ) -> Result<Self, PropertyError> {
        if ty != PropertyType::Integer {
            return Err(PropertyError::RangeOnNonInteger(name.to_string()));
        }
        if default < min || default > max {
            return Err(PropertyError::DefaultOutOfRange(name.to_string()));
        }
        Ok(Property {
            name: name.to_string(),
            ty,
            default: Some(PropertyValue::Int(default)),
            range: Some((min, max)),
        })
    }

    /// The declared name (also the key looked up in `arguments`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The declared type.
    pub fn ty(&self) -> PropertyType {
        self.ty
    }
    /// The default value, if the property is optional.
    pub fn default(&self) -> Option<&PropertyValue> {
        self.default.as_ref()
    }
    /// The inclusive `(min, max)` integer range, if any.
    pub fn range(&self) -> Option<(i32, i32)> {
        self.range
    }
    /// True iff there is no default: the name goes into the schema's `required` list.
    pub fn is_required(&self) -> bool {
        self.default.is_none()
    }

    /// The property schema as cJSON prints it: `type`, then `default`, then `minimum`/`maximum`.
    pub fn write_schema(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":");
        match self.ty {
            PropertyType::Boolean => {
                cjson::write_string(out, b"boolean");
                if let Some(PropertyValue::Bool(b)) = &self.default {
                    out.extend_from_slice(if *b {
                        b",\"default\":true"
                    } else {
                        b",\"default\":false"
                    });
                }
            }
            PropertyType::Integer => {
                cjson::write_string(out, b"integer");
                if let Some(PropertyValue::Int(v)) = &self.default {
                    out.extend_from_slice(b",\"default\":");
                    cjson::write_int(out, *v);
                }
                if let Some((min, max)) = self.range {
                    out.extend_from_slice(b",\"minimum\":");
                    cjson::write_int(out, min);
                    out.extend_from_slice(b",\"maximum\":");
                    cjson::write_int(out, max);
                }
            }
            PropertyType::String => {
                cjson::write_string(out, b"string");
                if let Some(PropertyValue::Str(s)) = &self.default {
                    out.extend_from_slice(b",\"default\":");
                    cjson::write_string(out, s);
                }
            }
        }
        out.push(b'}');
    }

    /// One step of `DoToolCall`'s argument walk: the value taken from `arguments` (looked up
    /// case-insensitively, first match), or the default, or the exact error message.
    pub fn coerce(&self, arguments: Option<Item<'_>>) -> Result<PropertyValue, Vec<u8>> {
        let found = arguments
            .filter(Item::is_object)
            .and_then(|args| args.get(self.name.as_bytes()));
        let accepted = found.and_then(|value| match self.ty {
            PropertyType::Boolean if value.is_bool() => Some(Ok(PropertyValue::Bool(value.valueint() == 1))),
            PropertyType::Integer if value.is_number() => Some(self.check_range(value.valueint())),
            PropertyType::String if value.is_string() => {
                Some(Ok(PropertyValue::Str(value.c_string().unwrap_or_default().to_vec())))
            }
            _ => None,
        });
        match accepted {
            Some(result) => result,
            None => match &self.default {
                Some(default) => Ok(default.clone()),
                None => Err(strings::concat(
                    strings::ERR_MISSING_VALID_ARGUMENT,
                    self.name.as_bytes(),
                )),
            },
        }
    }

    /// `Property::set_value<int>`: the range check after `valueint` truncation/saturation.
    pub fn check_range(&self, value: i32) -> Result<PropertyValue, Vec<u8>> {
        if let Some((min, max)) = self.range {
            if value < min {
                return Err(strings::concat(strings::ERR_BELOW_MINIMUM, min.to_string().as_bytes()));
            }
            if value > max {
                return Err(strings::concat(strings::ERR_ABOVE_MAXIMUM, max.to_string().as_bytes()));
            }
        }
        Ok(PropertyValue::Int(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cjson::{Terminator, with_parsed};

    #[test]
    fn arguments_keep_every_value_in_order_however_held() {
        let values: Vec<PropertyValue> = (0..4).map(PropertyValue::Int).collect();
        for n in 0..=values.len() {
            let mut args = Arguments::new();
            for v in &values[..n] {
                args.push(v.clone());
            }
            assert_eq!(&*args, &values[..n]);
            assert_eq!(matches!(args, Arguments::One(_)), n == 1, "{n} values");
            assert_eq!(
                args,
                Arguments::List(values[..n].to_vec()),
                "equal by value, not by how held"
            );
        }
    }

    fn coerce(p: &Property, args: &str) -> Result<PropertyValue, String> {
        with_parsed(args.as_bytes(), Terminator::Length, |root| {
            p.coerce(Some(root.expect("test JSON parses")))
                .map_err(|e| String::from_utf8(e).unwrap())
        })
    }

    #[test]
    fn integer_arguments_truncate_before_the_range_check() {
        let volume = Property::ranged("volume", PropertyType::Integer, 0, 100).unwrap();
        assert_eq!(coerce(&volume, r#"{"volume":100.99}"#), Ok(PropertyValue::Int(100)));
        assert_eq!(coerce(&volume, r#"{"volume":-0.99}"#), Ok(PropertyValue::Int(0)));
        assert_eq!(
            coerce(&volume, r#"{"VOLUME":40.7,"volume":99}"#),
            Ok(PropertyValue::Int(40))
        );
        assert_eq!(
            coerce(&volume, r#"{"volume":1e300}"#),
            Err("Value exceeds maximum allowed: 100".into())
        );
        assert_eq!(
            coerce(&volume, r#"{"volume":-1}"#),
            Err("Value is below minimum allowed: 0".into())
        );
        for wrong in [
            r#"{}"#,
            r#"{"volume":"40"}"#,
            r#"{"volume":true}"#,
            r#"{"volume":null}"#,
            "[1]",
        ] {
            assert_eq!(
                coerce(&volume, wrong),
                Err("Missing valid argument: volume".into()),
                "{wrong}"
            );
        }
    }

    #[test]
    fn optional_arguments_of_the_wrong_type_take_the_default_silently() {
        let quality = Property::ranged_with_default("quality", PropertyType::Integer, 80, 1, 100).unwrap();
        assert_eq!(coerce(&quality, r#"{"quality":"x"}"#), Ok(PropertyValue::Int(80)));
        assert_eq!(
            coerce(&quality, r#"{"quality":0}"#),
            Err("Value is below minimum allowed: 1".into())
        );
    }

    #[test]
    fn strings_are_nul_truncated_and_may_be_empty() {
        let url = Property::required("url", PropertyType::String);
        assert_eq!(coerce(&url, r#"{"url":""}"#), Ok(PropertyValue::Str(vec![])));
        assert_eq!(
            coerce(&url, r#"{"url":"a\u0000b"}"#),
            Ok(PropertyValue::Str(b"a".to_vec()))
        );
    }

    #[test]
    fn schema_keys_come_in_cjson_order() {
        let mut out = Vec::new();
        Property::ranged_with_default("quality", PropertyType::Integer, 80, 1, 100)
            .unwrap()
            .write_schema(&mut out);
        assert_eq!(
            out,
            br#"{"type":"integer","default":80,"minimum":1,"maximum":100}"#.to_vec()
        );
        let mut out = Vec::new();
        Property::with_default("on", PropertyType::Boolean, PropertyValue::Bool(false))
            .unwrap()
            .write_schema(&mut out);
        assert_eq!(out, br#"{"type":"boolean","default":false}"#.to_vec());
    }

    #[test]
    fn construction_errors_mirror_the_firmware_throws() {
        assert!(Property::ranged("x", PropertyType::String, 0, 1).is_err());
        assert!(Property::ranged_with_default("x", PropertyType::Integer, 5, 0, 1).is_err());
    }
}
