//! The objects the board constructor makes (`Board::GetInstance()`: display, backlight,
//! camera, lamps and GPIO tools, otto-robot's controller) and the tool callbacks that act on
//! them (`AddCommonTools`, `AddUserOnlyTools`, the board constructors' lambdas,
//! `lamp_controller.h`, `backlight.cc`, `esp32_camera.cc`; docs/reference/firmware.md §3, §7, §10). Each
//! callback runs on the main task and returns, throws, blocks the main task (network) or panics.
//! The built-in behaviours a board file names (otto-robot) are in `builtin.rs`.

use std::collections::BTreeMap;

use crate::board::DisplayKind;
use crate::board::{Behavior, BoardTool, ReturnSpec};
use crate::device::io::BoardIo;
use crate::device::otto::{self, Otto, needs_otto};
use crate::device::platform::Faults;
use crate::firmware::ThemeTool;
use crate::hw::backlight::{Backlight, SetOutcome};
use crate::hw::camera::Camera;
use crate::hw::display::Display;
use crate::hw::nvs::EspErr;
use crate::hw::nvs::names;
use crate::hw::screen::ScreenCall;
use crate::mcp::{McpTool, PropertyValue, ReturnValue, strings};
use crate::time::{SimDuration, earliest};
use crate::trace::{Event, LogLevel, NvsValue};
use crate::world::HttpOutcome;

/// What a callback did.
pub(crate) enum Callback {
    Return(ReturnValue),
    Throw(Vec<u8>),
    /// The callback blocks the main task (network) and then returns or throws.
    Blocked(SimDuration, Result<ReturnValue, Vec<u8>>),
    /// `ESP_ERROR_CHECK` failed (or similar abort) inside the callback.
    Panic(String),
}

/// The board's objects of one boot.
pub(crate) struct Peripherals {
    /// The display object (`NoDisplay` when the board has none or its init failed).
    pub(crate) display: Display,
    /// The backlight, on boards with one.
    pub(crate) backlight: Option<Backlight>,
    /// `Esp32Camera`, on boards with one (also when its init failed).
    pub(crate) camera: Option<Camera>,
    /// Software flags of lamps and board GPIO tools (the `power_` of `LampController`).
    pub(crate) gpio_flags: BTreeMap<u32, bool>,
    /// otto-robot's controller, on boards that use it.
    pub(crate) otto: Option<Otto>,
}

impl Peripherals {
    /// The board constructor's objects, in its order: display (with the stored theme), camera,
    /// GPIOs, otto's controller (trims from NVS), the backlight (brightness restored), the
    /// board's forced theme.
    pub(crate) fn construct(io: &mut BoardIo<'_>, faults: &Faults) -> Peripherals {
        let spec = io.spec.clone();
        let stored_theme = io
            .nvs
            .get_str(names::DISPLAY, names::THEME)
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let named = io.firmware.theme_tool == ThemeTool::Named;
        let display = Display::new(&spec.display, faults.display_init_fails, stored_theme.as_deref(), named);
        let camera = spec.camera.as_ref().map(|c| Camera::new(c, faults.camera_init_fails));
        let mut gpio_flags = BTreeMap::new();
        for gpio in spec.lamp_gpios().chain(spec.board_tools.iter().filter_map(|t| match t {
            BoardTool::Tool(t) => t.behavior.gpio(),
            BoardTool::Lamp { .. } => None,
        })) {
            if gpio_flags.insert(gpio, false).is_none() {
                io.emit(|| Event::GpioConfigured { gpio });
                io.emit(|| Event::GpioSet { gpio, level: 0 });
            }
        }
        let mut board = Peripherals {
            display,
            backlight: None,
            camera,
            gpio_flags,
            otto: needs_otto(&spec).then(|| construct_otto(io)),
        };
        if let Some(bl) = spec.backlight.as_ref() {
            board.backlight = Some(Backlight::new());
            let stored = if bl.restore {
                io.nvs
                    .get_i32(names::DISPLAY, names::BRIGHTNESS, i32::from(bl.default_brightness))
            } else {
                i32::from(bl.boot_brightness)
            };
            let restored = if stored <= 0 {
                io.log(LogLevel::Warn, "Backlight", || {
                    format!("Brightness value ({stored}) is too small, setting to default (10)")
                });
                10
            } else {
                stored
            };
            board.set_brightness(io, restored.clamp(0, 255) as u8, false);
        }
        if let Some(theme) = spec.display.boot_theme.as_deref() {
            // A failed NVS write here would abort the boot; the board's own theme write is
            // never refused by a healthy partition, so the outcome is not modelled further.
            let _ = board.apply_theme(io, theme.as_bytes());
        }
        board
    }

