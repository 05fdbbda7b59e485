//! `DeviceState` and the transition table of `main/device_state_machine.cc` (docs/reference/firmware.md §6.5).
//!
//! MCP is not gated by state; the table matters for `UpgradeFirmware` (which requests
//! `upgrading` and carries on when refused) and for what a user action does.

/// `enum DeviceState`, named as `STATE_STRINGS` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceState {
    // Declared in `device_state.h`'s order: `state as i32` is the firmware's `(int)state`.
    /// `kDeviceStateUnknown`: before the state machine starts.
    Unknown,
    /// `kDeviceStateStarting`: board and application being constructed.
    Starting,
    /// `kDeviceStateWifiConfiguring`: provisioning access point.
    WifiConfiguring,
    /// `kDeviceStateIdle`: ready, no audio channel in use.
    Idle,
    /// `kDeviceStateConnecting`: opening the audio channel.
    Connecting,
    /// `kDeviceStateListening`: the channel is open and the microphone streams.
    Listening,
    /// `kDeviceStateSpeaking`: playing server TTS.
    Speaking,
    /// `kDeviceStateUpgrading`: downloading firmware.
    Upgrading,
    /// `kDeviceStateActivating`: OTA check and activation at boot.
    Activating,
    /// `kDeviceStateAudioTesting`: the provisioning-mode audio test.
    AudioTesting,
    /// `kDeviceStateFatalError`: the table allows no way out.
    FatalError,
}

impl DeviceState {
    /// The state's name in `STATE_STRINGS` (trace and log text).
    pub fn name(self) -> &'static str {
        match self {
            DeviceState::Unknown => "unknown",
            DeviceState::Starting => "starting",
            DeviceState::WifiConfiguring => "wifi_configuring",
            DeviceState::Idle => "idle",
            DeviceState::Connecting => "connecting",
            DeviceState::Listening => "listening",
            DeviceState::Speaking => "speaking",
            DeviceState::Upgrading => "upgrading",
            DeviceState::Activating => "activating",
            DeviceState::AudioTesting => "audio_testing",
            DeviceState::FatalError => "fatal_error",
        }
    }

    /// `DeviceStateMachine::IsValidTransition`.
    pub fn can_go_to(self, to: DeviceState) -> bool {
        use DeviceState::*;
        if self == to {
            return true;
        }
        match self {
            Unknown => to == Starting,
            Starting => matches!(to, WifiConfiguring | Activating),
            WifiConfiguring => matches!(to, Activating | AudioTesting),
            AudioTesting => to == WifiConfiguring,
            Activating => matches!(to, Upgrading | Idle | WifiConfiguring),
            Upgrading => matches!(to, Idle | Activating),
            Idle => matches!(
                to,
                Connecting | Listening | Speaking | Activating | Upgrading | WifiConfiguring
            ),
            Connecting => matches!(to, Idle | Listening),
            Listening => matches!(to, Speaking | Idle),
            Speaking => matches!(to, Listening | Idle),
            FatalError => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceState::*;

    #[test]
    fn upgrading_is_refused_while_listening() {
        assert!(!Listening.can_go_to(Upgrading));
        assert!(!Speaking.can_go_to(Upgrading));
        assert!(Idle.can_go_to(Upgrading));
        assert!(Upgrading.can_go_to(Idle));
        assert!(!FatalError.can_go_to(Idle));
    }
}
