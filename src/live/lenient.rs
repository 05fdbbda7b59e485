//! The device's WebSocket reads text frames as the firmware does: bytes, not UTF-8
//! (docs/wire.md, "What the device's WebSocket accepts").
//!
//! esp-ml307's `WebSocket::OnTcpData` hands a text frame's payload to the protocol as it came;
//! nothing checks its UTF-8, and cJSON parses it as bytes (a tool name with `\xc3(` in it is
//! answered `Unknown tool: self.\xc3(`). tungstenite refuses such a text message and ends the
//! connection. [`Lenient`] sits between the socket and tungstenite: it reads the server's frame
//! headers as they stream past (tungstenite's own parser, [`FrameHeader::parse`]), turns the
//! opcode of every text frame into binary in place, and remembers, message by message, which
//! ones were text ([`Lenient::next_kind`]). tungstenite then does everything else (payload
//! lengths, fragments, control frames, limits) and hands over the bytes untouched.

use std::collections::VecDeque;
use std::io::Cursor;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

/// What a data message was on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A text message (delivered as binary; its bytes are exactly the payload's).
    Text,
    /// A binary message.
    Binary,
}

/// The longest frame header: 2 bytes, 8 of extended length, 4 of mask.
const MAX_HEADER: usize = 14;

/// Where the reader is in the server's stream of frames.
#[derive(Debug)]
enum At {
    /// Gathering a header (bytes so far).
    Header { bytes: [u8; MAX_HEADER], have: usize },
    /// Inside a payload, this many bytes to go.
    Payload { left: u64 },
}

impl At {
    fn header() -> At {
        At::Header {
            bytes: [0; MAX_HEADER],
            have: 0,
        }
    }
}

/// A socket whose incoming text frames reach tungstenite as binary ones.
#[derive(Debug)]
pub struct Lenient<S> {
    inner: S,
    at: At,
    kinds: VecDeque<Kind>,
}

impl<S> Lenient<S> {
    /// Wraps `inner`, at the start of a frame.
    pub fn new(inner: S) -> Self {
        Lenient {
            inner,
            at: At::header(),
            kinds: VecDeque::new(),
        }
    }

    /// What the next data message tungstenite hands over was on the wire (messages are
    /// delivered in the order their first frames arrived). `Binary` if nothing is known.
    pub fn next_kind(&mut self) -> Kind {
        self.kinds.pop_front().unwrap_or(Kind::Binary)
    }

    /// Bytes read before the wrapper existed (after the handshake's header block), rewritten
    /// as if they had come through it.
    pub fn scan_leftover(&mut self, bytes: &mut [u8]) {
        self.scan(bytes);
    }

    /// Reads the header bytes in `bytes` (rewriting a text opcode to binary) and skips payloads.
    fn scan(&mut self, bytes: &mut [u8]) {
        let mut i = 0;
        while i < bytes.len() {
            match &mut self.at {
                At::Payload { left } => {
                    let take = (*left).min((bytes.len() - i) as u64);
                    *left -= take;
                    i += take as usize;
                    if *left == 0 {
                        self.at = At::header();
                    }
                }
                At::Header { bytes: head, have } => {
                    if *have == 0 {
                        // FIN, RSV and the opcode; only the first frame of a message has a
                        // data opcode (continuations are 0, control frames 8..=10).
                        match bytes[i] & 0x0f {
                            1 => {
                                bytes[i] = (bytes[i] & 0xf0) | 0x2;
                                self.kinds.push_back(Kind::Text);
                            }
                            2 => self.kinds.push_back(Kind::Binary),
                            _ => {}
                        }
                    }
                    head[*have] = bytes[i];
                    *have += 1;
                    i += 1;
                    let mut cursor = Cursor::new(&head[..*have]);
                    if let Ok(Some((header, length))) = FrameHeader::parse(&mut cursor) {
                        debug_assert!(!matches!(header.opcode, OpCode::Data(Data::Text)));
                        self.at = if length == 0 {
                            At::header()
                        } else {
                            At::Payload { left: length }
                        };
                    } else if *have == MAX_HEADER {
                        // Not a header tungstenite can read: it ends the connection on these
                        // bytes itself; stop rewriting.
                        self.at = At::Payload { left: u64::MAX };
                    }
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lenient<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut me.inner).poll_read(cx, buf))?;
        me.scan(&mut buf.filled_mut()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Lenient<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server frame (unmasked) with `opcode` and `payload`.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(u8::from(fin) << 7) | opcode];
        match payload.len() {
            n if n < 126 => f.push(n as u8),
            n if n < 65536 => {
                f.push(126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn text_opcodes_become_binary_in_every_split_and_kinds_follow_messages() {
        let big = vec![b'x'; 70_000];
        let frames = [
            frame(true, 1, b"{\"a\":\"\xc3(\"}"),
            frame(true, 2, &[1, 2, 3]),
            frame(true, 9, b"ping"),
            frame(false, 1, b"part one "),
            frame(true, 0, &big),
            frame(true, 1, b""),
        ];
        let (mut stream, mut want) = (Vec::new(), Vec::new());
        for f in &frames {
            let mut w = f.clone();
            if w[0] & 0x0f == 1 {
                w[0] = (w[0] & 0xf0) | 2;
            }
            stream.extend_from_slice(f);
            want.extend(w);
        }
        for chunk in [1, 2, 3, 7, 4096, stream.len()] {
            let mut l = Lenient::new(());
            let mut out = stream.clone();
            for piece in out.chunks_mut(chunk) {
                l.scan(piece);
            }
            // Every text opcode is now binary; everything else is untouched.
            assert_eq!(out, want, "chunks of {chunk}");
            let kinds: Vec<Kind> = std::iter::from_fn(|| (!l.kinds.is_empty()).then(|| l.next_kind())).collect();
            assert_eq!(
                kinds,
                [Kind::Text, Kind::Binary, Kind::Text, Kind::Text],
                "chunks of {chunk}"
            );
        }
    }
}
