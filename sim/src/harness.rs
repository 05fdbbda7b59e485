//! The owner of virtual time for offline runs (quinn-proto's test harness, turmoil's `Sim`):
//! it powers the device, delivers payloads, and jumps the clock straight to the next deadline.
//! The conformance replay (`replay.rs`) runs on it. Knows nothing about the wall clock.

use crate::device::Input;
use crate::device::{Device, Output, Receipt, Sent};
use crate::time::{SimDuration, SimTime};
use crate::voice::speak::{Agenda, Said};

/// How long `run_until_idle` may advance virtual time before it gives up (a device that never
/// goes idle is reported, never looped on forever).
pub const IDLE_HORIZON: SimDuration = SimDuration::from_secs(24 * 3600);

/// A device plus the clock, and a speaking backend on the direct link.
pub struct Harness {
    /// The device under test; drive it directly for anything the harness lacks.
    pub device: Device,
    /// What the backend still has to say (`tts` messages and Opus packets with their times);
    /// delivered as virtual time passes through the harness. Like xiaozhi-esp32-server, the
    /// harness answers a device `abort` at once: queued speech dropped, `tts stop` sent.
    pub agenda: Agenda,
    held: Vec<Output>,
    agenda_boot: u32,
}

/// The device did not go idle within [`IDLE_HORIZON`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the device was still busy after {0} of virtual time")]
pub struct NeverIdle(pub SimDuration);

impl Harness {
    /// Wraps `device`; the clock is the device's.
    pub fn new(device: Device) -> Self {
        Harness {
            device,
            agenda: Agenda::new("direct"),
            held: Vec::new(),
            agenda_boot: 0,
        }
    }

    /// Takes the device's outputs into the harness, answering an `abort` as the backend does.
    fn pump(&mut self) {
        while let Some(o) = self.device.poll_output() {
            if let Output::Control {
                sent: Sent::Abort(_),
                at,
                ..
            } = &o
                && (!self.agenda.is_empty() || self.agenda.in_turn())
            {
                self.agenda.abort(*at);
            }
            self.held.push(o);
        }
    }

    /// Runs to `t`, delivering what the backend says on the way (at its own times).
    pub fn run_until(&mut self, t: SimTime) {
        while let Some(next) = self.agenda.next_at().filter(|n| *n <= t) {
            self.device.run_before(next.max(self.now()));
            self.pump();
            if self.agenda_boot == 0 {
                // First speech of this harness: it belongs to the boot that is running now.
                self.agenda_boot = self.device.boots();
            }
            if self.device.boots() != self.agenda_boot {
                // The device restarted: its session with the backend is gone, and so is the
                // backend's turn (what was still queued is never sent).
                self.agenda_boot = self.device.boots();
                self.agenda = Agenda::new("direct");
                break;
            }
            let Some((at, said)) = self.agenda.pop_due(next) else {
                continue;
            };
            let at = at.max(self.now());
            match said {
                Said::Json(text) => {
                    self.device.handle(at, Input::Json(text.as_bytes()));
                }
                Said::Audio(packet) => {
                    self.device.handle(at, Input::Audio(&packet));
                }
            }
        }
        self.device.run_until(t);
        self.pump();
        if self.agenda.is_empty() {
            self.agenda_boot = self.device.boots();
        }
    }

    /// The device's clock.
    pub fn now(&self) -> SimTime {
        self.device.now()
    }

    /// Powers the board on at the current time.
    pub fn power_on(&mut self) {
        let now = self.now();
        self.device.power_on(now);
    }

    /// Delivers one payload on the receive task at the current time (the main task does not run).
    pub fn deliver(&mut self, payload: &[u8]) -> Receipt {
        let now = self.now();
        // An MCP payload always has a receipt; none would mean nobody received it.
        let read = self.device.handle(now, Input::Mcp(payload));
        read.receipt.unwrap_or(Receipt::NotRunning)
    }

    /// Lets virtual time pass.
    pub fn sleep(&mut self, d: SimDuration) {
        let t = self.now() + d;
        self.run_until(t);
    }

    /// Runs the device until its main task has nothing queued or blocked (timers keep firing as
    /// time passes, but do not keep it busy).
    pub fn run_until_idle(&mut self) -> Result<(), NeverIdle> {
        let start = self.now();
        // Work queued at this very instant runs first.
        self.run_until(start);
        while self.device.is_busy() {
            let Some(t) = self.device.poll_timeout() else { break };
            if t.saturating_since(start) > IDLE_HORIZON {
                return Err(NeverIdle(IDLE_HORIZON));
            }
            self.run_until(t);
        }
        Ok(())
    }

    /// Every payload transmitted since the last call.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.pump();
        std::mem::take(&mut self.held)
    }

    /// Hands each MCP payload transmitted since the last call to `f`, oldest first, without
    /// collecting them (other outputs are discarded).
    pub fn drain_mcp_payloads(&mut self, mut f: impl FnMut(&[u8])) {
        self.pump();
        for output in self.held.drain(..) {
            if let Output::Mcp { payload, .. } = output {
                f(&payload);
            }
        }
    }

    /// The MCP payloads transmitted since the last call (other outputs are discarded).
    pub fn take_mcp_payloads(&mut self) -> Vec<Vec<u8>> {
        self.take_outputs()
            .into_iter()
            .filter_map(|o| match o {
                Output::Mcp { payload, .. } => Some(payload),
                _ => None,
            })
            .collect()
    }
}

/// Lead-in excluded from a probe's measurement window: the DMA ring and playback queue
/// (60–120 ms), the MAX98357A start-up (7.5 ms) and the NS4150B start-up (120 ms)
/// (docs/reference/acoustics.md §6 "Guards").
pub const PROBE_GUARD: SimDuration = SimDuration::from_millis(150);

/// A sound played through the device and what the listener measured.
#[derive(Clone, Debug)]
pub struct Listening {
    /// When the sound actually played (it queues behind what already plays).
    pub played: (SimTime, SimTime),
    /// The measured window (after the guard).
    pub window: (SimTime, SimTime),
    /// What the listener measured in `window`.
    pub measurement: crate::audio::measure::Measurement,
    /// The rendered signals, when asked for.
    pub signals: Option<crate::audio::render::Signals>,
}

impl Harness {
    /// Plays `source` for `duration` through the device, runs the device past its end, and
    /// measures the played window minus [`PROBE_GUARD`]. `None` when the device is not running.
    pub fn play_and_measure(
        &mut self,
        source: crate::audio::source::Source,
        duration: SimDuration,
        signals: bool,
    ) -> Option<Listening> {
        let now = self.now();
        let (start, end) = self.device.play(now, source, duration)?;
        self.run_until(end);
        let from = (start + PROBE_GUARD).min(end);
        let (measurement, signals) = self.device.render(from, end, signals);
        Some(Listening {
            played: (start, end),
            window: (from, end),
            measurement,
            signals,
        })
    }

    /// Measures what the listener hears during `[now, now + d)` while the device runs.
    pub fn listen(&mut self, d: SimDuration, signals: bool) -> Listening {
        let from = self.now();
        let to = from + d;
        self.device.measure_window(from, to);
        self.run_until(to);
        let (measurement, signals) = self.device.render(from, to, signals);
        Listening {
            played: (from, to),
            window: (from, to),
            measurement,
            signals,
        }
    }
}
