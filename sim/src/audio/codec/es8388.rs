//! `Es8388AudioCodec`: the ES8388 DAC, REG 0x1A/0x1B = trunc(−2·(D(v) − H)), flat 0 dB from
//! volume 92, written on every volume change; output disable mutes (docs/reference/codecs.md
//! §3). `Tab5AudioCodec` is modelled with its law.

use super::{Family, Pa, Volume, attenuation_register, codec_dev_curve_db};

pub(super) struct Es8388;

impl Family for Es8388 {
    fn name(&self) -> &'static str {
        "es8388"
    }
    fn class_name(&self) -> &'static str {
        "Es8388AudioCodec"
    }
    fn upstream_classes(&self) -> &'static [&'static str] {
        &["Tab5AudioCodec"]
    }
    fn law(&self) -> &'static str {
        "ES8388 REG 0x1A/0x1B = trunc(-2 * (D(v) - H)), -0.5 dB a code, 0 dB from volume 92 (docs/reference/codecs.md §3)"
    }
    fn volume(&self) -> Volume {
        Volume::Register
    }
    fn volume_register(&self, volume: i32, hw_gain_db: f32) -> u8 {
        attenuation_register(codec_dev_curve_db(volume) - hw_gain_db, 0xC0)
    }
    fn register_db(&self, reg: u8) -> f64 {
        -0.5 * f64::from(reg)
    }
    fn pa(&self) -> Pa {
        Pa::CodecPin
    }
}
