//! A real Jupyter Kernel Gateway (PyPI `jupyter-kernel-gateway`) on
//! 127.0.0.1 with a random token, serving retrace's fat image as its one
//! kernelspec (also the default kernel name), for tests of the `gateway`
//! executor.
//!
//! The gateway is pip-installed once per machine into a venv under
//! `$RETRACE_HOME/test-gateway/` (beside the images), behind a file lock so
//! concurrent test binaries install it once; a venv that no longer imports
//! the gateway is rebuilt. Each [`Gateway`] has its own temporary Jupyter
//! directories (kernelspec, runtime, config, data) and HOME, so nothing of
//! the user's Jupyter setup reaches it and nothing of it outlives it.
//!
//! Kernels are started by the gateway in sessions of their own (not in the
//! gateway's process group); they are found by their connection files,
//! which live in this gateway's runtime directory.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use retrace::pyenv::{ImageName, Interpreter};

/// The gateway release the tests run against.
const KG_VERSION: &str = "3.0.1";
/// The kernelspec name of retrace's fat image on the gateway.
const KERNEL_NAME: &str = "retrace-fat";
/// How long a gateway may take to answer after its start; generous,
/// because test binaries run in parallel on small machines.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a killed gateway's kernels may take to disappear.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of the gateway's log shown when it fails.
const LOG_TAIL_LINES: usize = 60;

/// A running jupyter-kernel-gateway. Dropping it kills the gateway and its
/// kernels.
pub struct Gateway {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub url: String,
    pub token: String,
    /// The kernelspec name of the fat image (the gateway's default).
    pub kernel: String,
    port: u16,
    /// Kernelspec, runtime, config and data directories, HOME and the log.
    dir: tempfile::TempDir,
    child: Option<Child>,
}

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

impl Gateway {
    /// Installs the gateway (first use on this machine), builds the fat
    /// image (first use), writes its kernelspec and starts the gateway on a
    /// free port; returns once `GET /api/kernelspecs` answers with the
    /// token. Panics with the reason and the gateway's log tail when it
    /// cannot.
    pub fn start() -> Gateway {
        let venv = venv();
        let image = super::image(ImageName::Fat);
        let dir = tempfile::Builder::new()
            .prefix("retrace-gateway-")
            .tempdir()
            .expect("creating the gateway's temporary directory");
        for sub in ["jupyter", "runtime", "config", "data", "home"] {
            fs::create_dir(dir.path().join(sub)).expect("creating the gateway's directories");
        }
        image
            .kernelspec(1)
            .write(&dir.path().join("jupyter"), KERNEL_NAME)
            .unwrap_or_else(|e| panic!("writing the fat image's kernelspec: {e}"));
        let port = free_port();
        let mut gateway = Gateway {
            url: format!("http://127.0.0.1:{port}"),
            token: uuid::Uuid::new_v4().simple().to_string(),
            kernel: KERNEL_NAME.to_string(),
            port,
            dir,
            child: None,
        };
        gateway.spawn(venv);
        gateway
    }

    /// Kills the gateway's process group and its kernels, as a lost
    /// gateway host would; the gateway forgets every kernel. Its URL then
    /// refuses connections until [`Self::start_again`].
    pub fn stop(&mut self) {
        let left = self.kill();
        assert!(
            left.is_empty(),
            "kernels of the stopped gateway still running after {STOP_TIMEOUT:?}: {left:?}"
        );
    }

