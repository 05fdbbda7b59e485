//! Opus in pure Rust (`opus-rs`, a port of libopus 1.6) with the firmware's and the backends'
//! settings, and the resampler from the decode rate to the codec's output rate
//! (`main/audio/audio_service.cc`: `SetDecodeSampleRate`, `OpusCodecTask`; docs/reference/voice.md §2–§3).
//!
//! State is allocated only when a codec is first needed, so a device that never speaks or
//! listens keeps its old footprint. Everything here is deterministic for the same input on the
//! same machine (opus-rs picks SIMD paths by CPU; see the issue note on cross-machine bytes).

use audioadapter_buffers::direct::InterleavedSlice;
use opus_rs::{Application, OpusDecoder, OpusEncoder};
use rubato::{Async, Fft, FixedAsync, FixedSync, PolynomialDegree, Resampler};

/// Rates an Opus decoder or encoder can run at, Hz.
pub const OPUS_RATES: [u32; 5] = [8000, 12000, 16000, 24000, 48000];

/// The microphone stream: 16 kHz mono, 60 ms frames (960 samples).
pub const MIC_RATE: u32 = 16_000;
/// `OPUS_FRAME_DURATION_MS`.
pub const FRAME_MS: u32 = 60;
/// libopus's `OPUS_AUTO` bitrate for 16 kHz mono 60 ms frames: `60·Fs/frame + Fs` (the
/// firmware asks for `ESP_OPUS_BITRATE_AUTO`; opus-rs has no auto mode, so it gets the number).
pub const MIC_AUTO_BITRATE: i32 = 60 * 16_000 / 960 + 16_000;

/// Why a packet gave no audio.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The decoder refused the packet (`esp_opus_dec_decode` fails; the firmware logs
    /// `Failed to decode audio after resize` and drops it).
    #[error("undecodable Opus packet ({0})")]
    Undecodable(&'static str),
    /// The server announced a rate no Opus decoder runs at (`esp_opus_dec_open` fails; the
    /// firmware logs `Failed to create audio decoder` and keeps no decoder).
    #[error("no decoder at {0} Hz")]
    NoDecoder(i32),
}

/// `opus_decoder_` + `output_resampler_`: decodes at the rate the server announced and
/// resamples to the codec's output rate.
pub struct Decoder {
    /// The arguments it was made with (a reset makes it again).
    made: (i32, i32, u32),
    rate: u32,
    frame: usize,
    out_rate: u32,
    opus: OpusDecoder,
    resampler: Option<Async<f32>>,
    pcm: Vec<f32>,
    pending: Vec<f32>,
    resampled: Vec<f32>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("rate", &self.rate)
            .field("frame", &self.frame)
            .field("out_rate", &self.out_rate)
            .finish_non_exhaustive()
    }
}

/// Float PCM to int16 as libopus's `opus_decode` does (`FLOAT2INT16`: scale, round to nearest
/// even, saturate).
pub fn to_i16(x: f32) -> i16 {
    (x * 32768.0).round_ties_even().clamp(-32768.0, 32767.0) as i16
}

impl Decoder {
    /// `SetDecodeSampleRate(rate, frame_ms)` for a codec that outputs `out_rate`.
    pub fn new(rate: i32, frame_ms: i32, out_rate: u32) -> Result<Decoder, DecodeError> {
        let r = u32::try_from(rate).ok().filter(|r| OPUS_RATES.contains(r));
        let Some(r) = r else {
            return Err(DecodeError::NoDecoder(rate));
        };
        let opus = OpusDecoder::new(rate, 1).map_err(|_| DecodeError::NoDecoder(rate))?;
        // The firmware's frame size; a packet of any legal length up to 120 ms still decodes.
        let frame = (r / 1000 * u32::try_from(frame_ms.clamp(1, 120)).unwrap_or(60)) as usize;
        let resampler = if r != out_rate && out_rate > 0 {
            // rubato's cubic polynomial interpolator: ~4 KiB and 0.6 ms per 3 s of speech.
            // (The firmware's esp_ae_rate_cvt is not reproduced sample for sample; levels are
            // what the twin judges. rubato's FFT resampler costs ~100 KiB per device, its
            // 64-tap sinc ~28 KiB and 3× the time; BENCHMARKS.md, `voice/decode_*`.)
            let ratio = f64::from(out_rate) / f64::from(r);
            Async::<f32>::new_poly(ratio, 1.0, PolynomialDegree::Cubic, frame, 1, FixedAsync::Input).ok()
        } else {
            None
        };
        Ok(Decoder {
            made: (rate, frame_ms, out_rate),
            rate: r,
            frame,
            out_rate,
            opus,
            resampler,
            pcm: vec![0.0; (r as usize) * 120 / 1000],
            pending: Vec::new(),
            resampled: Vec::new(),
        })
    }

