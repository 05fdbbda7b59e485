//! `CoreS3AudioCodec`'s AW88298 smart amplifier: HAGCCFG4's VOL byte = trunc(−2·(D(v) − H)) with
//! `pa_gain` 1, decoded as Awinic's driver does (high nibble × 6 dB + low nibble × 0.5 dB of
//! attenuation); written on every volume change (docs/reference/codecs.md §5). The chip is the
//! amplifier: there is no PA pin.

use super::{Family, Pa, Volume, attenuation_register, codec_dev_curve_db};

pub(super) struct Aw88298;

impl Family for Aw88298 {
    fn name(&self) -> &'static str {
        "aw88298"
    }
    fn class_name(&self) -> &'static str {
        "CoreS3AudioCodec"
    }
    fn law(&self) -> &'static str {
        "AW88298 VOL byte = trunc(-2 * (D(v) - H - 1)), read as high nibble * -6 dB + low nibble * -0.5 dB (Awinic's decoding; esp_codec_dev assumes -0.5 dB a code), written on every change (docs/reference/codecs.md §5)"
    }
    fn volume(&self) -> Volume {
        Volume::Register
    }
    fn volume_register(&self, volume: i32, hw_gain_db: f32) -> u8 {
        // CoreS3 configures pa_gain 1 on top of the voltages.
        attenuation_register(codec_dev_curve_db(volume) - (hw_gain_db + 1.0), 0xC0)
    }
    fn register_db(&self, reg: u8) -> f64 {
        -(6.0 * f64::from(reg >> 4) + 0.5 * f64::from(reg & 15))
    }
    fn pa(&self) -> Pa {
        Pa::IsTheAmplifier
    }
    fn board_lines(&self) -> &'static [&'static str] {
        &["  pa_always_on: true            # the AW88298 is the amplifier (no PA pin)"]
    }
}
