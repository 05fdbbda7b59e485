//! Scenarios: a board, a world, a seed, a fault timeline and steps, each step with optional
//! expectations ([`expect`]), read from YAML (docs/reference/architecture.md §7). The runner ([`runner`]) executes
//! them in virtual time; over the wire ([`over_wire`]) a backend performs them. Both judge the
//! expectations with one checker (`check.rs`) and build the seed article's acceptance record
//! with one builder (`acceptance.rs`) into the report ([`record`]).
//!
//! A scenario reads like a board developer's test plan:
//!
//! ```yaml
//! name: turn it down a bit
//! board: bread-compact-wifi
//! steps:
//!   - readback: { path: audio_speaker.volume, expect: { value: 70 } }
//!   - call:
//!       tool: self.audio_speaker.set_volume
//!       args: { volume: 40 }
//!       decision: user said "turn it down a bit"; 70 → 40
//!       expect: { text: "true" }
//!   - play: { tone: { hz: 1000, dbfs: -6 }, for: 1s, expect: { audible: true } }
//! ```
//!
//! Knows nothing about files on disk beyond text, nor about sockets.

mod acceptance;
mod check;
pub mod discovery;
pub mod expect;
mod limits;
pub mod over_wire;
mod press;
pub mod record;
pub mod reply;
pub mod runner;
pub mod runner_voice;
mod sound_checks;
mod step_kind;
mod steps;
pub mod wire_plan;

pub use expect::{Approx, ClaimExpect, EventName, Expect, FramesExpect, HeardExpect};
pub use step_kind::StepKind;
pub(crate) use step_kind::step_key;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::board::BoardSpec;
use crate::fault::Fault;
use crate::spec::{self, SpecError, SpecErrors};
use crate::time::Duration;
#[cfg(test)]
use crate::time::SimDuration;
use crate::world::WorldSpec;

/// A scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// A short title, shown on the record and in summaries.
    pub name: String,
    /// What the scenario shows, in one or two sentences.
    #[serde(default)]
    pub description: String,
    /// The row of the seed article's error card (1–16) this scenario reproduces.
    #[serde(default)]
    pub card: Option<u32>,
    /// A board id (or a path to a board file, relative to the scenario).
    pub board: String,
    /// Seed of the device identity; `--seed` overrides it.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Where the scenario's premise holds: version comparisons that must all hold
    /// (`[">=2.0.1"]`); on other versions a matrix run reports it as not applicable.
    #[serde(default)]
    pub firmware: Option<Vec<String>>,
    /// The environment (defaults: the conformance world with a quiet room).
    #[serde(default)]
    pub world: Option<WorldSpec>,
    /// Faults set or cleared at points in virtual time.
    #[serde(default)]
    pub faults: Vec<FaultEvent>,
    /// The steps, run in order.
    pub steps: Vec<Spanned<Step>>,
}

/// One entry of the fault timeline.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultEvent {
    /// Virtual time from power-on.
    pub at: Duration,
    /// The fault to set (e.g. `amp_shutdown`).
    #[serde(default)]
    pub set: Option<Fault>,
    /// The fault to clear.
    #[serde(default)]
    pub clear: Option<Fault>,
}

/// One step.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// `initialize` (optionally with a vision capability).
    Initialize(InitializeStep),
    /// `tools/list`, following `nextCursor` unless told not to.
    ListTools(ListStep),
    /// `tools/call`.
    Call(CallStep),
    /// A raw payload (any bytes the device should receive).
    Send(SendStep),
    /// Several payloads parsed by the receive task before the main task runs.
    Burst(BurstStep),
    /// Let virtual time pass.
    Wait(Duration),
    /// Read a status value through `self.get_device_status`, as a backend would.
    Readback(ReadbackStep),
    /// Play a probe tone, a WAV file or a device prompt and measure what the listener hears.
    Play(PlayStep),
    /// Measure what the listener hears for a while.
    Listen(ListenStep),
    /// Press a board button and let go (a click, clicks, a long press or a hold).
    Press(PressStep),
    /// Press a board button and keep it down (until `button_up`).
    ButtonDown(ButtonStep),
    /// Let go of a board button held by `button_down`.
    ButtonUp(ButtonStep),
    /// Hardware reset (EN pin): restart now, NVS kept.
    Reboot,
    /// Pull the plug (volatile state lost, NVS kept); `power_on` brings it back.
    CutPower,
    /// Plug back in after `cut_power`: the board boots again.
    PowerOn,
    /// Set or clear a fault now.
    Fault(FaultStep),
    /// Keep the main task busy (a slow callback elsewhere): requests pile up.
    Busy(Duration),
    /// A line of narrative for the record.
    Note(String),
    /// The scenario's backend speaks a sentence (xinnan-py's turn and pacing).
    Speak(SpeakStep),
    /// The wake word is detected (`listen detect` with its text).
    Wake(WakeStep),
    /// The user speaks into the microphone (a WAV file), or types (labelled typed input).
    Say(SayStep),
    /// The user interrupts the speech (BOOT click while speaking): `abort`.
    Abort(AbortStep),
    /// The scenario's backend sends one text frame as written (an `alert`, an `llm` emotion, an
    /// `stt`): what the device does with it shows on its screen.
    Server(String),
}

