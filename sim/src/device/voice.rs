//! The device's voice path: `tts`/`stt`/`llm` messages, the state-changed and playback-drained
//! events, listening modes, abort, and received speech from binary frame to codec
//! (`main/application.cc`: `OnIncomingJson`, `HandleStateChangedEvent`, `StartListeningAudio`,
//! `AbortSpeaking`, `HandleWakeWordDetectedEvent`; `main/audio/audio_service.cc`:
//! `PushPacketToDecodeQueue`, `OpusCodecTask`, `AudioOutputTask`, `ResetDecoder`; VOICE.md §3–§4).
//!
//! Timing model. Decoding takes no virtual time; a decoded frame plays right after whatever the
//! output already holds (the audio service, `device/audio.rs`), so output runs at real time and the queues
//! fill when frames arrive faster. A packet is dropped when 40 packets wait for decoding (the
//! two-entry playback queue holds the next two frames, so: 42 frames not yet started). Playback
//! counts as drained when the last frame has been written to I2S, one DMA ring (6 × 240 frames)
//! before it has been heard.

use std::collections::VecDeque;

use crate::audio::source::{Prompt, Source};
use crate::cjson::Item;
use crate::cjson::{Limits, Terminator};
use crate::device::app::{Running, Task};
use crate::device::channel::{DEFAULT_SERVER_FRAME_DURATION, DEFAULT_SERVER_SAMPLE_RATE, Link, Socket};
use crate::device::mic::MicQueue;
use crate::device::state::DeviceState;
use crate::device::{Core, Device, Output, Receipt, app};
use crate::time::{SimDuration, SimTime};
use crate::trace::BootReason;
use crate::trace::{Event, LogLevel};
use crate::voice::codec::FRAME_MS;
use crate::voice::log::Drop;
use crate::voice::log::SpeechLog;
use crate::voice::memo::{DecodeStream, EncodeStream};

/// `MAX_DECODE_PACKETS_IN_QUEUE` (2400 ms / 60 ms).
pub(crate) const DECODE_QUEUE: usize = 40;
/// `MAX_PLAYBACK_TASKS_IN_QUEUE`.
pub(crate) const PLAYBACK_QUEUE: usize = 2;
/// I2S DMA ring: `AUDIO_CODEC_DMA_DESC_NUM` × `AUDIO_CODEC_DMA_FRAME_NUM` frames.
const DMA_FRAMES: u64 = 6 * 240;

/// `ListeningMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListeningMode {
    /// `kListeningModeAutoStop`: the server's VAD ends the turn (`"auto"`).
    Auto,
    /// `kListeningModeManualStop`: push-to-talk (`"manual"`).
    Manual,
    /// `kListeningModeRealtime`: with AEC, the microphone stays on while speaking (`"realtime"`).
    Realtime,
}

impl ListeningMode {
    /// The `mode` of `listen start`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListeningMode::Auto => "auto",
            ListeningMode::Manual => "manual",
            ListeningMode::Realtime => "realtime",
        }
    }
}

/// Why the device aborts speech (`AbortReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// `kAbortReasonNone`.
    None,
    /// `kAbortReasonWakeWordDetected`: `"reason":"wake_word_detected"`.
    WakeWordDetected,
}

/// The application's and the audio service's voice state of one boot.
#[derive(Debug)]
pub(crate) struct Voice {
    /// `listening_mode_`.
    pub(crate) mode: ListeningMode,
    /// `aborted_`.
    pub(crate) aborted: bool,
    pending_listening_start: bool,
    pub(crate) play_popup_on_listening: bool,
    /// `AS_EVENT_AUDIO_PROCESSOR_RUNNING`.
    pub(crate) processor_running: bool,
    state_event_queued: bool,
    drained_event_queued: bool,
    drained_notified: bool,
    drain_at: Option<SimTime>,
    /// `opus_decoder_` (+ resampler), made at the first packet; `None` until then. Its own,
    /// or a position in the codec pool the device was given (`Device::share_codecs`).
    decoder: Option<DecodeStream>,
    decoder_for: (i32, i32),
    decoder_failed: bool,
    /// Decoded frames not yet finished: `[start, end)` on the codec.
    frames: VecDeque<(SimTime, SimTime)>,
    /// `opus_encoder_`, made when voice processing first runs.
    encoder: Option<EncodeStream>,
    /// What the user says into the microphone (16 kHz), not yet captured.
    pub(crate) mic: MicQueue,
    /// The next 60 ms microphone frame is captured at this time (while voice processing runs).
    mic_tick: Option<SimTime>,
    /// `audio_send_queue_`: encoded packets waiting for the main loop.
    send_queue: VecDeque<std::sync::Arc<[u8]>>,
    send_event_queued: bool,
    /// Microphone packets dropped because the send queue was full.
    pub(crate) mic_dropped: u64,
    /// Microphone packets sent.
    pub(crate) mic_sent: u64,
    /// Milliseconds of microphone audio captured this boot (the v2 header's timestamp).
    mic_clock_ms: u32,
    /// Consecutive all-zero microphone frames.
    mic_silent_frames: u32,
    /// The TOC byte of the last encoded microphone packet (code 0), sent alone in DTX.
    mic_toc: u8,
    /// Silence played for undecoded packets (`Device::set_durations_only`).
    silence: Option<std::sync::Arc<[i16]>>,
}

