//! A xiaozhi text frame as the live driver reads it: parsed once, when the device sends it or
//! when it arrives, into the few fields the driver and its companions look at (`type`, `state`,
//! the MCP payload's id, method, params and result text). The device model parses the frame
//! itself; this view only watches, so a frame that is not JSON is simply a frame without a type.

use serde_json::Value;

/// A text frame, parsed once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame<'a> {
    /// The bytes as they crossed the socket.
    pub text: &'a [u8],
    /// Its `type` (`hello`, `mcp`, `listen`, `tts`, …); `None` when it is not JSON or has no
    /// string `type`.
    pub kind: Option<String>,
    /// Its `state` (`listen` and `tts` frames: `start`, `stop`, …).
    pub state: Option<String>,
    /// Its `payload`, when it has one (an MCP message in an `mcp` frame).
    pub mcp: Option<Mcp>,
}

/// The MCP payload of a frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mcp {
    /// `id`, when it is an integer.
    pub id: Option<i64>,
    /// The payload has a `method`: a request (or a notification), not a reply.
    pub request: bool,
    /// `method`, when it is a string.
    pub method: Option<String>,
    /// `params.name` (`tools/call`).
    pub tool: Option<String>,
    /// `params.arguments`.
    pub arguments: Option<Value>,
    /// `result.content[0].text` (a tool's reply).
    pub result_text: Option<String>,
}

impl<'a> Frame<'a> {
    /// Reads `text` once.
    pub fn parse(text: &'a [u8]) -> Frame<'a> {
        let Ok(mut v) = serde_json::from_slice::<Value>(text) else {
            return Frame {
                text,
                ..Frame::default()
            };
        };
        let string = |v: &Value| v.as_str().map(str::to_string);
        Frame {
            text,
            kind: string(&v["type"]),
            state: string(&v["state"]),
            mcp: v.get_mut("payload").map(Mcp::of),
        }
    }

    /// The frame's `type` is `kind`.
    pub fn is(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }

    /// A `type` frame with this `state` (`listen` `start`, `tts` `stop`, …).
    pub fn is_state(&self, kind: &str, state: &str) -> bool {
        self.is(kind) && self.state.as_deref() == Some(state)
    }

    /// The server's hello (a frame whose `type` is `hello`).
    pub fn is_hello(&self) -> bool {
        self.is("hello")
    }

    /// The payload is an MCP request (it has a `method`).
    pub fn is_request(&self) -> bool {
        self.mcp.as_ref().is_some_and(|m| m.request)
    }

    /// The id of an MCP request in this frame.
    pub fn request_id(&self) -> Option<i64> {
        self.mcp.as_ref().filter(|m| m.request)?.id
    }

    /// The id of an MCP reply in this frame (a payload without `method`).
    pub fn reply_id(&self) -> Option<i64> {
        self.mcp.as_ref().filter(|m| !m.request)?.id
    }
}

impl Mcp {
    fn of(p: &mut Value) -> Mcp {
        let (tool, arguments) = match p.get_mut("params").and_then(Value::as_object_mut) {
            Some(o) => (
                o.get("name").and_then(Value::as_str).map(str::to_string),
                o.remove("arguments"),
            ),
            None => (None, None),
        };
        Mcp {
            id: p["id"].as_i64(),
            request: p.get("method").is_some(),
            method: p["method"].as_str().map(str::to_string),
            tool,
            arguments,
            result_text: p["result"]["content"][0]["text"].as_str().map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_a_hello_by_its_type_not_by_a_sentence_that_says_hello() {
        let hello = br#"{"type":"hello","transport":"websocket","session_id":"s"}"#;
        assert!(Frame::parse(hello).is_hello());
        let sentence = br#"{"type":"tts","state":"sentence_start","text":"hello"}"#;
        let f = Frame::parse(sentence);
        assert!(!f.is_hello());
        assert!(f.is_state("tts", "sentence_start"));
        assert!(!Frame::parse(br#"{"type":"stt","text":"hello"}"#).is_hello());
        assert!(!Frame::parse(b"\"hello\"").is_hello());
    }

    #[test]
    fn the_mcp_payload_is_read_once_into_request_and_reply_views() {
        let call = br#"{"type":"mcp","payload":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"self.x","arguments":{"v":1}}}}"#;
        let f = Frame::parse(call);
        assert_eq!((f.request_id(), f.reply_id()), (Some(7), None));
        let m = f.mcp.unwrap();
        assert_eq!(m.method.as_deref(), Some("tools/call"));
        assert_eq!(m.tool.as_deref(), Some("self.x"));
        assert_eq!(m.arguments, Some(serde_json::json!({"v": 1})));
        let reply = br#"{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}"#;
        let f = Frame::parse(reply);
        assert_eq!((f.request_id(), f.reply_id()), (None, Some(7)));
        assert!(!f.is_request());
        assert_eq!(f.mcp.unwrap().result_text.as_deref(), Some("true"));
        let garbage = Frame::parse(b"{not json");
        assert_eq!((garbage.kind, garbage.mcp), (None, None));
        let odd = Frame::parse(br#"{"type":"mcp","payload":"x"}"#);
        assert_eq!(
            (odd.request_id(), odd.reply_id(), odd.is_request()),
            (None, None, false)
        );
    }
}
