//! `WorldSpec`: the environment a simulated device lives in (docs/reference/architecture.md §4 "Worlds"): Wi-Fi,
//! which HTTP hosts answer and how, the OTA outcome, boot timing, room acoustics.
//!
//! Mirrors nothing in the firmware: it stands in for the network and the room. The conformance
//! world of the recorded transcripts is [`WorldSpec::conformance`]. Knows nothing about devices.

use serde::Deserialize;

use crate::time::SimDuration;

/// The environment, as data.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorldSpec {
    /// The station interface the board reports.
    pub wifi: WifiSpec,
    /// Which HTTP hosts answer and how.
    pub http: HttpSpec,
    /// The outcome of a firmware upgrade.
    pub ota: OtaSpec,
    /// Time from power-on / `esp_restart` until the application is initialised and MCP-capable.
    /// The recorder used 0; a real board takes seconds (docs/reference/firmware.md §11.3).
    #[serde(with = "duration_text")]
    pub boot_time: SimDuration,
    /// The listening room for acoustic checks.
    pub room: RoomSpec,
    /// Board-specific tasks (otto-robot's action task) run. The conformance recorder never ran
    /// them, so its otto stays `idle` whatever is queued.
    pub board_tasks_run: bool,
    /// The `websocket` object of the OTA answer: when present the device uses the WebSocket
    /// protocol (channel opened on user action); otherwise the recorder's direct feed.
    pub websocket: Option<WsConfig>,
    /// The `mqtt` block of the OTA answer: when present the device uses MQTT + UDP, even beside
    /// a `websocket` block (`application.cc:502-508`; docs/reference/mqtt.md §1).
    pub mqtt: Option<crate::provisioning::MqttBlock>,
    /// The display of the conformance recorder: a host build whose `SnapshotToJpeg` stub made
    /// `16 + quality × 7 / 80` bytes (the transcripts log that size). Only
    /// [`WorldSpec::conformance`] has it; every other world snapshots the drawn screen.
    #[serde(skip)]
    pub snapshot_stub: bool,
}

/// Station interface facts (`WifiManager`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WifiSpec {
    /// SSID of the joined access point (system info `board.ssid`).
    pub ssid: String,
    /// Received signal strength, dBm (system info `board.rssi`).
    pub rssi: i32,
    /// Wi-Fi channel (system info `board.channel`).
    pub channel: u32,
    /// Station IPv4 address (system info `board.ip`).
    pub ip: String,
    /// `false` puts the board in Wi-Fi config mode (no ssid/rssi/ip in system info).
    pub connected: bool,
}

/// What HTTP requests meet. Rules are tried in order; the first whose `url_prefix` matches wins.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSpec {
    /// Rules in match order.
    pub hosts: Vec<HttpRule>,
    /// How long a failed open takes when no rule matches (connect timeout, DNS failure…).
    #[serde(with = "duration_text")]
    pub unreachable_after: SimDuration,
}

/// One HTTP host rule: a URL prefix and the answer it gets.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpRule {
    /// The rule matches every URL that starts with these bytes.
    pub url_prefix: String,
    /// HTTP status code of the answer (200 by default).
    #[serde(default = "ok_status")]
    pub status: i32,
    /// Response body.
    #[serde(default)]
    pub body: String,
    /// Response body as base64 (binary answers such as a PNG for `preview_image`); when given it
    /// is the body and `body` is not used.
    #[serde(default, deserialize_with = "base64_body")]
    pub body_base64: Option<Vec<u8>>,
    /// Time until the answer arrives (0 by default).
    #[serde(default, with = "duration_text")]
    pub latency: SimDuration,
}

fn ok_status() -> i32 {
    200
}

fn base64_body<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    use base64::Engine as _;
    let text = String::deserialize(d)?;
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("body_base64 is not base64: {e}")))
}

/// The outcome of `Ota::Upgrade`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OtaSpec {
    /// The upgrade completes and the device reboots into the new image; otherwise it fails and carries on.
    pub succeeds: bool,
    /// Download + flash time (after the firmware's own delays).
    #[serde(with = "duration_text")]
    pub download_time: SimDuration,
}

impl Default for OtaSpec {
    fn default() -> Self {
        OtaSpec {
            succeeds: false,
            download_time: SimDuration::ZERO,
        }
    }
}

/// The listening room (docs/reference/acoustics.md §4).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoomSpec {
    /// Ambient level, dBA (WHO Table 4.1 dwelling indoors: 35).
    pub ambient_dba: f64,
    /// Listener distance on axis, metres.
    pub listener_distance_m: f64,
    /// Audibility margin over ambient, dB.
    pub margin_db: f64,
}

impl Default for RoomSpec {
    fn default() -> Self {
        RoomSpec {
            ambient_dba: 35.0,
            listener_distance_m: 0.5,
            margin_db: 0.0,
        }
    }
}

