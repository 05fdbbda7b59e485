//! `AdcPdmAudioCodec`: no codec chip, esp_codec_dev's software volume on a PDM output: a Q15
//! gain trunc(10^(D(v)/20) · 32768) on each sample (docs/reference/codecs.md §7). Its
//! constructor sets the volume to 100.

use super::{Family, Pa, SoftwareGain, Volume};

pub(super) struct AdcPdm;

impl Family for AdcPdm {
    fn name(&self) -> &'static str {
        "adc_pdm"
    }
    fn class_name(&self) -> &'static str {
        "AdcPdmAudioCodec"
    }
    fn law(&self) -> &'static str {
        "software Q15 gain trunc(10^(D(v)/20) * 32768) on each sample (esp_codec_dev sw_vol; docs/reference/codecs.md §7)"
    }
    fn volume(&self) -> Volume {
        Volume::Software(SoftwareGain::Q15)
    }
    fn is_duplex(&self) -> bool {
        false
    }
    fn pa(&self) -> Pa {
        Pa::I2sAmplifier
    }
    fn board_lines(&self) -> &'static [&'static str] {
        &["  default_volume: 100           # AdcPdmAudioCodec's constructor sets output_volume_ = 100"]
    }
}
