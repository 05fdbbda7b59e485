//! Codec work done once for many devices: a memo of Opus streams that gives every device the
//! exact output its own decoder (or encoder) would give, without each device holding one.
//!
//! A codec is a deterministic state machine: from a fresh state, the same inputs in the same
//! order give the same outputs, bit for bit. A fleet of devices that hear the same reply (or
//! say the same utterance) therefore run the same computation thousands of times, each in a
//! ~176 KiB opus-rs decoder (or a ~227 KiB encoder). The memo keeps a trie per stream kind:
//! a node is "the stream after these inputs"; its edge holds the input and the output it gave.
//! A device holds only its position in the trie. A step that an earlier device already took is
//! a lookup; a new step needs the codec state at the device's node, which the memo keeps for
//! the few nodes it stepped last, and otherwise rebuilds by replaying the path from a fresh
//! codec (the inputs are on the edges). Outputs are shared (`Arc`), so a device's playback log
//! points at the same samples as every other device's.
//!
//! Nothing is approximated: a position is exact, a lookup compares the whole input, and a
//! rebuilt state is the state the device's own codec would be in. When the memo is full (a
//! fleet whose streams all differ), a step that would add a node hands the device a private
//! codec at its position instead, and the device goes on with that until its stream is reset.
//!
//! [`CodecPool`] is the interface the device and the backend see (through the streams of
//! [`crate::voice::stream`]); [`SharedCodecs`] implements
//! it behind a mutex so a multi-threaded driver can share one pool (offline runs have one
//! caller at a time; the outputs never depend on who stepped first).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::time::SimDuration;
use crate::voice::codec::{DecodeError, Decoder, Encoder};
use crate::voice::speak::{Timbre, synthesize_text};

/// A codec the memo can drive.
pub trait Stepper: Sized {
    /// What selects a fresh state (e.g. decode rate, frame, output rate).
    type Key: Ord + Clone;
    /// One input unit's element (bytes of a packet, samples of a frame).
    type Elem: Copy + Eq;
    /// What a step gives.
    type Out: Clone;
    /// A fresh codec, or `None` if the key cannot make one.
    fn fresh(key: &Self::Key) -> Option<Self>;
    /// One step.
    fn step(&mut self, input: &[Self::Elem]) -> Self::Out;
    /// Approximate heap bytes of one output (for the memo's budget).
    fn out_bytes(out: &Self::Out) -> usize;
}

struct Node<S: Stepper> {
    parent: u32,
    input: Box<[S::Elem]>,
    out: Option<S::Out>,
    children: Vec<u32>,
}

/// How many codec states the memo keeps at once (at the tips it stepped last).
const LIVE: usize = 8;

/// What a step gave.
pub enum Stepped<S: Stepper> {
    /// The output, and the device's new position in the memo.
    Shared(u32, S::Out),
    /// The output, and a private codec positioned after this input, for the device to go on
    /// with until its stream is reset: the memo is full, or the device left the streams the
    /// memo keeps states for.
    Private(Box<S>, S::Out),
}

/// Counters of a memo (for reports and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoStats {
    /// Steps answered from the memo.
    pub hits: u64,
    /// Steps computed (a new edge).
    pub computed: u64,
    /// Codec states rebuilt by replaying a path.
    pub rebuilds: u64,
    /// Inputs replayed for those rebuilds.
    pub replayed: u64,
    /// Steps that handed the device a private codec (memo full, or a cold branch).
    pub private: u64,
    /// Steps computed without adding an edge: by the private codecs handed out (reported by the
    /// streams that hold them: [`CodecPool::private_steps`]), and a handover step that did not
    /// fit. `computed + private_steps` is every step a codec computed.
    pub private_steps: u64,
    /// Nodes held.
    pub nodes: u64,
    /// Approximate bytes held by the nodes.
    pub bytes: u64,
}

