//! The cJSON-dialect parser on arbitrary bytes: both entry points (length-bounded and C
//! string), with and without a heap budget. It must never panic, and whatever it accepts must
//! print as JSON that it accepts again and prints identically (`print(parse(print(x)))` is
//! `print(x)`), while lookups, `valueint` and C-string views stay total.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xiaozhi_sim::cjson::{Item, Limits, Parser, Terminator};

const KEYS: &[&[u8]] = &[
    b"jsonrpc",
    b"id",
    b"method",
    b"params",
    b"name",
    b"arguments",
    b"cursor",
    b"withUserTools",
    b"",
];

fn walk(item: Item<'_>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let _ = (item.kind(), item.valueint(), item.c_string(), item.key());
    for key in KEYS {
        let _ = item.get(key);
    }
    for child in item.children() {
        walk(child, budget);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut parser = Parser::new();
    for terminator in [Terminator::Length, Terminator::Nul] {
        for heap_bytes in [None, Some(4096)] {
            let Ok(doc) = parser.parse(data, terminator, Limits { heap_bytes }) else {
                continue;
            };
            let root = doc.root();
            walk(root, &mut 10_000);
            let mut printed = Vec::new();
            root.print_unformatted(&mut printed);
            let mut again = Parser::new();
            let reparsed = again
                .parse(&printed, Terminator::Length, Limits::default())
                .unwrap_or_else(|e| panic!("printed JSON does not parse again: {e}"));
            let mut reprinted = Vec::new();
            reparsed.root().print_unformatted(&mut reprinted);
            assert_eq!(printed, reprinted, "printing is not stable");
        }
    }
});
