//! A GPIO button as the firmware's `Button` class drives it (`main/boards/common/button.{h,cc}`)
//! through espressif/button 4.2 (`iot_button.c`; docs/boards.md, "Buttons"): one periodic
//! esp_timer polls every button each 5 ms, a level must be read twice in a row to count
//! (debounce), and a small state machine turns levels into the gestures a board's callbacks are
//! registered for — press down, press up, click, double click, N clicks, long press.
//!
//! The machine here is that state machine in virtual time. Between the ticks at which something
//! can change it does not run: it jumps, and counts the ticks it skipped exactly as the polling
//! would have (nothing else happens on them). What it knows of the world is one physical level
//! per button, set by the user; what it hands back is the gestures and the tick each fired at.

use crate::board::button::{DEFAULT_LONG_PRESS_MS, DEFAULT_SHORT_PRESS_MS};
use crate::board::{BoardSpec, ButtonAction, Gesture};
use crate::device::platform::{Fired, Platform};
use crate::device::task::EventBit;
use crate::time::{SimDuration, SimTime};
use crate::trace::Event;

/// `CONFIG_BUTTON_PERIOD_TIME_MS` (5): the polling period.
pub(crate) const TICK: SimDuration = SimDuration::from_millis(5);
/// `CONFIG_BUTTON_DEBOUNCE_TICKS` (2): consecutive reads a new level needs.
const DEBOUNCE_TICKS: u8 = 2;

/// A button name the board file does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the board has no button `{0}`")]
pub struct NoSuchButton(pub String);

/// The component's `state` (`iot_button.c`, `button_handler`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// 0, `PRESS_DOWN_CHECK`: waiting for a press.
    Released,
    /// 1, `PRESS_UP_CHECK`: pressed; a release or the long press time ends it.
    Pressed,
    /// 2, `PRESS_REPEAT_DOWN_CHECK`: released after a short press; another press or the short
    /// press time ends it.
    Between,
    /// 3: pressed again within the short press time.
    Repeat,
    /// 4, `PRESS_LONG_PRESS_UP_CHECK`: the long press started; waiting for the release.
    Long,
}

/// One button: its physical level, what the polling made of it, and where the next tick is.
#[derive(Clone, Debug)]
pub(crate) struct ButtonMachine {
    /// Index of the button in the board file.
    pub(crate) index: usize,
    /// Pressed, as the finger has it now.
    physical: bool,
    /// Pressed, as the debounced level has it (`button_level == active_level`).
    level: bool,
    debounce: u8,
    state: State,
    ticks: u32,
    repeat: u8,
    long_ticks: u32,
    short_ticks: u32,
    /// When the polling timer started (tick 0; `esp_timer_start_periodic` when the first
    /// button is made, in the board constructor).
    origin: SimTime,
    /// The last tick accounted for.
    tick: u64,
}

/// `TIME_TO_TICKS`: 0 is the Kconfig default; anything else whole ticks, at least 1.
fn to_ticks(ms: u32, default_ms: u32) -> u32 {
    if ms == 0 {
        default_ms / TICK.as_millis() as u32
    } else {
        (ms / TICK.as_millis() as u32).max(1)
    }
}

impl ButtonMachine {
    /// A button made at `origin` (`iot_button_create`), released, whose finger is `pressed`
    /// already (a button held through a reboot is seen pressed after two ticks).
    pub(crate) fn new(index: usize, origin: SimTime, long_press_ms: u32, short_press_ms: u32, pressed: bool) -> Self {
        ButtonMachine {
            index,
            physical: pressed,
            level: false,
            debounce: 0,
            state: State::Released,
            ticks: 0,
            repeat: 0,
            long_ticks: to_ticks(long_press_ms, DEFAULT_LONG_PRESS_MS),
            short_ticks: to_ticks(short_press_ms, DEFAULT_SHORT_PRESS_MS),
            origin,
            tick: 0,
        }
    }

    fn time_of(&self, tick: u64) -> SimTime {
        self.origin + SimDuration::from_micros(tick * TICK.as_micros())
    }

