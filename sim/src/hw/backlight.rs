//! The LCD backlight of `main/boards/common/backlight.cc` (`Backlight`, `PwmBacklight`):
//! brightness fades by one step per 5 ms `esp_timer` tick toward a target (docs/reference/firmware.md §10.3).
//!
//! Quirks kept: a request equal to the *current* (possibly mid-fade) value is ignored without
//! persisting; a running timer is not restarted, so a new target keeps the old 5 ms phase; the
//! readback is the in-flight value. Knows nothing about MCP.

use crate::time::{SimDuration, SimTime};

/// The transition timer period.
pub const STEP_PERIOD: SimDuration = SimDuration::from_millis(5);

/// Backlight state.
#[derive(Clone, Debug)]
pub struct Backlight {
    brightness: u8,
    target: u8,
    step: i8,
    /// Next fire time of the periodic transition timer, when it runs.
    next_tick: Option<SimTime>,
}

/// What `set_brightness` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// Equal to the current value: nothing happened (no NVS write, old fade continues).
    Ignored,
    /// New target; `timer_started` is false when the timer was already running.
    Fading {
        /// The requested brightness, clamped to 100.
        target: u8,
        /// Whether this call started the 5 ms timer (false: it keeps the running timer's phase).
        timer_started: bool,
    },
}

/// One timer tick's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FadeStep {
    /// The brightness after this step.
    pub brightness: u8,
    /// The LEDC duty written for it ([`Backlight::duty`]).
    pub duty: u32,
    /// The target was reached and the timer stopped.
    pub stopped: bool,
}

impl Default for Backlight {
    fn default() -> Self {
        Self::new()
    }
}

impl Backlight {
    /// `brightness_` starts at 0 at construction.
    pub fn new() -> Self {
        Backlight {
            brightness: 0,
            target: 0,
            step: 1,
            next_tick: None,
        }
    }

    /// `brightness()`: the in-flight value.
    pub fn brightness(&self) -> u8 {
        self.brightness
    }

    /// The brightness the fade is heading for.
    pub fn target(&self) -> u8 {
        self.target
    }

    /// 10-bit LEDC duty for a brightness: `(1023 × b) / 100`.
    pub fn duty(brightness: u8) -> u32 {
        1023 * u32::from(brightness) / 100
    }

    /// `SetBrightness(b, permanent)` minus the NVS write (the caller persists when told to).
    pub fn set_brightness(&mut self, now: SimTime, requested: u8) -> SetOutcome {
        let b = requested.min(100);
        if b == self.brightness {
            return SetOutcome::Ignored;
        }
        self.target = b;
        self.step = if self.target > self.brightness { 1 } else { -1 };
        let timer_started = self.next_tick.is_none();
        if timer_started {
            self.next_tick = Some(now + STEP_PERIOD);
        }
        SetOutcome::Fading {
            target: b,
            timer_started,
        }
    }

    /// When the transition timer fires next; `None` while it is stopped.
    pub fn next_deadline(&self) -> Option<SimTime> {
        self.next_tick
    }

    /// `OnTransitionTimer` for a tick due at `now`.
    pub fn on_tick(&mut self, now: SimTime) -> Option<FadeStep> {
        let due = self.next_tick?;
        if due > now {
            return None;
        }
        if self.brightness == self.target {
            self.next_tick = None;
            return None;
        }
        self.brightness = (i16::from(self.brightness) + i16::from(self.step)).clamp(0, 255) as u8;
        let stopped = self.brightness == self.target;
        self.next_tick = if stopped { None } else { Some(due + STEP_PERIOD) };
        Some(FadeStep {
            brightness: self.brightness,
            duty: Self::duty(self.brightness),
            stopped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_until(b: &mut Backlight, t: SimTime) {
        while let Some(d) = b.next_deadline() {
            if d > t {
                break;
            }
            b.on_tick(d);
        }
    }

    #[test]
    fn fade_moves_one_step_per_five_ms_and_reads_back_in_flight() {
        let mut b = Backlight::new();
        b.set_brightness(SimTime::ZERO, 75);
        run_until(&mut b, SimTime::from_millis(1000));
        assert_eq!(b.brightness(), 75);
        let t0 = SimTime::from_millis(1000);
        b.set_brightness(t0, 40);
        assert_eq!(b.brightness(), 75, "0 ms after the call");
        run_until(&mut b, SimTime::from_millis(1025));
        assert_eq!(b.brightness(), 70, "25 ms later: five ticks");
        run_until(&mut b, SimTime::from_millis(3025));
        assert_eq!(b.brightness(), 40);
        assert_eq!(b.next_deadline(), None, "timer stopped at the target");
    }

    #[test]
    fn a_request_equal_to_the_in_flight_value_is_ignored() {
        let mut b = Backlight::new();
        b.set_brightness(SimTime::ZERO, 75);
        run_until(&mut b, SimTime::from_millis(100));
        assert_eq!(b.brightness(), 20);
        assert_eq!(b.set_brightness(SimTime::from_millis(100), 20), SetOutcome::Ignored);
        run_until(&mut b, SimTime::from_millis(1000));
        assert_eq!(b.brightness(), 75, "the old fade continued to the old target");
    }

    #[test]
    fn a_new_target_keeps_the_running_timer_phase() {
        let mut b = Backlight::new();
        b.set_brightness(SimTime::ZERO, 75);
        run_until(&mut b, SimTime::from_micros(12_000));
        let outcome = b.set_brightness(SimTime::from_micros(12_000), 10);
        assert_eq!(
            outcome,
            SetOutcome::Fading {
                target: 10,
                timer_started: false
            }
        );
        assert_eq!(
            b.next_deadline(),
            Some(SimTime::from_millis(15)),
            "phase of the first start"
        );
    }
}
