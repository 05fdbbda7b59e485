//! `Es8374AudioCodec`: the ES8374 DAC, REG 0x38 = trunc(−2·D(v)) (0.5 dB attenuation steps, no
//! hardware-gain compensation), written on every volume change (docs/reference/codecs.md §2).

use super::{Family, Pa, Volume, attenuation_register, codec_dev_curve_db};

pub(super) struct Es8374;

impl Family for Es8374 {
    fn name(&self) -> &'static str {
        "es8374"
    }
    fn class_name(&self) -> &'static str {
        "Es8374AudioCodec"
    }
    fn law(&self) -> &'static str {
        "ES8374 REG 0x38 = trunc(-2 * D(v)), -0.5 dB a code, written on every change (docs/reference/codecs.md §2)"
    }
    fn volume(&self) -> Volume {
        Volume::Register
    }
    fn volume_register(&self, volume: i32, _hw_gain_db: f32) -> u8 {
        attenuation_register(codec_dev_curve_db(volume), 0xC0)
    }
    fn register_db(&self, reg: u8) -> f64 {
        -0.5 * f64::from(reg)
    }
    fn pa(&self) -> Pa {
        Pa::CodecPin
    }
}
