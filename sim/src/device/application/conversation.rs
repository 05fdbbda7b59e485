//! The application's voice interaction (`main/application.cc`: `HandleToggleChatEvent`,
//! `ContinueOpenAudioChannel`, `OnIncomingJson`, `HandleStateChangedEvent`,
//! `StartListeningAudio`, `AbortSpeaking`, `HandleStartListeningEvent` /
//! `HandleStopListeningEvent`, `HandleWakeWordDetectedEvent`, the `tts` lambdas, the
//! playback-drained and send-audio events; docs/reference/voice.md §3–§4): the second file of
//! `Application`'s impl.
//!
//! Each handler reads the state as it is when it runs and calls the subsystems with the pieces
//! they need: the protocol builds and sends the messages, [`Playback`] decodes and plays,
//! [`Microphone`](crate::device::mic::Microphone) captures and
//! queues.

use crate::audio::source::Prompt;
use crate::cjson::Item;
use crate::device::application::Application;
use crate::device::listening::{AbortReason, ListeningMode};
use crate::device::platform::{Platform, Sent};
use crate::device::playback::{AfterStop, Playback};
use crate::device::protocol::base::{DEFAULT_SERVER_FRAME_DURATION, DEFAULT_SERVER_SAMPLE_RATE, LANG_ERROR};
use crate::device::protocol::mqtt::{CONNECT_TIMEOUT, Waiter};
use crate::device::protocol::websocket::HelloCrash;
use crate::device::protocol::{OpenNext, OpenStage};
use crate::device::protocol::{Protocol, ProtocolBase};
use crate::device::task::{EventBit, Task, TaskEnd, VoiceTask};
use crate::firmware::state::DeviceState;
use crate::hw::screen::{self, ScreenCall};
use crate::time::SimTime;
use crate::trace::{Event, LogLevel};
use crate::voice::codec::MIC_RATE;
use crate::voice::log::Drop;

impl Application {
    /// The voice interaction's scheduled lambdas.
    pub(super) fn run_voice_task(&mut self, platform: &mut Platform, task: VoiceTask) -> TaskEnd {
        match task {
            VoiceTask::TtsStart => self.tts_start(platform),
            VoiceTask::TtsStop => return self.tts_stop(platform),
            VoiceTask::ListenAfterDrain => self.start_listening_audio(platform),
            VoiceTask::WakeWord(word) => self.wake_word(platform, &word),
        }
        TaskEnd::Done
    }

    /// An event bit the main loop took (a handler may block the main task, as 2.2.2–2.3.0's
    /// state handler does while playback drains).
    pub(crate) fn run_event(&mut self, platform: &mut Platform, bit: EventBit) -> TaskEnd {
        match bit {
            EventBit::Error => self.on_error(platform),
            EventBit::StateChanged => return self.on_state_changed(platform),
            EventBit::PlaybackDrained => self.on_playback_drained(platform),
            EventBit::ToggleChat => self.toggle_chat(platform),
            EventBit::StartListening => self.start_listening(platform),
            EventBit::StopListening => self.stop_listening(platform),
            EventBit::SendAudio => self.send_audio(platform),
        }
        TaskEnd::Done
    }

    /// `CloseAudioChannel()`: the WebSocket object goes (the peer sees TCP close, no close
    /// frame), or the UDP socket, with a goodbye published.
    pub(crate) fn drop_socket(&mut self, platform: &mut Platform, why: &'static str) {
        if let Some(p) = self.protocol.as_mut() {
            p.close_audio_channel(platform, why);
        }
        self.raise_error();
    }

    /// `IsAudioChannelOpened()`.
    pub(crate) fn channel_open(&self, now: SimTime) -> bool {
        self.protocol.as_ref().is_some_and(|p| p.is_audio_channel_opened(now))
    }

    /// The channel has to be opened before use (WebSocket or MQTT + UDP, and it is not open).
    fn needs_open(&self, now: SimTime) -> bool {
        !self.channel_open(now) && self.protocol.as_ref().is_some_and(Protocol::has_channel)
    }

