//! Trace events: what happened inside the simulated device, in past tense, with the virtual time
//! it happened at. Rendered in the style of the conformance recorder (`#event …` lines), so a
//! twin transcript reads like the firmware's.
//!
//! Knows nothing about how events are produced.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::firmware::state::DeviceState;
use crate::time::SimTime;

mod lines;

pub use lines::{quote, render_event, render_events};

/// The text of a log line: a constant, formatted for this event, or shared by every boot that
/// prints the same line (the tool registration log). Reads as a `str` in every case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogText {
    /// A fixed text.
    Static(&'static str),
    /// Text formatted for this event.
    Owned(String),
    /// Text shared between boots.
    Shared(Arc<str>),
}

impl Deref for LogText {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            LogText::Static(s) => s,
            LogText::Owned(s) => s,
            LogText::Shared(s) => s,
        }
    }
}

impl fmt::Display for LogText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl From<&'static str> for LogText {
    fn from(s: &'static str) -> Self {
        LogText::Static(s)
    }
}

impl From<String> for LogText {
    fn from(s: String) -> Self {
        LogText::Owned(s)
    }
}

impl From<Arc<str>> for LogText {
    fn from(s: Arc<str>) -> Self {
        LogText::Shared(s)
    }
}

/// A log line the firmware prints, as data: formatted as `<letter> (<ms>) <tag>: <text>` only
/// where it is shown ([`Event::Logged`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// The level.
    pub level: LogLevel,
    /// The ESP_LOG tag.
    pub tag: &'static str,
    /// The message after `tag: `.
    pub text: String,
}

impl LogRecord {
    /// An `ESP_LOGE` of the `MCP` tag (`mcp_server.cc`'s errors), boxed: it rides in every
    /// receive outcome, and most have none.
    pub fn mcp_error(text: String) -> Box<LogRecord> {
        Box::new(LogRecord {
            level: LogLevel::Error,
            tag: "MCP",
            text,
        })
    }
}

/// Why a message was dropped without any reply (docs/reference/firmware.md §4.2, quirk 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// cJSON could not parse the bytes.
    Unparseable,
    /// `jsonrpc` absent, not a string, or not exactly `2.0`.
    InvalidVersion,
    /// `method` absent or not a string.
    MissingMethod,
    /// A `notifications*` method.
    Notification,
    /// `params` present but not an object.
    InvalidParams,
    /// `id` absent or not a number.
    InvalidId,
    /// cJSON ran out of heap while parsing (the receive task logs it and drops the payload).
    OutOfMemory,
    /// The device was not running (off, or in a boot loop) when the payload arrived.
    NotRunning,
}

impl DropReason {
    /// The short reason text used in the `MessageDropped` trace event.
    pub fn as_str(&self) -> &'static str {
        match self {
            DropReason::Unparseable => "unparseable",
            DropReason::InvalidVersion => "invalid jsonrpc version",
            DropReason::MissingMethod => "missing method",
            DropReason::Notification => "notification",
            DropReason::InvalidParams => "params not an object",
            DropReason::InvalidId => "id missing or not a number",
            DropReason::OutOfMemory => "out of memory while parsing",
            DropReason::NotRunning => "device not running",
        }
    }
}

/// One thing that happened, at `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// Virtual time of the event.
    pub at: SimTime,
    /// What happened.
    pub kind: Event,
}

/// Why the device (re)started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootReason {
    /// First power-up (or power restored after a cut).
    PowerOn,
    /// `esp_restart()` (reboot tool, successful upgrade).
    EspRestart,
    /// Restart after a panic (`ESP_ERROR_CHECK` or other abort).
    Panic,
}

impl BootReason {
    /// The name rendered in the `boot` trace line.
    pub fn as_str(self) -> &'static str {
        match self {
            BootReason::PowerOn => "poweron",
            BootReason::EspRestart => "esp_restart",
            BootReason::Panic => "panic",
        }
    }
}

/// A value written to NVS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvsValue {
    /// `nvs_set_i32`.
    I32(i32),
    /// `nvs_set_u8`.
    U8(u8),
    /// `nvs_set_str` (raw bytes).
    Str(Vec<u8>),
}

impl fmt::Display for NvsValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvsValue::I32(v) => write!(f, "i32={v}"),
            NvsValue::U8(v) => write!(f, "u8={v}"),
            NvsValue::Str(s) => write!(f, "str={}", quote(s)),
        }
    }
}

/// The `esp_err_t` a failing NVS call returns; its name is what `ESP_ERROR_CHECK` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EspErr {
    /// `ESP_ERR_NVS_INVALID_NAME`: an empty namespace or key.
    NvsInvalidName,
    /// `ESP_ERR_NVS_KEY_TOO_LONG`: a namespace or key over 15 bytes.
    NvsKeyTooLong,
    /// `ESP_ERR_NVS_VALUE_TOO_LONG`: a string over 4000 bytes with its NUL.
    NvsValueTooLong,
    /// `ESP_ERR_NVS_NOT_ENOUGH_SPACE`: the partition has no free entries left.
    NvsNotEnoughSpace,
}

