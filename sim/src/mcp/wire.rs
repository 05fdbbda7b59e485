//! Every firmware string that reaches the wire, in one place (FIRMWARE.md §4, §5, §7.3).
//!
//! These are interface data: they are reproduced byte for byte and must never be "fixed".
//! Mirrors the literals of `main/mcp_server.cc`, `main/mcp_server.h`, `main/boards/common/
//! esp32_camera.cc` and the reply builders `McpServer::ReplyResult` / `ReplyError`.

use crate::cjson;

/// `protocolVersion` in every `initialize` result, whatever the client asked for.
pub const PROTOCOL_VERSION: &str = "2024-11-05";

/// The `tools/list` budget and margin (`GetToolsList`): a tool is added iff
/// `len(out) + len(tool_json) + 1 + 30 <= 8000`.
pub const TOOLS_LIST_BUDGET: usize = 8000;
pub const TOOLS_LIST_MARGIN: usize = 30;

pub const METHOD_INITIALIZE: &[u8] = b"initialize";
pub const METHOD_TOOLS_LIST: &[u8] = b"tools/list";
pub const METHOD_TOOLS_CALL: &[u8] = b"tools/call";
/// Any method starting with this (case-sensitive) is dropped silently.
pub const NOTIFICATIONS_PREFIX: &[u8] = b"notifications";
pub const JSONRPC_VERSION: &[u8] = b"2.0";

// Fixed error messages (§4.7).
pub const ERR_MISSING_PARAMS: &str = "Missing params";
pub const ERR_MISSING_NAME: &str = "Missing name";
pub const ERR_INVALID_ARGUMENTS: &str = "Invalid arguments";
pub const ERR_UNKNOWN_TOOL: &str = "Unknown tool: ";
pub const ERR_MISSING_VALID_ARGUMENT: &str = "Missing valid argument: ";
pub const ERR_BELOW_MINIMUM: &str = "Value is below minimum allowed: ";
pub const ERR_ABOVE_MAXIMUM: &str = "Value exceeds maximum allowed: ";
pub const ERR_METHOD_NOT_IMPLEMENTED: &str = "Method not implemented: ";
pub const ERR_PAYLOAD_SIZE_LIMIT_HEAD: &str = "Failed to add tool ";
pub const ERR_PAYLOAD_SIZE_LIMIT_TAIL: &str = " because of payload size limit";
pub const ERR_FAILED_TO_CAPTURE_PHOTO: &str = "Failed to capture photo";
pub const ERR_EXPLAIN_URL_NOT_SET: &str = "Image explain URL or token is not set";
pub const ERR_NO_CAMERA_FRAME: &str = "No camera frame captured";
pub const ERR_JPEG_QUEUE: &str = "Failed to create JPEG queue";
pub const ERR_CONNECT_EXPLAIN_URL: &str = "Failed to connect to explain URL";
pub const ERR_ENCODE_JPEG: &str = "Failed to encode image to JPEG";
pub const ERR_UPLOAD_PHOTO: &str = "Failed to upload photo";
pub const ERR_SNAPSHOT_SCREEN: &str = "Failed to snapshot screen";
pub const ERR_OPEN_URL: &str = "Failed to open URL: ";
pub const ERR_UNEXPECTED_STATUS: &str = "Unexpected status code: ";
pub const ERR_ALLOCATE_IMAGE: &str = "Failed to allocate memory for image: ";
pub const ERR_DOWNLOAD_IMAGE: &str = "Failed to download image: ";

