//! Hostile and broken input (issue 6): each payload gets the firmware's outcome (drop, error, or
//! the malformed reply reproduced byte for byte) and the twin's own memory stays bounded; each
//! broken data file is refused with one `file:line:column` line, exit status 2 and nothing on
//! stdout.
//!
//! The bound the twin enforces is the board's heap (`target.free_heap`, 8 MiB by default, 180 000
//! bytes on the ESP32-C3 board): cJSON's allocations (48 bytes per item, strings, number copies)
//! are charged while parsing, and a message that would not fit is dropped as a simulated
//! out-of-memory (`Receipt::OutOfMemory`), exactly where the firmware's `malloc` would fail.
//! Strings without escapes are not copied at all, so a refused 10 MB message costs the twin
//! (almost) nothing; what it keeps per message is at most the tree the board's heap could hold.
//! Memory is measured per thread with a counting allocator; there are no timed assertions.

mod common;

use common::twin;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Output as ProcessOutput;
use std::sync::Arc;

use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::cjson::Terminator;
use xiaozhi_sim::device::{Device, Receipt};
use xiaozhi_sim::harness::{Harness, IDLE_HORIZON, NeverIdle};
use xiaozhi_sim::mcp::{DropReason, PropertyValue};
use xiaozhi_sim::scenario::ScenarioSpec;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::trace::Event;
use xiaozhi_sim::world::WorldSpec;

// ---------------------------------------------------------------------------------------------
// A per-thread counting allocator
// ---------------------------------------------------------------------------------------------

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + delta;
        live.set(v);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(v)));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are plain thread-locals.
// The only unsafe code of the tests: a counting allocator measures the twin's own memory.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns the most memory this thread held at once above the level it started at,
/// and how much more it holds at the end.
fn measured<R>(f: impl FnOnce() -> R) -> (R, usize, isize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let r = f();
    let peak = PEAK.with(Cell::get) - start;
    let kept = LIVE.with(Cell::get) - start;
    (r, peak.max(0) as usize, kept)
}

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Devices and payloads
// ---------------------------------------------------------------------------------------------

const BREAD: &str = include_str!("../boards/bread-compact-wifi.yaml");
const C3: &str = include_str!("../boards/lckfb/szpi-esp32c3.yaml");

/// bread-compact-wifi, optionally with a different free heap.
fn bread(free_heap: Option<usize>) -> Arc<BoardSpec> {
    let text = match free_heap {
        None => BREAD.to_string(),
        Some(n) => BREAD.replacen("target:\n", &format!("target:\n  free_heap: {n}\n"), 1),
    };
    Arc::new(BoardSpec::from_yaml("bread-compact-wifi.yaml", &text).expect("board"))
}

fn booted(spec: Arc<BoardSpec>) -> Harness {
    let mut h = Harness::new(Device::new(spec, WorldSpec::conformance(), 1));
    h.power_on();
    h.run_until_idle().expect("boots");
    h.take_outputs();
    h.device.drain_events();
    h
}

fn call(id: &str, tool: &str, args: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#)
        .into_bytes()
}

/// Delivers one payload, runs the device until idle, returns the receipt and what was sent.
fn exchange(h: &mut Harness, payload: &[u8]) -> (Receipt, Vec<Vec<u8>>) {
    let receipt = h.deliver(payload);
    h.run_until_idle().expect("goes idle");
    let sent = h.take_mcp_payloads();
    (receipt, sent)
}

