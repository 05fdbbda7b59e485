//! Faults as data: the ways a real board fails while every tool still says `true`
//! (docs/reference/architecture.md §5, issue "faults"). Chain faults act at once; construction faults act at the next
//! boot (they change what the board constructs); an NVS fault makes every write fail.

use std::fmt;
use std::str::FromStr;

use crate::audio::ChainFault;

/// A named fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Amplifier shut down (SD pin low, PA never on).
    AmpShutdown,
    /// Speaker wire off.
    SpeakerDisconnected,
    /// A headphone-detect style gate holds the speaker enable low.
    SpeakerGated,
    /// The I2S TX channel never clocks.
    I2sStopped,
    /// The codec is a `DummyAudioCodec` (next boot).
    CodecDummy,
    /// The OLED panel does not answer: `NoDisplay` fallback (next boot).
    OledInitFailure,
    /// `esp_camera_init` fails (next boot).
    CameraInitFailure,
    /// Every NVS write fails with `ESP_ERR_NVS_NOT_ENOUGH_SPACE` (`ESP_ERROR_CHECK` panics).
    NvsWriteFailure,
}

impl Fault {
    /// Every fault, in the order error messages list them.
    pub const ALL: [Fault; 8] = [
        Fault::AmpShutdown,
        Fault::SpeakerDisconnected,
        Fault::SpeakerGated,
        Fault::I2sStopped,
        Fault::CodecDummy,
        Fault::OledInitFailure,
        Fault::CameraInitFailure,
        Fault::NvsWriteFailure,
    ];

    /// The name scenarios and the command line use (e.g. `amp_shutdown`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::AmpShutdown => "amp_shutdown",
            Fault::SpeakerDisconnected => "speaker_disconnected",
            Fault::SpeakerGated => "speaker_gated",
            Fault::I2sStopped => "i2s_stopped",
            Fault::CodecDummy => "codec_dummy",
            Fault::OledInitFailure => "oled_init_failure",
            Fault::CameraInitFailure => "camera_init_failure",
            Fault::NvsWriteFailure => "nvs_write_failure",
        }
    }

    /// Whether the fault only takes effect when the board is next constructed.
    pub fn needs_boot(self) -> bool {
        matches!(
            self,
            Fault::CodecDummy | Fault::OledInitFailure | Fault::CameraInitFailure
        )
    }

    /// The analog-chain fault this is, if it is one.
    pub fn chain(self) -> Option<ChainFault> {
        match self {
            Fault::AmpShutdown => Some(ChainFault::AmpShutdown),
            Fault::SpeakerDisconnected => Some(ChainFault::SpeakerDisconnected),
            Fault::SpeakerGated => Some(ChainFault::SpeakerGated),
            Fault::I2sStopped => Some(ChainFault::I2sStopped),
            _ => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault name the twin does not model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault `{0}`; known faults: {names}", names = Fault::ALL.map(Fault::name).join(", "))]
pub struct UnknownFault(pub String);

impl FromStr for Fault {
    type Err = UnknownFault;
    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFault(s.to_string()))
    }
}

impl<'de> serde::Deserialize<'de> for Fault {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fault, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What the network does to the UDP audio channel's datagrams, as data (per mille each, seeded):
/// the MQTT + UDP wire's faults (docs/reference/mqtt.md §6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UdpFaults {
    /// Datagrams lost.
    pub loss: u16,
    /// Datagrams delivered twice.
    pub duplicate: u16,
    /// Datagrams held back and delivered after the next one.
    pub reorder: u16,
    /// Datagrams with one payload byte flipped (AES-CTR has no integrity check).
    pub corrupt: u16,
    /// The seed of the path's generator.
    pub seed: u64,
}

/// One direction of a UDP path with [`UdpFaults`]: each datagram in, what arrives out.
#[derive(Clone, Debug)]
pub struct UdpPath {
    faults: UdpFaults,
    rng: rand_chacha::ChaCha8Rng,
    held: Option<Vec<u8>>,
}