    /// A message the protocol's base builds, sent (nothing without a protocol object).
    fn send_message(&mut self, platform: &mut Platform, sent: Sent, build: impl FnOnce(&ProtocolBase) -> Vec<u8>) {
        if let Some(p) = self.protocol.as_mut() {
            let text = build(&p.base);
            p.send_text(platform, sent, text);
        }
        self.raise_error();
    }

    /// `SetError` called back `on_network_error_`: `MAIN_EVENT_ERROR` is set.
    pub(crate) fn raise_error(&mut self) {
        if self.protocol.as_ref().is_some_and(|p| p.base.error_message.is_some()) {
            self.main.signal(EventBit::Error);
        }
    }

    /// `MAIN_EVENT_ERROR` (`application.cc:182-186`): idle, and the alert of the last error.
    fn on_error(&mut self, platform: &mut Platform) {
        self.set_state(platform, DeviceState::Idle);
        if let Some(message) = self.protocol.as_mut().and_then(|p| p.base.error_message.take()) {
            self.alert(platform, LANG_ERROR, message, "cancel", Prompt::Exclamation);
        }
    }

    /// `HandleToggleChatEvent`.
    fn toggle_chat(&mut self, platform: &mut Platform) {
        match self.state {
            DeviceState::Activating => {
                self.set_state(platform, DeviceState::Idle);
                return;
            }
            DeviceState::WifiConfiguring | DeviceState::AudioTesting => return,
            _ => {}
        }
        if self.protocol.is_none() {
            platform.log(LogLevel::Error, "Application", || "Protocol not initialized");
            return;
        }
        match self.state {
            DeviceState::Idle => self.listen_from_idle(platform, ListeningMode::for_board(&platform.spec.audio)),
            DeviceState::Listening => {
                // CloseAudioChannel: the socket goes; its disconnect callback schedules idle.
                self.drop_socket(platform, "user closed the channel");
                self.main.schedule(Task::SetState(DeviceState::Idle));
            }
            DeviceState::Speaking => self.abort_speaking(platform, AbortReason::None),
            _ => {}
        }
    }

    /// From idle: open the channel first (connecting; listening in `mode` once it is open), or
    /// listen in `mode` at once when no channel has to be opened.
    fn listen_from_idle(&mut self, platform: &mut Platform, mode: ListeningMode) {
        if self.needs_open(platform.now) {
            self.set_state(platform, DeviceState::Connecting);
            self.main.schedule(Task::OpenChannel {
                mode,
                stage: OpenStage::Begin,
                wake: None,
            });
        } else {
            self.set_listening_mode(platform, mode);
        }
    }

    /// `ContinueOpenAudioChannel` → `OpenAudioChannel`, which blocks the main task while it
    /// connects (esp-ml307: up to 10 s) and while it waits for the server hello (10 s); the
    /// protocol runs each step for its transport.
    pub(super) fn open_channel(
        &mut self,
        platform: &mut Platform,
        mode: ListeningMode,
        stage: OpenStage,
        wake: Option<String>,
    ) -> TaskEnd {
        if stage == OpenStage::Begin {
            if self.state != DeviceState::Connecting {
                return TaskEnd::Done;
            }
            if self.channel_open(platform.now) {
                self.after_open(platform, mode, wake);
                return TaskEnd::Done;
            }
        }
        let uuid = self.uuid.clone();
        let Some(protocol) = self.protocol.as_mut() else {
            return TaskEnd::Done;
        };
        match protocol.open_step(stage, platform, &uuid) {
            OpenNext::Wait(stage) => TaskEnd::Block(platform.delay(10_000), Task::OpenChannel { mode, stage, wake }),
            OpenNext::Opened => {
                // OnAudioChannelOpened (`application.cc:524-531`).
                let server = self.protocol.as_ref().map_or(0, |p| p.base.server_sample_rate);
                let out = platform.spec.audio.output_sample_rate;
                if i64::from(server) != i64::from(out) {
                    platform.log(LogLevel::Warn, "Application", || {
                        format!(
                            "Server sample rate {server} does not match device output sample rate {out}, resampling may cause distortion"
                        )
                    });
                }
                if self.state == DeviceState::Connecting {
                    self.after_open(platform, mode, wake);
                }
                TaskEnd::Done
            }
            OpenNext::Failed => {
                // Idle at once (`application.cc:753-758`); a SetError's alert comes with the
                // MAIN_EVENT_ERROR of the next round.
                self.set_state(platform, DeviceState::Idle);
                self.raise_error();
                TaskEnd::Done
            }
            OpenNext::Nothing => TaskEnd::Done,
            OpenNext::Abort(what) => {
                platform.emit(|| Event::Panicked {
                    reason: format!("{what} (the MQTT endpoint's port)"),
                });
                TaskEnd::Restart(crate::trace::BootReason::Panic)
            }
        }
    }

