//! Never crash, bounded on every input (issue 42): every finding of the hostile-input sweep as a
//! test that failed before its fix — impossible numbers in board and scenario files (also as
//! properties over every numeric field), a closed standard output, FIFOs and character devices
//! as input files, crafted fleet shards, an MQTT packet that claims 256 MB, long stdin lines, a
//! long WAV, and a WebSocket server that sends invalid UTF-8 and oversized frames.
//! docs/guarantees.md, "Input limits", lists every limit these check.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{BIN, root, scratch_dir, scratch_file, twin};
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::scenario::ScenarioSpec;
use xiaozhi_sim::scenario::runner::{RunOptions, run};
use xiaozhi_sim::spec::NoFiles;

/// Refused in one line: exit 2, nothing on stdout, one stderr line naming `place`, no panic.
fn refused(out: &Output, place: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(place), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

// ---------------------------------------------------------------------------------------------
// Impossible numbers
// ---------------------------------------------------------------------------------------------

const SCENARIO_HEAD: &str = "name: n\nboard: bread-compact-wifi\nseed: 1\nsteps:\n";

#[test]
fn an_impossible_tone_is_refused_where_it_is_written() {
    for (hz, dbfs) in [
        (".inf", "-6"),
        (".nan", "-6"),
        ("-1000", "-6"),
        ("0", "-6"),
        ("1000", ".nan"),
        ("1000", "6"),
    ] {
        for step in ["play", "speak"] {
            let text = match step {
                "play" => format!("{SCENARIO_HEAD}  - play: {{tone: {{hz: {hz}, dbfs: {dbfs}}}, for: 1s}}\n"),
                _ => format!("{SCENARIO_HEAD}  - speak: {{text: hi, for: 1s, tone: {{hz: {hz}, dbfs: {dbfs}}}}}\n"),
            };
            let path = scratch_file("never-crash", "tone.yaml", text.as_bytes());
            let out = twin(&["run", path.to_str().unwrap()]);
            let e = refused(&out, "tone.yaml:5:");
            assert!(e.contains("tone."), "{e}");
        }
    }
}

#[test]
fn an_impossible_room_or_flag_is_refused() {
    let text = format!("{SCENARIO_HEAD}  - play: {{for: 1s}}\nworld: {{room: {{listener_distance_m: .nan}}}}\n");
    let path = scratch_file("never-crash", "room.yaml", text.as_bytes());
    refused(
        &twin(&["run", path.to_str().unwrap()]),
        "world.room.listener_distance_m",
    );
    for (flag, value) in [
        ("--distance", "nan"),
        ("--distance", "0"),
        ("--ambient", "inf"),
        ("--ambient", "-1e308"),
    ] {
        let out = twin(&["render", "--board", "bread-compact-wifi", &format!("{flag}={value}")]);
        refused(&out, flag);
    }
    refused(&twin(&["fleet", "--url", "http://127.0.0.1:1/"]), "--url");
}

/// The board file schema as docs/boards.md writes it: a board with every field.
fn schema_board() -> String {
    let doc = std::fs::read_to_string(root().join("docs/boards.md")).unwrap();
    let from = doc.find("## Board file schema").expect("the schema section");
    let block = &doc[from..];
    let start = block.find("```yaml\n").unwrap() + "```yaml\n".len();
    let end = block[start..].find("```").unwrap();
    block[start..start + end].to_string()
}

/// Where the numbers of a YAML text are (after `: `, `[` or `, `; comments left out), with the
/// key they belong to.
fn numbers(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let mut found = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let code = line.find(" #").map_or(line, |c| &line[..c]);
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let starts = (b[i].is_ascii_digit() || (b[i] == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
                && i >= 2
                && matches!(&code[i - 2..i], ": " | "[ " | ", ");
            if !starts {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                j += 1;
            }
            let after = b.get(j).copied();
            if matches!(after, None | Some(b',' | b' ' | b'}' | b']' | b'\n' | b'\r')) {
                let key = code[..i - 2].rsplit([' ', '{', ',']).next().unwrap_or("").to_string();
                found.push((offset + i..offset + j, key));
            }
            i = j;
        }
        offset += line.len();
    }
    found
}

/// What the twin is fed in place of each number.
const HOSTILE: &[&str] = &[
    ".nan",
    ".inf",
    "-.inf",
    "-1",
    "0",
    "2.5",
    "1e-300",
    "1e308",
    "-1e308",
    "4294967295",
    "18446744073709551616",
];

/// A voice turn, a tone and a call through whatever the board is: boot, set_volume with the
/// probe before and after, a tone, speech, a button.
const WORKLOAD: &str = "name: workload\nboard: b\nseed: 1\nsteps:\n  - initialize: {}\n  - call: { tool: self.audio_speaker.set_volume, args: { volume: 40 }, acoustic: true }\n  - play: { tone: { hz: 1000, dbfs: -6 }, for: 300ms }\n  - speak: { text: 好的, for: 600ms }\n  - wait: 2s\n";

/// Every numeric field of a board file (the schema with every field), set to each hostile
/// value: the file is refused in one line that names it, or everything a board does runs to
/// its end. Never a panic. (12 of 420 such mutations used to panic in `f64::clamp`.)
#[test]
fn every_number_of_a_board_file_is_refused_or_runs() {
    let schema = schema_board();
    BoardSpec::from_yaml("schema.yaml", &schema).expect("docs/boards.md's schema is a valid board");
    let found = numbers(&schema);
    let keys: std::collections::BTreeSet<&str> = found.iter().map(|(_, k)| k.as_str()).collect();
    for k in [
        "tick_hz",
        "flash_size",
        "free_heap",
        "minimum_free_heap",
        "revision",
        "width",
        "height",
        "gpio",
        "default_brightness",
        "boot_brightness",
        "frequency_hz",
        "input_sample_rate",
        "output_sample_rate",
        "default_volume",
        "gain_db",
        "supply_v",
        "p_1pct_w",
        "startup_ms",
        "sensitivity_db",
        "impedance_ohm",
        "f0_hz",
        "avdd_v",
        "pa_voltage",
        "codec_dac_voltage",
        "level",
        "clicks",
        "long_press_time",
        "short_press_time",
        "default",
        "min",
        "max",
        "size",
        "bpp",
    ] {
        assert!(
            keys.contains(k),
            "the schema in docs/boards.md writes no number for `{k}`: {keys:?}"
        );
    }
    let workload = ScenarioSpec::from_yaml("workload.yaml", WORKLOAD).unwrap();
    let mut crashed = Vec::new();
    let mut ran = 0;
    for (range, key) in &found {
        for value in HOSTILE {
            let text = format!("{}{value}{}", &schema[..range.start], &schema[range.end..]);
            let board = match BoardSpec::from_yaml("schema.yaml", &text) {
                Err(e) => {
                    let line = e.to_string();
                    assert!(
                        line.starts_with("schema.yaml:") && !line.contains('\n'),
                        "{key} = {value}: {line}"
                    );
                    continue;
                }
                Ok(b) => b,
            };
            ran += 1;
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(
                    &workload,
                    Arc::new(board),
                    "workload.yaml",
                    &RunOptions::default(),
                    &NoFiles,
                )
            }));
            if outcome.is_err() {
                crashed.push(format!("{key} = {value}"));
            }
        }
    }
    assert!(crashed.is_empty(), "panicked with: {crashed:?}");
    assert!(
        ran > 30,
        "only {ran} mutations were accepted: the property checked little"
    );
}

