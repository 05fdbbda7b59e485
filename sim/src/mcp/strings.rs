//! Every firmware string that reaches the wire, in one place (docs/reference/firmware.md §4, §5, §7.3).
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
/// Bytes `GetToolsList` keeps free below [`TOOLS_LIST_BUDGET`] when deciding whether a tool fits.
pub const TOOLS_LIST_MARGIN: usize = 30;

/// The `initialize` method: sets the camera explain URL/token, replies [`initialize_result`] (§4.3).
pub const METHOD_INITIALIZE: &[u8] = b"initialize";
/// The `tools/list` method: one page of the registry, budgeted, with `nextCursor` (§4.4).
pub const METHOD_TOOLS_LIST: &[u8] = b"tools/list";
/// The `tools/call` method: validates name and arguments, then schedules the callback (§4.5).
pub const METHOD_TOOLS_CALL: &[u8] = b"tools/call";
/// Any method starting with this (case-sensitive) is dropped silently.
pub const NOTIFICATIONS_PREFIX: &[u8] = b"notifications";
/// The only accepted `jsonrpc` value (exact, after NUL truncation); anything else is dropped.
pub const JSONRPC_VERSION: &[u8] = b"2.0";

// Fixed error messages (§4.7).
/// `tools/call` error when `params` is absent (a present non-object `params` is dropped earlier).
pub const ERR_MISSING_PARAMS: &str = "Missing params";
/// `tools/call` error when `params.name` is not a string.
pub const ERR_MISSING_NAME: &str = "Missing name";
/// `tools/call` error when `params.arguments` is present but not an object.
pub const ERR_INVALID_ARGUMENTS: &str = "Invalid arguments";
/// `tools/call` with a `stackSize` that is not a number (1.7.5–1.9.1 only).
pub const ERR_INVALID_STACK_SIZE: &str = "Invalid stackSize";
/// `DEFAULT_TOOLCALL_STACK_SIZE` of 1.7.5–1.9.1: the `tool_call` thread's stack without `stackSize`.
pub const DEFAULT_TOOLCALL_STACK_SIZE: i32 = 6144;
/// `tools/call` error prefix, followed raw by the client's tool name (no exact-name match).
pub const ERR_UNKNOWN_TOOL: &str = "Unknown tool: ";
/// Argument-walk error prefix, followed by the declared property name: a required property
/// is absent or has the wrong JSON type.
pub const ERR_MISSING_VALID_ARGUMENT: &str = "Missing valid argument: ";
/// Argument-walk error prefix, followed by the property's `min`: integer below range after `valueint`.
pub const ERR_BELOW_MINIMUM: &str = "Value is below minimum allowed: ";
/// Argument-walk error prefix, followed by the property's `max`: integer above range after
/// `valueint` truncation/saturation.
pub const ERR_ABOVE_MAXIMUM: &str = "Value exceeds maximum allowed: ";

/// The message is one of the two the range check *throws* (`std::invalid_argument`), as opposed
/// to the argument walk's replied-at-once `Missing valid argument`.
pub fn is_range_error(message: &[u8]) -> bool {
    message.starts_with(ERR_BELOW_MINIMUM.as_bytes()) || message.starts_with(ERR_ABOVE_MAXIMUM.as_bytes())
}
/// Error prefix for any method other than the three, followed raw by the client's method.
pub const ERR_METHOD_NOT_IMPLEMENTED: &str = "Method not implemented: ";
/// Start of the `tools/list` empty-page error; then the `next_cursor` tool name (may be empty),
/// then [`ERR_PAYLOAD_SIZE_LIMIT_TAIL`].
pub const ERR_PAYLOAD_SIZE_LIMIT_HEAD: &str = "Failed to add tool ";
/// End of the `tools/list` empty-page error (see [`ERR_PAYLOAD_SIZE_LIMIT_HEAD`]).
pub const ERR_PAYLOAD_SIZE_LIMIT_TAIL: &str = " because of payload size limit";
/// `self.camera.take_photo` exception: capture failed (including camera init failure).
pub const ERR_FAILED_TO_CAPTURE_PHOTO: &str = "Failed to capture photo";
/// `self.camera.take_photo` exception: no `initialize` has set `capabilities.vision.url` (checked
/// after the capture).
pub const ERR_EXPLAIN_URL_NOT_SET: &str = "Image explain URL or token is not set";
/// `self.camera.take_photo` explain-path exception: no frame to encode (not produced by the twin).
pub const ERR_NO_CAMERA_FRAME: &str = "No camera frame captured";
/// `self.camera.take_photo` explain-path exception: JPEG queue creation failed (not produced by the twin).
pub const ERR_JPEG_QUEUE: &str = "Failed to create JPEG queue";
/// `self.camera.take_photo` exception: the HTTP connection to the explain URL failed.
pub const ERR_CONNECT_EXPLAIN_URL: &str = "Failed to connect to explain URL";
/// `self.camera.take_photo` explain-path exception: JPEG encoding failed (not produced by the twin).
pub const ERR_ENCODE_JPEG: &str = "Failed to encode image to JPEG";
/// `self.camera.take_photo` exception: the explain server answered with a status other than 200.
pub const ERR_UPLOAD_PHOTO: &str = "Failed to upload photo";
/// `self.screen.snapshot` exception: taking or encoding the snapshot failed (the twin: the
/// screen's RGB565 copy does not fit in the free heap).
pub const ERR_SNAPSHOT_SCREEN: &str = "Failed to snapshot screen";
/// `self.screen.snapshot` / `self.screen.preview_image` exception prefix, followed raw by the
/// client's URL: the HTTP open failed.
pub const ERR_OPEN_URL: &str = "Failed to open URL: ";
/// `self.screen.snapshot` / `self.screen.preview_image` exception prefix, followed by the HTTP
/// status code (anything but 200).
pub const ERR_UNEXPECTED_STATUS: &str = "Unexpected status code: ";
/// `self.screen.preview_image` exception prefix, followed raw by the URL: the image buffer
/// allocation failed (empty body or larger than the free heap).
pub const ERR_ALLOCATE_IMAGE: &str = "Failed to allocate memory for image: ";
/// `self.screen.preview_image` exception (`LvglAllocatedImage`): no LVGL image decoder reads the
/// downloaded bytes' header (anything but a PNG).
pub const ERR_IMAGE_INFO: &str = "Failed to get image info";
/// `self.screen.preview_image` exception prefix, followed raw by the URL: reading the body failed
/// (not produced by the twin).
pub const ERR_DOWNLOAD_IMAGE: &str = "Failed to download image: ";

