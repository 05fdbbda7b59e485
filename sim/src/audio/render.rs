//! Renders a window of the [`AudioLog`] through codec, amplifier, speaker and room, sample by
//! sample at the codec's output rate (docs/reference/acoustics.md §1–§6).
//!
//! Software-volume codecs read the volume when a frame is *written*; frames already in the
//! I2S DMA ring (`dma_latency`, 6 × 240 frames = 60 ms at 24 kHz) keep the old gain. The
//! MAX98357A is in standby while BCLK is stopped and muted for its start-up time after BCLK
//! starts; the NS4150B follows its PA pin with a 120 ms start-up. Pure function of its inputs.

use crate::audio::chain::{AmpModel, AmplifierSpec, DacSpec, P0_PA, SdMode, SpeakerSpec, max98357_full_scale_peak_v};
use crate::audio::codec::{CodecKind, SoftwareGain};
use crate::audio::measure::{Measurement, dbfs_from_mean_square, verdict};
use crate::audio::{AudioChange, AudioLog, ChainFault};
use crate::time::{SimDuration, SimTime};

/// The board's chain and the room, for rendering.
#[derive(Clone, Debug)]
pub struct ChainSetup {
    /// The codec class (software volume or ES8311 register).
    pub codec: CodecKind,
    /// Output sample rate, Hz; the render runs one step per sample.
    pub rate: u32,
    /// The amplifier after the codec.
    pub amp: AmplifierSpec,
    /// The loudspeaker.
    pub speaker: SpeakerSpec,
    /// DAC full scale and `esp_codec_dev` voltages (hardware codecs).
    pub dac: DacSpec,
    /// Listener distance on axis, metres.
    pub distance_m: f64,
    /// Room ambient level, dBA.
    pub ambient_dba: f64,
    /// Audibility margin over ambient, dB.
    pub margin_db: f64,
    /// Audio already queued in the DMA ring when the volume changes.
    pub dma_latency: SimDuration,
}

/// Optional signals of a render (for WAV evidence).
#[derive(Clone, Debug, Default)]
pub struct Signals {
    /// I2S words as the codec writes them (32-bit; 16-bit codecs shifted left by 16), 0 while stopped.
    pub i2s: Vec<i32>,
    /// Device sound pressure at the listener, Pa.
    pub listener_pa: Vec<f32>,
}

/// The state of the path at one instant.
#[derive(Clone, Debug)]
struct PathState {
    tx: bool,
    tx_since: Option<SimTime>,
    codec_open: bool,
    reg32: u8,
    pa: bool,
    pa_since: Option<SimTime>,
    amp_shutdown: bool,
    speaker_off: bool,
    i2s_fault: bool,
    dummy: bool,
}

impl PathState {
    fn new() -> Self {
        PathState {
            tx: false,
            tx_since: None,
            codec_open: false,
            reg32: 0,
            pa: false,
            pa_since: None,
            amp_shutdown: false,
            speaker_off: false,
            i2s_fault: false,
            dummy: false,
        }
    }

    fn apply(&mut self, at: SimTime, change: &AudioChange, faults: &mut [bool; 5]) {
        match change {
            AudioChange::Volume(_) => {}
            AudioChange::TxEnabled(on) => {
                if *on && !self.tx {
                    self.tx_since = Some(at);
                }
                self.tx = *on;
            }
            AudioChange::CodecOpen(open) => self.codec_open = *open,
            AudioChange::Register32(r) => self.reg32 = *r,
            AudioChange::PaEnabled(on) => {
                if *on && !self.pa {
                    self.pa_since = Some(at);
                }
                self.pa = *on;
            }
            AudioChange::Fault(f, on) => {
                faults[*f as usize] = *on;
                self.amp_shutdown = faults[ChainFault::AmpShutdown as usize];
                self.speaker_off =
                    faults[ChainFault::SpeakerDisconnected as usize] || faults[ChainFault::SpeakerGated as usize];
                self.i2s_fault = faults[ChainFault::I2sStopped as usize];
                self.dummy = faults[ChainFault::DummyCodec as usize];
            }
        }
    }
}

