//! Binary audio frames of protocol versions 1, 2 and 3 (`main/protocols/protocol.h`,
//! `websocket_protocol.cc`; docs/reference/voice.md §1).
//!
//! | version | frame |
//! |---|---|
//! | 1 | the Opus packet itself |
//! | 2 | `u16 version, u16 type, u32 reserved, u32 timestamp_ms, u32 payload_size` (big-endian), payload |
//! | 3 | `u8 type, u8 reserved, u16 payload_size` (big-endian), payload |
//!
//! On receive the firmware trusts the header: it copies `payload_size` bytes from where the
//! payload starts, whatever the frame's real length. [`unpack`] says exactly what that copy
//! reads, so the device can be odd in the same way without reading memory it does not have.

/// Header length of a version 2 frame.
pub const V2_HEADER: usize = 16;
/// Header length of a version 3 frame.
pub const V3_HEADER: usize = 4;

/// What the receive callback takes out of one binary frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unpacked {
    /// The payload bytes that are inside the frame (at most `announced`).
    pub payload: Vec<u8>,
    /// The payload size the header announces (the frame's length after the header for version 1).
    pub announced: usize,
    /// How many of the announced bytes lie beyond the end of the frame: the firmware's copy
    /// reads that much past its receive buffer (undefined behaviour on the device).
    pub overread: usize,
    /// The header's timestamp (version 2 only; 0 otherwise).
    pub timestamp: u32,
}

/// Builds the frame `SendAudio` sends for `payload` (`version` other than 2 or 3 means 1).
pub fn pack(version: i32, payload: &[u8], timestamp: u32) -> Vec<u8> {
    match version {
        2 => {
            let mut out = Vec::with_capacity(V2_HEADER + payload.len());
            out.extend_from_slice(&2u16.to_be_bytes());
            out.extend_from_slice(&0u16.to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(&timestamp.to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.extend_from_slice(payload);
            out
        }
        3 => {
            let mut out = Vec::with_capacity(V3_HEADER + payload.len());
            out.push(0);
            out.push(0);
            // The firmware stores the size in a u16: a longer payload's size wraps.
            out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            out.extend_from_slice(payload);
            out
        }
        _ => payload.to_vec(),
    }
}

/// Reads a frame as the receive callback of protocol `version` does (other than 2 or 3 means 1).
/// A frame shorter than its header reads the missing header bytes past the frame too; the twin
/// takes them as zeros.
pub fn unpack(version: i32, frame: &[u8]) -> Unpacked {
    let byte = |i: usize| frame.get(i).copied().unwrap_or(0);
    let (header, announced, timestamp) = match version {
        2 => (
            V2_HEADER,
            u32::from_be_bytes([byte(12), byte(13), byte(14), byte(15)]) as usize,
            u32::from_be_bytes([byte(8), byte(9), byte(10), byte(11)]),
        ),
        3 => (V3_HEADER, usize::from(u16::from_be_bytes([byte(2), byte(3)])), 0),
        _ => (0, frame.len(), 0),
    };
    let present = frame.len().saturating_sub(header).min(announced);
    let start = header.min(frame.len());
    Unpacked {
        payload: frame[start..start + present].to_vec(),
        announced,
        overread: announced - present + header.saturating_sub(frame.len()).min(header),
        timestamp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_round_trips() {
        for v in [1, 2, 3] {
            let f = pack(v, b"opus", 77);
            let u = unpack(v, &f);
            assert_eq!(u.payload, b"opus", "v{v}");
            assert_eq!(u.announced, 4);
            assert_eq!(u.overread, 0);
            assert_eq!(u.timestamp, if v == 2 { 77 } else { 0 });
        }
        assert_eq!(pack(2, b"x", 1).len(), 17);
        assert_eq!(pack(3, b"x", 1), [0, 0, 0, 1, b'x']);
        assert_eq!(pack(0, b"x", 1), b"x");
    }

    #[test]
    fn a_size_that_disagrees_with_the_frame_is_taken_as_the_firmware_takes_it() {
        // Announces 10, carries 3: the copy reads 7 bytes past the frame.
        let u = unpack(3, &[0, 0, 0, 10, 1, 2, 3]);
        assert_eq!(
            (u.payload.as_slice(), u.announced, u.overread),
            (&[1u8, 2, 3][..], 10, 7)
        );
        // Announces 1, carries 3: the rest is ignored.
        let u = unpack(3, &[0, 0, 0, 1, 1, 2, 3]);
        assert_eq!((u.payload.as_slice(), u.overread), (&[1u8][..], 0));
        // A v2 frame of 5 bytes: the header itself is read past the end.
        let u = unpack(2, &[0, 2, 0, 0, 0]);
        assert_eq!((u.payload.len(), u.announced, u.overread), (0, 0, 11));
        // A huge announced size stays a number; nothing is allocated for it.
        let mut f = pack(2, b"ab", 0);
        f[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        let u = unpack(2, &f);
        assert_eq!(
            (u.payload.len(), u.announced, u.overread),
            (2, u32::MAX as usize, u32::MAX as usize - 2)
        );
        assert_eq!(unpack(1, &[]).payload.len(), 0);
    }
}