    /// The last tick at or before `t`.
    fn tick_at(&self, t: SimTime) -> u64 {
        t.saturating_since(self.origin).as_micros() / TICK.as_micros()
    }

    /// The finger presses (`true`) or lets go at `now` (the ticks up to `now` already ran).
    pub(crate) fn set(&mut self, now: SimTime, pressed: bool) {
        self.skip_to(self.tick_at(now));
        self.physical = pressed;
    }

    /// Counts the ticks up to `tick` that changed nothing (levels steady, no threshold reached:
    /// [`ButtonMachine::next_tick`] guarantees it).
    fn skip_to(&mut self, tick: u64) {
        if tick > self.tick {
            if self.state != State::Released {
                let skipped = u32::try_from(tick - self.tick).unwrap_or(u32::MAX);
                self.ticks = self.ticks.saturating_add(skipped);
            }
            self.tick = tick;
        }
    }

    /// The next tick at which something can happen, if any: the very next while a level is
    /// changing, else the tick a threshold is reached.
    fn next_tick(&self) -> Option<u64> {
        if self.physical != self.level || self.debounce > 0 {
            return Some(self.tick + 1);
        }
        let after = |ticks_needed: u32| Some(self.tick + u64::from(ticks_needed.saturating_sub(self.ticks).max(1)));
        match self.state {
            State::Released | State::Repeat | State::Long => None,
            // ticks >= long_press_ticks (`iot_button.c:154`).
            State::Pressed => after(self.long_ticks),
            // ticks > short_press_ticks (`:183`).
            State::Between => after(self.short_ticks + 1),
        }
    }

    /// When the machine next needs to run.
    pub(crate) fn deadline(&self) -> Option<SimTime> {
        self.next_tick().map(|t| self.time_of(t))
    }

    /// Runs every tick due at or before `now`; each gesture with the time of its tick.
    pub(crate) fn fire(&mut self, now: SimTime, out: &mut Vec<(SimTime, Gesture)>) {
        while let Some(next) = self.next_tick() {
            let at = self.time_of(next);
            if at > now {
                break;
            }
            self.skip_to(next - 1);
            self.tick = next;
            self.poll(at, out);
        }
    }

    /// One tick of `button_handler` (`iot_button.c:114-300`, the events `Button` uses).
    fn poll(&mut self, at: SimTime, out: &mut Vec<(SimTime, Gesture)>) {
        if self.state != State::Released {
            self.ticks = self.ticks.saturating_add(1);
        }
        if self.physical != self.level {
            self.debounce += 1;
            if self.debounce >= DEBOUNCE_TICKS {
                self.level = self.physical;
                self.debounce = 0;
            }
        } else {
            self.debounce = 0;
        }
        let mut emit = |g| out.push((at, g));
        match self.state {
            State::Released => {
                if self.level {
                    emit(Gesture::PressDown);
                    self.ticks = 0;
                    self.repeat = 1;
                    self.state = State::Pressed;
                }
            }
            State::Pressed => {
                if !self.level {
                    emit(Gesture::PressUp);
                    self.ticks = 0;
                    self.state = State::Between;
                } else if self.ticks >= self.long_ticks {
                    emit(Gesture::LongPress);
                    self.state = State::Long;
                }
            }
            State::Between => {
                if self.level {
                    emit(Gesture::PressDown);
                    self.repeat = self.repeat.wrapping_add(1);
                    self.ticks = 0;
                    self.state = State::Repeat;
                } else if self.ticks > self.short_ticks {
                    match self.repeat {
                        1 => emit(Gesture::Click),
                        2 => emit(Gesture::DoubleClick),
                        _ => {}
                    }
                    emit(Gesture::Clicks(self.repeat));
                    self.repeat = 0;
                    self.state = State::Released;
                }
            }
            State::Repeat => {
                if !self.level {
                    emit(Gesture::PressUp);
                    if self.ticks < self.short_ticks {
                        self.ticks = 0;
                        self.state = State::Between;
                    } else {
                        // Held too long for a series: no click of any kind.
                        self.state = State::Released;
                    }
                }
            }
            State::Long => {
                if !self.level {
                    emit(Gesture::PressUp);
                    self.state = State::Released;
                }
            }
        }
    }
}

