//! Trace events: what happened inside the simulated device, in past tense, with the virtual time
//! it happened at. Rendered in the style of the conformance recorder (`#event …` lines), so a
//! twin transcript reads like the firmware's.
//!
//! Knows nothing about how events are produced.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::firmware::state::DeviceState;
use crate::mcp::DropReason;
use crate::time::SimTime;

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
    /// An `ESP_LOGE` of the `MCP` tag (`mcp_server.cc`'s errors).
    pub fn mcp_error(text: String) -> LogRecord {
        LogRecord {
            level: LogLevel::Error,
            tag: "MCP",
            text,
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

/// Renders bytes as a JSON-ish quoted string (lossless for ASCII, `\xNN` for other bytes).
pub fn quote(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.at.as_millis();
        match &self.kind {
            Event::Booted { n, reason } => write!(f, "boot n={n} reason={} t={t}", reason.as_str()),
            Event::Logged { level, tag, text } => write!(f, "log {level} {tag}: {text}"),
            Event::BatchStarted { tasks } => write!(f, "batch tasks={tasks} t={t}"),
            Event::TaskDelayed { ms } => write!(f, "vTaskDelay ms={ms} t={t}"),
            Event::MessageDropped { reason } => {
                write!(f, "dropped kind=receive reason=\"{}\" t={t}", reason.as_str())
            }
            Event::ReplySent { payload } => write!(f, "sent bytes={} t={t}", payload.len()),
            Event::ReplyDropped { payload, why } => {
                write!(f, "dropped kind=send why=\"{why}\" payload={} t={t}", quote(payload))
            }
            Event::TaskDropped { what, why } => write!(f, "dropped kind=task what={what} why=\"{why}\" t={t}"),
            Event::NvsSet { namespace, key, value } => write!(f, "nvs_set ns={namespace} key={key} {value} t={t}"),
            Event::NvsErased { namespace, key } => write!(f, "nvs_erase ns={namespace} key={key} t={t}"),
            Event::NvsFailed { namespace, key, error } => {
                write!(f, "nvs_set ns={namespace} key={key} result={error} t={t}")
            }
            Event::GpioConfigured { gpio } => write!(f, "gpio_config gpio={gpio} mode=2 t={t}"),
            Event::GpioSet { gpio, level } => write!(f, "gpio_set_level gpio={gpio} level={level} t={t}"),
            Event::RebootEntered => write!(f, "reboot t={t}"),
            Event::Restarted => write!(f, "esp_restart t={t}"),
            Event::Panicked { reason } => write!(f, "panic reason=\"{reason}\" t={t}"),
            Event::PowerCut => write!(f, "power_cut t={t}"),
            Event::VolumeChanged { volume } => write!(f, "volume_set volume={volume} t={t}"),
            Event::ThemeApplied { theme } => write!(f, "display_set_theme theme=\"{theme}\" t={t}"),
            Event::BacklightTarget { target } => write!(f, "backlight_target brightness={target} t={t}"),
            Event::BacklightStep { brightness, duty } => {
                write!(f, "ledc_duty brightness={brightness} duty={duty} t={t}")
            }
            Event::HttpOpened { method, url, outcome } => {
                write!(f, "http_open method={method} url={} result={outcome} t={t}", quote(url))
            }
            Event::CameraCaptured { width, height } => write!(f, "camera_capture frame={width}x{height} t={t}"),
            Event::OtaStarted { url } => write!(f, "ota_start url={} t={t}", quote(url)),
            Event::OtaFinished { ok } => write!(f, "ota_done ok={ok} t={t}"),
            Event::StateChanged { from, to } => write!(f, "state {} -> {} t={t}", from.name(), to.name()),
            Event::StateRejected { from, to } => {
                write!(f, "state {} -> {} rejected t={t}", from.name(), to.name())
            }
            Event::SoundQueued { sound, from, to } => write!(f, "play sound={sound} from={from} to={to} t={t}"),
            Event::WebSocketDestroyed { why } => {
                write!(f, "websocket destroyed ({why}): TCP closed without a close frame t={t}")
            }
            Event::AudioChannelFailed { why } => write!(f, "audio channel failed: {} t={t}", why.as_str()),
            Event::AudioChannelOpened { udp: false } => write!(f, "audio channel opened t={t}"),
            Event::AudioChannelOpened { udp: true } => write!(f, "audio channel opened (UDP) t={t}"),
            Event::ServerHello { session, udp: None } => write!(f, "server hello, session {session} t={t}"),
            Event::ServerHello {
                session,
                udp: Some(udp),
            } => {
                write!(f, "server hello (udp {udp}), session {session} t={t}")
            }
            Event::MqttConnected => write!(f, "MQTT connected t={t}"),
            Event::CameraExplained { question } => {
                write!(f, "camera_explain question={} t={t}", quote(question.as_bytes()))
            }
            Event::SnapshotTaken { quality, bytes } => {
                write!(f, "display_snapshot quality={quality} bytes={bytes} t={t}")
            }
            Event::NoEffectModelled { tool } => write!(f, "{tool}: no physical effect modelled for this tool t={t}"),
            Event::ListenDeferred => write!(f, "listen start deferred until playback drains t={t}"),
            Event::PlaybackDrainAwaited => {
                write!(
                    f,
                    "the main task waits for playback to drain (WaitForPlaybackQueueEmpty) t={t}"
                )
            }
            Event::WakeWordIgnored { word, state, why } => {
                write!(
                    f,
                    "wake word \"{word}\" not detected: detection is off in state {state}{why} t={t}"
                )
            }
            Event::TypedInput => {
                write!(
                    f,
                    "typed input (as py-xiaozhi sends it; not firmware behaviour): listen detect t={t}"
                )
            }
            Event::ToolThreadStarted { stack } => {
                write!(f, "tool_thread start name=tool_call stack={stack} prio=1 t={t}")
            }
            Event::ToolThreadExited => write!(f, "tool_thread exit t={t}"),
            Event::AudioPoweredDown { output: true } => {
                write!(f, "audio output powered down (15 s without output) t={t}")
            }
            Event::AudioPoweredDown { output: false } => write!(
                f,
                "audio input powered down (15 s without input: no wake word detection, no voice processing) t={t}"
            ),
            Event::FrameOverread { len, announced, past } => write!(
                f,
                "binary frame of {len} bytes announces {announced} payload bytes: the firmware copies {past} bytes past the frame (undefined behaviour; the twin reads zeros) t={t}"
            ),
            Event::EmotionReceived { emotion } => write!(f, "emotion {emotion} t={t}"),
            Event::BootLoop => write!(
                f,
                "the firmware aborts at every boot here (a boot loop); the twin leaves the board off t={t}"
            ),
            Event::ButtonFired {
                button,
                gpio,
                gesture,
                did,
            } => {
                write!(f, "button {button} (GPIO {gpio}): {gesture} → {did} t={t}")
            }
        }
    }
}

/// Renders events in the recorder's trace style (`#batch k tasks=n`, `#event …`, `#log …`),
/// numbering batches from 1 within the list.
pub fn render_events(events: &[TraceEvent]) -> Vec<String> {
    let mut batch = 0;
    events.iter().map(|e| render_event(e, &mut batch)).collect()
}

/// One event as a trace line; `batch` counts the batches rendered so far in this list.
pub fn render_event(e: &TraceEvent, batch: &mut usize) -> String {
    use std::fmt::Write as _;
    // One allocation per line: sized for the fixed words plus the variable text.
    let mut line = String::with_capacity(match &e.kind {
        Event::Logged { tag, text, .. } => 8 + tag.len() + text.len(),
        _ => 64,
    });
    // Writing into a String cannot fail.
    let _ = match &e.kind {
        Event::BatchStarted { tasks } => {
            *batch += 1;
            write!(line, "#batch {batch} tasks={tasks}")
        }
        Event::Logged { .. } => write!(line, "#{e}"),
        _ => write!(line, "#event {e}"),
    };
    line
}