impl Default for Voice {
    fn default() -> Self {
        Voice {
            mode: ListeningMode::Auto,
            aborted: false,
            pending_listening_start: false,
            play_popup_on_listening: false,
            processor_running: false,
            state_event_queued: false,
            drained_event_queued: false,
            drained_notified: true,
            drain_at: None,
            decoder: None,
            decoder_for: (0, 0),
            decoder_failed: false,
            frames: VecDeque::new(),
            encoder: None,
            mic: MicQueue::default(),
            mic_tick: None,
            send_queue: VecDeque::new(),
            send_event_queued: false,
            mic_dropped: 0,
            mic_sent: 0,
            mic_clock_ms: 0,
            // SILK wideband, 60 ms, mono: what the firmware's settings produce.
            mic_silent_frames: 1,
            mic_toc: 0x58,
            silence: None,
        }
    }
}

impl Voice {
    /// When the playback-drained check or the next microphone frame is due.
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        match (self.drain_at, self.mic_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether an Opus decoder exists (codec state is allocated lazily).
    pub(crate) fn has_decoder(&self) -> bool {
        self.decoder.is_some()
    }

    /// Whether an Opus encoder exists.
    pub(crate) fn has_encoder(&self) -> bool {
        self.encoder.is_some()
    }

    /// Voice processing on or off (`EnableVoiceProcessing`): the microphone frames start or stop.
    fn set_processing(&mut self, on: bool, now: SimTime) {
        self.processor_running = on;
        if on {
            if self.mic_tick.is_none() {
                self.mic_tick = Some(now + SimDuration::from_millis(u64::from(FRAME_MS)));
            }
        } else {
            self.mic_tick = None;
            // The firmware keeps its encoder; the twin frees opus-rs's (~227 KiB) while the
            // microphone is off and makes a fresh one when it streams again (the first packets
            // of the next listening start from a clean encoder state: the bytes differ, the
            // sound does not).
            self.encoder = None;
            self.mic_silent_frames = 1;
        }
    }
}

fn drain_latency(rate: u32) -> SimDuration {
    SimDuration::from_micros(DMA_FRAMES * 1_000_000 / u64::from(rate.max(1)))
}

fn text_of(root: Item<'_>, key: &[u8]) -> Option<String> {
    root.get(key)
        .and_then(|t| t.c_string())
        .map(|t| String::from_utf8_lossy(t).into_owned())
}

impl Running {
    /// `SendText` of a control message: on the WebSocket while connected, as a publish on the
    /// direct link (MQTT-like); nothing otherwise.
    pub(crate) fn send_text(&mut self, core: &mut Core, text: Vec<u8>) {
        let at = core.now;
        match &self.protocol {
            Some(Link::WebSocket(ws)) if ws.socket == Socket::Connected => {
                core.push_output(Output::WsText { text, at });
            }
            Some(Link::Direct) => core.push_output(Output::Control { text, at }),
            _ => {}
        }
    }

    fn session_id(&self) -> Vec<u8> {
        match &self.protocol {
            Some(Link::WebSocket(ws)) => ws.session_id.clone(),
            _ => Vec::new(),
        }
    }

    fn control(&self, body: &str) -> Vec<u8> {
        let mut out = b"{\"session_id\":\"".to_vec();
        out.extend_from_slice(&self.session_id());
        out.extend_from_slice(b"\",");
        out.extend_from_slice(body.as_bytes());
        out.push(b'}');
        out
    }

