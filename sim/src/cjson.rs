//! The cJSON 1.7.19 dialect the firmware speaks (docs/reference/firmware.md §2).
//!
//! Mirrors `cJSON.c` (`parse_value`, `parse_number`, `parse_string`, `get_object_item`,
//! `print_string_ptr`, `print_number`) as the xiaozhi firmware uses it. It is deliberately *not*
//! a strict JSON parser: trailing garbage is ignored, every byte ≤ 0x20 counts as whitespace,
//! raw control bytes and invalid UTF-8 inside strings are kept, a bad `\u` escape decodes to NUL,
//! number tokens are whatever `strtod` accepts from the longest run of `0-9 + - e E .`, duplicate
//! keys are kept and lookups are ASCII case-insensitive, first match wins, and every string is seen
//! by the firmware only up to its first NUL.
//!
//! Inputs are bytes, never `&str`: the twin must accept exactly what the device accepts.
//! The parsed tree lives in a flat arena (like cJSON's linked list, with indices instead of
//! pointers) so that a warmed-up [`Parser`] parses a message without allocating.
//!
//! Knows nothing about MCP.

use std::fmt;

mod number;
pub use number::strtod;

/// cJSON's `CJSON_NESTING_LIMIT`: arrays and objects may nest this deep, not one level more.
pub const NESTING_LIMIT: usize = 1000;

/// Heap bytes one `cJSON` item costs on the 32-bit device: the 40-byte struct plus an 8-byte
/// allocator header (used only when a heap budget is given, see [`Limits`]).
pub const ITEM_HEAP_BYTES: usize = 48;
/// Allocator header per heap block (strings).
pub const BLOCK_OVERHEAD_BYTES: usize = 8;

/// How the end of the input is found, i.e. which cJSON entry point the firmware used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Terminator {
    /// `cJSON_ParseWithLength` (WebSocket frames): the whole buffer is input; a NUL byte counts as
    /// whitespace between tokens and is kept inside strings (where it then truncates the C string).
    #[default]
    Length,
    /// `cJSON_Parse` (a C string: MQTT payloads, `McpServer::ParseMessage(std::string)`): input
    /// ends at the first NUL byte, and that NUL itself is part of the buffer (as whitespace).
    Nul,
}

/// Resource limits of one parse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Free heap on the simulated device; `None` means unlimited. When the tree would need more,
    /// the parse fails exactly like a cJSON allocation failure does.
    pub heap_bytes: Option<usize>,
}

/// Why cJSON returned NULL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The bytes are not a value cJSON accepts; `position` is where cJSON gave up.
    #[error("not JSON that cJSON accepts (stopped at byte {position})")]
    Syntax {
        /// Byte offset where parsing stopped.
        position: usize,
    },
    /// More than [`NESTING_LIMIT`] nested arrays/objects.
    #[error("nested deeper than {NESTING_LIMIT} levels (at byte {position})")]
    TooDeep {
        /// Byte offset of the array or object that is one level too deep.
        position: usize,
    },
    /// The tree would not fit in the simulated heap.
    #[error("out of memory: the parsed tree needs more than {heap_bytes} bytes of heap")]
    OutOfMemory {
        /// The heap budget that was exceeded ([`Limits::heap_bytes`]).
        heap_bytes: usize,
    },
}

/// The type of a parsed value (cJSON's `type` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `cJSON_NULL`.
    Null,
    /// `cJSON_False`.
    False,
    /// `cJSON_True`.
    True,
    /// `cJSON_Number`.
    Number,
    /// `cJSON_String`.
    String,
    /// `cJSON_Array`.
    Array,
    /// `cJSON_Object`.
    Object,
}

const NONE: u32 = u32::MAX;

/// Which string of a node [`State::parse_string`] fills in.
#[derive(Clone, Copy)]
enum Slot {
    Key,
    Text,
}

