//! A device and a backend session joined by an in-memory "socket" in virtual time: the whole
//! WebSocket exchange (handshake, hellos, MCP both ways, closes) without the network, so
//! personalities can be tested deterministically. The live version of the same pairing runs over
//! real sockets in the binary.

use std::sync::Arc;

use crate::backend::{Action, BackendSpec, Session, SessionReport};
use crate::device::{Device, Output};
use crate::time::SimTime;

/// The pairing never came to rest: device and backend kept answering each other (more than
/// [`MAX_OUTPUTS`] frames without a pause, or [`MAX_STEPS`] timer steps before the target time).
/// A modelling bug, reported like [`crate::harness::NeverIdle`] instead of stopping quietly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the device and the backend never came to rest: {0}")]
pub struct NeverRests(pub &'static str);

/// Frames moved in one pump before the pairing counts as runaway.
pub const MAX_OUTPUTS: usize = 10_000;
/// Timer steps in one `run_until` before the pairing counts as runaway.
pub const MAX_STEPS: usize = 10_000_000;

/// Device ↔ backend in one clock.
pub struct Loopback {
    /// The device side of the pairing.
    pub device: Device,
    spec: Arc<BackendSpec>,
    session: Option<Session>,
    finished: Vec<SessionReport>,
    connections: u64,
}

/// The handshake headers of a request as the server reads them.
pub fn request_headers(request: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(request)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(": ").map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

impl Loopback {
    /// Pairs `device` with a backend of `spec`; no connection yet.
    pub fn new(device: Device, spec: Arc<BackendSpec>) -> Self {
        Loopback {
            device,
            spec,
            session: None,
            finished: Vec::new(),
            connections: 0,
        }
    }

    /// The device's clock (the pairing's only clock).
    pub fn now(&self) -> SimTime {
        self.device.now()
    }

    /// The backend session of the live connection, if any.
    pub fn session(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    /// Reports of every connection so far (closed ones first, then the live one).
    pub fn reports(&self) -> Vec<SessionReport> {
        let mut all = self.finished.clone();
        all.extend(self.session.as_ref().map(Session::report));
        all
    }

    fn next_deadline(&self) -> Option<SimTime> {
        let d = self.device.poll_timeout();
        let b = self.session.as_ref().and_then(Session::poll_timeout);
        d.into_iter().chain(b).min()
    }

    /// Runs both sides until `t`.
    pub fn run_until(&mut self, t: SimTime) -> Result<(), NeverRests> {
        // Every step moves a deadline forward; the cap only guards against a modelling bug.
        let mut rested = false;
        for _ in 0..MAX_STEPS {
            self.pump()?;
            let Some(d) = self.next_deadline() else {
                rested = true;
                break;
            };
            if d > t {
                rested = true;
                break;
            }
            self.device.run_until(d);
            if let Some(s) = self.session.as_mut() {
                s.handle_timeout(d);
            }
            self.apply();
        }
        if !rested {
            return Err(NeverRests("a deadline at or before the target time after every step"));
        }
        self.device.run_until(t);
        self.pump()
    }

    /// Moves every pending device output to the backend and back until both are quiet.
    fn pump(&mut self) -> Result<(), NeverRests> {
        for _ in 0..MAX_OUTPUTS {
            let Some(out) = self.device.poll_output() else {
                return Ok(());
            };
            let now = self.now();
            match out {
                Output::WsOpen { request, .. } => {
                    if let Some(mut old) = self.session.take() {
                        old.handle_closed(now);
                        self.finished.push(old.report());
                    }
                    self.connections += 1;
                    let headers = request_headers(&request);
                    self.session = Some(Session::accept(self.spec.clone(), now, &headers, self.connections));
                    self.device.handle_ws_open_result(now, true);
                    self.apply();
                }
                Output::WsText { text, .. } => {
                    if let Some(s) = self.session.as_mut() {
                        s.handle_text(now, &String::from_utf8_lossy(&text));
                    }
                    self.apply();
                }
                Output::WsClose { .. } => {
                    if let Some(mut s) = self.session.take() {
                        s.handle_closed(now);
                        self.finished.push(s.report());
                    }
                }
                Output::WsBinary { frame, .. } => {
                    if let Some(s) = self.session.as_mut() {
                        s.handle_binary(now, &frame);
                    }
                    self.apply();
                }
                Output::Mcp { .. } | Output::Control { .. } => {}
            }
        }
        Err(NeverRests("the device kept producing output"))
    }

    /// Takes every action the session has decided, in order.
    fn apply(&mut self) {
        let now = self.now();
        while let Some(a) = self.session.as_mut().and_then(Session::poll_action) {
            match a {
                Action::Send(text) => {
                    self.device.handle_ws_text(now, text.as_bytes());
                }
                Action::Binary(frame) => self.device.handle_ws_binary(now, &frame),
                Action::Close => {
                    self.device.handle_ws_closed(now);
                    if let Some(mut s) = self.session.take() {
                        s.handle_closed(now);
                        self.finished.push(s.report());
                    }
                }
            }
        }
    }

    /// The backend calls a tool (as its LLM decided).
    pub fn call(&mut self, tool: &str, args: serde_json::Value) {
        let now = self.now();
        if let Some(s) = self.session.as_mut() {
            s.call(now, tool, args);
        }
        self.apply();
    }
}
