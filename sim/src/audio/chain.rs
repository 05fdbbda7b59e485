//! The analog half of the chain, as data plus formulas: DAC full scale, amplifier, speaker and
//! room (docs/reference/acoustics.md §2–§4). Every default carries its source.
//!
//! Knows nothing about time or the device; `render` drives it sample by sample.

use serde::Deserialize;

/// Reference pressure, 20 µPa.
pub const P0_PA: f64 = 20e-6;

/// The amplifier stage between the digital audio and the speaker.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AmplifierSpec {
    /// Which amplifier part.
    pub model: AmpModel,
    /// Voltage gain in dB.
    #[serde(default = "default_max98357_gain")]
    pub gain_db: f64,
    /// MAX98357A SD_MODE wiring (ignored by other models).
    #[serde(default = "default_sd_mode")]
    pub sd_mode: SdMode,
    /// Supply voltage; the clip level scales with VDD/5 V.
    #[serde(default = "default_supply")]
    pub supply_v: f64,
    /// Output power at 1 % THD into the speaker, at 5 V (the hard-clip level).
    #[serde(default = "default_p1_w")]
    pub p_1pct_w: f64,
    /// Muted start-up after enable (MAX98357A t_ON 7 ms typ / 7.5 max; NS4150B T_st 120 ms).
    #[serde(default = "default_startup_ms")]
    pub startup_ms: f64,
    /// Where the figures come from (data sheet, section).
    #[serde(default)]
    pub source: String,
}

fn default_max98357_gain() -> f64 {
    // MAX98357A Table 8: GAIN_SLOT unconnected (breakout default) = 9 dB.
    9.0
}
fn default_sd_mode() -> SdMode {
    // Breakout with a 1 MΩ pull-up to VIN, SD open: 0.45 V ⇒ (L+R)/2 (docs/reference/acoustics.md §2.3).
    SdMode::Mix
}
fn default_supply() -> f64 {
    5.0
}
fn default_p1_w() -> f64 {
    // MAX98357A EC: 4 Ω + 33 µH, VDD 5 V: 2.5 W at 1 % THD.
    2.5
}
fn default_startup_ms() -> f64 {
    // MAX98357A t_ON: 7 ms typ, 7.5 ms max ("Startup").
    7.5
}

impl Default for AmplifierSpec {
    fn default() -> Self {
        AmplifierSpec {
            model: AmpModel::Max98357a,
            gain_db: default_max98357_gain(),
            sd_mode: default_sd_mode(),
            supply_v: default_supply(),
            p_1pct_w: default_p1_w(),
            startup_ms: default_startup_ms(),
            source: "MAX98357A data sheet Rev 16: Table 8, EC Output Power, Startup".into(),
        }
    }
}

/// Which amplifier.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AmpModel {
    /// I2S-input class D: takes the I2S words, standby while BCLK is stopped.
    Max98357a,
    /// Analog-input class D after a codec DAC, enabled by a PA pin (or always on).
    Ns4150b,
}

impl AmpModel {
    /// The part number as its datasheet writes it.
    pub fn part(self) -> &'static str {
        match self {
            AmpModel::Max98357a => "MAX98357A",
            AmpModel::Ns4150b => "NS4150B",
        }
    }
}

/// MAX98357A SD_MODE channel selection (Table 5).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SdMode {
    /// SD_MODE above B2 (~1.4 V): the left I2S word.
    Left,
    /// SD_MODE between B1 and B2: the right word (always 0 here, so silent).
    Right,
    /// SD_MODE between B0 and B1: (left + right)/2, i.e. −6.02 dB (open SD with a breakout pull-up).
    Mix,
    /// SD_MODE below B0: shutdown, outputs Hi-Z.
    Shutdown,
}

