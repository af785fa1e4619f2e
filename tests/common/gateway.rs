//! A real Jupyter Kernel Gateway (PyPI `jupyter-kernel-gateway`) on
//! 127.0.0.1 with a random token, serving retrace's fat image as its one
//! kernelspec (also the default kernel name), for tests of the `gateway`
//! executor.
//!
//! The gateway is pip-installed once per machine into a venv under
//! `$RETRACE_HOME/test-gateway/` (beside the images; `common::venv`: a file
//! lock keeps concurrent test binaries to one install, and a venv that no
//! longer imports the gateway is rebuilt). Each [`Gateway`] has its own
//! temporary Jupyter directories (kernelspec, runtime, config, data) and
//! HOME, so nothing of the user's Jupyter setup reaches it and nothing of
//! it outlives it.
//!
//! Kernels are started by the gateway in sessions of their own (not in the
//! gateway's process group); they are found by their connection files,
//! which live in this gateway's runtime directory.

use std::fs::{self, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use retrace::pyenv::ImageName;

pub use super::http::Response;
use super::http::{free_port, request as http, wait_until_serving};
use super::venv::{Install, PinnedVenv};

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

/// The client variable the gateway passes on to its kernels (besides
/// `KERNEL_*`).
pub const ALLOWED_ENV: &str = "RT_GATEWAY_COLOR";

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
        super::venv::tail(&self.log_path(), LOG_TAIL_LINES)
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
            // The one client variable (besides `KERNEL_*`) a start request
            // may give its kernel; `--env` tests use it.
            .arg(format!(
                "--JupyterWebsocketPersonality.env_whitelist={ALLOWED_ENV}"
            ))
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
        let served = wait_until_serving(
            "jupyter-kernelgateway",
            self.port,
            &self.token,
            &mut self.child,
            START_TIMEOUT,
        );
        if let Err(why) = served {
            let log = self.log_tail();
            self.kill();
            panic!("{why}\n--- gateway log ---\n{log}");
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

/// The gateway's venv, installed on first use (see the module doc).
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        PinnedVenv {
            name: "kg",
            package: "jupyter-kernel-gateway",
            version: KG_VERSION,
            install: Install::Resolve(&[]),
            probe: "import kernel_gateway; print(kernel_gateway.__version__)",
            after: |_| Vec::new(),
        }
        .ensure()
    })
}
