//! Reading device replies the way the evidence needs them, without trusting them to be JSON
//! (the firmware inserts error messages unescaped, docs/reference/firmware.md §4.6): the id, the first text
//! item, the error message; and writing `tools/call` requests byte-identical to `serde_json`.
//! Used by the runner, the wire judge, the demo and tests.

use std::borrow::Cow;

/// The id a reply carries: every reply starts `{"jsonrpc":"2.0","id":<int>,`.
pub fn reply_id(payload: &[u8]) -> Option<i64> {
    let rest = payload.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    let end = rest.iter().position(|&b| b == b',')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// A `tools/call` request, compact, members in this order:
/// `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{"name":…[,"arguments":…]}}`.
pub fn call_request(id: i64, tool: &str, args: Option<&serde_json::Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + tool.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(br#","method":"tools/call","params":{"name":"#);
    // Serializing a str or a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, tool);
    if let Some(args) = args {
        out.extend_from_slice(br#","arguments":"#);
        let _ = serde_json::to_writer(&mut out, args);
    }
    out.extend_from_slice(b"}}");
    out
}

/// `result.content[0].text` of a reply, if it is valid JSON of that shape.
pub fn reply_text(payload: &[u8]) -> Option<String> {
    if let Some(text) = plain_reply_text(payload) {
        return Some(text.into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    v["result"]["content"][0]["text"].as_str().map(str::to_string)
}

/// Whether a reply is valid JSON.
pub fn is_valid_json(payload: &[u8]) -> bool {
    plain_reply_text(payload).is_some() || serde_json::from_slice::<serde_json::Value>(payload).is_ok()
}

/// The text of a reply in the exact shape the device prints for a callback's text
/// (`{"jsonrpc":"2.0","id":<int>,"result":{"content":[{"type":"text","text":<string>}],"isError":false}}`,
/// UTF-8, `<string>` one JSON string literal): then the whole payload is valid JSON and the
/// text is what a JSON reader decodes. `None` for anything else (which may still be JSON).
pub(super) fn plain_reply_text(payload: &[u8]) -> Option<Cow<'_, str>> {
    let payload = std::str::from_utf8(payload).ok()?;
    let rest = payload.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    let (id, rest) = rest.split_once(',')?;
    let digits = id.strip_prefix('-').unwrap_or(id);
    let json_int =
        matches!(digits.as_bytes(), [b'0'] | [b'1'..=b'9', ..]) && digits.bytes().all(|b| b.is_ascii_digit());
    if !json_int {
        return None;
    }
    let literal = rest
        .strip_prefix(r#""result":{"content":[{"type":"text","text":"#)?
        .strip_suffix(r#"}],"isError":false}}"#)?;
    let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
    if inner.bytes().all(|b| b != b'"' && b != b'\\' && b >= 0x20) {
        return Some(Cow::Borrowed(inner));
    }
    // Escapes (a status JSON inside the text, say): the literal must be exactly one string.
    serde_json::from_str::<String>(literal).ok().map(Cow::Owned)
}

/// The raw error message of an error reply (the firmware does not escape it).
pub fn reply_error(payload: &[u8]) -> Option<Vec<u8>> {
    const HEAD: &[u8] = br#","error":{"message":""#;
    let i = payload.windows(HEAD.len()).position(|w| w == HEAD)?;
    let rest = &payload[i + HEAD.len()..];
    rest.strip_suffix(br#""}}"#).map(<[u8]>::to_vec)
}

pub(super) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The JSON-RPC `valueint` of an id as the device computes it.
pub(super) fn coerced(id: i64) -> i64 {
    id.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_fields_are_read_without_trusting_the_json() {
        let p = br#"{"jsonrpc":"2.0","id":144,"error":{"message":"Unknown tool: self.x"y"}}"#;
        assert_eq!(reply_id(p), Some(144));
        assert_eq!(reply_error(p), Some(br#"Unknown tool: self.x"y"#.to_vec()));
        assert_eq!(reply_text(p), None);
        let p = br#"{"jsonrpc":"2.0","id":-7,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}"#;
        assert_eq!(reply_id(p), Some(-7));
        assert_eq!(reply_text(p).as_deref(), Some("true"));
    }

    #[test]
    fn call_requests_print_as_serde_json_does() {
        let tools = ["self.reboot", "a\"b\\c\u{1}é", ""];
        let args = [
            None,
            Some(serde_json::json!({"volume": 35})),
            Some(serde_json::json!({"z": [1, 2.5, null], "a": {"b": "x\ny"}})),
            Some(serde_json::json!("not an object")),
        ];
        for id in [0, 7, -7, i64::MAX, i64::MIN] {
            for tool in tools {
                for a in &args {
                    let mut params = serde_json::Map::new();
                    params.insert("name".into(), tool.into());
                    if let Some(a) = a {
                        params.insert("arguments".into(), a.clone());
                    }
                    let want = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params});
                    assert_eq!(
                        String::from_utf8(call_request(id, tool, a.as_ref())).unwrap(),
                        want.to_string()
                    );
                }
            }
        }
    }

    #[test]
    fn plain_reply_texts_read_as_serde_json_does() {
        let serde_text = |p: &[u8]| {
            let v: serde_json::Value = serde_json::from_slice(p).ok()?;
            v["result"]["content"][0]["text"].as_str().map(str::to_string)
        };
        let wrap = |id: &str, text: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}}}"#
            )
        };
        for id in ["0", "7", "-7", "2147483647", "007", "+7", "-", "", "1.5", "1e3", "-0"] {
            for text in [
                "true",
                "",
                "a b",
                r#"\"q\""#,
                r#"\u00e9"#,
                "\u{e9}",
                "\u{1}",
                "a\\",
                r#"x"}],"isError":false}}"#,
                r#"{\"audio_speaker\":{\"volume\":10}}"#,
                r#"a\\b\/c\n\t\ud83d\ude00"#,
                r#"\ud800"#,
                r#"\x"#,
                r#"x","type":"text"#,
                r#"x","text":"y"#,
                r#"x\"#,
            ] {
                let p = wrap(id, text);
                assert_eq!(reply_text(p.as_bytes()), serde_text(p.as_bytes()), "{p}");
                let valid = serde_json::from_slice::<serde_json::Value>(p.as_bytes()).is_ok();
                assert_eq!(is_valid_json(p.as_bytes()), valid, "{p}");
            }
        }
        let p = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}],\"isError\":false}}";
        assert_eq!(reply_text(p), None);
        assert!(!is_valid_json(p));
    }
}
