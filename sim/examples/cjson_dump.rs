//! Canonical dump of the cJSON dialect, for differential testing against real cJSON 1.7.19.
//!
//! Reads a record file, one record per line: `<K> <hex bytes>` (`#` lines are comments):
//!
//! * `P` — parse the bytes with [`Terminator::Length`] (`cJSON_ParseWithLength`) and
//!   [`Terminator::Nul`] (`cJSON_Parse`) and dump the tree, the printed form and some lookups;
//! * `N` — 8 bytes, a little-endian `f64`: its `valueint` and [`write_number`];
//! * `S` — bytes: [`write_string`];
//! * `T` — a number token: what [`strtod`] consumes and its value;
//! * `H` — the smallest [`Limits::heap_bytes`] with which a [`Terminator::Length`] parse succeeds
//!   (the C side reports the peak of cJSON's allocations under the same 32-bit heap model).
//!
//! Prints one line per record, `<line number> <K> <dump>`, in a format a C program linked
//! against cJSON prints identically, so the two outputs can be compared line by line.
//!
//! Usage: `cargo run -p xiaozhi-sim --example cjson_dump -- FILE`

use std::io::{self, BufRead, BufWriter, Write};

use xiaozhi_sim::cjson::{Item, Kind, Limits, Parser, Terminator, strtod, valueint, write_number, write_string};

/// Lookup chains (`/` separates successive `get`s), the same list as the C dumper's.
const CHAINS: &[&[u8]] = &[
    b"a",
    b"A",
    b"b",
    b"id",
    b"ID",
    b"Id",
    b"jsonrpc",
    b"method",
    b"params",
    b"params/name",
    b"params/arguments",
    b"params/arguments/volume",
    b"params/arguments/VOLUME",
    b"name",
    b"volume",
    b"\xc3\xa9",
    b"\xc3\x89",
    b"",
    b"na",
    b"x",
    b"\xff",
    b"v",
    b"key",
    b"KEY",
];

fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const H: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(H[(b >> 4) as usize]);
        out.push(H[(b & 15) as usize]);
    }
}

fn unhex(text: &[u8]) -> Vec<u8> {
    fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            _ => (c | 32) - b'a' + 10,
        }
    }
    text.chunks_exact(2).map(|p| nibble(p[0]) << 4 | nibble(p[1])).collect()
}

fn tree(out: &mut Vec<u8>, item: Item<'_>) {
    let kind = item.kind();
    let c = match kind {
        Kind::Null => b'n',
        Kind::False => b'f',
        Kind::True => b't',
        Kind::Number => b'#',
        Kind::String => b's',
        Kind::Array => b'[',
        Kind::Object => b'{',
    };
    out.extend_from_slice(b"(");
    out.push(c);
    out.extend_from_slice(b" k=");
    match item.key() {
        Some(k) => hex(out, k),
        None => out.push(b'-'),
    }
    write!(out, " i={} d={:016x} s=", item.valueint(), item.valuedouble().to_bits()).unwrap();
    match item.c_string() {
        Some(s) => hex(out, s),
        None => out.push(b'-'),
    }
    if matches!(kind, Kind::Array | Kind::Object) {
        out.push(b' ');
        for child in item.children() {
            tree(out, child);
        }
    }
    out.push(b')');
}

