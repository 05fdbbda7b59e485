//! What the main task runs (`Application::Schedule`'s lambdas and the main loop's event bits,
//! `main/application.cc`; docs/reference/firmware.md §6): every [`Task`] (the voice
//! interaction's in [`VoiceTask`]) and [`EventBit`], how each is described in evidence and
//! recorded when a restart drops it, and what running one did to the loop ([`TaskEnd`]).

use crate::audio::source::Prompt;
use crate::device::listening::ListeningMode;
use crate::device::platform::Platform;
use crate::device::protocol::OpenStage;
use crate::device::upgrade::Upgrade;
use crate::firmware::state::DeviceState;
use crate::mcp::{Arguments, ReturnValue};
use crate::time::SimDuration;
use crate::trace::{BootReason, Event};

/// Work on the main task's queue.
#[derive(Debug)]
pub(crate) enum Task {
    /// `SendMcpMessage`'s lambda: send if a protocol object exists.
    Send {
        /// The JSON-RPC message to send.
        payload: Vec<u8>,
        /// Its `id`.
        id: i32,
        /// An `error` reply.
        is_error: bool,
    },
    /// `DoToolCall`'s lambda: run the callback, then reply (scheduled again).
    Call {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// Index of the tool in this boot's `McpServer` registry.
        tool: usize,
        /// One coerced value per property, in property order.
        args: Arguments,
    },
    /// A callback that blocked (HTTP, camera upload) finishing.
    FinishCall {
        /// The request's JSON-RPC `id`.
        id: i32,
        /// The callback's return value, or the text of the exception it threw.
        outcome: Result<ReturnValue, Vec<u8>>,
    },
    /// `self.reboot`'s lambda: log, wait 1000 ms, `Reboot()`.
    UserReboot,
    /// `Application::Reboot()` (after its first step) and its 1000 ms before `esp_restart`.
    Reboot {
        /// Where `Reboot()` resumes.
        stage: RebootStage,
    },
    /// `self.upgrade_firmware`'s lambda: `UpgradeFirmware(url)`, and where it resumes.
    Upgrade(Upgrade),
    /// `audio_service_.PlaySound(...)` scheduled on the main task (e.g. the success prompt).
    PlayPrompt(Prompt),
    /// Work elsewhere that keeps the main task busy (e.g. opening the audio channel).
    Busy(SimDuration),
    /// The voice interaction's lambdas and events (`application/conversation.rs` runs them).
    Voice(VoiceTask),
    /// `ContinueOpenAudioChannel(mode)` (or `ContinueWakeWordInvoke(word)`) and its waits.
    OpenChannel {
        /// The listening mode to enter once the channel is open (`auto` for a toggle).
        mode: ListeningMode,
        /// Where the open resumes.
        stage: OpenStage,
        /// The wake word whose `listen detect` goes out once the channel is open.
        wake: Option<String>,
    },
    /// A state change the firmware schedules (`on_audio_channel_closed`).
    SetState(DeviceState),
    /// The MQTT reconnect timer's `StartMqttClient(false)` (`waiting`: its `Connect()` returns).
    RestartMqtt {
        /// The connect was started; the task resumes when it ends.
        waiting: bool,
    },
    /// A server `goodbye` for this session: `CloseAudioChannel(false)` (no goodbye back).
    ServerGoodbye,
    /// A display call the receive task schedules (`stt`, `sentence_start`, `llm` emotion).
    Screen(crate::hw::screen::ScreenCall),
}

/// The voice interaction's work on the main task.
#[derive(Debug)]
pub(crate) enum VoiceTask {
    /// The lambda `tts start` schedules: `aborted_ = false`, speaking.
    TtsStart,
    /// The lambda `tts stop` schedules: idle (manual mode) or listening, if still speaking.
    TtsStop,
    /// `listen start` once the main task's wait for the playback drain ends (2.2.2–2.3.0).
    ListenAfterDrain,
    /// `MAIN_EVENT_WAKE_WORD_DETECTED` for this word.
    WakeWord(String),
}

