//! The otto-robot's `OttoController` (`main/boards/otto-robot/otto_controller.cc:71-836`): eight
//! MCP tools whose texts come from the board file, an action queue of 10 items consumed by the
//! `otto_action` task (priority 24, so it runs beside the main task), servo trims in NVS.
//!
//! `get_status` reads `moving` only while the task executes a dequeued item. How long an item
//! takes is a model (servo motion is not simulated); the conformance recorder never ran the task
//! at all, which [`crate::world::WorldSpec::board_tasks_run`] reproduces.

use std::collections::VecDeque;

use crate::time::{SimDuration, SimTime};

/// Unknown action name (`otto_controller.cc:662`).
pub(crate) const ERR_INVALID_ACTION: &str = "错误：无效的动作名称。可用动作：walk, turn, jump, swing, moonwalk, bend, shake_leg, updown, whirlwind_leg, sit, showcase, home, hands_up, hands_down, hand_wave, windmill, takeoff, fitness, greeting, shy, radio_calisthenics, magic_circle";
/// Unknown servo type for `set_trim` (`otto_controller.cc:770-771`).
pub(crate) const ERR_INVALID_SERVO: &str =
    "错误：无效的舵机类型，请使用: left_leg, right_leg, left_foot, right_foot, left_hand, right_hand";
/// `set_trim`'s success text: `舵机 <servo> 微调设置为 <trim> 度，已永久保存`.
pub(crate) fn trim_saved(servo: &[u8], trim: i32) -> Vec<u8> {
    let mut out = "舵机 ".as_bytes().to_vec();
    out.extend_from_slice(servo);
    out.extend_from_slice(format!(" 微调设置为 {trim} 度，已永久保存").as_bytes());
    out
}
/// `get_status`'s answer while the task executes an item.
pub(crate) const STATUS_MOVING: &str = "moving";
/// `get_status`'s answer otherwise.
pub(crate) const STATUS_IDLE: &str = "idle";
/// NVS namespace of the trims.
pub(crate) const TRIM_NAMESPACE: &str = "otto_trims";
/// The trims' NVS keys in servo order (also `set_trim`'s servo names).
pub(crate) const TRIM_KEYS: [&str; 6] = [
    "left_leg",
    "right_leg",
    "left_foot",
    "right_foot",
    "left_hand",
    "right_hand",
];
/// `QueueServoSequence` refuses strings of this length or more.
pub(crate) const SEQUENCE_MAX: usize = 512;
/// `xQueueCreate(10, …)`.
pub(crate) const QUEUE_SLOTS: usize = 10;

/// Action type ids of the firmware's enum.
pub(crate) mod kind {
    /// `walk`.
    pub(crate) const WALK: i32 = 1;
    /// `turn`.
    pub(crate) const TURN: i32 = 2;
    /// `jump`.
    pub(crate) const JUMP: i32 = 3;
    /// `swing`.
    pub(crate) const SWING: i32 = 4;
    /// `moonwalk`.
    pub(crate) const MOONWALK: i32 = 5;
    /// `bend`.
    pub(crate) const BEND: i32 = 6;
    /// `shake_leg`.
    pub(crate) const SHAKE_LEG: i32 = 7;
    /// `updown`.
    pub(crate) const UPDOWN: i32 = 8;
    /// `hands_up`.
    pub(crate) const HANDS_UP: i32 = 14;
    /// `hands_down`.
    pub(crate) const HANDS_DOWN: i32 = 15;
    /// `hand_wave`.
    pub(crate) const HAND_WAVE: i32 = 16;
    /// `home` (also queued by the constructor and by `stop`).
    pub(crate) const HOME: i32 = 17;
    /// A servo sequence (`self.otto.servo_sequences`).
    pub(crate) const SERVO_SEQUENCE: i32 = 18;
    /// `whirlwind_leg`.
    pub(crate) const WHIRLWIND_LEG: i32 = 19;
    /// `windmill`.
    pub(crate) const WINDMILL: i32 = 20;
    /// `takeoff`.
    pub(crate) const TAKEOFF: i32 = 21;
    /// `fitness`.
    pub(crate) const FITNESS: i32 = 22;
    /// `greeting`.
    pub(crate) const GREETING: i32 = 23;
    /// `shy`.
    pub(crate) const SHY: i32 = 24;
    /// `sit`.
    pub(crate) const SIT: i32 = 25;
    /// `radio_calisthenics`.
    pub(crate) const RADIO_CALISTHENICS: i32 = 26;
    /// `magic_circle`.
    pub(crate) const MAGIC_CIRCLE: i32 = 27;
    /// `showcase`.
    pub(crate) const SHOWCASE: i32 = 28;
}