    /// A state transition happened: `MAIN_EVENT_STATE_CHANGED` (one bit, however many changes).
    pub(crate) fn state_changed(&mut self) {
        if !self.voice.state_event_queued {
            self.voice.state_event_queued = true;
            self.main.signal(Task::StateChanged);
        }
    }

    /// `HandleStateChangedEvent` (reads the state as it is now).
    pub(crate) fn on_state_changed(&mut self, core: &mut Core) {
        self.voice.state_event_queued = false;
        self.voice.pending_listening_start = false;
        match self.state {
            DeviceState::Unknown | DeviceState::Idle => {
                // EnableVoiceProcessing(false), EnableWakeWordDetection(true).
                self.voice.set_processing(false, core.now);
            }
            DeviceState::Listening if self.voice.play_popup_on_listening || !self.voice.processor_running => {
                if self.voice.mode == ListeningMode::Auto && !self.playback_idle(core.now) {
                    self.voice.pending_listening_start = true;
                    core.emit(|| Event::Note {
                        text: "listen start deferred until playback drains".into(),
                    });
                    self.arm_drain_check(core);
                } else {
                    self.start_listening_audio(core);
                }
            }
            DeviceState::Speaking => {
                if self.voice.mode != ListeningMode::Realtime {
                    self.voice.set_processing(false, core.now);
                }
                self.reset_decoder(core);
            }
            DeviceState::WifiConfiguring => self.voice.set_processing(false, core.now),
            _ => {}
        }
    }

    /// `StartListeningAudio`: `listen start`, voice processing on (which resets the decoder),
    /// the popup if one is owed.
    pub(crate) fn start_listening_audio(&mut self, core: &mut Core) {
        if self.state != DeviceState::Listening {
            return;
        }
        let frame = self.control(&format!(
            "\"type\":\"listen\",\"state\":\"start\",\"mode\":\"{}\"",
            self.voice.mode.as_str()
        ));
        self.send_text(core, frame);
        self.voice.set_processing(true, core.now);
        let now = core.now;
        self.audio.enable_input(&mut core.audio, now, true, self.volume);
        self.reset_decoder(core);
        if self.voice.play_popup_on_listening {
            self.voice.play_popup_on_listening = false;
            self.play_prompt(core, Prompt::Popup);
        }
    }

    /// `SetListeningMode(mode)`.
    pub(crate) fn set_listening_mode(&mut self, core: &mut Core, mode: ListeningMode) {
        self.voice.mode = mode;
        self.set_state(core, DeviceState::Listening);
    }

    /// `AbortSpeaking(reason)`.
    pub(crate) fn abort_speaking(&mut self, core: &mut Core, reason: AbortReason) {
        core.log(LogLevel::Info, "Application", || "Abort speaking");
        self.voice.aborted = true;
        let body = match reason {
            AbortReason::None => "\"type\":\"abort\"".to_string(),
            AbortReason::WakeWordDetected => "\"type\":\"abort\",\"reason\":\"wake_word_detected\"".to_string(),
        };
        let frame = self.control(&body);
        self.send_text(core, frame);
    }

    /// `HandleStopListeningEvent` (push-to-talk released).
    pub(crate) fn stop_listening(&mut self, core: &mut Core) {
        if self.state == DeviceState::Listening {
            let frame = self.control("\"type\":\"listen\",\"state\":\"stop\"");
            self.send_text(core, frame);
            self.set_state(core, DeviceState::Idle);
        }
    }

    /// `HandleStartListeningEvent` (push-to-talk pressed).
    pub(crate) fn start_listening(&mut self, core: &mut Core) {
        match self.state {
            DeviceState::Activating => {
                self.set_state(core, DeviceState::Idle);
            }
            DeviceState::Idle => {
                if self.protocol.is_none() {
                    core.log(LogLevel::Error, "Application", || "Protocol not initialized");
                } else if !self.channel_open(core.now) && matches!(self.protocol, Some(Link::WebSocket(_))) {
                    self.set_state(core, DeviceState::Connecting);
                    self.main.schedule(Task::OpenChannel {
                        mode: ListeningMode::Manual,
                        stage: crate::device::channel::OpenStage::Begin,
                        wake: None,
                    });
                } else {
                    self.set_listening_mode(core, ListeningMode::Manual);
                }
            }
            DeviceState::Speaking => {
                self.abort_speaking(core, AbortReason::None);
                self.set_listening_mode(core, ListeningMode::Manual);
            }
            _ => {}
        }
    }

