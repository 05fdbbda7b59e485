//! Volume laws of the codecs (docs/reference/firmware.md §9.2–9.3, docs/reference/acoustics.md §1).
//!
//! * `NoAudioCodec*`: software gain inside `Write`: `factor = trunc((v/100)² × 65536)` computed in
//!   double precision, each int16 sample becomes the 32-bit I2S word `clamp_i32(s × factor)`
//!   (`main/audio/codecs/no_audio_codec.cc`).
//! * ES8311 via `esp_codec_dev` v1.5.11: the default curve (0 → −96 dB, 1…100 → −50 + 0.5·v),
//!   hardware-gain compensation for `pa_voltage = 5.0`, `codec_dac_voltage = 3.3`, then the
//!   register quantiser of REG 0x32 (0.5 dB/code, 0x00 = −95.5 dB), evaluated in float32 as the
//!   driver does (`esp_codec_dev.c`, `esp_codec_dev_vol.c`, `es8311.c`).
//!
//! Pure arithmetic; knows nothing about time.

/// `factor(v)` of `NoAudioCodec::Write` for a volume (values outside 0..=100 are what the
/// firmware would compute for them too).
pub fn software_factor(volume: i32) -> i64 {
    let v = f64::from(volume) / 100.0;
    (v * v * 65536.0) as i64
}

/// One I2S word from one int16 sample: `clamp_int32((int64)s × factor)`.
pub fn software_word(sample: i16, factor: i64) -> i32 {
    (i64::from(sample) * factor).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// `esp_codec_dev`'s default volume curve in dB (float32).
pub fn codec_dev_curve_db(volume: i32) -> f32 {
    if volume <= 0 {
        -96.0
    } else if volume >= 100 {
        0.0
    } else {
        // Two-point curve {0 → −50 dB, 100 → 0 dB} interpolated in float.
        -50.0f32 + (volume as f32) * (50.0f32 / 100.0f32)
    }
}

/// Hardware-gain compensation `20·log10(codec_dac_voltage / pa_voltage) + pa_gain` (float32).
pub fn hw_gain_db(pa_voltage: f32, codec_dac_voltage: f32, pa_gain_db: f32) -> f32 {
    20.0f32 * (codec_dac_voltage / pa_voltage).log10() + pa_gain_db
}

/// ES8311 REG 0x32 for a volume: `trunc((D(v) − H + 95.5) × 2)`, clamped to 0x00..=0xFF.
pub fn es8311_register(volume: i32, hw_gain_db: f32) -> u8 {
    let target = codec_dev_curve_db(volume) - hw_gain_db;
    if target >= 32.0 {
        return 0xFF;
    }
    if target <= -95.5 {
        return 0x00;
    }
    ((target + 95.5f32) * 2.0f32) as u8
}

/// esp_codec_dev's software volume gain (`audio_codec_sw_vol.c`): 0 at or below −96 dB, else
/// trunc(10^(D/20) · 32768), the exponent in double precision.
pub fn q15_gain(volume: i32) -> i64 {
    let d = codec_dev_curve_db(volume);
    if d <= -96.0 {
        return 0;
    }
    ((f64::from(d / 20.0) * std::f64::consts::LN_10).exp() * 32768.0) as i64
}

/// An attenuation register in 0.5 dB steps (ES8374 REG 0x38, ES8388 REG 0x1A/0x1B):
/// `trunc(−2·dB)` in float32, clamped to `0..=max`.
pub fn attenuation_register(db: f32, max: u8) -> u8 {
    let code = -2.0f32 * db;
    if code <= 0.0 {
        0
    } else if code >= f32::from(max) {
        max
    } else {
        code as u8
    }
}

/// The DAC digital gain a REG 0x32 value applies: `−95.5 + 0.5·reg` dB (0x00 is not a mute).
pub fn es8311_register_db(reg: u8) -> f64 {
    -95.5 + 0.5 * f64::from(reg)
}

/// Which codec class the board constructs (`main/audio/codecs/*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodecKind {
    /// `NoAudioCodecSimplex`: separate I2S ports for speaker and mic, software volume (bread boards).
    NoAudioCodecSimplex,
    /// `NoAudioCodecDuplex`: one I2S port clocking TX and RX at the output rate, software volume.
    NoAudioCodecDuplex,
    /// `NoAudioCodecSimplexPdm`: standard I2S out (software volume, as the other `NoAudioCodec`
    /// classes: `Write` is theirs), a PDM microphone in.
    NoAudioCodecSimplexPdm,
    /// `Es8311AudioCodec`: ES8311 DAC, volume in REG 0x32, written only while the codec is open.
    Es8311,
    /// `BoxAudioCodec`: ES8311 out + ES7210 in, REG 0x32 written on every volume change.
    BoxAudioCodec,
    /// `Es8374AudioCodec`: ES8374 DAC, REG 0x38 = trunc(−2·D(v)) (0.5 dB attenuation steps, no
    /// hardware-gain compensation), written on every volume change (docs/reference/codecs.md §2).
    Es8374,
    /// `Es8388AudioCodec`: ES8388 DAC, REG 0x1A/0x1B = trunc(−2·(D(v) − H)), flat 0 dB from
    /// volume 92, written on every volume change; output disable mutes (docs/reference/codecs.md §3).
    Es8388,
    /// `Es8389AudioCodec`: ES8389 DAC, REG 0x46/0x47 with ES8311's quantiser (98 + v), written on
    /// every volume change (docs/reference/codecs.md §4).
    Es8389,
    /// `CoreS3AudioCodec`'s AW88298 smart amplifier: HAGCCFG4's VOL byte = trunc(−2·(D(v) − H))
    /// with `pa_gain` 1, decoded as Awinic's driver does (high nibble × 6 dB + low nibble ×
    /// 0.5 dB of attenuation); written on every volume change (docs/reference/codecs.md §5).
    Aw88298,
    /// `AdcPdmAudioCodec`: no codec chip, esp_codec_dev's software volume on a PDM output: a Q15
    /// gain trunc(10^(D(v)/20) · 32768) on each sample (docs/reference/codecs.md §7).
    AdcPdm,
    /// `DummyAudioCodec`: every call succeeds, the volume is only stored, `Write` discards.
    Dummy,
}