// Built-in tools (`AddCommonTools`, `AddUserOnlyTools`), names and descriptions exactly.
/// Common tool (always registered): returns the status JSON (§10.1) as an escaped string.
pub const TOOL_GET_DEVICE_STATUS: &str = "self.get_device_status";
/// Description of [`TOOL_GET_DEVICE_STATUS`] in `tools/list`.
pub const DESC_GET_DEVICE_STATUS: &str = "Provides the real-time information of the device, including the current status of the audio speaker, screen, battery, network, etc.\nUse this tool for: \n1. Answering questions about current condition (e.g. what is the current volume of the audio speaker?)\n2. As the first step to control the device (e.g. turn up / down the volume of the audio speaker, etc.)";
/// Common tool (always registered): `volume` 0..100, persisted to NVS; replies `true`.
pub const TOOL_SET_VOLUME: &str = "self.audio_speaker.set_volume";
/// Description of [`TOOL_SET_VOLUME`] in `tools/list`.
pub const DESC_SET_VOLUME: &str = "Set the volume of the audio speaker. If the current volume is unknown, you must call `self.get_device_status` tool first and then call this tool.";
/// Common tool, registered when the board has a backlight: `brightness` 0..100; replies `true`.
pub const TOOL_SET_BRIGHTNESS: &str = "self.screen.set_brightness";
/// Description of [`TOOL_SET_BRIGHTNESS`] in `tools/list`.
pub const DESC_SET_BRIGHTNESS: &str = "Set the brightness of the screen.";
/// Common tool, registered with an LVGL display that has a theme: replies `true` / `false`.
pub const TOOL_SET_THEME: &str = "self.screen.set_theme";
/// Description of [`TOOL_SET_THEME`] in `tools/list`.
pub const DESC_SET_THEME: &str = "Set the theme of the screen. The theme can be `light` or `dark`.";
/// Common tool, registered when the board has a camera: capture, then explain via HTTP POST.
pub const TOOL_TAKE_PHOTO: &str = "self.camera.take_photo";
/// Description of [`TOOL_TAKE_PHOTO`] before v2.2.2 (1.x and 2.0.1–2.1.0).
pub const DESC_TAKE_PHOTO_OLDER: &str = "Take a photo and explain it. Use this tool after the user asks you to see something.\nArgs:\n  `question`: The question that you want to ask about the photo.\nReturn:\n  A JSON object that provides the photo information.";
/// Description of [`TOOL_TAKE_PHOTO`] in `tools/list`.
pub const DESC_TAKE_PHOTO: &str = "Always remember you have a camera. If the user asks you to see something, use this tool to take a photo and then explain it.\nArgs:\n  `question`: The question that you want to ask about the photo.\nReturn:\n  A JSON object that provides the photo information.";
/// Board tool (boards with a `LampController`): replies [`LAMP_POWER_ON`] / [`LAMP_POWER_OFF`].
pub const TOOL_LAMP_GET_STATE: &str = "self.lamp.get_state";
/// Description of [`TOOL_LAMP_GET_STATE`] in `tools/list`.
pub const DESC_LAMP_GET_STATE: &str = "Get the power state of the lamp";
/// Board tool (boards with a `LampController`): sets the flag, drives the GPIO high; replies `true`.
pub const TOOL_LAMP_TURN_ON: &str = "self.lamp.turn_on";
/// Description of [`TOOL_LAMP_TURN_ON`] in `tools/list`.
pub const DESC_LAMP_TURN_ON: &str = "Turn on the lamp";
/// Board tool (boards with a `LampController`): clears the flag, drives the GPIO low; replies `true`.
pub const TOOL_LAMP_TURN_OFF: &str = "self.lamp.turn_off";
/// Description of [`TOOL_LAMP_TURN_OFF`] in `tools/list`.
pub const DESC_LAMP_TURN_OFF: &str = "Turn off the lamp";
/// User-only tool (always registered): returns the hand-built system JSON (§10.2).
pub const TOOL_GET_SYSTEM_INFO: &str = "self.get_system_info";
/// Description of [`TOOL_GET_SYSTEM_INFO`] in `tools/list`.
pub const DESC_GET_SYSTEM_INFO: &str = "Get the system information";
/// User-only tool (always registered): reboots after 1000 ms; its `true` is never transmitted.
pub const TOOL_REBOOT: &str = "self.reboot";
/// Description of [`TOOL_REBOOT`] in `tools/list`.
pub const DESC_REBOOT: &str = "Reboot the system";
/// User-only tool (always registered): schedules `UpgradeFirmware(url)`; `true` is sent only if
/// the upgrade fails and the transport is still up.
pub const TOOL_UPGRADE_FIRMWARE: &str = "self.upgrade_firmware";
/// Description of [`TOOL_UPGRADE_FIRMWARE`] in `tools/list`.
pub const DESC_UPGRADE_FIRMWARE: &str =
    "Upgrade firmware from a specific URL. This will download and install the firmware, then reboot the device.";
