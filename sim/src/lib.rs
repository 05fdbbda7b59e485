//! xiaozhi-sim — the deterministic, sans-IO twin of a xiaozhi-esp32 device, seen from its MCP
//! tool layer.
//!
//! Contract: the firmware's behaviour (`docs/reference/firmware.md`), byte for byte, quirks
//! included. The crate has no tokio, no wall clock, no threads and one seeded RNG (ChaCha8): the same board, inputs
//! and seed give the same bytes out. Time is virtual ([`time::SimTime`]) and is handed in by
//! whoever drives a [`device::Device`].
//!
//! **Start here**: [`device::Device`] is one board (`handle(now, Input)` in, `poll_*` out); a
//! [`harness::Harness`] drives one in virtual time; [`scenario::runner::run`] runs a scenario
//! file and builds its acceptance records.
//!
//! The map, by layer, one line per module (each module's own `//!` names the firmware file it
//! mirrors). Imports point one way inside every folder and the data layer reaches nothing
//! above it; `tests/tidy.rs` checks both, and that every file is named here.
//!
//! * **Foundations**
//!   * `time`: virtual time, durations with units, `vTaskDelay` ticks.
//!   * `trace`: trace events (past tense), typed: states, drop reasons, log records;
//!     `trace::lines`: the recorder's trace lines.
//!   * `spec`: loading data files with `file:line:column` errors, every mistake in one run.
//!   * `cjson`: the cJSON 1.7.19 dialect: lenient parse, case-insensitive lookup, printing;
//!     `cjson::number`: its numbers (`strtod`, plain integers).
//! * **Data, protocol and virtual hardware** (nothing here imports the device or a driver)
//!   * `board`: `BoardSpec`, what a board is, validated; `board::audio`: its audio facts;
//!     `board::builtin`: the built-in behaviours a board file can name; `board::button`: its
//!     buttons and the callbacks of their gestures; `board::by_firmware`: board facts by
//!     firmware tag; `board::target`: the SoC, flash and partition table; `board::upstream`:
//!     what a generated board records of its upstream build; `board::validate`: what serde
//!     cannot check (every physical quantity finite and in range).
//!   * `firmware`: the upstream tags and their behaviour switches (`firmware::state`: the
//!     device states and their transition table; `firmware::mqtt_rules`: where the
//!     MQTT + UDP protocol differs by tag); `world`: Wi-Fi, HTTP hosts,
//!     OTA, room, WebSocket config; `fault`: faults as data; `provisioning`: what an OTA
//!     answer sets up (the protocol it leads to, its NVS writes, the MQTT client's settings).
//!   * `mcp`: the MCP tool layer: `mcp::server` (`McpServer`, `ParseMessage`'s receive half,
//!     paging), `mcp::tool` (`McpTool`), `mcp::property` (`Property`, coercion),
//!     `mcp::strings` (every firmware string that reaches the wire).
//!   * `audio`: the acoustic chain: `audio::codec` (the `Family` trait and its table), one file
//!     per codec family (`audio::codec::no_audio`, `audio::codec::es8311` with `BoxAudioCodec`,
//!     `audio::codec::es8374`, `audio::codec::es8388`, `audio::codec::es8389`,
//!     `audio::codec::aw88298`, `audio::codec::adc_pdm`, `audio::codec::dummy`), `audio::chain` (DAC,
//!     amplifier, speaker), `audio::source` (what plays), `audio::render` (sample by sample to
//!     the listener), `audio::measure` (levels and verdicts).
//!   * `hw`: virtual hardware: `hw::nvs` (flash with the firmware's limits), `hw::backlight`
//!     (PWM fade), `hw::display` (classes and themes), `hw::screen` (what the display is told,
//!     in virtual time), `hw::layout` (the display classes' `SetupUI` layouts drawn with the
//!     board's fonts), `hw::picture` (the screen drawn: the panel a person sees, the snapshot
//!     tool's JPEG), `hw::camera`.
//!   * `lvgl`: what the screen draws with, as LVGL 9.5 draws it: `lvgl::font` (the firmware's
//!     fonts, 78/xiaozhi-fonts 2.0.0, read as LVGL reads them), `lvgl::emoji` (the colour emoji
//!     collections), `lvgl::canvas` (a 16-bit framebuffer blending as LVGL's renderer does).
//!   * `voice`: the voice channel's data: `voice::frame` (binary frames v1–v3), `voice::udp`
//!     (the MQTT protocol's AES-CTR datagrams and the hello's `udp` block), `voice::codec`
//!     (Opus, resampling), `voice::memo` (codec work shared by many devices), `voice::stream`
//!     (a device's codec stream, own or pooled), `voice::log` (what became of the speech),
//!     `voice::speak` (a backend's speaking side as data).
//! * **The device**: `device` (`Device`: `handle(now, Input)` in, `poll_*` out), and inside it:
//!   * `device::platform` (what survives a reboot, the outputs, `Board`), `device::incoming`
//!     (what a driver delivers, and what an incoming text was to the device, as its own parser
//!     read it), `device::io` (narrow views of the platform: the trace, what the playback, a
//!     transport and the board's objects touch), `device::output` (what leaves the device, the receipt of a payload), `device::url`,
//!     `device::listening`, `device::main_loop`, `device::task` (what the main
//!     task runs), `device::status` (status and system-info JSON), `device::catalogue` (tool
//!     registration), `device::otto` (otto-robot's controller), `device::button` (a button as
//!     the button component polls it), `device::user` (what the user does and hears: buttons, wake
//!     word, speech);
//!   * `device::protocol` (the protocol object per transport), `device::protocol::base` (the
//!     firmware's `Protocol` base class), `device::protocol::websocket` (its WebSocket
//!     transport), `device::protocol::mqtt` (its MQTT + UDP transport);
//!   * `device::audio` (output power and codec), `device::playback` (received speech to the
//!     codec), `device::heard` (speech windows measured as they play), `device::mic` (the
//!     microphone and its send queue);
//!   * `device::peripherals` (the board's objects and their tool callbacks), `device::builtin`
//!     (the built-in behaviours' callbacks), `device::upgrade` (the firmware upgrade flow);
//!   * `device::application` (`Application`, the hub of one boot),
//!     `device::application::conversation` (its voice interaction) and
//!     `device::application::inbound` (the receive tasks and `OnIncomingJson`); its buttons'
//!     callbacks are `device::button`'s.
//! * **Drivers** (on the device)
//!   * `harness`: the owner of virtual time for offline runs; `replay`: the conformance replay
//!     format and its runner; `loopback`: a device and a backend connection in one clock.
//!   * `scenario`: scenario files (`scenario::step_kind`: a step's kind); `scenario::runner`
//!     and `scenario::steps` (running them in virtual time; `scenario::press`: the button
//!     steps), `scenario::runner_voice` (the runner's voice bookkeeping), `scenario::expect`
//!     (the `expect:` data), `scenario::limits` (what a step may ask of the sound: length, tone),
//!     `scenario::check` (the one expectation checker; its sound, voice and frames in
//!     `scenario::sound_checks`),
//!     `scenario::acceptance` (the one record builder), `scenario::record` (records, reports,
//!     traces), `scenario::reply` (reading replies), `scenario::discovery` (every
//!     `tools/list` page), `scenario::wire_plan` (a scenario as a backend's script),
//!     `scenario::over_wire` (judgements from what the backend saw over real sockets).
//!   * `backend`: a backend as MCP client, one sans-IO `Session` per connection;
//!     `backend::spec` (personalities as data), `backend::script` (the script language),
//!     `backend::scripted` (a script and its faults run sans-IO), `backend::voice_side` (its ear and
//!     voice), `backend::vad` (the server's end-of-utterance rule and text rules),
//!     `backend::gateway` (xiaozhi-mqtt-gateway's MQTT + UDP side in front of a backend),
//!     `backend::ota` (the OTA answer of xiaozhi-esp32-server: `mqtt` or `websocket` block),
//!     `backend::wire` (frame types, `abort`, Python-style JSON), `backend::report` (what a
//!     session records: exchanges, tools, phase), `backend::result` (what a tool result becomes
//!     as the personality says).
//!   * `audit`: what a backend said against what the device did; `audit::battery` (requests
//!     and how to judge them, as data), `audit::condition` (the quantities a battery watches
//!     and its conditions on them), `audit::clips` (the recordings that say them),
//!     `audit::llm` (the built-in backend's stand-in LLM and its behaviours, as data),
//!     `audit::trial` (one trial in virtual time), `audit::verdict` (a request's facts and its
//!     verdict), `audit::score` (the scorecard, Wilson intervals).
//!   * `bounds`: the bound properties of every integer parameter (cargo feature `bounds`);
//!     `bounds::oracle`: what the firmware must answer, from the docs; `bounds::generate`: the
//!     generators; `bounds::checker`: one case on a booted board.

#![warn(missing_docs, unreachable_pub)]

pub mod audio;
pub mod audit;
pub mod backend;
pub mod board;
#[cfg(feature = "bounds")]
pub mod bounds;
pub mod cjson;
pub mod device;
pub mod fault;
pub mod firmware;
pub mod harness;
pub mod hw;
pub mod loopback;
pub mod lvgl;
pub mod mcp;
pub mod provisioning;
pub mod replay;
pub mod scenario;
pub mod spec;
pub mod time;
pub mod trace;
pub mod voice;
pub mod world;
