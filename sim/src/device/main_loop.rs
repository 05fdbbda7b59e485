//! The main task's work queue: `Application::Schedule` and `Application::Run`'s event bits
//! (docs/reference/firmware.md §6.1–6.2).
//!
//! `Schedule` appends to a shared deque and sets the SCHEDULE bit; the other bits (state
//! changed, playback drained, toggle chat, start/stop listening, send audio) are
//! [`MainLoop::signal`]led, and a bit is set once however often it is signalled. Each iteration
//! of the loop takes every set bit at once (a *round*) and handles them in the firmware's fixed
//! order — the order of `E`'s `Ord`, which must be the order `Application::Run` tests them in
//! (`application.cc:182-258`) — and SCHEDULE last: at that point it takes the *whole* deque as
//! one batch (tasks the round's own handlers scheduled included) and runs it in order. Bits set
//! and tasks scheduled meanwhile wait for the next round. A task that blocks in `vTaskDelay`
//! keeps the main task busy until it resumes (busy-until, not a timer). Tasks (`T`) and bits
//! (`E`) are separate types, so a task with a payload can never be mistaken for a bit. Knows
//! nothing about what either does.

use std::collections::VecDeque;

use crate::time::SimTime;

/// What the main loop does next.
#[derive(Debug)]
pub(crate) enum Next<T, E> {
    /// Nothing queued, nothing blocked.
    Idle,
    /// Blocked in a delay until this time.
    BusyUntil(#[allow(dead_code)] SimTime),
    /// A new batch of this many tasks was taken from the shared deque.
    BatchTaken(usize),
    /// Run this task now.
    Run(T),
    /// Handle this event bit now (it is cleared).
    Event(E),
}

/// Something waiting in the main loop, for evidence.
#[derive(Debug)]
pub(crate) enum Pending<'a, T, E> {
    /// A scheduled (or blocked) task.
    Task(&'a T),
    /// A set event bit.
    Event(&'a E),
}

/// The shared deque and the SCHEDULE bit, the set event bits, the round in progress (its bits
/// not yet handled, whether it took SCHEDULE, the batch it is running) and the task blocked in
/// a delay.
#[derive(Debug)]
pub(crate) struct MainLoop<T, E> {
    queue: VecDeque<T>,
    schedule_bit: bool,
    bits: Vec<E>,
    round: VecDeque<E>,
    round_schedules: bool,
    batch: VecDeque<T>,
    blocked: Option<(SimTime, T)>,
}

impl<T, E> Default for MainLoop<T, E> {
    fn default() -> Self {
        MainLoop {
            queue: VecDeque::new(),
            schedule_bit: false,
            bits: Vec::new(),
            round: VecDeque::new(),
            round_schedules: false,
            batch: VecDeque::new(),
            blocked: None,
        }
    }
}

impl<T, E: Ord> MainLoop<T, E> {
    /// `Application::Schedule`: the task joins the shared deque and SCHEDULE is set.
    pub(crate) fn schedule(&mut self, task: T) {
        self.queue.push_back(task);
        self.schedule_bit = true;
    }

    /// An event bit was set (`xEventGroupSetBits`): handled in the next round. A bit that is
    /// already set stays set once; the round that takes it clears it.
    pub(crate) fn signal(&mut self, bit: E) {
        if !self.bits.contains(&bit) {
            self.bits.push(bit);
        }
    }

    /// The task resumes at `until` (it called `vTaskDelay`); the rest of the batch waits.
    pub(crate) fn block(&mut self, until: SimTime, continuation: T) {
        debug_assert!(self.blocked.is_none());
        self.blocked = Some((until, continuation));
    }

    /// The next step of the main loop at `now`.
    pub(crate) fn next(&mut self, now: SimTime) -> Next<T, E> {
        if let Some((until, _)) = &self.blocked {
            if *until > now {
                return Next::BusyUntil(*until);
            }
            let (_, task) = self.blocked.take().expect("checked above");
            return Next::Run(task);
        }
        loop {
            if let Some(task) = self.batch.pop_front() {
                return Next::Run(task);
            }
            if let Some(bit) = self.round.pop_front() {
                return Next::Event(bit);
            }
            if std::mem::take(&mut self.round_schedules) {
                std::mem::swap(&mut self.queue, &mut self.batch);
                if !self.batch.is_empty() {
                    return Next::BatchTaken(self.batch.len());
                }
            }
            // xEventGroupWaitBits: every set bit at once, cleared.
            if self.bits.is_empty() && !self.schedule_bit {
                return Next::Idle;
            }
            self.bits.sort();
            self.round.extend(self.bits.drain(..));
            self.round_schedules = std::mem::take(&mut self.schedule_bit);
        }
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
            None if !self.is_idle() => Some(now),
            None => None,
        }
    }

    /// Nothing queued, batched, set or blocked.
    pub(crate) fn is_idle(&self) -> bool {
        self.blocked.is_none()
            && self.batch.is_empty()
            && self.round.is_empty()
            && !self.round_schedules
            && self.bits.is_empty()
            && !self.schedule_bit
    }

    /// Every task still pending, in the order it would have run (for `esp_restart`); the set
    /// event bits are cleared (they die with the task that would have read them).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut all: Vec<T> = self.blocked.take().map(|(_, t)| t).into_iter().collect();
        all.extend(self.batch.drain(..));
        self.round.clear();
        self.round_schedules = false;
        self.bits.clear();
        self.schedule_bit = false;
        all.extend(self.queue.drain(..));
        all
    }

