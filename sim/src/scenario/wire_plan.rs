//! A scenario planned for a backend (`run --wire`): each MCP step becomes a line of the
//! backend's script ([`WirePlan`]), with the connection it runs on (a call to `self.reboot`, or
//! a step expecting `device_rebooted`, ends the device's connection; the steps after it carry
//! `@N`), and what each step is to the judge (`over_wire.rs`). A step that needs the device's
//! insides (play, press, faults, power, bursts, raw sends) is refused here, at its line.

use serde_json::Value;

use crate::backend::script::{Command as ScriptCommand, Line, Script};
use crate::scenario::expect::{EventName, Expect};
use crate::scenario::step_key as step_kind;
use crate::scenario::{ScenarioSpec, Step, located};
use crate::spec::SpecError;
use crate::time::SimDuration;

/// The status tool a `readback` step calls.
pub(super) const STATUS_TOOL: &str = crate::mcp::strings::TOOL_GET_DEVICE_STATUS;

/// A scenario turned into a backend script.
#[derive(Clone, Debug)]
pub struct WirePlan {
    /// The steps as the backend performs them, one script line each.
    pub script: Script,
    /// How many connections of the device the steps span (1 + the reboots they cause).
    pub connections: u32,
    pub(super) steps: Vec<Planned>,
}

/// One step as planned: its number, its line, the connection it runs on, what it is.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) n: usize,
    pub(super) line: u64,
    pub(super) connection: u32,
    pub(super) kind: Kind,
}

/// What a planned step is to the judge.
#[derive(Clone, Debug)]
pub(super) enum Kind {
    /// A `tools/call` (a `call`, or a `readback` through the status tool): the `index`th call
    /// of its connection.
    Call {
        tool: String,
        args: Value,
        index: usize,
        decision: Option<String>,
        readback: Option<String>,
        expect: Expect,
    },
    /// Judged against the backend's own `initialize` exchange on that connection.
    Initialize {
        expect: Expect,
    },
    /// Judged against the backend's own discovery on that connection.
    List {
        with_user_tools: bool,
        follow: bool,
        expect: Expect,
    },
    Wait(SimDuration),
    Note(String),
}

impl WirePlan {
    /// Plans `spec` for a backend; a step that cannot run over a connection is an error at its
    /// line.
    /// `text` is the scenario file's text (for the position of a refused fault timeline).
    pub fn of(spec: &ScenarioSpec, origin: &str, text: &str) -> Result<WirePlan, SpecError> {
        if !spec.faults.is_empty() {
            let why = "cannot run over the wire: a fault timeline acts on the device itself (run without --wire)";
            return Err(crate::spec::invalid_at(origin, text, ("faults".into(), why.into())));
        }
        let mut lines = Vec::new();
        let mut steps = Vec::new();
        let mut connection = 1u32;
        let mut calls_on_connection = 0usize;
        for (i, spanned) in spec.steps.iter().enumerate() {
            let n = i + 1;
            let at = &spanned.referenced;
            let line = at.line();
            let refuse = |why: &str| {
                Err(located(
                    origin,
                    at,
                    step_kind(&spanned.value).as_str(),
                    &format!("cannot run over the wire: {why} (run without --wire)"),
                ))
            };
            let script_line = |step: ScriptCommand, connection: u32| Line {
                line: line as usize,
                only_on: Some(connection),
                step,
            };
            // A call the backend's script makes on this connection; its index among them.
            let mut plan_call = |tool: &str, args: &Value| {
                let call = ScriptCommand::Call {
                    tool: tool.to_string(),
                    args: args.clone(),
                    wait: true,
                };
                lines.push(script_line(call, connection));
                calls_on_connection += 1;
                calls_on_connection - 1
            };
            let kind = match &spanned.value {
                Step::Call(c) => {
                    if c.id.is_some() {
                        return refuse("the backend personality chooses request ids");
                    }
                    if c.acoustic {
                        return refuse("an acoustic measurement needs the simulated room");
                    }
                    let args = c.args.clone().unwrap_or_else(|| Value::Object(Default::default()));
                    Kind::Call {
                        tool: c.tool.value.clone(),
                        index: plan_call(&c.tool.value, &args),
                        args,
                        decision: c.decision.clone(),
                        readback: None,
                        expect: c.expect.clone(),
                    }
                }
                Step::Readback(r) => {
                    let args = Value::Object(Default::default());
                    Kind::Call {
                        tool: STATUS_TOOL.into(),
                        index: plan_call(STATUS_TOOL, &args),
                        args,
                        decision: None,
                        readback: Some(r.path.clone()),
                        expect: r.expect.clone(),
                    }
                }
                Step::ListTools(l) => {
                    if l.cursor.is_some() {
                        return refuse("the backend personality pages by itself");
                    }
                    Kind::List {
                        with_user_tools: l.with_user_tools,
                        follow: l.follow,
                        expect: l.expect.clone(),
                    }
                }
                Step::Wait(d) => {
                    lines.push(script_line(ScriptCommand::Wait(d.0), connection));
                    Kind::Wait(d.0)
                }
                Step::Note(t) => Kind::Note(t.clone()),
                Step::Initialize(i) => {
                    if i.id.is_some() || i.vision_url.is_some() || i.vision_token.is_some() {
                        return refuse(
                            "the backend personality sends initialize itself, with its own id and capabilities",
                        );
                    }
                    Kind::Initialize {
                        expect: i.expect.clone(),
                    }
                }
                other => return refuse(off_the_wire(other)),
            };
            let ends_connection = match &kind {
                Kind::Call { tool, expect, .. } => {
                    tool == crate::mcp::strings::TOOL_REBOOT || expect.events.contains(&EventName::DeviceRebooted)
                }
                _ => false,
            };
            steps.push(Planned {
                n,
                line,
                connection,
                kind,
            });
            if ends_connection {
                connection += 1;
                calls_on_connection = 0;
            }
        }
        // Steps after the last reboot may be none: the device must still come back to show it.
        Ok(WirePlan {
            script: Script { lines },
            connections: connection,
            steps,
        })
    }
}