fn sample_time(k: u64, rate: u32) -> SimTime {
    let rate = u64::from(rate.max(1));
    // 64-bit arithmetic while it fits (years of samples), 128-bit beyond: the same value.
    match k.checked_mul(1_000_000) {
        Some(us) => SimTime::from_micros(us / rate),
        None => SimTime::from_micros(((u128::from(k) * 1_000_000) / u128::from(rate)) as u64),
    }
}

fn first_sample_at_or_after(t: SimTime, rate: u32) -> u64 {
    let num = u128::from(t.as_micros()) * u128::from(rate);
    num.div_ceil(1_000_000) as u64
}

/// Renders `[from, to)`. With `signals`, also returns the sample streams.
pub fn render(
    log: &AudioLog,
    setup: &ChainSetup,
    from: SimTime,
    to: SimTime,
    want_signals: bool,
) -> (Measurement, Option<Signals>) {
    let mut meter = Meter::new(log, setup, from);
    let mut signals = want_signals.then(|| {
        let n = meter.samples_until(setup, to) as usize;
        Signals {
            i2s: Vec::with_capacity(n),
            listener_pa: Vec::with_capacity(n),
        }
    });
    meter.advance(log, setup, to, signals.as_mut());
    (meter.finish(setup, from, to), signals)
}

/// A render in progress: the path's state at the next sample and the running sums of the
/// window so far. [`render`] is one `new`, one `advance` and `finish`; a caller that advances in
/// steps gets the same figures to the bit (the same additions in the same order), so a window
/// can be measured while it plays and its samples let go once rendered (`Device::measure_as_played`).
/// Each step reads only the log's changes up to the sample it renders and the playbacks that
/// end after it: advance only over time the device has passed, since later changes may still come.
#[derive(Clone, Debug)]
pub struct Meter {
    k0: u64,
    k: u64,
    state: PathState,
    faults: [bool; 5],
    /// Changes are applied up to and including this time.
    applied: SimTime,
    /// Volume changes are applied up to and including this write time (`None`: none yet).
    volume_applied: Option<SimTime>,
    volume: i32,
    factor: i64,
    factor_volume: i32,
    playing: u64,
    running: u64,
    amp_on: u64,
    i2s_sq: f64,
    amp_sq: f64,
    p_sq: f64,
    /// The gain of the last ES8311 register value seen (`10^(dB/20)`, worked out once per value).
    register_gain: Option<(u8, f64)>,
}

impl Meter {
    /// A meter at the first sample at or after `from`, the path in the state the log gives it then.
    pub fn new(log: &AudioLog, setup: &ChainSetup, from: SimTime) -> Meter {
        let rate = setup.rate.max(1);
        let k0 = first_sample_at_or_after(from, rate);
        let start_t = sample_time(k0, rate);
        let mut state = PathState::new();
        let mut faults = [false; 5];
        for (t, change) in log.changes.iter().take_while(|(t, _)| *t <= start_t) {
            state.apply(*t, change, &mut faults);
        }
        let volume = 70;
        Meter {
            k0,
            k: k0,
            state,
            faults,
            applied: start_t,
            volume_applied: None,
            volume,
            factor: setup.codec.software().unwrap_or(SoftwareGain::Factor).gain(volume),
            factor_volume: volume,
            playing: 0,
            running: 0,
            amp_on: 0,
            i2s_sq: 0.0,
            amp_sq: 0.0,
            p_sq: 0.0,
            register_gain: None,
        }
    }

    /// When the next sample to render plays: every playback that ended by then is no longer read.
    pub fn next_sample_at(&self, setup: &ChainSetup) -> SimTime {
        sample_time(self.k, setup.rate.max(1))
    }

    /// Whether no sample at or after `to` has been rendered yet (the meter can still end there).
    pub fn is_before(&self, setup: &ChainSetup, to: SimTime) -> bool {
        self.k <= first_sample_at_or_after(to, setup.rate.max(1))
    }

    /// How many samples lie between the next one and `to`.
    fn samples_until(&self, setup: &ChainSetup, to: SimTime) -> u64 {
        first_sample_at_or_after(to, setup.rate.max(1)).saturating_sub(self.k)
    }

