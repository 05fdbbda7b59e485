//! The backend's OTA endpoint (`backend --ota ADDR`): answers a device's activation request as
//! xiaozhi-esp32-server's `ota_handler.py` does (the answer itself is the sim's
//! [`xiaozhi_sim::backend::ota::answer`]): an `mqtt` block when the backend runs its MQTT
//! gateway, else a `websocket` block. Served by axum, on any path: a POST is a device's
//! activation request, anything else gets `handle_get`'s line.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tokio::sync::watch;
use xiaozhi_sim::backend::ota::{OtaConfig, answer};

/// The largest body read (a system info JSON is about 1 KiB).
const MAX_BODY: usize = 64 * 1024;

/// What every request sees: the configuration and whether to log.
struct Ota {
    config: OtaConfig,
    verbose: bool,
}

/// Answers activation requests until `stop` turns true.
pub async fn serve_ota(listener: TcpListener, config: OtaConfig, verbose: bool, mut stop: watch::Receiver<bool>) {
    let app = Router::new()
        .fallback(request)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(Ota { config, verbose }));
    let service = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    let _ = axum::serve(listener, service)
        .with_graceful_shutdown(async move {
            let _ = stop.changed().await;
        })
        .await;
}

/// One request and its answer.
async fn request(
    State(ota): State<Arc<Ota>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let (kind, text) = if method == Method::POST {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        ("application/json", answer(&ota.config, &headers, &body, now_ms))
    } else {
        // `handle_get`: a line that says what a device would be sent.
        let url = &ota.config.websocket_url;
        (
            "text/plain",
            format!("OTA接口运行正常，向设备发送的websocket地址是：{url}"),
        )
    };
    if ota.verbose {
        crate::errln!("backend: OTA {peer}: {method} {uri} → {text}");
    }
    (
        [(header::CONTENT_TYPE, kind), (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")],
        text,
    )
}