    /// `HandleWakeWordDetectedEvent` for `word` (the wake word's audio is not modelled: no
    /// packets precede `listen detect`).
    pub(crate) fn wake_word(&mut self, core: &mut Core, word: &str) {
        if self.protocol.is_none() {
            return;
        }
        let state = self.state;
        core.log(LogLevel::Info, "Application", || {
            format!("Wake word detected: {word} (state: {})", state_number(state))
        });
        match state {
            DeviceState::Idle => {
                if !self.set_state(core, DeviceState::Connecting) {
                    return;
                }
                if self.channel_open(core.now) || !matches!(self.protocol, Some(Link::WebSocket(_))) {
                    self.continue_wake_word(core, word);
                } else {
                    self.main.schedule(Task::OpenChannel {
                        mode: ListeningMode::Auto,
                        stage: crate::device::channel::OpenStage::Begin,
                        wake: Some(word.to_string()),
                    });
                }
            }
            DeviceState::Speaking | DeviceState::Listening => {
                self.abort_speaking(core, AbortReason::WakeWordDetected);
                // Clear the send queue so no residue reaches the server.
                self.voice.send_queue.clear();
                if state == DeviceState::Listening {
                    let frame = self.control(&format!(
                        "\"type\":\"listen\",\"state\":\"start\",\"mode\":\"{}\"",
                        ListeningMode::Auto.as_str()
                    ));
                    self.send_text(core, frame);
                    self.reset_decoder(core);
                    self.play_prompt(core, Prompt::Popup);
                } else {
                    self.voice.play_popup_on_listening = true;
                    self.set_listening_mode(core, ListeningMode::Auto);
                }
            }
            DeviceState::Activating => {
                self.set_state(core, DeviceState::Idle);
            }
            _ => {}
        }
    }

    /// `ContinueWakeWordInvoke` once the channel is open: `listen detect`, then listening.
    pub(crate) fn continue_wake_word(&mut self, core: &mut Core, word: &str) {
        if self.state != DeviceState::Connecting {
            return;
        }
        core.log(LogLevel::Info, "Application", || format!("Wake word detected: {word}"));
        let mut frame = b"{\"session_id\":\"".to_vec();
        frame.extend_from_slice(&self.session_id());
        frame.extend_from_slice(b"\",\"type\":\"listen\",\"state\":\"detect\",\"text\":\"");
        // Concatenated as it is: the firmware does not escape the wake word.
        frame.extend_from_slice(word.as_bytes());
        frame.extend_from_slice(b"\"}");
        self.send_text(core, frame);
        self.set_listening_mode(core, ListeningMode::Auto);
    }

    /// `OnIncomingJson` for `tts`, `stt` and `llm` (the receive task: texts are logged here, the
    /// state changes are scheduled on the main task).
    pub(crate) fn incoming_voice_json(&mut self, core: &mut Core, kind: &[u8], root: Item<'_>) {
        match kind {
            b"tts" => {
                let Some(state) = root.get(b"state").and_then(|s| s.c_string()) else {
                    if !core.firmware.tts_state_checked {
                        // Before 2.4.0: `strcmp(state->valuestring, …)` on a missing string.
                        core.emit(|| Event::Panicked {
                            reason: "LoadProhibited: tts without a string state".into(),
                        });
                        self.abort_pending = true;
                    }
                    return;
                };
                match state {
                    b"start" => {
                        core.speech.start(core.now);
                        self.main.schedule(Task::TtsStart);
                    }
                    b"stop" => {
                        core.speech.stop(core.now);
                        self.main.schedule(Task::TtsStop);
                    }
                    b"sentence_start" => {
                        if let Some(text) = text_of(root, b"text") {
                            let shown = text.clone();
                            core.log(LogLevel::Info, "Application", || format!("<< {shown}"));
                            core.speech.sentence(core.now, text);
                        }
                    }
                    _ => {}
                }
            }
            b"stt" => {
                if let Some(text) = text_of(root, b"text") {
                    core.log(LogLevel::Info, "Application", || format!(">> {text}"));
                }
            }
            b"llm" => {
                if let Some(emotion) = text_of(root, b"emotion") {
                    core.emit(|| Event::Note {
                        text: format!("emotion {emotion}"),
                    });
                }
            }
            _ => {}
        }
    }

