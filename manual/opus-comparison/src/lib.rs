//! The two codecs behind one small interface, at the settings the twin uses them with
//! (docs/voice.md): a mono decoder at 16 or 24 kHz, and the firmware's microphone encoder
//! (16 kHz, 60 ms, AUDIO, complexity 0, VBR, bitrate auto).
#![allow(unsafe_code)]

/// Samples in one 60 ms frame at `rate`.
pub fn frame(rate: i32) -> usize {
    rate as usize * 60 / 1000
}

/// The committed libopus 1.3.1 vectors of the twin (`sim/tests/data/opus/`).
pub fn data(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sim/tests/data/opus")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `<case>.packets`: u16 big-endian length + packet, repeated.
pub fn packets(name: &str) -> Vec<Vec<u8>> {
    let raw = data(&format!("{name}.packets"));
    let (mut out, mut i) = (Vec::new(), 0);
    while i + 2 <= raw.len() {
        let n = usize::from(u16::from_be_bytes([raw[i], raw[i + 1]]));
        out.push(raw[i + 2..i + 2 + n].to_vec());
        i += 2 + n;
    }
    out
}

/// `<case>.<rate>.pcm`: int16 little-endian mono.
pub fn pcm(name: &str) -> Vec<i16> {
    data(name)
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// An Opus decoder.
pub trait Decode {
    /// One packet to at most one 60 ms frame of int16 PCM; samples written (0 on an error).
    fn decode(&mut self, packet: &[u8], out: &mut [i16]) -> usize;
}

/// An Opus encoder.
pub trait Encode {
    /// One 60 ms frame to a packet; bytes written (0 on an error).
    fn encode(&mut self, pcm: &[i16], out: &mut [u8]) -> usize;
}

/// opus-rs 0.1.40, as `sim/src/voice/codec.rs` uses it.
pub struct RsDecoder(opus_rs::OpusDecoder, Vec<f32>);

impl RsDecoder {
    pub fn new(rate: i32) -> Self {
        RsDecoder(opus_rs::OpusDecoder::new(rate, 1).unwrap(), vec![0.0; frame(rate)])
    }
}

impl Decode for RsDecoder {
    fn decode(&mut self, packet: &[u8], out: &mut [i16]) -> usize {
        let n = self.1.len();
        let got = self.0.decode(packet, n, &mut self.1).unwrap_or(0);
        for (o, &x) in out.iter_mut().zip(&self.1[..got]) {
            *o = (x * 32768.0).round_ties_even().clamp(-32768.0, 32767.0) as i16;
        }
        got
    }
}

/// The firmware's microphone encoder in opus-rs (DTX is not in opus-rs).
pub struct RsEncoder(opus_rs::OpusEncoder, Vec<f32>);

impl RsEncoder {
    pub fn mic() -> Self {
        let mut e = opus_rs::OpusEncoder::new(16_000, 1, opus_rs::Application::Audio).unwrap();
        e.bitrate_bps = 60 * 16_000 / 960 + 16_000;
        e.complexity = 0;
        e.use_cbr = false;
        e.use_inband_fec = false;
        RsEncoder(e, vec![0.0; 960])
    }
}

impl Encode for RsEncoder {
    fn encode(&mut self, pcm: &[i16], out: &mut [u8]) -> usize {
        for (f, &s) in self.1.iter_mut().zip(pcm) {
            *f = f32::from(s) / 32768.0;
        }
        self.0.encode(&self.1, 960, out).unwrap_or(0)
    }
}

/// unsafe-libopus 0.2.0: its state in memory this crate owns (`opus_decoder_get_size`,
/// `opus_decoder_init`), so the allocator counts it and it is freed by `Drop`.
pub struct LibDecoder(Vec<u64>, usize);

impl LibDecoder {
    pub fn new(rate: i32) -> Self {
        // SAFETY: get_size reads nothing; init writes within the get_size bytes it is given.
        unsafe {
            let n = unsafe_libopus::opus_decoder_get_size(1) as usize;
            let mut st = vec![0u64; n.div_ceil(8)];
            assert_eq!(unsafe_libopus::opus_decoder_init(st.as_mut_ptr().cast(), rate, 1), 0);
            LibDecoder(st, frame(rate))
        }
    }
}

impl Decode for LibDecoder {
    fn decode(&mut self, packet: &[u8], out: &mut [i16]) -> usize {
        let n = self.1.min(out.len());
        // SAFETY: the state was initialised by `new`; the packet and output lengths are theirs.
        let got = unsafe {
            unsafe_libopus::opus_decode(
                self.0.as_mut_ptr().cast(),
                packet.as_ptr(),
                packet.len() as i32,
                out.as_mut_ptr(),
                n as i32,
                0,
            )
        };
        got.max(0) as usize
    }
}

/// The firmware's microphone encoder in unsafe-libopus, DTX on as the firmware has it.
pub struct LibEncoder(Vec<u64>);

impl LibEncoder {
    pub fn mic() -> Self {
        use unsafe_libopus::*;
        // SAFETY: as for the decoder; the ctl requests take one i32 each.
        unsafe {
            let n = opus_encoder_get_size(1) as usize;
            let mut v = vec![0u64; n.div_ceil(8)];
            let st: *mut OpusEncoder = v.as_mut_ptr().cast();
            assert_eq!(opus_encoder_init(st, 16_000, 1, OPUS_APPLICATION_AUDIO), 0);
            opus_encoder_ctl!(st, OPUS_SET_BITRATE_REQUEST, OPUS_AUTO);
            opus_encoder_ctl!(st, OPUS_SET_COMPLEXITY_REQUEST, 0);
            opus_encoder_ctl!(st, OPUS_SET_VBR_REQUEST, 1);
            opus_encoder_ctl!(st, OPUS_SET_DTX_REQUEST, 1);
            LibEncoder(v)
        }
    }
}

impl Encode for LibEncoder {
    fn encode(&mut self, pcm: &[i16], out: &mut [u8]) -> usize {
        // SAFETY: the state was initialised by `mic`; 960 samples in, `out.len()` bytes out.
        let n = unsafe {
            unsafe_libopus::opus_encode(
                self.0.as_mut_ptr().cast(),
                pcm.as_ptr(),
                960,
                out.as_mut_ptr(),
                out.len() as i32,
            )
        };
        n.max(0) as usize
    }
}
