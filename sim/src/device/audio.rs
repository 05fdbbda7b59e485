//! `AudioService` output power management and the codec drivers' enable/volume logic
//! (`main/audio/audio_service.cc`, `audio_codec.cc`, `no_audio_codec.cc`,
//! `es8311_audio_codec.cc`, `box_audio_codec.cc`; docs/reference/firmware.md §9, docs/reference/acoustics.md §1.3).
//!
//! Output is enabled lazily before playback and disabled by a 1 s periodic check 15 s after the
//! last output (except a duplex codec while its input runs). Hardware codecs write their volume
//! register only while the device is open (ES8311) or always (BoxAudioCodec), and drive the PA
//! pin from output enable. Every change goes to the device's [`AudioLog`].

use crate::audio::codec::{CodecDevice, hw_gain_db};
use crate::audio::render::ChainSetup;
use crate::audio::source::{Prompt, Source};
use crate::audio::{AudioChange, AudioLog};
use crate::board::{AudioSpec, CodecKind};
use crate::device::platform::Platform;
use crate::time::{SimDuration, SimTime};
use crate::trace::Event;
use crate::world::RoomSpec;

/// `AUDIO_POWER_TIMEOUT_MS`.
pub(crate) const POWER_TIMEOUT: SimDuration = SimDuration::from_millis(15_000);
/// `AUDIO_POWER_CHECK_INTERVAL_MS`.
pub(crate) const POWER_CHECK_INTERVAL: SimDuration = SimDuration::from_millis(1000);

/// The I2S DMA ring: `AUDIO_CODEC_DMA_DESC_NUM` × `AUDIO_CODEC_DMA_FRAME_NUM` frames
/// (`audio_codec.h`): audio already written when a volume change or a drain happens.
pub(crate) const DMA_FRAMES: u64 = 6 * 240;

/// How long the DMA ring holds at `rate` Hz.
pub(crate) fn dma_latency(rate: u32) -> SimDuration {
    SimDuration::from_micros(DMA_FRAMES * 1_000_000 / u64::from(rate.max(1)))
}

/// The board's chain in `room`, for rendering: the software codecs hear a volume change one DMA
/// ring later; the hardware codecs at once.
pub(crate) fn chain_setup(a: &AudioSpec, room: &RoomSpec) -> ChainSetup {
    ChainSetup {
        codec: a.codec,
        rate: a.output_sample_rate,
        amp: a.amplifier.clone(),
        speaker: a.speaker.clone(),
        dac: a.dac.clone(),
        distance_m: room.listener_distance_m,
        ambient_dba: room.ambient_dba,
        margin_db: room.margin_db,
        dma_latency: match a.codec {
            c if c.is_software() => dma_latency(a.output_sample_rate),
            _ => SimDuration::ZERO,
        },
    }
}

/// Volatile audio state of one boot.
#[derive(Clone, Debug)]
pub(crate) struct AudioService {
    codec: CodecKind,
    /// Codec input (microphone) enabled.
    pub input_enabled: bool,
    /// Codec output enabled (`EnableOutput`).
    pub output_enabled: bool,
    /// ES8311 `dev_ != nullptr`.
    pub codec_open: bool,
    /// The PA enable pin's level.
    pub pa_on: bool,
    /// When the last written frame ends (0 when nothing was played this boot).
    pub last_output_end: SimTime,
    /// `last_input_time_`: the input task last read the microphone (it reads while wake word
    /// detection or voice processing runs).
    last_input: SimTime,
    power_tick: Option<SimTime>,
    hw_gain: f32,
    pa_switched: bool,
    pa_always_on: bool,
    rate: u32,
    /// The codec handle has not been opened yet this boot (ES8374/ES8388/ES8389 keep one handle:
    /// only its first open replays volume 0; docs/reference/codecs.md §1.5).
    fresh_handle: bool,
}

impl AudioService {
    /// Output and input off, as at board construction.
    pub(crate) fn new(spec: &AudioSpec) -> Self {
        AudioService {
            codec: spec.codec,
            input_enabled: false,
            output_enabled: false,
            codec_open: false,
            pa_on: false,
            last_output_end: SimTime::ZERO,
            last_input: SimTime::ZERO,
            power_tick: None,
            hw_gain: hw_gain_db(spec.dac.pa_voltage as f32, spec.dac.codec_dac_voltage as f32, 0.0),
            pa_switched: spec.pa_gpio.is_some(),
            pa_always_on: spec.pa_always_on,
            rate: spec.output_sample_rate,
            fresh_handle: true,
        }
    }