/// A trie of streams of one codec kind.
pub struct Memo<S: Stepper> {
    nodes: Vec<Node<S>>,
    roots: BTreeMap<S::Key, u32>,
    root_key: BTreeMap<u32, S::Key>,
    live: Vec<(u32, S)>,
    budget: usize,
    stats: MemoStats,
}

const NO_PARENT: u32 = u32::MAX;

impl<S: Stepper> Memo<S> {
    /// An empty memo that holds about `budget` bytes of inputs and outputs at most.
    pub fn new(budget: usize) -> Memo<S> {
        Memo {
            nodes: Vec::new(),
            roots: BTreeMap::new(),
            root_key: BTreeMap::new(),
            live: Vec::new(),
            budget,
            stats: MemoStats::default(),
        }
    }

    /// The position of a fresh stream of `key` (`None` if no codec can be made for it).
    pub fn root(&mut self, key: &S::Key) -> Option<u32> {
        if let Some(&r) = self.roots.get(key) {
            return Some(r);
        }
        let state = S::fresh(key)?;
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent: NO_PARENT,
            input: Box::new([]),
            out: None,
            children: Vec::new(),
        });
        self.roots.insert(key.clone(), id);
        self.root_key.insert(id, key.clone());
        self.keep_live(id, state);
        Some(id)
    }

    fn child(&self, at: u32, input: &[S::Elem]) -> Option<u32> {
        self.nodes
            .get(at as usize)?
            .children
            .iter()
            .copied()
            .find(|&c| &*self.nodes[c as usize].input == input)
    }

    fn keep_live(&mut self, at: u32, state: S) {
        if self.live.len() >= LIVE {
            self.live.remove(0);
        }
        self.live.push((at, state));
    }

    /// The codec state at `at` if one is kept there (`true`), else rebuilt by replaying the path
    /// from the root (`false`; a root is a fresh codec, nothing replayed).
    fn state_at(&mut self, at: u32) -> Option<(S, bool)> {
        if let Some(i) = self.live.iter().position(|(n, _)| *n == at) {
            return Some((self.live.remove(i).1, true));
        }
        let mut path = Vec::new();
        let mut n = at;
        while self.nodes.get(n as usize)?.parent != NO_PARENT {
            path.push(n);
            n = self.nodes[n as usize].parent;
        }
        let key = self.root_key.get(&n)?.clone();
        let mut state = S::fresh(&key)?;
        if !path.is_empty() {
            self.stats.rebuilds += 1;
        }
        for &p in path.iter().rev() {
            self.stats.replayed += 1;
            let _ = state.step(&self.nodes[p as usize].input);
        }
        Some((state, false))
    }

    /// One step of the stream at `at` (a position this memo gave). `None` only for a position
    /// that is not this memo's.
    ///
    /// A step nobody took yet runs on the state kept at `at` (the tip of a stream that others
    /// follow: the state moves on to the new tip). Without one, the state is rebuilt once and
    /// handed to the device ([`Stepped::Private`]): a device that left the shared streams
    /// (its own reply, a dropped packet) costs one replay and then what its own codec would,
    /// never a replay per step.
    pub fn step(&mut self, at: u32, input: &[S::Elem]) -> Option<Stepped<S>> {
        if let Some(c) = self.child(at, input) {
            self.stats.hits += 1;
            let out = self.nodes[c as usize].out.clone()?;
            return Some(Stepped::Shared(c, out));
        }
        let (mut state, kept) = self.state_at(at)?;
        let out = state.step(input);
        let cost = std::mem::size_of::<Node<S>>() + std::mem::size_of_val(input) + S::out_bytes(&out);
        let full = self.stats.bytes as usize + cost > self.budget;
        if full || !kept {
            self.stats.private += 1;
        }
        if full {
            // Computed, but no edge kept: the step is the private codec's first.
            self.stats.private_steps += 1;
            return Some(Stepped::Private(Box::new(state), out));
        }
        self.stats.computed += 1;
        self.stats.bytes += cost as u64;
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent: at,
            input: input.into(),
            out: Some(out.clone()),
            children: Vec::new(),
        });
        self.nodes[at as usize].children.push(id);
        self.stats.nodes = self.nodes.len() as u64;
        if kept {
            self.keep_live(id, state);
            Some(Stepped::Shared(id, out))
        } else {
            Some(Stepped::Private(Box::new(state), out))
        }
    }

    /// The counters.
    pub fn stats(&self) -> MemoStats {
        self.stats
    }
}