/// One queued `OttoActionParams`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Motion {
    /// Action type id ([`kind`]).
    pub kind: i32,
    /// Repetitions.
    pub steps: i32,
    /// Time of one step (ms, 100–3000; lower is faster).
    pub speed: i32,
    /// `1` forward / turn left, `-1` backward / turn right (`0`: both hands).
    pub direction: i32,
    /// Amplitude (0–170), the arm swing for `walk`/`turn`, or `hand_wave`'s direction.
    pub amount: i32,
    /// The JSON of a `SERVO_SEQUENCE` item.
    pub sequence: Option<Vec<u8>>,
}

impl Motion {
    /// An item without a sequence.
    pub(crate) fn new(kind: i32, steps: i32, speed: i32, direction: i32, amount: i32) -> Self {
        Motion {
            kind,
            steps,
            speed,
            direction,
            amount,
            sequence: None,
        }
    }

    /// The `动作控制` log line `QueueAction` prints.
    pub(crate) fn log_line(&self) -> String {
        format!(
            "动作控制: 类型={}, 步数={}, 速度={}, 方向={}, 幅度={}",
            self.kind, self.steps, self.speed, self.direction, self.amount
        )
    }

    /// Model of how long the task executes the item (servo motion is not simulated).
    fn duration(&self) -> SimDuration {
        let ms = |v: i64| SimDuration::from_millis(v.max(0) as u64);
        let gait = i64::from(self.steps.max(1)) * i64::from(self.speed.max(100));
        match self.kind {
            kind::JUMP => ms(2 * i64::from(self.speed.max(100))),
            kind::SIT => ms(600),
            kind::HOME => ms(1200),
            kind::HANDS_UP | kind::HANDS_DOWN => ms(i64::from(self.speed.max(100))),
            kind::HAND_WAVE => ms(1500),
            kind::GREETING | kind::SHY => ms(i64::from(self.steps.max(1)) * 1000),
            kind::RADIO_CALISTHENICS | kind::MAGIC_CIRCLE | kind::SHOWCASE => ms(8000),
            kind::SERVO_SEQUENCE => ms(sequence_ms(self.sequence.as_deref().unwrap_or_default())),
            _ => ms(gait),
        }
    }

    /// Predefined actions other than sit and home are followed by a home move when nothing waits.
    fn homes_after(&self) -> bool {
        !matches!(self.kind, kind::SIT | kind::HOME | kind::SERVO_SEQUENCE)
    }
}

/// Sum of `v` (default 1000) and intermediate `d` of a servo sequence, parsed as the task does.
fn sequence_ms(json: &[u8]) -> i64 {
    crate::cjson::with_parsed(json, crate::cjson::Terminator::Nul, |root| {
        let Ok(root) = root else { return 0 };
        let Some(actions) = root.get(b"a").filter(|a| a.is_array()) else {
            return 0;
        };
        let mut total = 0i64;
        let n = actions.children().count();
        for (i, a) in actions.children().enumerate() {
            if !a.is_object() {
                continue;
            }
            if let Some(osc) = a.get(b"osc").filter(|o| o.is_object()) {
                let p = osc.get(b"p").map_or(300, |p| p.valueint()).clamp(100, 3000);
                let c = osc.get(b"c").map_or(8.0, |c| c.valuedouble()).clamp(0.1, 20.0);
                total += (f64::from(p) * c) as i64;
            } else {
                total += i64::from(a.get(b"v").map_or(1000, |v| v.valueint()).clamp(100, 3000));
            }
            if i + 1 < n {
                total += i64::from(a.get(b"d").map_or(0, |d| d.valueint()).max(0));
            }
        }
        total
    })
}

/// A move name and (steps, speed, direction, amount, arm_swing) to the queued item.
pub(crate) type MotionOf = fn(&[u8], i32, i32, i32, i32, i32) -> Option<Motion>;