    fn is_hardware(&self) -> bool {
        self.codec.is_hardware()
    }

    /// Board construction: PA pins configured (forced on where the board does so).
    pub(crate) fn start(&mut self, log: &mut AudioLog, now: SimTime, volume: i32) {
        log.record(now, AudioChange::Volume(volume));
        if self.pa_always_on {
            self.pa_on = true;
            log.record(now, AudioChange::PaEnabled(true));
        }
    }

    /// Everything stops (reboot, power cut): clocks, codec and PA off, sound cut.
    pub(crate) fn shut_down(&mut self, log: &mut AudioLog, now: SimTime) {
        log.stop_playback(now);
        if self.output_enabled && !self.is_hardware() {
            log.record(now, AudioChange::TxEnabled(false));
        }
        if self.codec_open {
            log.record(now, AudioChange::Register32(0));
            log.record(now, AudioChange::CodecOpen(false));
        }
        if self.pa_on {
            log.record(now, AudioChange::PaEnabled(false));
        }
        self.output_enabled = false;
        self.input_enabled = false;
        self.codec_open = false;
        self.pa_on = false;
        self.power_tick = None;
    }

    /// `AudioCodec::SetOutputVolume` plus the hardware codecs' register write.
    pub(crate) fn set_volume(&mut self, log: &mut AudioLog, now: SimTime, volume: i32) {
        log.record(now, AudioChange::Volume(volume));
        if !self.codec.is_hardware() {
            return;
        }
        // `Es8311AudioCodec` writes the register only while its device is open; the other
        // hardware codecs whatever the device's state.
        if self.codec.device() != CodecDevice::Es8311Open || self.codec_open {
            log.record(
                now,
                AudioChange::Register32(self.codec.volume_register(volume, self.hw_gain)),
            )
        }
    }

    /// `UpdateDeviceState` of the ES8311 drivers after an enable flag changed.
    fn update_codec_device(&mut self, log: &mut AudioLog, now: SimTime, volume: i32) {
        if !self.is_hardware() {
            return;
        }
        let want_open = if self.codec.device().follows_output() {
            self.output_enabled
        } else {
            self.input_enabled || self.output_enabled
        };
        if want_open && !self.codec_open {
            self.codec_open = true;
            log.record(now, AudioChange::CodecOpen(true));
            // A fresh handle replays volume 0, then the driver writes the real volume. The ES8311
            // classes make a fresh handle at every open; the other chips keep theirs.
            if self.fresh_handle || self.codec.device().fresh_handles() {
                log.record(
                    now,
                    AudioChange::Register32(self.codec.volume_register(0, self.hw_gain)),
                );
            }
            self.fresh_handle = false;
            log.record(
                now,
                AudioChange::Register32(self.codec.volume_register(volume, self.hw_gain)),
            );
        } else if !want_open && self.codec_open {
            self.codec_open = false;
            // `es8311_stop` zeroes REG 0x32; the other chips keep their register across a close.
            if self.codec.device().fresh_handles() {
                log.record(now, AudioChange::Register32(0));
            }
            log.record(now, AudioChange::CodecOpen(false));
        }
        if self.pa_switched && !self.pa_always_on && self.pa_on != self.output_enabled {
            self.pa_on = self.output_enabled;
            log.record(now, AudioChange::PaEnabled(self.pa_on));
        }
    }

    /// `EnableOutput(b)`.
    pub(crate) fn enable_output(&mut self, log: &mut AudioLog, now: SimTime, on: bool, volume: i32) {
        if on == self.output_enabled {
            return;
        }
        self.output_enabled = on;
        if self.is_hardware() {
            self.update_codec_device(log, now, volume);
        } else if self.codec.is_software() {
            log.record(now, AudioChange::TxEnabled(on));
        }
    }