/// A decoder's key: the rate the server announced, its frame duration, the codec's output rate.
pub type DecodeKey = (i32, i32, u32);

/// Output of one decoded packet: int16 samples at the decoder's output rate.
pub type Decoded = Result<Arc<[i16]>, DecodeError>;

impl Stepper for Decoder {
    type Key = DecodeKey;
    type Elem = u8;
    type Out = Decoded;
    fn fresh(key: &DecodeKey) -> Option<Decoder> {
        Decoder::new(key.0, key.1, key.2).ok()
    }
    fn step(&mut self, input: &[u8]) -> Decoded {
        self.decode(input).map(Arc::from)
    }
    fn out_bytes(out: &Decoded) -> usize {
        out.as_ref().map_or(0, |s| s.len() * 2)
    }
}

impl Stepper for Encoder {
    type Key = ();
    type Elem = i16;
    type Out = Arc<[u8]>;
    fn fresh(_: &()) -> Option<Encoder> {
        Some(Encoder::mic())
    }
    fn step(&mut self, input: &[i16]) -> Arc<[u8]> {
        self.encode(input).into()
    }
    fn out_bytes(out: &Arc<[u8]>) -> usize {
        out.len()
    }
}

/// Where a device's and a backend's codec work is done when it is shared.
pub trait CodecPool: Send + Sync {
    /// The position of a fresh decoder for `key`, and its (decode, output) rates; `None` when
    /// no decoder can be made at that rate.
    fn decode_root(&self, key: DecodeKey) -> Option<(u32, u32, u32)>;
    /// One packet through the decoder at `at`.
    fn decode(&self, at: u32, packet: &[u8]) -> Option<Stepped<Decoder>>;
    /// The position of a fresh microphone encoder.
    fn encode_root(&self) -> Option<u32>;
    /// One microphone frame through the encoder at `at`.
    fn encode(&self, at: u32, frame: &[i16]) -> Option<Stepped<Encoder>>;
    /// A backend's speech of `text`, encoded once per distinct sound ([`synthesize_text`]).
    fn speech(&self, timbre: &Timbre, text: &str, duration: SimDuration, rate: u32) -> Arc<[Vec<u8>]>;
    /// A stream computed `n` steps on a private codec this pool handed it (decoder or
    /// encoder), for the counters: every step is then counted, shared or not.
    fn private_steps(&self, decoder: bool, n: u64);
    /// Counters: decoder memo, encoder memo, speech clips encoded.
    fn stats(&self) -> (MemoStats, MemoStats, u64);
}

/// What identifies a sound to encode: PCM timbres compare their samples, the speech-like voice
/// its text too (what it says shapes its samples; a tone or a recording says nothing).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SpeechKey {
    kind: u8,
    params: [u64; 2],
    pcm: Option<Arc<[i16]>>,
    text: Option<Arc<str>>,
    duration: SimDuration,
    rate: u32,
}

impl SpeechKey {
    fn of(timbre: &Timbre, text: &str, duration: SimDuration, rate: u32) -> SpeechKey {
        let (kind, params, pcm, text) = match timbre {
            Timbre::Speechlike { dbfs } => (0, [dbfs.to_bits(), 0], None, Some(text.into())),
            Timbre::Tone { freq_hz, dbfs } => (1, [freq_hz.to_bits(), dbfs.to_bits()], None, None),
            Timbre::Pcm { rate, samples } => (2, [u64::from(*rate), samples.len() as u64], Some(samples.clone()), None),
        };
        SpeechKey {
            kind,
            params,
            pcm,
            text,
            duration,
            rate,
        }
    }
}