/// `initialize: {id?, vision_url?, vision_token?, expect?}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitializeStep {
    /// The request id (default: the runner's next id).
    #[serde(default)]
    pub id: Option<i64>,
    /// `capabilities.vision.url` / `token` (camera boards).
    #[serde(default)]
    pub vision_url: Option<String>,
    /// `capabilities.vision.token` (sent only with `vision_url`).
    #[serde(default)]
    pub vision_token: Option<String>,
    /// Expectations on the `initialize` reply.
    #[serde(default)]
    pub expect: Expect,
}

/// `list_tools: {with_user_tools?, follow?, cursor?, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListStep {
    /// Send `"withUserTools": true` (lists user-only tools such as `self.reboot`).
    #[serde(default)]
    pub with_user_tools: bool,
    /// Follow `nextCursor` (default true); false stops after the first page, as some backends do.
    #[serde(default = "yes")]
    pub follow: bool,
    /// The cursor of the first request (default: none, the first page).
    #[serde(default)]
    pub cursor: Option<String>,
    /// Expectations on the listing (`contains`, `absent`, `pages`) and its replies.
    #[serde(default)]
    pub expect: Expect,
}

fn yes() -> bool {
    true
}

/// `call: {tool, args?, id?, decision?, acoustic?, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallStep {
    /// The tool name, as in `tools/list`; must be one the board has unless `expect.error` says `Unknown tool`.
    pub tool: Spanned<String>,
    /// Arguments, in order (duplicate or case-varied keys need `send`).
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// The request id (default: the runner's next id).
    #[serde(default)]
    pub id: Option<i64>,
    /// How the user's request became this call (the record's decision row).
    #[serde(default)]
    pub decision: Option<String>,
    /// Play the reference probe before and after the call and record the change.
    #[serde(default)]
    pub acoustic: bool,
    /// Expectations on the reply, the record and (with `acoustic`) the level change.
    #[serde(default)]
    pub expect: Expect,
}

/// `send: {payload, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    /// The exact bytes delivered as one MCP payload (invalid JSON, duplicate keys, odd ids…).
    pub payload: String,
    /// Expectations on the reply (paired by the payload's id, if it has one).
    #[serde(default)]
    pub expect: Expect,
}

/// `burst: {payloads, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurstStep {
    /// The payloads, delivered in this order as raw bytes.
    pub payloads: Vec<String>,
    /// Expectations on the replies (e.g. `reply_order`) and receipts.
    #[serde(default)]
    pub expect: Expect,
}

/// `readback: {path, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadbackStep {
    /// A dotted path in the status JSON, e.g. `audio_speaker.volume`, `screen.theme`.
    pub path: String,
    /// Expectations on the value read (`value`).
    #[serde(default)]
    pub expect: Expect,
}

/// `play: {tone? | wav?, for?, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlayStep {
    /// A sine probe (the default when neither `tone` nor `wav` is given: 1000 Hz, −6 dBFS).
    #[serde(default)]
    pub tone: Option<Tone>,
    /// A WAV file (relative to the scenario file).
    #[serde(default)]
    pub wav: Option<String>,
    /// `for`: how long to play (default: the WAV's length, 1 s for a tone).
    #[serde(default, rename = "for")]
    pub duration: Option<Duration>,
    /// Expectations on the measurement at the listener.
    #[serde(default)]
    pub expect: Expect,
}

