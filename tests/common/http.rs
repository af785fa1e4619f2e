//! A minimal HTTP/1.1 client for the gateway fixtures' REST calls, and a
//! free port to give a server: the fixtures check a gateway's raw answers
//! (status codes, bodies) without going through retrace's own client, which
//! is what the gateway tests test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// How long one request may wait for its answer: a kernel start on a
/// loaded machine can take a while.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// An HTTP response: status and body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {}", self.body))
    }
}

/// A port nobody listens on now on 127.0.0.1 (the server binds it right
/// after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port on 127.0.0.1")
}

/// One HTTP/1.1 request to 127.0.0.1:`port` on its own connection
/// (`Connection: close`).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let body = body.unwrap_or("");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    if let Some(value) = authorization {
        head.push_str(&format!("Authorization: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> std::io::Result<Response> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers in the response"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let payload = &raw[split + 4..];
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status in the response"))?;
    // The gateways' API handlers finish before they write, so tornado
    // always sends a Content-Length; a chunked body would be misread.
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        return Err(bad(
            "chunked response (not expected from the gateway's API)",
        ));
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(payload).into_owned(),
    })
}

/// Waits until the gateway `child` (named `name`) on `port` answers
/// `GET /api/kernelspecs` with `token`, for up to `timeout`. `Err` says
/// why not: it exited (then `child` is taken), or what it last answered.
pub fn wait_until_serving(
    name: &str,
    port: u16,
    token: &str,
    child: &mut Option<Child>,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let authorization = format!("token {token}");
    loop {
        if let Some(status) = child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            *child = None;
            return Err(format!(
                "{name} on port {port} exited ({status}) before answering"
            ));
        }
        let last = match request(port, "GET", "/api/kernelspecs", Some(&authorization), None) {
            Ok(r) if r.status == 200 => return Ok(()),
            Ok(r) => format!("HTTP {}: {}", r.status, r.body),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(format!(
                "{name} on port {port} did not answer GET /api/kernelspecs within \
                 {timeout:?} (last: {last})"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
