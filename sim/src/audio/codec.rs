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
    /// `Es8311AudioCodec`: ES8311 DAC, volume in REG 0x32, written only while the codec is open.
    Es8311,
    /// `BoxAudioCodec`: ES8311 out + ES7210 in, REG 0x32 written on every volume change.
    BoxAudioCodec,
    /// `DummyAudioCodec`: every call succeeds, the volume is only stored, `Write` discards.
    Dummy,
}

impl CodecKind {
    /// The firmware's codec class.
    pub fn class_name(self) -> &'static str {
        match self {
            CodecKind::NoAudioCodecSimplex => "NoAudioCodecSimplex",
            CodecKind::NoAudioCodecDuplex => "NoAudioCodecDuplex",
            CodecKind::Es8311 => "Es8311AudioCodec",
            CodecKind::BoxAudioCodec => "BoxAudioCodec",
            CodecKind::Dummy => "DummyAudioCodec",
        }
    }

    /// The codec's `duplex()`: input and output share it, so an enabled mic keeps the output from powering down.
    pub fn is_duplex(self) -> bool {
        matches!(
            self,
            CodecKind::NoAudioCodecDuplex | CodecKind::Es8311 | CodecKind::BoxAudioCodec
        )
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
