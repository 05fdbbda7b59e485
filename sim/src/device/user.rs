//! What the user does to a board: its buttons (as the button component polls them), the
//! wake word, speaking into the microphone, typing (as py-xiaozhi does), and the application
//! calls those end in (`ToggleChatState`, `StartListening`, `StopListening`); and what the
//! user hears of the speech it was sent. The second file of `impl Device`.

use std::sync::Arc;

use crate::audio::measure::Measurement;
use crate::audio::render::{ChainSetup, Signals};
use crate::device::button::NoSuchButton;
use crate::device::mic::Utterance;
use crate::device::platform::Fired;
use crate::device::{AsPlayed, Device, audio, heard, task};
use crate::time::{SimDuration, SimTime};
use crate::voice::log::SpeechLog;

/// What the user does.
impl Device {
    /// `ToggleChatState()` now, as a BOOT click's callback calls it (without the button's own
    /// timing: [`Device::button`] is the button): sets `MAIN_EVENT_TOGGLE_CHAT`.
    pub fn toggle_chat(&mut self, now: SimTime) {
        self.signal(now, task::EventBit::ToggleChat);
    }

    /// The user presses (`pressed`) or lets go of the button named `name` at `now`; the board's
    /// callbacks fire as the button component finds its gestures (docs/boards.md, "Buttons").
    /// `Err` when the board has no such button. A press while the board is off is still held
    /// when it boots.
    pub fn button(&mut self, now: SimTime, name: &str, pressed: bool) -> Result<(), NoSuchButton> {
        let index = self
            .platform
            .spec
            .buttons
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| NoSuchButton(name.to_string()))?;
        self.run_until(now);
        self.platform.held[index] = pressed;
        if let Some(app) = self.app.as_deref_mut() {
            app.buttons.set(self.platform.now, index, pressed);
        }
        Ok(())
    }

    /// Every button gesture found so far and what its callback did (all boots).
    pub fn gestures(&self) -> &[Fired] {
        &self.platform.gestures
    }

    /// Whether the user holds the button named `name` down (for the crate's tests).
    #[cfg(feature = "test-api")]
    pub fn button_held(&self, name: &str) -> bool {
        let spec = &self.platform.spec;
        spec.buttons
            .iter()
            .position(|b| b.name == name)
            .is_some_and(|i| self.platform.held[i])
    }

    /// A volume button press (button callbacks run in the esp_timer context, not the main task).
    pub fn press_volume(&mut self, now: SimTime, delta: i32, long: bool) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.volume_button(&mut self.platform, delta, long);
        }
    }

    /// Typed input as py-xiaozhi sends it: `listen detect` with the text (the firmware sends
    /// `detect` only for its wake word; this is **not** firmware behaviour, and the trace says so).
    pub fn type_text(&mut self, now: SimTime, text: &str) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.typed_text(&mut self.platform, text);
        }
    }

    /// The user says the wake word `word` (silence in the microphone around it): detected if
    /// detection runs (`MAIN_EVENT_WAKE_WORD_DETECTED`).
    pub fn wake_word(&mut self, now: SimTime, word: &str) {
        self.schedule(now, task::Task::Voice(task::VoiceTask::WakeWord(word.to_string())));
    }

    /// What an eavesdropper on this device's open UDP audio channel could send its server from
    /// another address: a datagram with the channel's ssrc and next sequence number and an
    /// unencrypted payload of `payload`, and the server's address (`None` without an open MQTT +
    /// UDP channel). The device sends nothing; `connect --script`'s `forge` sends it from a
    /// socket of its own. A gateway that re-points its downlink at every datagram with the right
    /// ssrc (xiaozhi-mqtt-gateway does) then sends the rest of the reply there.
    pub fn forged_datagram(&mut self, now: SimTime, payload: &[u8]) -> Option<(String, u16, Vec<u8>)> {
        self.run_until(now);
        let app = self.app.as_deref_mut()?;
        let (_, m) = app.protocol.as_mut()?.mqtt_mut()?;
        m.forgery(payload)
    }

    /// The user says the wake word `word` as `samples_16k`: the end of the wake-word cache the
    /// device sends before `listen detect` when it wakes from Idle.
    pub fn wake_word_saying(&mut self, now: SimTime, word: &str, samples_16k: &[i16]) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.mic.say_wake_word(samples_16k.into());
        }
        self.wake_word(now, word);
    }

    /// The user speaks into the microphone from now: 16 kHz mono samples, captured 60 ms at a
    /// time while the device listens (silence before and after). At most ten minutes wait in
    /// the microphone: the rest of a longer recording is not said.
    pub fn say(&mut self, now: SimTime, samples_16k: &[i16]) {
        self.say_shared(now, samples_16k.into());
    }

    /// [`Device::say`] with samples many devices share (a fleet's utterance is held once).
    pub fn say_shared(&mut self, now: SimTime, samples_16k: Arc<[i16]>) {
        self.say_utterance(now, Utterance::whole(samples_16k));
    }

    /// [`Device::say`] with a stretch of a shared clip at a gain (a fleet device's own
    /// variation of the fleet's utterance).
    pub fn say_utterance(&mut self, now: SimTime, said: Utterance) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.mic.say(said);
        }
    }

    /// Forgets what the user said that the microphone has not captured yet.
    pub fn mic_clear(&mut self) {
        if let Some(app) = self.app.as_deref_mut() {
            app.mic.forget();
        }
    }

    /// Samples the user has said that the microphone has not captured yet.
    pub fn mic_pending(&self) -> usize {
        self.app.as_deref().map_or(0, |a| a.mic.pending())
    }

    /// Runs to `now`, then sets an event bit of the main loop (nothing when the board is off).
    fn signal(&mut self, now: SimTime, bit: task::EventBit) {
        self.run_until(now);
        if let Some(app) = self.app.as_deref_mut() {
            app.main.signal(bit);
        }
    }

    /// What became of the speech this device was sent (all boots).
    pub fn speech_log(&self) -> &SpeechLog {
        &self.platform.speech
    }

    /// Measures speech windows while they play — each reply's, and with [`AsPlayed::All`] each
    /// sentence's too — and lets go of each decoded frame once no window still to be measured
    /// reads it (a fleet's devices: a turn's PCM is not kept). [`Device::heard`] gives the same
    /// figures to the bit for the windows measured: with this on, [`Device::render`] of a
    /// window that overlaps speech already played, or `heard` with signals, no longer sees that
    /// speech (docs/fleet.md, "Measured as it plays").
    pub fn measure_as_played(&mut self, which: AsPlayed) {
        self.heard = match which {
            AsPlayed::Off => None,
            AsPlayed::Replies => Some(Box::new(heard::HeardMeters::new(false))),
            AsPlayed::All => Some(Box::new(heard::HeardMeters::new(true))),
        };
    }

    /// Announces a window to [`Device::render`] later, `from` now or later: a device that measures
    /// as it plays keeps what the window reads and measures it as it plays; others ignore it.
    pub fn measure_window(&mut self, from: SimTime, to: SimTime) {
        if let Some(h) = self.heard.as_deref_mut() {
            h.announce(from, to);
        }
    }

    /// The board's chain in the current world, for rendering.
    pub fn chain_setup(&self) -> ChainSetup {
        audio::chain_setup(&self.platform.spec.audio, &self.platform.world.room)
    }

    /// Renders `[from, to)` of the audio evidence (run the device past `to` first). A device
    /// that measures as it plays ([`Device::measure_as_played`]) gives the figures of a window
    /// announced with [`Device::measure_window`].
    pub fn render(&self, from: SimTime, to: SimTime, signals: bool) -> (Measurement, Option<Signals>) {
        if let Some(h) = self.heard.as_deref().filter(|_| !signals)
            && let Some(m) = h.rendered(from, to, &self.platform.audio, &self.chain_setup())
        {
            return (m, None);
        }
        crate::audio::render::render(&self.platform.audio, &self.chain_setup(), from, to, signals)
    }

    /// The start of a speech window a listener's measurement leaves out: the decoder and
    /// resampler settling and the amplifier starting. One value for every report of speech (the
    /// scenario runner's `speak`, `connect --report`, the fleet's loudness).
    pub const HEARD_GUARD: SimDuration = SimDuration::from_millis(300);

    /// What the listener heard of a speech window (a session's or a sentence's): the window
    /// after [`Device::HEARD_GUARD`], rendered (run the device past its end first).
    pub fn heard(&self, window: &crate::voice::log::Window, signals: bool) -> (Measurement, Option<Signals>) {
        if let Some(h) = self.heard.as_deref().filter(|_| !signals)
            && let Some(m) = h.heard(window, &self.platform.audio, &self.chain_setup())
        {
            return (m, None);
        }
        self.render((window.start + Self::HEARD_GUARD).min(window.end), window.end, signals)
    }
}