    /// Starts the gateway again after [`Self::stop`]: same URL, token and
    /// kernelspec, no kernels.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "start_again: the gateway is running");
        self.spawn(venv());
    }

    /// The websocket of a kernel's channels (the token still has to be
    /// sent, as a header or a `token` query parameter).
    pub fn channels_url(&self, kernel_id: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/api/kernels/{kernel_id}/channels",
            self.port
        )
    }

    /// The gateway's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Where the gateway writes its kernels' connection files: every
    /// kernel's command line names it.
    pub fn runtime_dir(&self) -> PathBuf {
        self.dir.path().join("runtime")
    }

    /// Live processes of this gateway's kernels.
    pub fn kernel_processes(&self) -> Vec<i32> {
        super::processes_mentioning(&self.runtime_dir().to_string_lossy())
    }

    /// The last lines of the gateway's log (its stdout and stderr, and
    /// its kernels').
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// `method path` with the token in the `Authorization` header.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> Response {
        let token = format!("token {}", self.token);
        self.request_as(method, path, Some(&token), body)
    }

    /// `method path` with `authorization` as the `Authorization` header
    /// (none when `None`). Panics when the gateway cannot be reached.
    pub fn request_as(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: Option<&str>,
    ) -> Response {
        http(self.port, method, path, authorization, body).unwrap_or_else(|e| {
            panic!(
                "{method} {}{path}: {e}\n--- gateway log ---\n{}",
                self.url,
                self.log_tail()
            )
        })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("gateway.log")
    }

    fn spawn(&mut self, venv: &Path) {
        let dir = self.dir.path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("opening the gateway's log");
        let err_log = log.try_clone().expect("opening the gateway's log");
        let bin = venv.join("bin");
        let mut cmd = Command::new(bin.join("jupyter-kernelgateway"));
        cmd.arg("--KernelGatewayApp.ip=127.0.0.1")
            .arg(format!("--KernelGatewayApp.port={}", self.port))
            // Fail rather than serve on another port than `url` says.
            .arg("--KernelGatewayApp.port_retries=0")
            .arg(format!(
                "--KernelGatewayApp.default_kernel_name={}",
                self.kernel
            ))
            // GET /api/kernels answers 403 unless listing is on; tests use
            // it to see what the gateway still holds.
            .arg("--JupyterWebsocketPersonality.list_kernels=True")
            // Only retrace's kernelspec, not one for the gateway's own venv.
            .arg("--KernelSpecManager.ensure_native_kernel=False")
            // Not KG_AUTH_TOKEN: kernels inherit the gateway's environment.
            .arg(format!("--KernelGatewayApp.auth_token={}", self.token))
            // Kernels inherit this environment under their kernelspec's.
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("HOME", dir.join("home"))
            .env("LANG", "C.UTF-8")
            .env("JUPYTER_PATH", dir.join("jupyter"))
            .env("JUPYTER_RUNTIME_DIR", self.runtime_dir())
            .env("JUPYTER_CONFIG_DIR", dir.join("config"))
            .env("JUPYTER_DATA_DIR", dir.join("data"))
            .env("JUPYTER_PLATFORM_DIRS", "1")
            .current_dir(dir.join("home"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            // Its own group, so stop() ends it and whatever it forked.
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "starting {}: {e}",
                bin.join("jupyter-kernelgateway").display()
            )
        });
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let authorization = format!("token {}", self.token);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "jupyter-kernelgateway on port {} exited ({status}) before answering\n\
                     --- gateway log ---\n{}",
                    self.port,
                    self.log_tail()
                );
            }
            let last = match http(
                self.port,
                "GET",
                "/api/kernelspecs",
                Some(&authorization),
                None,
            ) {
                Ok(r) if r.status == 200 => return,
                Ok(r) => format!("HTTP {}: {}", r.status, r.body),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                let log = self.log_tail();
                self.kill();
                panic!(
                    "jupyter-kernelgateway on port {} did not answer GET /api/kernelspecs within \
                     {START_TIMEOUT:?} (last: {last})\n--- gateway log ---\n{log}",
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the gateway's group first (so it restarts no kernel), then
    /// each kernel's group; returns the kernel processes still alive after
    /// [`STOP_TIMEOUT`].
    fn kill(&mut self) -> Vec<i32> {
        if let Some(mut child) = self.child.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            let left = self.kernel_processes();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            for pid in &left {
                // A kernel leads its own session and group: its children go
                // with it.
                let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
                let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let left = self.kill();
        if !left.is_empty() {
            eprintln!("gateway fixture: kernel processes {left:?} survived SIGKILL");
        }
    }
}

/// A port nobody listens on now (the gateway binds it right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port on 127.0.0.1")
}

/// One HTTP/1.1 request on its own connection (`Connection: close`).
fn http(
    port: u16,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
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
    // The gateway's API handlers finish before they write, so tornado
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

/// The gateway's venv, installed on first use (see the module doc).
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(install)
}

fn install() -> PathBuf {
    let root = retrace::util::home::retrace_home().join("test-gateway");
    fs::create_dir_all(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
    let venv = root.join(format!("kg-{KG_VERSION}"));
    let lock_path = root.join(format!("kg-{KG_VERSION}.lock"));
    let lock = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
    let marker = venv.join("retrace-installed");
    if marker.exists() && installed_version(&venv).as_deref() == Some(KG_VERSION) {
        return venv;
    }
    // Missing, half-installed or broken (its interpreter gone): anew.
    if venv.exists() {
        fs::remove_dir_all(&venv)
            .unwrap_or_else(|e| panic!("removing the broken {}: {e}", venv.display()));
    }
    let log_path = root.join(format!("kg-{KG_VERSION}-install.log"));
    let log =
        File::create(&log_path).unwrap_or_else(|e| panic!("creating {}: {e}", log_path.display()));
    let python = Interpreter::discover()
        .unwrap_or_else(|e| panic!("no Python for the gateway's venv: {e}"))
        .path;
    let requirement = format!("jupyter-kernel-gateway=={KG_VERSION}");
    let venv_python = venv.join("bin").join("python");
    let steps: [(&str, Command); 2] = [
        ("create the venv", {
            let mut c = Command::new(&python);
            c.args(["-m", "venv"]).arg(&venv);
            c
        }),
        ("pip install the gateway", {
            let mut c = Command::new(&venv_python);
            c.args(["-m", "pip", "install", "--no-input", &requirement]);
            c
        }),
    ];
    for (what, mut cmd) in steps {
        let status = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cloning the install log"))
            .stderr(log.try_clone().expect("cloning the install log"))
            .status();
        let failed = match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(s.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            let text = fs::read_to_string(&log_path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            panic!(
                "installing {requirement} into {}: could not {what} ({why}); full log {}\n\
                 --- last lines ---\n{}",
                venv.display(),
                log_path.display(),
                lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
            );
        }
    }
    let version = installed_version(&venv);
    assert_eq!(
        version.as_deref(),
        Some(KG_VERSION),
        "{requirement} installed into {} but it does not import as that version",
        venv.display()
    );
    fs::write(&marker, format!("{requirement}\n"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    venv
}

/// The gateway version the venv imports, if it works at all.
fn installed_version(venv: &Path) -> Option<String> {
    let out = Command::new(venv.join("bin").join("python"))
        .args([
            "-c",
            "import kernel_gateway; print(kernel_gateway.__version__)",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
