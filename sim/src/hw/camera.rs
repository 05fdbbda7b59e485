//! `Esp32Camera` as the MCP tool sees it (`main/boards/common/esp32_camera.cc`): capture,
//! then explain via an HTTP POST to the URL and token an `initialize` set (FIRMWARE.md §5, quirk 29).
//!
//! Knows nothing about MCP: the callback turns failures into the firmware's messages.

use crate::board::CameraSpec;

#[derive(Clone, Debug)]
pub struct Camera {
    pub sensor: String,
    pub width: u32,
    pub height: u32,
    /// `streaming_on_`: false when `esp_camera_init` failed (the tool is still registered).
    pub streaming: bool,
    pub explain_url: Vec<u8>,
    pub explain_token: Vec<u8>,
    /// A frame is held after the first successful capture.
    pub has_frame: bool,
}

impl Camera {
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