/// Where a decoded string lives: borrowed from the input when it had no escapes, else in the
/// parser's scratch buffer; `c_len` is where the firmware's C string of it ends (its first NUL).
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    start: u32,
    len: u32,
    c_len: u32,
    in_scratch: bool,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    kind: Kind,
    key: Span,
    has_key: bool,
    text: Span,
    double: f64,
    int: i32,
    child: u32,
    next: u32,
}

impl Node {
    fn new(kind: Kind) -> Self {
        Node {
            kind,
            key: Span::default(),
            has_key: false,
            text: Span::default(),
            double: 0.0,
            int: 0,
            child: NONE,
            next: NONE,
        }
    }
}

/// A reusable parser: keeps its arena between parses so the hot path does not allocate.
#[derive(Default)]
pub struct Parser {
    nodes: Vec<Node>,
    scratch: Vec<u8>,
}

/// A parsed document borrowing the input and the parser's arena.
#[derive(Clone, Copy)]
pub struct Doc<'a> {
    input: &'a [u8],
    nodes: &'a [Node],
    scratch: &'a [u8],
}

impl Parser {
    /// A parser with an empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `input` as the firmware's cJSON would. Anything after the first complete value is
    /// ignored (cJSON is called without `require_null_terminated`).
    pub fn parse<'a>(
        &'a mut self,
        input: &'a [u8],
        terminator: Terminator,
        limits: Limits,
    ) -> Result<Doc<'a>, ParseError> {
        self.nodes.clear();
        self.scratch.clear();
        let (content, length) = match terminator {
            Terminator::Length => (input, input.len()),
            Terminator::Nul => {
                let end = c_strlen(input);
                // strlen + the terminator itself, which reads as 0 below.
                (&input[..end], end + 1)
            }
        };
        let mut state = State {
            content,
            length,
            offset: 0,
            depth: 0,
            nodes: &mut self.nodes,
            scratch: &mut self.scratch,
            heap_used: 0,
            heap_limit: limits.heap_bytes,
        };
        if length == 0 {
            return Err(ParseError::Syntax { position: 0 });
        }
        state.skip_utf8_bom();
        state.skip_whitespace();
        state.alloc_item()?;
        state.nodes.push(Node::new(Kind::Null));
        state.parse_value(0)?;
        Ok(Doc {
            input: content,
            nodes: &self.nodes,
            scratch: &self.scratch,
        })
    }
}

/// One-shot convenience: parse with a fresh parser and hand the document to `f`.
pub fn with_parsed<R>(input: &[u8], terminator: Terminator, f: impl FnOnce(Result<Item<'_>, ParseError>) -> R) -> R {
    let mut parser = Parser::new();
    match parser.parse(input, terminator, Limits::default()) {
        Ok(doc) => f(Ok(doc.root())),
        Err(e) => f(Err(e)),
    }
}

struct State<'p> {
    content: &'p [u8],
    length: usize,
    offset: usize,
    depth: usize,
    nodes: &'p mut Vec<Node>,
    scratch: &'p mut Vec<u8>,
    heap_used: usize,
    heap_limit: Option<usize>,
}

fn is_cjson_whitespace(b: u8) -> bool {
    b <= 32
}

