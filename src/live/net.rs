//! The live driver's transport: the wall clock as virtual time, the firmware's client
//! handshake (esp-ml307's `WebSocket::Connect`), small socket buffers, and text frames carried
//! byte for byte. The backend server (`crate::server`) shares the clock, the header reader and
//! the buffer sizes.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use xiaozhi_sim::device::url::Endpoint;

use super::lenient::Lenient;
use xiaozhi_sim::time::{SimDuration, SimTime};

/// Virtual time that follows the wall clock from a starting instant.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    offset: SimTime,
}

impl Clock {
    pub fn new(offset: SimTime) -> Self {
        Clock {
            start: Instant::now(),
            offset,
        }
    }
    pub fn now(&self) -> SimTime {
        self.offset + SimDuration::from_micros(self.start.elapsed().as_micros() as u64)
    }
    pub fn instant(&self, t: SimTime) -> Instant {
        self.start + Duration::from_micros(t.saturating_since(self.offset).as_micros())
    }
}

/// Socket buffers sized for thousands of devices per process.
pub fn small_ws_config(max_message: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message))
}

/// The largest message or frame the device's WebSocket takes: 64 MiB, the largest heap a board
/// may declare ([`xiaozhi_sim::board::MAX_FREE_HEAP`]), so every frame the firmware could hold reaches
/// the device model, which decides (an envelope that does not fit the heap fails to parse, as
/// cJSON's malloc would); a longer one ends the connection (docs/guarantees.md, "Input limits").
pub const MAX_DEVICE_FRAME: usize = xiaozhi_sim::board::MAX_FREE_HEAP;

/// A WebSocket of the device: text frames arrive as bytes ([`Lenient`]).
pub type Ws = WebSocketStream<Lenient<TcpStream>>;

/// esp-ml307's client handshake: write the device's exact request bytes, read the response
/// header block, succeed iff it contains `HTTP/1.1 101`.
pub async fn dial(endpoint: &Endpoint, request: &[u8]) -> Result<Ws> {
    if endpoint.tls {
        bail!("wss:// is not supported by the twin (ws:// only)");
    }
    let mut stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .with_context(|| format!("connect {}:{}", endpoint.host, endpoint.port))?;
    let _ = stream.set_nodelay(true);
    stream.write_all(request).await?;
    let (head, end) = read_http_head(&mut stream).await.context("handshake response")?;
    let header = String::from_utf8_lossy(&head[..end]);
    if !header.contains("HTTP/1.1 101") {
        bail!("handshake refused: {}", header.lines().next().unwrap_or_default());
    }
    let leftover = head[end..].to_vec();
    let mut lenient = Lenient::new(stream);
    // Frames that came with the handshake's answer are read through the same rewriting.
    let mut leftover = leftover;
    lenient.scan_leftover(&mut leftover);
    Ok(
        WebSocketStream::from_partially_read(lenient, leftover, Role::Client, Some(small_ws_config(MAX_DEVICE_FRAME)))
            .await,
    )
}

/// Reads an HTTP header block (up to 16 KiB); returns the bytes read and the end of the block
/// (bytes after it already belong to the WebSocket stream).
pub async fn read_http_head(stream: &mut TcpStream) -> Result<(Vec<u8>, usize)> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            bail!("the peer closed before the end of the header");
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((head, i + 4));
        }
        if head.len() > 16 * 1024 {
            bail!("header larger than 16 KiB");
        }
    }
}

/// A text frame with any payload bytes (the firmware does not check its own UTF-8).
pub fn raw_text(bytes: Vec<u8>) -> Message {
    match String::from_utf8(bytes) {
        Ok(s) => Message::text(s),
        Err(e) => Message::Frame(Frame::message(e.into_bytes(), OpCode::Data(Data::Text), true)),
    }
}
