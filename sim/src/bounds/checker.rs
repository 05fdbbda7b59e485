//! Checking single cases: a booted board that answers one bound case at a time, judged against
//! the oracle and a snapshot of the device taken just before it.

use super::*;

/// What the argument walk should make of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// A 1-hop error reply with this message; the callback never runs.
    Rejected(String),
    /// The call is scheduled and the callback receives this value for the parameter.
    Accepted(PropertyValue),
}

/// How a case that held turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted, and the callback stored the expected value.
    Accepted,
    /// Rejected with the exact message, device state untouched.
    Rejected,
}

/// What a case is judged against: the device's snapshot plus what a readback cannot see (the
/// NVS contents and the main task's queue), taken just before the case.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    device: DeviceSnapshot,
    nvs: String,
    pending: Vec<String>,
}

impl Snapshot {
    fn of(device: &Device) -> Snapshot {
        Snapshot {
            device: device.snapshot(),
            nvs: format!("{:?}", device.nvs()),
            pending: device.pending_tasks(),
        }
    }
}

/// Why a bound check did not pass: what was sent and what the device did instead (or why the
/// check could not run). Reads as its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

impl std::ops::Deref for Violation {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// A booted board that answers one bound case at a time (the device is reused; every case
/// starts after [`SETTLE`] and is judged against a snapshot taken just before it).
pub struct BoundChecker {
    harness: Harness,
    next_id: i32,
}

impl BoundChecker {
    /// Boots `spec` in the conformance world. `Err` when the board does not come up.
    pub fn new(spec: Arc<BoardSpec>) -> Result<BoundChecker, Violation> {
        let mut harness = Harness::new(Device::new(spec, WorldSpec::conformance(), 0));
        harness.power_on();
        harness.run_until_idle().map_err(|e| Violation(e.to_string()))?;
        if !harness.device.is_running() {
            return Err(Violation("the board did not boot".into()));
        }
        Ok(BoundChecker { harness, next_id: 1 })
    }

    /// The board's callable parameters.
    pub fn parameters(&self) -> Vec<Parameter> {
        self.harness.device.mcp().map(parameters).unwrap_or_default()
    }

    /// The booted device the cases run on.
    pub fn device(&self) -> &Device {
        &self.harness.device
    }

    /// Calls the tool with `number` (a JSON number token) for the parameter: accepted iff its
    /// `valueint` is in range, and then stored; otherwise the exact range error, state untouched.
    pub fn check_number(&mut self, p: &Parameter, number: &str) -> Result<Verdict, Violation> {
        let value = expected_valueint(number).ok_or_else(|| Violation(format!("`{number}` is not a number token")))?;
        let expected = match expected_integer(p.property(), value) {
            Ok(v) => Expected::Accepted(PropertyValue::Int(v)),
            Err(message) => Expected::Rejected(message),
        };
        let name = json_string(p.property().name());
        self.call(p, &format!("{name}:{number}"), &expected)
    }

    /// Calls the tool with `value` (JSON of a type the parameter does not take): `Missing valid
    /// argument: <name>` when required, the default when optional.
    pub fn check_wrong_type(&mut self, p: &Parameter, value: &str) -> Result<Verdict, Violation> {
        let expected = match p.property().default() {
            Some(d) => Expected::Accepted(d.clone()),
            None => Expected::Rejected(format!("Missing valid argument: {}", p.property().name())),
        };
        let name = json_string(p.property().name());
        self.call(p, &format!("{name}:{value}"), &expected)
    }

    /// Calls the tool with the parameter spelled `key` (an ASCII case variant of its name) and
    /// then again under its exact name with a `null`: the first, case-insensitive match wins.
    pub fn check_key_spelling(&mut self, p: &Parameter, key: &str) -> Result<Verdict, Violation> {
        if !key.eq_ignore_ascii_case(p.property().name()) {
            return Err(Violation(format!(
                "`{key}` is not a spelling of `{}`",
                p.property().name()
            )));
        }
        let (json, value) = distinct_valid_value(p.property());
        let exact = json_string(p.property().name());
        let args = format!("{}:{json},{exact}:null", json_string(key));
        self.call(p, &args, &Expected::Accepted(value))
    }

