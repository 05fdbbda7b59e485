//! The library's parts driven in-process, without spawning the binary: the live driver
//! (`xiaozhi_twin::live`) with a device against the built-in backend server on a loopback port,
//! a companion of the driver watching the frames, and an MCP fleet (`xiaozhi_twin::fleet::mcp`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use xiaozhi_sim::backend::Outcome;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::device::{Board, Device, MessageType};
use xiaozhi_sim::time::SimTime;
use xiaozhi_twin::fleet::mcp::{self, McpRun};
use xiaozhi_twin::fleet::{Transport, fleet_device, loopback_backend};
use xiaozhi_twin::live::{Companion, DeviceStats, LiveOptions, Seen, Wake, run_device};
use xiaozhi_twin::server::{Server, load_personality};

/// Text frames as a test companion saw them arrive: each one's `type` as the device read it,
/// and its bytes.
type Frames = Vec<(MessageType, String)>;

/// A companion of the driver that keeps the frames that arrived.
#[derive(Clone, Default)]
struct Arrived(Arc<Mutex<Frames>>);

impl Companion for Arrived {
    fn seen(&mut self, what: &Seen<'_>, _: &Device) {
        if let Seen::Received { text, read, .. } = what {
            let text = String::from_utf8_lossy(text).into_owned();
            self.0.lock().unwrap().push((read.message, text));
        }
    }
}

/// One device of `board` in the live driver against the built-in backend (xinnan-py) running
/// `script`, until the script is done (at most 20 s); the device, its stats and the backend.
fn drive(script: &str, watcher: Option<Arrived>) -> (Device, DeviceStats, Arc<Server>) {
    drive_over(script, watcher, Transport::Websocket)
}