/// The device still answers an ordinary request afterwards.
fn assert_alive(h: &mut Harness) {
    let (_, sent) = exchange(h, &call("9999", "self.get_device_status", "{}"));
    assert_eq!(sent.len(), 1, "the device still answers");
    assert!(sent[0].starts_with(br#"{"jsonrpc":"2.0","id":9999,"result""#));
}

fn volume(h: &Harness) -> i32 {
    h.device.snapshot().volume.expect("running")
}

// ---------------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------------

#[test]
fn a_10_mb_string_runs_the_8_mib_board_out_of_heap_and_is_dropped() {
    let mut h = booted(bread(None));
    let pad = "p".repeat(10 * MIB);
    let payload = call(
        "1",
        "self.audio_speaker.set_volume",
        &format!(r#"{{"volume":50,"pad":"{pad}"}}"#),
    );
    let ((receipt, sent), peak, _) = measured(|| exchange(&mut h, &payload));
    assert_eq!(receipt, Receipt::OutOfMemory);
    assert!(sent.is_empty(), "a parse failure is never answered");
    assert_eq!(volume(&h), 70, "the callback never ran");
    assert!(
        h.device.drain_events().iter().any(|e| matches!(
            e.kind,
            Event::MessageDropped {
                reason: DropReason::OutOfMemory
            }
        )),
        "the drop is a device event"
    );
    assert!(peak < 64 * KIB, "refusing 10 MB cost the twin {peak} bytes");
    assert_alive(&mut h);
}

#[test]
fn a_10_mb_string_fits_a_board_with_more_heap_and_is_not_copied() {
    let mut h = booted(bread(Some(64 * MIB)));
    let pad = "p".repeat(10 * MIB);
    let payload = call(
        "1",
        "self.audio_speaker.set_volume",
        &format!(r#"{{"volume":50,"pad":"{pad}"}}"#),
    );
    let ((receipt, sent), peak, _) = measured(|| exchange(&mut h, &payload));
    assert!(matches!(receipt, Receipt::Scheduled { id: 1, .. }), "{receipt:?}");
    assert_eq!(sent.len(), 1);
    assert_eq!(volume(&h), 50, "extra arguments are ignored");
    assert!(peak < 64 * KIB, "parsing 10 MB cost the twin {peak} bytes");
}

#[test]
fn a_100000_element_array_fits_the_s3_heap_but_not_the_c3_heap() {
    let array = format!("[{}0]", "0,".repeat(99_999));
    let payload = call(
        "1",
        "self.audio_speaker.set_volume",
        &format!(r#"{{"volume":33,"x":{array}}}"#),
    );

    // 100 000 items × 48 bytes = 4.8 MB < 8 MiB: cJSON manages, the call goes through.
    let mut s3 = booted(bread(None));
    let ((receipt, sent), peak, kept) = measured(|| exchange(&mut s3, &payload));
    assert!(matches!(receipt, Receipt::Scheduled { .. }), "{receipt:?}");
    assert_eq!(sent.len(), 1);
    assert_eq!(volume(&s3), 33);
    // The parse tree is the only thing that grows with the item count; the parser keeps its
    // arena for the next message, bounded by what the board's heap can hold.
    let heap = s3.device.spec().target.free_heap;
    assert!(peak < 2 * heap, "peak {peak} bytes for a {heap}-byte heap");
    assert!(kept < heap as isize, "kept {kept} bytes");

    // 180 000 bytes of free heap hold 3 750 items at most: malloc fails, the message is dropped.
    let mut c3 = booted(Arc::new(BoardSpec::from_yaml("szpi-esp32c3.yaml", C3).unwrap()));
    let ((receipt, sent), peak, _) = measured(|| exchange(&mut c3, &payload));
    assert_eq!(receipt, Receipt::OutOfMemory);
    assert!(sent.is_empty());
    assert_eq!(volume(&c3), 70);
    assert!(peak < 4 * 180_000, "refusing cost {peak} bytes");
    assert_alive(&mut c3);

    // A top-level array is parsed, but it has no members: no `jsonrpc`, dropped.
    let (receipt, sent) = exchange(&mut s3, array.as_bytes());
    assert_eq!(
        receipt,
        Receipt::Dropped {
            reason: DropReason::InvalidVersion
        }
    );
    assert!(sent.is_empty());
}

/// A set_volume call whose `arguments` carry an extra member nested so that the whole message
/// is `depth` containers deep (message, params, arguments, then arrays).
fn nested_call(depth: usize) -> Vec<u8> {
    let arrays = depth - 3;
    let x = format!("{}{}", "[".repeat(arrays), "]".repeat(arrays));
    call(
        "1",
        "self.audio_speaker.set_volume",
        &format!(r#"{{"volume":12,"x":{x}}}"#),
    )
}

#[test]
fn nesting_at_the_limit_is_answered_and_one_level_deeper_is_dropped() {
    let mut h = booted(bread(None));
    let (receipt, sent) = exchange(&mut h, &nested_call(1000));
    assert!(matches!(receipt, Receipt::Scheduled { .. }), "{receipt:?}");
    assert_eq!(sent.len(), 1);
    assert_eq!(volume(&h), 12);

    let (receipt, sent) = exchange(&mut h, &nested_call(1001));
    assert_eq!(
        receipt,
        Receipt::Dropped {
            reason: DropReason::Unparseable
        }
    );
    assert!(sent.is_empty());
}

#[test]
fn nesting_100000_deep_is_dropped_without_exhausting_the_stack() {
    let mut h = booted(bread(None));
    let ((receipt, sent), peak, _) = measured(|| exchange(&mut h, &nested_call(100_000)));
    assert_eq!(
        receipt,
        Receipt::Dropped {
            reason: DropReason::Unparseable
        }
    );
    assert!(sent.is_empty());
    // The refused message is logged whole, as the firmware logs it: a few copies of its own
    // 200 000 bytes while the log line is formatted, nothing that grows with the depth.
    assert!(peak < 6 * 200_000 + 64 * KIB, "{peak} bytes");
    assert_alive(&mut h);
}

#[test]
fn numbers_with_10000_digits_saturate_or_truncate_before_the_range_check() {
    let mut h = booted(bread(None));
    let nines = "9".repeat(10_000);
    let cases: Vec<(String, Result<i32, &str>)> = vec![
        (nines.clone(), Err("Value exceeds maximum allowed: 100")),
        (format!("-{nines}"), Err("Value is below minimum allowed: 0")),
        (format!("0.{}1", "0".repeat(10_000)), Ok(0)),
        (format!("-0.{}1", "0".repeat(10_000)), Ok(0)),
        // 1 followed by 10 000 zeros, scaled back by 10^-10000: exactly 1 (strtod is exact).
        (format!("1{}e-10000", "0".repeat(10_000)), Ok(1)),
        // 10 000 nines after the point are closer to the next integer than to any double below
        // it: strtod rounds first, then valueint truncates. `99.99` gives 99, `99.999…` gives 100.
        (format!("99.{nines}"), Ok(100)),
        (format!("-0.{nines}"), Err("Value is below minimum allowed: 0")),
        (format!("100.{nines}"), Err("Value exceeds maximum allowed: 100")),
    ];
    for (i, (number, want)) in cases.into_iter().enumerate() {
        let id = 100 + i as i32;
        let (receipt, sent) = exchange(
            &mut h,
            &call(
                &id.to_string(),
                "self.audio_speaker.set_volume",
                &format!(r#"{{"volume":{number}}}"#),
            ),
        );
        match want {
            Ok(v) => {
                assert!(
                    matches!(&receipt, Receipt::Scheduled { args, .. } if args == &[PropertyValue::Int(v)]),
                    "{}…: {receipt:?}",
                    &number[..12]
                );
                assert_eq!(volume(&h), v);
            }
            Err(message) => {
                let want = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"message":"{message}"}}}}"#);
                assert_eq!(sent, [want.into_bytes()], "{}…", &number[..12]);
            }
        }
    }
    // A 10 000-digit id saturates to INT_MAX in the reply.
    let (_, sent) = exchange(&mut h, &call(&nines, "self.lamp.get_state", "{}"));
    assert_eq!(sent.len(), 1);
    assert!(sent[0].starts_with(br#"{"jsonrpc":"2.0","id":2147483647,"result""#));
}

#[test]
fn invalid_utf8_is_kept_and_echoed_raw() {
    let mut h = booted(bread(None));
    let (_, sent) = exchange(
        &mut h,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\xc3\x28\"}",
    );
    assert_eq!(
        sent,
        [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"Method not implemented: \xff\xfe\xc3\x28\"}}"
                .to_vec()
        ]
    );
    let (_, sent) = exchange(&mut h, &call("2", "self.\u{ff}x", "{}"));
    assert!(
        sent[0].ends_with("Unknown tool: self.\u{ff}x\"}}".as_bytes()),
        "UTF-8 input stays UTF-8"
    );
    let raw = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"self.\x80\"}}";
    let (_, sent) = exchange(&mut h, raw);
    assert_eq!(
        sent,
        [b"{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"message\":\"Unknown tool: self.\x80\"}}".to_vec()]
    );
    // A string argument with invalid UTF-8 reaches the callback as bytes: no such theme.
    let (_, sent) = exchange(
        &mut h,
        b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"self.screen.set_theme\",\"arguments\":{\"theme\":\"d\xe4rk\"}}}",
    );
    assert!(sent[0].ends_with(br#""text":"false"}],"isError":false}}"#));
    assert_alive(&mut h);
}

#[test]
fn nul_bytes_truncate_strings_or_count_as_whitespace() {
    let mut h = booted(bread(None));
    // Raw NULs between tokens are whitespace for a length-bounded parse (WebSocket frames).
    let (_, sent) = exchange(&mut h, b"\0{\0\"jsonrpc\"\0:\"2.0\",\"id\":1,\"method\":\"ping\"}\0");
    assert_eq!(sent.len(), 1);
    // A raw NUL inside a string ends the C string the firmware sees.
    let (_, sent) = exchange(&mut h, b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\0junk\"}");
    assert_eq!(
        sent,
        [br#"{"jsonrpc":"2.0","id":2,"error":{"message":"Method not implemented: ping"}}"#.to_vec()]
    );
    // `\u0000` too: this is a call of self.lamp.turn_on.
    let (receipt, _) = exchange(&mut h, &call("3", r"self.lamp.turn_on\u0000xyz", "{}"));
    assert!(matches!(receipt, Receipt::Scheduled { ref tool, .. } if &**tool == "self.lamp.turn_on"));
    assert_eq!(h.device.snapshot().gpio.get(&18), Some(&true));
    // A C-string parse (MQTT) ends the input at the first NUL: the object is unterminated.
    h.device.set_terminator(Terminator::Nul);
    let (receipt, sent) = exchange(&mut h, b"{\"jsonrpc\":\"2.0\",\0\"id\":4,\"method\":\"ping\"}");
    assert_eq!(
        receipt,
        Receipt::Dropped {
            reason: DropReason::Unparseable
        }
    );
    assert!(sent.is_empty());
    h.device.set_terminator(Terminator::Length);
    assert_alive(&mut h);
}

#[test]
fn every_control_character_is_whitespace_between_tokens_and_raw_inside_the_echoed_method() {
    let mut h = booted(bread(None));
    for c in (0x01u8..=0x1f).chain([0x7f]) {
        let id = i32::from(c);
        // Between tokens: cJSON skips every byte <= 0x20 (0x7f is not whitespace).
        let spaced = format!(
            r#"{{"jsonrpc":"2.0",{0}"id"{0}:{0}{id},"method":"ping"}}"#,
            char::from(c)
        );
        let (receipt, _) = exchange(&mut h, spaced.as_bytes());
        if c == 0x7f {
            assert_eq!(
                receipt,
                Receipt::Dropped {
                    reason: DropReason::Unparseable
                }
            );
        } else {
            assert_eq!(receipt, Receipt::Answered { id, is_error: true }, "byte {c:#04x}");
        }
        // Inside the method: kept, and echoed raw in the hand-built error (invalid JSON).
        let mut payload = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"#).into_bytes();
        payload.push(c);
        payload.extend_from_slice(br#"x"}"#);
        let (_, sent) = exchange(&mut h, &payload);
        let mut want =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"message":"Method not implemented: m"#).into_bytes();
        want.push(c);
        want.extend_from_slice(br#"x"}}"#);
        assert_eq!(sent, [want], "byte {c:#04x}");
    }
    // Escaped control characters are decoded and echoed raw as well.
    let (_, sent) = exchange(&mut h, br#"{"jsonrpc":"2.0","id":40,"method":"a\b\f\n\r\tz"}"#);
    assert_eq!(
        sent,
        [
            b"{\"jsonrpc\":\"2.0\",\"id\":40,\"error\":{\"message\":\"Method not implemented: a\x08\x0c\n\r\tz\"}}"
                .to_vec()
        ]
    );
    assert!(
        serde_json::from_slice::<serde_json::Value>(&sent[0]).is_err(),
        "invalid JSON, as sent"
    );
}

#[test]
fn duplicate_keys_first_one_wins_everywhere() {
    let mut h = booted(bread(None));
    let (_, sent) = exchange(
        &mut h,
        br#"{"jsonrpc":"2.0","id":23,"id":24,"method":"initialize","method":"tools/list"}"#,
    );
    assert_eq!(sent.len(), 1);
    assert!(sent[0].starts_with(br#"{"jsonrpc":"2.0","id":23,"result":{"protocolVersion""#));
    let (receipt, _) = exchange(
        &mut h,
        br#"{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"VOLUME":15,"volume":99,"Volume":98}},"params":{"name":"self.reboot"}}"#,
    );
    assert!(
        matches!(&receipt, Receipt::Scheduled { tool, args, .. } if &**tool == "self.audio_speaker.set_volume" && args == &[PropertyValue::Int(15)]),
        "{receipt:?}"
    );
    assert_eq!(volume(&h), 15);
    assert_eq!(h.device.boots(), 1, "the second params was never looked at");
}

#[test]
fn a_tool_name_can_inject_json_into_the_unescaped_error_reply() {
    let mut h = booted(bread(None));
    let (receipt, sent) = exchange(
        &mut h,
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x\"},\"injected\":{\"admin\":true,\"z\":\""}}"#,
    );
    assert_eq!(receipt, Receipt::Answered { id: 1, is_error: true });
    let want = br#"{"jsonrpc":"2.0","id":1,"error":{"message":"Unknown tool: x"},"injected":{"admin":true,"z":""}}"#;
    assert_eq!(sent, [want.to_vec()]);
    // The reply is valid JSON with a member the device never meant to send.
    let v: serde_json::Value = serde_json::from_slice(&sent[0]).expect("valid JSON");
    assert_eq!(v["injected"]["admin"], serde_json::Value::Bool(true));
    assert_eq!(v["error"]["message"], "Unknown tool: x");
}

#[test]
fn a_backslash_in_a_method_makes_the_reply_invalid_json() {
    let mut h = booted(bread(None));
    let (_, sent) = exchange(&mut h, br#"{"jsonrpc":"2.0","id":-12.9,"method":"x\\y"}"#);
    assert_eq!(
        sent,
        [br#"{"jsonrpc":"2.0","id":-12,"error":{"message":"Method not implemented: x\y"}}"#.to_vec()]
    );
    assert!(serde_json::from_slice::<serde_json::Value>(&sent[0]).is_err());
}

#[test]
fn answering_many_messages_keeps_the_twins_memory_flat() {
    // Whatever the twin keeps per message (outputs, events) is handed over and drained; what is
    // left after a warm-up must not grow with the number of messages.
    let mut h = booted(bread(None));
    let payloads: Vec<Vec<u8>> = vec![
        call("1", "self.get_device_status", "{}"),
        call("2", "self.lamp.turn_on", "{}"),
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#.to_vec(),
        b"garbage".to_vec(),
        call("6", "self.audio_speaker.set_volume", r#"{"volume":1e300}"#),
    ];
    let round = |h: &mut Harness| {
        for p in &payloads {
            exchange(h, p);
        }
        h.device.drain_events();
    };
    for _ in 0..50 {
        round(&mut h);
    }
    let ((), _, kept) = measured(|| {
        for _ in 0..500 {
            round(&mut h);
        }
    });
    assert!(kept <= 4 * KIB as isize, "500 rounds left {kept} bytes behind");
}

#[test]
fn a_main_task_that_never_goes_idle_is_reported_not_waited_for() {
    // The twin never loops forever: `run_until_idle` gives up after a day of virtual time.
    let mut h = booted(bread(None));
    let now = h.now();
    h.device.busy(now, SimDuration::from_secs(3 * 24 * 3600));
    let err = h.run_until_idle().expect_err("busy for three days");
    assert_eq!(err, NeverIdle(IDLE_HORIZON));
    // The request that arrives meanwhile waits, and is answered once the main task is free.
    assert!(matches!(
        h.deliver(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        Receipt::Answered { id: 1, .. }
    ));
    h.sleep(SimDuration::from_secs(3 * 24 * 3600));
    assert_eq!(h.take_outputs().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

fn scratch(name: &str, content: &[u8]) -> PathBuf {
    common::scratch_file("hostile", name, content)
}

/// Exit status 2, nothing on stdout, one line on stderr starting with `<file>:<line>:<column>:`
/// (or `<file>:` when the file has no position to point at).
fn assert_refused(out: &ProcessOutput, file: &Path, line: Option<u64>) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        out.stdout.is_empty(),
        "no partial output: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    let at = match line {
        Some(l) => format!("{}:{l}:", file.display()),
        None => format!("{}:", file.display()),
    };
    assert!(err.contains(&at), "expected `{at}` in: {err}");
}

const GOOD_BOARD: &str = "name: hostile-board\ntype: bread-compact-wifi\ndisplay: { kind: oled, width: 128, height: 32, themes: [dark], default_theme: dark }\n";

/// (file name, content, line the error must point at)
fn broken_boards() -> Vec<(&'static str, String, u64)> {
    vec![
        ("unknown-key.yaml", format!("{GOOD_BOARD}colour: red\n"), 4),
        (
            "unknown-nested-key.yaml",
            format!("{GOOD_BOARD}target:\n  chip: esp32s3\n  turbo: true\n"),
            6,
        ),
        ("wrong-type.yaml", format!("{GOOD_BOARD}target:\n  tick_hz: fast\n"), 5),
        (
            "wrong-type-list.yaml",
            format!("{GOOD_BOARD}board_tools: {{ lamp: 18 }}\n"),
            4,
        ),
        (
            "missing-field.yaml",
            "name: hostile-board\ntype: bread-compact-wifi\ntarget: { chip: esp32s3 }\n".to_string(),
            3,
        ),
        (
            "huge-integer.yaml",
            format!("{GOOD_BOARD}target:\n  tick_hz: 4294967296\n"),
            5,
        ),
        (
            "huge-heap.yaml",
            format!("{GOOD_BOARD}target:\n  free_heap: 18446744073709551616\n"),
            5,
        ),
        (
            "huge-gpio.yaml",
            format!("{GOOD_BOARD}board_tools:\n  - lamp: {{ gpio: 4000000000 }}\n"),
            5,
        ),
        (
            "impossible-range.yaml",
            format!(
                "{GOOD_BOARD}board_tools:\n  - tool:\n      name: self.x\n      properties:\n        - {{ name: n, type: integer, min: -2147483649, max: 1 }}\n      behavior: {{ returns: {{ value: true }} }}\n"
            ),
            8,
        ),
        ("recursive-alias.yaml", format!("{GOOD_BOARD}buttons: &b [*b]\n"), 4),
        ("not-a-map.yaml", "- just\n- a list\n".to_string(), 1),
        ("empty.yaml", String::new(), 1),
        ("tab-indent.yaml", format!("{GOOD_BOARD}target:\n\tchip: esp32s3\n"), 5),
    ]
}

#[test]
fn broken_board_files_are_refused_with_file_line_and_column() {
    for (name, content, line) in broken_boards() {
        let err = BoardSpec::from_yaml(name, &content).expect_err(name);
        let text = err.to_string();
        assert!(!text.contains('\n'), "{name}: one line: {text}");
        assert!(text.starts_with(&format!("{name}:{line}:")), "{name}: {text}");
        let path = scratch(name, content.as_bytes());
        assert_refused(&twin(&["tools", "--board", path.to_str().unwrap()]), &path, Some(line));
    }
    // The good part of those files is a usable board.
    assert!(BoardSpec::from_yaml("good.yaml", GOOD_BOARD).is_ok());
}

#[test]
fn alias_bombs_are_refused_without_expanding_them() {
    // A billion-laughs document where any YAML is welcome (a call's `args`): each level holds ten
    // aliases of the one before, 10^9 strings when expanded. The loader stops at its node budget
    // with the position of the alias that breached it, holding a bounded amount of memory.
    let mut bomb = String::from(
        "name: n\nboard: bread-compact-wifi\nsteps:\n  - call:\n      tool: self.get_device_status\n      args:\n        l0: &a0 \"lol\"\n",
    );
    for i in 1..=9 {
        let refs: Vec<String> = (0..10).map(|_| format!("*a{}", i - 1)).collect();
        bomb.push_str(&format!("        l{i}: &a{i} [{}]\n", refs.join(",")));
    }
    let (result, peak, _) = measured(|| ScenarioSpec::from_yaml("bomb.yaml", &bomb));
    let text = result.expect_err("refused").to_string();
    assert!(text.starts_with("bomb.yaml:13:"), "{text}");
    assert!(text.contains("budget"), "{text}");
    assert!(peak < 256 * MIB, "the loader held {peak} bytes");
    let path = scratch("bomb.yaml", bomb.as_bytes());
    assert_refused(&twin(&["run", path.to_str().unwrap()]), &path, Some(13));
}

#[test]
fn non_utf8_files_are_refused_with_line_and_column() {
    let board = format!("{GOOD_BOARD}summary: caf\u{e9}\n").into_bytes();
    let mut latin1 = board.clone();
    let at = latin1.len() - 3;
    latin1.splice(at..at + 2, [0xe9]);
    let path = scratch("latin1.yaml", &latin1);
    let err = BoardSpec::load(&path).unwrap_err();
    assert_eq!(err.location(), Some((4, 13)), "{err}");
    assert_refused(&twin(&["tools", "--board", path.to_str().unwrap()]), &path, Some(4));

    let scenario = b"name: n\nboard: bread-compact-wifi\nsteps:\n  - note: \xff\xfe\n";
    let path = scratch("latin1-scenario.yaml", scenario);
    assert_refused(&twin(&["run", path.to_str().unwrap()]), &path, Some(4));
}

#[test]
fn an_oversized_data_file_is_refused_before_it_is_read() {
    let mut big = String::from(GOOD_BOARD);
    big.push_str("summary: \"");
    big.push_str(&"x".repeat(5 * MIB));
    big.push_str("\"\n");
    let path = scratch("oversized.yaml", big.as_bytes());
    let (err, peak, _) = measured(|| BoardSpec::load(&path).unwrap_err());
    assert!(err.to_string().contains("larger than"), "{err}");
    assert!(peak < 64 * KIB, "refused without reading: {peak} bytes");
    assert_refused(&twin(&["tools", "--board", path.to_str().unwrap()]), &path, None);
}

/// (file name, content, line the error must point at)
fn broken_scenarios() -> Vec<(&'static str, &'static str, u64)> {
    vec![
        (
            "s-unknown-key.yaml",
            "name: n\nboard: bread-compact-wifi\nspeed: 11\nsteps: []\n",
            3,
        ),
        (
            "s-unknown-step.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps:\n  - explode: {}\n",
            4,
        ),
        (
            "s-wrong-type.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps:\n  - wait: [1, 2]\n",
            4,
        ),
        ("s-missing-field.yaml", "name: n\nsteps: []\n", 2),
        (
            "s-huge-value.yaml",
            "name: n\nboard: bread-compact-wifi\nseed: 184467440737095516160\nsteps: []\n",
            3,
        ),
        (
            "s-huge-duration.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps:\n  - wait: 99999999999999999999999s\n",
            4,
        ),
        (
            "s-recursive-alias.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps: &s [*s]\n",
            3,
        ),
        (
            "s-unknown-tool.yaml",
            "name: n\nboard: bread-compact-wifi\nsteps:\n  - call: { tool: self.nope }\n",
            4,
        ),
        ("s-unknown-board.yaml", "name: n\nboard: no-such-board\nsteps: []\n", 2),
    ]
}

#[test]
fn broken_scenario_files_are_refused_with_exit_2_and_no_output() {
    let good = scratch(
        "s-good.yaml",
        b"name: good\nboard: bread-compact-wifi\nsteps:\n  - call: { tool: self.lamp.turn_on, expect: { text: \"true\" } }\n",
    );
    for (name, content, line) in broken_scenarios() {
        if !name.ends_with("unknown-tool.yaml") && !name.ends_with("unknown-board.yaml") {
            let err = ScenarioSpec::from_yaml(name, content).expect_err(name).to_string();
            assert!(err.starts_with(&format!("{name}:{line}:")), "{name}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let path = scratch(name, content.as_bytes());
        // A good scenario before the broken one: still nothing is printed (no partial success).
        let out = twin(&["run", good.to_str().unwrap(), path.to_str().unwrap()]);
        assert_refused(&out, &path, Some(line));
    }
    let out = twin(&["run", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