    /// The scheduled lambda of `tts start`.
    pub(crate) fn tts_start(&mut self, core: &mut Core) {
        self.voice.aborted = false;
        if self.set_state(core, DeviceState::Speaking) && self.state == DeviceState::Speaking {
            core.speech.speaking(core.now);
        }
    }

    /// The scheduled lambda of `tts stop`.
    pub(crate) fn tts_stop(&mut self, core: &mut Core) {
        if self.state == DeviceState::Speaking {
            let to = if self.voice.mode == ListeningMode::Manual {
                DeviceState::Idle
            } else {
                DeviceState::Listening
            };
            self.set_state(core, to);
        }
    }

    /// `IsPlaybackIdle`: nothing left to write to I2S.
    fn playback_idle(&self, now: SimTime) -> bool {
        let latency = drain_latency(core_rate(self));
        self.audio.last_output_end.max(SimTime::ZERO) <= now + latency
    }

    fn arm_drain_check(&mut self, core: &Core) {
        let latency = drain_latency(core_rate(self));
        let end = self.audio.last_output_end;
        let at = if end.as_micros() > latency.as_micros() {
            SimTime::from_micros(end.as_micros() - latency.as_micros())
        } else {
            SimTime::ZERO
        };
        self.voice.drain_at = Some(at.max(core.now));
    }

    /// `ResetDecoder`: the decoder forgets the stream, the decode and playback queues are
    /// cleared; the frame being written and the DMA ring still play.
    pub(crate) fn reset_decoder(&mut self, core: &mut Core) {
        let now = core.now;
        if let Some(d) = self.voice.decoder.as_mut() {
            d.reset();
        }
        let in_flight = self
            .voice
            .frames
            .iter()
            .find(|(s, e)| *s <= now && now < *e)
            .map(|f| f.1);
        let cut = in_flight.unwrap_or(now);
        if self.voice.frames.iter().any(|(_, e)| *e > cut) {
            self.audio.cut_playback(&mut core.audio, cut);
            core.speech.cut(cut);
        }
        self.voice.frames.clear();
        self.mark_drained(core);
    }

    fn mark_drained(&mut self, core: &mut Core) {
        if !self.voice.drained_notified {
            self.voice.drained_notified = true;
            self.signal_drained();
        }
        let _ = core;
    }

    fn signal_drained(&mut self) {
        if !self.voice.drained_event_queued {
            self.voice.drained_event_queued = true;
            self.main.signal(Task::PlaybackDrained);
        }
    }

    /// The playback-drained check fired (the output task wrote the last frame).
    pub(crate) fn on_drain_timer(&mut self, core: &mut Core) {
        let Some(due) = self.voice.drain_at else { return };
        if due > core.now {
            return;
        }
        self.voice.drain_at = None;
        if self.playback_idle(core.now) {
            self.voice.frames.retain(|(_, e)| *e > core.now);
            if self.voice.drained_notified {
                // A deferred listen start waits for this event even when nothing new was queued.
                if self.voice.pending_listening_start {
                    self.signal_drained();
                }
            } else {
                self.mark_drained(core);
            }
        } else {
            self.arm_drain_check(core);
        }
    }

    /// `MAIN_EVENT_PLAYBACK_DRAINED` in the main loop.
    pub(crate) fn on_playback_drained(&mut self, core: &mut Core) {
        self.voice.drained_event_queued = false;
        if self.voice.pending_listening_start && self.state == DeviceState::Listening && self.playback_idle(core.now) {
            self.voice.pending_listening_start = false;
            self.start_listening_audio(core);
        }
    }