    /// The earliest esp_timer deadline of the board's objects (backlight fade, otto's task).
    #[inline]
    pub(crate) fn timer_deadline(&self) -> Option<crate::time::SimTime> {
        let backlight = self.backlight.as_ref().and_then(Backlight::next_deadline);
        earliest(backlight, self.otto.as_ref().and_then(Otto::deadline))
    }

    /// Fires the board objects' timers due at `io.now`.
    #[inline]
    pub(crate) fn fire_timers(&mut self, io: &mut BoardIo<'_>) {
        let now = io.now;
        if let Some(b) = self.backlight.as_mut() {
            while let Some(step) = b.on_tick(now) {
                io.emit(|| Event::BacklightStep {
                    brightness: step.brightness,
                    duty: step.duty,
                });
            }
        }
        if let Some(note) = self.otto.as_mut().and_then(|o| o.on_tick(now)) {
            io.log(LogLevel::Info, "OttoController", || note);
        }
    }

    /// `Backlight::SetBrightness(b, permanent)`.
    pub(crate) fn set_brightness(&mut self, io: &mut BoardIo<'_>, brightness: u8, permanent: bool) -> Option<EspErr> {
        let now = io.now;
        let backlight = self.backlight.as_mut()?;
        let clamped = brightness.min(100);
        if clamped == backlight.brightness() {
            return None;
        }
        if permanent && let Err(e) = io.nvs_set(names::DISPLAY, names::BRIGHTNESS, NvsValue::I32(i32::from(clamped))) {
            return Some(e);
        }
        if let SetOutcome::Fading { target, .. } = backlight.set_brightness(now, clamped) {
            io.emit(|| Event::BacklightTarget { target });
            io.log(LogLevel::Info, "Backlight", || format!("Set brightness to {target}"));
        }
        None
    }

    /// `display->SetTheme(theme)` for a registered name; persists on LCD. Returns whether the
    /// name was found, or the NVS error that aborts.
    pub(crate) fn apply_theme(&mut self, io: &mut BoardIo<'_>, name: &[u8]) -> Result<bool, EspErr> {
        let Some(theme) = self.display.set_theme(name) else {
            if self.display.is_named() {
                let shown = String::from_utf8_lossy(name).into_owned();
                io.log(LogLevel::Error, "LcdDisplay", || format!("Invalid theme name: {shown}"));
            }
            return Ok(false);
        };
        io.emit(|| Event::ThemeApplied { theme: theme.clone() });
        if self.display.persists_theme() {
            io.nvs_set(names::DISPLAY, names::THEME, NvsValue::Str(theme.into_bytes()))?;
        }
        Ok(true)
    }

    /// Drives a lamp's or a board tool's GPIO and keeps its software flag.
    pub(crate) fn drive_gpio(&mut self, io: &mut BoardIo<'_>, gpio: u32, on: bool) {
        self.gpio_flags.insert(gpio, on);
        io.emit(|| Event::GpioSet {
            gpio,
            level: u8::from(on),
        });
    }

    /// `self.camera.take_photo`: capture, then `Explain` (POST to the vision URL); 1.x returns
    /// its failures as ordinary text instead of throwing.
    pub(crate) fn take_photo(&mut self, io: &mut BoardIo<'_>, question: &[u8]) -> Callback {
        let outcome = self.capture_and_explain(io, question);
        if io.firmware.camera_failures_thrown {
            outcome
        } else {
            failures_as_text(outcome)
        }
    }

    /// `self.lamp.get_state`.
    pub(crate) fn lamp_state(&self, gpio: u32) -> Callback {
        let on = self.gpio_flags.get(&gpio).copied().unwrap_or(false);
        Callback::Return(ReturnValue::Text(
            if on {
                strings::LAMP_POWER_ON
            } else {
                strings::LAMP_POWER_OFF
            }
            .as_bytes()
            .to_vec(),
        ))
    }

