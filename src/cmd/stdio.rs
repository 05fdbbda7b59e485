//! `xiaozhi-twin stdio`: a simulated board as a standard MCP server on stdin/stdout
//! (newline-delimited JSON-RPC), for MCP Inspector, Claude Desktop or any SDK client.
//!
//! Faithful by default: every byte on stdout is what the firmware's McpServer sends (protocol
//! version 2024-11-05, errors without `code`, error messages inserted unescaped, `ping`
//! answered with "Method not implemented: ping"). `--compat` repairs only what standard
//! clients cannot accept: it adds a JSON-RPC error `code`, re-escapes the message, and answers
//! `ping` itself. Virtual time follows the wall clock (a `self.reboot` really takes its
//! seconds); logs go to stderr, never stdout.

use std::io::Write;
use xiaozhi_sim::device::Input;

use anyhow::Result;
use xiaozhi_sim::device::{Device, Output, Receipt};
use xiaozhi_sim::harness::Harness;
use xiaozhi_sim::time::SimDuration;
use xiaozhi_sim::world::WorldSpec;

use crate::args::BoardArgs;
use crate::lines::{BoundedLines, Line};
use crate::live::Clock;

/// The longest message line read from stdin: the largest heap a board may declare (64 MiB,
/// `target.free_heap`), so every message the device could hold gets through and the device
/// decides; a longer line is dropped without being held (docs/guarantees.md, "Input limits").
pub const MAX_LINE: usize = xiaozhi_sim::board::MAX_FREE_HEAP;

/// The board as a standard MCP server on stdin/stdout (newline-delimited JSON-RPC).
///
/// Faithful mode by default: the firmware's replies exactly (protocol version 2024-11-05,
/// errors without `code`, messages inserted unescaped, no `ping`). Compat mode (--compat)
/// adds a JSON-RPC error code, escapes messages and answers ping, and changes nothing else.
/// Clients that first probe with `server/discover` (fastmcp, the MCP Python SDK's `Client`
/// in auto mode) wait out their 10 s discovery timeout in faithful mode: use --compat or the
/// client's legacy mode. Logs go to stderr.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub board: BoardArgs,
    /// Repair what standard MCP clients cannot accept (see above).
    #[arg(long)]
    pub compat: bool,
    /// Seed of the device identity.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print device events on stderr.
    #[arg(long)]
    pub verbose: bool,
}

/// JSON-RPC codes `--compat` adds, from the firmware's fixed message prefixes.
fn error_code(message: &str) -> i64 {
    use xiaozhi_sim::mcp::strings::*;
    if message.starts_with(ERR_METHOD_NOT_IMPLEMENTED) {
        -32601
    } else if [
        ERR_MISSING_PARAMS,
        ERR_MISSING_NAME,
        ERR_INVALID_ARGUMENTS,
        ERR_UNKNOWN_TOOL,
        ERR_MISSING_VALID_ARGUMENT,
        ERR_BELOW_MINIMUM,
        ERR_ABOVE_MAXIMUM,
    ]
    .iter()
    .any(|p| message.starts_with(p))
    {
        -32602
    } else {
        -32603
    }
}

/// `--compat`: the firmware's `{"jsonrpc":"2.0","id":N,"error":{"message":"<raw>"}}` with a
/// `code` added and the message escaped; every other payload unchanged.
pub fn repair(payload: &[u8]) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
    const MID: &[u8] = b",\"error\":{\"message\":\"";
    const TAIL: &[u8] = b"\"}}";
    let Some(rest) = payload.strip_prefix(HEAD) else {
        return payload.to_vec();
    };
    let Some(mid) = rest.windows(MID.len()).position(|w| w == MID) else {
        return payload.to_vec();
    };
    let id = &rest[..mid];
    if id.is_empty() || !id.iter().all(|b| b.is_ascii_digit() || *b == b'-') {
        return payload.to_vec();
    }
    let Some(message) = rest[mid + MID.len()..].strip_suffix(TAIL) else {
        return payload.to_vec();
    };
    let message = String::from_utf8_lossy(message);
    let mut out = HEAD.to_vec();
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(error_code(&message).to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    out.extend_from_slice(serde_json::Value::String(message.into_owned()).to_string().as_bytes());
    out.extend_from_slice(b"}}");
    out
}

/// `--compat`: the reply to a `ping` request, or None for anything else.
pub fn ping_reply(line: &[u8]) -> Option<Vec<u8>> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    if v.get("method")?.as_str()? != "ping" {
        return None;
    }
    let id = v.get("id")?;
    Some(
        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
            .to_string()
            .into_bytes(),
    )
}

