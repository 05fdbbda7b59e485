//! Built-in tool behaviours a board file names (`behavior: {builtin: {name: …}}`, the
//! [`Builtin`] enum of `board/`) where a callback does more than data can say: otto-robot's
//! controller (`main/boards/otto-robot/otto_controller.cc`) and its battery and IP tools. The
//! tool's texts and schema still come from the board file.

use crate::board::Builtin;
use crate::device::io::BoardIo;
use crate::device::otto::{self, Otto};
use crate::device::peripherals::{Callback, Peripherals, panic};
use crate::mcp::{PropertyValue, ReturnValue};
use crate::trace::{LogLevel, NvsValue};

impl Peripherals {
    /// Built-in behaviours (otto-robot's controller).
    pub(crate) fn builtin(
        &mut self,
        io: &mut BoardIo<'_>,
        name: Builtin,
        motion: Option<&str>,
        arg: &dyn Fn(&str) -> Option<PropertyValue>,
    ) -> Callback {
        let int = |n: &str| arg(n).map_or(0, |v| v.as_int());
        let bytes = |n: &str| arg(n).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
        let now = io.now;
        let text = |s: &str| Callback::Return(ReturnValue::Text(s.as_bytes().to_vec()));
        match name {
            Builtin::BatteryGetLevel => {
                let (level, charging) = io.spec.battery.as_ref().map_or((100, false), |b| (b.level, b.charging));
                text(&format!("{{\"level\":{level},\"charging\":{charging}}}"))
            }
            Builtin::OttoGetIp => {
                let w = &io.world.wifi;
                if w.connected && !w.ip.is_empty() {
                    text(&format!("{{\"ip\":\"{}\",\"connected\":true}}", w.ip))
                } else {
                    text("{\"ip\":\"\",\"connected\":false}")
                }
            }
            Builtin::OttoGetTrims => {
                let t = otto::TRIM_KEYS.map(|k| io.nvs.get_i32(otto::TRIM_NAMESPACE, k, 0));
                let body: Vec<String> = otto::TRIM_KEYS
                    .iter()
                    .zip(t)
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                let json = format!("{{{}}}", body.join(","));
                io.log(LogLevel::Info, "OttoController", || format!("获取微调设置: {json}"));
                text(&json)
            }
            _ => {
                let Some(o) = self.otto.as_mut() else {
                    return Callback::Throw(
                        format!("built-in behaviour {} needs the otto controller", name.name()).into_bytes(),
                    );
                };
                match name {
                    Builtin::OttoGetStatus => text(if o.is_moving() {
                        otto::STATUS_MOVING
                    } else {
                        otto::STATUS_IDLE
                    }),
                    Builtin::OttoStop => {
                        o.stop(now);
                        Callback::Return(ReturnValue::Bool(true))
                    }
                    Builtin::OttoServoSequences => {
                        let seq = bytes("sequence");
                        if seq.len() >= otto::SEQUENCE_MAX {
                            io.log(LogLevel::Error, "OttoController", || {
                                format!(
                                    "JSON字符串太长！输入长度={}，最大允许={}",
                                    seq.len(),
                                    otto::SEQUENCE_MAX - 1
                                )
                            });
                        } else if seq.is_empty() {
                            io.log(LogLevel::Warn, "OttoController", || "序列JSON为空字符串");
                        } else {
                            let item = otto::Motion {
                                sequence: Some(seq),
                                ..otto::Motion::new(otto::kind::SERVO_SEQUENCE, 0, 0, 0, 0)
                            };
                            return Self::queue_otto(o, io, item, Ok(ReturnValue::Bool(true)));
                        }
                        Callback::Return(ReturnValue::Bool(true))
                    }
                    // The 2.x `action` tool names its move in an argument; the pre-2.0.5 per-move
                    // tools name it in the board file (`motion`).
                    Builtin::OttoAction | Builtin::OttoMotion => {
                        let (name, pick): (Vec<u8>, otto::MotionOf) = match motion {
                            Some(m) => (m.as_bytes().to_vec(), otto::motion_item_v1),
                            None => (bytes("action"), otto::action_item),
                        };
                        let args = (
                            int("steps"),
                            int("speed"),
                            int("direction"),
                            int("amount"),
                            int("arm_swing"),
                        );
                        match pick(&name, args.0, args.1, args.2, args.3, args.4) {
                            Some(item) => Self::queue_otto(o, io, item, Ok(ReturnValue::Bool(true))),
                            None => text(otto::ERR_INVALID_ACTION),
                        }
                    }
                    Builtin::OttoSetTrim => Self::otto_set_trim(o, io, bytes("servo_type"), int("trim_value")),
                    // Answered above, before the controller is needed.
                    other => {
                        Callback::Throw(format!("built-in behaviour {} ran out of place", other.name()).into_bytes())
                    }
                }
            }
        }
    }

    /// `self.otto.set_trim`: log, store the trim in NVS, keep it, and jump once to show it.
    fn otto_set_trim(o: &mut Otto, io: &mut BoardIo<'_>, servo: Vec<u8>, trim: i32) -> Callback {
        io.log(LogLevel::Info, "OttoController", || {
            format!("设置舵机微调: {} = {}度", String::from_utf8_lossy(&servo), trim)
        });
        let Some(i) = otto::TRIM_KEYS.iter().position(|k| k.as_bytes() == servo.as_slice()) else {
            return Callback::Return(ReturnValue::Text(otto::ERR_INVALID_SERVO.as_bytes().to_vec()));
        };
        if let Err(e) = io.nvs_set(otto::TRIM_NAMESPACE, otto::TRIM_KEYS[i], NvsValue::I32(trim)) {
            return panic(e);
        }
        o.trims[i] = trim;
        let reply = ReturnValue::Text(otto::trim_saved(&servo, trim));
        Self::queue_otto(o, io, otto::Motion::new(otto::kind::JUMP, 1, 500, 0, 0), Ok(reply))
    }

    /// `QueueAction`: log, queue; a full queue blocks the caller until the task frees a slot.
    pub(crate) fn queue_otto(
        o: &mut Otto,
        io: &mut BoardIo<'_>,
        item: otto::Motion,
        reply: Result<ReturnValue, Vec<u8>>,
    ) -> Callback {
        let line = item.log_line();
        io.log(LogLevel::Info, "OttoController", || line);
        let now = io.now;
        let wait = if o.is_full() {
            o.busy_until().map(|t| t.saturating_since(now))
        } else {
            None
        };
        o.enqueue(item, now);
        match wait {
            Some(d) if !d.is_zero() => Callback::Blocked(d, reply),
            _ => Callback::Return(reply.unwrap_or(ReturnValue::Bool(true))),
        }
    }
}