/// The memos of one pool.
pub struct Memos {
    decode: Memo<Decoder>,
    decode_rates: BTreeMap<DecodeKey, (u32, u32)>,
    encode: Memo<Encoder>,
    speech: BTreeMap<SpeechKey, Arc<[Vec<u8>]>>,
    /// The clips in the order they were encoded (the oldest is forgotten first).
    speech_order: std::collections::VecDeque<SpeechKey>,
    /// Packet bytes the clips hold.
    speech_bytes: usize,
    speech_encoded: u64,
}

/// Packet bytes of speech a pool keeps at most (about 8,000 three-second replies: a fleet's
/// every device its own words); beyond, the oldest clips are encoded again when said again.
const SPEECH_BYTES: usize = 64 << 20;

/// What a clip holds in memory: its packets and their vectors.
fn clip_bytes(packets: &[Vec<u8>]) -> usize {
    packets.iter().map(|p| p.len() + std::mem::size_of::<Vec<u8>>()).sum()
}

impl Memos {
    /// Memos that hold about `budget` bytes each at most.
    pub fn new(budget: usize) -> Memos {
        Memos {
            decode: Memo::new(budget),
            decode_rates: BTreeMap::new(),
            encode: Memo::new(budget),
            speech: BTreeMap::new(),
            speech_order: std::collections::VecDeque::new(),
            speech_bytes: 0,
            speech_encoded: 0,
        }
    }
}

/// A pool shared by many devices and backend sessions.
pub struct SharedCodecs {
    memos: Mutex<Memos>,
    /// Steps computed on private decoders and encoders (counted without the lock).
    private_steps: [AtomicU64; 2],
}

impl SharedCodecs {
    /// A pool whose memos hold about `budget` bytes each at most.
    pub fn new(budget: usize) -> Arc<SharedCodecs> {
        Arc::new(SharedCodecs {
            memos: Mutex::new(Memos::new(budget)),
            private_steps: [AtomicU64::new(0), AtomicU64::new(0)],
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Memos) -> T) -> T {
        let mut m = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut m)
    }
}