impl State<'_> {
    /// The byte at `offset + index`, with the virtual NUL terminator of [`Terminator::Nul`].
    #[inline]
    fn at(&self, index: usize) -> u8 {
        self.content.get(self.offset + index).copied().unwrap_or(0)
    }

    #[inline]
    fn can_access(&self, index: usize) -> bool {
        self.offset + index < self.length
    }

    #[inline]
    fn can_read(&self, size: usize) -> bool {
        self.offset + size <= self.length
    }

    fn syntax(&self) -> ParseError {
        let position = if self.offset < self.length {
            self.offset
        } else {
            self.length.saturating_sub(1)
        };
        ParseError::Syntax { position }
    }

    fn charge(&mut self, bytes: usize) -> Result<(), ParseError> {
        if let Some(limit) = self.heap_limit {
            self.heap_used = self.heap_used.saturating_add(bytes);
            if self.heap_used > limit {
                return Err(ParseError::OutOfMemory { heap_bytes: limit });
            }
        }
        Ok(())
    }

    /// An allocation that is freed again before the next one: must fit, leaves nothing charged.
    fn charge_transient(&mut self, bytes: usize) -> Result<(), ParseError> {
        match self.heap_limit {
            Some(limit) if self.heap_used.saturating_add(bytes) > limit => {
                Err(ParseError::OutOfMemory { heap_bytes: limit })
            }
            _ => Ok(()),
        }
    }

    fn alloc_item(&mut self) -> Result<(), ParseError> {
        self.charge(ITEM_HEAP_BYTES)
    }

    fn skip_utf8_bom(&mut self) {
        if self.offset == 0 && self.can_access(4) && self.at(0) == 0xEF && self.at(1) == 0xBB && self.at(2) == 0xBF {
            self.offset += 3;
        }
    }

    /// `buffer_skip_whitespace`, including its step back onto the last byte at the end.
    fn skip_whitespace(&mut self) {
        // Nearly always there is none: the byte at the offset starts a token.
        if self.content.get(self.offset).is_some_and(|&b| !is_cjson_whitespace(b)) || !self.can_access(0) {
            return;
        }
        while self.can_access(0) && is_cjson_whitespace(self.at(0)) {
            self.offset += 1;
        }
        if self.offset == self.length {
            self.offset -= 1;
        }
    }

    fn starts_with(&self, word: &[u8]) -> bool {
        self.can_read(word.len()) && (0..word.len()).all(|i| self.at(i) == word[i])
    }

    fn parse_value(&mut self, node: usize) -> Result<(), ParseError> {
        if !self.can_access(0) {
            return Err(self.syntax());
        }
        match self.at(0) {
            b'n' if self.starts_with(b"null") => {
                self.nodes[node].kind = Kind::Null;
                self.offset += 4;
                Ok(())
            }
            b'f' if self.starts_with(b"false") => {
                self.nodes[node].kind = Kind::False;
                self.offset += 5;
                Ok(())
            }
            b't' if self.starts_with(b"true") => {
                let n = &mut self.nodes[node];
                n.kind = Kind::True;
                n.int = 1;
                self.offset += 4;
                Ok(())
            }
            b'"' => self.parse_string(node, Slot::Text),
            b'-' | b'0'..=b'9' => self.parse_number(node),
            b'[' => self.parse_container(node, Kind::Array),
            b'{' => self.parse_container(node, Kind::Object),
            _ => Err(self.syntax()),
        }
    }

    fn parse_number(&mut self, node: usize) -> Result<(), ParseError> {
        let is_number_byte = |b: &u8| matches!(b, b'0'..=b'9' | b'+' | b'-' | b'e' | b'E' | b'.');
        // The longest run of number bytes (the virtual NUL of `Terminator::Nul` is not one); its
        // sign and leading digits counted on the way, for a plain integer (ids, volumes).
        let rest = &self.content[self.offset..];
        let sign = usize::from(rest[0] == b'-');
        let digits = rest[sign..].iter().take_while(|b| b.is_ascii_digit()).count();
        let mut run = sign + digits;
        let plain = rest.get(run).is_none_or(|b| !is_number_byte(b));
        if !plain {
            run += rest[run..].iter().take_while(|b| is_number_byte(b)).count();
        }
        // cJSON copies the run into a temporary (run + 1 bytes), freed right after strtod.
        self.charge_transient(run + 1 + BLOCK_OVERHEAD_BYTES)?;
        let parsed = if plain && digits <= number::EXACT_DIGITS {
            number::plain_integer(&rest[..run])
        } else {
            strtod(&rest[..run])
        };
        let Some((consumed, value)) = parsed else {
            return Err(self.syntax());
        };
        let n = &mut self.nodes[node];
        n.kind = Kind::Number;
        n.double = value;
        n.int = valueint(value);
        self.offset += consumed;
        Ok(())
    }

    /// `parse_string`: notes in `node` where the decoded bytes live (its member name or its
    /// string value). Decoded NULs are kept in the bytes; C-string views cut there. The span is
    /// written straight into the node: returned through memory, it was read back wider than it
    /// was written, a stall on every string.
    #[inline(always)]
    fn parse_string(&mut self, node: usize, slot: Slot) -> Result<(), ParseError> {
        debug_assert_eq!(self.at(0), b'"');
        let body = self.offset + 1;
        // The virtual NUL of `Terminator::Nul` is neither a quote nor a backslash: only `content`
        // needs reading.
        let readable = &self.content[body..self.length.min(self.content.len())];
        let i = find_quote_backslash_or_nul(readable);
        if readable.get(i) != Some(&b'"') {
            let span = self.parse_string_on(body, i)?;
            self.set_span(node, slot, span);
            return Ok(());
        }
        // Nearly every string: no escape, no NUL. cJSON allocates the span from the opening quote
        // plus one byte.
        self.charge(i + 2 + BLOCK_OVERHEAD_BYTES)?;
        self.offset = body + i + 1;
        let span = Span {
            start: body as u32,
            len: i as u32,
            c_len: i as u32,
            in_scratch: false,
        };
        self.set_span(node, slot, span);
        Ok(())
    }

    #[inline(always)]
    fn set_span(&mut self, node: usize, slot: Slot, span: Span) {
        let n = &mut self.nodes[node];
        match slot {
            Slot::Key => (n.key, n.has_key) = (span, true),
            Slot::Text => (n.kind, n.text) = (Kind::String, span),
        }
    }

    /// The rest of `parse_string` from the first backslash or NUL at `i`: find the closing
    /// quote, skipping one byte after every backslash, note the first NUL, then decode.
    #[cold]
    fn parse_string_on(&mut self, body: usize, mut i: usize) -> Result<Span, ParseError> {
        let readable = &self.content[body..self.length.min(self.content.len())];
        let (mut skipped, mut nul) = (0usize, None);
        loop {
            match readable.get(i) {
                Some(b'"') => break,
                Some(b'\\') if body + i + 1 < self.length => (skipped, i) = (skipped + 1, i + 2),
                Some(0) => (nul, i) = (nul.or(Some(i)), i + 1),
                _ => {
                    self.offset = body;
                    return Err(self.syntax());
                }
            }
            i += readable.get(i..).map_or(0, find_quote_backslash_or_nul);
        }
        let end = body + i;
        // cJSON allocates (span from the opening quote - backslashes + 1) bytes, an overestimate.
        self.charge(end - self.offset - skipped + 1 + BLOCK_OVERHEAD_BYTES)?;
        if skipped == 0 {
            self.offset = end + 1;
            return Ok(Span {
                start: body as u32,
                len: i as u32,
                c_len: nul.unwrap_or(i) as u32,
                in_scratch: false,
            });
        }
        let out_start = self.scratch.len();
        let mut p = body;
        while p < end {
            let b = byte_at(self.content, p);
            if b != b'\\' {
                self.scratch.push(b);
                p += 1;
                continue;
            }
            let advance = match byte_at(self.content, p + 1) {
                b'b' => push1(self.scratch, 0x08),
                b'f' => push1(self.scratch, 0x0C),
                b'n' => push1(self.scratch, b'\n'),
                b'r' => push1(self.scratch, b'\r'),
                b't' => push1(self.scratch, b'\t'),
                c @ (b'"' | b'\\' | b'/') => push1(self.scratch, c),
                b'u' => match utf16_literal_to_utf8(self.content, p, end, self.scratch) {
                    Some(n) => n,
                    None => {
                        self.scratch.truncate(out_start);
                        self.offset = p;
                        return Err(self.syntax());
                    }
                },
                _ => {
                    self.scratch.truncate(out_start);
                    self.offset = p;
                    return Err(self.syntax());
                }
            };
            p += advance;
        }
        self.offset = end + 1;
        Ok(Span {
            start: out_start as u32,
            len: (self.scratch.len() - out_start) as u32,
            c_len: c_strlen(&self.scratch[out_start..]) as u32,
            in_scratch: true,
        })
    }

    fn parse_container(&mut self, node: usize, kind: Kind) -> Result<(), ParseError> {
        if self.depth >= NESTING_LIMIT {
            return Err(ParseError::TooDeep { position: self.offset });
        }
        self.depth += 1;
        let close = if kind == Kind::Array { b']' } else { b'}' };
        self.offset += 1;
        self.skip_whitespace();
        if self.can_access(0) && self.at(0) == close {
            self.offset += 1;
            self.depth -= 1;
            let n = &mut self.nodes[node];
            n.kind = kind;
            n.child = NONE;
            return Ok(());
        }
        if !self.can_access(0) {
            self.offset -= 1;
            return Err(self.syntax());
        }
        // Step back onto the character in front of the first element.
        self.offset -= 1;
        let mut prev = NONE;
        loop {
            self.alloc_item()?;
            let idx = self.nodes.len();
            if idx >= NONE as usize {
                return Err(ParseError::OutOfMemory {
                    heap_bytes: self.heap_limit.unwrap_or(usize::MAX),
                });
            }
            self.nodes.push(Node::new(Kind::Null));
            if prev == NONE {
                self.nodes[node].child = idx as u32;
            } else {
                self.nodes[prev as usize].next = idx as u32;
            }
            prev = idx as u32;
            if kind == Kind::Object {
                if !self.can_access(1) {
                    return Err(self.syntax());
                }
                self.offset += 1;
                self.skip_whitespace();
                if !self.can_access(0) || self.at(0) != b'"' {
                    // parse_string's fail path leaves the offset just past the would-be quote.
                    self.offset += 1;
                    return Err(self.syntax());
                }
                self.parse_string(idx, Slot::Key)?;
                self.skip_whitespace();
                if !self.can_access(0) || self.at(0) != b':' {
                    return Err(self.syntax());
                }
            }
            self.offset += 1;
            self.skip_whitespace();
            self.parse_value(idx)?;
            self.skip_whitespace();
            if !(self.can_access(0) && self.at(0) == b',') {
                break;
            }
        }
        if !self.can_access(0) || self.at(0) != close {
            return Err(self.syntax());
        }
        self.depth -= 1;
        self.nodes[node].kind = kind;
        self.offset += 1;
        Ok(())
    }
}

