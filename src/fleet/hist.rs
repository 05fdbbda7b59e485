//! The latency histogram of fleet summaries (`hdrhistogram`, 3 significant digits, in
//! microseconds) and its text form: the standard V2 + DEFLATE serialisation, base64-encoded.
//! Reading one back checks every length it claims before anything is allocated (a crafted
//! shard must not make `fleet merge` allocate what its bytes only claim; docs/guarantees.md,
//! "Input limits").

use anyhow::{Context, Result, bail};
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// A latency histogram in microseconds.
#[derive(Clone, Debug)]
pub struct Hist(Histogram<u64>);

impl Hist {
    pub fn new() -> Hist {
        // 1 µs .. 1 h, 3 significant digits; grows beyond if ever needed.
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits are valid")));
        h.auto(true);
        Hist(h)
    }

    pub fn record(&mut self, us: u64) {
        let _ = self.0.record(us.max(1));
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The largest value recorded, ms.
    pub fn max_ms(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }

    /// The value at percentile `p`, ms (`None` when empty).
    pub fn ms_at(&self, p: f64) -> Option<f64> {
        (!self.is_empty()).then(|| self.0.value_at_quantile(p / 100.0) as f64 / 1000.0)
    }

    /// What was recorded since `earlier` (a copy of this histogram taken before).
    pub fn since(&self, earlier: &Hist) -> Hist {
        let mut out = self.clone();
        if out.0.subtract(&earlier.0).is_err() {
            return self.clone();
        }
        out
    }

    pub fn add(&mut self, other: &Hist) -> Result<()> {
        self.0
            .add(&other.0)
            .map_err(|e| anyhow::anyhow!("histograms do not merge: {e:?}"))
    }

    pub(crate) fn encode(&self) -> String {
        let mut buf = Vec::new();
        let _ = V2DeflateSerializer::new().serialize(&self.0, &mut buf);
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    pub(crate) fn decode(text: &str) -> Result<Hist> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .context("histogram: not base64")?;
        let plain = checked_v2(&bytes)?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut plain.as_slice())
            .map_err(|e| anyhow::anyhow!("histogram: not an HdrHistogram V2 encoding ({e:?})"))?;
        let mut out = Hist::new();
        out.0.add(&h).map_err(|e| anyhow::anyhow!("histogram: {e:?}"))?;
        Ok(out)
    }
}

/// The HdrHistogram V2 cookies (word size 8 in the low bits): plain, and DEFLATE-compressed
/// around a plain one.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// The plain V2 header: cookie, payload length, normalising offset, significant digits (u32
/// each), lowest and highest trackable value (u64 each), integer-to-double ratio (f64).
const V2_HEADER: usize = 40;
/// The most bytes a shard's histogram may inflate to: a 3-digit histogram has at most 66,560
/// counts, each at most a 9-byte varint (about 600 KB).
const MAX_PLAIN_HISTOGRAM: u64 = 1 << 20;

/// The plain V2 encoding inside a compressed one, checked so that hdrhistogram's decoder can
/// neither allocate what the bytes only claim nor overflow: the compressed length is at most
/// the bytes present, the inflated bytes at most [`MAX_PLAIN_HISTOGRAM`], the payload length at
/// most what follows the header, at most 3 significant digits (what the twin writes: the counts
/// then take at most 532 KB), and every varint of the payload a count or a run of zeros inside
/// the histogram (a crafted shard once claimed 2^32 - 1 bytes and aborted the merge on a
/// 4.2 GB allocation).
fn checked_v2(bytes: &[u8]) -> Result<Vec<u8>> {
    use std::io::Read;
    let word = |b: &[u8], at: usize| b.get(at..at + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    if word(bytes, 0) != Some(V2_COMPRESSED_COOKIE) {
        bail!("histogram: not an HdrHistogram V2 + DEFLATE encoding");
    }
    let claimed = word(bytes, 4).unwrap_or(0) as usize;
    let present = bytes.len() - 8.min(bytes.len());
    if claimed > present {
        bail!("histogram: claims {claimed} compressed bytes where {present} are present");
    }
    let mut plain = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[8..8 + claimed])
        .take(MAX_PLAIN_HISTOGRAM + 1)
        .read_to_end(&mut plain)
        .context("histogram: not DEFLATE data")?;
    if plain.len() as u64 > MAX_PLAIN_HISTOGRAM {
        bail!("histogram: inflates to more than {MAX_PLAIN_HISTOGRAM} bytes");
    }
    if plain.len() < V2_HEADER || word(&plain, 0) != Some(V2_COOKIE) {
        bail!("histogram: not an HdrHistogram V2 encoding inside the DEFLATE data");
    }
    let payload = word(&plain, 4).unwrap_or(0) as usize;
    if payload > plain.len() - V2_HEADER {
        bail!(
            "histogram: claims a {payload}-byte payload where {} bytes follow",
            plain.len() - V2_HEADER
        );
    }
    let digits = word(&plain, 12).unwrap_or(0);
    if digits > 3 {
        bail!("histogram: {digits} significant digits (the twin writes 3)");
    }
    let long = |at: usize| u64::from_be_bytes(plain[at..at + 8].try_into().unwrap_or([0; 8]));
    let counts = Histogram::<u64>::new_with_bounds(long(16), long(24), digits as u8)
        .map_err(|e| anyhow::anyhow!("histogram: impossible bounds ({e:?})"))?
        .distinct_values();
    check_payload(&plain[V2_HEADER..V2_HEADER + payload], counts)?;
    Ok(plain)
}

