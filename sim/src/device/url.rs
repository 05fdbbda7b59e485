//! Server addresses as esp-ml307 splits a URL (`web_socket.cc`, `Connect`): where the device
//! dials. Pure data; imports nothing of `device/`.

/// A parsed `ws://` URL as esp-ml307 splits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `wss://` or `https://`.
    pub tls: bool,
    /// Host name or address, without the port.
    pub host: String,
    /// Port (explicit, else 443 for `wss`, 80 otherwise).
    pub port: u16,
    /// Request path (`/` when the URL has none).
    pub path: String,
}

/// esp-ml307's URL split: `wss://`/`https://` mean TLS; the default port is 443 for `wss` and
/// 80 for anything else (even `https`); the path defaults to `/`.
pub fn parse_url(url: &str) -> Option<Endpoint> {
    let (scheme, rest) = url.split_once("://")?;
    let tls = matches!(scheme, "wss" | "https");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (authority.to_string(), if scheme == "wss" { 443 } else { 80 }),
    };
    if host.is_empty() {
        return None;
    }
    Some(Endpoint { tls, host, port, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_like_esp_ml307() {
        assert_eq!(
            parse_url("ws://127.0.0.1:8000/xiaozhi/v1/"),
            Some(Endpoint {
                tls: false,
                host: "127.0.0.1".into(),
                port: 8000,
                path: "/xiaozhi/v1/".into()
            })
        );
        assert_eq!(parse_url("https://x").map(|e| (e.tls, e.port)), Some((true, 80)));
        assert_eq!(parse_url("wss://x").map(|e| (e.tls, e.port)), Some((true, 443)));
        assert_eq!(parse_url("nonsense"), None);
    }
}
