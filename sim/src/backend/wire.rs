//! The text a session reads and writes besides MCP: the `type` of a device frame, what an
//! `abort` is, and JSON in Python's `json.dumps` style (xinnan-py's envelopes and hello).

use serde_json::Value;

/// The `type` of a device text frame parsed as JSON (`hello`, `listen`, `abort`, `mcp`, …): the
/// rule a session tells the device's messages apart by.
pub fn frame_type(frame: &Value) -> Option<&str> {
    frame.get("type").and_then(Value::as_str)
}

/// Whether a device text frame is an `abort`, by the session's rule: it parses as JSON and its
/// [`frame_type`] is `abort` (what a backend answers by dropping its queued speech).
pub fn is_abort(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| frame_type(&v) == Some("abort"))
}

/// Python `json.dumps` style: `", "` and `": "` separators, non-ASCII as `\uXXXX`.
pub fn python_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write(&Value::String(k.clone()), out);
                    out.push_str(": ");
                    write(x, out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write(x, out);
                }
                out.push(']');
            }
            Value::String(s) => out.push_str(&crate::voice::speak::py_str(s)),
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}
