//! A scripted HTTP/1.1 server on 127.0.0.1 that speaks just enough of the
//! OpenAI chat API to inject faults (429s, garbage, stalls, resets, bodies
//! cut short) and to capture every request body. It stands in for nothing
//! users run: the real-server tests use a real llama.cpp server.
//!
//! It answers from a script in order ([`Server::start`]) or from a function
//! of each request ([`Server::start_fn`], for replies that depend on what
//! was asked whatever order concurrent requests arrive in).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Wait this long before any byte of the reply (a slow first byte),
    /// then do the act.
    Delay(Duration, Box<Act>),
    /// A 200 whose headers promise all of `body`; send the first half, then
    /// reset the connection.
    ResetMidBody { body: String },
    /// A 200 whose headers promise all of `body`; send the first half, then
    /// say nothing for this long.
    StallMidBody { body: String, stall: Duration },
    /// A 200 whose body is the start of a completion followed by filler,
    /// `chunk` bytes at a time, `every` apart: `length` bytes in all with a
    /// `Content-Length` saying so, or (`None`) chunked and without end.
    /// Sent until the client hangs up.
    Flood {
        length: Option<u64>,
        chunk: usize,
        every: Duration,
    },
}

pub fn respond(status: u16, body: &str) -> Act {
    Act::Respond {
        status,
        headers: vec![],
        body: body.to_string(),
    }
}

/// A chat completion whose message is `text`.
pub fn completion(text: &str) -> String {
    serde_json::json!({
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
    .to_string()
}

pub fn ok(text: &str) -> Act {
    respond(200, &completion(text))
}

#[derive(Debug, Clone)]
pub struct Seen {
    pub head: String,
    pub body: String,
    /// When the whole request had arrived.
    pub at: Instant,
}

type Responder = Arc<dyn Fn(&Seen) -> Act + Send + Sync>;

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
        let script = Mutex::new(VecDeque::from(script));
        Self::start_fn(move |_| {
            script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| default.clone())
        })
        .await
    }

    /// Answers each request with `respond(request)`.
    pub async fn start_fn(respond: impl Fn(&Seen) -> Act + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let respond: Responder = Arc::new(respond);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (seen, respond) = (seen2.clone(), respond.clone());
                tokio::spawn(async move { serve(stream, seen, respond).await });
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
async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Seen>>>, respond: Responder) {
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
    let request = Seen {
        head,
        body,
        at: Instant::now(),
    };
    let mut act = respond(&request);
    seen.lock().unwrap().push(request);
    while let Act::Delay(wait, then) = act {
        tokio::time::sleep(wait).await;
        act = *then;
    }
    match act {
        Act::Delay(..) => unreachable!("unwrapped above"),
        Act::Stall(d) => {
            tokio::time::sleep(d).await;
        }
        Act::Respond {
            status,
            headers,
            body,
        } => {
            let mut out = head_of(status, body.len(), &headers);
            out.push_str(&body);
            let _ = stream.write_all(out.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Act::ResetMidBody { body } => {
            let _ = write_half(&mut stream, &body).await;
            // A zero linger makes the close a reset (RST), not a clean end.
            let _ = stream.set_zero_linger();
            drop(stream);
        }
        Act::StallMidBody { body, stall } => {
            let _ = write_half(&mut stream, &body).await;
            tokio::time::sleep(stall).await;
        }
        Act::Flood {
            length,
            chunk,
            every,
        } => {
            let _ = flood(&mut stream, length, chunk, every).await;
        }
    }
}

/// [`Act::Flood`]: one buffer of filler, written over and over.
async fn flood(
    stream: &mut TcpStream,
    length: Option<u64>,
    chunk: usize,
    every: Duration,
) -> std::io::Result<()> {
    let mut head = String::from(
        "HTTP/1.1 200 Scripted\r\nContent-Type: application/json\r\nConnection: close\r\n",
    );
    match length {
        Some(n) => head.push_str(&format!("Content-Length: {n}\r\n\r\n")),
        None => head.push_str("Transfer-Encoding: chunked\r\n\r\n"),
    }
    stream.write_all(head.as_bytes()).await?;
    let start = br#"{"choices":[{"message":{"content":""#;
    let mut filler = vec![b'a'; chunk.max(start.len())];
    filler[..start.len()].copy_from_slice(start);
    let mut left = length.unwrap_or(u64::MAX);
    while left > 0 {
        let n = filler
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        match length {
            Some(_) => stream.write_all(&filler[..n]).await?,
            None => {
                stream.write_all(format!("{n:x}\r\n").as_bytes()).await?;
                stream.write_all(&filler[..n]).await?;
                stream.write_all(b"\r\n").await?;
            }
        }
        left -= n as u64;
        filler[..start.len()].fill(b'a');
        if !every.is_zero() {
            stream.flush().await?;
            tokio::time::sleep(every).await;
        }
    }
    stream.flush().await
}

fn head_of(status: u16, length: usize, headers: &[(&'static str, String)]) -> String {
    let mut out = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n",
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out
}

/// A 200 promising all of `body`, and the first half of it.
async fn write_half(stream: &mut TcpStream, body: &str) -> std::io::Result<()> {
    let half = &body.as_bytes()[..body.len() / 2];
    stream
        .write_all(head_of(200, body.len(), &[]).as_bytes())
        .await?;
    stream.write_all(half).await?;
    stream.flush().await
}