/// The index of the first `"`, `\` or NUL in `s` (`s.len()` if none), eight bytes at a time: a
/// byte of a word equal to one of them becomes zero after an XOR, and the lowest set bit of
/// `(w - 0x01…) & !w & 0x80…` marks the first zero byte (higher bits can be false alarms).
fn find_quote_backslash_or_nul(s: &[u8]) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    let zero_bytes = |w: u64| w.wrapping_sub(ONES) & !w & (ONES << 7);
    let mut words = s.chunks_exact(8);
    for (n, word) in words.by_ref().enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let hits = zero_bytes(w) | zero_bytes(w ^ (ONES * u64::from(b'"'))) | zero_bytes(w ^ (ONES * u64::from(b'\\')));
        if hits != 0 {
            return n * 8 + (hits.trailing_zeros() / 8) as usize;
        }
    }
    let tail = words.remainder();
    s.len() - tail.len()
        + tail
            .iter()
            .position(|&b| matches!(b, b'"' | b'\\' | 0))
            .unwrap_or(tail.len())
}

#[inline]
fn byte_at(content: &[u8], i: usize) -> u8 {
    content.get(i).copied().unwrap_or(0)
}

fn push1(out: &mut Vec<u8>, b: u8) -> usize {
    out.push(b);
    2
}