    /// `OnIncomingAudio` → `PushPacketToDecodeQueue` → decode → output.
    pub(crate) fn incoming_audio(&mut self, core: &mut Core, packet: &[u8], overread: bool) {
        core.speech.received(overread);
        if self.state != DeviceState::Speaking {
            core.speech.dropped(Drop::WrongState);
            return;
        }
        let now = core.now;
        self.voice.frames.retain(|(_, e)| *e > now);
        let waiting = self.voice.frames.iter().filter(|(s, _)| *s > now).count();
        if waiting >= DECODE_QUEUE + PLAYBACK_QUEUE {
            core.speech.dropped(Drop::QueueFull);
            return;
        }
        let (rate, frame_ms) = match &self.protocol {
            Some(Link::WebSocket(ws)) => (ws.server_sample_rate, ws.server_frame_duration),
            _ => (DEFAULT_SERVER_SAMPLE_RATE, DEFAULT_SERVER_FRAME_DURATION),
        };
        let out_rate = core.spec.audio.output_sample_rate;
        if core.durations_only {
            // `--decode none`: the packet's length from its TOC byte, played as silence of that
            // length (the queues, timing and power-down are the same; levels are not measured).
            let Some(n48) = crate::voice::codec::toc_duration_48k(packet) else {
                core.speech.dropped(Drop::Undecodable);
                return;
            };
            // The rates a decoder would run at; a rate no decoder runs at drops the packet as
            // the full path does.
            let Some(dec) = u32::try_from(rate)
                .ok()
                .filter(|r| crate::voice::codec::OPUS_RATES.contains(r))
            else {
                core.log(LogLevel::Error, "AudioService", || "Audio decoder is not configured");
                core.speech.dropped(Drop::Undecodable);
                return;
            };
            let out = if out_rate > 0 { out_rate } else { dec };
            let n = (u64::from(n48) * u64::from(out) / 48_000) as usize;
            let samples = match &self.voice.silence {
                Some(z) if z.len() == n => z.clone(),
                _ => {
                    let z: std::sync::Arc<[i16]> = vec![0; n].into();
                    self.voice.silence = Some(z.clone());
                    z
                }
            };
            let duration = SimDuration::from_micros(n as u64 * 1_000_000 / u64::from(out.max(1)));
            let source = Source::Pcm { rate: out, samples };
            let (start, end) = self.audio.play(&mut core.audio, now, source, duration, self.volume);
            core.speech.decoded(start, end, (dec, out));
            self.voice.frames.push_back((start, end));
            self.voice.drained_notified = false;
            self.arm_drain_check(core);
            return;
        }
        if self.voice.decoder.is_none() || self.voice.decoder_for != (rate, frame_ms) {
            // SetDecodeSampleRate: a changed rate closes the decoder and opens a new one.
            self.voice.decoder_for = (rate, frame_ms);
            match DecodeStream::open(core.codecs.as_ref(), rate, frame_ms, out_rate) {
                Ok(d) => {
                    if rate as u32 != out_rate {
                        core.log(LogLevel::Info, "AudioService", || {
                            format!("Resampling audio from {rate} to {out_rate}")
                        });
                    }
                    self.voice.decoder = Some(d);
                    self.voice.decoder_failed = false;
                }
                Err(_) => {
                    self.voice.decoder = None;
                    if !self.voice.decoder_failed {
                        self.voice.decoder_failed = true;
                        core.log(
                            LogLevel::Error,
                            "AudioService",
                            || "Failed to create audio decoder, error code: -1",
                        );
                    }
                }
            }
        }
        let Some(decoder) = self.voice.decoder.as_mut() else {
            core.log(LogLevel::Error, "AudioService", || "Audio decoder is not configured");
            core.speech.dropped(Drop::Undecodable);
            return;
        };
        let rates = decoder.rates();
        let pcm = match decoder.decode(packet) {
            Ok(pcm) => pcm,
            Err(_) => {
                core.log(
                    LogLevel::Error,
                    "AudioService",
                    || "Failed to decode audio after resize, error code: -1",
                );
                core.speech.dropped(Drop::Undecodable);
                return;
            }
        };
        let out = rates.1;
        let duration = SimDuration::from_micros(pcm.len() as u64 * 1_000_000 / u64::from(out.max(1)));
        let source = Source::Pcm {
            rate: out,
            samples: pcm,
        };
        let (start, end) = self.audio.play(&mut core.audio, now, source, duration, self.volume);
        core.speech.decoded(start, end, rates);
        self.voice.frames.push_back((start, end));
        self.voice.drained_notified = false;
        self.arm_drain_check(core);
    }
}

impl Device {
    /// Typed input as py-xiaozhi sends it: `listen detect` with the text (the firmware sends
    /// `detect` only for its wake word; this is **not** firmware behaviour, and the trace says so).
    pub fn type_text(&mut self, now: SimTime, text: &str) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            self.core.emit(|| Event::Note {
                text: "typed input (as py-xiaozhi sends it; not firmware behaviour): listen detect".into(),
            });
            if run.state == DeviceState::Idle {
                // py-xiaozhi opens the channel first; the device's own path for that is the
                // wake word's (open, `listen detect` with the text, listening).
                run.main.schedule(app::Task::WakeWord(text.to_string()));
                return;
            }
            let mut frame = run.control("\"type\":\"listen\",\"state\":\"detect\",\"text\":");
            frame.pop();
            let mut quoted = Vec::new();
            crate::cjson::write_string(&mut quoted, text.as_bytes());
            frame.extend_from_slice(&quoted);
            frame.push(b'}');
            run.send_text(&mut self.core, frame);
        }
    }

    /// A binary frame (audio) arrived on the WebSocket: unpacked as the protocol version says
    /// (trusting its size field as the firmware does), then `OnIncomingAudio`.
    pub fn handle_ws_binary(&mut self, now: SimTime, frame: &[u8]) {
        self.run_before(now);
        let Some(run) = self.run.as_deref_mut() else {
            self.core.speech.received(false);
            self.core.speech.dropped(Drop::NoChannel);
            return;
        };
        let version = match run.protocol.as_mut() {
            Some(Link::WebSocket(ws)) => {
                ws.last_incoming = now;
                ws.version
            }
            _ => 1,
        };
        let unpacked = crate::voice::frame::unpack(version, frame);
        let mut payload = unpacked.payload;
        if unpacked.overread > 0 {
            let heap = self.core.spec.target.free_heap;
            if unpacked.announced as u64 > heap as u64 {
                let n = unpacked.announced;
                self.core.emit(|| Event::Panicked {
                    reason: format!(
                        "std::bad_alloc: a binary frame's header announced {n} payload bytes (more than the heap)"
                    ),
                });
                self.restart(BootReason::Panic);
                return;
            }
            let past = unpacked.overread;
            self.core.emit(|| Event::Note {
                text: format!(
                    "binary frame of {} bytes announces {} payload bytes: the firmware copies {past} bytes past the frame (undefined behaviour; the twin reads zeros)",
                    frame.len(),
                    unpacked.announced
                ),
            });
            payload.resize(unpacked.announced, 0);
        }
        run.incoming_audio(&mut self.core, &payload, unpacked.overread > 0);
    }

    /// One audio packet on the direct link (an MQTT device's UDP audio, already decrypted): the
    /// Opus packet itself, then `OnIncomingAudio`.
    pub fn handle_audio(&mut self, now: SimTime, packet: &[u8]) {
        self.run_before(now);
        match self.run.as_deref_mut() {
            Some(run) => run.incoming_audio(&mut self.core, packet, false),
            None => {
                self.core.speech.received(false);
                self.core.speech.dropped(Drop::NoChannel);
            }
        }
    }

    /// A JSON message on the direct link (`OnIncomingJson` as MQTT delivers it: `tts`, `stt`,
    /// `llm`, `system`, `mcp`). A reply it causes leaves as [`Output::Mcp`].
    pub fn handle_json(&mut self, now: SimTime, frame: &[u8]) -> Option<Receipt> {
        self.run_before(now);
        let run = self.run.as_deref_mut()?;
        let limits = Limits {
            heap_bytes: Some(self.core.spec.target.free_heap),
        };
        let doc = self.parser.parse(frame, Terminator::Length, limits).ok()?;
        let root = doc.root();
        if root.get(b"type").and_then(|t| t.c_string()).is_none() {
            self.core
                .log(LogLevel::Warn, "Application", || "Incoming JSON message has no type");
            return None;
        }
        let receipt = run
            .incoming_json(&mut self.core, root)
            .map(|received| run.receive(&mut self.core, received));
        self.after_thread();
        receipt
    }

    /// What became of the speech this device was sent (all boots).
    pub fn speech_log(&self) -> &SpeechLog {
        &self.core.speech
    }

    /// A wake word is detected (`MAIN_EVENT_WAKE_WORD_DETECTED`; its audio is not modelled).
    pub fn wake_word(&mut self, now: SimTime, word: &str) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.main.schedule(app::Task::WakeWord(word.to_string()));
        }
    }

    /// The user speaks into the microphone from now: 16 kHz mono samples, captured 60 ms at a
    /// time while the device listens (silence before and after). At most ten minutes wait in
    /// the microphone: the rest of a longer recording is not said.
    pub fn say(&mut self, now: SimTime, samples_16k: &[i16]) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.voice.mic.push(samples_16k.into());
        }
    }

    /// [`Device::say`] with samples many devices share (a fleet's utterance is held once).
    pub fn say_shared(&mut self, now: SimTime, samples_16k: std::sync::Arc<[i16]>) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.voice.mic.push(samples_16k);
        }
    }

    /// Forgets what the user said that the microphone has not captured yet.
    pub fn mic_clear(&mut self) {
        if let Some(run) = self.run.as_deref_mut() {
            run.voice.mic = MicQueue::default();
        }
    }

    /// Samples the user has said that the microphone has not captured yet.
    pub fn mic_pending(&self) -> usize {
        self.run.as_deref().map_or(0, |r| r.voice.mic.len())
    }

    /// Push-to-talk: pressed (`StartListening`) or released (`StopListening`).
    pub fn push_to_talk(&mut self, now: SimTime, pressed: bool) {
        self.run_until(now);
        if let Some(run) = self.run.as_deref_mut() {
            run.main.schedule(if pressed {
                app::Task::StartListening
            } else {
                app::Task::StopListening
            });
        }
    }
}

