//! Lines from a stream, each at most a stated size (docs/guarantees.md, "Input limits").
//!
//! `AsyncBufReadExt::read_until` and `lines` grow their buffer until the line ends, so one line
//! without a newline (`/dev/zero`, a stuck client) takes as much memory as it has bytes.
//! [`BoundedLines`] keeps at most `cap` bytes of a line: past that it reads on to the line's
//! end without keeping anything and hands over [`Line::TooLong`] with the length seen.
//!
//! It is cancel-safe, so it can sit in a `tokio::select!` beside timers: a partial line lives
//! in the reader, not in the future, and bytes are consumed from the stream only once copied.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line, without its `\n` (and a `\r` before it).
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line of at most the reader's cap.
    Whole(Vec<u8>),
    /// A longer line: nothing of it was kept; `bytes` is its length.
    TooLong {
        /// How many bytes the line had (without its line end).
        bytes: u64,
    },
}

/// Reads lines of at most `cap` bytes from `inner`.
pub struct BoundedLines<R> {
    inner: R,
    cap: usize,
    line: Vec<u8>,
    /// Bytes of the current line seen so far (kept or not).
    seen: u64,
    /// The last byte seen was a `\r` (not part of the line if the `\n` follows).
    cr: bool,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// A reader of `inner`'s lines; a line longer than `cap` bytes is not kept.
    pub fn new(inner: R, cap: usize) -> Self {
        BoundedLines {
            inner,
            cap,
            line: Vec::new(),
            seen: 0,
            cr: false,
        }
    }

    /// The next line, `None` at the end of the stream (a last line without a newline counts).
    pub async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let avail = self.inner.fill_buf().await?;
            if avail.is_empty() {
                return Ok((self.seen > 0).then(|| self.finish()));
            }
            let (part, used, ended) = match memchr::memchr(b'\n', avail) {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            // One byte past the cap is kept room for a `\r` before the `\n`.
            let room = (self.cap + 1).saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            self.seen += part.len() as u64;
            if let Some(&last) = part.last() {
                self.cr = last == b'\r';
            }
            self.inner.consume(used);
            if ended {
                return Ok(Some(self.finish()));
            }
        }
    }

    fn finish(&mut self) -> Line {
        let mut seen = std::mem::take(&mut self.seen);
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.cr) {
            seen -= 1;
            line.truncate(seen.min(line.len() as u64) as usize);
        }
        if seen > self.cap as u64 {
            return Line::TooLong { bytes: seen };
        }
        Line::Whole(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], cap: usize) -> Vec<Line> {
        let mut r = BoundedLines::new(tokio::io::BufReader::with_capacity(4, input), cap);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().await.unwrap() {
            out.push(l);
        }
        out
    }

    #[tokio::test]
    async fn lines_up_to_the_cap_are_kept_and_longer_ones_only_counted() {
        let got = all(b"ab\r\n0123456789\nxyz\n\nlast", 5).await;
        assert_eq!(
            got,
            vec![
                Line::Whole(b"ab".to_vec()),
                Line::TooLong { bytes: 10 },
                Line::Whole(b"xyz".to_vec()),
                Line::Whole(Vec::new()),
                Line::Whole(b"last".to_vec()),
            ]
        );
        // Exactly the cap is whole (its `\r\n` not counted); one byte more is not.
        assert_eq!(
            all(b"12345\r\n123456\r\n", 5).await,
            vec![Line::Whole(b"12345".to_vec()), Line::TooLong { bytes: 6 }]
        );
        assert_eq!(
            all(b"12345\n123456\n", 5).await,
            vec![Line::Whole(b"12345".to_vec()), Line::TooLong { bytes: 6 }]
        );
    }

    #[tokio::test]
    async fn a_long_line_keeps_no_more_than_the_cap() {
        let input = vec![b'a'; 1 << 20];
        let mut r = BoundedLines::new(&input[..], 100);
        assert_eq!(r.next_line().await.unwrap(), Some(Line::TooLong { bytes: 1 << 20 }));
        assert!(r.line.capacity() <= 4096, "{}", r.line.capacity());
    }
}