/// cJSON's `parse_hex4`: any non-hex digit makes the whole escape 0.
fn parse_hex4(content: &[u8], at: usize) -> u32 {
    let mut h = 0u32;
    for i in 0..4 {
        let c = byte_at(content, at + i);
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'A'..=b'F' => c - b'A' + 10,
            b'a'..=b'f' => c - b'a' + 10,
            _ => return 0,
        };
        h = (h << 4) | u32::from(v);
    }
    h
}

/// cJSON's `utf16_literal_to_utf8`: returns the escape length consumed (6 or 12), or `None`
/// when cJSON fails the whole parse (lone low surrogate, broken pair, truncated escape).
fn utf16_literal_to_utf8(content: &[u8], at: usize, end: usize, out: &mut Vec<u8>) -> Option<usize> {
    if end - at < 6 {
        return None;
    }
    let first = parse_hex4(content, at + 2);
    if (0xDC00..=0xDFFF).contains(&first) {
        return None;
    }
    let (codepoint, length) = if (0xD800..=0xDBFF).contains(&first) {
        let second_at = at + 6;
        if end - second_at < 6 {
            return None;
        }
        if byte_at(content, second_at) != b'\\' || byte_at(content, second_at + 1) != b'u' {
            return None;
        }
        let second = parse_hex4(content, second_at + 2);
        if !(0xDC00..=0xDFFF).contains(&second) {
            return None;
        }
        (0x10000 + (((first & 0x3FF) << 10) | (second & 0x3FF)), 12)
    } else {
        (first, 6)
    };
    // Plain UTF-8 encoding; every code point here is ≤ 0x10FFFF.
    if codepoint < 0x80 {
        out.push(codepoint as u8);
    } else if codepoint < 0x800 {
        out.push(0xC0 | (codepoint >> 6) as u8);
        out.push(0x80 | (codepoint & 0x3F) as u8);
    } else if codepoint < 0x10000 {
        out.push(0xE0 | (codepoint >> 12) as u8);
        out.push(0x80 | ((codepoint >> 6) & 0x3F) as u8);
        out.push(0x80 | (codepoint & 0x3F) as u8);
    } else {
        out.push(0xF0 | (codepoint >> 18) as u8);
        out.push(0x80 | ((codepoint >> 12) & 0x3F) as u8);
        out.push(0x80 | ((codepoint >> 6) & 0x3F) as u8);
        out.push(0x80 | (codepoint & 0x3F) as u8);
    }
    Some(length)
}

