//! Headless Chromium for tests of pages: Debian's `chromium` (apt-installed
//! when missing, `common::apt`), and [`Browser`], one tab driven over the
//! DevTools protocol for single-page apps that load their data after the
//! page's `load` event (which `--dump-dom` does not wait for): navigate,
//! wait until the page settles, read its DOM and text, take a screenshot,
//! and collect console errors and uncaught exceptions.

use std::fs;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::{self, stream::MaybeTlsStream, Message, WebSocket};

/// Where Debian's `chromium` package puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long Chromium may take to open its DevTools port: far above what a
/// loaded machine needs; only a browser that cannot start takes longer.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How long one DevTools command may take to answer (a screenshot of a
/// big page is the slowest), for the same reason.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// `chromium` on `PATH`, else Debian's, installed with apt when missing
/// (as root; once per process, under a lock across processes).
pub fn path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(found) = on_path("chromium") {
            return found;
        }
        super::apt::ensure("chromium", Path::new(CHROMIUM));
        PathBuf::from(CHROMIUM)
    })
}

/// `chromium --version`, e.g. `Chromium 131.0.6778.139 built on Debian …`.
pub fn version() -> String {
    let out = Command::new(path())
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {} --version: {e}", path().display()));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A headless Chromium with one tab, killed when dropped.
pub struct Browser {
    /// Declared first, so it is dropped (killed) first.
    _process: Process,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    /// The tab's DevTools session.
    session: String,
    next_id: u64,
    /// Console errors and uncaught exceptions seen so far.
    errors: Vec<String>,
    /// Its profile and stderr log.
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts the browser with a `width`×`height` viewport and a blank tab.
    pub fn start(width: u32, height: u32) -> Browser {
        let dir = tempfile::tempdir().expect("a profile directory");
        let log = fs::File::create(dir.path().join("chromium.log")).expect("the browser's log");
        let child = Command::new(path())
            // Its own group, so its helpers (zygote, renderers) die with it.
            .process_group(0)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("--user-data-dir={}", dir.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", path().display()));
        let process = Process(child);
        let mut browser = Browser {
            socket: connect(dir.path()),
            _process: process,
            session: String::new(),
            next_id: 0,
            errors: Vec::new(),
            dir,
        };
        let target = browser.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let attached = browser.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.command(domain, json!({}));
        }
        browser.command(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    /// Loads `url` anew (through a blank page, so a change of only the
    /// hash is a full load too).
    pub fn goto(&mut self, url: &str) {
        for target in ["about:blank", url] {
            let reply = self.command("Page.navigate", json!({ "url": target }));
            if let Some(error) = reply.get("errorText").and_then(Value::as_str) {
                panic!("navigating to {target}: {error}");
            }
        }
    }

    /// The value of a JavaScript expression in the page (awaited if a
    /// promise); panics with the exception it throws.
    pub fn eval(&mut self, expression: &str) -> Value {
        let reply = self.command(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(thrown) = reply.get("exceptionDetails") {
            panic!("evaluating {expression}: {thrown}");
        }
        reply["result"]["value"].clone()
    }

    /// Waits until the page has loaded, shows no spinner or "Loading…",
    /// and its text has not changed for a second; returns whether that
    /// happened within `limit` (the page is read as it is either way, and
    /// the test's assertions say what is missing).
    pub fn settle(&mut self, limit: Duration) -> bool {
        // Spinners and progress bars count when shown (a hidden, idle bar
        // may stay in the DOM).
        const STATE: &str = "JSON.stringify([document.readyState, \
            [...document.querySelectorAll('.spinner-border, [role=progressbar]')] \
              .filter(e => e.getAttribute('aria-hidden') !== 'true' \
                && e.getClientRects().length > 0).length, \
            document.body ? document.body.innerText : ''])";
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        let mut stable_since = Instant::now();
        while Instant::now() < deadline {
            let state = self.eval(STATE).as_str().unwrap_or_default().to_string();
            let (ready, spinners, text): (String, u64, String) =
                serde_json::from_str(&state).unwrap_or_default();
            let busy = ready != "complete"
                || spinners > 0
                || text.trim().is_empty()
                || text.contains("Loading…");
            if busy || state != last {
                last = state;
                stable_since = Instant::now();
            } else if stable_since.elapsed() >= Duration::from_secs(1) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// The page's markup as it is now.
    pub fn dom(&mut self) -> String {
        let dom = self.eval("document.documentElement.outerHTML");
        dom.as_str().unwrap_or_default().to_string()
    }

    /// The text a reader sees (`document.body.innerText`).
    pub fn text(&mut self) -> String {
        let text = self.eval("document.body ? document.body.innerText : ''");
        text.as_str().unwrap_or_default().to_string()
    }

    /// Writes a PNG of the viewport to `file`.
    pub fn screenshot(&mut self, file: &Path) {
        let shot = self.command("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64 screenshot");
        fs::write(file, png).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    }

    /// Console errors and uncaught exceptions since the browser started.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// A command to the tab; returns its result.
    fn command(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.call(Some(&session), method, params)
    }

    /// Sends a command (to the browser, or to a session) and reads until
    /// its answer, keeping the errors among the events on the way.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap_or_else(|e| panic!("sending {method} to chromium: {e}"));
        let deadline = Instant::now() + COMMAND_LIMIT;
        loop {
            assert!(
                Instant::now() < deadline,
                "chromium did not answer {method} within {COMMAND_LIMIT:?}"
            );
            let frame = match self.socket.read() {
                Ok(frame) => frame,
                Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    continue
                }
                Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    continue
                }
                Err(e) => panic!("reading chromium's answer to {method}: {e}\n{}", self.log()),
            };
            let Message::Text(text) = frame else { continue };
            let reply: Value = serde_json::from_str(text.as_str()).expect("DevTools JSON");
            if reply["id"] == json!(id) {
                if let Some(error) = reply.get("error") {
                    panic!("chromium refused {method}: {error}");
                }
                return reply["result"].clone();
            }
            self.note_event(&reply);
        }
    }

    fn note_event(&mut self, event: &Value) {
        let params = &event["params"];
        match event["method"].as_str() {
            Some("Runtime.exceptionThrown") => {
                let details = &params["exceptionDetails"];
                let text = details["exception"]["description"]
                    .as_str()
                    .or(details["text"].as_str())
                    .unwrap_or("an exception");
                self.errors.push(format!("uncaught: {text}"));
            }
            Some("Runtime.consoleAPICalled") if params["type"] == "error" => {
                let args: Vec<String> = params["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        a["value"]
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| a["description"].to_string())
                    })
                    .collect();
                self.errors
                    .push(format!("console.error: {}", args.join(" ")));
            }
            // A failed request is the server's to report (a probe for an
            // optional file is no error of the page).
            Some("Log.entryAdded")
                if params["entry"]["level"] == "error"
                    && params["entry"]["source"] != "network" =>
            {
                let entry = &params["entry"];
                self.errors
                    .push(format!("log: {} ({})", entry["text"], entry["url"]));
            }
            _ => {}
        }
    }

    fn log(&self) -> String {
        super::venv::tail(&self.dir.path().join("chromium.log"), 30)
    }
}

/// The browser's process group, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// Waits for the port Chromium writes into `DevToolsActivePort` in its
/// profile and opens its browser endpoint.
fn connect(profile: &Path) -> WebSocket<MaybeTlsStream<TcpStream>> {
    let file = profile.join("DevToolsActivePort");
    let deadline = Instant::now() + START_LIMIT;
    let (port, endpoint) = loop {
        let text = fs::read_to_string(&file).unwrap_or_default();
        let mut lines = text.lines();
        if let (Some(port), Some(endpoint)) = (lines.next(), lines.next()) {
            break (port.to_string(), endpoint.to_string());
        }
        assert!(
            Instant::now() < deadline,
            "chromium did not open its DevTools port within {START_LIMIT:?}:\n{}",
            super::venv::tail(&profile.join("chromium.log"), 30)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let url = format!("ws://127.0.0.1:{port}{endpoint}");
    let (socket, _) =
        tungstenite::connect(&url).unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    if let MaybeTlsStream::Plain(stream) = socket.get_ref() {
        // Reads time out now and then, so a command's deadline is checked.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    }
    socket
}
