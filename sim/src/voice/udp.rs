//! The MQTT protocol's audio channel, as bytes: the server hello's `udp` block
//! (`MqttProtocol::ParseServerHello`, `main/protocols/mqtt_protocol.cc:377-467`) and the
//! datagrams both ways (`SendAudio` `:180-212`, the UDP receive callback `:266-334`):
//!
//! ```text
//! |type 0x01|flags|payload_len u16 BE|ssrc u32|timestamp u32 BE|sequence u32 BE|payload…|
//! ```
//!
//! The 16-byte header is built from the server's nonce and is also the AES-128-CTR counter
//! block the payload is encrypted with (`CryptAesCtr`, `:469-500`: PSA's CTR over the whole
//! 128-bit block, big-endian; RustCrypto's `Ctr128BE` is the same). There is no integrity check:
//! anyone who knows the header can inject audio. Sans-IO: no socket here, only bytes in and out
//! and the log line the firmware would print for each refusal (docs/reference/mqtt.md §2).

use aes::cipher::{KeyIvInit, StreamCipher};

use crate::cjson::Item;

type Aes128Ctr = ctr::Ctr128BE<aes::Aes128>;

/// The header's size (`kAudioHeaderSize`).
pub const HEADER: usize = 16;

/// What the server hello's `udp` block gives: where to send, the key and the nonce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpParams {
    /// `udp.server`.
    pub server: String,
    /// `udp.port` (1..=65535).
    pub port: u16,
    /// `udp.key`, 16 bytes from hex.
    pub key: [u8; 16],
    /// `udp.nonce`, 16 bytes from hex: the header template.
    pub nonce: [u8; 16],
}

/// Why the `udp` block was refused: the firmware's `ESP_LOGE` text (`mqtt_protocol.cc:404-429`);
/// the hello is then ignored and the open waits out its 10 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloRefused {
    /// No `udp` object.
    #[error("UDP is not specified")]
    NoUdp,
    /// `server` not a string, `port` not a number in 1..=65535, `key` or `nonce` not strings.
    #[error("Invalid UDP server, port, key, or nonce")]
    BadFields,
    /// `key` or `nonce` is not hex, or not 16 bytes.
    #[error("Invalid AES key or nonce length")]
    BadKey,
}

/// `DecodeHexString` (`mqtt_protocol.cc:512-530`): pairs of hex digits, either case.
fn hex16(text: &[u8]) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16);
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *o = u8::try_from(digit(pair[0])? << 4 | digit(pair[1])?).ok()?;
    }
    Some(out)
}

/// The hello's `udp` block, checked in the firmware's order.
pub fn parse_udp(root: Item<'_>) -> Result<UdpParams, HelloRefused> {
    let udp = root.get(b"udp").filter(Item::is_object).ok_or(HelloRefused::NoUdp)?;
    let string = |name: &[u8]| udp.get(name).and_then(|i| i.c_string());
    let port = udp.get(b"port").filter(Item::is_number).map(|p| p.valueint());
    let (Some(server), Some(port), Some(key), Some(nonce)) =
        (string(b"server"), port, string(b"key"), string(b"nonce"))
    else {
        return Err(HelloRefused::BadFields);
    };
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(HelloRefused::BadFields)?;
    // The nonce is decoded first, then the key (`:425-427`); either failing is the same line.
    let nonce = hex16(nonce).ok_or(HelloRefused::BadKey)?;
    let key = hex16(key).ok_or(HelloRefused::BadKey)?;
    Ok(UdpParams {
        server: String::from_utf8_lossy(server).into_owned(),
        port,
        key,
        nonce,
    })
}

