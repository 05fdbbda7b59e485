//! `xiaozhi-twin console`: the twin live in a browser (docs/console.md). One device runs in real
//! time on the live driver (`crate::live`), dialling the built-in backend on a loopback port (or
//! a server given with `--url`); a companion (`companion.rs`) carries the page's actions to the
//! device and the device's state, screen, sound and evidence to the page; `web.rs` serves the
//! page, its WebSocket and the HTTP API with axum.

pub mod backend;
pub mod companion;
pub mod web;

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::script::Script;
use xiaozhi_sim::board::BoardSpec;
use xiaozhi_sim::device::Device;
use xiaozhi_sim::time::SimTime;
use xiaozhi_sim::world::{WorldSpec, WsConfig};

use crate::live::{LiveOptions, Wake, run_device};
use backend::Running;
pub use backend::{Backend, Server, Wire};
pub use companion::Choices;
use companion::{Console, Hub};

/// The built-in backend's turns in the console: the first utterance is answered at the volume
/// the device has; the second gets the seed article's call (`set_volume 40`, then the readback)
/// and an answer at the new volume, so a person hears the drop the record reports. (Within one
/// turn the backend sends its calls while its speech is still on the way, so a call placed
/// after a sentence lands before that sentence plays.)
pub const CONSOLE_SCRIPT: &str = "\
await utterance
speak \"你好，我在听。这是现在的音量。\" for 3s
await utterance
call self.audio_speaker.set_volume {\"volume\": 40}
call self.get_device_status
speak \"好的，音量已经调到四十了，现在听起来小一些。\" for 3s
repeat
";

/// What the console runs.
pub struct Setup {
    pub board: std::sync::Arc<BoardSpec>,
    pub seed: u64,
    /// Where the page is served.
    pub listen: String,
    /// The backend the first board dials.
    pub backend: Backend,
    /// The built-in backend's script on every connection.
    pub script: Script,
    /// The backends the page may switch to.
    pub choices: Choices,
    /// Stop after this long (None: until Ctrl-C).
    pub duration: Option<Duration>,
}

/// The board as the page draws its controls, and the backend it dials.
fn board_json(spec: &BoardSpec, backend: &Backend) -> Value {
    json!({
        "backend": backend.json(),
        "name": spec.name,
        "firmware": spec.firmware.version,
        "display": format!("{:?}", spec.display.kind),
        "width": spec.display.width,
        "height": spec.display.height,
        "buttons": spec.buttons.iter().map(|b| json!({"name": b.name})).collect::<Vec<_>>(),
        "output_rate": spec.audio.output_sample_rate,
        "faults": web::chain_faults().map(|f| f.name()).collect::<Vec<_>>(),
    })
}

/// A freshly flashed `board`, powered on, that dials the URL or what the OTA answer gives
/// (`crate::activation::activate_device`: one HTTP request, the answer's NVS writes kept).
fn flash(board: &std::sync::Arc<BoardSpec>, dial: &Server, seed: u64) -> Result<Device> {
    let (world, nvs) = match dial {
        Server::Url(url) => (
            WorldSpec::dialling(WsConfig {
                url: url.clone(),
                token: String::new(),
                version: 1,
            }),
            None,
        ),
        Server::Ota(url) => crate::activation::activate_device(&board.clone().into(), seed, url)?,
        Server::Mqtt { endpoint, key } => {
            crate::activation::gateway_device(&board.clone().into(), seed, endpoint, key.as_deref())?
        }
    };
    let mut device = Device::new(board.clone(), world, seed);
    if let Some(nvs) = nvs {
        *device.nvs_mut() = nvs;
    }
    device.set_trace(true);
    device.power_on(SimTime::ZERO);
    Ok(device)
}

/// Runs the console until Ctrl-C or `duration`; a reflash from the page boots another board
/// (and starts another built-in backend when the page chose one).
pub async fn serve(setup: Setup) -> Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut running = Running::start(setup.backend.clone(), &setup.script, &stop_rx).await?;
    let hub = Hub::new(board_json(&setup.board, &running.backend), setup.choices.clone());
    let listener = TcpListener::bind(&setup.listen)
        .await
        .with_context(|| format!("--listen {}", setup.listen))?;
    let page = format!("http://{}/", listener.local_addr()?);
    let app = web::router(hub.clone());
    let mut web_stop = stop_rx.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = web_stop.changed().await;
            })
            .await;
    });
    let url = running.dial.text();
    crate::errln!("console: {page} (the device dials {url}; Ctrl-C stops)");
    let devices = async {
        let mut board = setup.board.clone();
        let mut left = setup.duration;
        loop {
            let started = std::time::Instant::now();
            let device = tokio::task::block_in_place(|| flash(&board, &running.dial, setup.seed))?;
            let (stop_device, stopped) = watch::channel(false);
            hub.reflashed(board_json(&board, &running.backend), &running.backend, stop_device);
            let live = LiveOptions {
                wake: Wake::Manual,
                duration: left,
                verbose: false,
                label: device.mac().to_string(),
                stop: Some(stopped),
                counters: None,
                script: None,
                record: false,
                companion: Some(Box::new(Console::new(hub.clone()))),
            };
            run_device(device, live).await?;
            // A reflash stopped it: the next board boots; else the run is over.
            let next = hub.reflash.lock().unwrap_or_else(|e| e.into_inner()).next.take();
            let Some((next_board, next_backend)) = next else {
                return Ok::<(), anyhow::Error>(());
            };
            board = next_board;
            if let Some(b) = next_backend.filter(|b| *b != running.backend) {
                // The old built-in backend stops as the new one starts; one that cannot start
                // is said on the page, and the board dials the old one again.
                match Running::start(b, &setup.script, &stop_rx).await {
                    Ok(r) => {
                        running = r;
                        hub.note(&format!("the device dials {}", running.dial.text()));
                    }
                    Err(e) => hub.note(&format!("the backend did not start: {e:#}")),
                }
            }
            left = left.map(|d| d.saturating_sub(started.elapsed()));
        }
    };
    let result = tokio::select! {
        r = devices => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    let _ = stop_tx.send(true);
    result
}
