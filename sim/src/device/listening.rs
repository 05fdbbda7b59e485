//! The application's voice members (`main/application.h`: `listening_mode_`, `aborted_`,
//! `play_popup_on_listening_`, the deferred listen start) and the enums the protocol messages
//! name (`ListeningMode`, `AbortReason`, `main/protocols/protocol.h`). Pure data; imports
//! nothing of `device/`.

/// `ListeningMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListeningMode {
    /// `kListeningModeAutoStop`: the server's VAD ends the turn (`"auto"`).
    Auto,
    /// `kListeningModeManualStop`: push-to-talk (`"manual"`).
    Manual,
    /// `kListeningModeRealtime`: with AEC, the microphone stays on while speaking (`"realtime"`).
    Realtime,
}

impl ListeningMode {
    /// `GetDefaultListeningMode()`: `realtime` with device-side AEC, else `auto`
    /// (`application.cc:1022-1024`).
    pub(crate) fn for_board(audio: &crate::board::AudioSpec) -> ListeningMode {
        if audio.device_aec {
            ListeningMode::Realtime
        } else {
            ListeningMode::Auto
        }
    }

    /// The `mode` of `listen start`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListeningMode::Auto => "auto",
            ListeningMode::Manual => "manual",
            ListeningMode::Realtime => "realtime",
        }
    }
}

/// Why the device aborts speech (`AbortReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// `kAbortReasonNone`.
    None,
    /// `kAbortReasonWakeWordDetected`: `"reason":"wake_word_detected"`.
    WakeWordDetected,
}

/// What the application remembers about the conversation between events.
#[derive(Clone, Debug)]
pub(crate) struct Listening {
    /// `listening_mode_`.
    pub(crate) mode: ListeningMode,
    /// `aborted_` (read only by 1.7.x: `Firmware::abort_silences`).
    pub(crate) aborted: bool,
    /// 1.7.7's `tts stop` is waiting: packets the audio loop takes are thrown away.
    pub(crate) discarding: bool,
    /// A `listen start` waits for playback to drain (auto mode after speaking).
    pub(crate) pending_start: bool,
    /// `play_popup_on_listening_`: the popup sound is owed at the next listen start.
    pub(crate) play_popup: bool,
    /// `AS_EVENT_WAKE_WORD_RUNNING`: the audio service listens for the wake word (on in Idle,
    /// off in Listening unless the build says otherwise, on in Speaking only with the AFE wake
    /// word; a detection turns it off).
    pub(crate) wake_detection: bool,
    /// Since when detection has run: the AFE stores what it fetches into the wake-word cache
    /// while detection runs (`afe_audio_engine.cc:393-395`).
    pub(crate) wake_since: crate::time::SimTime,
}

impl Default for Listening {
    fn default() -> Self {
        Listening {
            mode: ListeningMode::Auto,
            aborted: false,
            discarding: false,
            pending_start: false,
            play_popup: false,
            wake_detection: false,
            wake_since: crate::time::SimTime::ZERO,
        }
    }
}
