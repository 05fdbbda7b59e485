//! The main task's work queue: `Application::Schedule` and the SCHEDULE branch of
//! `Application::Run` (docs/reference/firmware.md §6.1–6.2).
//!
//! `Schedule` appends to a shared deque. The main loop takes the *whole* deque as one batch and
//! runs it in order; anything scheduled meanwhile (including by the batch's own tasks) waits for
//! the next batch. A task that blocks in `vTaskDelay` keeps the main task busy until it resumes
//! (busy-until, not a timer). Event bits other than SCHEDULE (state changed, playback drained)
//! are [`MainLoop::signal`]led: the loop handles them before it takes the next batch, as
//! `Application::Run` tests those bits before `MAIN_EVENT_SCHEDULE`. Knows nothing about what
//! tasks do.

use std::collections::VecDeque;

use crate::time::SimTime;

/// What the main loop does next.
#[derive(Debug)]
pub(crate) enum Next<T> {
    /// Nothing queued, nothing blocked.
    Idle,
    /// Blocked in a delay until this time.
    BusyUntil(#[allow(dead_code)] SimTime),
    /// A new batch of this many tasks was taken from the shared deque.
    BatchTaken(usize),
    /// Run this task now.
    Run(T),
}

/// The shared deque, the batch in progress and the task blocked in a delay.
#[derive(Debug)]
pub(crate) struct MainLoop<T> {
    queue: VecDeque<T>,
    batch: VecDeque<T>,
    events: VecDeque<T>,
    blocked: Option<(SimTime, T)>,
}

impl<T> Default for MainLoop<T> {
    fn default() -> Self {
        MainLoop {
            queue: VecDeque::new(),
            batch: VecDeque::new(),
            events: VecDeque::new(),
            blocked: None,
        }
    }
}

impl<T> MainLoop<T> {
    /// `Application::Schedule`.
    pub(crate) fn schedule(&mut self, task: T) {
        self.queue.push_back(task);
    }

    /// An event bit was set (`xEventGroupSetBits`): handled after the batch in progress, before
    /// the next one. A bit that is already set stays set once (an event of the same variant
    /// already waiting is not queued again); it clears when its handler is taken to run.
    pub(crate) fn signal(&mut self, event: T) {
        let bit = std::mem::discriminant(&event);
        if !self.events.iter().any(|e| std::mem::discriminant(e) == bit) {
            self.events.push_back(event);
        }
    }

    /// The task resumes at `until` (it called `vTaskDelay`); the rest of the batch waits.
    pub(crate) fn block(&mut self, until: SimTime, continuation: T) {
        debug_assert!(self.blocked.is_none());
        self.blocked = Some((until, continuation));
    }

    /// The next step of the main loop at `now`.
    pub(crate) fn next(&mut self, now: SimTime) -> Next<T> {
        if let Some((until, _)) = &self.blocked {
            if *until > now {
                return Next::BusyUntil(*until);
            }
            let (_, task) = self.blocked.take().expect("checked above");
            return Next::Run(task);
        }
        if let Some(task) = self.batch.pop_front() {
            return Next::Run(task);
        }
        if let Some(event) = self.events.pop_front() {
            return Next::Run(event);
        }
        if self.queue.is_empty() {
            return Next::Idle;
        }
        std::mem::swap(&mut self.queue, &mut self.batch);
        Next::BatchTaken(self.batch.len())
    }

    /// The event a blocked task waits for arrived: it resumes at `now` instead of its timeout.
    pub(crate) fn wake(&mut self, now: SimTime) {
        if let Some((until, _)) = self.blocked.as_mut()
            && *until > now
        {
            *until = now;
        }
    }

    /// When the main task can next make progress, if it has work.
    pub(crate) fn deadline(&self, now: SimTime) -> Option<SimTime> {
        match &self.blocked {
            Some((until, _)) => Some(*until),
            None if !self.batch.is_empty() || !self.queue.is_empty() || !self.events.is_empty() => Some(now),
            None => None,
        }
    }

