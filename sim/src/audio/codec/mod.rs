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

/// What a codec family is to the twin: one file per family (this folder), listed once in
/// [`FAMILIES`]. The family decides its volume law, when its driver opens the codec device and
/// writes the volume register, and what the board generator writes for a board of its kind.
pub trait Family: Sync {
    /// The name a board file gives it (`codec: es8311`).
    fn name(&self) -> &'static str;
    /// The firmware's codec class.
    fn class_name(&self) -> &'static str;
    /// Upstream board classes that are this family with parameters of their own (the board
    /// generator models them as this family; docs/reference/codecs.md §11).
    fn upstream_classes(&self) -> &'static [&'static str] {
        &[]
    }
    /// The volume law in one line, with where it is described (`render --json`, `boards`).
    fn law(&self) -> &'static str;
    /// How the volume reaches the sound.
    fn volume(&self) -> Volume;
    /// The volume register a codec chip's driver writes for `volume` (`hw_gain_db` from the
    /// board's voltages). Hardware families only.
    fn volume_register(&self, _volume: i32, _hw_gain_db: f32) -> u8 {
        0
    }
    /// The DAC gain in dB a volume register value applies. Hardware families only.
    fn register_db(&self, _reg: u8) -> f64 {
        0.0
    }
    /// How the driver handles the codec device. Hardware families only.
    fn device(&self) -> CodecDevice {
        CodecDevice::OpenWithOutput
    }
    /// The codec's `duplex()`: input and output share it, so an enabled microphone keeps the
    /// output from powering down (every hardware codec is).
    fn is_duplex(&self) -> bool {
        self.volume() == Volume::Register
    }
    /// How the amplifier's enable is wired, as the board generator writes it.
    fn pa(&self) -> Pa;
    /// Lines the board generator writes under `audio:` for a board of this family (with their
    /// comments).
    fn board_lines(&self) -> &'static [&'static str] {
        &[]
    }
}

/// How a family's volume reaches the sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Volume {
    /// A software gain inside `Write` (the I2S words carry it).
    Software(SoftwareGain),
    /// A codec chip's register ([`Family::volume_register`], [`Family::register_db`]).
    Register,
    /// Only stored: nothing is heard (`DummyAudioCodec`).
    Stored,
}

/// A software volume gain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftwareGain {
    /// `NoAudioCodec::Write`: `factor = trunc((v/100)² × 65536)`, the word `clamp(s × factor)`.
    Factor,
    /// esp_codec_dev's software volume: a Q15 gain `trunc(10^(D(v)/20) · 32768)`, the word
    /// `(s × gain) >> 15` in its top half.
    Q15,
}

impl SoftwareGain {
    /// The gain `Write` applies at `volume`.
    pub fn gain(self, volume: i32) -> i64 {
        match self {
            SoftwareGain::Factor => software_factor(volume),
            SoftwareGain::Q15 => q15_gain(volume),
        }
    }

    /// One output word from one sample at `gain`.
    pub fn apply(self, sample: i16, gain: i64) -> i32 {
        match self {
            SoftwareGain::Factor => software_word(sample, gain),
            SoftwareGain::Q15 => {
                let v = (i64::from(sample) * gain) >> 15;
                (v.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i32) << 16
            }
        }
    }

    /// The gain at `volume` in dB (`None` for silence).
    pub fn db(self, volume: i32) -> Option<f64> {
        let g = self.gain(volume);
        let full = match self {
            SoftwareGain::Factor => 65536.0,
            SoftwareGain::Q15 => 32768.0,
        };
        (g > 0).then(|| 20.0 * (g as f64 / full).log10())
    }
}

/// How a hardware codec's driver handles the codec device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodecDevice {
    /// `Es8311AudioCodec`: the device is open while input or output is, each open is a fresh
    /// handle (volume 0 replayed, then the volume), `es8311_stop` zeroes the register at close,
    /// and a volume change is written only while the device is open.
    Es8311Open,
    /// `BoxAudioCodec`'s ES8311: open while output is; fresh handles and the zeroed register as
    /// above; a volume change is written whatever the device's state.
    Es8311WithOutput,
    /// The other chips: open while output is, one handle kept, the register kept across a
    /// close, every volume change written.
    OpenWithOutput,
}

impl CodecDevice {
    /// The device is open while output is enabled only.
    pub fn follows_output(self) -> bool {
        self != CodecDevice::Es8311Open
    }

    /// Each open is a fresh handle, and a close zeroes the register (the ES8311 drivers).
    pub fn fresh_handles(self) -> bool {
        self != CodecDevice::OpenWithOutput
    }
}

/// How the amplifier's enable is wired, as the board generator writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pa {
    /// The codec driver switches a PA pin given to it (or none: on from boot).
    CodecPin,
    /// The family is the amplifier (the AW88298).
    IsTheAmplifier,
    /// An I2S amplifier after a codec-less output (the twin's MAX98357A defaults).
    I2sAmplifier,
    /// No amplifier is modelled (nothing is heard).
    None,
}

mod adc_pdm;
mod aw88298;
mod dummy;
mod es8311;
mod es8374;
mod es8388;
mod es8389;
mod no_audio;

/// Every family the twin has, once.
pub static FAMILIES: &[&dyn Family] = &[
    &no_audio::SIMPLEX,
    &no_audio::DUPLEX,
    &no_audio::SIMPLEX_PDM,
    &es8311::ES8311,
    &es8311::BOX_AUDIO_CODEC,
    &es8374::Es8374,
    &es8388::Es8388,
    &es8389::Es8389,
    &aw88298::Aw88298,
    &adc_pdm::AdcPdm,
    &dummy::Dummy,
];