    /// Everything still pending, in run order (the blocked continuation first).
    pub(crate) fn pending(&self) -> impl Iterator<Item = Pending<'_, T, E>> {
        self.blocked
            .iter()
            .map(|(_, t)| Pending::Task(t))
            .chain(self.batch.iter().map(Pending::Task))
            .chain(self.round.iter().map(Pending::Event))
            .chain(self.bits.iter().map(Pending::Event))
            .chain(self.queue.iter().map(Pending::Task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Loop = MainLoop<&'static str, &'static str>;

    fn run_all(m: &mut Loop, now: SimTime, on_run: &mut dyn FnMut(&'static str, &mut Loop)) -> Vec<String> {
        let mut log = Vec::new();
        loop {
            match m.next(now) {
                Next::Idle | Next::BusyUntil(_) => return log,
                Next::BatchTaken(n) => log.push(format!("batch {n}")),
                Next::Run(t) => {
                    log.push(t.to_string());
                    on_run(t, m);
                }
                Next::Event(e) => log.push(format!("event {e}")),
            }
        }
    }

    #[test]
    fn work_scheduled_during_a_batch_runs_in_the_next_batch() {
        let mut m: Loop = MainLoop::default();
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
        let mut m: Loop = MainLoop::default();
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
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
        enum Bit {
            StateChanged,
            Drained,
        }
        let mut m: MainLoop<&'static str, Bit> = MainLoop::default();
        m.signal(Bit::StateChanged);
        m.signal(Bit::Drained);
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Event(Bit::StateChanged)));
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Event(Bit::Drained)));
        assert!(
            matches!(m.next(SimTime::ZERO), Next::Event(Bit::StateChanged)),
            "set again after it was taken"
        );
        assert!(m.is_idle());
    }

    #[test]
    fn events_are_handled_after_the_batch_and_before_the_next() {
        let mut m: Loop = MainLoop::default();
        m.schedule("a");
        let log = run_all(&mut m, SimTime::ZERO, &mut |t, m| {
            if t == "a" {
                m.schedule("b");
                m.signal("state changed");
            }
        });
        assert_eq!(log, ["batch 1", "a", "event state changed", "batch 1", "b"]);
    }

    #[test]
    fn drain_returns_everything_in_run_order() {
        let mut m: Loop = MainLoop::default();
        m.schedule("a");
        m.schedule("b");
        let _ = m.next(SimTime::ZERO);
        let _ = m.next(SimTime::ZERO);
        m.block(SimTime::from_millis(5), "a-cont");
        m.schedule("c");
        m.signal("state changed");
        assert_eq!(m.drain(), ["a-cont", "b", "c"], "tasks in run order; bits cleared");
        assert!(m.is_idle());
    }

    #[test]
    fn a_round_handles_its_bits_in_the_firmwares_order_then_its_batch() {
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
        enum Bit {
            StateChanged,
            ToggleChat,
            StopListening,
        }
        let mut m: MainLoop<&'static str, Bit> = MainLoop::default();
        m.schedule("a");
        m.signal(Bit::StopListening);
        m.signal(Bit::ToggleChat);
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Event(Bit::StateChanged)));
        assert!(matches!(m.next(SimTime::ZERO), Next::Event(Bit::ToggleChat)));
        m.schedule("scheduled by the toggle");
        m.signal(Bit::StateChanged);
        assert!(matches!(m.next(SimTime::ZERO), Next::Event(Bit::StopListening)));
        assert!(
            matches!(m.next(SimTime::ZERO), Next::BatchTaken(2)),
            "SCHEDULE takes what the round's handlers scheduled too"
        );
        assert!(matches!(m.next(SimTime::ZERO), Next::Run("a")));
        assert!(matches!(m.next(SimTime::ZERO), Next::Run("scheduled by the toggle")));
        assert!(
            matches!(m.next(SimTime::ZERO), Next::Event(Bit::StateChanged)),
            "a bit set during the round waits for the next one, after the batch"
        );
        assert!(matches!(m.next(SimTime::ZERO), Next::Idle));
        assert!(m.is_idle());
    }

    #[test]
    fn a_round_without_schedule_leaves_new_tasks_to_the_next_round() {
        let mut m: Loop = MainLoop::default();
        m.signal("toggle chat");
        let log = run_all(&mut m, SimTime::ZERO, &mut |_, _| {});
        assert_eq!(log, ["event toggle chat"]);
        m.signal("toggle chat");
        assert!(matches!(m.next(SimTime::ZERO), Next::Event("toggle chat")));
        m.schedule("open channel");
        m.signal("state changed");
        assert!(
            matches!(m.next(SimTime::ZERO), Next::Event("state changed")),
            "next round: its bits first"
        );
        assert!(matches!(m.next(SimTime::ZERO), Next::BatchTaken(1)));
        assert!(matches!(m.next(SimTime::ZERO), Next::Run("open channel")));
    }
}