/// The main loop's event bits besides SCHEDULE: set by the audio service, the state machine and
/// the button callbacks, each handled once however often it was set. **Declared in the order
/// `Application::Run` tests them** (`application.cc:182-242`): the derived `Ord` is that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EventBit {
    /// `MAIN_EVENT_ERROR`: idle, and the alert of the protocol's last `SetError`.
    Error,
    /// `MAIN_EVENT_STATE_CHANGED`: `HandleStateChangedEvent`.
    StateChanged,
    /// `MAIN_EVENT_PLAYBACK_DRAINED`: a deferred `listen start`.
    PlaybackDrained,
    /// `MAIN_EVENT_TOGGLE_CHAT` (`ToggleChatState()`, a BOOT click): `HandleToggleChatEvent`.
    ToggleChat,
    /// `MAIN_EVENT_START_LISTENING` (`StartListening()`, push-to-talk pressed).
    StartListening,
    /// `MAIN_EVENT_STOP_LISTENING` (`StopListening()`, push-to-talk released).
    StopListening,
    /// `MAIN_EVENT_SEND_AUDIO`: microphone packets go out.
    SendAudio,
}

impl EventBit {
    /// A short description for evidence.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            EventBit::Error => "error event",
            EventBit::StateChanged => "state changed event",
            EventBit::PlaybackDrained => "playback drained event",
            EventBit::ToggleChat => "toggle chat event",
            EventBit::StartListening => "start listening event",
            EventBit::StopListening => "stop listening event",
            EventBit::SendAudio => "send audio event",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// Where `Application::Reboot` is when the main task resumes it.
pub(crate) enum RebootStage {
    /// Log `Rebooting...`, destroy the protocol, stop audio, then wait 1000 ms.
    Enter,
    /// `esp_restart()`.
    Restart,
}

impl Task {
    /// A short description for evidence.
    pub(crate) fn describe(&self) -> String {
        match self {
            Task::Send { payload, .. } => format!("send {}", String::from_utf8_lossy(payload)),
            Task::Call { id, tool, .. } => format!("call tool #{tool} for id {id}"),
            Task::FinishCall { id, .. } => format!("finish call for id {id}"),
            Task::UserReboot => "reboot (user requested)".into(),
            Task::Reboot { .. } => "reboot".into(),
            Task::Upgrade(_) => "firmware upgrade".into(),
            Task::PlayPrompt(p) => format!("play {}", p.name()),
            Task::Busy(d) => format!("busy for {d}"),
            Task::OpenChannel { .. } => "open the audio channel".into(),
            Task::SetState(s) => format!("set state {}", s.name()),
            Task::RestartMqtt { .. } => "restart the MQTT client".into(),
            Task::ServerGoodbye => "close the audio channel (server goodbye)".into(),
            Task::Voice(VoiceTask::TtsStart) => "tts start".into(),
            Task::Voice(VoiceTask::TtsStop) => "tts stop".into(),
            Task::Voice(VoiceTask::ListenAfterDrain) => "listen start after the drain".into(),
            Task::Voice(VoiceTask::WakeWord(w)) => format!("wake word {w}"),
            Task::Screen(c) => format!("display {c:?}"),
        }
    }

    /// Records that this task will never run.
    pub(crate) fn record_drop(self, platform: &mut Platform, why: &'static str) {
        match self {
            Task::Send { payload, .. } => platform.emit(|| Event::ReplyDropped { payload, why }),
            Task::Call { .. } | Task::FinishCall { .. } => platform.emit(|| Event::TaskDropped { what: "call", why }),
            Task::UserReboot | Task::Reboot { .. } => platform.emit(|| Event::TaskDropped { what: "reboot", why }),
            Task::Upgrade(_) => platform.emit(|| Event::TaskDropped { what: "upgrade", why }),
            Task::PlayPrompt(_) => platform.emit(|| Event::TaskDropped { what: "sound", why }),
            Task::Busy(_) => platform.emit(|| Event::TaskDropped { what: "busy", why }),
            Task::Screen(_) => platform.emit(|| Event::TaskDropped { what: "display", why }),
            Task::Voice(_)
            | Task::OpenChannel { .. }
            | Task::SetState(_)
            | Task::RestartMqtt { .. }
            | Task::ServerGoodbye => platform.emit(|| Event::TaskDropped { what: "state", why }),
        }
    }
}

/// What running one task did to the main loop.
pub(crate) enum TaskEnd {
    /// The task returned; the main loop takes the next one.
    Done,
    /// `vTaskDelay`: the main task is busy for this long, then runs the continuation.
    Block(SimDuration, Task),
    /// `esp_restart()` or a panic.
    Restart(BootReason),
}
