//! `Esp32Camera` as the MCP tool sees it (`main/boards/common/esp32_camera.cc`): capture,
//! then explain via an HTTP POST to the URL and token an `initialize` set (docs/reference/firmware.md §5, quirk 29).
//!
//! Knows nothing about MCP: the callback turns failures into the firmware's messages.

use crate::board::CameraSpec;

/// The board camera's state: sensor, frame size, streaming flag and the explain URL/token.
#[derive(Clone, Debug)]
pub struct Camera {
    /// Sensor model (e.g. `OV2640`), from the board spec.
    pub sensor: String,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// `streaming_on_`: false when `esp_camera_init` failed (the tool is still registered).
    pub streaming: bool,
    /// Where `Explain` POSTs the photo; empty until an `initialize` carries `vision.url`.
    pub explain_url: Vec<u8>,
    /// Token sent with the explain request; empty when the last `initialize` gave none.
    pub explain_token: Vec<u8>,
    /// A frame is held after the first successful capture.
    pub has_frame: bool,
}

impl Camera {
    /// A camera from the board spec; `init_failed` (or `init_ok: false`) leaves it not streaming.
    pub fn new(spec: &CameraSpec, init_failed: bool) -> Self {
        Camera {
            sensor: spec.sensor.clone(),
            width: spec.width,
            height: spec.height,
            streaming: spec.init_ok && !init_failed,
            explain_url: Vec::new(),
            explain_token: Vec::new(),
            has_frame: false,
        }
    }

    /// `SetExplainUrl` (from `initialize`: the token is cleared when not given).
    pub fn set_explain_url(&mut self, url: &[u8], token: &[u8]) {
        self.explain_url = url.to_vec();
        self.explain_token = token.to_vec();
    }

    /// `Capture()`: false when the camera is not streaming.
    pub fn capture(&mut self) -> bool {
        if !self.streaming {
            return false;
        }
        self.has_frame = true;
        true
    }

    /// Bytes of one RGB565 frame (what the log reports as `len`).
    pub fn frame_len(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height) * 2
    }
}