    /// The rate the decoder runs at, Hz.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// The rate of what [`Decoder::decode`] returns, Hz.
    pub fn out_rate(&self) -> u32 {
        if self.resampler.is_some() {
            self.out_rate
        } else {
            self.rate
        }
    }

    /// `esp_opus_dec_reset` (`ResetDecoder`): the decoder forgets the stream; queued
    /// resampler input goes too. The twin makes both again, so a reset decoder is exactly a
    /// fresh one (what the shared codec memo relies on: `voice::memo`).
    pub fn reset(&mut self) {
        let (rate, frame_ms, out_rate) = self.made;
        if let Ok(fresh) = Decoder::new(rate, frame_ms, out_rate) {
            *self = fresh;
        }
    }

    /// One packet to PCM at [`Decoder::out_rate`] (int16). With a resampler, output comes in
    /// whole chunks of the announced frame, so a packet shorter than that may return nothing yet.
    pub fn decode(&mut self, packet: &[u8]) -> Result<Vec<i16>, DecodeError> {
        if packet.is_empty() {
            // esp_opus_dec refuses an empty buffer; libopus would conceal a lost frame.
            return Err(DecodeError::Undecodable("empty packet"));
        }
        let n = self
            .opus
            .decode(packet, self.pcm.len(), &mut self.pcm)
            .map_err(DecodeError::Undecodable)?;
        let Some(resampler) = self.resampler.as_mut() else {
            return Ok(self.pcm[..n].iter().map(|&x| to_i16(x)).collect());
        };
        self.pending.extend_from_slice(&self.pcm[..n]);
        let mut out = Vec::new();
        while self.pending.len() >= self.frame {
            let want = resampler.output_frames_next();
            self.resampled.resize(want, 0.0);
            let input = InterleavedSlice::new(&self.pending[..self.frame], 1, self.frame)
                .map_err(|_| DecodeError::Undecodable("resampler input"))?;
            let mut output = InterleavedSlice::new_mut(&mut self.resampled, 1, want)
                .map_err(|_| DecodeError::Undecodable("resampler output"))?;
            let (_, written) = resampler
                .process_into_buffer(&input, &mut output, None)
                .map_err(|_| DecodeError::Undecodable("resampler"))?;
            out.extend(self.resampled[..written].iter().map(|&x| to_i16(x)));
            self.pending.drain(..self.frame);
        }
        Ok(out)
    }
}

/// How long an Opus packet plays, in 48 kHz samples, from its TOC byte (RFC 6716 §3.1: the
/// configuration's frame size times the frame count of code 0–3); `None` for a packet no
/// decoder would take (empty, a code 1 packet whose two equal frames cannot split the payload
/// (an even total length), a code 2 or 3 packet without its length or count byte, or more than
/// 120 ms).
pub fn toc_duration_48k(packet: &[u8]) -> Option<u32> {
    let toc = *packet.first()?;
    let config = toc >> 3;
    let frame = match config {
        0..=11 => [480, 960, 1920, 2880][usize::from(config % 4)],
        12..=15 => [480, 960][usize::from(config % 2)],
        _ => [120, 240, 480, 960][usize::from(config % 4)],
    };
    let frames = match toc & 3 {
        0 => 1,
        1 if packet.len() % 2 == 1 => 2,
        1 => return None,
        2 if packet.len() >= 2 => 2,
        2 => return None,
        _ => u32::from(*packet.get(1)? & 0x3f),
    };
    let total = frame * frames;
    (frames > 0 && total <= 5760).then_some(total)
}