/// What firmware before 2.4.0 makes of the `udp` block it does not check (v2.2.6
/// `mqtt_protocol.cc:345-366`; 1.7.5–2.3.0 alike): a refusal, or where it crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OldUdp {
    /// No `udp` object: logged, the hello ignored.
    #[error("UDP is not specified")]
    NoUdp,
    /// `cJSON_GetObjectItem(udp, "…")->valuestring` of a missing item, or the NULL `valuestring`
    /// of one that is not a string: the firmware dereferences it.
    #[error("server hello: `udp.{0}` is missing or not a string: NULL dereference in ParseServerHello")]
    Null(&'static str),
    /// A key or nonce that does not decode to 16 bytes: mbedtls reads 16 key bytes and the
    /// header code writes 16 nonce bytes whatever the string's length (undefined behaviour;
    /// the twin stops the device here rather than guess).
    #[error(
        "server hello: `udp.{what}` decodes to {len} bytes, not 16: undefined behaviour in ParseServerHello (the twin stops the device)"
    )]
    Length {
        /// `key` or `nonce`.
        what: &'static str,
        /// The decoded length.
        len: usize,
    },
}

/// `DecodeHexString` before 2.4.0 (v2.2.6 `mqtt_protocol.cc:368-385`): pairs of characters,
/// each a hex digit or 0 (`CharToHex` returns 0 for anything else); an odd last character
/// pairs with the string's terminating NUL.
fn hex_lenient(text: &[u8]) -> Vec<u8> {
    let nibble = |c: u8| char::from(c).to_digit(16).map_or(0, |d| d as u8);
    text.chunks(2)
        .map(|p| nibble(p[0]) << 4 | p.get(1).map_or(0, |c| nibble(*c)))
        .collect()
}

/// The hello's `udp` block as firmware before 2.4.0 reads it: nothing checked, a non-number
/// port read as its `valueint` (0) and truncated to 16 bits by the socket's `htons`.
pub fn parse_udp_old(root: Item<'_>) -> Result<UdpParams, OldUdp> {
    let udp = root.get(b"udp").filter(Item::is_object).ok_or(OldUdp::NoUdp)?;
    let string = |name: &'static str| {
        udp.get(name.as_bytes())
            .filter(Item::is_string)
            .and_then(|i| i.c_string())
            .ok_or(OldUdp::Null(name))
    };
    let server = string("server")?;
    let port = udp.get(b"port").ok_or(OldUdp::Null("port"))?;
    let port = if port.is_number() { port.valueint() } else { 0 };
    let (key, nonce) = (string("key")?, string("nonce")?);
    let sixteen = |what: &'static str, text: &[u8]| -> Result<[u8; 16], OldUdp> {
        let bytes = hex_lenient(text);
        <[u8; 16]>::try_from(bytes.as_slice()).map_err(|_| OldUdp::Length { what, len: bytes.len() })
    };
    let nonce = sixteen("nonce", nonce)?;
    let key = sixteen("key", key)?;
    Ok(UdpParams {
        server: String::from_utf8_lossy(server).into_owned(),
        port: port as u16,
        key,
        nonce,
    })
}

/// The size check before 2.4.0: `data.size() < sizeof(aes_nonce_)`, a `std::string` (24 bytes
/// on the ESP32's 32-bit libstdc++), not the 16-byte header.
pub const OLD_MIN_DATAGRAM: usize = 24;

/// Why an incoming datagram was not audio: the firmware's log line for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Shorter than the header.
    #[error("Invalid audio packet size: {0}")]
    Short(usize),
    /// The first byte is not 0x01 (printed with `%x`).
    #[error("Invalid audio packet type: {0:x}")]
    Type(u8),
    /// The header's length is not the datagram's.
    #[error("Audio payload length mismatch: header={header}, datagram={datagram}")]
    Length {
        /// `payload_len` from the header.
        header: u16,
        /// The datagram's size less the header.
        datagram: usize,
    },
    /// A sequence number at or below the last accepted one (logged as a warning).
    #[error("Received duplicate/old audio sequence: {sequence}, last: {last}")]
    Old {
        /// The datagram's sequence.
        sequence: u32,
        /// The last accepted sequence.
        last: u32,
    },
    /// Before 2.4.0: a sequence *below* the last accepted one (a warning; a duplicate passes).
    #[error("Received audio packet with old sequence: {sequence}, expected: {last}")]
    OldBefore24 {
        /// The datagram's sequence.
        sequence: u32,
        /// The last accepted sequence (printed as `expected`).
        last: u32,
    },
}

