//! The console's HTTP side (axum): the page, its live channel, and an API for the same actions
//! (docs/console.md, "HTTP API").
//!
//! * `GET /`: the page (one file, embedded in the binary; no CDN).
//! * `GET /api/live`: a WebSocket. Down: JSON events (`status`, `screen`, `call`, `reply`,
//!   `heard`, `line`, and `hello` first with everything so far) and binary chunks of what the
//!   listener hears. Up: JSON commands (`{"cmd":"click","button":"boot"}`, `down`, `up`,
//!   `type`, `fault`) and binary 16 kHz 16-bit little-endian microphone samples.
//! * `GET /api/state`: the board, status, calls, levels and the last lines, as JSON.
//! * `GET /api/screen.png`: the screen now (404 on a board without a display).
//! * `POST /api/button/{name}?action=click|down|up`, `POST /api/say` (a WAV body),
//!   `POST /api/type` (the text), `POST /api/fault/{name}?on=true|false`.
//! * `GET /api/boards` (the boards, firmware versions and backends), `POST
//!   /api/board?board=ID&firmware=V&backend=built-in|server&personality=P&wire=websocket|mqtt`
//!   (reflash: the twin boots the new board; the backend's fields, each optional, change it).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use xiaozhi_sim::audio::ChainFault;
use xiaozhi_sim::voice::codec::{MIC_RATE, resample_clip};

use super::backend::{Backend, Wire};
use super::companion::{Cmd, Hub, Msg};

/// The page: HTML, CSS and JavaScript in one file.
const PAGE: &str = include_str!("page.html");

/// The most microphone audio one upload may carry (a minute at 16 kHz, 16-bit).
const MAX_SAY_BYTES: usize = 16 * 1024 * 1024;

/// The console's routes.
pub fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/api/live", get(live))
        .route("/api/state", get(state))
        .route("/api/screen.png", get(screen))
        .route("/api/button/{name}", post(button))
        .route("/api/say", post(say))
        .route("/api/type", post(typed))
        .route("/api/fault/{name}", post(fault))
        .route("/api/boards", get(boards))
        .route("/api/board", post(reflash))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_SAY_BYTES))
        .with_state(hub)
}

/// Everything a page shows when it opens (and again after a reflash).
pub(super) fn hello(hub: &Hub) -> Value {
    let view = hub.view();
    json!({
        "type": "hello",
        "board": view.board,
        "status": view.status,
        "screen_version": view.screen_version,
        "calls": view.calls,
        "heard": view.heard,
        "lines": view.lines,
    })
}

async fn state(State(hub): State<Arc<Hub>>) -> impl IntoResponse {
    axum::Json(hello(&hub))
}

async fn screen(State(hub): State<Arc<Hub>>) -> Response {
    match hub.view().screen.clone() {
        Some(png) => (
            [(header::CONTENT_TYPE, "image/png"), (header::CACHE_CONTROL, "no-store")],
            png.to_vec(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "this board has no display\n").into_response(),
    }
}

#[derive(Deserialize)]
struct ButtonQuery {
    action: Option<String>,
}

async fn button(State(hub): State<Arc<Hub>>, Path(name): Path<String>, Query(q): Query<ButtonQuery>) -> Response {
    let known = hub.view().board["buttons"]
        .as_array()
        .is_some_and(|b| b.iter().any(|x| x["name"] == name.as_str()));
    if !known {
        return (StatusCode::NOT_FOUND, format!("this board has no button `{name}`\n")).into_response();
    }
    let cmd = match q.action.as_deref().unwrap_or("click") {
        "click" => Cmd::Click(name),
        "down" => Cmd::Button { name, pressed: true },
        "up" => Cmd::Button { name, pressed: false },
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("action `{other}`: click, down or up\n"),
            )
                .into_response();
        }
    };
    send(&hub, cmd)
}

async fn say(State(hub): State<Arc<Hub>>, body: Bytes) -> Response {
    match crate::wav::parse_pcm(&body) {
        Ok((rate, pcm)) => send(&hub, Cmd::Say(resample_clip(&pcm, rate, MIC_RATE))),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e:#}\n")).into_response(),
    }
}

/// The longest typed line taken, in characters (a spoken request is a sentence).
const MAX_TYPED: usize = 2_000;

async fn typed(State(hub): State<Arc<Hub>>, body: String) -> Response {
    let text = body.trim();
    if text.chars().count() > MAX_TYPED {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a typed line is at most {MAX_TYPED} characters\n"),
        )
            .into_response();
    }
    send(&hub, Cmd::Type(text.to_string()))
}

/// The boards, firmware versions and backends the page can reflash to.
async fn boards(State(hub): State<Arc<Hub>>) -> impl IntoResponse {
    let mut ids: Vec<String> = crate::boards::shipped_ids().into_iter().map(str::to_string).collect();
    ids.extend(
        crate::boards::UPSTREAM
            .iter()
            .map(|(id, _, _)| format!("upstream/{id}")),
    );
    let firmware: Vec<&str> = xiaozhi_sim::firmware::tags().collect();
    axum::Json(json!({"boards": ids, "firmware": firmware, "backends": hub.choices.json()}))
}

/// A reflash: the board, and the backend's fields (each optional).
#[derive(Default, Deserialize)]
struct BoardQuery {
    board: String,
    firmware: Option<String>,
    backend: Option<String>,
    personality: Option<String>,
    wire: Option<String>,
}