impl EspErr {
    /// The constant's name, as ESP-IDF's `esp_err_to_name` gives it.
    pub fn name(self) -> &'static str {
        match self {
            EspErr::NvsInvalidName => "ESP_ERR_NVS_INVALID_NAME",
            EspErr::NvsKeyTooLong => "ESP_ERR_NVS_KEY_TOO_LONG",
            EspErr::NvsValueTooLong => "ESP_ERR_NVS_VALUE_TOO_LONG",
            EspErr::NvsNotEnoughSpace => "ESP_ERR_NVS_NOT_ENOUGH_SPACE",
        }
    }
}

impl std::fmt::Display for EspErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An ESP_LOG level, written as its letter in log lines (`I (…) MCP: …`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `ESP_LOGE`.
    Error,
    /// `ESP_LOGW`.
    Warn,
    /// `ESP_LOGI`.
    Info,
    /// `ESP_LOGD`.
    Debug,
    /// `ESP_LOGV`.
    Verbose,
}

impl LogLevel {
    /// The level's letter.
    pub fn letter(self) -> char {
        match self {
            LogLevel::Error => 'E',
            LogLevel::Warn => 'W',
            LogLevel::Info => 'I',
            LogLevel::Debug => 'D',
            LogLevel::Verbose => 'V',
        }
    }