/// An accepted datagram: the decrypted payload, its timestamp, and the warning a gap gets
/// (`Received audio packet with wrong sequence: …`, accepted all the same).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The Opus packet.
    pub payload: Vec<u8>,
    /// The header's timestamp.
    pub timestamp: u32,
    /// The gap warning, when the sequence skipped.
    pub gap: Option<String>,
}

/// One channel's crypto and counters; a new server hello makes a new one (both sequences 0).
#[derive(Clone, Debug)]
pub struct UdpChannel {
    key: [u8; 16],
    nonce: [u8; 16],
    local_sequence: u32,
    remote_sequence: u32,
}

/// AES-128-CTR of `data` in place with `iv` as the counter block.
fn crypt(key: &[u8; 16], iv: &[u8; 16], data: &mut [u8]) {
    Aes128Ctr::new(key.into(), iv.into()).apply_keystream(data);
}

impl UdpChannel {
    /// The channel a server hello opened.
    pub fn new(params: &UdpParams) -> Self {
        UdpChannel {
            key: params.key,
            nonce: params.nonce,
            local_sequence: 0,
            remote_sequence: 0,
        }
    }

    /// `SendAudio`: the datagram for one Opus packet, or `None` for a payload over 65535 bytes
    /// (`Invalid AES nonce or audio payload length: …`, nothing sent, the counter untouched).
    pub fn seal(&mut self, payload: &[u8], timestamp: u32) -> Option<Vec<u8>> {
        let len = u16::try_from(payload.len()).ok()?;
        self.local_sequence = self.local_sequence.wrapping_add(1);
        let mut header = self.nonce;
        header[2..4].copy_from_slice(&len.to_be_bytes());
        header[8..12].copy_from_slice(&timestamp.to_be_bytes());
        header[12..16].copy_from_slice(&self.local_sequence.to_be_bytes());
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(payload);
        crypt(&self.key, &header, &mut out[HEADER..]);
        Some(out)
    }

    /// The receive callback: checks in the firmware's order, then decrypts with the datagram's
    /// own header as the counter block and moves the remote sequence on.
    pub fn open(&mut self, datagram: &[u8]) -> Result<Opened, Refused> {
        if datagram.len() < HEADER {
            return Err(Refused::Short(datagram.len()));
        }
        if datagram[0] != 0x01 {
            return Err(Refused::Type(datagram[0]));
        }
        let be32 = |at: usize| u32::from_be_bytes([datagram[at], datagram[at + 1], datagram[at + 2], datagram[at + 3]]);
        let len = u16::from_be_bytes([datagram[2], datagram[3]]);
        let (timestamp, sequence) = (be32(8), be32(12));
        if datagram.len() != HEADER + usize::from(len) {
            return Err(Refused::Length {
                header: len,
                datagram: datagram.len() - HEADER,
            });
        }
        if sequence <= self.remote_sequence {
            return Err(Refused::Old {
                sequence,
                last: self.remote_sequence,
            });
        }
        Ok(self.accept(datagram, timestamp, sequence))
    }

    /// A datagram the checks let through: the gap warning when its sequence skipped, the payload
    /// decrypted with the datagram's own header as the counter block, the remote sequence moved.
    fn accept(&mut self, datagram: &[u8], timestamp: u32, sequence: u32) -> Opened {
        let expected = self.remote_sequence.wrapping_add(1);
        let gap = (sequence != expected)
            .then(|| format!("Received audio packet with wrong sequence: {sequence}, expected: {expected}"));
        let mut iv = [0u8; HEADER];
        iv.copy_from_slice(&datagram[..HEADER]);
        let mut payload = datagram[HEADER..].to_vec();
        crypt(&self.key, &iv, &mut payload);
        self.remote_sequence = sequence;
        Opened {
            payload,
            timestamp,
            gap,
        }
    }