mod scenario_steps {
    use proptest::prelude::*;

    use super::*;

    /// A number for a hole of a step: hostile or ordinary.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(HOSTILE).prop_map(str::to_string),
            (-200i64..20_000).prop_map(|n| n.to_string()),
        ]
    }

    /// One step with numbers in its holes.
    fn step() -> impl Strategy<Value = String> {
        (0..9usize, number(), number()).prop_map(|(kind, a, b)| match kind {
            0 => format!("  - play: {{ tone: {{ hz: {a}, dbfs: {b} }}, for: 200ms }}\n"),
            1 => format!("  - speak: {{ text: 你好, for: 300ms, tone: {{ hz: {a}, dbfs: {b} }} }}\n"),
            2 => format!("  - call: {{ tool: self.audio_speaker.set_volume, args: {{ volume: {a} }}, acoustic: true }}\n"),
            3 => format!("  - call: {{ tool: self.screen.set_brightness, args: {{ brightness: {a} }} }}\n"),
            4 => format!(
                "  - call: {{ tool: self.audio_speaker.set_volume, args: {{ volume: 50 }}, acoustic: true, expect: {{ change_db: {{ value: {a}, tolerance: {b} }} }} }}\n"
            ),
            5 => format!("  - press: {{ button: boot, clicks: {a} }}\n"),
            6 => format!("  - send: '{{\"jsonrpc\":\"2.0\",\"id\":{a},\"method\":\"tools/list\"}}'\n"),
            7 => "  - wait: 150ms\n".to_string(),
            _ => format!("  - readback: {{ path: audio_speaker.volume, expect: {{ value: {a} }} }}\n"),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

        /// Scenario steps with hostile numbers, and a room of hostile numbers: refused with
        /// located one-line errors, or run to the end. Never a panic.
        #[test]
        fn scenario_steps_with_any_number_are_refused_or_run(
            steps in proptest::collection::vec(step(), 1..6),
            room in (number(), number(), number()),
        ) {
            let text = format!(
                "name: n\nboard: bread-compact-wifi-lcd\nseed: 1\nworld: {{ room: {{ ambient_dba: {}, listener_distance_m: {}, margin_db: {} }} }}\nsteps:\n  - initialize: {{}}\n{}",
                room.0, room.1, room.2, steps.concat()
            );
            let board = BoardSpec::load(&root().join("boards/bread-compact-wifi-lcd.yaml")).unwrap();
            let (spec, errors) = ScenarioSpec::parse_all("s.yaml", &text);
            for e in &errors {
                let line = e.to_string();
                prop_assert!(line.starts_with("s.yaml:") && !line.contains('\n'), "{}", line);
            }
            if errors.is_empty() {
                let spec = spec.unwrap();
                let tools: Vec<String> = vec![
                    "self.audio_speaker.set_volume".into(),
                    "self.screen.set_brightness".into(),
                ];
                if spec.check_against("s.yaml", &board, &tools).is_ok() {
                    let _ = run(&spec, Arc::new(board), "s.yaml", &RunOptions::default(), &NoFiles);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A closed standard output
// ---------------------------------------------------------------------------------------------

/// `xiaozhi-twin ARGS | head -c 10`: the reader goes away after 10 bytes. The twin ends quietly
/// (status 0, as `yes | head` and ripgrep do), never with "failed printing to stdout".
fn closed_after_ten_bytes(args: &[&str]) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ten = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut ten).unwrap();
    let (code, _, stderr) = common::finish(child, Duration::from_secs(120));
    assert_eq!(code, 0, "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

#[test]
fn a_closed_standard_output_ends_the_output_quietly() {
    closed_after_ten_bytes(&["run", root().join("scenarios").to_str().unwrap()]);
    let dir = scratch_dir("never-crash-demo");
    closed_after_ten_bytes(&["demo", "--out", dir.to_str().unwrap()]);
    // The end of the output, not of the work: the report files are still written.
    let json = dir.join("run.json");
    closed_after_ten_bytes(&[
        "run",
        root().join("scenarios/00-turn-it-down-a-bit.yaml").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(report.as_array().is_some_and(|a| a.len() == 1), "{report}");
}

#[test]
fn a_backend_whose_standard_output_closed_stops_quietly_at_its_next_report() {
    let mut be = common::listening(&["--connections", "3", "--duration", "60s"]);
    drop(be.child.stdout.take());
    let url = format!("ws://127.0.0.1:{}/xiaozhi/v1/", be.port);
    let dev = Command::new(BIN)
        .args([
            "connect",
            "--board",
            "bread-compact-wifi",
            "--duration",
            "2s",
            "--url",
            &url,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (dcode, _, derr) = common::finish(dev, Duration::from_secs(30));
    assert_eq!(dcode, 0, "{derr}");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = be.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the backend went on after its report failed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let said: Vec<String> = be.stderr.try_iter().collect();
    assert_eq!(status.code(), Some(0), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("panicked")), "{said:?}");
}

// ---------------------------------------------------------------------------------------------
// Inputs that are not regular files, and what they may cost
// ---------------------------------------------------------------------------------------------

/// Runs `xiaozhi-twin ARGS` (with `stdin` fed in when given) and reaps it with `wait4(2)`:
/// (exit code, stdout, stderr, the child's own peak resident memory in KiB from the kernel).
/// Its own, not every child's: the other tests of this file run children at the same time.
#[allow(unsafe_code)] // wait4(2) has no safe wrapper in std
#[allow(clippy::zombie_processes)] // reaped by wait4(2), not by `Child::wait`
fn measured(args: &[&str], stdin: Option<Vec<u8>>) -> (i32, String, String, i64) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = child.stdin.take().zip(stdin).map(|(mut pipe, bytes)| {
        std::thread::spawn(move || {
            for chunk in bytes.chunks(1 << 16) {
                if pipe.write_all(chunk).is_err() {
                    break;
                }
            }
        })
    });
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        (o, e)
    });
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: the pid is our own unreaped child; `status` and `usage` are valid and writable.
    let rc = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(rc, child.id() as libc::pid_t);
    // SAFETY: wait4 returned the child, so it filled `usage`.
    let peak = unsafe { usage.assume_init() }.ru_maxrss;
    let (o, e) = reader.join().unwrap();
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // The measurement itself works: no build of the twin runs in under a megabyte.
    assert!(peak > 1_000, "{args:?}: a peak of {peak} KiB is no measurement");
    (code, o, e, peak)
}

/// `/proc/<pid>/status`'s `VmHWM` (the peak resident memory so far, KiB) of a running child.
fn peak_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A FIFO at `path` that a thread fills with `bytes` zero bytes (what is not read is dropped).
fn fifo(path: &Path, bytes: usize) -> std::thread::JoinHandle<()> {
    let _ = std::fs::remove_file(path);
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&path) {
            let chunk = vec![b'a'; 1 << 16];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len());
                if f.write_all(&chunk[..n]).is_err() {
                    break;
                }
                left -= n;
            }
        }
    })
}

#[test]
fn fifos_and_character_devices_are_read_up_to_the_cap_and_no_further() {
    let dir = scratch_dir("never-crash-fifo");
    // 20 MB through a FIFO as a scenario, a board, a connect script, a personality, a
    // backend scenario and a shard: each refused at 4 MiB + 1 byte.
    let cases: [(&str, &[&str]); 6] = [
        ("scenario", &["run", "@"]),
        ("board", &["tools", "--board", "@"]),
        (
            "script",
            &[
                "connect",
                "--board",
                "bread-compact-wifi",
                "--url",
                "ws://127.0.0.1:9/x",
                "--script",
                "@",
            ],
        ),
        (
            "personality",
            &["backend", "--personality", "@", "--listen", "127.0.0.1:0"],
        ),
        (
            "backend-scenario",
            &["backend", "--scenario", "@", "--listen", "127.0.0.1:0"],
        ),
        ("shard", &["fleet", "merge", "@", "@"]),
    ];
    for (name, args) in cases {
        let path = dir.join(format!("{name}.yaml"));
        let writer = fifo(&path, 20_000_000);
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "@" { path.to_str().unwrap() } else { a })
            .collect();
        let (code, _, e, peak) = measured(&args, None);
        assert_eq!(code, 2, "{name}: {e}");
        assert!(e.contains("larger than the 4194304 bytes"), "{name}: {e}");
        assert!(peak < 120_000, "{name}: peaked at {peak} KiB");
        // Unblock a writer whose FIFO was never opened (a refusal before the read); without
        // blocking when the writer is already gone.
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map(drop);
        writer.join().unwrap();
    }
    // Character devices, and 20 MB through /dev/stdin (before the fix: 688 MB resident for
    // that, and /dev/zero until the machine ran out of memory).
    for (device, stdin) in [
        ("/dev/zero", None),
        ("/dev/urandom", None),
        ("/dev/stdin", Some(vec![b'a'; 20_000_000])),
    ] {
        let (code, out, e, peak) = measured(&["run", device], stdin);
        assert_eq!((code, out.as_str()), (2, ""), "{e}");
        assert!(e.contains(&format!("{device}: larger than")), "{e}");
        assert!(peak < 120_000, "{device}: peaked at {peak} KiB");
    }
    // A request file that is one endless line: refused at 64 MiB, not read for ever.
    let (code, _, e, peak) = measured(&["replay", "--board", "bread-compact-wifi", "/dev/zero"], None);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("/dev/zero:1: a line longer than 67108864 bytes"), "{e}");
    assert!(peak < 120_000, "replay peaked at {peak} KiB");
}