/// A sine probe tone.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tone {
    /// Frequency, Hz (default 1000).
    #[serde(default = "khz")]
    pub hz: f64,
    /// Level, dBFS (default −6).
    #[serde(default = "minus_six")]
    pub dbfs: f64,
}

fn khz() -> f64 {
    1000.0
}
fn minus_six() -> f64 {
    -6.0
}

/// `listen: {for, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenStep {
    /// `for`: how long to measure.
    #[serde(rename = "for")]
    pub duration: Duration,
    /// Expectations on the measurement at the listener.
    #[serde(default)]
    pub expect: Expect,
}

/// `press: {button, long?, hold?, clicks?, expect?}`: the finger presses the button and lets go;
/// what happens is what the board's callbacks do with the gestures the button component finds
/// (docs/boards.md, "Buttons").
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PressStep {
    /// The button's name in the board file (e.g. `volume_up`).
    pub button: String,
    /// Held past the button's long press time (by 500 ms), then released.
    #[serde(default)]
    pub long: bool,
    /// Held this long, then released (push-to-talk on a talk button; on BOOT, whose only
    /// callback is a click, a hold past 1.5 s does nothing).
    #[serde(default)]
    pub hold: Option<Duration>,
    /// This many short presses in a row (100 ms down, 100 ms up): 2 is a double click.
    #[serde(default)]
    pub clicks: Option<u8>,
    /// Expectations on what the press caused.
    #[serde(default)]
    pub expect: Expect,
}

/// `button_down: {button, expect?}` / `button_up: {button, expect?}`: the finger goes down (and
/// stays) or comes up.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ButtonStep {
    /// The button's name in the board file (e.g. `touch`).
    pub button: String,
    /// Expectations on what the press or the release caused.
    #[serde(default)]
    pub expect: Expect,
}

/// `fault: {set | clear}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultStep {
    /// The fault to set now (e.g. `amp_shutdown`).
    #[serde(default)]
    pub set: Option<Fault>,
    /// The fault to clear now.
    #[serde(default)]
    pub clear: Option<Fault>,
}

/// `speak: {text, for?, tone? | wav?, background?, tts_start?, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeakStep {
    /// The sentence (the `sentence_start` text).
    pub text: String,
    /// `for`: how long it lasts (default: 250 ms a character, or the WAV's length).
    #[serde(default, rename = "for")]
    pub duration: Option<Duration>,
    /// A steady tone instead of the built-in speech-like voice.
    #[serde(default)]
    pub tone: Option<Tone>,
    /// A WAV file (relative to the scenario file) as the voice.
    #[serde(default)]
    pub wav: Option<String>,
    /// Go on with the next steps while the speech plays (no `tts stop`; the next blocking
    /// `speak` ends the turn). Nothing is measured.
    #[serde(default)]
    pub background: bool,
    /// Open the turn with `tts start` (default); `false` sends the sentence and its audio with
    /// no `tts start`, as a backend that forgets it would.
    #[serde(default = "yes")]
    pub tts_start: bool,
    /// `tts stop` this long after the last packet left (default 420 ms, xiaozhi-esp32-server's
    /// `(PRE_BUFFER_COUNT + 2) × 60 ms`); `0s` stops with the last packet, as servers that end
    /// the turn early do.
    #[serde(default)]
    pub stop_after: Option<Duration>,
    /// Expectations: `heard`, `claim`, `frames`, `state`, `listen_sent`, acoustic ones.
    #[serde(default)]
    pub expect: Expect,
}

/// `wake: {word, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WakeStep {
    /// The wake word's text (`你好小智`).
    pub word: String,
    /// The wake word as said (a WAV, resampled to 16 kHz): the end of the audio the device
    /// sends before `listen detect` (default: silence).
    #[serde(default)]
    pub wav: Option<String>,
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
}

/// `say: {wav | text, expect?}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SayStep {
    /// Spoken into the microphone (any rate `hound` reads; resampled to 16 kHz), then silence.
    #[serde(default)]
    pub wav: Option<String>,
    /// Typed input, sent as `listen detect` as py-xiaozhi does (not firmware behaviour).
    #[serde(default)]
    pub text: Option<String>,
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
}

