//! `McpTool` of `main/mcp_server.h`: a registered tool, its JSON, and the result encoding of
//! `McpTool::Call` (docs/reference/firmware.md §3.2, §3.3).
//!
//! What a callback *does* is not here: a tool carries a [`ToolAction`] key that the device model
//! interprets. Knows nothing about hardware or time.

use std::fmt;
use std::sync::Arc;

use crate::cjson;
use crate::mcp::property::Property;

/// Which callback a tool runs. The device model maps each key to behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolAction {
    /// `self.get_device_status`.
    GetDeviceStatus,
    /// `self.audio_speaker.set_volume`.
    SetVolume,
    /// `self.screen.set_brightness`.
    SetBrightness,
    /// `self.screen.set_theme`.
    SetTheme,
    /// `self.camera.take_photo`.
    TakePhoto,
    /// `self.lamp.get_state` of the lamp on `gpio`.
    LampGetState {
        /// The lamp's GPIO number.
        gpio: u32,
    },
    /// `self.lamp.turn_on`: drives `gpio` high.
    LampTurnOn {
        /// The lamp's GPIO number.
        gpio: u32,
    },
    /// `self.lamp.turn_off`: drives `gpio` low.
    LampTurnOff {
        /// The lamp's GPIO number.
        gpio: u32,
    },
    /// `self.get_system_info`.
    GetSystemInfo,
    /// `self.reboot`.
    Reboot,
    /// `self.upgrade_firmware`.
    UpgradeFirmware,
    /// `self.screen.get_info`.
    ScreenGetInfo,
    /// `self.screen.snapshot`.
    ScreenSnapshot,
    /// `self.screen.preview_image`.
    ScreenPreviewImage,
    /// `self.assets.set_download_url`.
    AssetsSetDownloadUrl,
    /// A tool declared in a board file; the index points into the board's tool specs.
    Board(usize),
}

/// What a callback returned (`ReturnValue = variant<bool, int, string, cJSON*, ImageContent*>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReturnValue {
    /// A `bool`, sent as the text `"true"` / `"false"`.
    Bool(bool),
    /// An `int`, sent as decimal text.
    Int(i32),
    /// A `std::string` (bytes; a NUL cuts it when cJSON copies it).
    Text(Vec<u8>),
    /// A cJSON object, already printed unformatted.
    Json(Vec<u8>),
    /// An `ImageContent`: mime type and raw bytes (base64-encoded on output).
    Image {
        /// The MIME type, e.g. `image/jpeg`.
        mime: String,
        /// The raw image bytes.
        data: Vec<u8>,
    },
}

/// A registered tool: its immutable definition (shared, so registering a built-in tool again at
/// every boot does not rebuild its JSON) plus the callback it runs.
#[derive(Clone)]
pub struct McpTool {
    definition: Arc<Definition>,
    action: ToolAction,
}

/// Everything about a tool that `tools/list` shows; never changes after construction.
struct Definition {
    name: Arc<str>,
    description: String,
    properties: Vec<Property>,
    user_only: bool,
    /// `McpTool::to_json()`.
    json: Vec<u8>,
}

impl McpTool {
    /// A tool with its JSON rendered now, as `McpTool::to_json()` prints it.
    pub fn new(name: &str, description: &str, properties: Vec<Property>, user_only: bool, action: ToolAction) -> Self {
        let json = render_json(name, description, &properties, user_only);
        McpTool {
            definition: Arc::new(Definition {
                name: name.into(),
                description: description.to_string(),
                properties,
                user_only,
                json,
            }),
            action,
        }
    }

    /// The same tool (name, description, schema, JSON: shared, not copied) running `action`.
    pub fn with_action(&self, action: ToolAction) -> Self {
        McpTool {
            definition: Arc::clone(&self.definition),
            action,
        }
    }

    /// The tool name (`tools/call` matches it exactly, `tools/list` cursors too).
    pub fn name(&self) -> &str {
        &self.definition.name
    }
    /// The tool name, shared (a receipt holds it without a copy).
    pub fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.definition.name)
    }
    /// The description shown in `tools/list`.
    pub fn description(&self) -> &str {
        &self.definition.description
    }
    /// The properties in declaration order.
    pub fn properties(&self) -> &[Property] {
        &self.definition.properties
    }
    /// Whether the tool is user-only (listed only with `withUserTools`; still callable).
    pub fn user_only(&self) -> bool {
        self.definition.user_only
    }
    /// The callback key the device model runs.
    pub fn action(&self) -> &ToolAction {
        &self.action
    }

    /// `McpTool::to_json()` (immutable after boot, so computed once).
    pub fn json(&self) -> &[u8] {
        &self.definition.json
    }
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &*self.definition;
        f.debug_struct("McpTool")
            .field("name", &d.name)
            .field("description", &d.description)
            .field("properties", &d.properties)
            .field("user_only", &d.user_only)
            .field("action", &self.action)
            .field("json", &d.json)
            .finish()
    }
}