// Built-in tools (`AddCommonTools`, `AddUserOnlyTools`), names and descriptions exactly.
pub const TOOL_GET_DEVICE_STATUS: &str = "self.get_device_status";
pub const DESC_GET_DEVICE_STATUS: &str = "Provides the real-time information of the device, including the current status of the audio speaker, screen, battery, network, etc.\nUse this tool for: \n1. Answering questions about current condition (e.g. what is the current volume of the audio speaker?)\n2. As the first step to control the device (e.g. turn up / down the volume of the audio speaker, etc.)";
pub const TOOL_SET_VOLUME: &str = "self.audio_speaker.set_volume";
pub const DESC_SET_VOLUME: &str = "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.";
pub const TOOL_SET_BRIGHTNESS: &str = "self.screen.set_brightness";
pub const DESC_SET_BRIGHTNESS: &str = "Set the brightness of the screen.";
pub const TOOL_SET_THEME: &str = "self.screen.set_theme";
pub const DESC_SET_THEME: &str = "Set the theme of the screen. The theme can be `light` or `dark`.";
pub const TOOL_TAKE_PHOTO: &str = "self.camera.take_photo";
pub const DESC_TAKE_PHOTO: &str = "Always remember you have a camera. If the user asks you to see something, use this tool to take a photo and then explain it.\nArgs:\n  `question`: The question that you want to ask about the photo.\nReturn:\n  A JSON object that provides the photo information.";
pub const TOOL_LAMP_GET_STATE: &str = "self.lamp.get_state";
pub const DESC_LAMP_GET_STATE: &str = "Get the power state of the lamp";
pub const TOOL_LAMP_TURN_ON: &str = "self.lamp.turn_on";
pub const DESC_LAMP_TURN_ON: &str = "Turn on the lamp";
pub const TOOL_LAMP_TURN_OFF: &str = "self.lamp.turn_off";
pub const DESC_LAMP_TURN_OFF: &str = "Turn off the lamp";
pub const TOOL_GET_SYSTEM_INFO: &str = "self.get_system_info";
pub const DESC_GET_SYSTEM_INFO: &str = "Get the system information";
pub const TOOL_REBOOT: &str = "self.reboot";
pub const DESC_REBOOT: &str = "Reboot the system";
pub const TOOL_UPGRADE_FIRMWARE: &str = "self.upgrade_firmware";
pub const DESC_UPGRADE_FIRMWARE: &str =
    "Upgrade firmware from a specific URL. This will download and install the firmware, then reboot the device.";
/// The third constructor argument of `url` is a *default value*, not a description (§3.1).
pub const DEFAULT_UPGRADE_URL: &str = "The URL of the firmware binary file to download and install";
pub const TOOL_SCREEN_GET_INFO: &str = "self.screen.get_info";
pub const DESC_SCREEN_GET_INFO: &str = "Information about the screen, including width, height, etc.";
pub const TOOL_SCREEN_SNAPSHOT: &str = "self.screen.snapshot";
pub const DESC_SCREEN_SNAPSHOT: &str = "Snapshot the screen and upload it to a specific URL";
pub const TOOL_SCREEN_PREVIEW_IMAGE: &str = "self.screen.preview_image";
pub const DESC_SCREEN_PREVIEW_IMAGE: &str = "Preview an image on the screen";
pub const TOOL_ASSETS_SET_DOWNLOAD_URL: &str = "self.assets.set_download_url";
pub const DESC_ASSETS_SET_DOWNLOAD_URL: &str = "Set the download url for the assets";

/// Lamp state text: hand-written in the firmware, hence the space after the colon.
pub const LAMP_POWER_ON: &str = "{\"power\": true}";
pub const LAMP_POWER_OFF: &str = "{\"power\": false}";

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` — plain concatenation, no escaping.
pub fn reply_result(id: i32, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    cjson::write_int(&mut out, id);
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":<id>,"error":{"message":"<message>"}}` — the message is inserted raw
/// (no escaping, no `code`), so a client-controlled `"` produces invalid JSON (§4.6).
pub fn reply_error(id: i32, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 56);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    cjson::write_int(&mut out, id);
    out.extend_from_slice(b",\"error\":{\"message\":\"");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\"}}");
    out
}

/// A message made of a fixed prefix and client or developer bytes, concatenated raw.
pub fn concat(prefix: &str, tail: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + tail.len());
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(tail);
    out
}

/// The `initialize` result (hand-built, never escaped).
pub fn initialize_result(board_name: &str, version: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(120 + board_name.len() + version.len());
    out.extend_from_slice(b"{\"protocolVersion\":\"");
    out.extend_from_slice(PROTOCOL_VERSION.as_bytes());
    out.extend_from_slice(b"\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"");
    out.extend_from_slice(board_name.as_bytes());
    out.extend_from_slice(b"\",\"version\":\"");
    out.extend_from_slice(version.as_bytes());
    out.extend_from_slice(b"\"}}");
    out
}
