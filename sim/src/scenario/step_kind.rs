//! The kind of a scenario step (its YAML key), as a step row of a record carries it: consumers
//! (the HTML report, `demo`) match the kind, not its text.

use super::Step;

/// The kind of a scenario step: its YAML key (`call`, `list_tools`, `wait`, …), as a record's
/// step row carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// `initialize`.
    Initialize,
    /// `list_tools`.
    ListTools,
    /// `call`.
    Call,
    /// `send`.
    Send,
    /// `burst`.
    Burst,
    /// `wait`.
    Wait,
    /// `readback`.
    Readback,
    /// `play`.
    Play,
    /// `listen`.
    Listen,
    /// `press`.
    Press,
    /// `button_down`.
    ButtonDown,
    /// `button_up`.
    ButtonUp,
    /// `reboot`.
    Reboot,
    /// `cut_power`.
    CutPower,
    /// `power_on`.
    PowerOn,
    /// `fault`.
    Fault,
    /// `busy`.
    Busy,
    /// `note`.
    Note,
    /// `speak`.
    Speak,
    /// `wake`.
    Wake,
    /// `say`.
    Say,
    /// `abort`.
    Abort,
    /// `server`.
    Server,
}

impl StepKind {
    /// The step's YAML key.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Initialize => "initialize",
            StepKind::ListTools => "list_tools",
            StepKind::Call => "call",
            StepKind::Send => "send",
            StepKind::Burst => "burst",
            StepKind::Wait => "wait",
            StepKind::Readback => "readback",
            StepKind::Play => "play",
            StepKind::Listen => "listen",
            StepKind::Press => "press",
            StepKind::ButtonDown => "button_down",
            StepKind::ButtonUp => "button_up",
            StepKind::Reboot => "reboot",
            StepKind::CutPower => "cut_power",
            StepKind::PowerOn => "power_on",
            StepKind::Fault => "fault",
            StepKind::Busy => "busy",
            StepKind::Note => "note",
            StepKind::Speak => "speak",
            StepKind::Wake => "wake",
            StepKind::Say => "say",
            StepKind::Abort => "abort",
            StepKind::Server => "server",
        }
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of `step`.
pub(crate) fn step_key(step: &Step) -> StepKind {
    match step {
        Step::Initialize(_) => StepKind::Initialize,
        Step::ListTools(_) => StepKind::ListTools,
        Step::Call(_) => StepKind::Call,
        Step::Send(_) => StepKind::Send,
        Step::Burst(_) => StepKind::Burst,
        Step::Wait(_) => StepKind::Wait,
        Step::Readback(_) => StepKind::Readback,
        Step::Play(_) => StepKind::Play,
        Step::Listen(_) => StepKind::Listen,
        Step::Press(_) => StepKind::Press,
        Step::ButtonDown(_) => StepKind::ButtonDown,
        Step::ButtonUp(_) => StepKind::ButtonUp,
        Step::Reboot => StepKind::Reboot,
        Step::CutPower => StepKind::CutPower,
        Step::PowerOn => StepKind::PowerOn,
        Step::Fault(_) => StepKind::Fault,
        Step::Busy(_) => StepKind::Busy,
        Step::Note(_) => StepKind::Note,
        Step::Speak(_) => StepKind::Speak,
        Step::Wake(_) => StepKind::Wake,
        Step::Say(_) => StepKind::Say,
        Step::Abort(_) => StepKind::Abort,
        Step::Server(_) => StepKind::Server,
    }
}