/// The most values a histogram may hold in all: 2^53 (far beyond any fleet's turns; hdrhistogram
/// sums counts with plain additions, which three counts near `i64::MAX` overflow).
const MAX_TOTAL: u64 = 1 << 53;

/// Every zig-zag varint of a V2 payload (LEB128, the ninth byte whole) is a count or a run of
/// zeros that stays inside `counts` slots, and the counts add up to at most [`MAX_TOTAL`].
fn check_payload(payload: &[u8], counts: usize) -> Result<()> {
    let mut at = 0;
    let mut index: u64 = 0;
    let mut total: u64 = 0;
    while at < payload.len() {
        let mut value: u64 = 0;
        let mut i = 0;
        loop {
            let Some(&b) = payload.get(at + i) else {
                bail!("histogram: a count is cut off at the end of the payload");
            };
            if i == 8 {
                value |= u64::from(b) << 56;
                i += 1;
                break;
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        at += i;
        let n = ((value >> 1) as i64) ^ -((value & 1) as i64);
        let step = if n < 0 { n.unsigned_abs() } else { 1 };
        index = index.saturating_add(step);
        if index > counts as u64 + 1 {
            bail!("histogram: the payload runs past its {counts} counts");
        }
        if n > 0 {
            total = total.saturating_add(n.unsigned_abs());
            if total > MAX_TOTAL {
                bail!("histogram: more than {MAX_TOTAL} values in all (its counts would overflow when summed)");
            }
        }
    }
    Ok(())
}

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::summary::Latency;

    #[test]
    fn histograms_survive_the_text_form_and_merge_exactly() {
        let mut a = Hist::new();
        let mut b = Hist::new();
        let mut all = Hist::new();
        for i in 1..=5000u64 {
            let v = i * 37 % 100_000 + 500;
            if i % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        let (la, lb) = (Latency::of(&a), Latency::of(&b));
        let mut m = la.hist().unwrap();
        m.add(&lb.hist().unwrap()).unwrap();
        assert_eq!(m.len(), 5000);
        for p in [50.0, 90.0, 99.0, 100.0] {
            assert_eq!(m.ms_at(p), all.ms_at(p), "p{p}");
        }
        assert!(Hist::decode("not base64!").is_err());
        assert!(Hist::decode("AAAA").is_err());
    }

    /// A histogram's plain V2 bytes (cookie, header, `payload`), deflated and base64-encoded.
    fn crafted(digits: u32, claimed_payload: Option<u32>, payload: &[u8]) -> String {
        use std::io::Write;
        let mut plain = Vec::new();
        plain.extend_from_slice(&V2_COOKIE.to_be_bytes());
        plain.extend_from_slice(&claimed_payload.unwrap_or(payload.len() as u32).to_be_bytes());
        plain.extend_from_slice(&0u32.to_be_bytes());
        plain.extend_from_slice(&digits.to_be_bytes());
        plain.extend_from_slice(&1u64.to_be_bytes());
        plain.extend_from_slice(&3_600_000_000u64.to_be_bytes());
        plain.extend_from_slice(&1f64.to_be_bytes());
        plain.extend_from_slice(payload);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&plain).unwrap();
        let deflated = z.finish().unwrap();
        let mut bytes = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(deflated.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&deflated);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn crafted_histograms_are_refused_before_anything_is_allocated() {
        // Well formed: two counts of 1 at the first two slots.
        assert!(Hist::decode(&crafted(3, None, &[2, 2])).is_ok());
        // A payload that claims 2^32 - 1 bytes (it once made the merge allocate 4.2 GB).
        let e = Hist::decode(&crafted(3, Some(u32::MAX), &[2, 2]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("claims a 4294967295-byte payload"), "{e}");
        // The compressed length claims more than is there.
        let mut raw = base64::engine::general_purpose::STANDARD
            .decode(crafted(3, None, &[2]))
            .unwrap();
        raw[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let e = Hist::decode(&base64::engine::general_purpose::STANDARD.encode(raw))
            .unwrap_err()
            .to_string();
        assert!(e.contains("compressed bytes where"), "{e}");
        // Five significant digits would size 50 MB of counts.
        let e = Hist::decode(&crafted(5, None, &[2])).unwrap_err().to_string();
        assert!(e.contains("5 significant digits"), "{e}");
        // i64::MIN as a run of zeros (hdrhistogram negates it: an overflow).
        let e = Hist::decode(&crafted(3, None, &[0xff; 9])).unwrap_err().to_string();
        assert!(e.contains("runs past"), "{e}");
        // Three counts near i64::MAX: their sum overflows hdrhistogram's percentile walk.
        let big = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        let e = Hist::decode(&crafted(3, None, &[big, big, big].concat()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("values in all"), "{e}");
        // A varint cut off at the end.
        let e = Hist::decode(&crafted(3, None, &[0x80])).unwrap_err().to_string();
        assert!(e.contains("cut off"), "{e}");
    }
}