    /// Renders every sample before `to` not rendered yet (appending to `signals`, if given).
    pub fn advance(&mut self, log: &AudioLog, setup: &ChainSetup, to: SimTime, mut signals: Option<&mut Signals>) {
        let rate = setup.rate.max(1);
        let k1 = first_sample_at_or_after(to, rate).max(self.k);
        if k1 == self.k {
            return;
        }
        let changes = &log.changes;
        let mut ci = changes.partition_point(|(t, _)| *t <= self.applied);
        let mut vi = self
            .volume_applied
            .map_or(0, |w| changes.partition_point(|(t, _)| *t <= w));
        let mut pi = log.playbacks.partition_point(|p| p.end <= sample_time(self.k, rate));
        let c = Constants::of(setup);
        let dma = setup.dma_latency.as_micros();
        // Sample times as `sample_time` gives them, kept by addition: the quotient and remainder
        // of k × 10⁶ / rate, exact.
        let r = u128::from(rate);
        let start = u128::from(self.k) * 1_000_000;
        let (mut q, mut rem) = ((start / r) as u64, (start % r) as u64);
        let (step_q, step_rem, rate64) = (
            1_000_000 / u64::from(rate),
            1_000_000 % u64::from(rate),
            u64::from(rate),
        );
        // The first sample of the playback being read (it changes only with the playback).
        let mut first: Option<(usize, u64)> = None;
        let mut last = (self.applied, self.volume_applied);
        for k in self.k..k1 {
            let t = SimTime::from_micros(q);
            (q, rem) = (q + step_q, rem + step_rem);
            if rem >= rate64 {
                (q, rem) = (q + 1, rem - rate64);
            }
            while ci < changes.len() && changes[ci].0 <= t {
                self.state.apply(changes[ci].0, &changes[ci].1, &mut self.faults);
                ci += 1;
            }
            let write_t = SimTime::from_micros(t.as_micros().saturating_sub(dma));
            while vi < changes.len() && changes[vi].0 <= write_t {
                if let AudioChange::Volume(v) = changes[vi].1 {
                    self.volume = v;
                }
                vi += 1;
            }
            last = (t, Some(write_t));
            while pi < log.playbacks.len() && log.playbacks[pi].end <= t {
                pi += 1;
            }
            let sample = match log.playbacks.get(pi) {
                Some(p) if p.start <= t => {
                    self.playing += 1;
                    let n0 = match first {
                        Some((i, n0)) if i == pi => n0,
                        _ => {
                            let n0 = first_sample_at_or_after(p.start, rate);
                            first = Some((pi, n0));
                            n0
                        }
                    };
                    p.sampler.sample(k.saturating_sub(n0))
                }
                _ => 0,
            };
            let (word, pa) = self.step(setup, &c, t, sample);
            if let Some(s) = signals.as_deref_mut() {
                s.i2s.push(word);
                s.listener_pa.push(pa as f32);
            }
        }
        (self.applied, self.volume_applied) = last;
        self.k = k1;
    }