/// [`drive`] over `transport`.
fn drive_over(script: &str, watcher: Option<Arrived>, transport: Transport) -> (Device, DeviceStats, Arc<Server>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let personality = load_personality("xinnan-py").unwrap();
        let server = Server::new(personality, Script::parse("test script", script).unwrap(), false, false);
        let (backend_stop_tx, backend_stop_rx) = watch::channel(false);
        let (target, serving) = loopback_backend(server.clone(), backend_stop_rx, transport, Default::default())
            .await
            .unwrap();
        let board = Board::new(xiaozhi_twin::boards::load("bread-compact-wifi").unwrap());
        let mut device = fleet_device(&board, &target, 7);
        device.set_trace(true);
        device.power_on(SimTime::ZERO);
        let (stop_tx, stop_rx) = watch::channel(false);
        let live = LiveOptions {
            wake: Wake::OnBoot,
            duration: Some(Duration::from_secs(20)),
            verbose: false,
            label: device.mac().to_string(),
            stop: Some(stop_rx),
            counters: None,
            script: None,
            record: true,
            companion: watcher.map(|w| Box::new(w) as Box<dyn Companion + Send>),
        };
        let running = tokio::spawn(run_device(device, live));
        let mut done = server.last_script_done();
        let _ = tokio::time::timeout(Duration::from_secs(20), async {
            while *done.borrow_and_update() < 1 {
                if done.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        // The backend closes first (its report ends `shutdown`), then the device stops.
        let _ = backend_stop_tx.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
        let _ = stop_tx.send(true);
        let (device, stats) = running.await.unwrap().unwrap();
        (device, stats, server)
    })
}

#[test]
fn the_live_driver_runs_a_backend_script_in_process_and_records_each_call_with_its_reply() {
    for transport in [Transport::Websocket, Transport::Mqtt] {
        script_in_process(transport);
    }
}

/// The script's calls, their replies and the device's states over `transport` (MQTT + UDP: the
/// gateway stand-in's MCP at CONNECT comes first, with ids of its own).
fn script_in_process(transport: Transport) {
    let (device, stats, server) = drive_over(
        "call self.get_device_status\ncall self.audio_speaker.set_volume {\"volume\": 30}\n",
        None,
        transport,
    );
    assert_eq!(
        (stats.connects, stats.connect_failures, stats.hellos),
        (1, 0, 1),
        "{stats:?}"
    );
    assert_eq!(device.snapshot().volume, Some(30));
    let calls: Vec<_> = stats.requests_in.iter().filter(|r| r.method == "tools/call").collect();
    let tools: Vec<_> = calls.iter().map(|r| r.tool.as_deref().unwrap_or_default()).collect();
    assert_eq!(
        tools,
        ["self.get_device_status", "self.audio_speaker.set_volume"],
        "{stats:?}"
    );
    assert_eq!(calls[1].arguments, Some(serde_json::json!({"volume": 30})));
    // Every call has its reply: the first with its id after it (a backend may reuse ids);
    // get_device_status answers the status, set_volume `true`.
    let replies: Vec<_> = calls
        .iter()
        .map(|call| {
            let reply = stats
                .replies_out
                .iter()
                .find(|(at, id, _)| *id == call.id && *at >= call.at_ms);
            reply.and_then(|r| r.2.clone()).unwrap_or_default()
        })
        .collect();
    assert!(replies[0].contains("\"audio_speaker\""), "{:?}", stats.replies_out);
    assert_eq!(replies[1], "true", "{:?}", stats.replies_out);
    // The device opened the channel (listen) and went through its states.
    assert!(
        stats.control_out.iter().any(|(_, t)| t.contains("\"listen\"")),
        "{stats:?}"
    );
    assert!(!stats.transitions.is_empty());
    // The backend saw the same two calls answered.
    let reports = server.take_reports();
    let answered = reports
        .iter()
        .flat_map(|r| &r.session.exchanges)
        .filter(|e| e.method == "tools/call" && matches!(e.outcome, Outcome::Replied))
        .count();
    assert_eq!(answered, 2);
}

#[test]
fn a_tts_sentence_that_says_hello_is_not_counted_as_a_hello() {
    let arrived = Arrived::default();
    let (device, stats, _) = drive(
        "speak \"hello\" for 500ms\ncall self.get_device_status\n",
        Some(arrived.clone()),
    );
    let frames = arrived.0.lock().unwrap().clone();
    // The sentence arrived, and its bytes say "hello" as the server's hello does...
    let sentence = frames
        .iter()
        .find(|(kind, text)| matches!(kind, MessageType::Tts(_)) && text.contains("\"hello\""));
    assert!(sentence.is_some(), "{frames:?}");
    assert!(
        device
            .speech_log()
            .sessions
            .iter()
            .any(|s| s.sentences.iter().any(|x| x.text == "hello"))
    );
    // ...but only the frame whose type is `hello` counts.
    let hellos = frames.iter().filter(|(kind, _)| *kind == MessageType::Hello).count();
    assert_eq!(hellos, 1, "{frames:?}");
    assert_eq!(stats.hellos, 1, "{stats:?}");
}

#[test]
fn an_mcp_fleet_runs_in_process_and_every_device_completes_its_script() {
    let personality = load_personality("xinnan-py").unwrap();
    let script = Script::parse(
        "test",
        "call self.get_device_status\ncall self.audio_speaker.set_volume {\"volume\": 40}\n",
    )
    .unwrap();
    let run = McpRun {
        spec: xiaozhi_twin::boards::load("bread-compact-wifi").unwrap(),
        devices: 3,
        external: None,
        transport: Transport::Websocket,
        gateway: Default::default(),
        personality,
        script,
        duration: Duration::from_secs(30),
        stagger: Duration::from_millis(2),
        seed: 1,
        open_files_limit: 0,
    };
    let s = mcp::run(&run).unwrap();
    // Each device: initialize and tools/list, then the script's two calls.
    assert_eq!(
        (s.hellos_completed, s.devices_done, s.mcp_round_trips),
        (3, 3, 3 * 4),
        "{s:?}"
    );
    assert_eq!((s.unanswered, s.drops, s.connect_failures), (0, 0, 0), "{s:?}");
    assert!(s.all_done());
    assert!(s.latency_p50_ms <= s.latency_p99_ms);
}