    /// `EnableInput(b)` (wake word / listening).
    pub(crate) fn enable_input(&mut self, log: &mut AudioLog, now: SimTime, on: bool, volume: i32) {
        if on == self.input_enabled {
            return;
        }
        self.input_enabled = on;
        self.update_codec_device(log, now, volume);
        if on && self.power_tick.is_none() {
            self.power_tick = Some(now + POWER_CHECK_INTERVAL);
        }
    }

    /// `PlaySound` / decoded TTS: output on if needed (restarting the power timer), then the
    /// sound queues behind whatever plays. Returns when it starts and ends.
    pub(crate) fn play(
        &mut self,
        log: &mut AudioLog,
        now: SimTime,
        source: Source,
        duration: SimDuration,
        volume: i32,
    ) -> (SimTime, SimTime) {
        if !self.output_enabled {
            self.power_tick = Some(now + POWER_CHECK_INTERVAL);
            self.enable_output(log, now, true, volume);
        }
        let start = self.last_output_end.max(now);
        let end = start + duration;
        log.play(start, end, source, self.rate);
        self.last_output_end = end;
        (start, end)
    }

    /// `PlaySound(prompt)`: one of the firmware's OGG sounds, queued behind what plays.
    pub(crate) fn play_sound(&mut self, platform: &mut Platform, prompt: Prompt, volume: i32) {
        let (_, _, duration) = prompt.burst();
        let now = platform.now;
        let (start, end) = self.play(&mut platform.audio, now, Source::Prompt(prompt), duration, volume);
        platform.emit(|| Event::SoundQueued {
            sound: prompt.name(),
            from: start,
            to: end,
        });
    }

    /// The output rate, Hz.
    pub(crate) fn rate(&self) -> u32 {
        self.rate
    }

    /// Queued sound after `at` is thrown away (`ResetDecoder`: what is being written still plays).
    pub(crate) fn cut_playback(&mut self, log: &mut AudioLog, at: SimTime) {
        log.stop_playback(at);
        if self.last_output_end > at {
            self.last_output_end = at;
        }
    }

    /// The sound is cut (`AudioService::Stop`).
    pub(crate) fn stop_playback(&mut self, log: &mut AudioLog, now: SimTime) {
        log.stop_playback(now);
        if self.last_output_end > now {
            self.last_output_end = now;
        }
    }

    /// When the power-check timer (1 s period) fires next; `None` while it is stopped.
    #[inline]
    pub(crate) fn timer_deadline(&self) -> Option<SimTime> {
        self.power_tick
    }

    /// The input task reads the microphone (`ReadAudioData`, `audio_service.cc:189-223`): the
    /// input comes on if it was off (the power timer restarted), and the read is the last input.
    pub(crate) fn read_input(&mut self, log: &mut AudioLog, now: SimTime, volume: i32) {
        if !self.input_enabled {
            self.power_tick = Some(now + POWER_CHECK_INTERVAL);
            self.enable_input(log, now, true, volume);
        }
        self.last_input = now;
    }

    /// `CheckAndUpdateAudioPowerState` for a tick due at `now` (`audio_service.cc:778-795`);
    /// `reading`: the input task reads (wake word detection or voice processing runs). Returns
    /// (output powered down, input powered down).
    pub(crate) fn on_power_tick(
        &mut self,
        log: &mut AudioLog,
        now: SimTime,
        volume: i32,
        reading: bool,
    ) -> (bool, bool) {
        let Some(due) = self.power_tick else {
            return (false, false);
        };
        if due > now {
            return (false, false);
        }
        if reading {
            self.last_input = now;
        }
        // 15 s without a read: the stop request, which the input task honours when nothing
        // asks it to read (`audio_service.cc:782-786`, `254-266`).
        let input_off =
            now.saturating_since(self.last_input.min(now)) > POWER_TIMEOUT && self.input_enabled && !reading;
        if input_off {
            self.enable_input(log, now, false, volume);
        }
        let mut disabled = false;
        let idle_for = now.saturating_since(self.last_output_end.min(now));
        if idle_for > POWER_TIMEOUT && self.output_enabled && !(self.codec.is_duplex() && self.input_enabled) {
            self.enable_output(log, now, false, volume);
            disabled = true;
        }
        self.power_tick = if !self.input_enabled && !self.output_enabled {
            None
        } else {
            Some(due + POWER_CHECK_INTERVAL)
        };
        (disabled, input_off)
    }
}