/// `abort: {expect?}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortStep {
    /// Expectations (`listen_sent`, `state`).
    #[serde(default)]
    pub expect: Expect,
}

impl ScenarioSpec {
    /// The seed when neither `--seed` nor the file gives one.
    pub const DEFAULT_SEED: u64 = 1;

    /// The device seed: `over` (`--seed`), else the file's, else [`Self::DEFAULT_SEED`].
    pub fn seed(&self, over: Option<u64>) -> u64 {
        over.or(self.seed).unwrap_or(Self::DEFAULT_SEED)
    }

    /// The world the scenario's device lives in: the file's, else the conformance world with
    /// the board's own tasks running (otto's action task moves).
    pub fn world(&self) -> WorldSpec {
        self.world.clone().unwrap_or_else(WorldSpec::with_board_tasks)
    }

    /// Parses a scenario; `origin` names the file in errors. The first problem in file order;
    /// [`ScenarioSpec::parse_all`] reports all of them.
    pub fn from_yaml(origin: &str, text: &str) -> Result<ScenarioSpec, SpecError> {
        match ScenarioSpec::parse_all(origin, text) {
            (Some(s), errors) if errors.is_empty() => Ok(s),
            (_, errors) => Err(errors.into_iter().next().unwrap_or_else(|| SpecError::Io {
                origin: origin.into(),
                message: "could not be read as a scenario".into(),
            })),
        }
    }

    /// The scenario's `firmware:` constraint (already validated), if it states one.
    pub fn firmware_constraint(&self) -> Option<crate::firmware::Constraint> {
        self.firmware
            .as_deref()
            .and_then(|c| crate::firmware::Constraint::parse(c).ok())
    }

    /// Parses a scenario and reports every problem found (in file order, at most
    /// [`spec::MAX_ERRORS`]). The scenario is what could be read around the mistakes (for more
    /// checks, e.g. [`ScenarioSpec::check_against`]); it must not be run when there are errors.
    pub fn parse_all(origin: &str, text: &str) -> (Option<ScenarioSpec>, Vec<SpecError>) {
        let (spec, mut errors) = spec::from_yaml_recovering::<ScenarioSpec>(origin, text);
        if let Some(s) = &spec {
            errors.extend(s.validate(origin, text));
        }
        errors.sort_by_key(|e| e.location().unwrap_or((0, 0)));
        (spec, errors)
    }

    /// Rules serde cannot say: exactly one of `set`/`clear`, `tone` or `wav`.
    fn validate(&self, origin: &str, text: &str) -> Vec<SpecError> {
        let mut errors = Vec::new();
        if let Some(Err(message)) = self.firmware.as_deref().map(crate::firmware::Constraint::parse) {
            let (line, column) = spec::find_field(text, "firmware");
            errors.push(SpecError::Invalid {
                origin: origin.into(),
                line,
                column,
                field: "firmware".into(),
                message: message.to_string(),
            });
        }
        if let Some(Err((field, message))) = self.world.as_ref().map(WorldSpec::check) {
            errors.push(spec::invalid_at(origin, text, (format!("world.{field}"), message)));
        }
        for (i, f) in self.faults.iter().enumerate() {
            if f.set.is_some() == f.clear.is_some() {
                let (line, column) = spec::find_field(text, &format!("faults[{i}]"));
                errors.push(SpecError::Invalid {
                    origin: origin.into(),
                    line,
                    column,
                    field: format!("faults[{i}]"),
                    message: "give exactly one of `set` or `clear`".into(),
                });
            }
        }
        for step in &self.steps {
            if let Step::Fault(f) = &step.value
                && f.set.is_some() == f.clear.is_some()
            {
                errors.push(located(
                    origin,
                    &step.referenced,
                    "fault",
                    "give exactly one of `set` or `clear`",
                ));
            }
            if let Step::Press(p) = &step.value {
                let ways = usize::from(p.long) + usize::from(p.hold.is_some()) + usize::from(p.clicks.is_some());
                if ways > 1 {
                    errors.push(located(
                        origin,
                        &step.referenced,
                        "press",
                        "give at most one of `long`, `hold` or `clicks`",
                    ));
                }
                if p.clicks == Some(0) {
                    errors.push(located(
                        origin,
                        &step.referenced,
                        "press.clicks",
                        "0 clicks press nothing",
                    ));
                }
            }
            let both = match &step.value {
                Step::Play(p) => p.tone.is_some() && p.wav.is_some(),
                Step::Speak(p) => p.tone.is_some() && p.wav.is_some(),
                _ => false,
            };
            if let Step::Say(x) = &step.value
                && x.wav.is_some() == x.text.is_some()
            {
                errors.push(located(origin, &step.referenced, "say", "give either `wav` or `text`"));
            }
            if let Some(message) = limits::impossible_tone(&step.value) {
                errors.push(located(
                    origin,
                    &step.referenced,
                    step_key(&step.value).as_str(),
                    &message,
                ));
            }
            if both {
                errors.push(located(
                    origin,
                    &step.referenced,
                    step_key(&step.value).as_str(),
                    "give either `tone` or `wav`, not both",
                ));
            }
            if let Some(message) = limits::too_long_sound(&step.value) {
                errors.push(located(
                    origin,
                    &step.referenced,
                    step_key(&step.value).as_str(),
                    &message,
                ));
            }
        }
        errors
    }