/// What a button callback does (esp_timer task; `compact_wifi_board.cc:103-147` and the other
/// boards' lambdas): the chat and listening calls set a main-loop bit, volume acts at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// `ToggleChatState()`, `StartListening()`, `StopListening()`.
    Signal(EventBit),
    /// The volume buttons: ±10 (clamped), or 100 / 0 (`true`: a long press's absolute value).
    Volume(i32, bool),
    /// A callback the twin does not model: nothing happens.
    Nothing,
}

impl Effect {
    fn of(action: ButtonAction) -> Effect {
        match action {
            ButtonAction::ToggleChat => Effect::Signal(EventBit::ToggleChat),
            ButtonAction::StartListening => Effect::Signal(EventBit::StartListening),
            ButtonAction::StopListening => Effect::Signal(EventBit::StopListening),
            ButtonAction::VolumeUp => Effect::Volume(10, false),
            ButtonAction::VolumeDown => Effect::Volume(-10, false),
            ButtonAction::VolumeMax => Effect::Volume(1, true),
            ButtonAction::VolumeMin => Effect::Volume(-1, true),
            ButtonAction::Unmodelled => Effect::Nothing,
        }
    }
}

/// The board's buttons: one machine per button of the board file, made in the board
/// constructor (a button held by the user then is seen pressed two ticks later).
#[derive(Clone, Debug, Default)]
pub(crate) struct Buttons(Vec<ButtonMachine>);

impl Buttons {
    /// The buttons of `spec`, made at `now`; `held` says which the user holds already.
    pub(crate) fn new(spec: &BoardSpec, now: SimTime, held: &[bool]) -> Self {
        let machines = spec.buttons.iter().enumerate().map(|(i, b)| {
            let pressed = held.get(i).copied().unwrap_or(false);
            ButtonMachine::new(i, now, b.long_press_time, b.short_press_time, pressed)
        });
        Buttons(machines.collect())
    }

    /// When the polling next has something to do.
    pub(crate) fn deadline(&self) -> Option<SimTime> {
        self.0.iter().filter_map(ButtonMachine::deadline).min()
    }

    /// The user presses (`true`) or lets go of button `index` at `now`.
    pub(crate) fn set(&mut self, now: SimTime, index: usize, pressed: bool) {
        if let Some(b) = self.0.iter_mut().find(|b| b.index == index) {
            b.set(now, pressed);
        }
    }