    /// The channel is open: listening in `mode`, or the wake word's `listen detect` first.
    fn after_open(&mut self, platform: &mut Platform, mode: ListeningMode, wake: Option<String>) {
        match wake {
            Some(word) => self.continue_wake_word(platform, &word),
            None => self.set_listening_mode(platform, mode),
        }
    }

    /// The driver finished (or failed) the TCP connect and handshake.
    pub(crate) fn ws_open_result(&mut self, platform: &mut Platform, ok: bool) {
        if self.protocol.as_mut().is_some_and(|p| p.connect_result(ok)) {
            self.main.wake(platform.now);
        }
    }

    /// The peer closed or the TCP connection broke: `on_audio_channel_closed` schedules idle.
    ///
    /// A close during the connect ends esp-ml307's `Connect()` early (it fails). A close while
    /// `OpenAudioChannel` waits for the server hello does not: that wait is an event-group wait
    /// on the hello bit alone, so the device reports `Failed to receive server hello` only when
    /// the full 10 s have passed (a server that refuses the token with `认证失败` and closes).
    pub(crate) fn ws_closed(&mut self, platform: &mut Platform) {
        let Some(was_connecting) = self.protocol.as_mut().and_then(|p| p.peer_closed(platform)) else {
            return;
        };
        self.main.schedule(Task::SetState(DeviceState::Idle));
        if was_connecting {
            self.main.wake(platform.now);
        }
    }

    /// The driver's CONNACK (`Some(accepted)`) or a broken MQTT connection (`None`): whoever
    /// waits in `Connect()` wakes.
    pub(crate) fn mqtt_link(&mut self, platform: &mut Platform, connack: Option<bool>) {
        let Some((_, m)) = self.protocol.as_mut().and_then(Protocol::mqtt_mut) else {
            return;
        };
        let waiter = match connack {
            Some(accepted) => m.connack(&mut platform.wire_io(), accepted),
            None => m.closed(&mut platform.wire_io()),
        };
        match waiter {
            Waiter::MainTask => self.main.wake(platform.now),
            Waiter::Activation(_) => self.activation_done(platform),
            Waiter::None => {}
        }
    }

    /// The reconnect timer's `StartMqttClient(false)` on the main task, and its `Connect()`.
    pub(super) fn restart_mqtt(&mut self, platform: &mut Platform, waiting: bool) -> TaskEnd {
        let Some(p) = self.protocol.as_mut() else {
            return TaskEnd::Done;
        };
        if waiting {
            p.finish_restart(platform);
            self.raise_error();
            return TaskEnd::Done;
        }
        match p.restart_client(platform) {
            Ok(true) => TaskEnd::Block(CONNECT_TIMEOUT, Task::RestartMqtt { waiting: true }),
            Ok(false) => {
                self.raise_error();
                TaskEnd::Done
            }
            Err(what) => {
                platform.emit(|| Event::Panicked {
                    reason: format!("{what} (the MQTT endpoint's port)"),
                });
                TaskEnd::Restart(crate::trace::BootReason::Panic)
            }
        }
    }

    /// A server `goodbye` for this session, on the main task: `CloseAudioChannel(false)`, and
    /// `on_audio_channel_closed` schedules idle.
    pub(super) fn server_goodbye(&mut self, platform: &mut Platform) {
        if let Some((base, m)) = self.protocol.as_mut().and_then(Protocol::mqtt_mut) {
            m.close_channel(base, &mut platform.wire_io(), false);
            self.main.schedule(Task::SetState(DeviceState::Idle));
        }
    }