impl UdpPath {
    /// A path with `faults`.
    pub fn new(faults: UdpFaults) -> Self {
        use rand_core::SeedableRng;
        UdpPath {
            faults,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(faults.seed),
            held: None,
        }
    }

    fn roll(&mut self, per_mille: u16) -> bool {
        use rand_core::RngCore;
        per_mille > 0 && self.rng.next_u32() % 1000 < u32::from(per_mille)
    }

    /// What arrives of `datagram` (and of one held back before it), in arrival order.
    pub fn carry(&mut self, mut datagram: Vec<u8>) -> Vec<Vec<u8>> {
        if self.roll(self.faults.loss) {
            return self.held.take().into_iter().collect();
        }
        if datagram.len() > 16 && self.roll(self.faults.corrupt) {
            use rand_core::RngCore;
            let at = 16 + self.rng.next_u32() as usize % (datagram.len() - 16);
            datagram[at] ^= 0x5a;
        }
        if self.held.is_none() && self.roll(self.faults.reorder) {
            self.held = Some(datagram);
            return Vec::new();
        }
        let mut out = vec![datagram];
        if self.roll(self.faults.duplicate) {
            out.push(out[0].clone());
        }
        out.extend(self.held.take());
        out
    }
}

/// A `--udp-fault` that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "udp fault `{0}`: expected KIND:PER_MILLE[,…] with KIND loss, duplicate, reorder or corrupt (0–1000), and optionally seed:N; e.g. loss:50,reorder:10"
)]
pub struct BadUdpFaults(pub String);

impl FromStr for UdpFaults {
    type Err = BadUdpFaults;
    /// `loss:50,duplicate:20,reorder:10,corrupt:5,seed:7` (per mille; any subset, any order).
    fn from_str(s: &str) -> Result<UdpFaults, BadUdpFaults> {
        let bad = || BadUdpFaults(s.to_string());
        let mut f = UdpFaults::default();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (kind, value) = part.trim().split_once(':').ok_or_else(bad)?;
            if kind == "seed" {
                f.seed = value.parse().map_err(|_| bad())?;
                continue;
            }
            let n: u16 = value.parse().ok().filter(|n| *n <= 1000).ok_or_else(bad)?;
            match kind {
                "loss" => f.loss = n,
                "duplicate" => f.duplicate = n,
                "reorder" => f.reorder = n,
                "corrupt" => f.corrupt = n,
                _ => return Err(bad()),
            }
        }
        Ok(f)
    }
}

impl UdpFaults {
    /// No fault at all (the seed aside).
    pub fn is_none(&self) -> bool {
        self.loss == 0 && self.duplicate == 0 && self.reorder == 0 && self.corrupt == 0
    }

    /// The same faults under another seed (each connection and direction its own stream).
    pub fn reseeded(self, seed: u64) -> UdpFaults {
        UdpFaults {
            seed: self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(seed),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_fault_spec_reads_per_mille_kinds_and_refuses_the_rest() {
        let f: UdpFaults = "loss:50, reorder:10,corrupt:5,seed:7".parse().unwrap();
        assert_eq!(
            f,
            UdpFaults {
                loss: 50,
                duplicate: 0,
                reorder: 10,
                corrupt: 5,
                seed: 7
            }
        );
        assert!("".parse::<UdpFaults>().unwrap().is_none());
        for bad in ["loss", "loss:1001", "loss:-1", "jitter:5", "seed:x", "loss:5;dup:1"] {
            assert!(bad.parse::<UdpFaults>().is_err(), "{bad}");
        }
        let e = "jitter:5".parse::<UdpFaults>().unwrap_err().to_string();
        assert!(e.contains("loss, duplicate, reorder or corrupt"), "{e}");
        assert_ne!(f.reseeded(1).seed, f.reseeded(2).seed);
    }
}