    /// One `tools/call` of `p.tool` with `first` (the member(s) for the parameter under test)
    /// followed by valid members for every other parameter, judged against `expected`.
    pub fn call(&mut self, p: &Parameter, first: &str, expected: &Expected) -> Result<Verdict, Violation> {
        self.settle();
        let id = self.next_id;
        self.next_id = if self.next_id >= 1_000_000_000 {
            1
        } else {
            self.next_id + 1
        };
        let mut arguments = first.to_string();
        for (i, sibling) in p.properties.iter().enumerate() {
            if i != p.index {
                let _ = write!(arguments, ",{}:{}", json_string(sibling.name()), valid_value(sibling).0);
            }
        }
        let payload = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{},"arguments":{{{arguments}}}}}}}"#,
            json_string(&p.tool)
        );
        let before = Snapshot::of(&self.harness.device);
        let receipt = self.harness.deliver(payload.as_bytes());
        self.harness.run_until_idle().map_err(|e| Violation(e.to_string()))?;
        let replies: Vec<Vec<u8>> = self.harness.take_mcp_payloads();
        let events = self.harness.device.drain_events();
        let sent = payload.clone();
        let shown = |r: &[Vec<u8>]| {
            r.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
        };
        match expected {
            Expected::Rejected(message) => {
                let want = expected_error_reply(id, message);
                if receipt != (Receipt::Answered { id, is_error: true }) {
                    return Err(Violation(format!(
                        "{sent}: expected the 1-hop error `{message}`, the receive task gave {receipt:?}"
                    )));
                }
                if replies != [want.clone()] {
                    return Err(Violation(format!(
                        "{sent}: expected exactly {:?}, sent {:?}",
                        String::from_utf8_lossy(&want),
                        shown(&replies)
                    )));
                }
                let after = Snapshot::of(&self.harness.device);
                if after != before {
                    return Err(Violation(format!(
                        "{sent}: rejected, but the device changed: {before:?} -> {after:?}"
                    )));
                }
                if let Some(e) = events.iter().find(|e| {
                    !matches!(
                        e.kind,
                        Event::Logged { .. } | Event::BatchStarted { .. } | Event::ReplySent { .. }
                    )
                }) {
                    return Err(Violation(format!("{sent}: rejected, but something ran: {e}")));
                }
                Ok(Verdict::Rejected)
            }
            Expected::Accepted(value) => {
                let Receipt::Scheduled { id: got, args, .. } = &receipt else {
                    return Err(Violation(format!(
                        "{sent}: expected the call to be scheduled with {}, the receive task gave {receipt:?} and sent {:?}",
                        value_text(value),
                        shown(&replies)
                    )));
                };
                if *got != id || args.get(p.index) != Some(value) {
                    return Err(Violation(format!(
                        "{sent}: the callback was handed {:?}, expected {} for `{}`",
                        args,
                        value_text(value),
                        p.property().name()
                    )));
                }
                if let Some(reason) = events.iter().find_map(|e| match &e.kind {
                    Event::Panicked { reason } => Some(reason.clone()),
                    _ => None,
                }) {
                    return Err(Violation(format!(
                        "{sent}: the callback panicked ({reason}); the device rebooted"
                    )));
                }
                let prefix = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
                let ours = replies.iter().filter(|r| r.starts_with(prefix.as_bytes())).count();
                if ours != 1 || replies.len() != 1 {
                    return Err(Violation(format!(
                        "{sent}: expected one reply for id {id}, sent {:?}",
                        shown(&replies)
                    )));
                }
                self.harness.sleep(SETTLE);
                self.check_stored(p, value, &before)
                    .map_err(|e| Violation(format!("{sent}: {e}")))?;
                Ok(Verdict::Accepted)
            }
        }
    }

    /// The stored effect of an accepted call, where the tool stores its argument somewhere the
    /// twin can read back: the volume (and NVS), the backlight (after its fade), a GPIO flag, an
    /// NVS key.
    fn check_stored(&self, p: &Parameter, value: &PropertyValue, before: &Snapshot) -> Result<(), Violation> {
        let device = &self.harness.device;
        let after = device.snapshot();
        if after.state.is_none() {
            return Err(Violation("the device is not running after the call".into()));
        }
        let v = value.as_int();
        match &p.action {
            ToolAction::SetVolume => {
                let nvs = device.nvs().get_i32(names::AUDIO, names::OUTPUT_VOLUME, i32::MIN);
                let volume = after.volume.unwrap_or_default();
                if volume != v || nvs != v {
                    return Err(Violation(format!(
                        "volume {v} accepted, but readback {volume} and NVS {nvs}"
                    )));
                }
            }
            ToolAction::SetBrightness => {
                let b = after.brightness.map(i32::from);
                let nvs = device.nvs().get_i32(names::DISPLAY, names::BRIGHTNESS, i32::MIN);
                let unchanged = before.device.brightness.is_some_and(|now| i32::from(now) == v);
                if b != Some(v) || (nvs != v && !unchanged) {
                    return Err(Violation(format!(
                        "brightness {v} accepted, but after the fade the backlight reads {b:?} and NVS {nvs}"
                    )));
                }
            }
            ToolAction::Board(index) => {
                let Some(BoardTool::Tool(t)) = device.spec().board_tools.get(*index) else {
                    return Ok(());
                };
                let name = p.property().name();
                match &t.behavior {
                    Behavior::Gpio {
                        gpio, from: Some(from), ..
                    } if from == name => {
                        let want = match value {
                            PropertyValue::Bool(b) => *b,
                            other => other.as_int() != 0,
                        };
                        let got = after.gpio.get(gpio).copied();
                        if got != Some(want) {
                            let reads = got.map_or("as never set".to_string(), |l| format!("level {}", u8::from(l)));
                            return Err(Violation(format!(
                                "{} accepted, but GPIO {gpio} reads {reads}",
                                value_text(value)
                            )));
                        }
                    }
                    Behavior::NvsSet { namespace, key, from } if from == name => {
                        let want = match value {
                            PropertyValue::Int(i) => NvsValue::I32(*i),
                            PropertyValue::Bool(b) => NvsValue::U8(u8::from(*b)),
                            PropertyValue::Str(s) => NvsValue::Str(s.clone()),
                        };
                        let got = device.nvs().get(namespace, key);
                        if got != Some(&want) {
                            return Err(Violation(format!(
                                "{} accepted, but NVS {namespace}/{key} holds {got:?}",
                                value_text(value)
                            )));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Lets the device run for [`SETTLE`] and forgets what it sent or recorded meanwhile.
    fn settle(&mut self) {
        self.harness.sleep(SETTLE);
        self.harness.take_outputs();
        self.harness.device.drain_events();
    }
}
