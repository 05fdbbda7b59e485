//! What can play: silence, a probe tone, PCM from a WAV file, and the device's own sounds
//! (docs/reference/acoustics.md §1.1 probe; `main/assets` OGG prompts modelled as tone bursts).
//!
//! Sources produce int16 samples at the codec's output rate, deterministically.

use std::sync::Arc;

use crate::time::SimDuration;

/// A sound, before any volume is applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// `round(A·sin(2π·f·n/fs))` with `A = round(32768·10^(dBFS/20))` (clamped to int16).
    Tone {
        /// Frequency, Hz.
        freq_hz: f64,
        /// Level, dBFS (0 dBFS = full-scale sine).
        dbfs: f64,
    },
    /// PCM samples (mono) at their own rate; resampled by linear interpolation.
    Pcm {
        /// Sample rate of `samples`, Hz.
        rate: u32,
        /// Mono int16 samples.
        samples: Arc<[i16]>,
    },
    /// A device prompt (the OGG assets are not modelled sample-exact).
    Prompt(Prompt),
}

/// The device's own sounds, modelled as tone bursts of plausible level (an assumption: the
/// OGG files are not part of the model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prompt {
    /// `OGG_SUCCESS` after activation.
    Success,
    /// `OGG_UPGRADE` when an OTA starts.
    Upgrade,
    /// `OGG_EXCLAMATION` on errors.
    Exclamation,
    /// `OGG_POPUP` when listening starts after a wake word.
    Popup,
    /// `OGG_VIBRATION` with a server's `alert` message.
    Vibration,
}

impl Prompt {
    /// The prompt's name in reports and traces (`success`, `upgrade`, `exclamation`).
    pub fn name(self) -> &'static str {
        match self {
            Prompt::Success => "success",
            Prompt::Upgrade => "upgrade",
            Prompt::Exclamation => "exclamation",
            Prompt::Popup => "popup",
            Prompt::Vibration => "vibration",
        }
    }
    /// (frequency, level, duration) of the burst.
    pub fn burst(self) -> (f64, f64, SimDuration) {
        match self {
            Prompt::Success => (1000.0, -12.0, SimDuration::from_millis(600)),
            Prompt::Upgrade => (800.0, -12.0, SimDuration::from_millis(1200)),
            Prompt::Exclamation => (1500.0, -12.0, SimDuration::from_millis(500)),
            Prompt::Popup => (1200.0, -12.0, SimDuration::from_millis(300)),
            Prompt::Vibration => (200.0, -12.0, SimDuration::from_millis(400)),
        }
    }
}

impl Source {
    /// The 1 kHz probe of docs/reference/acoustics.md §5 at `dbfs`.
    pub fn probe(freq_hz: f64, dbfs: f64) -> Self {
        Source::Tone { freq_hz, dbfs }
    }

    /// Natural duration (PCM and prompts); tones play as long as asked.
    pub fn natural_duration(&self) -> Option<SimDuration> {
        match self {
            Source::Tone { .. } => None,
            Source::Pcm { rate, samples } => Some(SimDuration::from_micros(
                samples.len() as u64 * 1_000_000 / u64::from((*rate).max(1)),
            )),
            Source::Prompt(p) => Some(p.burst().2),
        }
    }

    /// A sampler at the codec's output rate.
    pub fn sampler(&self, rate: u32) -> Sampler {
        match self {
            Source::Tone { freq_hz, dbfs } => Sampler::tone(*freq_hz, *dbfs, rate),
            Source::Prompt(p) => {
                let (f, l, _) = p.burst();
                Sampler::tone(f, l, rate)
            }
            Source::Pcm {
                rate: src_rate,
                samples,
            } => Sampler::Pcm {
                samples: samples.clone(),
                step: f64::from(*src_rate) / f64::from(rate.max(1)),
            },
        }
    }

    /// One line for reports (e.g. `tone 1000 Hz at -6 dBFS`).
    pub fn describe(&self) -> String {
        match self {
            Source::Tone { freq_hz, dbfs } => format!("tone {freq_hz} Hz at {dbfs} dBFS"),
            Source::Pcm { rate, samples } => format!("PCM {} samples at {rate} Hz", samples.len()),
            Source::Prompt(p) => format!("prompt {}", p.name()),
        }
    }
}

/// Produces sample `n` (counted from the start of the playback) of a source.
#[derive(Clone, Debug)]
pub enum Sampler {
    /// One period, precomputed when the frequency divides the rate; otherwise computed per sample.
    Table {
        /// One period of int16 samples.
        table: Arc<[i16]>,
    },
    /// A sine computed per sample (the period is not a whole number of samples).
    Tone {
        /// Peak amplitude, int16 units.
        amplitude: f64,
        /// Phase step per output sample, radians.
        omega: f64,
    },
    /// PCM read at a fractional position, linearly interpolated (0 past the end).
    Pcm {
        /// The source samples at their own rate.
        samples: Arc<[i16]>,
        /// Source samples per output sample (source rate / output rate).
        step: f64,
    },
}

impl Sampler {
    fn tone(freq_hz: f64, dbfs: f64, rate: u32) -> Sampler {
        let amplitude = (32768.0 * 10f64.powf(dbfs / 20.0)).round().min(32767.0);
        let rate_f = f64::from(rate.max(1));
        let period = rate_f / freq_hz;
        // A whole period of at least one sample (an infinite frequency has a period of 0).
        if freq_hz > 0.0 && period >= 1.0 && period.fract() == 0.0 && period <= 48_000.0 {
            let n = period as usize;
            let table: Vec<i16> = (0..n)
                .map(|i| (amplitude * (std::f64::consts::TAU * i as f64 / period).sin()).round() as i16)
                .collect();
            Sampler::Table { table: table.into() }
        } else {
            Sampler::Tone {
                amplitude,
                omega: std::f64::consts::TAU * freq_hz / rate_f,
            }
        }
    }

    /// Sample `n` of the playback.
    #[inline]
    pub fn sample(&self, n: u64) -> i16 {
        match self {
            Sampler::Table { table } => table[(n % table.len() as u64) as usize],
            Sampler::Tone { amplitude, omega } => (amplitude * (omega * n as f64).sin()).round() as i16,
            Sampler::Pcm { samples, step } => {
                let pos = n as f64 * step;
                let i = pos.floor() as usize;
                let frac = pos - i as f64;
                let a = samples.get(i).copied().unwrap_or(0) as f64;
                let b = samples.get(i + 1).copied().unwrap_or(0) as f64;
                (a + (b - a) * frac).round() as i16
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_has_amplitude_16423_and_24_samples_per_period() {
        let Sampler::Table { table } = Source::probe(1000.0, -6.0).sampler(24_000) else {
            panic!("table")
        };
        assert_eq!(table.len(), 24);
        assert_eq!(table[6], 16423);
        assert_eq!(table[18], -16423);
    }

    #[test]
    fn impossible_tones_sample_without_a_panic() {
        for (hz, db) in [
            (f64::INFINITY, -6.0),
            (f64::NAN, -6.0),
            (-1000.0, -6.0),
            (0.0, -6.0),
            (1e308, f64::NAN),
        ] {
            let s = Source::probe(hz, db).sampler(24_000);
            for n in [0, 1, 7, u64::MAX] {
                let _ = s.sample(n);
            }
        }
    }
}
