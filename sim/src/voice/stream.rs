//! A device's or a backend session's codec stream: a codec of its own, or a position in a
//! shared [`CodecPool`] (`voice::memo`) that gives the same output bit for bit.

use std::sync::Arc;

use crate::voice::codec::{DecodeError, Decoder, Encoder};
use crate::voice::memo::{CodecPool, Decoded, Stepped};

/// A decoder stream as a device or a backend session holds it: its own codec, or a position
/// in a shared pool.
pub enum DecodeStream {
    /// A codec of its own (the default; also a pool's fallback when its memo is full).
    Own(Box<Decoder>),
    /// A position in a pool's decoder memo.
    Shared {
        /// The pool.
        pool: Arc<dyn CodecPool>,
        /// The fresh stream's position (a reset goes back here).
        root: u32,
        /// The current position.
        at: u32,
        /// Decode and output rates.
        rates: (u32, u32),
        /// A private decoder the pool handed over when it was full (until the next reset).
        private: Option<Box<Decoder>>,
    },
}

impl std::fmt::Debug for DecodeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeStream::Own(d) => f.debug_tuple("Own").field(d).finish(),
            DecodeStream::Shared { at, rates, .. } => {
                f.debug_struct("Shared").field("at", at).field("rates", rates).finish()
            }
        }
    }
}

impl DecodeStream {
    /// `SetDecodeSampleRate(rate, frame_ms)` for a codec that outputs `out_rate`, in `pool` if
    /// given.
    pub fn open(
        pool: Option<&Arc<dyn CodecPool>>,
        rate: i32,
        frame_ms: i32,
        out_rate: u32,
    ) -> Result<DecodeStream, DecodeError> {
        match pool {
            None => Decoder::new(rate, frame_ms, out_rate).map(|d| DecodeStream::Own(Box::new(d))),
            Some(p) => match p.decode_root((rate, frame_ms, out_rate)) {
                Some((root, r, o)) => Ok(DecodeStream::Shared {
                    pool: p.clone(),
                    root,
                    at: root,
                    rates: (r, o),
                    private: None,
                }),
                None => Err(DecodeError::NoDecoder(rate)),
            },
        }
    }

    /// Decode rate and output rate, Hz.
    pub fn rates(&self) -> (u32, u32) {
        match self {
            DecodeStream::Own(d) => (d.rate(), d.out_rate()),
            DecodeStream::Shared { rates, .. } => *rates,
        }
    }

    /// `ResetDecoder`: back to a fresh stream.
    pub fn reset(&mut self) {
        match self {
            DecodeStream::Own(d) => d.reset(),
            DecodeStream::Shared { root, at, private, .. } => {
                *at = *root;
                *private = None;
            }
        }
    }

    /// One packet. A pool that is full hands over a private decoder, kept until the next reset
    /// (which returns to the pool).
    pub fn decode(&mut self, packet: &[u8]) -> Decoded {
        match self {
            DecodeStream::Own(d) => d.decode(packet).map(Arc::from),
            DecodeStream::Shared {
                pool, private: Some(d), ..
            } => {
                pool.private_steps(true, 1);
                d.decode(packet).map(Arc::from)
            }
            DecodeStream::Shared { pool, at, private, .. } => match pool.decode(*at, packet) {
                Some(Stepped::Shared(n, out)) => {
                    *at = n;
                    out
                }
                Some(Stepped::Private(state, out)) => {
                    *private = Some(state);
                    out
                }
                None => Err(DecodeError::Undecodable("lost position in the codec pool")),
            },
        }
    }
}

/// The microphone encoder as a device holds it (see [`DecodeStream`]).
pub enum EncodeStream {
    /// An encoder of its own.
    Own(Box<Encoder>),
    /// A position in a pool's encoder memo.
    Shared {
        /// The pool.
        pool: Arc<dyn CodecPool>,
        /// The current position.
        at: u32,
    },
    /// A private encoder the pool handed over (memo full, or a stream of its own), counted in
    /// the pool's stats.
    Private {
        /// The pool that handed it over.
        pool: Arc<dyn CodecPool>,
        /// The encoder.
        encoder: Box<Encoder>,
    },
}

impl std::fmt::Debug for EncodeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeStream::Own(e) => f.debug_tuple("Own").field(e).finish(),
            EncodeStream::Shared { at, .. } => f.debug_struct("Shared").field("at", at).finish(),
            EncodeStream::Private { encoder, .. } => f.debug_tuple("Private").field(encoder).finish(),
        }
    }
}

impl EncodeStream {
    /// A fresh microphone encoder (`Encoder::mic`), in `pool` if given.
    pub fn open(pool: Option<&Arc<dyn CodecPool>>) -> EncodeStream {
        match pool.and_then(|p| Some((p, p.encode_root()?))) {
            Some((p, at)) => EncodeStream::Shared { pool: p.clone(), at },
            None => EncodeStream::Own(Box::new(Encoder::mic())),
        }
    }

    /// One frame to one packet.
    pub fn encode(&mut self, frame: &[i16]) -> Arc<[u8]> {
        match self {
            EncodeStream::Own(e) => e.encode(frame).into(),
            EncodeStream::Private { pool, encoder } => {
                pool.private_steps(false, 1);
                encoder.encode(frame).into()
            }
            EncodeStream::Shared { pool, at } => match pool.encode(*at, frame) {
                Some(Stepped::Shared(n, out)) => {
                    *at = n;
                    out
                }
                Some(Stepped::Private(state, out)) => {
                    *self = EncodeStream::Private {
                        pool: pool.clone(),
                        encoder: state,
                    };
                    out
                }
                None => Arc::from(&[][..]),
            },
        }
    }
}
