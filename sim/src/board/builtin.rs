//! The built-in tool behaviours a board file can name (`behavior: {builtin: {name: …}}`):
//! callbacks that do more than data can say (otto-robot's servo controller, both the 2.x one and
//! the pre-2.0.5 one). `device::builtin` implements them.

use serde::Deserialize;

/// A built-in tool behaviour a board file can name (`behavior: {builtin: {name: …}}`) where a
/// callback does more than data can say (otto-robot's servo controller). The tool's texts and
/// schema still come from the board file; `device::builtin` implements each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `self.otto.action`: queue a named movement.
    OttoAction,
    /// `self.otto.servo_sequences`: queue AI-written servo sequences.
    OttoServoSequences,
    /// `self.otto.stop`: stop all movement and return home.
    OttoStop,
    /// `self.otto.set_trim`: set and persist one servo's trim.
    OttoSetTrim,
    /// `self.otto.get_trims`: report the servo trims.
    OttoGetTrims,
    /// `self.otto.get_status`: `moving` or `idle`.
    OttoGetStatus,
    /// `self.battery.get_level`: battery level and charging state.
    BatteryGetLevel,
    /// `self.otto.get_ip`: the Wi-Fi IP address.
    OttoGetIp,
    /// The pre-2.0.5 controller's per-move tools (`self.otto.walk_forward`, …): queue the
    /// `motion` the board file names with the tool's arguments, return `true`.
    OttoMotion,
}

impl Builtin {
    /// Every built-in behaviour, in the order error messages list them.
    pub const ALL: [Builtin; 9] = [
        Builtin::OttoAction,
        Builtin::OttoServoSequences,
        Builtin::OttoStop,
        Builtin::OttoSetTrim,
        Builtin::OttoGetTrims,
        Builtin::OttoGetStatus,
        Builtin::BatteryGetLevel,
        Builtin::OttoGetIp,
        Builtin::OttoMotion,
    ];

    /// The name a board file writes.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::OttoAction => "otto.action",
            Builtin::OttoServoSequences => "otto.servo_sequences",
            Builtin::OttoStop => "otto.stop",
            Builtin::OttoSetTrim => "otto.set_trim",
            Builtin::OttoGetTrims => "otto.get_trims",
            Builtin::OttoGetStatus => "otto.get_status",
            Builtin::BatteryGetLevel => "battery.get_level",
            Builtin::OttoGetIp => "otto.get_ip",
            Builtin::OttoMotion => "otto.motion",
        }
    }

    /// Behaviours that need the otto controller (its action queue and trims) on the board.
    pub fn needs_otto(self) -> bool {
        self.name().starts_with("otto.")
    }
}

/// The movements of the pre-2.0.5 otto controller's tools (`otto.motion`).
pub const MOTIONS: [&str; 11] = [
    "walk",
    "turn",
    "jump",
    "swing",
    "moonwalk",
    "bend",
    "shake_leg",
    "updown",
    "hands_up",
    "hands_down",
    "hand_wave",
];

impl<'de> Deserialize<'de> for Builtin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Builtin, D::Error> {
        let name = String::deserialize(d)?;
        Builtin::ALL.into_iter().find(|b| b.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
            serde::de::Error::custom(format!(
                "unknown built-in behaviour `{name}`; known: {}",
                known.join(", ")
            ))
        })
    }
}
