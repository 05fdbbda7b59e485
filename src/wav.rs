//! Evidence files: WAV of the I2S stream and of the listener signal (hound), and optional
//! playback on a real sound card (rodio, behind the `playback` feature).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use xiaozhi_sim::audio::render::Signals;

/// Full scale of the listener WAV: 0 dBFS = 1 Pa peak (≈ 91 dB SPL for a sine).
pub const LISTENER_FULL_SCALE_PA: f32 = 1.0;

/// Writes `<stem>.i2s.wav` (32-bit PCM, the words the codec clocks out) and
/// `<stem>.listener.wav` (32-bit float, pressure at the listener in Pa). Returns both paths.
pub fn write_signals(dir: &Path, stem: &str, rate: u32, signals: &Signals) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create the output directory", dir.display()))?;
    let i2s_path = dir.join(format!("{stem}.i2s.wav"));
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w =
        hound::WavWriter::create(&i2s_path, spec).with_context(|| format!("{}: cannot write", i2s_path.display()))?;
    for s in &signals.i2s {
        w.write_sample(*s)?;
    }
    w.finalize()?;
    let listener_path = dir.join(format!("{stem}.listener.wav"));
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut w = hound::WavWriter::create(&listener_path, spec)
        .with_context(|| format!("{}: cannot write", listener_path.display()))?;
    for p in &signals.listener_pa {
        w.write_sample(*p / LISTENER_FULL_SCALE_PA)?;
    }
    w.finalize()?;
    Ok((i2s_path, listener_path))
}

/// The longest stretch of a WAV file that is read: ten minutes (an hour-long file is cut,
/// not loaded whole).
pub const MAX_WAV_SECONDS: u64 = 600;

/// The most samples (mono, after the channels are averaged) kept of one WAV file: ten minutes
/// at 48 kHz, 57.6 MB as int16. A file recorded above 48 kHz is cut sooner (75 s at 384 kHz);
/// the file itself is read as a stream, so its size never matters (docs/guarantees.md,
/// "Input limits").
pub const MAX_WAV_SAMPLES: u64 = MAX_WAV_SECONDS * 48_000;

/// The sample rates a WAV file is read at. Every WAV is resampled to the rate its user needs
/// (16 kHz for the microphone, the server's TTS rate, the codec's output rate, all 8–48 kHz), so
/// this bounds the resampling ratio, and ten minutes of input give at most ten minutes of
/// output: a 1 Hz file would otherwise become ten minutes at 16 kHz through a resampler sized
/// for a 16,000× ratio.
pub const WAV_RATES: std::ops::RangeInclusive<u32> = 4_000..=384_000;

/// Reads a WAV file as mono int16 PCM (channels averaged, other widths scaled); at most
/// [`MAX_WAV_SECONDS`] and [`MAX_WAV_SAMPLES`] of it, read as a stream.
pub fn read_pcm(path: &Path) -> Result<(u32, Vec<i16>)> {
    let r = hound::WavReader::open(path).with_context(|| format!("{}: not a readable WAV file", path.display()))?;
    pcm_of(r, &path.display().to_string())
}

/// [`read_pcm`] of a WAV stream (`name` in errors): read as it comes, never whole.
pub fn read_pcm_from<R: std::io::Read>(reader: R, name: &str) -> Result<(u32, Vec<i16>)> {
    let r = hound::WavReader::new(reader).with_context(|| format!("{name}: not a readable WAV file"))?;
    pcm_of(r, name)
}

/// [`read_pcm`] of a WAV file in memory (the shipped utterance).
pub fn parse_pcm(bytes: &[u8]) -> Result<(u32, Vec<i16>)> {
    let r = hound::WavReader::new(std::io::Cursor::new(bytes)).context("not a readable WAV file")?;
    pcm_of(r, "the built-in WAV")
}

fn pcm_of<R: std::io::Read>(mut r: hound::WavReader<R>, name: &str) -> Result<(u32, Vec<i16>)> {
    let spec = r.spec();
    if spec.sample_rate == 0 {
        anyhow::bail!("{name}: the WAV header says 0 Hz");
    }
    if !WAV_RATES.contains(&spec.sample_rate) {
        anyhow::bail!(
            "{name}: {} Hz: the twin reads WAV files recorded at {}–{} Hz",
            spec.sample_rate,
            WAV_RATES.start(),
            WAV_RATES.end()
        );
    }
    let channels = usize::from(spec.channels.max(1));
    let frames = (u64::from(spec.sample_rate) * MAX_WAV_SECONDS).min(MAX_WAV_SAMPLES);
    // The header's length is a claim: it sizes the buffer only up to the cap.
    let claimed = u64::from(r.duration()).min(frames) as usize;
    let mut mono = Downmix::new(channels, claimed);
    let cap = frames as usize * channels;
    let unreadable = |e: hound::Error| anyhow::anyhow!("{name}: not a readable WAV file: {e}");
    match spec.sample_format {
        hound::SampleFormat::Float => {
            for s in r.samples::<f32>().take(cap) {
                mono.push(s.map_err(unreadable)?);
            }
        }
        hound::SampleFormat::Int => {
            let scale = (1i64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f32;
            for s in r.samples::<i32>().take(cap) {
                mono.push(s.map_err(unreadable)? as f32 / scale);
            }
        }
    }
    Ok((spec.sample_rate, mono.finish()))
}

/// Averages each frame's channels into one int16 sample as the samples stream past.
struct Downmix {
    channels: usize,
    sum: f32,
    seen: usize,
    samples: Vec<i16>,
}

impl Downmix {
    fn new(channels: usize, capacity: usize) -> Self {
        Downmix {
            channels,
            sum: 0.0,
            seen: 0,
            samples: Vec::with_capacity(capacity),
        }
    }

    fn push(&mut self, v: f32) {
        self.sum += v;
        self.seen += 1;
        if self.seen == self.channels {
            let avg = self.sum / self.channels as f32;
            self.samples
                .push((avg * 32768.0).round().clamp(-32768.0, 32767.0) as i16);
            self.sum = 0.0;
            self.seen = 0;
        }
    }

    /// The samples; a last frame cut short is the average of the channels it has.
    fn finish(mut self) -> Vec<i16> {
        if self.seen > 0 {
            self.channels = self.seen;
            self.seen -= 1;
            self.push(0.0);
        }
        self.samples
    }
}

/// Plays the listener signal on the default sound card (`--play`).
#[cfg(feature = "playback")]
pub fn play(rate: u32, signals: &Signals) -> Result<()> {
    use std::num::NonZero;
    let sink =
        rodio::DeviceSinkBuilder::open_default_sink().map_err(|e| anyhow::anyhow!("no sound card to play on: {e}"))?;
    let player = rodio::Player::connect_new(sink.mixer());
    // Scale so that 1 Pa peak is full scale, as in the WAV file.
    let samples: Vec<f32> = signals.listener_pa.iter().map(|p| p / LISTENER_FULL_SCALE_PA).collect();
    let rate = NonZero::new(rate).ok_or_else(|| anyhow::anyhow!("sample rate 0"))?;
    player.append(rodio::buffer::SamplesBuffer::new(
        NonZero::new(1u16).expect("1"),
        rate,
        samples,
    ));
    player.sleep_until_end();
    Ok(())
}

/// Without the `playback` feature there is no sound card support compiled in.
#[cfg(not(feature = "playback"))]
pub fn play(_rate: u32, _signals: &Signals) -> Result<()> {
    anyhow::bail!("this build has no playback: rebuild with `--features playback` (needs libasound2-dev)")
}