/// cJSON's `valueint` for a parsed double: saturate at `INT_MAX`/`INT_MIN`, else truncate
/// toward zero (docs/reference/firmware.md §2.3).
pub fn valueint(d: f64) -> i32 {
    if d >= i32::MAX as f64 {
        i32::MAX
    } else if d <= i32::MIN as f64 {
        i32::MIN
    } else {
        d as i32
    }
}

/// A value inside a parsed [`Doc`].
#[derive(Clone, Copy)]
pub struct Item<'a> {
    doc: Doc<'a>,
    idx: u32,
}

impl<'a> Doc<'a> {
    /// The top-level value.
    pub fn root(&self) -> Item<'a> {
        Item { doc: *self, idx: 0 }
    }

    fn bytes(&self, span: Span) -> &'a [u8] {
        self.prefix(span, span.len)
    }

    /// The part of a decoded string the firmware sees (up to its first NUL).
    fn c_bytes(&self, span: Span) -> &'a [u8] {
        self.prefix(span, span.c_len)
    }

    fn prefix(&self, span: Span, len: u32) -> &'a [u8] {
        let (start, end) = (span.start as usize, (span.start + len) as usize);
        if span.in_scratch {
            &self.scratch[start..end]
        } else {
            &self.input[start..end]
        }
    }
}

/// The part of `s` a C string sees: up to the first NUL.
pub fn c_str(s: &[u8]) -> &[u8] {
    &s[..c_strlen(s)]
}

/// `strlen`: the index of the first NUL, or the whole length (SIMD `memchr`, not a byte loop).
fn c_strlen(s: &[u8]) -> usize {
    memchr::memchr(0, s).unwrap_or(s.len())
}

/// cJSON's `case_insensitive_strcmp(a, b) == 0` on two C strings (ASCII `tolower` only): equal
/// up to the first NUL of each, where the end of a slice reads as one.
pub fn c_str_eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    c_str(a).eq_ignore_ascii_case(c_str(b))
}