struct Stdio {
    device: Device,
    compat: bool,
    verbose: bool,
    out: std::io::Stdout,
}

impl Stdio {
    fn flush_outputs(&mut self) -> std::io::Result<()> {
        let mut lock = self.out.lock();
        while let Some(out) = self.device.poll_output() {
            if let Output::Mcp { payload, .. } = out {
                let bytes = if self.compat { repair(&payload) } else { payload };
                lock.write_all(&bytes)?;
                lock.write_all(b"\n")?;
            }
        }
        lock.flush()?;
        drop(lock);
        let events = self.device.drain_events();
        if self.verbose {
            for e in events {
                crate::errln!("{e}");
            }
        }
        Ok(())
    }

    fn write_line(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut lock = self.out.lock();
        lock.write_all(bytes)?;
        lock.write_all(b"\n")?;
        lock.flush()
    }
}

pub fn run(opts: &Args) -> Result<bool> {
    let spec = opts.board.load()?;
    let mut device = Device::new(spec, WorldSpec::conformance(), opts.seed);
    device.set_trace(opts.verbose);
    // Boot in virtual time (no point in making a client wait for the boot).
    let mut h = Harness::new(device);
    h.power_on();
    for _ in 0..100 {
        if h.device.is_running() && h.run_until_idle().is_ok() {
            break;
        }
        h.sleep(SimDuration::from_millis(100));
    }
    let mut io = Stdio {
        device: h.device,
        compat: opts.compat,
        verbose: opts.verbose,
        out: std::io::stdout(),
    };
    io.device.drain_events();
    while io.device.poll_output().is_some() {}
    crate::errln!(
        "xiaozhi-twin stdio: {} ready ({} mode); one JSON-RPC message per line on stdin",
        io.device.spec().name,
        if opts.compat { "compat" } else { "faithful" }
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let clock = Clock::new(io.device.now());
        let mut stdin = BoundedLines::new(tokio::io::BufReader::new(tokio::io::stdin()), MAX_LINE);
        loop {
            io.device.run_until(clock.now());
            io.flush_outputs()?;
            let sleep = io.device.poll_timeout().map(|t| clock.instant(t));
            tokio::select! {
                line = stdin.next_line() => {
                    let line = match line? {
                        None => break,
                        Some(Line::Whole(line)) => line,
                        Some(Line::TooLong { bytes }) => {
                            crate::errln!(
                                "xiaozhi-twin stdio: a message of {bytes} bytes was dropped unread (more than {MAX_LINE} bytes: larger than any board's heap)"
                            );
                            continue;
                        }
                    };
                    if line.is_empty() {
                        continue;
                    }
                    if opts.compat
                        && let Some(reply) = ping_reply(&line) {
                            io.write_line(&reply)?;
                            continue;
                        }
                    let read = io.device.handle(clock.now(), Input::Mcp(&line));
                    if matches!(read.receipt, Some(Receipt::NotRunning)) {
                        crate::errln!("xiaozhi-twin stdio: the device is rebooting; the message was lost (as on the device)");
                    }
                }
                _ = async { match sleep { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {}
            }
        }
        // stdin closed: let queued work finish (in virtual time) so no reply is cut off.
        let mut h = Harness::new(io.device);
        let _ = h.run_until_idle();
        io.device = h.device;
        io.flush_outputs()?;
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repair_adds_a_code_and_escapes_the_message() {
        let faithful = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"message\":\"Unknown tool: a\"b\"}}";
        assert!(serde_json::from_slice::<serde_json::Value>(faithful).is_err());
        let fixed = repair(faithful);
        let v: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        assert_eq!(v["error"]["code"], -32602);
        assert_eq!(v["error"]["message"], "Unknown tool: a\"b");
        assert_eq!(v["id"], 7);
        let m = repair(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"Method not implemented: ping\"}}");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&m).unwrap()["error"]["code"],
            -32601
        );
        let ok = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
        assert_eq!(repair(ok), ok.to_vec());
    }

    #[test]
    fn ping_is_answered_only_for_ping_requests() {
        let r = ping_reply(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap();
        assert_eq!(r, br#"{"jsonrpc":"2.0","id":"a","result":{}}"#.to_vec());
        assert!(ping_reply(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_none());
        assert!(ping_reply(b"not json").is_none());
    }
}