impl CodecKind {
    /// The firmware's codec class.
    pub fn class_name(self) -> &'static str {
        match self {
            CodecKind::NoAudioCodecSimplex => "NoAudioCodecSimplex",
            CodecKind::NoAudioCodecDuplex => "NoAudioCodecDuplex",
            CodecKind::NoAudioCodecSimplexPdm => "NoAudioCodecSimplexPdm",
            CodecKind::Es8311 => "Es8311AudioCodec",
            CodecKind::BoxAudioCodec => "BoxAudioCodec",
            CodecKind::Es8374 => "Es8374AudioCodec",
            CodecKind::Es8388 => "Es8388AudioCodec",
            CodecKind::Es8389 => "Es8389AudioCodec",
            CodecKind::Aw88298 => "CoreS3AudioCodec",
            CodecKind::AdcPdm => "AdcPdmAudioCodec",
            CodecKind::Dummy => "DummyAudioCodec",
        }
    }

    /// The volume law in one line, with where it is described (`render --json`, `boards`).
    pub fn law(self) -> &'static str {
        match self {
            CodecKind::NoAudioCodecSimplex | CodecKind::NoAudioCodecDuplex | CodecKind::NoAudioCodecSimplexPdm => {
                "software gain in Write: factor = trunc((v/100)^2 * 65536) on each sample (docs/reference/firmware.md §9.2)"
            }
            CodecKind::Es8311 => {
                "ES8311 REG 0x32 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written only while the codec is open (docs/reference/acoustics.md §1.2)"
            }
            CodecKind::BoxAudioCodec => {
                "ES8311 REG 0x32 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written on every change (docs/reference/acoustics.md §1.2)"
            }
            CodecKind::Es8374 => {
                "ES8374 REG 0x38 = trunc(-2 * D(v)), -0.5 dB a code, written on every change (docs/reference/codecs.md §2)"
            }
            CodecKind::Es8388 => {
                "ES8388 REG 0x1A/0x1B = trunc(-2 * (D(v) - H)), -0.5 dB a code, 0 dB from volume 92 (docs/reference/codecs.md §3)"
            }
            CodecKind::Es8389 => {
                "ES8389 REG 0x46/0x47 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written on every change (docs/reference/codecs.md §4)"
            }
            CodecKind::Aw88298 => {
                "AW88298 VOL byte = trunc(-2 * (D(v) - H - 1)), read as high nibble * -6 dB + low nibble * -0.5 dB (Awinic's decoding; esp_codec_dev assumes -0.5 dB a code), written on every change (docs/reference/codecs.md §5)"
            }
            CodecKind::AdcPdm => {
                "software Q15 gain trunc(10^(D(v)/20) * 32768) on each sample (esp_codec_dev sw_vol; docs/reference/codecs.md §7)"
            }
            CodecKind::Dummy => "none: the volume is stored and nothing is heard",
        }
    }

    /// The volume is a software gain inside `Write` (the `NoAudioCodec` family).
    pub fn is_software(self) -> bool {
        matches!(
            self,
            CodecKind::NoAudioCodecSimplex
                | CodecKind::NoAudioCodecDuplex
                | CodecKind::NoAudioCodecSimplexPdm
                | CodecKind::AdcPdm
        )
    }

    /// The software gain `Write` applies at `volume` (the `NoAudioCodec` factor, or the Q15
    /// gain of esp_codec_dev's software volume).
    pub fn software_gain(self, volume: i32) -> i64 {
        match self {
            CodecKind::AdcPdm => q15_gain(volume),
            _ => software_factor(volume),
        }
    }

    /// One output word from one sample at a software gain: `NoAudioCodec`'s 32-bit
    /// `clamp(s × factor)`, or the sw_vol's `(s × gain) >> 15` as the top half of the word.
    pub fn software_apply(self, sample: i16, gain: i64) -> i32 {
        match self {
            CodecKind::AdcPdm => {
                let v = (i64::from(sample) * gain) >> 15;
                (v.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i32) << 16
            }
            _ => software_word(sample, gain),
        }
    }

    /// The software gain in dB (`None` for silence).
    pub fn software_gain_db(self, volume: i32) -> Option<f64> {
        let g = self.software_gain(volume);
        let full = if self == CodecKind::AdcPdm { 32768.0 } else { 65536.0 };
        (g > 0).then(|| 20.0 * (g as f64 / full).log10())
    }

    /// The volume is a codec chip's register (esp_codec_dev).
    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            CodecKind::Es8311
                | CodecKind::BoxAudioCodec
                | CodecKind::Es8374
                | CodecKind::Es8388
                | CodecKind::Es8389
                | CodecKind::Aw88298
        )
    }

    /// The volume register a hardware codec's driver writes for `volume` (`hw_gain_db` from the
    /// board's voltages; ES8374's driver has none). 0 for the other codecs.
    pub fn volume_register(self, volume: i32, hw_gain_db: f32) -> u8 {
        match self {
            CodecKind::Es8311 | CodecKind::BoxAudioCodec | CodecKind::Es8389 => es8311_register(volume, hw_gain_db),
            CodecKind::Es8374 => attenuation_register(codec_dev_curve_db(volume), 0xC0),
            CodecKind::Es8388 => attenuation_register(codec_dev_curve_db(volume) - hw_gain_db, 0xC0),
            // CoreS3 configures pa_gain 1 on top of the voltages.
            CodecKind::Aw88298 => attenuation_register(codec_dev_curve_db(volume) - (hw_gain_db + 1.0), 0xC0),
            _ => 0,
        }
    }

    /// The DAC gain in dB a volume register value applies.
    pub fn register_db(self, reg: u8) -> f64 {
        match self {
            CodecKind::Es8374 | CodecKind::Es8388 => -0.5 * f64::from(reg),
            CodecKind::Aw88298 => -(6.0 * f64::from(reg >> 4) + 0.5 * f64::from(reg & 15)),
            _ => es8311_register_db(reg),
        }
    }

    /// The codec device is open while output is enabled only (every hardware codec but
    /// `Es8311AudioCodec`, whose device is open while input or output is).
    pub fn open_follows_output(self) -> bool {
        self.is_hardware() && self != CodecKind::Es8311
    }

    /// The codec's `duplex()`: input and output share it, so an enabled mic keeps the output from powering down.
    pub fn is_duplex(self) -> bool {
        matches!(self, CodecKind::NoAudioCodecDuplex) || self.is_hardware()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_table_matches_the_firmware_points() {
        let expected = [
            (0, 0),
            (1, 6),
            (10, 655),
            (25, 4096),
            (40, 10485),
            (50, 16384),
            (70, 32112),
            (99, 64231),
            (100, 65536),
        ];
        for (v, f) in expected {
            assert_eq!(software_factor(v), f, "factor({v})");
        }
    }

    #[test]
    fn full_scale_times_full_volume_never_clips() {
        assert_eq!(software_word(i16::MIN, software_factor(100)), i32::MIN);
        assert_eq!(software_word(i16::MAX, software_factor(100)), 32767 * 65536);
    }

    /// docs/reference/codecs.md: the laws' worked values (0, 40, 70, 100 and 70 → 40).
    #[test]
    fn each_family_pins_its_law() {
        let h = hw_gain_db(5.0, 3.3, 0.0);
        let db = |k: CodecKind, v: i32| k.register_db(k.volume_register(v, h));
        // ES8374: 100 − v, 0xC0 for 0; no hardware-gain compensation.
        assert_eq!(CodecKind::Es8374.volume_register(40, h), 60);
        assert_eq!(CodecKind::Es8374.volume_register(0, h), 0xC0);
        assert_eq!(db(CodecKind::Es8374, 0), -96.0);
        assert_eq!(db(CodecKind::Es8374, 100), 0.0);
        assert_eq!(db(CodecKind::Es8374, 40) - db(CodecKind::Es8374, 70), -15.0);
        // ES8388: max(0, 92 − v), 0xB8 for 0: flat 0 dB from 92 up.
        assert_eq!(CodecKind::Es8388.volume_register(40, h), 52);
        assert_eq!(CodecKind::Es8388.volume_register(0, h), 0xB8);
        assert_eq!(db(CodecKind::Es8388, 0), -92.0);
        assert_eq!(db(CodecKind::Es8388, 92), 0.0);
        assert_eq!(db(CodecKind::Es8388, 100), 0.0);
        assert_eq!(db(CodecKind::Es8388, 91), -0.5);
        assert_eq!(db(CodecKind::Es8388, 40) - db(CodecKind::Es8388, 70), -15.0);
        // ES8389: ES8311's quantiser, 98 + v.
        assert_eq!(CodecKind::Es8389.volume_register(40, h), 138);
        assert_eq!(db(CodecKind::Es8389, 0), -92.5);
        assert_eq!(db(CodecKind::Es8389, 100), 3.5);
        assert_eq!(db(CodecKind::Es8389, 40) - db(CodecKind::Es8389, 70), -15.0);
        // AW88298: max(0, 94 − v), 0xBA for 0, decoded as Awinic's driver does.
        assert_eq!(CodecKind::Aw88298.volume_register(40, h), 0x36);
        assert_eq!(CodecKind::Aw88298.volume_register(70, h), 0x18);
        assert_eq!(CodecKind::Aw88298.volume_register(0, h), 0xBA);
        assert_eq!(db(CodecKind::Aw88298, 0), -71.0);
        assert_eq!(db(CodecKind::Aw88298, 100), 0.0);
        assert_eq!(db(CodecKind::Aw88298, 40) - db(CodecKind::Aw88298, 70), -11.0);
        // The saw-tooth: one volume step up, 1.5 dB down where the low nibble wraps.
        assert_eq!(db(CodecKind::Aw88298, 15) - db(CodecKind::Aw88298, 14), -1.5);
        // AdcPdm: the Q15 gains of docs/reference/codecs.md §7.2.
        for (v, g) in [(0, 0), (1, 109), (40, 1036), (70, 5827), (100, 32768)] {
            assert_eq!(q15_gain(v), g, "volume {v}");
        }
        let pdm = |v| CodecKind::AdcPdm.software_gain_db(v).expect("not silent");
        assert!((pdm(40) - pdm(70) + 15.0).abs() < 0.01);
        assert_eq!(
            CodecKind::AdcPdm.software_apply(i16::MAX, 32768),
            i32::from(i16::MAX) << 16
        );
    }

    #[test]
    fn es8311_register_is_98_plus_volume() {
        let h = hw_gain_db(5.0, 3.3, 0.0);
        assert!((h - (-3.6091)).abs() < 1e-3, "{h}");
        assert_eq!(es8311_register(0, h), 0x06);
        for v in 1..=100 {
            assert_eq!(i32::from(es8311_register(v, h)), 98 + v, "volume {v}");
        }
        assert_eq!(es8311_register_db(0xBF), 0.0);
        assert_eq!(es8311_register_db(0xA8), -11.5);
    }
}