async fn reflash(State(hub): State<Arc<Hub>>, Query(q): Query<BoardQuery>) -> Response {
    if let Err(e) = crate::boards::load_as(&q.board, q.firmware.as_deref()) {
        return (StatusCode::BAD_REQUEST, format!("{e:#}\n")).into_response();
    }
    let backend = match backend_asked(&hub, &q) {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    send(
        &hub,
        Cmd::Switch {
            board: q.board,
            firmware: q.firmware.filter(|f| !f.is_empty()),
            backend,
        },
    )
}

/// The backend a reflash asks for: `None` keeps the one in use. A field left out of a built-in
/// one is the one in use (or the console's first personality, and a WebSocket).
fn backend_asked(hub: &Hub, q: &BoardQuery) -> Result<Option<Backend>, String> {
    let built_in = match q.backend.as_deref().filter(|b| !b.is_empty()) {
        None if q.personality.is_none() && q.wire.is_none() => return Ok(None),
        None | Some("built-in") => true,
        Some("server") => false,
        Some(other) => return Err(format!("backend `{other}`: built-in or server")),
    };
    if !built_in {
        return hub.choices.server.clone().map(Some).ok_or_else(|| {
            "backend `server`: the console was started without one (--url, --ota or --mqtt)".to_string()
        });
    }
    let (now_personality, now_wire) = match hub.view().backend.clone() {
        Some(Backend::BuiltIn { personality, wire }) => (Some(personality), wire),
        _ => (hub.choices.personalities.first().cloned(), Wire::Websocket),
    };
    let asked = |field: &Option<String>| field.clone().filter(|s| !s.is_empty());
    let personality = asked(&q.personality).or(now_personality).unwrap_or_default();
    if !hub.choices.personalities.contains(&personality) {
        return Err(format!(
            "personality `{personality}`: {}",
            hub.choices.personalities.join(", ")
        ));
    }
    let wire = match asked(&q.wire) {
        Some(w) => Wire::named(&w).ok_or_else(|| format!("wire `{w}`: websocket or mqtt"))?,
        None => now_wire,
    };
    Ok(Some(Backend::BuiltIn { personality, wire }))
}

#[derive(Deserialize)]
struct FaultQuery {
    on: Option<bool>,
}

async fn fault(State(hub): State<Arc<Hub>>, Path(name): Path<String>, Query(q): Query<FaultQuery>) -> Response {
    match fault_named(&name) {
        Some(fault) => send(
            &hub,
            Cmd::Fault {
                fault,
                on: q.on.unwrap_or(true),
            },
        ),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "fault `{name}`: {}\n",
                chain_faults().map(|f| f.name()).collect::<Vec<_>>().join(", ")
            ),
        )
            .into_response(),
    }
}

/// The faults of the analog chain, which the page can toggle (`xiaozhi_sim::fault::Fault`'s own
/// list and names).
pub(super) fn chain_faults() -> impl Iterator<Item = ChainFault> {
    xiaozhi_sim::fault::Fault::ALL.into_iter().filter_map(|f| f.chain())
}

fn fault_named(name: &str) -> Option<ChainFault> {
    chain_faults().find(|f| f.name() == name)
}

fn send(hub: &Hub, cmd: Cmd) -> Response {
    match hub.cmds.send(cmd) {
        Ok(()) => (StatusCode::ACCEPTED, "ok\n").into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "the device has stopped\n").into_response(),
    }
}

async fn live(State(hub): State<Arc<Hub>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| page(socket, hub))
}

/// One open page: first everything so far, then every event; its commands and microphone go to
/// the device.
async fn page(mut socket: WebSocket, hub: Arc<Hub>) {
    let mut events = hub.events.subscribe();
    if socket
        .send(Message::Text(hello(&hub).to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(Msg::Text(t)) => {
                    if socket.send(Message::Text(t.as_ref().into())).await.is_err() {
                        return;
                    }
                }
                Ok(Msg::Audio(a)) => {
                    if socket.send(Message::Binary(a.to_vec().into())).await.is_err() {
                        return;
                    }
                }
                // A page too slow to keep up misses events; it is told, and goes on.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    let note = json!({"type": "lagged", "missed": n}).to_string();
                    if socket.send(Message::Text(note.into())).await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Binary(b))) => {
                    let pcm: Vec<i16> = b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect();
                    if !pcm.is_empty() {
                        let _ = hub.cmds.send(Cmd::Mic(pcm));
                    }
                }
                Some(Ok(Message::Text(t))) => {
                    if let Some(cmd) = command(&hub, &t) {
                        let _ = hub.cmds.send(cmd);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

/// A command the page sent as JSON; `None` for one it does not know.
fn command(hub: &Hub, text: &str) -> Option<Cmd> {
    let v: Value = serde_json::from_str(text).ok()?;
    let s = |k: &str| v[k].as_str().map(str::to_string);
    match v["cmd"].as_str()? {
        "click" => Some(Cmd::Click(s("button")?)),
        "down" => Some(Cmd::Button {
            name: s("button")?,
            pressed: true,
        }),
        "up" => Some(Cmd::Button {
            name: s("button")?,
            pressed: false,
        }),
        "type" => Some(Cmd::Type(s("text")?.chars().take(MAX_TYPED).collect())),
        "reflash" => {
            let q = BoardQuery {
                board: s("board")?,
                firmware: s("firmware").filter(|f| !f.is_empty()),
                backend: s("backend"),
                personality: s("personality"),
                wire: s("wire"),
            };
            // A backend the page cannot have is said on the page, and nothing is reflashed.
            match backend_asked(hub, &q) {
                Ok(backend) => Some(Cmd::Switch {
                    board: q.board,
                    firmware: q.firmware,
                    backend,
                }),
                Err(e) => {
                    hub.note(&format!("cannot reflash: {e}"));
                    None
                }
            }
        }
        "fault" => Some(Cmd::Fault {
            fault: fault_named(&s("fault")?)?,
            on: v["on"].as_bool().unwrap_or(true),
        }),
        _ => None,
    }
}
