//! The `NoAudioCodec` classes (`main/audio/codecs/no_audio_codec.cc`): no codec chip, standard
//! I2S to an amplifier such as the MAX98357A, the volume a software gain inside `Write`
//! (docs/reference/firmware.md §9.2).

use super::{Family, Pa, SoftwareGain, Volume};

/// One of the three classes: they differ in how their I2S ports are clocked.
pub(super) struct NoAudioCodec {
    name: &'static str,
    class: &'static str,
    duplex: bool,
}

/// `NoAudioCodecSimplex`: separate I2S ports for speaker and microphone (bread boards).
pub(super) static SIMPLEX: NoAudioCodec = NoAudioCodec {
    name: "no_audio_codec_simplex",
    class: "NoAudioCodecSimplex",
    duplex: false,
};

/// `NoAudioCodecDuplex`: one I2S port clocking TX and RX at the output rate.
pub(super) static DUPLEX: NoAudioCodec = NoAudioCodec {
    name: "no_audio_codec_duplex",
    class: "NoAudioCodecDuplex",
    duplex: true,
};

/// `NoAudioCodecSimplexPdm`: standard I2S out, a PDM microphone in.
pub(super) static SIMPLEX_PDM: NoAudioCodec = NoAudioCodec {
    name: "no_audio_codec_simplex_pdm",
    class: "NoAudioCodecSimplexPdm",
    duplex: false,
};

impl Family for NoAudioCodec {
    fn name(&self) -> &'static str {
        self.name
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn law(&self) -> &'static str {
        "software gain in Write: factor = trunc((v/100)^2 * 65536) on each sample (docs/reference/firmware.md §9.2)"
    }
    fn volume(&self) -> Volume {
        Volume::Software(SoftwareGain::Factor)
    }
    fn is_duplex(&self) -> bool {
        self.duplex
    }
    fn pa(&self) -> Pa {
        Pa::I2sAmplifier
    }
}
