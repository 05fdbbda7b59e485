//! The server the console's device dials, as the command line gives it and the page chooses it:
//! the built-in backend with a personality over a WebSocket or over MQTT + UDP (its gateway
//! stand-in, `crate::server::serve_mqtt`), or a real server given by `--url`, `--ota` or
//! `--mqtt`. The built-in one runs in this process on loopback ports of its own, and is started
//! again when the page asks for another personality or wire.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::script::Script;

use crate::over_wire::MqttSockets;

/// The wire between the device and the built-in backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Wire {
    /// The device's WebSocket straight to the backend.
    Websocket,
    /// MQTT for the JSON and UDP for the audio, through the backend's gateway stand-in (as
    /// xiaozhi-mqtt-gateway stands in front of xiaozhi-esp32-server).
    Mqtt,
}

impl Wire {
    pub fn name(self) -> &'static str {
        match self {
            Wire::Websocket => "websocket",
            Wire::Mqtt => "mqtt",
        }
    }

    pub fn named(name: &str) -> Option<Wire> {
        [Wire::Websocket, Wire::Mqtt].into_iter().find(|w| w.name() == name)
    }
}

/// The server the device dials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The built-in backend: a shipped personality's name or a personality file, over `wire`.
    BuiltIn { personality: String, wire: Wire },
    /// A server at an address: a real one, given on the command line.
    Server(Server),
}

/// Where a freshly flashed device goes: a server's address, in one of the three ways a board
/// can be pointed at one (the built-in backend, once started, is one too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// A WebSocket URL.
    Url(String),
    /// An OTA endpoint: its answer sends the device to a WebSocket or to MQTT + UDP (each flash
    /// activates again, as a freshly flashed board does).
    Ota(String),
    /// An MQTT gateway, configured as xiaozhi-esp32-server's OTA would hand it out, its password
    /// signed with the key if one is given.
    Mqtt { endpoint: String, key: Option<String> },
}

impl Backend {
    /// The backend in words.
    pub fn text(&self) -> String {
        match self {
            Backend::BuiltIn { personality, wire } => {
                format!("the built-in backend ({personality}) over {}", wire_text(*wire))
            }
            Backend::Server(Server::Url(u)) => format!("the server at {u}"),
            Backend::Server(Server::Ota(u)) => format!("the server the OTA at {u} names"),
            Backend::Server(Server::Mqtt { endpoint, .. }) => format!("the MQTT gateway at {endpoint} (UDP audio)"),
        }
    }

    /// The backend as the page shows it.
    pub fn json(&self) -> Value {
        match self {
            Backend::BuiltIn { personality, wire } => json!({
                "kind": "built-in", "personality": personality, "wire": wire.name(), "text": self.text(),
            }),
            Backend::Server(_) => json!({"kind": "server", "text": self.text()}),
        }
    }
}

fn wire_text(wire: Wire) -> &'static str {
    match wire {
        Wire::Websocket => "a WebSocket",
        Wire::Mqtt => "MQTT + UDP",
    }
}

impl Server {
    /// Where the device goes, in words.
    pub(super) fn text(&self) -> String {
        match self {
            Server::Url(u) => u.clone(),
            Server::Ota(u) => format!("what the OTA at {u} answers"),
            Server::Mqtt { endpoint, .. } => format!("mqtt://{endpoint} (UDP audio)"),
        }
    }
}

/// A backend in use: where the device dials it, and what stops the built-in one.
pub(super) struct Running {
    pub(super) backend: Backend,
    pub(super) dial: Server,
    stop: Option<watch::Sender<bool>>,
}

impl Running {
    /// Starts `backend` (the built-in one on loopback ports, with `script` on every connection;
    /// a real server is only named). `stop` ends the built-in one too.
    pub(super) async fn start(backend: Backend, script: &Script, stop: &watch::Receiver<bool>) -> Result<Running> {
        let (personality, wire) = match &backend {
            Backend::Server(server) => {
                return Ok(Running {
                    dial: server.clone(),
                    backend,
                    stop: None,
                });
            }
            Backend::BuiltIn { personality, wire } => (personality, *wire),
        };
        let spec = crate::server::load_personality(personality)?;
        let (own_tx, own_rx) = watch::channel(false);
        // The console's stop ends this backend too.
        let mut outer = stop.clone();
        let own = own_tx.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = outer.changed() => { let _ = own.send(true); }
                _ = own.closed() => {}
            }
        });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("the built-in backend's port")?;
        let ws = format!("ws://{}/xiaozhi/v1/", listener.local_addr()?);
        let server = crate::server::Server::new(spec, script.clone(), false, false);
        tokio::spawn(crate::server::serve(listener, server.clone(), own_rx.clone()));
        let dial = match wire {
            Wire::Websocket => Server::Url(ws),
            Wire::Mqtt => {
                let sockets = MqttSockets::loopback().await.context("the gateway's ports")?;
                let endpoint = sockets.endpoint()?;
                let gateway = sockets.wire(&ws, None, None, false, false)?;
                tokio::spawn(crate::server::serve_mqtt(
                    sockets.mqtt,
                    sockets.udp,
                    gateway,
                    server,
                    own_rx,
                ));
                Server::Mqtt { endpoint, key: None }
            }
        };
        Ok(Running {
            backend,
            dial,
            stop: Some(own_tx),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            let _ = stop.send(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_is_found_by_its_own_name_only() {
        for w in [Wire::Websocket, Wire::Mqtt] {
            assert_eq!(Wire::named(w.name()), Some(w));
        }
        assert_eq!(Wire::named("udp"), None);
    }
}