/// [`c_str_eq_ignore_case`] for a C string `key` (no NUL in it) and any `name`: `name` must
/// start with `key` and end (or have a NUL) right after it. Most member names differ in length
/// or first byte; most that match have the same case.
fn c_name_is(key: &[u8], name: &[u8]) -> bool {
    let Some(head) = name.get(..key.len()) else {
        return false;
    };
    name.get(key.len()).is_none_or(|&b| b == 0) && (same_bytes(head, key) || head.eq_ignore_ascii_case(key))
}

/// `a == b` without a call for up to 16 bytes (member names): two loads each, which may overlap.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("four bytes"));
    match n {
        _ if b.len() != n => false,
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

impl<'a> Item<'a> {
    fn node(&self) -> &'a Node {
        &self.doc.nodes[self.idx as usize]
    }

    /// The value's type.
    pub fn kind(&self) -> Kind {
        self.node().kind
    }

    /// `cJSON_IsObject`.
    pub fn is_object(&self) -> bool {
        self.kind() == Kind::Object
    }
    /// `cJSON_IsArray`.
    pub fn is_array(&self) -> bool {
        self.kind() == Kind::Array
    }
    /// `cJSON_IsString`.
    pub fn is_string(&self) -> bool {
        self.kind() == Kind::String
    }
    /// `cJSON_IsNumber`.
    pub fn is_number(&self) -> bool {
        self.kind() == Kind::Number
    }
    /// `cJSON_IsBool`: `true` or `false`.
    pub fn is_bool(&self) -> bool {
        matches!(self.kind(), Kind::True | Kind::False)
    }

    /// `valueint` (numbers: saturated truncation; `true`: 1; everything else 0).
    pub fn valueint(&self) -> i32 {
        self.node().int
    }

    /// `valuedouble` (numbers only; 0 otherwise).
    pub fn valuedouble(&self) -> f64 {
        self.node().double
    }

    /// The string as the firmware sees it (`valuestring`, cut at the first NUL); `None` when this
    /// is not a string.
    pub fn c_string(&self) -> Option<&'a [u8]> {
        let n = self.node();
        (n.kind == Kind::String).then(|| self.doc.c_bytes(n.text))
    }

    /// The whole decoded string, NULs included (for diagnostics; the firmware never sees past a NUL).
    pub fn decoded_string(&self) -> Option<&'a [u8]> {
        let n = self.node();
        (n.kind == Kind::String).then(|| self.doc.bytes(n.text))
    }

    /// The member name as a C string, for items inside an object.
    pub fn key(&self) -> Option<&'a [u8]> {
        let n = self.node();
        n.has_key.then(|| self.doc.c_bytes(n.key))
    }

    /// Children in document order (array elements or object members).
    pub fn children(&self) -> Children<'a> {
        let first = if matches!(self.kind(), Kind::Array | Kind::Object) {
            self.node().child
        } else {
            NONE
        };
        Children {
            doc: self.doc,
            next: first,
        }
    }

    /// `cJSON_GetObjectItem`: the first member whose name equals `name` ignoring ASCII case,
    /// both compared as C strings. Arrays and scalars have no members.
    pub fn get(&self, name: &[u8]) -> Option<Item<'a>> {
        let node = self.node();
        if node.kind != Kind::Object {
            return None;
        }
        // The chain ends at NONE, which is past every arena.
        let mut idx = node.child;
        while let Some(child) = self.doc.nodes.get(idx as usize) {
            // A name of another C-string length cannot match (the key's own is noted).
            let len = child.key.c_len as usize;
            let fits = name.len() == len || name.get(len) == Some(&0);
            if fits && child.has_key && c_name_is(self.doc.c_bytes(child.key), name) {
                return Some(Item { doc: self.doc, idx });
            }
            idx = child.next;
        }
        None
    }

    /// Prints this value the way `cJSON_PrintUnformatted` would.
    pub fn print_unformatted(&self, out: &mut Vec<u8>) {
        let n = self.node();
        match n.kind {
            Kind::Null => out.extend_from_slice(b"null"),
            Kind::False => out.extend_from_slice(b"false"),
            Kind::True => out.extend_from_slice(b"true"),
            Kind::Number => write_number(out, n.double),
            Kind::String => write_string(out, self.doc.bytes(n.text)),
            Kind::Array | Kind::Object => {
                let object = n.kind == Kind::Object;
                out.push(if object { b'{' } else { b'[' });
                for (i, child) in self.children().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    if object {
                        write_string(out, child.key().unwrap_or_default());
                        out.push(b':');
                    }
                    child.print_unformatted(out);
                }
                out.push(if object { b'}' } else { b']' });
            }
        }
    }
}