    /// The server hello. `Err` is the firmware's crash on a missing or non-string `transport`.
    pub(crate) fn server_hello(&mut self, platform: &mut Platform, root: Item<'_>) -> Result<(), HelloCrash> {
        let Some(protocol) = self.protocol.as_mut() else {
            return Ok(());
        };
        if protocol.server_hello(platform, root)? {
            self.main.wake(platform.now);
        }
        Ok(())
    }

    /// `HandleStateChangedEvent` (reads the state as it is now).
    fn on_state_changed(&mut self, platform: &mut Platform) -> TaskEnd {
        self.listening.pending_start = false;
        let now = platform.now;
        self.state_on_screen(platform);
        match self.state {
            DeviceState::Unknown | DeviceState::Idle => {
                // EnableVoiceProcessing(false), EnableWakeWordDetection(true).
                self.mic.set_processing(false, now);
                self.enable_wake_word_detection(platform, true);
            }
            DeviceState::Listening if self.listening.play_popup || !self.mic.is_processing() => {
                let auto = self.listening.mode == ListeningMode::Auto;
                // What the speech still queued meets depends on the version (§7).
                match Playback::after_stop(&self.audio, now, platform.firmware.stop_tail, auto) {
                    AfterStop::Defer => {
                        self.listening.pending_start = true;
                        platform.emit(|| Event::ListenDeferred);
                        self.playback.arm_drain_check(&self.audio, now);
                    }
                    AfterStop::Block(wait) => {
                        platform.emit(|| Event::PlaybackDrainAwaited);
                        return TaskEnd::Block(wait, Task::Voice(VoiceTask::ListenAfterDrain));
                    }
                    AfterStop::ListenNow => self.start_listening_audio(platform),
                }
            }
            DeviceState::Listening => self.configure_wake_word_for_listening(platform),
            DeviceState::Speaking => {
                if self.listening.mode != ListeningMode::Realtime {
                    self.mic.set_processing(false, now);
                    // Only the AFE wake word is detected while speaking.
                    let afe = is_afe_wake_word(platform);
                    self.enable_wake_word_detection(platform, afe);
                }
                self.reset_decoder(platform);
            }
            DeviceState::WifiConfiguring => {
                self.mic.set_processing(false, now);
                self.enable_wake_word_detection(platform, false);
            }
            _ => {}
        }
        TaskEnd::Done
    }

    /// `StartListeningAudio`: `listen start`, voice processing on (which resets the decoder),
    /// the popup if one is owed.
    fn start_listening_audio(&mut self, platform: &mut Platform) {
        if self.state != DeviceState::Listening {
            return;
        }
        let mode = self.listening.mode;
        self.send_message(platform, Sent::ListenStart(mode), |b| b.start_listening(mode));
        let now = platform.now;
        self.mic.set_processing(true, now);
        self.audio.read_input(&mut platform.audio, now, self.volume);
        self.reset_decoder(platform);
        self.configure_wake_word_for_listening(platform);
        if self.listening.play_popup {
            self.listening.play_popup = false;
            self.play_prompt(platform, Prompt::Popup);
        }
    }

    /// What `HandleStateChangedEvent` tells the display first (`application.cc:918-952`).
    fn state_on_screen(&mut self, platform: &mut Platform) {
        let status = |s: &str| ScreenCall::SetStatus(s.to_string());
        let neutral = || ScreenCall::SetEmotion("neutral".into());
        let calls = match self.state {
            DeviceState::Unknown | DeviceState::Idle => {
                vec![status(screen::STANDBY), ScreenCall::ClearChatMessages, neutral()]
            }
            DeviceState::Connecting => vec![
                status(screen::CONNECTING),
                neutral(),
                ScreenCall::SetChatMessage {
                    role: "system".into(),
                    content: String::new(),
                },
            ],
            DeviceState::Listening => vec![status(screen::LISTENING), neutral()],
            DeviceState::Speaking => vec![status(screen::SPEAKING)],
            _ => Vec::new(),
        };
        for c in calls {
            self.show(platform, c);
        }
    }