#[test]
fn a_crafted_shard_is_refused_without_allocating_its_claim() {
    let dir = scratch_dir("never-crash-shard");
    // A histogram whose V2 payload claims 2^32 - 1 bytes (DEFLATE of the header alone).
    let mut plain = Vec::new();
    plain.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
    plain.extend_from_slice(&u32::MAX.to_be_bytes());
    plain.extend_from_slice(&0u32.to_be_bytes());
    plain.extend_from_slice(&3u32.to_be_bytes());
    plain.extend_from_slice(&1u64.to_be_bytes());
    plain.extend_from_slice(&3_600_000_000u64.to_be_bytes());
    plain.extend_from_slice(&1f64.to_be_bytes());
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&plain).unwrap();
    let deflated = z.finish().unwrap();
    let mut hdr = 0x1c84_9314u32.to_be_bytes().to_vec();
    hdr.extend_from_slice(&(deflated.len() as u32).to_be_bytes());
    hdr.extend_from_slice(&deflated);
    use base64::Engine as _;
    let crafted = base64::engine::general_purpose::STANDARD.encode(hdr);
    // A real shard written by the fleet, its first histogram replaced.
    let shard = dir.join("shard.json");
    let out = twin(&[
        "fleet",
        "--voice",
        "--devices",
        "2",
        "--turns",
        "1",
        "--json",
        shard.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&shard).unwrap()).unwrap();
    // Two shards of one run of two: the first as written, the second with a crafted histogram.
    v["shards"] = serde_json::json!([{ "index": 0, "count": 2 }]);
    std::fs::write(&shard, serde_json::to_vec(&v).unwrap()).unwrap();
    v["shards"] = serde_json::json!([{ "index": 1, "count": 2 }]);
    let latency = v["latency"].as_object_mut().unwrap();
    let first = latency.keys().next().unwrap().clone();
    latency.get_mut(&first).unwrap()["hdr"] = serde_json::Value::String(crafted);
    let bad = dir.join("crafted.json");
    std::fs::write(&bad, serde_json::to_vec(&v).unwrap()).unwrap();
    let out = twin(&["fleet", "merge", shard.to_str().unwrap(), bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("4294967295"), "{e}");
    assert!(!e.contains("memory allocation"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Remote and stdin inputs
// ---------------------------------------------------------------------------------------------

#[test]
fn an_mqtt_packet_that_claims_256_mb_closes_the_connection_after_a_few_bytes() {
    let mut child = Command::new(BIN)
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--mqtt",
            "127.0.0.1:0",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mqtt = loop {
        let l = lines.next().expect("the backend says where it listens").unwrap();
        if let Some(rest) = l.split("MQTT gateway on ").nth(1) {
            break rest.split(' ').next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let pid = child.id();
    let before = peak_of(pid);
    let mut sent_by_the_three = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(&mqtt).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        // PUBLISH, remaining length 268,435,455 (the largest MQTT allows), then data.
        let mut sent = 0usize;
        if s.write_all(&[0x30, 0xff, 0xff, 0xff, 0x7f]).is_ok() {
            let chunk = vec![0u8; 64 * 1024];
            while sent < 256 << 20 {
                match s.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
        }
        sent_by_the_three.push(sent);
    }
    let after = peak_of(pid);
    let _ = child.kill();
    let _ = child.wait();
    // The connection was closed long before its claim: the kernel's buffers take a few MB.
    for sent in &sent_by_the_three {
        assert!(*sent < 32 << 20, "{sent} bytes were taken before the gateway closed");
    }
    // Before the fix: three such clients took the backend from 17 to 325 MB.
    assert!(after < before + 20_000, "the backend grew from {before} to {after} KiB");
}

#[test]
fn a_long_stdin_line_is_skipped_not_held_or_echoed() {
    let mut child = Command::new(BIN)
        .args([
            "backend",
            "--listen",
            "127.0.0.1:0",
            "--script",
            "-",
            "--duration",
            "60s",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let done = l.starts_with("stdin:2:");
            lines.push(l);
            if done {
                break;
            }
        }
        lines
    });
    let mut stdin = child.stdin.take().unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.write_all(b"\nnot a command\n").unwrap();
    stdin.flush().unwrap();
    let said = said.join().unwrap();
    let peak = peak_of(pid);
    let _ = child.kill();
    let _ = child.wait();
    let first = said
        .iter()
        .find(|l| l.starts_with("stdin:1:"))
        .expect("the long line is reported");
    assert!(first.len() < 300, "{first}");
    assert!(first.contains("104857600 bytes"), "{first}");
    assert!(said.iter().any(|l| l.starts_with("stdin:2:")), "{said:?}");
    // Before the fix: 207 MB resident for a 100 MB line.
    assert!(peak < 100_000, "the backend peaked at {peak} KiB");
}

/// A WAV whose header claims 4 GB of 384 kHz stereo, streamed: at most ten minutes and at
/// most [`MAX_WAV_SAMPLES`](xiaozhi_twin::wav::MAX_WAV_SAMPLES) samples are kept, and the file
/// is read no further than that.
#[test]
fn a_long_wav_is_read_as_a_stream_and_cut() {
    /// A WAV header and then zeros, forever; counts what is read.
    struct Endless {
        header: Vec<u8>,
        read: u64,
    }
    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let at = self.read as usize;
            let n = if at < self.header.len() {
                let n = (self.header.len() - at).min(buf.len());
                buf[..n].copy_from_slice(&self.header[at..at + n]);
                n
            } else {
                buf.fill(0);
                buf.len()
            };
            self.read += n as u64;
            Ok(n)
        }
    }
    let (rate, channels, bits) = (384_000u32, 2u16, 16u16);
    let mut header = b"RIFF".to_vec();
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header.extend_from_slice(b"WAVEfmt ");
    header.extend_from_slice(&16u32.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes());
    header.extend_from_slice(&channels.to_le_bytes());
    header.extend_from_slice(&rate.to_le_bytes());
    header.extend_from_slice(&(rate * u32::from(channels) * u32::from(bits) / 8).to_le_bytes());
    header.extend_from_slice(&(channels * bits / 8).to_le_bytes());
    header.extend_from_slice(&bits.to_le_bytes());
    header.extend_from_slice(b"data");
    header.extend_from_slice(&(!3u32).to_le_bytes()); // 4 GB, a whole number of frames
    let header_len = header.len() as u64;
    let mut source = Endless { header, read: 0 };
    let (got_rate, pcm) = xiaozhi_twin::wav::read_pcm_from(&mut source, "endless.wav").unwrap();
    assert_eq!(got_rate, rate);
    let cap = xiaozhi_twin::wav::MAX_WAV_SAMPLES;
    assert_eq!(pcm.len() as u64, cap);
    assert!(pcm.capacity() as u64 <= cap, "{}", pcm.capacity());
    // Read as a stream: the samples kept and hound's buffering, nothing more.
    let kept_bytes = cap * u64::from(channels) * u64::from(bits / 8);
    assert!(
        source.read <= header_len + kept_bytes + (1 << 20),
        "{} bytes read",
        source.read
    );
}

// ---------------------------------------------------------------------------------------------
// What the device's WebSocket accepts
// ---------------------------------------------------------------------------------------------

/// A server frame (unmasked).
fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n < 65_536 => {
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

/// Reads one client frame (masked): (opcode, payload).
fn client_frame(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    s.read_exact(&mut h)?;
    let mut len = u64::from(h[1] & 0x7f);
    if len == 126 {
        let mut e = [0u8; 2];
        s.read_exact(&mut e)?;
        len = u64::from(u16::from_be_bytes(e));
    } else if len == 127 {
        let mut e = [0u8; 8];
        s.read_exact(&mut e)?;
        len = u64::from_be_bytes(e);
    }
    let mut mask = [0u8; 4];
    if h[1] & 0x80 != 0 {
        s.read_exact(&mut mask)?;
    }
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload)?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    Ok((h[0] & 0x0f, payload))
}

/// The next text frame from the device whose payload contains `needle`.
fn text_with(s: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
    loop {
        let (op, p) = client_frame(s).expect("the device is still connected");
        if op == 1 && p.windows(needle.len()).any(|w| w == needle) {
            return p;
        }
    }
}

fn mcp_call(id: u32, name: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "{{\"session_id\":\"s\",\"type\":\"mcp\",\"payload\":{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\""
    )
    .into_bytes();
    m.extend_from_slice(name);
    m.extend_from_slice(b"\",\"arguments\":{}}}}");
    m
}

/// A server that answers the handshake and the hello, then sends a tool name with invalid
/// UTF-8 and a 9 MB text frame: the device answers the first as the firmware does
/// (`Unknown tool: self.\xc3(`, bytes as they came) and drops the second as a message it cannot
/// parse (its heap is 8 MiB), and stays connected: it answers a call after both.
#[test]
fn invalid_utf8_and_oversized_text_frames_reach_the_device_model() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dev = Command::new(BIN)
        .args(["connect", "--board", "bread-compact-wifi", "--duration", "20s", "--url"])
        .arg(format!("ws://127.0.0.1:{port}/xiaozhi/v1/"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        .unwrap();
    text_with(&mut s, b"\"hello\"");
    let hello = br#"{"type":"hello","transport":"websocket","session_id":"s","audio_params":{"format":"opus","sample_rate":24000,"channels":1,"frame_duration":60}}"#;
    s.write_all(&server_frame(1, hello)).unwrap();
    s.write_all(&server_frame(1, &mcp_call(1, b"self.\xc3("))).unwrap();
    let reply = text_with(&mut s, b"\"id\":1");
    let needle = b"Unknown tool: self.\xc3(";
    assert!(
        reply.windows(needle.len()).any(|w| w == needle),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let mut big = b"{\"type\":\"mcp\",\"payload\":\"".to_vec();
    big.resize(9 << 20, b'x');
    big.extend_from_slice(b"\"}");
    s.write_all(&server_frame(1, &big)).unwrap();
    s.write_all(&server_frame(1, &mcp_call(2, b"self.get_device_status")))
        .unwrap();
    let status = text_with(&mut s, b"\"id\":2");
    assert!(
        status.windows(6).any(|w| w == b"result"),
        "{}",
        String::from_utf8_lossy(&status)
    );
    drop(s);
    let (code, _, err) = common::finish(dev, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The device logged the frame it could not parse, as the firmware does; the driver printed
    // the first 2,000 characters of that line and its length, not 9 MB.
    let logged = err
        .lines()
        .find(|l| l.contains("Missing message type"))
        .expect("the device's log line");
    assert!(
        logged.len() < 2_500 && logged.contains("bytes in all"),
        "{} bytes",
        logged.len()
    );
}

/// `stdio` reads a message that arrives in pieces, with the device's 1 s clock tick firing in
/// between, whole: the partial line stays in the reader (it used to be cleared when the timer
/// won the `select!`, and the message was lost).
#[test]
fn a_stdio_message_split_across_a_timer_wakeup_is_kept_whole() {
    let mut child = Command::new(BIN)
        .args(["stdio", "--board", "bread-compact-wifi"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(br#"{"jsonrpc":"2.0","id":7,"met"#).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    stdin.write_all(b"hod\":\"tools/list\",\"params\":{}}\n").unwrap();
    drop(stdin);
    let (code, out, _) = common::finish(child, Duration::from_secs(30));
    assert_eq!(code, 0);
    assert!(
        out.contains("\"id\":7") && out.contains("self.get_device_status"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// Values that used to be accepted, and messages that used to be long
// ---------------------------------------------------------------------------------------------

/// `boards/bread-compact-wifi.yaml` with `line` added after the line `after`.
fn board_with(name: &str, after: &str, line: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join("boards/bread-compact-wifi.yaml")).unwrap();
    let at = text.find(after).unwrap_or_else(|| panic!("no `{after}`")) + after.len();
    let text = format!("{}\n{line}{}", &text[..at], &text[at..]);
    scratch_file("never-crash-boards", name, text.as_bytes())
}

#[test]
fn impossible_board_values_that_used_to_load_are_refused_with_their_place() {
    let cases = [
        (
            "gain.yaml",
            "  output_sample_rate: 24000",
            "  amplifier: { model: max98357a, gain_db: .nan }",
            "audio.amplifier.gain_db",
        ),
        (
            "sens.yaml",
            "  output_sample_rate: 24000",
            "  speaker: { sensitivity_db: .nan }",
            "audio.speaker.sensitivity_db",
        ),
        (
            "ohm.yaml",
            "  output_sample_rate: 24000",
            "  speaker: { impedance_ohm: -4 }",
            "audio.speaker.impedance_ohm",
        ),
        (
            "pa.yaml",
            "  output_sample_rate: 24000",
            "  pa_gpio: { gpio: 4294967295 }",
            "audio.pa_gpio.gpio",
        ),
        (
            "bl.yaml",
            "  default_theme: dark             # ... and makes it current; never persisted",
            "backlight: { gpio: 4294967295 }",
            "backlight.gpio",
        ),
        (
            "heap.yaml",
            "  tick_hz: 100                    # CONFIG_FREERTOS_HZ (ESP-IDF default; not set by xiaozhi)",
            "  free_heap: 1073741824",
            "target.free_heap",
        ),
    ];
    for (name, after, line, field) in cases {
        let path = board_with(name, after, line);
        let e = refused(&twin(&["tools", "--board", path.to_str().unwrap()]), field);
        assert!(e.contains(&format!("{name}:")), "{e}");
    }
}

#[test]
fn impossible_personalities_are_refused_with_their_place() {
    let shipped = std::fs::read_to_string(root().join("backends/xinnan-py.yaml")).unwrap();
    for (from, to, field) in [
        ("    window: 5", "    window: 0", "voice.vad.window"),
        ("    voice_dbfs: -40", "    voice_dbfs: .nan", "voice.vad.voice_dbfs"),
        ("  tts_rate: 24000", "  tts_rate: 1", "voice.tts_rate"),
    ] {
        assert!(shipped.contains(from), "{from}");
        let path = scratch_file("never-crash", "persona.yaml", shipped.replacen(from, to, 1).as_bytes());
        refused(
            &twin(&[
                "backend",
                "--personality",
                path.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ]),
            field,
        );
    }
}

#[test]
fn long_names_wide_wavs_and_bad_flags_are_one_short_line_with_nothing_on_stdout() {
    // A 100,000-character tool name: tools/list fails on its second page; nothing is printed
    // (the first page used to be), and the name is not echoed whole.
    let long = format!(
        "  - tool:\n      name: self.x{}\n      description: d\n      behavior: {{ returns: {{ value: true }} }}\n",
        "a".repeat(100_000)
    );
    let text = std::fs::read_to_string(root().join("boards/bread-compact-wifi.yaml")).unwrap();
    let text = text.replace("board_tools:\n", &format!("board_tools:\n{long}"));
    let path = scratch_file("never-crash", "long-tool.yaml", text.as_bytes());
    let e = refused(&twin(&["tools", "--board", path.to_str().unwrap()]), "tools/list fails");
    assert!(e.len() < 400, "{} bytes", e.len());
    // A 64-bit float WAV: the message names the file.
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(36u32 + 800).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    for v in [3u16, 1] {
        wav.extend_from_slice(&v.to_le_bytes());
    }
    wav.extend_from_slice(&16_000u32.to_le_bytes());
    wav.extend_from_slice(&128_000u32.to_le_bytes());
    for v in [8u16, 64] {
        wav.extend_from_slice(&v.to_le_bytes());
    }
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&800u32.to_le_bytes());
    wav.extend_from_slice(&[0u8; 800]);
    let path = scratch_file("never-crash", "f64.wav", &wav);
    refused(
        &twin(&[
            "render",
            "--board",
            "bread-compact-wifi",
            "--wav",
            path.to_str().unwrap(),
        ]),
        "f64.wav",
    );
    // Usage errors: one line with the command's usage (clap's own take 3–7).
    for args in [
        &["render", "--board", "bread-compact-wifi", "-i"][..],
        &["run"],
        &["render", "--board", "x", "--volume"],
        &["frobnicate"],
    ] {
        refused(&twin(args), "(");
    }
    // A report that cannot be written at the end (a full disk): nothing on stdout, exit 2.
    for flag in ["--json", "--junit", "--html"] {
        let scenario = root().join("scenarios/00-turn-it-down-a-bit.yaml");
        refused(
            &twin(&["run", scenario.to_str().unwrap(), flag, "/dev/full"]),
            "/dev/full",
        );
    }
    // An output that cannot be written is refused before anything runs.
    let dir = scratch_dir("never-crash-out");
    let scenario = root().join("scenarios/00-turn-it-down-a-bit.yaml");
    refused(
        &twin(&["run", scenario.to_str().unwrap(), "--json", dir.to_str().unwrap()]),
        "is a directory",
    );
    refused(
        &twin(&[
            "run",
            scenario.to_str().unwrap(),
            "--junit",
            dir.join("no/such/x.xml").to_str().unwrap(),
        ]),
        "--junit",
    );
}