    /// Nothing queued, batched or blocked.
    pub(crate) fn is_idle(&self) -> bool {
        self.blocked.is_none() && self.batch.is_empty() && self.queue.is_empty() && self.events.is_empty()
    }

    /// Everything still pending, in the order it would have run (for `esp_restart`).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut all: Vec<T> = self.blocked.take().map(|(_, t)| t).into_iter().collect();
        all.extend(self.batch.drain(..));
        all.extend(self.events.drain(..));
        all.extend(self.queue.drain(..));
        all
    }

    /// Everything still pending, in run order (the blocked continuation first).
    pub(crate) fn pending(&self) -> impl Iterator<Item = &T> {
        self.blocked
            .iter()
            .map(|(_, t)| t)
            .chain(self.batch.iter())
            .chain(self.events.iter())
            .chain(self.queue.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_all(
        m: &mut MainLoop<&'static str>,
        now: SimTime,
        on_run: &mut dyn FnMut(&'static str, &mut MainLoop<&'static str>),
    ) -> Vec<String> {
        let mut log = Vec::new();
        loop {
            match m.next(now) {
                Next::Idle | Next::BusyUntil(_) => return log,
                Next::BatchTaken(n) => log.push(format!("batch {n}")),
                Next::Run(t) => {
                    log.push(t.to_string());
                    on_run(t, m);
                }
            }
        }
    }

    #[test]
    fn work_scheduled_during_a_batch_runs_in_the_next_batch() {
        let mut m = MainLoop::default();
        m.schedule("call A");
        m.schedule("send B");
        let log = run_all(&mut m, SimTime::ZERO, &mut |t, m| {
            if t == "call A" {
                m.schedule("send A");
            }
        });
        assert_eq!(
            log,
            ["batch 2", "call A", "send B", "batch 1", "send A"],
            "B overtakes A"
        );
    }

    #[test]
    fn a_blocked_task_keeps_the_rest_waiting() {
        let mut m: MainLoop<&'static str> = MainLoop::default();
        m.schedule("delay");
        m.schedule("after");
        assert!(matches!(m.next(SimTime::ZERO), Next::BatchTaken(2)));
        assert!(matches!(m.next(SimTime::ZERO), Next::Run("delay")));
        m.block(SimTime::from_millis(1000), "resume");
        assert!(matches!(m.next(SimTime::from_millis(999)), Next::BusyUntil(_)));
        assert!(matches!(m.next(SimTime::from_millis(1000)), Next::Run("resume")));
        assert!(matches!(m.next(SimTime::from_millis(1000)), Next::Run("after")));
        assert!(m.is_idle());
    }

    #[test]
    fn an_event_bit_already_set_is_not_queued_twice() {
        #[derive(Debug, PartialEq)]
        enum Bit {
            StateChanged,
            Drained,
        }
        let mut m: MainLoop<Bit> = MainLoop::default();
        m.signal(Bit::StateChanged);
        m.signal(Bit::Drained);
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Run(Bit::StateChanged)));
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Run(Bit::Drained)));
        assert!(
            matches!(m.next(SimTime::ZERO), Next::Run(Bit::StateChanged)),
            "set again after it was taken"
        );
        assert!(m.is_idle());
    }

    #[test]
    fn events_are_handled_after_the_batch_and_before_the_next() {
        let mut m: MainLoop<&'static str> = MainLoop::default();
        m.schedule("a");
        let log = run_all(&mut m, SimTime::ZERO, &mut |t, m| {
            if t == "a" {
                m.schedule("b");
                m.signal("state changed");
            }
        });
        assert_eq!(log, ["batch 1", "a", "state changed", "batch 1", "b"]);
    }

    #[test]
    fn drain_returns_everything_in_run_order() {
        let mut m: MainLoop<&'static str> = MainLoop::default();
        m.schedule("a");
        m.schedule("b");
        let _ = m.next(SimTime::ZERO);
        let _ = m.next(SimTime::ZERO);
        m.block(SimTime::from_millis(5), "a-cont");
        m.schedule("c");
        assert_eq!(m.drain(), ["a-cont", "b", "c"]);
    }
}