    /// `Alert(status, message, emotion, sound)` (`application.cc:679-689`): the warning line,
    /// the display's status, emotion and system message, and the sound through the audio chain.
    pub(crate) fn alert(&mut self, platform: &mut Platform, status: &str, message: &str, emotion: &str, sound: Prompt) {
        platform.log(LogLevel::Warn, "Application", || {
            format!("Alert [{emotion}] {status}: {message}")
        });
        self.show(platform, ScreenCall::SetStatus(status.to_string()));
        self.show(platform, ScreenCall::SetEmotion(emotion.to_string()));
        self.show(
            platform,
            ScreenCall::SetChatMessage {
                role: "system".into(),
                content: message.to_string(),
            },
        );
        self.play_prompt(platform, sound);
    }

    /// `EnableWakeWordDetection(enable)`: only a board with a wake word detects one
    /// (`audio_service.cc:631-651`, `HasWakeWord`).
    fn enable_wake_word_detection(&mut self, platform: &mut Platform, enable: bool) {
        let on = enable && platform.spec.audio.wake_word;
        if on && !self.listening.wake_detection {
            self.listening.wake_since = platform.now;
        }
        self.listening.wake_detection = on;
        if on {
            // The input task reads again (and powers the input back on if it was off).
            self.audio.read_input(&mut platform.audio, platform.now, self.volume);
        }
    }

    /// `ConfigureWakeWordForListening` (`application.cc:991-998`): off, unless the build
    /// detects the wake word while listening (`CONFIG_WAKE_WORD_DETECTION_IN_LISTENING`), and
    /// then only with the AFE wake word.
    fn configure_wake_word_for_listening(&mut self, platform: &mut Platform) {
        let on = platform.spec.audio.wake_word_in_listening && is_afe_wake_word(platform);
        self.enable_wake_word_detection(platform, on);
    }

    /// `SetListeningMode(mode)`.
    fn set_listening_mode(&mut self, platform: &mut Platform, mode: ListeningMode) {
        self.listening.mode = mode;
        self.set_state(platform, DeviceState::Listening);
    }

    /// `AbortSpeaking(reason)`.
    fn abort_speaking(&mut self, platform: &mut Platform, reason: AbortReason) {
        platform.log(LogLevel::Info, "Application", || "Abort speaking");
        self.listening.aborted = true;
        self.send_message(platform, Sent::Abort(reason), |b| b.abort_speaking(reason));
        if platform.firmware.abort_silences {
            // 1.7.x: every decode from now returns without output (v1.7.5 application.cc:832-834).
            self.reset_decoder(platform);
        }
    }

    /// `HandleStopListeningEvent` (push-to-talk released).
    fn stop_listening(&mut self, platform: &mut Platform) {
        if self.state == DeviceState::Listening {
            self.send_message(platform, Sent::ListenStop, |b| b.stop_listening());
            self.set_state(platform, DeviceState::Idle);
        }
    }

    /// `HandleStartListeningEvent` (push-to-talk pressed).
    fn start_listening(&mut self, platform: &mut Platform) {
        match self.state {
            DeviceState::Activating => {
                self.set_state(platform, DeviceState::Idle);
            }
            DeviceState::Idle => {
                if self.protocol.is_none() {
                    platform.log(LogLevel::Error, "Application", || "Protocol not initialized");
                } else {
                    self.listen_from_idle(platform, ListeningMode::Manual);
                }
            }
            DeviceState::Speaking => {
                self.abort_speaking(platform, AbortReason::None);
                self.set_listening_mode(platform, ListeningMode::Manual);
            }
            _ => {}
        }
    }