impl RoomSpec {
    /// Ambient -20..=140 dBA, the listener 1 cm..=100 m away, a margin of -60..=60 dB.
    pub fn check(&self) -> Result<(), (String, String)> {
        use crate::spec::within;
        within(self.ambient_dba, -20.0, 140.0, "dBA").map_err(|m| ("ambient_dba".to_string(), m))?;
        within(self.listener_distance_m, 0.01, 100.0, "m").map_err(|m| ("listener_distance_m".to_string(), m))?;
        within(self.margin_db, -60.0, 60.0, "dB").map_err(|m| ("margin_db".to_string(), m))
    }
}

impl Default for WifiSpec {
    fn default() -> Self {
        WifiSpec {
            ssid: "twin-ssid".into(),
            rssi: -50,
            channel: 6,
            ip: "192.168.4.2".into(),
            connected: true,
        }
    }
}

impl Default for WorldSpec {
    /// The conformance world, with a real display (what a scenario's `world:` starts from).
    fn default() -> Self {
        WorldSpec {
            snapshot_stub: false,
            ..WorldSpec::conformance()
        }
    }
}

/// The WebSocket settings the OTA server hands out (`websocket/url`, `token`, `version` in NVS).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsConfig {
    /// Server URL (`websocket/url`), `ws://` or `wss://`.
    pub url: String,
    /// Access token (`websocket/token`); sent as `Authorization` when non-empty.
    #[serde(default)]
    pub token: String,
    /// `websocket/version`, sent as `Protocol-Version` (0 means 1).
    #[serde(default)]
    pub version: i32,
}

/// The outcome of one simulated HTTP open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpOutcome {
    /// `Open` failed (refused, DNS, timeout) after this long.
    Unreachable {
        /// Time until the open fails.
        after: SimDuration,
    },
    /// Connected; the server answers with a status and body after `latency`.
    Answered {
        /// HTTP status code.
        status: i32,
        /// Response body.
        body: Vec<u8>,
        /// Time from the open until the answer.
        latency: SimDuration,
    },
}

impl WorldSpec {
    /// The world the conformance transcripts were recorded in: SSID `twin-ssid`, RSSI −50, no
    /// HTTP host reachable (every open fails at once), every OTA fails, instant boots.
    pub fn conformance() -> Self {
        WorldSpec {
            wifi: WifiSpec::default(),
            http: HttpSpec::default(),
            ota: OtaSpec::default(),
            boot_time: SimDuration::ZERO,
            room: RoomSpec::default(),
            board_tasks_run: false,
            websocket: None,
            mqtt: None,
            snapshot_stub: true,
        }
    }

    /// The conformance world with the board's own tasks running (what a real board does; the
    /// recorder never ran them).
    pub fn with_board_tasks() -> Self {
        WorldSpec {
            board_tasks_run: true,
            snapshot_stub: false,
            ..WorldSpec::conformance()
        }
    }

    /// The world of a device that dials a backend (`connect`, `fleet`, `run --wire` without a
    /// world of its own): [`WorldSpec::with_board_tasks`] with these WebSocket settings.
    pub fn dialling(websocket: WsConfig) -> Self {
        WorldSpec {
            websocket: Some(websocket),
            ..WorldSpec::with_board_tasks()
        }
    }

    /// The world of a device an OTA answer sent to MQTT: [`WorldSpec::with_board_tasks`] with
    /// this `mqtt` block.
    pub fn over_mqtt(block: crate::provisioning::MqttBlock) -> Self {
        WorldSpec {
            mqtt: Some(block),
            ..WorldSpec::with_board_tasks()
        }
    }

    /// The room's quantities are finite and possible: the field's dotted path and why not
    /// (a scenario's `world:`, `render --distance`/`--ambient`).
    pub fn check(&self) -> Result<(), (String, String)> {
        self.room.check().map_err(|(f, m)| (format!("room.{f}"), m))
    }

    /// What an HTTP open of `url` meets.
    pub fn http_open(&self, url: &[u8]) -> HttpOutcome {
        for rule in &self.http.hosts {
            if url.starts_with(rule.url_prefix.as_bytes()) {
                return HttpOutcome::Answered {
                    status: rule.status,
                    body: rule
                        .body_base64
                        .clone()
                        .unwrap_or_else(|| rule.body.as_bytes().to_vec()),
                    latency: rule.latency,
                };
            }
        }
        HttpOutcome::Unreachable {
            after: self.http.unreachable_after,
        }
    }
}

/// Serde helper: durations written with units (`1500ms`, `2s`).
pub mod duration_text {
    use serde::{Deserialize, Deserializer};

    use crate::time::{SimDuration, parse_duration};

    /// Parses a duration string with units (`1500ms`, `2s`) into a `SimDuration`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SimDuration, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map_err(serde::de::Error::custom)
    }
}