/// Maps an `action` argument to the queued item (`otto_controller.cc:553-660`).
pub(crate) fn action_item(
    name: &[u8],
    steps: i32,
    speed: i32,
    direction: i32,
    amount: i32,
    arm_swing: i32,
) -> Option<Motion> {
    use kind::*;
    let item = |k, st, sp, d, a| Some(Motion::new(k, st, sp, d, a));
    match name {
        b"walk" => item(WALK, steps, speed, direction, arm_swing),
        b"turn" => item(TURN, steps, speed, direction, arm_swing),
        b"jump" => item(JUMP, steps, speed, 0, 0),
        b"swing" => item(SWING, steps, speed, 0, amount),
        b"moonwalk" => item(MOONWALK, steps, speed, direction, amount),
        b"bend" => item(BEND, steps, speed, direction, 0),
        b"shake_leg" => item(SHAKE_LEG, steps, speed, direction, 0),
        b"updown" => item(UPDOWN, steps, speed, 0, amount),
        b"whirlwind_leg" => item(WHIRLWIND_LEG, steps, speed, 0, amount),
        b"sit" => item(SIT, 1, 0, 0, 0),
        b"showcase" => item(SHOWCASE, 1, 0, 0, 0),
        b"home" => item(HOME, 1, 1000, 1, 0),
        b"hands_up" => item(HANDS_UP, 1, speed, direction, 0),
        b"hands_down" => item(HANDS_DOWN, 1, speed, direction, 0),
        b"hand_wave" => item(HAND_WAVE, 1, 0, 0, direction),
        b"windmill" => item(WINDMILL, steps, speed, 0, amount),
        b"takeoff" => item(TAKEOFF, steps, speed, 0, amount),
        b"fitness" => item(FITNESS, steps, speed, 0, amount),
        b"greeting" => item(GREETING, steps, 0, direction, 0),
        b"shy" => item(SHY, steps, 0, direction, 0),
        b"radio_calisthenics" => item(RADIO_CALISTHENICS, 1, 0, 0, 0),
        b"magic_circle" => item(MAGIC_CIRCLE, 1, 0, 0, 0),
        _ => None,
    }
}

/// The queue item of a pre-2.0.5 per-move tool (`QueueAction(type, steps, speed, direction,
/// amount)` of `otto_controller.cc` at v1.7.5–v2.0.4): as [`action_item`], except that the hand
/// moves always take `(1, speed, direction, 0)`.
pub(crate) fn motion_item_v1(
    name: &[u8],
    steps: i32,
    speed: i32,
    direction: i32,
    amount: i32,
    arm_swing: i32,
) -> Option<Motion> {
    match name {
        b"hand_wave" => Some(Motion::new(kind::HAND_WAVE, 1, speed, direction, 0)),
        n if crate::board::MOTIONS.iter().any(|m| m.as_bytes() == n) => {
            action_item(name, steps, speed, direction, amount, arm_swing)
        }
        _ => None,
    }
}

/// The controller's volatile state.
#[derive(Clone, Debug)]
pub(crate) struct Otto {
    queue: VecDeque<Motion>,
    /// The item executing and when it (with its auto-home) ends.
    current: Option<(Motion, SimTime)>,
    /// When the task next takes an item (20 ms after the previous one).
    next_take: Option<SimTime>,
    runs: bool,
    /// Servo trims in [`TRIM_KEYS`] order (degrees; NVS `otto_trims`).
    pub trims: [i32; 6],
}

impl Otto {
    /// Items waiting in the queue (for the tests).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Constructor: trims loaded, HOME queued (which starts the task).
    pub(crate) fn new(trims: [i32; 6], task_runs: bool, now: SimTime) -> Self {
        let mut otto = Otto {
            queue: VecDeque::new(),
            current: None,
            next_take: None,
            runs: task_runs,
            trims,
        };
        otto.enqueue(Motion::new(kind::HOME, 1, 1000, 1, 0), now);
        otto
    }

    /// Whether the task executes an item (`get_status` says `moving`).
    pub(crate) fn is_moving(&self) -> bool {
        self.current.is_some()
    }