/// The loudspeaker.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpeakerSpec {
    /// dB SPL at 1 W / 1 m on axis.
    #[serde(default = "default_sensitivity")]
    pub sensitivity_db: f64,
    /// Nominal impedance, ohms.
    #[serde(default = "default_impedance")]
    pub impedance_ohm: f64,
    /// Resonance, as the datasheet gives it. Recorded, not applied: the rendering does not
    /// filter broadband sources by it (docs/reference/acoustics.md §4.5).
    #[serde(default = "default_f0")]
    pub f0_hz: f64,
    /// Where the figures come from (spec sheet).
    #[serde(default)]
    pub source: String,
}

fn default_sensitivity() -> f64 {
    // Micro-speaker sheets converted to 1 W/1 m: 79, 80, 78 dB (docs/reference/acoustics.md §3).
    80.0
}
fn default_impedance() -> f64 {
    4.0
}
fn default_f0() -> f64 {
    450.0
}

impl Default for SpeakerSpec {
    fn default() -> Self {
        SpeakerSpec {
            sensitivity_db: default_sensitivity(),
            impedance_ohm: default_impedance(),
            f0_hz: default_f0(),
            source: "micro-speaker spec sheets, docs/reference/acoustics.md §3 (80 dB/1 W/1 m, 4 Ω)".into(),
        }
    }
}

/// The codec DAC's analog full scale (ES8311: AVDD/3.3 Vrms differential at 0 dBFS).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DacSpec {
    /// Codec analog supply AVDD, V (scales the DAC full scale).
    #[serde(default = "default_avdd")]
    pub avdd_v: f64,
    /// `pa_voltage` and `codec_dac_voltage` handed to `esp_codec_dev` (hardware-gain compensation).
    #[serde(default = "default_pa_voltage")]
    pub pa_voltage: f64,
    /// `codec_dac_voltage` handed to `esp_codec_dev`, V (defaults to 3.3, like AVDD).
    #[serde(default = "default_avdd")]
    pub codec_dac_voltage: f64,
}

fn default_avdd() -> f64 {
    3.3
}
fn default_pa_voltage() -> f64 {
    5.0
}

impl Default for DacSpec {
    fn default() -> Self {
        DacSpec {
            avdd_v: 3.3,
            pa_voltage: 5.0,
            codec_dac_voltage: 3.3,
        }
    }
}

impl AmplifierSpec {
    /// Peak output voltage where the supply clips (1 %-THD power into R, scaled by VDD/5 V).
    pub fn clip_peak_v(&self, impedance_ohm: f64) -> f64 {
        (self.p_1pct_w * impedance_ohm).sqrt() * std::f64::consts::SQRT_2 * (self.supply_v / 5.0)
    }

    /// Linear voltage gain.
    pub fn gain(&self) -> f64 {
        10f64.powf(self.gain_db / 20.0)
    }
}

/// MAX98357A: a full-scale digital sine gives 2.1 dBV (1.274 Vrms) before the gain
/// ("Gain Selection"): the peak volts of a full-scale word.
pub fn max98357_full_scale_peak_v() -> f64 {
    10f64.powf(2.1 / 20.0) * std::f64::consts::SQRT_2
}

impl SpeakerSpec {
    /// Pascals at `distance_m` per volt across the speaker: from
    /// `SPL = S + 10·log10(V²/R) − 20·log10(d)`.
    pub fn pascal_per_volt(&self, distance_m: f64) -> f64 {
        P0_PA * 10f64.powf(self.sensitivity_db / 20.0) / self.impedance_ohm.sqrt() / distance_m.max(1e-3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_levels_match_acoustics_2_4() {
        let a = AmplifierSpec::default();
        assert!((a.clip_peak_v(4.0) / std::f64::consts::SQRT_2 - 3.162).abs() < 0.01);
    }

    #[test]
    fn spl_formula_reproduces_the_worked_example() {
        // 0.441 Vrms into 4 Ω at 0.5 m with 80 dB/1 W/1 m ⇒ 72.9 dB SPL.
        let s = SpeakerSpec::default();
        let p_rms = 0.441 * s.pascal_per_volt(0.5);
        let spl = 20.0 * (p_rms / P0_PA).log10();
        assert!((spl - 72.9).abs() < 0.05, "{spl}");
    }
}