    /// Checks the steps against the board: every called tool must exist, unless the step
    /// expects the `Unknown tool` error; every pressed button must exist. All problems at once.
    pub fn check_against(&self, origin: &str, board: &BoardSpec, tools: &[String]) -> Result<(), SpecErrors> {
        let mut errors = Vec::new();
        for step in &self.steps {
            if let Step::Call(c) = &step.value {
                let name = &c.tool.value;
                let expects_unknown = c
                    .expect
                    .error
                    .as_deref()
                    .is_some_and(|e| e.starts_with(crate::mcp::strings::ERR_UNKNOWN_TOOL));
                if !tools.iter().any(|t| t == name) && !expects_unknown {
                    errors.push(located(
                        origin,
                        &c.tool.referenced,
                        "call.tool",
                        &format!(
                            "unknown tool `{name}` on board {} (expect the error `Unknown tool: {name}` to call it anyway)",
                            board.name
                        ),
                    ));
                }
            }
            let pressed = match &step.value {
                Step::Press(p) => Some(p.button.as_str()),
                Step::ButtonDown(b) | Step::ButtonUp(b) => Some(b.button.as_str()),
                _ => None,
            };
            if let Some(button) = pressed
                && !board.buttons.iter().any(|b| b.name == button)
            {
                let names: Vec<&str> = board.buttons.iter().map(|b| b.name.as_str()).collect();
                errors.push(located(
                    origin,
                    &step.referenced,
                    "press.button",
                    &format!(
                        "board {} has no button `{}` (it has: {})",
                        board.name,
                        button,
                        names.join(", ")
                    ),
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(SpecErrors::tidy(errors))
        }
    }
}

/// A step's name as written in the scenario file.
fn located(origin: &str, at: &serde_saphyr::Location, field: &str, message: &str) -> SpecError {
    SpecError::Invalid {
        origin: origin.to_string(),
        line: at.line().max(1),
        column: at.column().max(1),
        field: field.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        ScenarioSpec::from_yaml("s.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_readable_scenario_parses() {
        let s = ScenarioSpec::from_yaml(
            "s.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps:\n  - initialize: {}\n  - call: { tool: self.reboot, expect: { no_reply_within: 5s } }\n  - wait: 1500ms\n  - reboot\n  - note: hello\n",
        )
        .unwrap();
        assert_eq!(s.steps.len(), 5);
        assert!(matches!(s.steps[2].value, Step::Wait(Duration(d)) if d == SimDuration::from_millis(1500)));
        assert_eq!(s.steps[1].referenced.line(), 5);
    }

    #[test]
    fn bad_files_point_at_line_and_column() {
        let e = err("name: n\nboard: b\nsteps:\n  - explode: {}\n");
        assert!(e.starts_with("s.yaml:4:"), "{e}");
        assert!(e.contains("explode"), "{e}");
        let e = err("name: n\nboard: b\nsteps:\n  - wait: soon\n");
        assert!(e.starts_with("s.yaml:4:"), "{e}");
        let e = err("name: n\nboard: b\nsteps:\n  - wait: 1500\n");
        assert!(e.contains("unit"), "{e}");
        let e = err("name: n\nboard: b\ncolour: red\nsteps: []\n");
        assert!(e.starts_with("s.yaml:3:"), "{e}");
    }
}