    /// Whether a `QueueAction` now would block the caller (queue full, task running).
    pub(crate) fn is_full(&self) -> bool {
        self.runs && self.queue.len() >= QUEUE_SLOTS
    }

    /// When the running item ends (a full queue frees a slot then).
    pub(crate) fn busy_until(&self) -> Option<SimTime> {
        self.current.as_ref().map(|(_, end)| *end).or(self.next_take)
    }

    /// `QueueAction`: appends `item`; a running, idle task takes it at once.
    pub(crate) fn enqueue(&mut self, item: Motion, now: SimTime) {
        self.queue.push_back(item);
        if self.runs && self.current.is_none() && self.next_take.is_none() {
            self.next_take = Some(now);
        }
    }

    /// `self.otto.stop`: the task is deleted, the queue reset, a fresh HOME queued.
    pub(crate) fn stop(&mut self, now: SimTime) {
        self.queue.clear();
        self.current = None;
        self.next_take = None;
        self.enqueue(Motion::new(kind::HOME, 1, 1000, 1, 0), now);
    }

    /// When the action task next does something (`None` when it never runs or has nothing).
    pub(crate) fn deadline(&self) -> Option<SimTime> {
        if !self.runs {
            return None;
        }
        match &self.current {
            Some((_, end)) => Some(*end),
            None => self.next_take,
        }
    }

    /// The action task at `now`: finish the current item, take the next one.
    pub(crate) fn on_tick(&mut self, now: SimTime) -> Option<String> {
        if !self.runs {
            return None;
        }
        let mut note = None;
        if let Some((_, end)) = &self.current
            && *end <= now
        {
            self.current = None;
            self.next_take = if self.queue.is_empty() {
                None
            } else {
                Some(now + SimDuration::from_millis(20))
            };
        }
        if self.current.is_none() && self.next_take.is_some_and(|t| t <= now) {
            self.next_take = None;
            if let Some(item) = self.queue.pop_front() {
                let mut d = item.duration();
                if item.homes_after() && self.queue.is_empty() {
                    d += SimDuration::from_millis(700);
                }
                note = Some(format!("执行动作: {}", item.kind));
                self.current = Some((item, now + d));
            }
        }
        note
    }
}

/// Whether a board uses the otto controller.
pub(crate) fn needs_otto(spec: &crate::board::BoardSpec) -> bool {
    use crate::board::{Behavior, BoardTool};
    spec.board_tools.iter().any(|t| match t {
        BoardTool::Tool(t) => matches!(&t.behavior, Behavior::Builtin { name, .. } if name.needs_otto()),
        BoardTool::Lamp { .. } => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_task_never_moves() {
        let mut o = Otto::new([0; 6], false, SimTime::ZERO);
        o.enqueue(action_item(b"walk", 3, 700, 1, 30, 50).unwrap(), SimTime::ZERO);
        assert_eq!(o.deadline(), None);
        assert!(!o.is_moving());
        assert_eq!(o.queued(), 2);
    }

    #[test]
    fn running_task_is_moving_only_while_executing() {
        let mut o = Otto::new([0; 6], true, SimTime::ZERO);
        assert_eq!(o.deadline(), Some(SimTime::ZERO));
        o.on_tick(SimTime::ZERO);
        assert!(o.is_moving(), "HOME from the constructor");
        let end = o.deadline().unwrap();
        o.on_tick(end);
        assert!(!o.is_moving());
        assert_eq!(o.deadline(), None);
    }

    #[test]
    fn action_names_are_case_sensitive() {
        assert!(action_item(b"Walk", 1, 1, 1, 1, 1).is_none());
        assert_eq!(action_item(b"hand_wave", 1, 1, -1, 9, 9).unwrap().amount, -1);
        assert_eq!(ERR_INVALID_ACTION.len(), 252);
        assert_eq!(ERR_INVALID_SERVO.len(), 109);
    }

    #[test]
    fn sequence_duration_sums_moves_and_inner_delays() {
        assert_eq!(
            sequence_ms(br#"{"a":[{"s":{"ll":100},"v":1000,"d":300},{"s":{"ll":90},"v":800,"d":999}]}"#),
            2100
        );
        assert_eq!(sequence_ms(b"not json"), 0);
    }
}
