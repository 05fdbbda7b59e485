//! `Es8389AudioCodec`: the ES8389 DAC, REG 0x46/0x47 with ES8311's quantiser (98 + v), written
//! on every volume change (docs/reference/codecs.md §4). `WaveshareAudioCodec` is modelled with
//! its law.

use super::{Family, Pa, Volume, es8311_register, es8311_register_db};

pub(super) struct Es8389;

impl Family for Es8389 {
    fn name(&self) -> &'static str {
        "es8389"
    }
    fn class_name(&self) -> &'static str {
        "Es8389AudioCodec"
    }
    fn upstream_classes(&self) -> &'static [&'static str] {
        &["WaveshareAudioCodec"]
    }
    fn law(&self) -> &'static str {
        "ES8389 REG 0x46/0x47 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written on every change (docs/reference/codecs.md §4)"
    }
    fn volume(&self) -> Volume {
        Volume::Register
    }
    fn volume_register(&self, volume: i32, hw_gain_db: f32) -> u8 {
        es8311_register(volume, hw_gain_db)
    }
    fn register_db(&self, reg: u8) -> f64 {
        es8311_register_db(reg)
    }
    fn pa(&self) -> Pa {
        Pa::CodecPin
    }
}
