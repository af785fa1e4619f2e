//! A static file server on 127.0.0.1 (a random port) for a directory, as a
//! browser needs it: `GET` and `HEAD`, the content types of a web app's
//! files, and single byte ranges (`Range: bytes=a-b`, `a-`, `-n`) answered
//! with `206` and `Content-Range`. Inspect's log viewer reads a `.eval`
//! file (a zip) by ranges and misreads a server that ignores them, as
//! Python's `http.server` does. Every answer is recorded, so a test can
//! check that ranges were asked for and answered.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One answered request.
#[derive(Debug, Clone)]
pub struct Served {
    pub method: String,
    /// The path asked for, without its query.
    pub path: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
    pub status: u16,
    /// Body bytes sent (none for `HEAD`).
    pub bytes: u64,
}

pub struct StaticServer {
    addr: SocketAddr,
    served: Arc<Mutex<Vec<Served>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StaticServer {
    /// Serves the files under `root` (a directory's `index.html` for the
    /// directory) until dropped.
    pub fn start(root: &Path) -> StaticServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the server's address");
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (root, log, stopped) = (root.to_path_buf(), served.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (root, log) = (root.clone(), log.clone());
                std::thread::spawn(move || serve(stream, &root, &log));
            }
        });
        StaticServer {
            addr,
            served,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Every request answered so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.served.lock().unwrap().clone()
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Requests on one connection until the client closes it or sends
/// something this server does not take.
fn serve(stream: TcpStream, root: &Path, log: &Mutex<Vec<Served>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let Some((method, target, range)) = read_head(&mut reader) else {
            return;
        };
        let path = target.split(['?', '#']).next().unwrap_or("").to_string();
        let (status, bytes, ok) = match answer(&mut out, root, &method, &path, range.as_deref()) {
            Ok((status, bytes)) => (status, bytes, true),
            Err(_) => (0, 0, false),
        };
        log.lock().unwrap().push(Served {
            method,
            path,
            range,
            status,
            bytes,
        });
        if !ok {
            return;
        }
    }
}

/// The request line's method and target, and the `Range` header.
fn read_head(reader: &mut impl BufRead) -> Option<(String, String, Option<String>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|&n| n > 0)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut range = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|&n| n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            return Some((method, target, range));
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("range") {
                range = Some(value.trim().to_string());
            }
        }
    }
}

/// Writes the answer; returns its status and the body bytes sent.
fn answer(
    out: &mut TcpStream,
    root: &Path,
    method: &str,
    path: &str,
    range: Option<&str>,
) -> std::io::Result<(u16, u64)> {
    if method != "GET" && method != "HEAD" {
        return plain(out, 405, "only GET and HEAD");
    }
    let Some(file) = resolve(root, path) else {
        return plain(out, 404, "not found");
    };
    let mut f = File::open(&file)?;
    let size = f.metadata()?.len();
    let kind = content_type(&file);
    let (status, start, len, extra) = match range.map(|r| parse_range(r, size)) {
        None | Some(Range::Ignored) => (200, 0, size, String::new()),
        Some(Range::Unsatisfiable) => {
            let head = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\n\
                 Content-Length: 0\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            return Ok((416, 0));
        }
        Some(Range::Bytes(a, b)) => (
            206,
            a,
            b - a + 1,
            format!("Content-Range: bytes {a}-{b}/{size}\r\n"),
        ),
    };
    let reason = if status == 206 {
        "Partial Content"
    } else {
        "OK"
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len}\r\n\
         Accept-Ranges: bytes\r\nCache-Control: no-store\r\n{extra}\r\n"
    );
    out.write_all(head.as_bytes())?;
    if method == "HEAD" {
        return Ok((status, 0));
    }
    f.seek(SeekFrom::Start(start))?;
    let sent = std::io::copy(&mut f.take(len), out)?;
    out.flush()?;
    Ok((status, sent))
}

fn plain(out: &mut TcpStream, status: u16, text: &str) -> std::io::Result<(u16, u64)> {
    let head = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    );
    out.write_all(head.as_bytes())?;
    Ok((status, text.len() as u64))
}

/// The file `path` names under `root`, percent-decoded; `None` for a path
/// that leaves `root` or names nothing.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path)?;
    let relative = Path::new(decoded.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let mut file = root.join(relative);
    if file.is_dir() {
        file = file.join("index.html");
    }
    file.is_file().then_some(file)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[derive(Debug, PartialEq, Eq)]
enum Range {
    /// Inclusive byte positions.
    Bytes(u64, u64),
    Unsatisfiable,
    /// Not a single byte range: answered with the whole file, as RFC 9110
    /// allows.
    Ignored,
}

fn parse_range(header: &str, size: u64) -> Range {
    let Some(spec) = header.strip_prefix("bytes=") else {
        return Range::Ignored;
    };
    if spec.contains(',') {
        return Range::Ignored;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Range::Ignored;
    };
    let (first, last) = (first.trim(), last.trim());
    let parsed = match (first.parse::<u64>(), last.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => Some((a, b.min(size.saturating_sub(1)))),
        (Ok(a), Err(_)) if last.is_empty() => Some((a, size.saturating_sub(1))),
        (Err(_), Ok(n)) if first.is_empty() && n > 0 => {
            Some((size.saturating_sub(n), size.saturating_sub(1)))
        }
        _ => return Range::Ignored,
    };
    match parsed {
        Some((a, b)) if size > 0 && a < size && a <= b => Range::Bytes(a, b),
        _ => Range::Unsatisfiable,
    }
}

/// A module script is refused under any other type than JavaScript's.
fn content_type(file: &Path) -> &'static str {
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "wasm" => "application/wasm",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