impl fmt::Debug for Item<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        self.print_unformatted(&mut out);
        write!(f, "{}", String::from_utf8_lossy(&out))
    }
}

/// Iterator over the children of an array or object.
pub struct Children<'a> {
    doc: Doc<'a>,
    next: u32,
}

impl<'a> Iterator for Children<'a> {
    type Item = Item<'a>;
    fn next(&mut self) -> Option<Item<'a>> {
        if self.next == NONE {
            return None;
        }
        let item = Item {
            doc: self.doc,
            idx: self.next,
        };
        self.next = item.node().next;
        Some(item)
    }
}

// ---------------------------------------------------------------------------------------------
// Printing (cJSON_PrintUnformatted)
// ---------------------------------------------------------------------------------------------

/// What `print_string_ptr` writes for each byte: 0 the byte itself, `u` `\u00xx`, [`END`] nothing
/// (a NUL ends the C string), any other the second byte of a two-byte escape.
const ESCAPES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 1;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    (t[0x00], t[0x08], t[0x0C], t[0x0A], t[0x0D], t[0x09]) = (END, b'b', b'f', b'n', b'r', b't');
    (t[b'"' as usize], t[b'\\' as usize]) = (b'"', b'\\');
    t
};
const END: u8 = 0xFF;

/// `print_string_ptr`: quotes `s` (cut at its first NUL) with cJSON's escaping: `"` `\` and
/// BS/FF/LF/CR/TAB as two-character escapes, other bytes < 0x20 as `\u00xx` (lower-case hex);
/// `/`, DEL and bytes ≥ 0x80 are copied raw.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Byte by byte into room made once: texts that are JSON themselves (a status, a photo's
    // answer) escape every few bytes, and a push is cheaper than a copy call per run.
    out.reserve(s.len() + s.len() / 4 + 2);
    out.push(b'"');
    for &b in s {
        match ESCAPES[usize::from(b)] {
            0 => out.push(b),
            END => break,
            b'u' => {
                let hex = |nibble: u8| HEX[usize::from(nibble)];
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex(b >> 4), hex(b & 0xF)]);
            }
            escape => out.extend_from_slice(&[b'\\', escape]),
        }
    }
    out.push(b'"');
}

/// `%d`.
pub fn write_int(out: &mut Vec<u8>, v: i32) {
    let mut buf = [0u8; 11];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// `print_number`: `null` for NaN/∞, `%d` when the double equals its saturated int, otherwise
/// `%1.15g`, or `%1.17g` when 15 digits do not read back within `DBL_EPSILON`.
pub fn write_number(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() || d.is_infinite() {
        out.extend_from_slice(b"null");
        return;
    }
    let int = valueint(d);
    if d == int as f64 {
        write_int(out, int);
        return;
    }
    let fifteen = format_g(d, 15);
    let test: f64 = fifteen.parse().unwrap_or(f64::NAN);
    let text = if compare_double(test, d) {
        fifteen
    } else {
        format_g(d, 17)
    };
    out.extend_from_slice(text.as_bytes());
}

fn compare_double(a: f64, b: f64) -> bool {
    let max = a.abs().max(b.abs());
    (a - b).abs() <= max * f64::EPSILON
}

/// C's `%1.<precision>g` for a finite double.
pub fn format_g(d: f64, precision: usize) -> String {
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x >= -4 && x < p as i32 {
        let fixed = format!("{:.*}", (p as i32 - 1 - x) as usize, d);
        strip_fraction_zeros(&fixed).to_string()
    } else {
        let m = strip_fraction_zeros(mantissa);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", x.unsigned_abs())
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