    /// The wake word is said: detected only while detection runs (the detection then stops
    /// itself, `audio_service.cc:101-104`), then `HandleWakeWordDetectedEvent` for `word`
    /// (`application.cc:811-843`; from Idle the wake word's audio precedes `listen detect`).
    fn wake_word(&mut self, platform: &mut Platform, word: &str) {
        // What the user said as the word is this detection's (or nobody's): never a later one's.
        let said = self.mic.take_wake_audio();
        if !std::mem::take(&mut self.listening.wake_detection) {
            let state = self.state;
            platform.emit(|| Event::WakeWordIgnored {
                word: word.to_string(),
                state: state.name(),
                why: match state {
                    DeviceState::Listening => " (WAKE_WORD_DETECTION_IN_LISTENING is n)",
                    DeviceState::Speaking => " (only the AFE wake word is detected while speaking)",
                    _ => "",
                },
            });
            return;
        }
        if self.protocol.is_none() {
            return;
        }
        let state = self.state;
        platform.log(LogLevel::Info, "Application", || {
            format!("Wake word detected: {word} (state: {})", state as i32)
        });
        match state {
            DeviceState::Idle => {
                // BeginWakeWordInvoke: EncodeWakeWord first (`application.cc:847`), with
                // `CONFIG_SEND_WAKE_WORD_DATA` (default y on AFE wake word builds).
                let now = platform.now;
                let cached =
                    now.saturating_since(self.listening.wake_since).as_micros() * u64::from(MIC_RATE) / 1_000_000;
                self.mic.encode_wake_word(platform, cached as usize, said);
                if !self.set_state(platform, DeviceState::Connecting) {
                    // Restored, or the device would never hear a wake word again (`:855`).
                    self.enable_wake_word_detection(platform, true);
                    return;
                }
                if self.needs_open(platform.now) {
                    self.main.schedule(Task::OpenChannel {
                        mode: ListeningMode::for_board(&platform.spec.audio),
                        stage: OpenStage::Begin,
                        wake: Some(word.to_string()),
                    });
                } else {
                    self.continue_wake_word(platform, word);
                }
            }
            // Before 2.2.3: abort while speaking, nothing while listening (v2.2.2 :796-797).
            DeviceState::Speaking if !platform.firmware.wake_word_barge_in => {
                self.abort_speaking(platform, AbortReason::WakeWordDetected);
            }
            DeviceState::Listening if !platform.firmware.wake_word_barge_in => {}
            DeviceState::Speaking | DeviceState::Listening => {
                self.abort_speaking(platform, AbortReason::WakeWordDetected);
                // Clear the send queue so no residue reaches the server.
                self.mic.clear_send_queue();
                if state == DeviceState::Listening {
                    let mode = ListeningMode::for_board(&platform.spec.audio);
                    self.send_message(platform, Sent::ListenStart(mode), |b| b.start_listening(mode));
                    self.reset_decoder(platform);
                    self.play_prompt(platform, Prompt::Popup);
                    // Stopped by the detection itself: on again (`application.cc:833`).
                    self.enable_wake_word_detection(platform, true);
                } else {
                    self.listening.play_popup = true;
                    self.set_listening_mode(platform, ListeningMode::for_board(&platform.spec.audio));
                }
            }
            DeviceState::Activating => {
                self.set_state(platform, DeviceState::Idle);
            }
            _ => {}
        }
    }

    /// `ContinueWakeWordInvoke` once the channel is open: `listen detect`, then listening.
    fn continue_wake_word(&mut self, platform: &mut Platform, word: &str) {
        if self.state != DeviceState::Connecting {
            return;
        }
        platform.log(LogLevel::Info, "Application", || format!("Wake word detected: {word}"));
        // PopWakeWordPacket → SendAudio straight from the main task (`application.cc:892-894`),
        // then the detect (`:896`).
        for p in self.mic.take_wake_packets() {
            if let Some(protocol) = self.protocol.as_mut() {
                protocol.send_audio(platform, &p);
            }
        }
        self.send_message(platform, Sent::ListenDetect(word.into()), |b| {
            b.wake_word_detected(word)
        });
        self.set_listening_mode(platform, ListeningMode::for_board(&platform.spec.audio));
    }