    /// `self.screen.get_info`.
    pub(crate) fn screen_info(&self) -> Callback {
        let mut json = Vec::with_capacity(64);
        json.extend_from_slice(b"{\"width\":");
        crate::cjson::write_int(&mut json, self.display.width() as i32);
        json.extend_from_slice(b",\"height\":");
        crate::cjson::write_int(&mut json, self.display.height() as i32);
        json.extend_from_slice(if self.display.is_monochrome() {
            b",\"monochrome\":true}"
        } else {
            b",\"monochrome\":false}"
        });
        Callback::Return(ReturnValue::Json(json))
    }

    fn capture_and_explain(&mut self, io: &mut BoardIo<'_>, question: &[u8]) -> Callback {
        let Some(camera) = self.camera.as_mut() else {
            return Callback::Throw(strings::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        };
        if !camera.capture() {
            return Callback::Throw(strings::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        }
        let (w, h, len) = (camera.width, camera.height, camera.frame_len());
        io.emit(|| Event::CameraCaptured { width: w, height: h });
        io.log(LogLevel::Info, "Esp32Camera", || {
            format!("Captured frame: {w}x{h}, len={len}, format=0")
        });
        if camera.explain_url.is_empty() {
            return Callback::Throw(strings::ERR_EXPLAIN_URL_NOT_SET.into());
        }
        let url = camera.explain_url.clone();
        let asked = String::from_utf8_lossy(question).into_owned();
        io.emit(|| Event::CameraExplained { question: asked });
        match io.http("POST", &url) {
            HttpOutcome::Unreachable { after } => {
                io.log(LogLevel::Error, "Esp32Camera", || strings::ERR_CONNECT_EXPLAIN_URL);
                Callback::Blocked(after, Err(strings::ERR_CONNECT_EXPLAIN_URL.into()))
            }
            HttpOutcome::Answered { status, body, latency } => {
                if status != 200 {
                    io.log(LogLevel::Error, "Esp32Camera", || {
                        format!("Failed to upload photo, status code: {status}")
                    });
                    Callback::Blocked(latency, Err(strings::ERR_UPLOAD_PHOTO.into()))
                } else {
                    Callback::Blocked(latency, Ok(ReturnValue::Text(body)))
                }
            }
        }
    }

    /// `self.screen.snapshot` (`mcp_server.cc:190-242`): the screen as LVGL holds it, as a JPEG
    /// (`LvglDisplay::SnapshotToJpeg`), POSTed as `multipart/form-data` to `url`.
    pub(crate) fn snapshot(&mut self, io: &mut BoardIo<'_>, url: &[u8], quality: i32) -> Callback {
        let jpeg = if io.world.snapshot_stub {
            // The conformance recorder's stub display: a fixed-size blob, never decoded.
            let mut blob = vec![0u8; 16 + (quality.max(0) as usize) * 7 / 80];
            blob[..2].copy_from_slice(&[0xFF, 0xD8]);
            let n = blob.len();
            blob[n - 2..].copy_from_slice(&[0xFF, 0xD9]);
            blob
        } else {
            let state = io.screen.at(io.now);
            // lv_snapshot_take allocates the whole screen in RGB565.
            let fits = |w: u32, h: u32| (w as usize) * (h as usize) * 2 <= io.spec.target.free_heap;
            match crate::hw::picture::framebuffer(io.spec, &state, io.now) {
                Some(fb) if fits(fb.width(), fb.height()) => fb.jpeg(quality),
                _ => {
                    io.log(
                        LogLevel::Error,
                        "Display",
                        || "Failed to take snapshot, draw_buffer is nullptr",
                    );
                    return Callback::Throw(strings::ERR_SNAPSHOT_SCREEN.into());
                }
            }
        };
        let bytes = jpeg.len();
        io.emit(|| Event::SnapshotTaken { quality, bytes });
        io.log(LogLevel::Info, "MCP", || {
            format!("Upload snapshot {bytes} bytes to {}", String::from_utf8_lossy(url))
        });
        let mut body = Vec::with_capacity(bytes + 200);
        body.extend_from_slice(b"--");
        body.extend_from_slice(SNAPSHOT_BOUNDARY.as_bytes());
        body.extend_from_slice(b"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"screenshot.jpg\"\r\n");
        body.extend_from_slice(b"Content-Type: image/jpeg\r\n\r\n");
        body.extend_from_slice(&jpeg);
        body.extend_from_slice(b"\r\n--");
        body.extend_from_slice(SNAPSHOT_BOUNDARY.as_bytes());
        body.extend_from_slice(b"--\r\n");
        let content_type = format!("multipart/form-data; boundary={SNAPSHOT_BOUNDARY}");
        let outcome = io.http_upload("POST", url, content_type, body);
        match answered(outcome, url) {
            Ok((latency, result)) => {
                io.log(LogLevel::Info, "MCP", || {
                    format!("Snapshot screen result: {}", String::from_utf8_lossy(&result))
                });
                Callback::Blocked(latency, Ok(ReturnValue::Bool(true)))
            }
            Err(failed) => failed,
        }
    }

    /// `self.screen.preview_image` (`mcp_server.cc:244-282`): the body downloaded, made an
    /// `LvglAllocatedImage` (whose constructor throws when no LVGL decoder reads its header: only
    /// PNG is enabled, `sdkconfig.defaults` `CONFIG_LV_USE_LODEPNG=y`), shown by an LCD over the
    /// emoji for 5 s (`lcd_display.cc:1018-1052`); the OLED's `SetPreviewImage` does nothing.
    pub(crate) fn preview_image(&mut self, io: &mut BoardIo<'_>, url: &[u8]) -> Callback {
        match http_ok(io, "GET", url) {
            // heap_caps_malloc(0) returns NULL; so does a body larger than the free heap.
            Ok((latency, body)) if body.is_empty() || body.len() > io.spec.target.free_heap => {
                Callback::Blocked(latency, Err(strings::concat(strings::ERR_ALLOCATE_IMAGE, url)))
            }
            Ok((latency, body)) => {
                if body.len() < PNG_MAGIC.len() || body[..PNG_MAGIC.len()] != PNG_MAGIC {
                    // The bytes leak: the throw skips their heap_caps_free.
                    io.log(LogLevel::Error, "LvglImage", || {
                        format!("Failed to get image info, data: {IMAGE_BUFFER_AT} size: {}", body.len())
                    });
                    return Callback::Blocked(latency, Err(strings::ERR_IMAGE_INFO.into()));
                }
                if self.display.kind() == DisplayKind::Lcd {
                    let image = crate::hw::picture::preview_image(&body);
                    let call = ScreenCall::ShowPreview {
                        image: std::sync::Arc::new(image),
                        duration_ms: crate::hw::screen::PREVIEW_MS,
                    };
                    io.screen.record(io.now, call);
                }
                Callback::Blocked(latency, Ok(ReturnValue::Bool(true)))
            }
            Err(failed) => failed,
        }
    }

    /// A board-file tool's behaviour.
    pub(crate) fn board_tool(
        &mut self,
        io: &mut BoardIo<'_>,
        index: usize,
        tool: &McpTool,
        args: &[PropertyValue],
    ) -> Callback {
        let spec = io.spec.clone();
        let BoardTool::Tool(t) = &spec.board_tools[index] else {
            return Callback::Throw(b"not a board tool".to_vec());
        };
        let names: Vec<String> = tool.properties().iter().map(|p| p.name().to_string()).collect();
        let arg_named = |name: &str| names.iter().position(|n| n == name).and_then(|i| args.get(i).cloned());
        match &t.behavior {
            Behavior::Gpio { gpio, level, from } => {
                let on = match (level, from) {
                    (Some(l), _) => *l != 0,
                    (None, Some(f)) => match arg_named(f) {
                        Some(PropertyValue::Bool(b)) => b,
                        Some(PropertyValue::Int(i)) => i != 0,
                        _ => false,
                    },
                    (None, None) => false,
                };
                self.drive_gpio(io, *gpio, on);
                Callback::Return(ReturnValue::Bool(true))
            }
            Behavior::GpioState { gpio, key } => {
                let on = self.gpio_flags.get(gpio).copied().unwrap_or(false);
                Callback::Return(ReturnValue::Text(format!("{{\"{key}\": {on}}}").into_bytes()))
            }
            Behavior::NvsSet { namespace, key, from } => {
                let value = match arg_named(from) {
                    Some(PropertyValue::Int(i)) => NvsValue::I32(i),
                    Some(PropertyValue::Bool(b)) => NvsValue::U8(u8::from(b)),
                    Some(PropertyValue::Str(s)) => NvsValue::Str(s),
                    None => NvsValue::I32(0),
                };
                match io.nvs_set(namespace, key, value) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            Behavior::Returns { value } => Callback::Return(match value {
                ReturnSpec::Bool(b) => ReturnValue::Bool(*b),
                ReturnSpec::Int(i) => ReturnValue::Int(*i),
                ReturnSpec::Text(s) => ReturnValue::Text(s.as_bytes().to_vec()),
            }),
            Behavior::Builtin { name, motion } => self.builtin(io, *name, motion.as_deref(), &arg_named),
            Behavior::Unmodelled { returns, .. } => {
                io.emit(|| Event::NoEffectModelled {
                    tool: t.name.to_string(),
                });
                Callback::Return(match returns {
                    Some(ReturnSpec::Bool(b)) => ReturnValue::Bool(*b),
                    Some(ReturnSpec::Int(i)) => ReturnValue::Int(*i),
                    Some(ReturnSpec::Text(s)) => ReturnValue::Text(s.as_bytes().to_vec()),
                    None => ReturnValue::Text(crate::board::UNMODELLED_REPLY.as_bytes().to_vec()),
                })
            }
        }
    }
}

/// An HTTP request as the screen tools make it: the answer's latency and body on status 200;
/// otherwise the callback's failure, thrown after the wait (`Failed to open URL: <url>`,
/// `Unexpected status code: <status>`).
fn http_ok(io: &mut BoardIo<'_>, method: &'static str, url: &[u8]) -> Result<(SimDuration, Vec<u8>), Callback> {
    let outcome = io.http(method, url);
    answered(outcome, url)
}

/// [`http_ok`] for an outcome already had.
fn answered(outcome: HttpOutcome, url: &[u8]) -> Result<(SimDuration, Vec<u8>), Callback> {
    match outcome {
        HttpOutcome::Unreachable { after } => Err(Callback::Blocked(
            after,
            Err(strings::concat(strings::ERR_OPEN_URL, url)),
        )),
        HttpOutcome::Answered { status, latency, .. } if status != 200 => Err(Callback::Blocked(
            latency,
            Err(strings::concat(
                strings::ERR_UNEXPECTED_STATUS,
                status.to_string().as_bytes(),
            )),
        )),
        HttpOutcome::Answered { latency, body, .. } => Ok((latency, body)),
    }
}

/// `self.screen.snapshot`'s multipart boundary (`mcp_server.cc:207`).
const SNAPSHOT_BOUNDARY: &str = "----ESP32_SCREEN_SNAPSHOT_BOUNDARY";

/// The PNG signature LVGL's PNG decoder checks (`lv_lodepng.c` `decoder_info`).
const PNG_MAGIC: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// The address the twin prints for the downloaded image's buffer (the firmware prints its heap
/// pointer, `%p`; the twin has no heap, so one fixed PSRAM-like address).
const IMAGE_BUFFER_AT: &str = "0x3c0a0000";

/// `OttoController`'s constructor: trims from NVS, then the home move it queues.
fn construct_otto(io: &mut BoardIo<'_>) -> Otto {
    let trims = otto::TRIM_KEYS.map(|k| io.nvs.get_i32(otto::TRIM_NAMESPACE, k, 0));
    io.log(LogLevel::Info, "OttoController", || {
        format!(
            "从NVS加载微调设置: 左腿={}, 右腿={}, 左脚={}, 右脚={}, 左手={}, 右手={}",
            trims[0], trims[1], trims[2], trims[3], trims[4], trims[5]
        )
    });
    let o = Otto::new(trims, io.world.board_tasks_run, io.now);
    io.log(LogLevel::Info, "OttoController", || {
        otto::Motion::new(otto::kind::HOME, 1, 1000, 1, 0).log_line()
    });
    o
}

/// 1.x `take_photo` / `Esp32Camera::Explain` return their failures as ordinary text,
/// `{"success": false, "message": "…"}`, instead of throwing.
fn failures_as_text(outcome: Callback) -> Callback {
    let text = |message: Vec<u8>| {
        let mut t = b"{\"success\": false, \"message\": \"".to_vec();
        t.extend_from_slice(&message);
        t.extend_from_slice(b"\"}");
        ReturnValue::Text(t)
    };
    match outcome {
        Callback::Throw(message) => Callback::Return(text(message)),
        Callback::Blocked(d, Err(message)) => Callback::Blocked(d, Ok(text(message))),
        other => other,
    }
}

pub(crate) fn panic(e: EspErr) -> Callback {
    Callback::Panic(format!("ESP_ERROR_CHECK failed: {e}"))
}