/// An Opus encoder with named settings.
pub struct Encoder {
    opus: OpusEncoder,
    frame: usize,
    rate: u32,
    out: Vec<u8>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("rate", &self.rate)
            .field("frame", &self.frame)
            .finish_non_exhaustive()
    }
}

impl Encoder {
    /// The firmware's microphone encoder: 16 kHz mono, 60 ms, AUDIO, complexity 0, VBR, FEC
    /// off, bitrate auto ([`MIC_AUTO_BITRATE`]). DTX is on in the firmware and opus-rs has none:
    /// the device's microphone (`device::mic`) does DTX itself, sending the TOC byte alone for
    /// continued digital silence as libopus does, without running this encoder.
    pub fn mic() -> Encoder {
        Encoder::with(MIC_RATE, FRAME_MS, MIC_AUTO_BITRATE, 0)
    }

    /// xiaozhi-esp32-server's TTS encoder: AUDIO, 24 kbps, complexity 10, 60 ms at `rate`.
    pub fn tts(rate: u32) -> Encoder {
        Encoder::with(rate, FRAME_MS, 24_000, 10)
    }

    fn with(rate: u32, frame_ms: u32, bitrate: i32, complexity: i32) -> Encoder {
        let rate = if OPUS_RATES.contains(&rate) { rate } else { 24_000 };
        let mut opus = OpusEncoder::new(rate as i32, 1, Application::Audio)
            .or_else(|_| OpusEncoder::new(24_000, 1, Application::Audio))
            .unwrap_or_else(|_| unreachable!("24 kHz mono is a valid Opus encoder"));
        opus.bitrate_bps = bitrate;
        opus.complexity = complexity;
        opus.use_cbr = false;
        opus.use_inband_fec = false;
        Encoder {
            opus,
            frame: (rate * frame_ms / 1000) as usize,
            rate,
            out: vec![0; 1500],
        }
    }

    /// Samples per frame.
    pub fn frame_len(&self) -> usize {
        self.frame
    }

    /// The encoder's rate, Hz.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// One frame of PCM (shorter input is padded with silence) to one packet.
    pub fn encode(&mut self, pcm: &[i16]) -> Vec<u8> {
        let mut frame: Vec<i16> = pcm.iter().copied().take(self.frame).collect();
        frame.resize(self.frame, 0);
        match self.opus.encode_i16(&frame, self.frame, &mut self.out) {
            Ok(n) => self.out[..n].to_vec(),
            Err(_) => Vec::new(),
        }
    }
}