    /// Typed input as py-xiaozhi sends it (not firmware behaviour; the trace says so): from
    /// idle the wake word's path opens the channel and sends the text as `listen detect`;
    /// otherwise the `listen detect` goes out at once.
    pub(crate) fn typed_text(&mut self, platform: &mut Platform, text: &str) {
        platform.emit(|| Event::TypedInput);
        if self.state == DeviceState::Idle {
            self.main.schedule(Task::Voice(VoiceTask::WakeWord(text.to_string())));
            return;
        }
        self.send_message(platform, Sent::ListenDetect(text.into()), |b| b.typed_text(text));
    }

    /// The scheduled lambda of `tts start`.
    fn tts_start(&mut self, platform: &mut Platform) {
        self.listening.aborted = false;
        self.listening.discarding = false;
        if self.set_state(platform, DeviceState::Speaking) && self.state == DeviceState::Speaking {
            platform.speech.speaking(platform.now);
        }
    }

    /// The scheduled lambda of `tts stop`: idle (manual mode) or listening, if still speaking.
    /// On 1.7.x it first waits for the audio pipeline, speaking all the while (§7).
    fn tts_stop(&mut self, platform: &mut Platform) -> TaskEnd {
        if self.state != DeviceState::Speaking {
            return TaskEnd::Done;
        }
        let tail = platform.firmware.stop_tail;
        if let Some(wait) = self.playback.stop_wait(
            &mut platform.playback_io(),
            &mut self.audio,
            tail,
            &mut self.listening.discarding,
        ) {
            return TaskEnd::Block(wait, Task::Voice(VoiceTask::TtsStop));
        }
        let to = if self.listening.mode == ListeningMode::Manual {
            DeviceState::Idle
        } else {
            DeviceState::Listening
        };
        self.set_state(platform, to);
        TaskEnd::Done
    }

    /// `ResetDecoder`, and the drained event it may owe.
    fn reset_decoder(&mut self, platform: &mut Platform) {
        if self.playback.reset(&mut platform.playback_io(), &mut self.audio) {
            self.main.signal(EventBit::PlaybackDrained);
        }
    }

    /// `MAIN_EVENT_PLAYBACK_DRAINED` in the main loop.
    fn on_playback_drained(&mut self, platform: &mut Platform) {
        if self.listening.pending_start
            && self.state == DeviceState::Listening
            && Playback::is_idle(&self.audio, platform.now)
        {
            self.listening.pending_start = false;
            self.start_listening_audio(platform);
        }
    }

    /// `OnIncomingAudio` → `PushPacketToDecodeQueue` (dropped unless speaking) → decode → output.
    pub(crate) fn incoming_audio(&mut self, platform: &mut Platform, packet: &[u8], overread: bool) {
        platform.speech.received(overread);
        if self.state != DeviceState::Speaking {
            platform.speech.dropped(Drop::WrongState);
            return;
        }
        if self.listening.discarding || (platform.firmware.abort_silences && self.listening.aborted) {
            platform.speech.dropped(Drop::Silenced);
            return;
        }
        let server = self.protocol.as_ref().map_or(
            (DEFAULT_SERVER_SAMPLE_RATE, DEFAULT_SERVER_FRAME_DURATION),
            Protocol::server_audio,
        );
        self.playback.push(
            &mut platform.playback_io(),
            &mut self.audio,
            self.volume,
            server,
            packet,
        );
    }

    /// `MAIN_EVENT_SEND_AUDIO`: every queued microphone packet goes out (`SendAudio`); when
    /// one cannot be sent the rest is dropped (`application.cc:219-231`).
    fn send_audio(&mut self, platform: &mut Platform) {
        let Some(protocol) = self.protocol.as_mut() else {
            self.mic.clear_send_queue();
            return;
        };
        while let Some(p) = self.mic.pop_send() {
            if !protocol.send_audio(platform, &p) {
                self.mic.clear_send_queue();
                break;
            }
        }
    }
}

/// `AudioService::IsAfeWakeWord`: the AFE audio engine (ESP32-S3, P4: `audio_service.cc:88-92`)
/// with a wake word (`afe_audio_engine.h:38`); the lite engine never (`lite_audio_engine.h:30`).
fn is_afe_wake_word(platform: &Platform) -> bool {
    platform.spec.audio.wake_word && platform.spec.target.chip == crate::board::Chip::Esp32s3
}