    /// The ticks due at `platform.now`: every gesture found is noted and logged, and what the
    /// board's callbacks do (for the gestures that have one) is returned in order.
    pub(crate) fn fire(&mut self, platform: &mut Platform) -> Vec<Effect> {
        let mut actions = Vec::new();
        // Every step of the device asks; almost always no button is due.
        if self.deadline().is_none_or(|d| d > platform.now) {
            return actions;
        }
        let mut fired = Vec::new();
        for machine in &mut self.0 {
            fired.clear();
            machine.fire(platform.now, &mut fired);
            if fired.is_empty() {
                continue;
            }
            let spec = platform.spec.clone();
            let Some(b) = spec.buttons.get(machine.index) else {
                continue;
            };
            for &(at, gesture) in &fired {
                let action = b.action(gesture);
                // The N-clicks event behind every series is shown only when a callback takes it.
                if matches!(gesture, Gesture::Clicks(_)) && action.is_none() {
                    continue;
                }
                let did = action.map_or("no callback", ButtonAction::describe);
                platform.emit(|| Event::ButtonFired {
                    button: b.name.clone(),
                    gpio: b.gpio,
                    gesture: gesture.name(),
                    did,
                });
                let button = b.name.clone();
                platform.gestures.push(Fired {
                    at,
                    button,
                    gesture,
                    action,
                });
                actions.extend(action.map(Effect::of));
            }
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> SimTime {
        SimTime::from_millis(v)
    }

    /// Presses and releases at the given times (ms), runs to `end`; gestures with their times.
    fn run(edges: &[(u64, bool)], end: u64) -> Vec<(u64, Gesture)> {
        let mut b = ButtonMachine::new(0, SimTime::ZERO, 0, 0, false);
        let mut out = Vec::new();
        for &(t, pressed) in edges {
            b.fire(ms(t), &mut out);
            b.set(ms(t), pressed);
        }
        b.fire(ms(end), &mut out);
        assert!(b.deadline().is_none(), "the machine comes to rest");
        out.into_iter().map(|(t, g)| (t.as_millis(), g)).collect()
    }

    #[test]
    fn a_click_fires_185_ms_after_the_debounced_release() {
        // Pressed at 1 ms: read pressed at ticks 5 and 10 ms → down at 10. Released at 101:
        // read at 105 and 110 → up at 110; click when ticks > 36 → 37 ticks later, 295 ms.
        let g = run(&[(1, true), (101, false)], 2000);
        assert_eq!(
            g,
            [
                (10, Gesture::PressDown),
                (110, Gesture::PressUp),
                (295, Gesture::Click),
                (295, Gesture::Clicks(1))
            ]
        );
    }

    #[test]
    fn a_long_press_fires_at_1500_ms_and_no_click_follows_it() {
        let g = run(&[(1, true), (3001, false)], 5000);
        assert_eq!(
            g,
            [
                (10, Gesture::PressDown),
                (1510, Gesture::LongPress),
                (3010, Gesture::PressUp)
            ]
        );
    }

    #[test]
    fn two_quick_presses_are_a_double_click_and_no_click() {
        let g = run(&[(1, true), (81, false), (161, true), (241, false)], 2000);
        let names: Vec<Gesture> = g.iter().map(|(_, g)| *g).collect();
        assert_eq!(
            names,
            [
                Gesture::PressDown,
                Gesture::PressUp,
                Gesture::PressDown,
                Gesture::PressUp,
                Gesture::DoubleClick,
                Gesture::Clicks(2)
            ]
        );
    }

    #[test]
    fn a_second_press_held_past_the_short_time_ends_the_series_without_any_click() {
        let g = run(&[(1, true), (81, false), (161, true), (761, false)], 3000);
        assert!(
            !g.iter()
                .any(|(_, g)| matches!(g, Gesture::Click | Gesture::DoubleClick | Gesture::Clicks(_))),
            "{g:?}"
        );
    }

    #[test]
    fn a_press_shorter_than_two_polls_is_not_seen() {
        // Pressed 6..8 ms: the next read, at 10, sees it released again.
        let g = run(&[(6, true), (8, false)], 1000);
        assert!(g.is_empty(), "{g:?}");
        // Pressed 1..7: read pressed at 5 only (one read of two needed).
        let g = run(&[(1, true), (7, false)], 1000);
        assert!(g.is_empty(), "{g:?}");
    }

    #[test]
    fn ticks_skipped_while_held_count_toward_the_long_press() {
        // Gestures are the same whether the machine is run at every tick or only when it asks.
        let mut stepped = ButtonMachine::new(0, SimTime::ZERO, 0, 0, false);
        let mut a = Vec::new();
        stepped.set(ms(3), true);
        for t in (0..=2500).step_by(5) {
            stepped.fire(ms(t), &mut a);
        }
        let mut b = Vec::new();
        let mut lazy = ButtonMachine::new(0, SimTime::ZERO, 0, 0, false);
        lazy.set(ms(3), true);
        lazy.fire(ms(2500), &mut b);
        assert_eq!(a, b);
        assert!(a.iter().any(|(_, g)| *g == Gesture::LongPress));
    }

    #[test]
    fn a_board_long_press_time_replaces_the_default() {
        let mut b = ButtonMachine::new(0, SimTime::ZERO, 1000, 0, false);
        let mut out = Vec::new();
        b.set(ms(1), true);
        b.fire(ms(3000), &mut out);
        assert_eq!(out, [(ms(10), Gesture::PressDown), (ms(1010), Gesture::LongPress)]);
    }
}