fn dump_parse(out: &mut Vec<u8>, parser: &mut Parser, input: &[u8], terminator: Terminator) {
    let doc = match parser.parse(input, terminator, Limits::default()) {
        Ok(doc) => doc,
        Err(e) => {
            let pos = match e {
                xiaozhi_sim::cjson::ParseError::Syntax { position }
                | xiaozhi_sim::cjson::ParseError::TooDeep { position } => position as i64,
                xiaozhi_sim::cjson::ParseError::OutOfMemory { .. } => -2,
            };
            write!(out, "fail@{pos}").unwrap();
            return;
        }
    };
    let root = doc.root();
    out.extend_from_slice(b"ok ");
    tree(out, root);
    out.extend_from_slice(b" print=");
    let mut printed = Vec::new();
    root.print_unformatted(&mut printed);
    hex(out, &printed);
    out.extend_from_slice(b" get=");
    for (c, chain) in CHAINS.iter().enumerate() {
        if c > 0 {
            out.push(b',');
        }
        let mut cur = Some(root);
        let mut path = String::from("r");
        let names: Vec<&[u8]> = if chain.is_empty() {
            vec![&b""[..]]
        } else {
            chain.split(|&b| b == b'/').collect()
        };
        for name in names {
            let Some(parent) = cur else { break };
            cur = parent.get(name);
            if let Some(found) = cur {
                let index = parent
                    .children()
                    .position(|ch| same(ch, found))
                    .expect("get returns a child");
                path.push_str(&format!(".{index}"));
            }
        }
        match cur {
            Some(_) => out.extend_from_slice(path.as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
    }
}

/// Identity of two members of the same object (the C side compares pointers): every member's
/// key is a distinct slice of the input or of the parser's scratch buffer, so its address is unique.
fn same(a: Item<'_>, b: Item<'_>) -> bool {
    a.key().map(<[u8]>::as_ptr) == b.key().map(<[u8]>::as_ptr)
}

/// The smallest heap budget with which `input` parses, or `None` when it never parses.
fn min_heap(parser: &mut Parser, input: &[u8]) -> Option<usize> {
    let fits = |parser: &mut Parser, budget: usize| {
        let limits = Limits {
            heap_bytes: Some(budget),
        };
        parser.parse(input, Terminator::Length, limits).is_ok()
    };
    let mut hi = 1usize << 20;
    while !fits(parser, hi) {
        if hi >= 1 << 34 {
            return None;
        }
        hi *= 2;
    }
    let mut lo = 0usize; // `lo` never fits (or is 0), `hi` always fits
    if fits(parser, 0) {
        return Some(0);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(parser, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

fn main() -> io::Result<()> {
    let path = std::env::args_os().nth(1).expect("usage: cjson_dump RECORD_FILE");
    let file = std::fs::File::open(&path)?;
    let reader = io::BufReader::new(file);
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let mut parser = Parser::new();
    let mut out = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let mut line = line?;
        while matches!(line.last(), Some(b'\r' | b'\n')) {
            line.pop();
        }
        out.clear();
        write!(out, "{} ", i + 1).unwrap();
        if line.is_empty() || line[0] == b'#' {
            out.extend_from_slice(b"-\n");
            w.write_all(&out)?;
            continue;
        }
        let kind = line[0];
        let bytes = unhex(line.get(2..).unwrap_or_default());
        out.push(kind);
        out.push(b' ');
        match kind {
            b'P' => {
                out.extend_from_slice(b"L=");
                dump_parse(&mut out, &mut parser, &bytes, Terminator::Length);
                out.extend_from_slice(b" | Z=");
                dump_parse(&mut out, &mut parser, &bytes, Terminator::Nul);
            }
            b'N' => {
                let d = f64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
                write!(out, "i={} print=", valueint(d)).unwrap();
                let mut printed = Vec::new();
                write_number(&mut printed, d);
                hex(&mut out, &printed);
            }
            b'S' => {
                out.extend_from_slice(b"print=");
                let mut printed = Vec::new();
                write_string(&mut printed, &bytes);
                hex(&mut out, &printed);
            }
            b'H' => match min_heap(&mut parser, &bytes) {
                Some(bytes) => write!(out, "peak={bytes}").unwrap(),
                None => out.extend_from_slice(b"fail"),
            },
            b'T' => match strtod(&bytes) {
                None => out.extend_from_slice(b"none"),
                Some((n, v)) => write!(out, "{n} {:016x}", v.to_bits()).unwrap(),
            },
            _ => out.push(b'?'),
        }
        out.push(b'\n');
        w.write_all(&out)?;
    }
    w.flush()
}