/// Which codec family the board constructs (`main/audio/codecs/*`): a handle on one of
/// [`FAMILIES`], named in board files by [`Family::name`].
#[derive(Clone, Copy)]
pub struct CodecKind(&'static dyn Family);

impl CodecKind {
    /// The family a board file names.
    pub fn named(name: &str) -> Option<CodecKind> {
        FAMILIES.iter().find(|f| f.name() == name).map(|f| CodecKind(*f))
    }

    /// The family of an upstream codec class (its own class, or a board class modelled as it).
    pub fn for_class(class: &str) -> Option<CodecKind> {
        FAMILIES
            .iter()
            .find(|f| f.class_name() == class || f.upstream_classes().contains(&class))
            .map(|f| CodecKind(*f))
    }

    /// `NoAudioCodecSimplex`, the boards' default.
    pub fn no_audio_codec_simplex() -> CodecKind {
        CodecKind(&no_audio::SIMPLEX)
    }

    /// The family itself.
    pub fn family(self) -> &'static dyn Family {
        self.0
    }

    /// The name a board file gives it.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The firmware's codec class.
    pub fn class_name(self) -> &'static str {
        self.0.class_name()
    }

    /// The volume law in one line.
    pub fn law(self) -> &'static str {
        self.0.law()
    }

    /// The software gain, for the families whose volume is one.
    pub fn software(self) -> Option<SoftwareGain> {
        match self.0.volume() {
            Volume::Software(g) => Some(g),
            _ => None,
        }
    }

    /// The volume is a software gain inside `Write`.
    pub fn is_software(self) -> bool {
        self.software().is_some()
    }

    /// The volume is a codec chip's register (esp_codec_dev).
    pub fn is_hardware(self) -> bool {
        self.0.volume() == Volume::Register
    }

    /// The volume register written for `volume`.
    pub fn volume_register(self, volume: i32, hw_gain_db: f32) -> u8 {
        self.0.volume_register(volume, hw_gain_db)
    }

    /// The DAC gain in dB a volume register value applies.
    pub fn register_db(self, reg: u8) -> f64 {
        self.0.register_db(reg)
    }

    /// How the driver handles the codec device (hardware families).
    pub fn device(self) -> CodecDevice {
        self.0.device()
    }

    /// The codec's `duplex()`.
    pub fn is_duplex(self) -> bool {
        self.0.is_duplex()
    }
}

impl PartialEq for CodecKind {
    fn eq(&self, other: &CodecKind) -> bool {
        self.name() == other.name()
    }
}

impl Eq for CodecKind {}

impl std::fmt::Debug for CodecKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CodecKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CodecKind, D::Error> {
        let name = String::deserialize(d)?;
        CodecKind::named(&name).ok_or_else(|| {
            let known: Vec<String> = FAMILIES.iter().map(|f| format!("`{}`", f.name())).collect();
            serde::de::Error::custom(format!(
                "unknown variant `{name}`, expected one of {}",
                known.join(", ")
            ))
        })
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
        let kind = |n: &str| CodecKind::named(n).unwrap();
        // ES8374: 100 − v, 0xC0 for 0; no hardware-gain compensation.
        assert_eq!(kind("es8374").volume_register(40, h), 60);
        assert_eq!(kind("es8374").volume_register(0, h), 0xC0);
        assert_eq!(db(kind("es8374"), 0), -96.0);
        assert_eq!(db(kind("es8374"), 100), 0.0);
        assert_eq!(db(kind("es8374"), 40) - db(kind("es8374"), 70), -15.0);
        // ES8388: max(0, 92 − v), 0xB8 for 0: flat 0 dB from 92 up.
        assert_eq!(kind("es8388").volume_register(40, h), 52);
        assert_eq!(kind("es8388").volume_register(0, h), 0xB8);
        assert_eq!(db(kind("es8388"), 0), -92.0);
        assert_eq!(db(kind("es8388"), 92), 0.0);
        assert_eq!(db(kind("es8388"), 100), 0.0);
        assert_eq!(db(kind("es8388"), 91), -0.5);
        assert_eq!(db(kind("es8388"), 40) - db(kind("es8388"), 70), -15.0);
        // ES8389: ES8311's quantiser, 98 + v.
        assert_eq!(kind("es8389").volume_register(40, h), 138);
        assert_eq!(db(kind("es8389"), 0), -92.5);
        assert_eq!(db(kind("es8389"), 100), 3.5);
        assert_eq!(db(kind("es8389"), 40) - db(kind("es8389"), 70), -15.0);
        // AW88298: max(0, 94 − v), 0xBA for 0, decoded as Awinic's driver does.
        assert_eq!(kind("aw88298").volume_register(40, h), 0x36);
        assert_eq!(kind("aw88298").volume_register(70, h), 0x18);
        assert_eq!(kind("aw88298").volume_register(0, h), 0xBA);
        assert_eq!(db(kind("aw88298"), 0), -71.0);
        assert_eq!(db(kind("aw88298"), 100), 0.0);
        assert_eq!(db(kind("aw88298"), 40) - db(kind("aw88298"), 70), -11.0);
        // The saw-tooth: one volume step up, 1.5 dB down where the low nibble wraps.
        assert_eq!(db(kind("aw88298"), 15) - db(kind("aw88298"), 14), -1.5);
        // AdcPdm: the Q15 gains of docs/reference/codecs.md §7.2.
        for (v, g) in [(0, 0), (1, 109), (40, 1036), (70, 5827), (100, 32768)] {
            assert_eq!(q15_gain(v), g, "volume {v}");
        }
        let pdm = |v| SoftwareGain::Q15.db(v).expect("not silent");
        assert!((pdm(40) - pdm(70) + 15.0).abs() < 0.01);
        assert_eq!(SoftwareGain::Q15.apply(i16::MAX, 32768), i32::from(i16::MAX) << 16);
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