/// Why a step of a kind that never runs over a connection cannot.
fn off_the_wire(step: &Step) -> &'static str {
    match step {
        Step::Send(_) | Step::Burst(_) => "replies to raw payloads cannot be paired over the wire",
        Step::Play(_) | Step::Listen(_) => "it measures the simulated room",
        Step::Speak(_) | Step::Wake(_) | Step::Say(_) | Step::Abort(_) | Step::Server(_) => {
            "voice steps run in virtual time only (use `connect --script` for a real backend)"
        }
        Step::Press(_)
        | Step::ButtonDown(_)
        | Step::ButtonUp(_)
        | Step::Reboot
        | Step::CutPower
        | Step::PowerOn
        | Step::Fault(_)
        | Step::Busy(_) => "it acts on the device itself, not through the backend",
        // Planned by `WirePlan::of`; listed so that a new kind of step must be placed here.
        Step::Call(_)
        | Step::Readback(_)
        | Step::ListTools(_)
        | Step::Wait(_)
        | Step::Note(_)
        | Step::Initialize(_) => "it runs over the wire",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<WirePlan, String> {
        let spec = ScenarioSpec::from_yaml("s.yaml", text).map_err(|e| e.to_string())?;
        WirePlan::of(&spec, "s.yaml", text).map_err(|e| e.to_string())
    }

    #[test]
    fn steps_after_a_reboot_run_on_the_next_connection() {
        let p = plan(
            "name: n\nboard: b\nsteps:\n  - call: { tool: self.audio_speaker.set_volume, args: { volume: 0 } }\n  - wait: 1s\n  - call: { tool: self.reboot }\n  - readback: { path: audio_speaker.volume, expect: { value: 10 } }\n  - call: { tool: self.x, expect: { events: [device_rebooted] } }\n  - note: done\n",
        )
        .unwrap();
        let lines: Vec<(usize, Option<u32>, String)> = p
            .script
            .lines
            .iter()
            .map(|l| {
                let what = match &l.step {
                    ScriptCommand::Call { tool, args, wait } => format!("call {tool} {args} {wait}"),
                    ScriptCommand::Wait(d) => format!("wait {d}"),
                    other => format!("{other:?}"),
                };
                (l.line, l.only_on, what)
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                (
                    4,
                    Some(1),
                    r#"call self.audio_speaker.set_volume {"volume":0} true"#.to_string()
                ),
                (5, Some(1), "wait 1s".to_string()),
                (6, Some(1), "call self.reboot {} true".to_string()),
                (7, Some(2), "call self.get_device_status {} true".to_string()),
                (8, Some(2), "call self.x {} true".to_string()),
            ]
        );
        assert_eq!(p.connections, 3, "two steps end a connection");
    }

    #[test]
    fn steps_that_act_on_the_device_are_refused_at_their_line() {
        let head = "name: n\nboard: b\nsteps:\n  - note: first\n";
        for (step, why) in [
            (
                "  - play: { tone: { hz: 1000 } }\n",
                "s.yaml:5:5: play: cannot run over the wire: it measures the simulated room",
            ),
            (
                "  - call: { tool: t, id: 7 }\n",
                "s.yaml:5:5: call: cannot run over the wire: the backend personality chooses request ids",
            ),
            (
                "  - call: { tool: t, acoustic: true }\n",
                "s.yaml:5:5: call: cannot run over the wire: an acoustic measurement",
            ),
            (
                "  - send: { payload: x }\n",
                "s.yaml:5:5: send: cannot run over the wire: replies to raw payloads",
            ),
            (
                "  - reboot\n",
                "s.yaml:5:5: reboot: cannot run over the wire: it acts on the device itself",
            ),
            (
                "  - list_tools: { cursor: abc }\n",
                "s.yaml:5:5: list_tools: cannot run over the wire: the backend personality pages",
            ),
            (
                "  - initialize: { vision_url: http://x }\n",
                "s.yaml:5:5: initialize: cannot run over the wire",
            ),
        ] {
            let err = plan(&format!("{head}{step}")).unwrap_err();
            assert!(err.starts_with(why), "{err}\nwanted {why}");
        }
        let err = plan("name: n\nboard: b\nfaults:\n  - { at: 1s, set: codec_dummy }\nsteps: []\n").unwrap_err();
        assert!(err.starts_with("s.yaml:3:1: faults: cannot run over the wire"), "{err}");
    }
}