    /// One sample through codec, amplifier and speaker: the I2S word and the pressure, Pa.
    fn step(&mut self, setup: &ChainSetup, c: &Constants, t: SimTime, sample: i16) -> (i32, f64) {
        let state = &self.state;
        // Codec.
        let clocked = if state.i2s_fault || state.dummy {
            false
        } else if c.software.is_some() {
            state.tx
        } else {
            c.hardware
        };
        let word: i32 = if !clocked {
            0
        } else if let Some(gain) = c.software {
            if self.volume != self.factor_volume {
                self.factor = gain.gain(self.volume);
                self.factor_volume = self.volume;
            }
            gain.apply(sample, self.factor)
        } else {
            i32::from(sample) << 16
        };
        if clocked {
            self.running += 1;
            let x = f64::from(word) / 2_147_483_648.0;
            self.i2s_sq += x * x;
        }

        // Amplifier.
        let mut volts = 0.0;
        match setup.amp.model {
            // The I2S amplifier after a codec-less output (and after a dummy codec).
            AmpModel::Max98357a if !c.hardware => {
                let started = state.tx_since.is_some_and(|s| t >= s + c.startup);
                let active = clocked && !state.amp_shutdown && setup.amp.sd_mode != SdMode::Shutdown && started;
                if active {
                    self.amp_on += 1;
                    let left = f64::from(word) / 2_147_483_648.0;
                    let amp_in = match setup.amp.sd_mode {
                        SdMode::Left => left,
                        SdMode::Mix => left / 2.0,
                        SdMode::Right | SdMode::Shutdown => 0.0,
                    };
                    self.amp_sq += amp_in * amp_in;
                    volts = (amp_in * c.fs_peak * c.amp_gain).clamp(-c.clip, c.clip);
                }
            }
            _ if c.hardware => {
                // DAC: the register gain applies only while the device is open (else suspended).
                let dac = if state.codec_open && !state.dummy {
                    let g = match self.register_gain {
                        Some((reg, g)) if reg == state.reg32 => g,
                        _ => {
                            let g = 10f64.powf(setup.codec.register_db(state.reg32) / 20.0);
                            self.register_gain = Some((state.reg32, g));
                            g
                        }
                    };
                    (f64::from(sample) / 32768.0 * g).clamp(-1.0, 1.0)
                } else {
                    0.0
                };
                let started = state.pa_since.is_some_and(|s| t >= s + c.startup);
                if state.pa && started && !state.amp_shutdown {
                    self.amp_on += 1;
                    self.amp_sq += dac * dac;
                    volts = (dac * c.dac_peak * c.amp_gain).clamp(-c.clip, c.clip);
                }
            }
            _ => {}
        }
        let pa = if state.speaker_off { 0.0 } else { volts * c.k_spk };
        self.p_sq += pa * pa;
        (word, pa)
    }

    /// The window `[from, to)`'s figures from what was rendered (the path's state at the last sample).
    pub fn finish(&self, setup: &ChainSetup, from: SimTime, to: SimTime) -> Measurement {
        let (software, hardware) = (setup.codec.software(), setup.codec.is_hardware());
        let state = &self.state;
        let n = self.k - self.k0;
        let codec_gain_db = if hardware {
            state.codec_open.then(|| setup.codec.register_db(state.reg32))
        } else {
            software.and_then(|g| g.db(self.volume))
        };
        let frac = |c: u64| if n == 0 { 0.0 } else { c as f64 / n as f64 };
        let spl_db = (n > 0 && self.p_sq > 0.0).then(|| 10.0 * (self.p_sq / n as f64 / (P0_PA * P0_PA)).log10());
        let (from_ms, to_ms) = Measurement::window(from, to);
        let heard = verdict(spl_db, setup.ambient_dba, setup.margin_db);
        Measurement {
            from_ms,
            to_ms,
            playing: frac(self.playing),
            i2s_running: frac(self.running),
            codec_gain_db,
            codec_reg32: hardware.then_some(state.reg32),
            amp_enabled: frac(self.amp_on),
            i2s_dbfs: if self.running > 0 {
                dbfs_from_mean_square(self.i2s_sq / self.running as f64)
            } else {
                None
            },
            amp_input_dbfs: if self.amp_on > 0 {
                dbfs_from_mean_square(self.amp_sq / self.amp_on as f64)
            } else {
                None
            },
            spl_db,
            distance_m: setup.distance_m,
            ambient_dba: setup.ambient_dba,
            verdict: heard,
            audible: heard.is_audible(),
        }
    }
}

/// What a render works out once from the chain.
struct Constants {
    software: Option<SoftwareGain>,
    hardware: bool,
    fs_peak: f64,
    amp_gain: f64,
    clip: f64,
    startup: SimDuration,
    k_spk: f64,
    dac_peak: f64,
}