/// The third constructor argument of `url` is a *default value*, not a description (§3.1).
pub const DEFAULT_UPGRADE_URL: &str = "The URL of the firmware binary file to download and install";
/// User-only tool, registered with an LVGL display: `{"width":W,"height":H,"monochrome":B}`.
pub const TOOL_SCREEN_GET_INFO: &str = "self.screen.get_info";
/// Description of [`TOOL_SCREEN_GET_INFO`] in `tools/list`.
pub const DESC_SCREEN_GET_INFO: &str = "Information about the screen, including width, height, etc.";
/// User-only tool (LVGL display with snapshot support): JPEG of the screen POSTed to `url`.
pub const TOOL_SCREEN_SNAPSHOT: &str = "self.screen.snapshot";
/// Description of [`TOOL_SCREEN_SNAPSHOT`] in `tools/list`.
pub const DESC_SCREEN_SNAPSHOT: &str = "Snapshot the screen and upload it to a specific URL";
/// User-only tool (as snapshot): HTTP GET of `url`, shown as a preview image.
pub const TOOL_SCREEN_PREVIEW_IMAGE: &str = "self.screen.preview_image";
/// Description of [`TOOL_SCREEN_PREVIEW_IMAGE`] in `tools/list`.
pub const DESC_SCREEN_PREVIEW_IMAGE: &str = "Preview an image on the screen";
/// User-only tool (always registered): persists `assets/download_url`; used at the next boot.
pub const TOOL_ASSETS_SET_DOWNLOAD_URL: &str = "self.assets.set_download_url";
/// Description of [`TOOL_ASSETS_SET_DOWNLOAD_URL`] in `tools/list`.
pub const DESC_ASSETS_SET_DOWNLOAD_URL: &str = "Set the download url for the assets";

/// Lamp state text: hand-written in the firmware, hence the space after the colon.
pub const LAMP_POWER_ON: &str = "{\"power\": true}";
/// Lamp state text when the lamp flag is off (same hand-written spacing as [`LAMP_POWER_ON`]).
pub const LAMP_POWER_OFF: &str = "{\"power\": false}";

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` — plain concatenation, no escaping.
pub fn reply_result(id: i32, result: &[u8]) -> Vec<u8> {
    reply_result_with(id, result.len(), |out| out.extend_from_slice(result))
}

/// [`reply_result`] with the result written straight into the reply by `write_result` (about
/// `result_len` bytes), instead of being built apart and copied.
pub fn reply_result_with(id: i32, result_len: usize, write_result: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(result_len + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    cjson::write_int(&mut out, id);
    out.extend_from_slice(b",\"result\":");
    write_result(&mut out);
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
