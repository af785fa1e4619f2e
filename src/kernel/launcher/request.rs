//! What Enterprise Gateway sends to a launcher's communication port: one
//! JSON object per connection, read to its end. `{"signum": 0}` is the
//! gateway's liveness poll (the connection itself answers it),
//! `{"signum": 2}` an interrupt, `{"signum": 9}` or `15` a kill, and
//! `{"shutdown": 1}` the end of the listener.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A request larger than this is no request of the gateway's.
const MAX_REQUEST: u64 = 64 * 1024;
/// The gateway sends its request at once and closes its side.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `signum` 0: the gateway asks whether the kernel lives.
    Poll,
    /// SIGINT: interrupt the running cell.
    Interrupt,
    /// SIGTERM, SIGKILL (or SIGHUP, SIGQUIT): the kernel is to go.
    Kill(i32),
    /// Another signal (ignored: the kernel runs under retrace's init).
    Signal(i32),
    /// `shutdown`: the gateway is done with this kernel.
    Shutdown,
}

impl Request {
    /// Parses one request; `None` for anything that is not one.
    pub fn parse(text: &[u8]) -> Option<Request> {
        let value: serde_json::Value = serde_json::from_slice(text).ok()?;
        let object = value.as_object()?;
        let truthy = |v: &serde_json::Value| match v {
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
            serde_json::Value::String(s) => !s.is_empty(),
            serde_json::Value::Null => false,
            _ => true,
        };
        if object.get("shutdown").is_some_and(truthy) {
            return Some(Request::Shutdown);
        }
        let signum = object.get("signum")?.as_i64()?;
        let signum = i32::try_from(signum).ok()?;
        Some(match signum {
            0 => Request::Poll,
            libc::SIGINT => Request::Interrupt,
            libc::SIGTERM | libc::SIGKILL | libc::SIGHUP | libc::SIGQUIT => Request::Kill(signum),
            n if n > 0 => Request::Signal(n),
            _ => return None,
        })
    }

    /// Reads one request from a connection of the gateway.
    pub async fn read(stream: TcpStream) -> Option<Request> {
        let mut text = Vec::new();
        let mut limited = stream.take(MAX_REQUEST);
        match tokio::time::timeout(READ_TIMEOUT, limited.read_to_end(&mut text)).await {
            Ok(Ok(_)) => Request::parse(&text),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_requests() {
        let cases: [(&str, Option<Request>); 10] = [
            (r#"{"signum": 0}"#, Some(Request::Poll)),
            (r#"{"signum": 2}"#, Some(Request::Interrupt)),
            (r#"{"signum": 15}"#, Some(Request::Kill(15))),
            (r#"{"signum": 9}"#, Some(Request::Kill(9))),
            (r#"{"signum": 10}"#, Some(Request::Signal(10))),
            (r#"{"shutdown": 1}"#, Some(Request::Shutdown)),
            (r#"{"shutdown": 0, "signum": 0}"#, Some(Request::Poll)),
            (r#"{"signum": -3}"#, None),
            (r#"{"signum": "2"}"#, None),
            ("not json", None),
        ];
        for (text, expected) in cases {
            assert_eq!(Request::parse(text.as_bytes()), expected, "{text}");
        }
    }
}