    /// The receive callback before 2.4.0 (v2.2.6 `mqtt_protocol.cc:243-287`): under 24 bytes
    /// dropped, the type checked, a sequence below the last dropped (a duplicate is accepted with
    /// the gap warning and played again), the header's length not read: everything after the
    /// header is decrypted.
    pub fn open_before_2_4(&mut self, datagram: &[u8]) -> Result<Opened, Refused> {
        if datagram.len() < OLD_MIN_DATAGRAM {
            return Err(Refused::Short(datagram.len()));
        }
        if datagram[0] != 0x01 {
            return Err(Refused::Type(datagram[0]));
        }
        let be32 = |at: usize| u32::from_be_bytes([datagram[at], datagram[at + 1], datagram[at + 2], datagram[at + 3]]);
        let (timestamp, sequence) = (be32(8), be32(12));
        if sequence < self.remote_sequence {
            return Err(Refused::OldBefore24 {
                sequence,
                last: self.remote_sequence,
            });
        }
        Ok(self.accept(datagram, timestamp, sequence))
    }

    /// How xiaozhi-mqtt-gateway opens a device's datagram (`app.js` `onUdpMessage`): only a
    /// sequence *below* the last one is dropped (a duplicate passes), bytes past the announced
    /// length are ignored, and nothing is checked otherwise (its server already routed it).
    pub fn open_lenient(&mut self, datagram: &[u8]) -> Option<Opened> {
        if datagram.len() < HEADER {
            return None;
        }
        let be32 = |at: usize| u32::from_be_bytes([datagram[at], datagram[at + 1], datagram[at + 2], datagram[at + 3]]);
        let len = usize::from(u16::from_be_bytes([datagram[2], datagram[3]]));
        let (timestamp, sequence) = (be32(8), be32(12));
        if sequence < self.remote_sequence || datagram.len() < HEADER + len {
            return None;
        }
        let mut iv = [0u8; HEADER];
        iv.copy_from_slice(&datagram[..HEADER]);
        let mut payload = datagram[HEADER..HEADER + len].to_vec();
        crypt(&self.key, &iv, &mut payload);
        self.remote_sequence = sequence;
        Some(Opened {
            payload,
            timestamp,
            gap: None,
        })
    }

    /// What a third party who saw this channel's datagrams on the wire can send the server: the
    /// same header (type 1, the ssrc from the nonce), the next sequence number, and `payload` as
    /// it is (it has no key, and nothing checks one: docs/reference/mqtt.md §5). The channel's
    /// own counters are not touched.
    pub fn forged(&self, payload: &[u8]) -> Vec<u8> {
        let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
        let mut out = self.nonce.to_vec();
        out[2..4].copy_from_slice(&len.to_be_bytes());
        out[12..16].copy_from_slice(&self.local_sequence.wrapping_add(1).to_be_bytes());
        out.extend_from_slice(&payload[..usize::from(len)]);
        out
    }

    /// The key and the nonce (what a server hello hands out, in hex).
    pub fn secrets(&self) -> ([u8; 16], [u8; 16]) {
        (self.key, self.nonce)
    }

    /// The last sequence number sent.
    pub fn local_sequence(&self) -> u32 {
        self.local_sequence
    }

