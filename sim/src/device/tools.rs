//! Tool callbacks: the one bridge from the MCP layer to the hardware (`AddCommonTools`,
//! `AddUserOnlyTools`, the board constructors' lambdas; FIRMWARE.md §3, §7, §9). Each callback
//! runs on the main task and returns, throws, blocks the main task (network) or panics.

use crate::board::{Behavior, BoardTool, ReturnSpec};
use crate::device::Core;
use crate::device::app::{Running, Task};
use crate::device::upgrade::UpgradeStage;
use crate::hw::backlight::SetOutcome;
use crate::hw::nvs::EspErr;
use crate::hw::nvs::names;
use crate::mcp::{PropertyValue, ReturnValue, ToolAction, wire};
use crate::time::SimDuration;
use crate::trace::{Event, LogLevel, NvsValue};
use crate::world::HttpOutcome;

/// What a callback did.
pub(super) enum Callback {
    Return(ReturnValue),
    Throw(Vec<u8>),
    /// The callback blocks the main task (network) and then returns or throws.
    Blocked(SimDuration, Result<ReturnValue, Vec<u8>>),
    /// `ESP_ERROR_CHECK` failed (or similar abort) inside the callback.
    Panic(String),
}

impl Running {
    /// `Backlight::SetBrightness(b, permanent)`.
    pub(super) fn set_brightness(&mut self, core: &mut Core, brightness: u8, permanent: bool) -> Option<EspErr> {
        let now = core.now;
        let backlight = self.backlight.as_mut()?;
        let clamped = brightness.min(100);
        if clamped == backlight.brightness() {
            return None;
        }
        if permanent && let Err(e) = core.nvs_set(names::DISPLAY, names::BRIGHTNESS, NvsValue::I32(i32::from(clamped)))
        {
            return Some(e);
        }
        if let SetOutcome::Fading { target, .. } = backlight.set_brightness(now, clamped) {
            core.emit(|| Event::BacklightTarget { target });
            core.log(LogLevel::Info, "Backlight", || format!("Set brightness to {target}"));
        }
        None
    }

    /// `display->SetTheme(theme)` for a registered name; persists on LCD. Returns whether the
    /// name was found, or the NVS error that aborts.
    pub(super) fn apply_theme(&mut self, core: &mut Core, name: &[u8]) -> Result<bool, EspErr> {
        let Some(theme) = self.display.set_theme(name) else {
            if self.display.is_named() {
                let shown = String::from_utf8_lossy(name).into_owned();
                core.log(LogLevel::Error, "LcdDisplay", || format!("Invalid theme name: {shown}"));
            }
            return Ok(false);
        };
        core.emit(|| Event::ThemeApplied { theme: theme.clone() });
        if self.display.persists_theme() {
            core.nvs_set(names::DISPLAY, names::THEME, NvsValue::Str(theme.into_bytes()))?;
        }
        Ok(true)
    }

    /// `AudioCodec::SetOutputVolume`: store, log, persist.
    pub(super) fn set_volume(&mut self, core: &mut Core, volume: i32) -> Result<(), EspErr> {
        self.volume = volume;
        let now = core.now;
        self.audio.set_volume(&mut core.audio, now, volume);
        core.emit(|| Event::VolumeChanged { volume });
        core.log(LogLevel::Info, "AudioCodec", || {
            format!("Set output volume to {volume}")
        });
        core.nvs_set(names::AUDIO, names::OUTPUT_VOLUME, NvsValue::I32(volume))
    }

    pub(super) fn http(&self, core: &mut Core, method: &'static str, url: &[u8]) -> HttpOutcome {
        let outcome = core.world.http_open(url);
        core.emit(|| Event::HttpOpened {
            method,
            url: url.to_vec(),
            outcome: match &outcome {
                HttpOutcome::Unreachable { .. } => "fail".to_string(),
                HttpOutcome::Answered { status, .. } => format!("status {status}"),
            },
        });
        outcome
    }