/// Linear-phase resampling of a whole clip (WAV input for the microphone or for speech):
/// `rubato`'s FFT resampler, delay trimmed, length `ceil(len·to/from)`.
pub fn resample_clip(samples: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || samples.is_empty() || from == 0 || to == 0 {
        return samples.to_vec();
    }
    let Ok(mut r) = Fft::<f32>::new(from as usize, to as usize, 1024, 1, FixedSync::Input) else {
        return samples.to_vec();
    };
    let input: Vec<f32> = samples.iter().map(|&s| f32::from(s) / 32768.0).collect();
    let want = (samples.len() as f64 * f64::from(to) / f64::from(from)).ceil() as usize;
    let len = r.process_all_needed_output_len(samples.len());
    let mut output = vec![0.0f32; len];
    let written = {
        let (Ok(i), Ok(mut o)) = (
            InterleavedSlice::new(&input, 1, input.len()),
            InterleavedSlice::new_mut(&mut output, 1, len),
        ) else {
            return samples.to_vec();
        };
        match r.process_all_into_buffer(&i, &mut o, input.len(), None) {
            Ok((_, written)) => written,
            Err(_) => return samples.to_vec(),
        }
    };
    output[..written.min(want)].iter().map(|&x| to_i16(x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, n: usize, hz: f64, amp: f64) -> Vec<i16> {
        (0..n)
            .map(|i| (amp * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin()) as i16)
            .collect()
    }

    fn rms(x: &[i16]) -> f64 {
        (x.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / x.len().max(1) as f64).sqrt()
    }

    #[test]
    fn tts_at_24k_decodes_at_16k_and_resamples_to_24k_about_one_frame_per_packet() {
        let mut enc = Encoder::tts(24_000);
        let pcm = tone(24_000, 24_000, 440.0, 8000.0);
        let mut dec = Decoder::new(16_000, 60, 24_000).unwrap();
        assert_eq!((dec.rate(), dec.out_rate()), (16_000, 24_000));
        let mut out = Vec::new();
        for chunk in pcm.chunks(enc.frame_len()) {
            let p = enc.encode(chunk);
            assert!(!p.is_empty() && p.len() < 400, "{}", p.len());
            let d = dec.decode(&p).unwrap();
            assert!((1430..=1450).contains(&d.len()), "{}", d.len());
            out.extend(d);
        }
        // 17 packets (the last one padded) of 60 ms: 17 × 1440 output samples, less the delay.
        assert!(out.len().abs_diff(17 * 1440) <= 64, "{}", out.len());
        // Level survives within 1 dB after the codec and resampler settle.
        let level = 20.0 * (rms(&out[4800..]) / rms(&pcm[4800..])).log10();
        assert!(level.abs() < 1.0, "{level:.2} dB");
    }

    #[test]
    fn toc_durations_match_what_the_decoder_gives() {
        let mut enc = Encoder::tts(24_000);
        let p = enc.encode(&tone(24_000, 1440, 300.0, 5000.0));
        assert_eq!(toc_duration_48k(&p), Some(2880));
        let mut mic = Encoder::mic();
        assert_eq!(toc_duration_48k(&mic.encode(&[0; 960])), Some(2880));
        // CELT 20 ms, code 3 with 3 frames; code 1 needs an odd length; empty is nothing.
        assert_eq!(toc_duration_48k(&[31 << 3 | 3, 3]), Some(2880));
        assert_eq!(toc_duration_48k(&[31 << 3 | 3, 7]), None);
        assert_eq!(toc_duration_48k(&[31 << 3 | 1, 0]), None);
        assert_eq!(toc_duration_48k(&[]), None);
        assert_eq!(toc_duration_48k(&[3 << 3 | 2, 0, 0]), Some(5760));
        assert_eq!(toc_duration_48k(&[3 << 3 | 2]), None);
    }

    #[test]
    fn bad_packets_and_rates_are_errors_not_panics() {
        let mut dec = Decoder::new(24_000, 60, 24_000).unwrap();
        assert!(dec.decode(&[]).is_err());
        for junk in [&[0xffu8; 3][..], &[0xfc, 0xff, 0xff, 0xff, 0xff], &[0x03, 0x80]] {
            let _ = dec.decode(junk);
        }
        assert_eq!(
            Decoder::new(44_100, 60, 24_000).unwrap_err(),
            DecodeError::NoDecoder(44_100)
        );
        assert!(Decoder::new(16_000, 0, 24_000).is_ok());
        assert!(Decoder::new(16_000, -5, 24_000).is_ok());
    }

    #[test]
    fn clips_resample_to_the_expected_length_and_level() {
        let x = tone(44_100, 44_100, 500.0, 10_000.0);
        let y = resample_clip(&x, 44_100, 16_000);
        assert_eq!(y.len(), 16_000);
        let level = 20.0 * (rms(&y[1000..15000]) / rms(&x)).log10();
        assert!(level.abs() < 0.5, "{level:.2} dB");
        assert_eq!(resample_clip(&[], 8000, 16000), Vec::<i16>::new());
    }
}
