//! A scripted HTTP/1.1 server on 127.0.0.1 that speaks just enough of the
//! OpenAI chat API to inject faults (429s, garbage, stalls) and to capture
//! every request body. It stands in for nothing users run: the real-server
//! tests use a real llama.cpp server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with the next request.
#[derive(Clone)]
pub enum Act {
    Respond {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Read the request, then say nothing for this long.
    Stall(Duration),
}

pub fn respond(status: u16, body: &str) -> Act {
    Act::Respond {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

pub fn ok(text: &str) -> Act {
    respond(
        200,
        &serde_json::json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop"
            }],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        })
        .to_string(),
    )
}

#[derive(Debug, Clone)]
pub struct Seen {
    pub head: String,
    pub body: String,
}

pub struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub async fn start(script: Vec<Act>) -> Server {
        Self::start_with_default(script, respond(500, "script exhausted")).await
    }

    /// Serves `script`, then `default` for every further request.
    pub async fn start_with_default(script: Vec<Act>, default: Act) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (script2, seen2) = (script.clone(), seen.clone());
        let default = Arc::new(default);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (script, seen, default) = (script2.clone(), seen2.clone(), default.clone());
                tokio::spawn(async move { serve(stream, script, seen, &default).await });
            }
        });
        Server { addr, seen }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// One request per connection (`Connection: close`).
async fn serve(
    mut stream: TcpStream,
    script: Arc<Mutex<VecDeque<Act>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    default: &Act,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(k) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break k + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).to_string();
    seen.lock().unwrap().push(Seen { head, body });
    let act = script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| default.clone());
    match act {
        Act::Stall(d) => {
            tokio::time::sleep(d).await;
        }
        Act::Respond {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            let _ = stream.write_all(out.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    }
}
