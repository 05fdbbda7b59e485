//! Unit tests of the cJSON dialect (`cjson.rs`): parsing, lookup and printing, each against
//! what cJSON 1.7.19 does.

use super::*;

fn parse_root<R>(input: &[u8], f: impl FnOnce(Item<'_>) -> R) -> R {
    with_parsed(input, Terminator::Length, |r| f(r.expect("parses")))
}

fn parses(input: &[u8]) -> bool {
    with_parsed(input, Terminator::Length, |r| r.is_ok())
}

fn printed(input: &[u8]) -> String {
    parse_root(input, |root| {
        let mut out = Vec::new();
        root.print_unformatted(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
}

#[test]
fn valueint_truncates_toward_zero_and_saturates() {
    let table: &[(&str, i32)] = &[
        ("12.9", 12),
        ("-12.9", -12),
        ("-0.99", 0),
        ("100.99", 100),
        ("1e-7", 0),
        ("-0", 0),
        ("1e1", 10),
        ("2147483647.5", i32::MAX),
        ("2147483648", i32::MAX),
        ("-2147483648.7", i32::MIN),
        ("1e10", i32::MAX),
        ("1e300", i32::MAX),
        ("1e999", i32::MAX),
        ("-1e999", i32::MIN),
        ("-1e10", i32::MIN),
        ("01", 1),
        ("4.", 4),
        ("-2147483647.9", -2147483647),
    ];
    for (text, expected) in table {
        let got = parse_root(text.as_bytes(), |root| {
            assert!(root.is_number(), "{text} is a number");
            root.valueint()
        });
        assert_eq!(got, *expected, "valueint({text})");
    }
}

#[test]
fn numbers_must_start_with_minus_or_digit() {
    for bad in ["+5", ".5", "NaN", "Infinity", "-", "--1", "-e5", "e5"] {
        assert!(!parses(bad.as_bytes()), "{bad} must not parse");
    }
    // strtod takes "-.5", and a top-level value may be followed by garbage.
    assert!(parses(b"-.5"));
    assert!(parses(b"0x10"));
    assert_eq!(parse_root(b"0x10", |r| r.valueint()), 0);
}

#[test]
fn number_token_is_what_strtod_consumes() {
    // Inside an object the unconsumed rest of the run is a syntax error.
    assert!(!parses(br#"{"v":0x10}"#));
    assert!(!parses(br#"{"v":1e}"#));
    assert!(!parses(br#"{"v":1+2}"#));
    assert!(parses(br#"{"v":1.e5}"#));
    assert_eq!(
        parse_root(br#"{"v":1.e5}"#, |r| r.get(b"v").unwrap().valueint()),
        100000
    );
    assert_eq!(strtod(b"1e"), Some((1, 1.0)));
    assert_eq!(strtod(b"1e+"), Some((1, 1.0)));
    assert_eq!(strtod(b"12e-1x"), Some((5, 1.2)));
    assert_eq!(strtod(b"."), None);
    assert_eq!(strtod(b"-0").map(|(n, v)| (n, v.is_sign_negative())), Some((2, true)));
}

#[test]
fn plain_integers_read_as_strtod_reads_them() {
    let tokens = [
        "0",
        "-0",
        "7",
        "-7",
        "00012",
        "-00012",
        "999999999999999",
        "-999999999999999",
        "1000000000000000",
        "9007199254740993",
        "-",
        "-x",
        "12-3",
        "12+3",
        "12.5",
        "12e1",
        "12E",
        "-.5",
        "1.",
        "2147483648",
    ];
    for token in tokens {
        // The token as a whole document, then followed by a byte that ends the run.
        for text in [token.to_string(), format!("{token}]")] {
            let mut parser = Parser::new();
            let parsed = parser.parse(text.as_bytes(), Terminator::Length, Limits::default());
            let got = parsed.ok().map(|doc| doc.root().valuedouble().to_bits());
            let want = strtod(token.as_bytes()).map(|(_, v)| v.to_bits());
            assert_eq!(got, want, "{text}");
        }
    }
}

#[test]
fn ten_thousand_digit_number_parses_and_saturates() {
    let big = "9".repeat(10_000);
    assert_eq!(parse_root(big.as_bytes(), |r| r.valueint()), i32::MAX);
    let tiny = format!("0.{}1", "0".repeat(10_000));
    assert_eq!(parse_root(tiny.as_bytes(), |r| r.valueint()), 0);
}

#[test]
fn trailing_garbage_bom_and_control_whitespace_are_accepted() {
    assert!(parses(b"{\"a\":1} garbage"));
    assert!(parses(b"\xEF\xBB\xBF{\"a\":1}"));
    assert!(parses(b" \t\r\n\x01\x1f{\x02\"a\"\x03:\x041\x05}"));
    assert!(!parses(b""));
    assert!(!parses(b"   "));
    assert!(!parses(b"{\"a\":1"));
}

#[test]
fn nul_terminator_mode_stops_at_the_first_nul() {
    let input = b"{\"a\":1}\0{";
    let mut p = Parser::new();
    assert!(p.parse(input, Terminator::Nul, Limits::default()).is_ok());
    let input = b"{\"a\":\0 1}";
    assert!(p.parse(input, Terminator::Nul, Limits::default()).is_err());
    // With an explicit length the NUL is just whitespace.
    assert!(p.parse(input, Terminator::Length, Limits::default()).is_ok());
    // A BOM needs five bytes in the buffer: the virtual NUL counts in Nul mode.
    assert!(p.parse(b"\xEF\xBB\xBF1", Terminator::Nul, Limits::default()).is_ok());
    assert!(
        p.parse(b"\xEF\xBB\xBF1", Terminator::Length, Limits::default())
            .is_err()
    );
}

#[test]
fn nesting_limit_is_one_thousand() {
    let ok = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    assert!(parses(ok.as_bytes()));
    let too_deep = format!("{}{}", "[".repeat(1001), "]".repeat(1001));
    let err = with_parsed(too_deep.as_bytes(), Terminator::Length, |r| r.err());
    assert!(matches!(err, Some(ParseError::TooDeep { .. })));
    let objects = format!("{}1{}", "{\"a\":".repeat(1000), "}".repeat(1000));
    assert!(parses(objects.as_bytes()));
    let objects = format!("{}1{}", "{\"a\":".repeat(1001), "}".repeat(1001));
    assert!(!parses(objects.as_bytes()));
}

#[test]
fn raw_control_bytes_and_invalid_utf8_are_kept() {
    let input = b"\"a\tb\x01\xff\xfe\"";
    assert_eq!(
        parse_root(input, |r| r.c_string().unwrap().to_vec()),
        b"a\tb\x01\xff\xfe".to_vec()
    );
}

#[test]
fn escapes_decode_and_bad_unicode_escapes_become_nul() {
    assert_eq!(
        parse_root(br#""a\"b\\c\/d\b\f\n\r\t""#, |r| r.c_string().unwrap().to_vec()),
        b"a\"b\\c/d\x08\x0c\n\r\t".to_vec()
    );
    assert_eq!(
        parse_root(br#""\u00e9\u4e2d\ud83d\ude00""#, |r| r.c_string().unwrap().to_vec()),
        "é中😀".as_bytes().to_vec()
    );
    // A non-hex digit makes the escape code point 0: the C string ends there.
    assert_eq!(
        parse_root(br#""ab\uZZZZcd""#, |r| (
            r.c_string().unwrap().to_vec(),
            r.decoded_string().unwrap().len()
        )),
        (b"ab".to_vec(), 5)
    );
    assert_eq!(
        parse_root(br#""x\u0000y""#, |r| r.c_string().unwrap().to_vec()),
        b"x".to_vec()
    );
    // Failures of the whole parse.
    for bad in [
        &br#""\udc00""#[..],
        br#""\ud800""#,
        br#""\ud800\u0041""#,
        br#""\u12""#,
        br#""\x""#,
        br#""abc"#,
        b"\"abc\\",
    ] {
        assert!(!parses(bad), "{} must not parse", String::from_utf8_lossy(bad));
    }
}

#[test]
fn lookup_is_case_insensitive_first_match_on_c_strings() {
    let input = br#"{"VOLUME":40.7,"volume":99,"na\u0000me":"x","\u00c9":1}"#;
    parse_root(input, |r| {
        assert_eq!(r.get(b"volume").unwrap().valueint(), 40);
        assert_eq!(r.get(b"Volume").unwrap().valueint(), 40);
        assert_eq!(r.get(b"na").unwrap().c_string().unwrap(), b"x");
        assert!(r.get(b"name").is_none());
        // Bytes >= 0x80 compare exactly: only ASCII letters fold.
        assert!(r.get("é".as_bytes()).is_none());
        assert!(r.get("É".as_bytes()).is_some());
    });
    // Arrays and scalars have no members.
    parse_root(br#"[{"a":1}]"#, |r| assert!(r.get(b"a").is_none()));
    parse_root(b"42", |r| assert!(r.get(b"a").is_none()));
}

#[test]
fn duplicate_keys_are_kept_in_order() {
    parse_root(br#"{"id":23,"id":24}"#, |r| {
        assert_eq!(r.children().count(), 2);
        assert_eq!(r.get(b"id").unwrap().valueint(), 23);
    });
}

#[test]
fn true_has_valueint_one() {
    parse_root(b"[true,false,null]", |r| {
        let v: Vec<i32> = r.children().map(|c| c.valueint()).collect();
        assert_eq!(v, vec![1, 0, 0]);
    });
}

#[test]
fn escaping_follows_print_string_ptr() {
    let mut out = Vec::new();
    write_string(&mut out, b"a\"b\\c/d\x08\x0c\n\r\t\x01\x1f\x7f\xff");
    assert_eq!(out, b"\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xff\"".to_vec());
    let mut out = Vec::new();
    write_string(&mut out, b"cut\0here");
    assert_eq!(out, b"\"cut\"".to_vec());
}

#[test]
fn every_byte_escapes_as_print_string_ptr_does() {
    // The reference: `print_string_ptr`'s switch, byte by byte.
    fn reference(s: &[u8]) -> Vec<u8> {
        let mut out = vec![b'"'];
        for &b in s.iter().take_while(|&&b| b != 0) {
            match b {
                b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0C => out.extend_from_slice(b"\\f"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1F => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                _ => out.push(b),
            }
        }
        out.push(b'"');
        out
    }
    let all: Vec<u8> = (1..=255).collect();
    let texts: [&[u8]; 5] = [&all, b"", b"\0", br#"{"a":"b\"c"}"#, &[b'"'; 300]];
    for text in texts {
        let mut out = b"prefix".to_vec();
        write_string(&mut out, text);
        assert_eq!(out[6..], reference(text)[..], "{text:?}");
    }
}

#[test]
fn the_string_scan_finds_the_first_quote_backslash_or_nul() {
    let naive = |s: &[u8]| s.iter().position(|&b| matches!(b, b'"' | b'\\' | 0)).unwrap_or(s.len());
    // Neighbours of the three bytes (and the same with the high bit set) must not be taken for them.
    let filler = [b'a', 0x01, 0x21, 0x23, 0x5B, 0x5D, 0x80, 0xA2, 0xDC, 0xFF];
    for len in 0..24 {
        for at in 0..=len {
            for special in [b'"', b'\\', 0] {
                for &f in &filler {
                    let mut s = vec![f; len];
                    if at < len {
                        s[at] = special;
                    }
                    assert_eq!(find_quote_backslash_or_nul(&s), naive(&s), "{s:?}");
                    if at + 1 < len {
                        s[at + 1] = b'"';
                        assert_eq!(find_quote_backslash_or_nul(&s), naive(&s), "{s:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn member_names_compare_as_c_strings_ignoring_ascii_case() {
    let names: [&[u8]; 9] = [b"", b"\0", b"id", b"ID", b"i", b"idx", b"id\0x", b"\xc9", b"\xe9"];
    for key in names.iter().map(|k| c_str(k)) {
        for name in names {
            assert_eq!(
                c_name_is(key, name),
                c_str_eq_ignore_case(key, name),
                "{key:?} {name:?}"
            );
        }
    }
}

#[test]
fn the_short_compare_sees_every_byte_of_every_length() {
    for n in 0..=20usize {
        let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i).collect();
        assert!(same_bytes(&a, &a.clone()), "{n} bytes equal");
        assert!(
            !same_bytes(&a, &a[..n.saturating_sub(1)]) || n == 0,
            "{n} bytes against a prefix"
        );
        for at in 0..n {
            let mut b = a.clone();
            b[at] ^= 0x20;
            assert!(!same_bytes(&a, &b), "{n} bytes, byte {at} differs");
        }
    }
}

#[test]
fn integers_print_with_percent_d_and_others_with_g() {
    let cases: &[(f64, &str)] = &[
        (0.0, "0"),
        (-0.0, "0"),
        (70.0, "70"),
        (-2147483648.0, "-2147483648"),
        (2147483647.0, "2147483647"),
        (1e10, "10000000000"),
        (0.5, "0.5"),
        (40.7, "40.7"),
        (1e-7, "1e-07"),
        (1e300, "1e+300"),
        (0.1, "0.1"),
        (1.0 / 3.0, "0.33333333333333331"),
        (f64::NAN, "null"),
        (f64::INFINITY, "null"),
        (123456789012345680.0, "1.2345678901234568e+17"),
        (0.30000000000000004, "0.3"),
        (25.5, "25.5"),
    ];
    for (d, expected) in cases {
        let mut out = Vec::new();
        write_number(&mut out, *d);
        assert_eq!(String::from_utf8(out).unwrap(), *expected, "print_number({d})");
    }
}

#[test]
fn print_round_trips_structure_in_document_order() {
    assert_eq!(
        printed(br#" { "b" : [1, 2.5, "x"], "a" : {} , "b":null } "#),
        r#"{"b":[1,2.5,"x"],"a":{},"b":null}"#
    );
}

#[test]
fn heap_limit_turns_big_trees_into_out_of_memory() {
    let mut p = Parser::new();
    let input = format!("[{}0]", "0,".repeat(10_000));
    let limits = Limits {
        heap_bytes: Some(64 * 1024),
    };
    let err = p.parse(input.as_bytes(), Terminator::Length, limits).err();
    assert!(matches!(err, Some(ParseError::OutOfMemory { .. })));
    assert!(p.parse(input.as_bytes(), Terminator::Length, Limits::default()).is_ok());
}