/// `MAX_SEND_PACKETS_IN_QUEUE` (2400 ms / 60 ms).
pub(crate) const SEND_QUEUE: usize = 40;

impl Running {
    /// The microphone tick: capture 60 ms (what the user says, else silence), encode, queue for
    /// sending (the oldest packet goes when 40 wait), and wake the main loop.
    pub(crate) fn on_mic_tick(&mut self, core: &mut Core) {
        let Some(due) = self.voice.mic_tick else { return };
        if due > core.now {
            return;
        }
        self.voice.mic_tick = Some(due + SimDuration::from_millis(u64::from(FRAME_MS)));
        let n = crate::voice::codec::MIC_RATE as usize * FRAME_MS as usize / 1000;
        let frame = self.voice.mic.take(n);
        let silent = frame.iter().all(|&x| x == 0);
        let packet = if silent && self.voice.mic_silent_frames > 0 {
            // DTX: libopus 1.3.1 sends the TOC byte alone for continued digital silence
            // (seen in the committed mic vector); opus-rs has no DTX, so the twin does the same
            // without running the encoder (and makes no encoder for a microphone that only
            // ever hears silence).
            std::sync::Arc::from(&[self.voice.mic_toc][..])
        } else {
            let encoder = self
                .voice
                .encoder
                .get_or_insert_with(|| EncodeStream::open(core.codecs.as_ref()));
            let p = encoder.encode(&frame);
            if let Some(&toc) = p.first() {
                self.voice.mic_toc = toc & 0xfc;
            }
            p
        };
        self.voice.mic_silent_frames = if silent {
            self.voice.mic_silent_frames.saturating_add(1)
        } else {
            0
        };
        self.voice.mic_clock_ms = self.voice.mic_clock_ms.wrapping_add(FRAME_MS);
        if self.voice.send_queue.len() >= SEND_QUEUE {
            self.voice.send_queue.pop_front();
            self.voice.mic_dropped += 1;
        }
        self.voice.send_queue.push_back(packet);
        if !self.voice.send_event_queued {
            self.voice.send_event_queued = true;
            self.main.signal(Task::SendAudio);
        }
    }

