//! The backend's OTA endpoint (`backend --ota ADDR`): answers a device's activation request as
//! xiaozhi-esp32-server's `ota_handler.py` does (the answer itself is the sim's
//! [`xiaozhi_sim::backend::ota::answer`]): an `mqtt` block when the backend runs its MQTT
//! gateway, else a `websocket` block. One request per connection; the request line and headers
//! are read with httparse.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use xiaozhi_sim::backend::ota::{OtaConfig, answer};

use crate::live::read_http_head;

/// The largest body read (a system info JSON is about 1 KiB).
const MAX_BODY: usize = 64 * 1024;

/// Answers activation requests until `stop` turns true.
pub async fn serve_ota(listener: TcpListener, config: OtaConfig, verbose: bool, mut stop: watch::Receiver<bool>) {
    let config = Arc::new(config);
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let config = config.clone();
                    tokio::spawn(async move {
                        match tokio::time::timeout(Duration::from_secs(10), request(stream, &config)).await {
                            Ok(Ok(line)) if verbose => crate::errln!("backend: OTA {peer}: {line}"),
                            Ok(Err(e)) if verbose => crate::errln!("backend: OTA {peer}: {e:#}"),
                            _ => {}
                        }
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            _ = stop.changed() => return,
        }
    }
}

/// One request and its answer; what was asked and answered, for the log.
async fn request(mut stream: TcpStream, config: &OtaConfig) -> Result<String> {
    let (mut head, end) = read_http_head(&mut stream).await?;
    let mut parsed = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut parsed);
    if !req.parse(&head[..end]).context("not an HTTP request")?.is_complete() {
        bail!("an incomplete HTTP request head");
    }
    let method = req.method.unwrap_or_default().to_string();
    let path = req.path.unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        bail!("a {length}-byte body (at most {MAX_BODY})");
    }
    let mut body = head.split_off(end);
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the body ended early");
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let (kind, text) = if method == "POST" {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        ("application/json", answer(config, &headers, &body, now_ms))
    } else {
        // `handle_get`: a line that says what a device would be sent.
        let url = &config.websocket_url;
        (
            "text/plain",
            format!("OTA接口运行正常，向设备发送的websocket地址是：{url}"),
        )
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(format!("{method} {path} → {text}"))
}