    /// The callbacks (main task).
    pub(super) fn call(&mut self, core: &mut Core, tool: usize, args: &[PropertyValue]) -> Callback {
        let action = self.mcp.tool(tool).action().clone();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(PropertyValue::Int(0));
        let panic = |e: EspErr| Callback::Panic(format!("ESP_ERROR_CHECK failed: {e}"));
        match action {
            ToolAction::GetDeviceStatus => Callback::Return(ReturnValue::Text(self.device_status(core))),
            ToolAction::SetVolume => match self.set_volume(core, arg(0).as_int()) {
                Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                Err(e) => panic(e),
            },
            ToolAction::SetBrightness => {
                // `static_cast<uint8_t>(value)`.
                let b = arg(0).as_int() as u8;
                match self.set_brightness(core, b, true) {
                    None => Callback::Return(ReturnValue::Bool(true)),
                    Some(e) => panic(e),
                }
            }
            // 1.x ignores what `SetTheme` did and answers `true`.
            ToolAction::SetTheme => match self.apply_theme(core, arg(0).as_bytes()) {
                Ok(found) => Callback::Return(ReturnValue::Bool(found || self.display.is_named())),
                Err(e) => panic(e),
            },
            ToolAction::TakePhoto => {
                let outcome = self.take_photo(core, arg(0).as_bytes());
                if core.firmware.camera_failures_thrown {
                    outcome
                } else {
                    failures_as_text(outcome)
                }
            }
            ToolAction::LampGetState { gpio } => {
                let on = self.gpio_flags.get(&gpio).copied().unwrap_or(false);
                Callback::Return(ReturnValue::Text(
                    if on { wire::LAMP_POWER_ON } else { wire::LAMP_POWER_OFF }
                        .as_bytes()
                        .to_vec(),
                ))
            }
            ToolAction::LampTurnOn { gpio } => {
                self.drive_gpio(core, gpio, true);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::LampTurnOff { gpio } => {
                self.drive_gpio(core, gpio, false);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::GetSystemInfo => Callback::Return(ReturnValue::Text(self.system_info(core))),
            ToolAction::Reboot => {
                self.main.schedule(Task::UserReboot);
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::UpgradeFirmware => {
                let url = arg(0).as_bytes().to_vec();
                core.log(LogLevel::Info, "MCP", || {
                    format!(
                        "User requested firmware upgrade from URL: {}",
                        String::from_utf8_lossy(&url)
                    )
                });
                self.main.schedule(Task::Upgrade {
                    url,
                    stage: UpgradeStage::Start,
                });
                Callback::Return(ReturnValue::Bool(true))
            }
            ToolAction::ScreenGetInfo => {
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
            ToolAction::ScreenSnapshot => self.snapshot(core, arg(0).as_bytes(), arg(1).as_int()),
            ToolAction::ScreenPreviewImage => self.preview_image(core, arg(0).as_bytes()),
            ToolAction::AssetsSetDownloadUrl => {
                match core.nvs_set("assets", "download_url", NvsValue::Str(arg(0).as_bytes().to_vec())) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            ToolAction::Board(index) => self.board_tool(core, index, tool, args),
        }
    }

    pub(super) fn drive_gpio(&mut self, core: &mut Core, gpio: u32, on: bool) {
        self.gpio_flags.insert(gpio, on);
        core.emit(|| Event::GpioSet {
            gpio,
            level: u8::from(on),
        });
    }

    pub(super) fn take_photo(&mut self, core: &mut Core, question: &[u8]) -> Callback {
        let Some(camera) = self.camera.as_mut() else {
            return Callback::Throw(wire::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        };
        if !camera.capture() {
            return Callback::Throw(wire::ERR_FAILED_TO_CAPTURE_PHOTO.into());
        }
        let (w, h, len) = (camera.width, camera.height, camera.frame_len());
        core.emit(|| Event::CameraCaptured { width: w, height: h });
        core.log(LogLevel::Info, "Esp32Camera", || {
            format!("Captured frame: {w}x{h}, len={len}, format=0")
        });
        if camera.explain_url.is_empty() {
            return Callback::Throw(wire::ERR_EXPLAIN_URL_NOT_SET.into());
        }
        let url = camera.explain_url.clone();
        let asked = String::from_utf8_lossy(question).into_owned();
        core.emit(|| Event::Note {
            text: format!("camera_explain question={}", crate::trace::quote(asked.as_bytes())),
        });
        match self.http(core, "POST", &url) {
            HttpOutcome::Unreachable { after } => {
                core.log(LogLevel::Error, "Esp32Camera", || wire::ERR_CONNECT_EXPLAIN_URL);
                Callback::Blocked(after, Err(wire::ERR_CONNECT_EXPLAIN_URL.into()))
            }
            HttpOutcome::Answered { status, body, latency } => {
                if status != 200 {
                    core.log(LogLevel::Error, "Esp32Camera", || {
                        format!("Failed to upload photo, status code: {status}")
                    });
                    Callback::Blocked(latency, Err(wire::ERR_UPLOAD_PHOTO.into()))
                } else {
                    Callback::Blocked(latency, Ok(ReturnValue::Text(body)))
                }
            }
        }
    }

    pub(super) fn snapshot(&mut self, core: &mut Core, url: &[u8], quality: i32) -> Callback {
        // SnapshotToJpeg: a tiny deterministic JPEG whose size grows with quality.
        let bytes = 16 + (quality.max(0) as usize) * 7 / 80;
        core.emit(|| Event::Note {
            text: format!("display_snapshot quality={quality} bytes={bytes}"),
        });
        core.log(LogLevel::Info, "MCP", || {
            format!("Upload snapshot {bytes} bytes to {}", String::from_utf8_lossy(url))
        });
        match self.http(core, "POST", url) {
            HttpOutcome::Unreachable { after } => Callback::Blocked(after, Err(wire::concat(wire::ERR_OPEN_URL, url))),
            HttpOutcome::Answered { status, latency, .. } if status != 200 => Callback::Blocked(
                latency,
                Err(wire::concat(wire::ERR_UNEXPECTED_STATUS, status.to_string().as_bytes())),
            ),
            HttpOutcome::Answered { latency, .. } => Callback::Blocked(latency, Ok(ReturnValue::Bool(true))),
        }
    }

    pub(super) fn preview_image(&mut self, core: &mut Core, url: &[u8]) -> Callback {
        match self.http(core, "GET", url) {
            HttpOutcome::Unreachable { after } => Callback::Blocked(after, Err(wire::concat(wire::ERR_OPEN_URL, url))),
            HttpOutcome::Answered { status, latency, .. } if status != 200 => Callback::Blocked(
                latency,
                Err(wire::concat(wire::ERR_UNEXPECTED_STATUS, status.to_string().as_bytes())),
            ),
            HttpOutcome::Answered { body, latency, .. } => {
                // heap_caps_malloc(0) returns NULL; so does a body larger than the free heap.
                if body.is_empty() || body.len() > core.spec.target.free_heap {
                    Callback::Blocked(latency, Err(wire::concat(wire::ERR_ALLOCATE_IMAGE, url)))
                } else {
                    Callback::Blocked(latency, Ok(ReturnValue::Bool(true)))
                }
            }
        }
    }

    /// A board-file tool's behaviour.
    pub(super) fn board_tool(
        &mut self,
        core: &mut Core,
        index: usize,
        tool: usize,
        args: &[PropertyValue],
    ) -> Callback {
        let spec = core.spec.clone();
        let BoardTool::Tool(t) = &spec.board_tools[index] else {
            return Callback::Throw(b"not a board tool".to_vec());
        };
        let names: Vec<String> = self
            .mcp
            .tool(tool)
            .properties()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
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
                self.drive_gpio(core, *gpio, on);
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
                match core.nvs_set(namespace, key, value) {
                    Ok(()) => Callback::Return(ReturnValue::Bool(true)),
                    Err(e) => panic(e),
                }
            }
            Behavior::Returns { value } => Callback::Return(match value {
                ReturnSpec::Bool(b) => ReturnValue::Bool(*b),
                ReturnSpec::Int(i) => ReturnValue::Int(*i),
                ReturnSpec::Text(s) => ReturnValue::Text(s.as_bytes().to_vec()),
            }),
            Behavior::Builtin { name, motion } => self.builtin(core, *name, motion.as_deref(), &arg_named),
        }
    }
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

pub(super) fn panic(e: EspErr) -> Callback {
    Callback::Panic(format!("ESP_ERROR_CHECK failed: {e}"))
}