    /// `MAIN_EVENT_SEND_AUDIO`: every queued packet goes out (`SendAudio`); on a closed socket
    /// the rest is dropped.
    pub(crate) fn send_audio(&mut self, core: &mut Core) {
        self.voice.send_event_queued = false;
        let version = match &self.protocol {
            Some(Link::WebSocket(ws)) if ws.socket == Socket::Connected => ws.version,
            Some(Link::Direct) => 1,
            _ => {
                self.voice.send_queue.clear();
                return;
            }
        };
        let at = core.now;
        let ts = self.voice.mic_clock_ms;
        while let Some(p) = self.voice.send_queue.pop_front() {
            self.voice.mic_sent += 1;
            let frame = crate::voice::frame::pack(version, &p, ts);
            core.push_output(Output::WsBinary { frame, at });
        }
    }
}

fn core_rate(run: &Running) -> u32 {
    run.audio.rate()
}

/// `(int)state` as the firmware prints it.
fn state_number(s: DeviceState) -> i32 {
    match s {
        DeviceState::Unknown => 0,
        DeviceState::Starting => 1,
        DeviceState::WifiConfiguring => 2,
        DeviceState::Idle => 3,
        DeviceState::Connecting => 4,
        DeviceState::Listening => 5,
        DeviceState::Speaking => 6,
        DeviceState::Upgrading => 7,
        DeviceState::Activating => 8,
        DeviceState::AudioTesting => 9,
        DeviceState::FatalError => 10,
    }
}