    /// The last sequence number accepted.
    pub fn remote_sequence(&self) -> u32 {
        self.remote_sequence
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cjson::{Limits, Parser, Terminator};

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_cipher_is_nist_sp800_38a_aes128_ctr() {
        // F.5.1 CTR-AES128.Encrypt: key, initial counter block, four blocks in and out.
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let iv: [u8; 16] = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff").try_into().unwrap();
        let mut data = hex(concat!(
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710"
        ));
        crypt(&key, &iv, &mut data);
        assert_eq!(
            data,
            hex(concat!(
                "874d6191b620e3261bef6864990db6ce",
                "9806f66b7970fdff8617187bb9fffdff",
                "5ae4df3edbd5d35e5b4f09020db03eab",
                "1e031dda2fbe03d1792170a0f3009cee"
            ))
        );
    }

    fn params() -> UdpParams {
        UdpParams {
            server: "127.0.0.1".into(),
            port: 8884,
            key: hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap(),
            nonce: hex("01000000a1b2c3d40000000000000000").try_into().unwrap(),
        }
    }

    #[test]
    fn a_sealed_packet_has_the_firmwares_header_and_opens_on_the_other_side() {
        let mut device = UdpChannel::new(&params());
        let d = device.seal(b"opus!", 0).unwrap();
        assert_eq!(
            &d[..HEADER],
            &hex("01000005a1b2c3d40000000000000001")[..],
            "type, len 5, ssrc, ts 0, seq 1"
        );
        assert_ne!(&d[HEADER..], b"opus!", "encrypted");
        let mut server = UdpChannel::new(&params());
        let opened = server.open(&d).unwrap();
        assert_eq!(
            (opened.payload.as_slice(), opened.timestamp, opened.gap),
            (&b"opus!"[..], 0, None)
        );
        let d2 = device.seal(b"more", 7).unwrap();
        assert_eq!(&d2[12..16], &[0, 0, 0, 2]);
        assert_eq!(&d2[8..12], &[0, 0, 0, 7]);
    }

    #[test]
    fn refusals_come_in_the_firmwares_order_with_its_log_lines() {
        let mut tx = UdpChannel::new(&params());
        let mut rx = UdpChannel::new(&params());
        let one = tx.seal(b"abc", 0).unwrap();
        assert_eq!(
            rx.open(&one[..10]).unwrap_err().to_string(),
            "Invalid audio packet size: 10"
        );
        let mut typed = one.clone();
        typed[0] = 0x2a;
        assert_eq!(
            rx.open(&typed).unwrap_err().to_string(),
            "Invalid audio packet type: 2a"
        );
        let mut long = one.clone();
        long.push(0);
        assert_eq!(
            rx.open(&long).unwrap_err().to_string(),
            "Audio payload length mismatch: header=3, datagram=4"
        );
        rx.open(&one).unwrap();
        assert_eq!(
            rx.open(&one).unwrap_err().to_string(),
            "Received duplicate/old audio sequence: 1, last: 1"
        );
        let _skipped = tx.seal(b"lost", 0).unwrap();
        let three = tx.seal(b"xyz", 0).unwrap();
        let opened = rx.open(&three).unwrap();
        assert_eq!(
            opened.gap.as_deref(),
            Some("Received audio packet with wrong sequence: 3, expected: 2")
        );
        assert_eq!(rx.remote_sequence(), 3);
    }

    #[test]
    fn a_datagram_with_the_right_header_from_anyone_is_taken_as_audio() {
        // No integrity check: bytes that were never encrypted decrypt to garbage and pass.
        let mut rx = UdpChannel::new(&params());
        let mut forged = hex("01000004a1b2c3d400000000000000ff");
        forged.extend_from_slice(b"junk");
        let opened = rx.open(&forged).unwrap();
        assert_eq!(opened.payload.len(), 4);
        assert_ne!(opened.payload, b"junk");
    }

    fn parse(text: &str) -> Result<UdpParams, HelloRefused> {
        let mut p = Parser::new();
        let doc = p.parse(text.as_bytes(), Terminator::Length, Limits::default()).unwrap();
        parse_udp(doc.root())
    }

    #[test]
    fn the_hellos_udp_block_is_checked_as_the_firmware_does() {
        let ok = r#"{"udp":{"server":"10.0.0.2","port":8884,"key":"2B7E151628AED2A6ABF7158809CF4F3C","nonce":"01000000a1b2c3d40000000000000000"}}"#;
        let p = parse(ok).unwrap();
        assert_eq!((p.server.as_str(), p.port), ("10.0.0.2", 8884));
        assert_eq!(p.key, params().key, "upper-case hex");
        assert_eq!(parse("{}").unwrap_err(), HelloRefused::NoUdp);
        assert_eq!(parse(r#"{"udp":[]}"#).unwrap_err(), HelloRefused::NoUdp);
        for bad in [
            ok.replace("8884", "0"),
            ok.replace("8884", "65536"),
            ok.replace("8884", "\"8884\""),
            ok.replace("\"10.0.0.2\"", "2"),
        ] {
            assert_eq!(parse(&bad).unwrap_err(), HelloRefused::BadFields, "{bad}");
        }
        for bad in [ok.replace("3C\"", "3\""), ok.replace("01000000a1", "0100000ga1")] {
            assert_eq!(parse(&bad).unwrap_err(), HelloRefused::BadKey, "{bad}");
        }
        assert_eq!(HelloRefused::BadKey.to_string(), "Invalid AES key or nonce length");
    }
}