impl Constants {
    fn of(setup: &ChainSetup) -> Constants {
        Constants {
            software: setup.codec.software(),
            hardware: setup.codec.is_hardware(),
            fs_peak: max98357_full_scale_peak_v(),
            amp_gain: setup.amp.gain(),
            clip: setup.amp.clip_peak_v(setup.speaker.impedance_ohm),
            startup: SimDuration::from_micros((setup.amp.startup_ms * 1000.0).round() as u64),
            k_spk: setup.speaker.pascal_per_volt(setup.distance_m),
            dac_peak: std::f64::consts::SQRT_2 * (setup.dac.avdd_v / 3.3),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::source::Source;

    fn bread() -> ChainSetup {
        ChainSetup {
            codec: CodecKind::no_audio_codec_simplex(),
            rate: 24_000,
            amp: AmplifierSpec::default(),
            speaker: SpeakerSpec::default(),
            dac: DacSpec::default(),
            distance_m: 0.5,
            ambient_dba: 35.0,
            margin_db: 0.0,
            dma_latency: SimDuration::from_millis(60),
        }
    }

    fn probe_log(volume: i32) -> AudioLog {
        let mut log = AudioLog::default();
        log.record(SimTime::ZERO, AudioChange::Volume(volume));
        log.record(SimTime::ZERO, AudioChange::TxEnabled(true));
        log.play(
            SimTime::ZERO,
            SimTime::from_millis(3000),
            Source::probe(1000.0, -6.0),
            24_000,
        );
        log
    }

    #[test]
    fn bread_board_worked_examples() {
        for (v, i2s, spl) in [
            (70, -12.20, 72.9),
            (50, -18.04, 67.0),
            (40, -21.92, 63.2),
            (10, -46.00, 39.1),
        ] {
            let (m, _) = render(
                &probe_log(v),
                &bread(),
                SimTime::from_millis(1000),
                SimTime::from_millis(2000),
                false,
            );
            assert!((m.i2s_dbfs.unwrap() - i2s).abs() < 0.05, "v={v}: {:?}", m.i2s_dbfs);
            assert!((m.spl_db.unwrap() - spl).abs() < 0.05, "v={v}: {:?}", m.spl_db);
        }
        let (m, _) = render(
            &probe_log(0),
            &bread(),
            SimTime::from_millis(1000),
            SimTime::from_millis(2000),
            false,
        );
        assert_eq!((m.i2s_dbfs, m.spl_db, m.verdict.name()), (None, None, "silent"));
    }

    #[test]
    fn the_dma_ring_keeps_the_old_gain_for_sixty_ms() {
        let mut log = probe_log(70);
        log.record(SimTime::from_millis(1000), AudioChange::Volume(10));
        let before = |a, b| {
            render(&log, &bread(), SimTime::from_millis(a), SimTime::from_millis(b), false)
                .0
                .i2s_dbfs
                .unwrap()
        };
        assert!((before(1000, 1060) + 12.20).abs() < 0.05, "still the old gain");
        assert!(
            (before(1060, 1100) + 46.00).abs() < 0.05,
            "the new gain after the ring drained"
        );
    }

    #[test]
    fn es8311_worked_examples() {
        let setup = ChainSetup {
            codec: CodecKind::named("box_audio_codec").unwrap(),
            amp: AmplifierSpec {
                model: AmpModel::Ns4150b,
                gain_db: 20.0 * 1.6f64.log10(),
                startup_ms: 120.0,
                ..AmplifierSpec::default()
            },
            ..bread()
        };
        for (v, spl) in [(70, 66.6), (40, 51.6)] {
            let mut log = AudioLog::default();
            log.record(SimTime::ZERO, AudioChange::CodecOpen(true));
            log.record(SimTime::ZERO, AudioChange::Register32((98 + v) as u8));
            log.record(SimTime::ZERO, AudioChange::PaEnabled(true));
            log.play(
                SimTime::ZERO,
                SimTime::from_millis(3000),
                Source::probe(1000.0, -6.0),
                24_000,
            );
            let (m, _) = render(
                &log,
                &setup,
                SimTime::from_millis(1000),
                SimTime::from_millis(2000),
                false,
            );
            assert!((m.i2s_dbfs.unwrap() + 6.0).abs() < 0.05);
            assert!((m.spl_db.unwrap() - spl).abs() < 0.05, "v={v}: {:?}", m.spl_db);
        }
    }
}