/// `McpTool::to_json()`.
fn render_json(name: &str, description: &str, properties: &[Property], user_only: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + description.len());
    out.extend_from_slice(b"{\"name\":");
    cjson::write_string(&mut out, name.as_bytes());
    out.extend_from_slice(b",\"description\":");
    cjson::write_string(&mut out, description.as_bytes());
    out.extend_from_slice(b",\"inputSchema\":{\"type\":\"object\",\"properties\":{");
    for (i, p) in properties.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        cjson::write_string(&mut out, p.name().as_bytes());
        out.push(b':');
        p.write_schema(&mut out);
    }
    out.push(b'}');
    let mut required = properties.iter().filter(|p| p.is_required()).peekable();
    if required.peek().is_some() {
        out.extend_from_slice(b",\"required\":[");
        for (i, p) in required.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            cjson::write_string(&mut out, p.name().as_bytes());
        }
        out.push(b']');
    }
    out.push(b'}');
    if user_only {
        out.extend_from_slice(b",\"annotations\":{\"audience\":[\"user\"]}");
    }
    out.push(b'}');
    out
}

/// `McpTool::Call`'s result object: `{"content":[<item>],"isError":false}`. `isError` is never
/// true; a business `false` is the text `"false"`.
pub fn encode_result(value: &ReturnValue, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"content\":[{\"type\":");
    match value {
        ReturnValue::Image { mime, data } => {
            out.extend_from_slice(b"\"image\",\"image\":");
            let mut inner = Vec::with_capacity(64 + data.len() * 4 / 3);
            inner.extend_from_slice(b"{\"type\":\"image\",\"mimeType\":");
            cjson::write_string(&mut inner, mime.as_bytes());
            inner.extend_from_slice(b",\"data\":");
            let encoded = base64_standard(data);
            cjson::write_string(&mut inner, encoded.as_bytes());
            inner.push(b'}');
            cjson::write_string(out, &inner);
        }
        ReturnValue::Bool(b) => {
            out.extend_from_slice(b"\"text\",\"text\":");
            out.extend_from_slice(if *b { b"\"true\"" } else { b"\"false\"" });
        }
        ReturnValue::Int(v) => {
            out.extend_from_slice(b"\"text\",\"text\":\"");
            cjson::write_int(out, *v);
            out.push(b'"');
        }
        ReturnValue::Text(s) | ReturnValue::Json(s) => {
            out.extend_from_slice(b"\"text\",\"text\":");
            cjson::write_string(out, s);
        }
    }
    out.extend_from_slice(b"}],\"isError\":false}");
}

/// mbedtls_base64_encode: standard alphabet with `=` padding.
fn base64_standard(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::property::{PropertyType, PropertyValue};
    use crate::mcp::strings;

    fn text(v: ReturnValue) -> String {
        let mut out = Vec::new();
        encode_result(&v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn booleans_are_text_never_json_booleans() {
        assert_eq!(
            text(ReturnValue::Bool(true)),
            r#"{"content":[{"type":"text","text":"true"}],"isError":false}"#
        );
        assert_eq!(
            text(ReturnValue::Bool(false)),
            r#"{"content":[{"type":"text","text":"false"}],"isError":false}"#
        );
        assert_eq!(
            text(ReturnValue::Int(-5)),
            r#"{"content":[{"type":"text","text":"-5"}],"isError":false}"#
        );
    }

    #[test]
    fn json_results_are_escaped_strings() {
        assert_eq!(
            text(ReturnValue::Json(br#"{"width":128}"#.to_vec())),
            r#"{"content":[{"type":"text","text":"{\"width\":128}"}],"isError":false}"#
        );
        assert_eq!(
            text(ReturnValue::Text(b"a\0b".to_vec())),
            r#"{"content":[{"type":"text","text":"a"}],"isError":false}"#
        );
    }

    #[test]
    fn image_results_nest_json_in_a_string() {
        assert_eq!(
            text(ReturnValue::Image {
                mime: "image/jpeg".into(),
                data: b"hi".to_vec()
            }),
            r#"{"content":[{"type":"image","image":"{\"type\":\"image\",\"mimeType\":\"image/jpeg\",\"data\":\"aGk=\"}"}],"isError":false}"#
        );
    }

    #[test]
    fn tool_json_matches_the_verified_bytes() {
        let t2 = McpTool::new(
            strings::TOOL_SET_VOLUME,
            strings::DESC_SET_VOLUME,
            vec![Property::ranged("volume", PropertyType::Integer, 0, 100).unwrap()],
            false,
            ToolAction::SetVolume,
        );
        assert_eq!(t2.json().len(), 325);
        let t11 = McpTool::new(
            strings::TOOL_UPGRADE_FIRMWARE,
            strings::DESC_UPGRADE_FIRMWARE,
            vec![
                Property::with_default(
                    "url",
                    PropertyType::String,
                    PropertyValue::Str(strings::DEFAULT_UPGRADE_URL.into()),
                )
                .unwrap(),
            ],
            true,
            ToolAction::UpgradeFirmware,
        );
        assert_eq!(
            String::from_utf8(t11.json().to_vec()).unwrap(),
            r#"{"name":"self.upgrade_firmware","description":"Upgrade firmware from a specific URL. This will download and install the firmware, then reboot the device.","inputSchema":{"type":"object","properties":{"url":{"type":"string","default":"The URL of the firmware binary file to download and install"}}},"annotations":{"audience":["user"]}}"#
        );
        let t1 = McpTool::new(
            strings::TOOL_GET_DEVICE_STATUS,
            strings::DESC_GET_DEVICE_STATUS,
            vec![],
            false,
            ToolAction::GetDeviceStatus,
        );
        assert_eq!(t1.json().len(), 458);
    }
}