    /// The level of a letter (`I` for anything unknown, as the firmware's lines start with one
    /// of the five).
    pub fn from_letter(c: char) -> LogLevel {
        match c {
            'E' => LogLevel::Error,
            'W' => LogLevel::Warn,
            'D' => LogLevel::Debug,
            'V' => LogLevel::Verbose,
            _ => LogLevel::Info,
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

/// Everything the twin records. Variants are past tense.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The device booted (`n` counts boots since the simulation started).
    Booted {
        /// Boot number, starting at 1.
        n: u32,
        /// Why the device started.
        reason: BootReason,
    },
    /// An ESP_LOG line: level letter, tag and text exactly as the firmware formats it.
    Logged {
        /// The level letter (`E`, `W`, `I`, ...).
        level: LogLevel,
        /// The ESP_LOG tag, e.g. `MCP`.
        tag: &'static str,
        /// The message after `tag: `.
        text: LogText,
    },
    /// The main loop took a batch of `tasks` scheduled tasks.
    BatchStarted {
        /// Number of tasks in the batch.
        tasks: usize,
    },
    /// A main-task task blocked in `vTaskDelay`.
    TaskDelayed {
        /// The delay in milliseconds.
        ms: u64,
    },
    /// An MCP payload was dropped on the receive task without a reply.
    MessageDropped {
        /// Why.
        reason: DropReason,
    },
    /// The device produced an MCP payload and handed it to the protocol.
    ReplySent {
        /// The JSON-RPC payload, without the transport envelope.
        payload: Vec<u8>,
    },
    /// A queued reply never left the device.
    ReplyDropped {
        /// The JSON-RPC payload that was not sent.
        payload: Vec<u8>,
        /// Why, e.g. `socket closed`.
        why: &'static str,
    },
    /// A scheduled task was discarded (restart, panic, power cut).
    TaskDropped {
        /// The kind of task: `call`, `reboot`, `upgrade`, `sound`, `busy` or `state`.
        what: &'static str,
        /// Why it was discarded.
        why: &'static str,
    },
    /// An NVS write succeeded.
    NvsSet {
        /// NVS namespace, e.g. `audio`.
        namespace: String,
        /// Key within the namespace.
        key: String,
        /// The value written.
        value: NvsValue,
    },
    /// An NVS key was erased (the stored assets download URL, consumed at boot).
    NvsErased {
        /// NVS namespace.
        namespace: String,
        /// Key within the namespace.
        key: String,
    },
    /// An NVS write failed with an `esp_err_t` name (ESP_ERROR_CHECK will panic).
    NvsFailed {
        /// NVS namespace.
        namespace: String,
        /// Key within the namespace.
        key: String,
        /// The `esp_err_t` name, e.g. `ESP_ERR_NVS_NOT_ENOUGH_SPACE`.
        error: EspErr,
    },
    /// A lamp or board-tool GPIO was configured as an output at boot.
    GpioConfigured {
        /// The GPIO number.
        gpio: u32,
    },
    /// A GPIO output level was set.
    GpioSet {
        /// The GPIO number.
        gpio: u32,
        /// 0 (low) or 1 (high).
        level: u8,
    },
    /// `Application::Reboot()` started (audio channel closed, protocol destroyed).
    RebootEntered,
    /// `esp_restart()`: volatile state is gone.
    Restarted,
    /// An `ESP_ERROR_CHECK` (or other abort) fired.
    Panicked {
        /// The abort message, e.g. `ESP_ERROR_CHECK failed: <esp_err_t>`.
        reason: String,
    },
    /// Power was removed.
    PowerCut,
    /// `SetOutputVolume` stored a new output volume.
    VolumeChanged {
        /// The new volume (0..100).
        volume: i32,
    },
    /// `SetTheme` applied a registered theme.
    ThemeApplied {
        /// The theme name.
        theme: String,
    },
    /// The backlight got a new fade target (the request differed from the current value).
    BacklightTarget {
        /// The target brightness (0..100).
        target: u8,
    },
    /// One backlight timer tick moved the brightness one step.
    BacklightStep {
        /// The brightness after the step.
        brightness: u8,
        /// The LEDC duty written: `(1023 × brightness) / 100`.
        duty: u32,
    },
    /// An HTTP request was opened (camera explain, snapshot, preview, assets download).
    HttpOpened {
        /// `GET` or `POST`.
        method: &'static str,
        /// The URL, as bytes.
        url: Vec<u8>,
        /// `fail` when unreachable, else `status <code>`.
        outcome: String,
    },
    /// The camera captured a frame.
    CameraCaptured {
        /// Frame width in pixels.
        width: u32,
        /// Frame height in pixels.
        height: u32,
    },
    /// A firmware upgrade started downloading.
    OtaStarted {
        /// The firmware URL.
        url: Vec<u8>,
    },
    /// A firmware upgrade ended.
    OtaFinished {
        /// Whether it succeeded (success reboots, failure continues).
        ok: bool,
    },
    /// The device state machine moved to a new state.
    StateChanged {
        /// Previous state.
        from: DeviceState,
        /// New state.
        to: DeviceState,
    },
    /// The state machine refused a transition (the firmware logs a warning).
    StateRejected {
        /// Current state.
        from: DeviceState,
        /// Refused target state.
        to: DeviceState,
    },
    /// `PlaySound`: one of the firmware's sounds queued, playing from `from` to `to`.
    SoundQueued {
        /// The sound's name (`Prompt::name`).
        sound: &'static str,
        /// When it starts playing.
        from: SimTime,
        /// When it ends.
        to: SimTime,
    },
    /// The WebSocket object was destroyed: the server sees TCP close without a close frame.
    WebSocketDestroyed {
        /// Why the firmware destroyed it.
        why: &'static str,
    },
    /// `OpenAudioChannel` failed.
    AudioChannelFailed {
        /// What failed.
        why: ChannelFailure,
    },
    /// The audio channel opened (the server's hello arrived).
    AudioChannelOpened {
        /// Over MQTT + UDP (else WebSocket).
        udp: bool,
    },
    /// The server's hello was accepted.
    ServerHello {
        /// Its session id (lossy UTF-8).
        session: String,
        /// The UDP endpoint `host:port` it named (MQTT + UDP), if any.
        udp: Option<String>,
    },
    /// The MQTT client connected.
    MqttConnected,
    /// `self.camera.take_photo` asked the explain server a question.
    CameraExplained {
        /// The question as asked.
        question: String,
    },
    /// `self.screen.snapshot` encoded a JPEG.
    SnapshotTaken {
        /// The JPEG quality asked for.
        quality: i32,
        /// The JPEG's size.
        bytes: usize,
    },
    /// A tool the twin registers but whose physical effect it does not model was called.
    NoEffectModelled {
        /// The tool's name.
        tool: String,
    },
    /// A `listen start` waits until playback drains (1.7.5–1.8.x).
    ListenDeferred,
    /// The main task blocks in `WaitForPlaybackQueueEmpty`.
    PlaybackDrainAwaited,
    /// A wake word was heard while detection was off.
    WakeWordIgnored {
        /// The word.
        word: String,
        /// The device state then (its name).
        state: &'static str,
        /// Why detection is off in that state (empty when the state says it all).
        why: &'static str,
    },
    /// Typed text arrived as `listen detect` (what py-xiaozhi sends; not firmware behaviour).
    TypedInput,
    /// 1.7.5–1.9.1: a tool call got its own `tool_call` thread.
    ToolThreadStarted {
        /// The thread's stack size in bytes.
        stack: i32,
    },
    /// The `tool_call` thread ended.
    ToolThreadExited,
    /// The audio service powered a direction down after 15 s unused.
    AudioPoweredDown {
        /// The output (else the input).
        output: bool,
    },
    /// A binary frame announced more payload than it carries; the firmware reads past it.
    FrameOverread {
        /// The frame's length.
        len: usize,
        /// The payload length it announces.
        announced: usize,
        /// Bytes read past the frame.
        past: usize,
    },
    /// The server's `llm` message carried an emotion.
    EmotionReceived {
        /// The emotion's name.
        emotion: String,
    },
    /// The firmware would abort at every boot (a boot loop); the twin leaves the board off.
    BootLoop,
    /// A button gesture fired.
    ButtonFired {
        /// The button's name.
        button: String,
        /// Its GPIO.
        gpio: u32,
        /// The gesture (`click`, `long press`, ...).
        gesture: String,
        /// What its callback did (`no callback` when none takes it).
        did: &'static str,
    },
}

/// Why `OpenAudioChannel` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelFailure {
    /// The WebSocket is not connected.
    ServerNotConnected,
    /// No server hello within 10 s.
    NoServerHello,
}

impl ChannelFailure {
    /// The words of the trace line.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelFailure::ServerNotConnected => "server not connected",
            ChannelFailure::NoServerHello => "no server hello within 10 s",
        }
    }
}
