//! The ES8311 DAC through esp_codec_dev: `Es8311AudioCodec` and `BoxAudioCodec` (ES8311 out,
//! ES7210 in). REG 0x32 = trunc((D(v) − H + 95.5) × 2), 0.5 dB a code
//! (docs/reference/acoustics.md §1.2); the two classes differ in when the device is open and
//! when a volume change reaches the register.

use super::{CodecDevice, Family, Pa, Volume, es8311_register, es8311_register_db};

/// One of the two ES8311 classes.
pub(super) struct Es8311 {
    name: &'static str,
    class: &'static str,
    upstream: &'static [&'static str],
    law: &'static str,
    device: CodecDevice,
}

/// `Es8311AudioCodec`: the register written only while the codec is open.
pub(super) static ES8311: Es8311 = Es8311 {
    name: "es8311",
    class: "Es8311AudioCodec",
    upstream: &[],
    law: "ES8311 REG 0x32 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written only while the codec is open (docs/reference/acoustics.md §1.2)",
    device: CodecDevice::Es8311Open,
};

/// `BoxAudioCodec`: REG 0x32 written on every volume change. Board classes that are this class
/// with parameters of their own are modelled as it (docs/reference/codecs.md §11).
pub(super) static BOX_AUDIO_CODEC: Es8311 = Es8311 {
    name: "box_audio_codec",
    class: "BoxAudioCodec",
    upstream: &[
        "CustomAudioCodec",
        "PyramidAudioCodec",
        "SensecapAudioCodec",
        "AIVOX3AudioCodec",
        "BoxAudioCodecLite",
    ],
    law: "ES8311 REG 0x32 = trunc((D(v) - H + 95.5) * 2), 0.5 dB a code, written on every change (docs/reference/acoustics.md §1.2)",
    device: CodecDevice::Es8311WithOutput,
};

impl Family for Es8311 {
    fn name(&self) -> &'static str {
        self.name
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn upstream_classes(&self) -> &'static [&'static str] {
        self.upstream
    }
    fn law(&self) -> &'static str {
        self.law
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
    fn device(&self) -> CodecDevice {
        self.device
    }
    fn pa(&self) -> Pa {
        Pa::CodecPin
    }
}
