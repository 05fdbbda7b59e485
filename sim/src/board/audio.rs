//! A board's audio facts (`AudioSpec`): which codec class it constructs, its rates and default
//! volume, the amplifier and speaker after the codec, and the audio options its firmware build
//! sets (wake word, wake word while listening).

use serde::Deserialize;

use crate::audio::codec::CodecKind;

/// The audio chain of the board (codec here; amplifier/speaker facts live in `acoustics`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioSpec {
    /// Which `AudioCodec` class the board constructs.
    pub codec: CodecKind,
    /// Microphone sample rate in Hz (`AUDIO_INPUT_SAMPLE_RATE`).
    pub input_sample_rate: u32,
    /// Speaker sample rate in Hz (`AUDIO_OUTPUT_SAMPLE_RATE`).
    pub output_sample_rate: u32,
    /// Default output volume of `AudioCodec` (70).
    pub default_volume: i32,
    /// The amplifier after the codec.
    pub amplifier: crate::audio::chain::AmplifierSpec,
    /// The loudspeaker driven by the amplifier.
    pub speaker: crate::audio::chain::SpeakerSpec,
    /// Hardware codecs: DAC full scale and the voltages handed to `esp_codec_dev`.
    pub dac: crate::audio::chain::DacSpec,
    /// A PA enable GPIO the codec driver drives from output enable (`Es8311AudioCodec`).
    pub pa_gpio: Option<PaPinSpec>,
    /// The PA is switched on once at boot and never again (e.g. through an I/O expander).
    pub pa_always_on: bool,
    /// The microphone runs while idle (wake-word detection), keeping duplex codecs open.
    pub wake_word: bool,
    /// `CONFIG_WAKE_WORD_DETECTION_IN_LISTENING` (default n): the wake word is also detected
    /// while listening (with the AFE wake word only, as on the ESP32-S3).
    pub wake_word_in_listening: bool,
    /// `CONFIG_USE_DEVICE_AEC` (default n; ESP32-S3-BOX and some 20 other builds set it): the
    /// default listening mode is `realtime` (`application.cc:1022-1024`) — the microphone stays
    /// on while speaking and `tts stop` sends no `listen start`.
    pub device_aec: bool,
}

/// A PA enable pin.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaPinSpec {
    /// GPIO number of the PA enable line.
    pub gpio: u32,
    /// The PA is enabled by driving the pin low.
    #[serde(default)]
    pub inverted: bool,
}

impl Default for AudioSpec {
    fn default() -> Self {
        AudioSpec {
            codec: CodecKind::no_audio_codec_simplex(),
            input_sample_rate: 16_000,
            output_sample_rate: 24_000,
            default_volume: 70,
            amplifier: Default::default(),
            speaker: Default::default(),
            dac: Default::default(),
            pa_gpio: None,
            pa_always_on: false,
            wake_word: true,
            wake_word_in_listening: false,
            device_aec: false,
        }
    }
}