impl CodecPool for SharedCodecs {
    fn decode_root(&self, key: DecodeKey) -> Option<(u32, u32, u32)> {
        self.with(|m| {
            let r = m.decode.root(&key)?;
            let (rate, out) = match m.decode_rates.get(&key) {
                Some(&rates) => rates,
                None => {
                    let d = Decoder::new(key.0, key.1, key.2).ok()?;
                    m.decode_rates.insert(key, (d.rate(), d.out_rate()));
                    (d.rate(), d.out_rate())
                }
            };
            Some((r, rate, out))
        })
    }
    fn decode(&self, at: u32, packet: &[u8]) -> Option<Stepped<Decoder>> {
        self.with(|m| m.decode.step(at, packet))
    }
    fn encode_root(&self) -> Option<u32> {
        self.with(|m| m.encode.root(&()))
    }
    fn encode(&self, at: u32, frame: &[i16]) -> Option<Stepped<Encoder>> {
        self.with(|m| m.encode.step(at, frame))
    }
    fn speech(&self, timbre: &Timbre, text: &str, duration: SimDuration, rate: u32) -> Arc<[Vec<u8>]> {
        let key = SpeechKey::of(timbre, text, duration, rate);
        if let Some(hit) = self.with(|m| m.speech.get(&key).cloned()) {
            return hit;
        }
        // Encoded outside the lock (a 3 s clip at complexity 10 takes a while); two sessions
        // may both encode the same clip once, with the same bytes.
        let packets: Arc<[Vec<u8>]> = synthesize_text(timbre, text, duration, rate).into();
        self.with(|m| {
            // Another caller may have encoded the same clip meanwhile: keep the first.
            if let Some(v) = m.speech.get(&key) {
                return v.clone();
            }
            m.speech_encoded += 1;
            m.speech_bytes += clip_bytes(&packets);
            m.speech_order.push_back(key.clone());
            m.speech.insert(key, packets.clone());
            while m.speech_bytes > SPEECH_BYTES && m.speech_order.len() > 1 {
                let Some(old) = m.speech_order.pop_front() else { break };
                if let Some(v) = m.speech.remove(&old) {
                    m.speech_bytes -= clip_bytes(&v);
                }
            }
            packets
        })
    }
    fn private_steps(&self, decoder: bool, n: u64) {
        self.private_steps[usize::from(!decoder)].fetch_add(n, Ordering::Relaxed);
    }
    fn stats(&self) -> (MemoStats, MemoStats, u64) {
        let (mut dec, mut enc, speech) = self.with(|m| (m.decode.stats(), m.encode.stats(), m.speech_encoded));
        dec.private_steps += self.private_steps[0].load(Ordering::Relaxed);
        enc.private_steps += self.private_steps[1].load(Ordering::Relaxed);
        (dec, enc, speech)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::speak::synthesize;
    use crate::voice::stream::{DecodeStream, EncodeStream};

    fn packets(secs: u64, dbfs: f64) -> Vec<Vec<u8>> {
        synthesize(&Timbre::Speechlike { dbfs }, SimDuration::from_secs(secs), 24_000)
    }

    /// Decodes `streams` in one decoder stream (reset between streams): its own, or `pool`'s.
    fn decode_all(pool: Option<&Arc<dyn CodecPool>>, streams: &[Vec<Vec<u8>>]) -> Vec<Vec<Decoded>> {
        let mut d = DecodeStream::open(pool, 24_000, 60, 16_000).unwrap();
        streams
            .iter()
            .map(|s| {
                d.reset();
                s.iter().map(|p| d.decode(p)).collect()
            })
            .collect()
    }

    fn own(streams: &[Vec<Vec<u8>>]) -> Vec<Vec<Decoded>> {
        decode_all(None, streams)
    }

    fn shared(pool: &Arc<dyn CodecPool>, streams: &[Vec<Vec<u8>>]) -> Vec<Vec<Decoded>> {
        decode_all(Some(pool), streams)
    }

    #[test]
    fn a_pool_gives_every_device_what_its_own_decoder_gives_branches_resets_and_all() {
        let a = packets(2, -3.0);
        let b = packets(1, -20.0);
        // A stream that shares a prefix with `a` and then drops packets (a branch mid-stream),
        // and one with junk in it (a failed step is part of the stream too).
        let mut dropped = a.clone();
        dropped.drain(10..14);
        let mut junk = a[..8].to_vec();
        junk.push(vec![0xff, 0xff, 0xff]);
        junk.extend_from_slice(&a[8..16]);
        let streams = vec![a.clone(), b.clone(), dropped, junk, a.clone()];
        let expected = own(&streams);
        let pool: Arc<dyn CodecPool> = SharedCodecs::new(64 << 20);
        // Devices that interleave: the second walks the same streams after the first, a third
        // walks them in another order.
        assert_eq!(shared(&pool, &streams), expected);
        assert_eq!(shared(&pool, &streams), expected);
        let rev: Vec<_> = streams.iter().rev().cloned().collect();
        let mut exp_rev = expected.clone();
        exp_rev.reverse();
        assert_eq!(shared(&pool, &rev), exp_rev);
        let (dec, _, _) = pool.stats();
        assert!(dec.hits > dec.computed, "{dec:?}");
        assert!(dec.rebuilds >= 1, "a branch off a cold node replays its path: {dec:?}");
    }

    #[test]
    fn a_full_pool_hands_over_a_private_decoder_with_the_same_output() {
        let a = packets(2, -3.0);
        let expected = own(std::slice::from_ref(&a));
        // Room for a few nodes only.
        let pool: Arc<dyn CodecPool> = SharedCodecs::new(20_000);
        assert_eq!(shared(&pool, std::slice::from_ref(&a)), expected);
        let (dec, _, _) = pool.stats();
        assert!(dec.private >= 1 && dec.computed < a.len() as u64, "{dec:?}");
        // Every step is counted once: a new edge, or a private decoder's.
        assert_eq!(dec.computed + dec.private_steps, a.len() as u64, "{dec:?}");
        // A second device still gets the same bytes (lookups, then its own private decoder).
        assert_eq!(shared(&pool, std::slice::from_ref(&a)), expected);
        let (again, _, _) = pool.stats();
        assert_eq!(
            again.hits + again.computed + again.private_steps,
            2 * a.len() as u64,
            "{again:?}"
        );
    }

    #[test]
    fn interleaved_devices_share_one_computation() {
        let a = packets(3, -3.0);
        let pool: Arc<dyn CodecPool> = SharedCodecs::new(64 << 20);
        let mut devices: Vec<DecodeStream> = (0..50)
            .map(|_| DecodeStream::open(Some(&pool), 24_000, 60, 16_000).unwrap())
            .collect();
        let mut mine = DecodeStream::open(None, 24_000, 60, 16_000).unwrap();
        for p in &a {
            let want = mine.decode(p);
            for d in &mut devices {
                assert_eq!(d.decode(p), want);
            }
        }
        let (dec, _, _) = pool.stats();
        assert_eq!(dec.computed, a.len() as u64);
        assert_eq!(dec.hits, 49 * a.len() as u64);
        assert_eq!(dec.rebuilds, 0);
    }

    #[test]
    fn devices_on_streams_of_their_own_cost_what_their_own_codecs_would_not_a_replay_per_step() {
        // Eight devices, each hearing a different reply, taking turns packet by packet (a real
        // backend whose replies differ): more streams than the memo keeps states for.
        let streams: Vec<Vec<Vec<u8>>> = (0..8).map(|k| packets(1, -3.0 - f64::from(k))).collect();
        let expected: Vec<Vec<Decoded>> = streams.iter().map(|s| own(std::slice::from_ref(s)).remove(0)).collect();
        let pool: Arc<dyn CodecPool> = SharedCodecs::new(64 << 20);
        let mut devices: Vec<DecodeStream> = (0..8)
            .map(|_| DecodeStream::open(Some(&pool), 24_000, 60, 16_000).unwrap())
            .collect();
        let mut got: Vec<Vec<Decoded>> = vec![Vec::new(); 8];
        for i in 0..streams[0].len() {
            for ((d, stream), out) in devices.iter_mut().zip(&streams).zip(&mut got) {
                out.push(d.decode(&stream[i]));
            }
        }
        assert_eq!(got, expected);
        let (dec, _, _) = pool.stats();
        let steps = 8 * streams[0].len() as u64;
        assert!(dec.replayed <= steps, "{dec:?}");
        assert!(dec.computed + dec.replayed <= 2 * steps, "{dec:?}");
    }

    #[test]
    fn the_encoder_memo_matches_an_own_encoder_and_speech_is_encoded_once() {
        let pcm = Timbre::default().render(SimDuration::from_secs(1), 16_000);
        let frames: Vec<&[i16]> = pcm.chunks(960).collect();
        let mut e = EncodeStream::open(None);
        let want: Vec<Arc<[u8]>> = frames.iter().map(|f| e.encode(f)).collect();
        let pool: Arc<dyn CodecPool> = SharedCodecs::new(64 << 20);
        for _ in 0..3 {
            let mut s = EncodeStream::open(Some(&pool));
            let got: Vec<Arc<[u8]>> = frames.iter().map(|f| s.encode(f)).collect();
            assert_eq!(got, want);
        }
        let t = Timbre::default();
        let one = pool.speech(&t, "", SimDuration::from_millis(600), 24_000);
        let two = pool.speech(&t, "", SimDuration::from_millis(600), 24_000);
        assert!(Arc::ptr_eq(&one, &two));
        assert_eq!(&*one, &synthesize(&t, SimDuration::from_millis(600), 24_000)[..]);
        let (_, enc, clips) = pool.stats();
        assert_eq!(
            (enc.computed, enc.hits, clips),
            (frames.len() as u64, 2 * frames.len() as u64, 1)
        );
    }
}
