//! A real Jupyter Enterprise Gateway (PyPI `jupyter-enterprise-gateway`)
//! on 127.0.0.1 with a random token, spreading its kernels over SSH onto
//! the hosts of `common::hosts` (network namespaces of this machine with
//! an sshd each) through its `DistributedProcessProxy`, for tests of
//! kernels on several hosts. Needs root (the hosts do).
//!
//! The gateway is pip-installed once per machine into a venv under
//! `$RETRACE_HOME/test-gateway/` (`common::venv`), together with its
//! release's Python kernel launcher (`launch_ipykernel.py`) and its
//! `python_distributed` kernelspec, both taken from the release's source
//! archive: the wheel ships neither. A test serves kernelspecs of its choice
//! from a directory (`JUPYTER_PATH`); [`EnterpriseGateway::stock_kernelspec`]
//! writes the stock one, run by the gateway venv's Python.
//!
//! The gateway reaches the hosts as root with the hosts' client key and
//! known_hosts (its HOME is the hosts' SSH home); kernels report back to
//! the bridge's address. What the gateway writes (its log, the kernels' logs
//! and temporary files) lives in the fixture's directory. Dropping it kills
//! the gateway, then the hosts with their kernels.

use std::fs::{self, OpenOptions};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::footprint::{Footprint, Process};
use super::hosts::Hosts;
use super::http::{free_port, request as http, wait_until_serving, Response};
use super::venv::{tail, Install, PinnedVenv};

/// The gateway release the tests run against (the newest 3.x).
pub const EG_VERSION: &str = "3.3.0";
const EG_PACKAGE: &str = "jupyter-enterprise-gateway";
/// The kernel the stock launcher starts, pinned.
const IPYKERNEL: &str = "ipykernel==6.29.5";
/// Where in the venv the release's launcher files are put.
const LAUNCHERS: &str = "share/retrace-eg";
/// How long the gateway may take to answer after its start.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Lines of the gateway's log shown when it fails.
const LOG_TAIL_LINES: usize = 80;

/// How the gateway picks a host for a new kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balancing {
    /// The hosts in turn (the gateway's default).
    RoundRobin,
    /// The host with the fewest kernels.
    LeastConnection,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Options {
    /// How many hosts (at least 1).
    pub hosts: usize,
    /// A `JUPYTER_PATH` entry: its `kernels/*/kernel.json` are the only
    /// kernelspecs served.
    pub jupyter_path: PathBuf,
    pub default_kernel: Option<String>,
    pub balancing: Balancing,
    /// `EG_KERNEL_LAUNCH_TIMEOUT`: how long a kernel may take to report
    /// back before the gateway gives up on it.
    pub launch_timeout: Duration,
}

impl Options {
    /// Two hosts, round-robin, a 60 s launch timeout.
    pub fn new(jupyter_path: &Path) -> Options {
        Options {
            hosts: 2,
            jupyter_path: jupyter_path.to_path_buf(),
            default_kernel: None,
            balancing: Balancing::RoundRobin,
            launch_timeout: Duration::from_secs(60),
        }
    }
}

/// A running Enterprise Gateway and its hosts. Dropping it removes both.
pub struct EnterpriseGateway {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub url: String,
    pub token: String,
    port: u16,
    /// Declared before `hosts`: dropped (killed) first, so it restarts no
    /// kernel on a host being removed.
    child: Option<Child>,
    hosts: Hosts,
    /// Its log, the kernels' logs, TMPDIR, Jupyter's directories.
    dir: tempfile::TempDir,
}

impl EnterpriseGateway {
    /// Installs the gateway (first use on this machine), makes the hosts
    /// and starts the gateway on a free port; returns once `GET
    /// /api/kernelspecs` answers with the token. Panics with the reason and
    /// the gateway's log tail when it cannot.
    pub fn start(options: Options) -> EnterpriseGateway {
        let venv = venv();
        let names = kernelspec_names(&options.jupyter_path);
        let hosts = Hosts::start(options.hosts);
        let dir = tempfile::Builder::new()
            .prefix("retrace-eg-")
            .tempdir()
            .expect("creating the gateway's temporary directory");
        for sub in ["runtime", "config", "data", "tmp", "kernel-logs"] {
            fs::create_dir(dir.path().join(sub)).expect("creating the gateway's directories");
        }
        let port = free_port();
        let mut gateway = EnterpriseGateway {
            url: format!("http://127.0.0.1:{port}"),
            token: uuid::Uuid::new_v4().simple().to_string(),
            port,
            child: None,
            hosts,
            dir,
        };
        gateway.spawn(venv, &options, &names);
        gateway
    }

    /// The gateway's venv (its Python runs the stock launcher).
    pub fn venv() -> &'static Path {
        venv()
    }

    /// Writes the release's `python_distributed` kernelspec as
    /// `<dir>/kernels/<name>/kernel.json`, run by the gateway venv's Python
    /// (which has ipykernel) with the release's `launch_ipykernel.py`; its
    /// argv keeps the gateway's substitutions (`{kernel_id}`,
    /// `{response_address}`, `{public_key}`, `{port_range}`).
    pub fn stock_kernelspec(dir: &Path, name: &str) -> PathBuf {
        let venv = venv();
        let stock = venv.join(LAUNCHERS).join("python_distributed.json");
        let text =
            fs::read_to_string(&stock).unwrap_or_else(|e| panic!("{}: {e}", stock.display()));
        let mut spec: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", stock.display()));
        spec["argv"][0] = venv.join("bin").join("python").to_string_lossy().into();
        spec["argv"][1] = venv
            .join(LAUNCHERS)
            .join("launch_ipykernel.py")
            .to_string_lossy()
            .into();
        spec["display_name"] = format!("{name} (Enterprise Gateway's stock launcher)").into();
        let kernel_dir = dir.join("kernels").join(name);
        fs::create_dir_all(&kernel_dir)
            .unwrap_or_else(|e| panic!("creating {}: {e}", kernel_dir.display()));
        let path = kernel_dir.join("kernel.json");
        fs::write(
            &path,
            serde_json::to_string_pretty(&spec).expect("a JSON value"),
        )
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }

    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// Host `i` dies (see [`Hosts::kill_host`]).
    pub fn kill_host(&mut self, i: usize) {
        self.hosts.kill_host(i);
    }

    /// Live processes of kernel `id` on the hosts, with the host each runs
    /// on, found on the hosts' side: the gateway gives every kernel
    /// `KERNEL_ID` in its environment, whatever its launcher.
    pub fn kernel_processes(&self, id: &str) -> Vec<(usize, i32)> {
        let needle = format!("KERNEL_ID={id}\0");
        (0..self.hosts.hosts().len())
            .flat_map(|i| self.hosts.processes(i).into_iter().map(move |p| (i, p)))
            .filter(|(_, pid)| {
                fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
            })
            .collect()
    }

    /// Kernels on host `i` in the middle of a `time.sleep`: Python
    /// processes below the host's own (in the kernel's namespaces) whose
    /// main thread is in `clock_nanosleep` or `nanosleep`. A host killed
    /// then loses a running cell, not a kernel between two tasks (which the
    /// run would rightly start again elsewhere).
    pub fn kernels_sleeping_on(&self, i: usize) -> usize {
        let sleeping = |pid: u32| {
            fs::read_to_string(format!("/proc/{pid}/syscall"))
                .is_ok_and(|s| matches!(s.split(' ').next(), Some("230" | "35")))
        };
        let python = |pid: u32| {
            fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.to_string_lossy().contains("python"))
        };
        let mut pids: Vec<u32> = self
            .hosts
            .processes(i)
            .into_iter()
            .flat_map(|pid| super::confinement::descendants(pid as u32))
            .filter(|pid| sleeping(*pid) && python(*pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.len()
    }

    /// The host kernel `id` runs on, if its processes are found on exactly
    /// one host.
    pub fn host_of_kernel(&self, id: &str) -> Option<usize> {
        let mut hosts: Vec<usize> = self.kernel_processes(id).iter().map(|(h, _)| *h).collect();
        hosts.dedup();
        (hosts.len() == 1).then(|| hosts[0])
    }

    /// What the gateway and its hosts have on the machine now (see
    /// [`Footprint`]).
    pub fn footprint(&self) -> Footprint {
        let mut footprint = self.hosts.footprint();
        footprint
            .processes
            .extend(self.pid().and_then(|pid| Process::of(pid as i32)));
        footprint.dirs.push(self.dir.path().to_path_buf());
        footprint
    }

    /// What kernel `id` wrote to its stdout and stderr on its host (the
    /// gateway redirects them to `EG_KERNEL_LOG_DIR/kernel-<id>.log`).
    pub fn kernel_log(&self, id: &str) -> String {
        fs::read_to_string(self.kernel_log_dir().join(format!("kernel-{id}.log")))
            .unwrap_or_default()
    }

    /// The websocket of a kernel's channels (the token still has to be
    /// sent).
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

    /// The last lines of the gateway's log.
    pub fn log_tail(&self) -> String {
        tail(&self.log_path(), LOG_TAIL_LINES)
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

    fn kernel_log_dir(&self) -> PathBuf {
        self.dir.path().join("kernel-logs")
    }

    fn spawn(&mut self, venv: &Path, options: &Options, names: &[String]) {
        let dir = self.dir.path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("opening the gateway's log");
        let err_log = log.try_clone().expect("opening the gateway's log");
        let bin = venv.join("bin");
        let hosts: Vec<String> = self
            .hosts
            .hosts()
            .iter()
            .map(|h| h.address.to_string())
            .collect();
        let bridge = self.hosts.bridge_address();
        let mut cmd = Command::new(bin.join("jupyter-enterprisegateway"));
        cmd.arg("--EnterpriseGatewayApp.ip=127.0.0.1")
            .arg(format!("--EnterpriseGatewayApp.port={}", self.port))
            // Fail rather than serve on another port than `url` says.
            .arg("--EnterpriseGatewayApp.port_retries=0")
            .arg(format!("--EnterpriseGatewayApp.auth_token={}", self.token))
            // GET /api/kernels answers 403 unless listing is on; tests use
            // it to see what the gateway still holds.
            .arg("--EnterpriseGatewayApp.list_kernels=True")
            .arg(format!(
                "--EnterpriseGatewayApp.load_balancing_algorithm={}",
                match options.balancing {
                    Balancing::RoundRobin => "round-robin",
                    Balancing::LeastConnection => "least-connection",
                }
            ))
            .arg("--KernelSpecManager.ensure_native_kernel=False")
            // Only the test's kernelspecs, not the venv's own `python3`.
            .arg(format!("--KernelSpecManager.whitelist={names:?}"))
            .arg("--log-level=DEBUG");
        if let Some(name) = &options.default_kernel {
            cmd.arg(format!("--EnterpriseGatewayApp.default_kernel_name={name}"));
        }
        // The gateway exports its whole environment into each kernel's
        // command on the host: keep it to what the fixture sets.
        cmd.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            // paramiko reads the client key and known_hosts from ~/.ssh.
            .env("HOME", self.hosts.ssh_home())
            .env("LANG", "C.UTF-8")
            .env("TMPDIR", dir.join("tmp"))
            .env("JUPYTER_PATH", &options.jupyter_path)
            .env("JUPYTER_RUNTIME_DIR", dir.join("runtime"))
            .env("JUPYTER_CONFIG_DIR", dir.join("config"))
            .env("JUPYTER_DATA_DIR", dir.join("data"))
            .env("JUPYTER_PLATFORM_DIRS", "1")
            .env("EG_REMOTE_HOSTS", hosts.join(","))
            .env("EG_REMOTE_USER", "root")
            // Kernels report their ports to this address: the bridge, the
            // one address of this machine the hosts reach.
            .env("EG_RESPONSE_IP", bridge.to_string())
            .env("EG_RESPONSE_PORT", free_port_on(bridge).to_string())
            .env(
                "EG_KERNEL_LAUNCH_TIMEOUT",
                options.launch_timeout.as_secs().max(1).to_string(),
            )
            .env("EG_KERNEL_LOG_DIR", self.kernel_log_dir())
            // A request with an `env` (retrace's has one) gives the kernel
            // only the `KERNEL_*` it names and these of the gateway's
            // environment; without one, the kernel gets all of it. Either
            // way its temporary files (the launcher's connection file) land
            // in the fixture's directory.
            .env("EG_INHERITED_ENVS", "TMPDIR")
            // The default refuses kernels for root, which the fixture is
            // (a kernel's user is the gateway's unless a request names one).
            .env("EG_UNAUTHORIZED_USERS", "retrace-nobody")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            // Its own group, so the fixture ends it and what it forked.
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "starting {}: {e}",
                bin.join("jupyter-enterprisegateway").display()
            )
        });
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let served = wait_until_serving(
            "jupyter-enterprisegateway",
            self.port,
            &self.token,
            &mut self.child,
            START_TIMEOUT,
        );
        if let Err(why) = served {
            panic!("{why}\n--- gateway log ---\n{}", self.log_tail());
        }
    }
}

impl Drop for EnterpriseGateway {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
        // Then `hosts` drops: its kernels and sshds go with it.
    }
}

/// The kernelspec names under `<jupyter_path>/kernels/`.
fn kernelspec_names(jupyter_path: &Path) -> Vec<String> {
    let kernels = jupyter_path.join("kernels");
    let mut names: Vec<String> = fs::read_dir(&kernels)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kernels.display()))
        .flatten()
        .filter(|e| e.path().join("kernel.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        !names.is_empty(),
        "no kernelspec in {} (want kernels/<name>/kernel.json)",
        kernels.display()
    );
    names
}

/// A port nobody listens on now at `address`.
fn free_port_on(address: Ipv4Addr) -> u16 {
    TcpListener::bind((address, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("finding a free port on {address}: {e}"))
}

/// The gateway's venv with the release's launcher files, installed on first
/// use (see the module doc).
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        PinnedVenv {
            name: "eg",
            package: EG_PACKAGE,
            version: EG_VERSION,
            // The stock launcher runs ipykernel from this venv; the
            // gateway itself does not depend on it. 6.29.5 is the newest
            // that takes the gateway's jupyter_client 6.
            install: Install::Resolve(&[IPYKERNEL]),
            // The launcher needs pycryptodomex and ipykernel beside the
            // gateway; the launcher files must be there too.
            probe: "import os, sys, Cryptodome, ipykernel, enterprise_gateway\n\
                    d = os.path.join(sys.prefix, 'share', 'retrace-eg')\n\
                    assert os.path.isfile(os.path.join(d, 'launch_ipykernel.py'))\n\
                    assert os.path.isfile(os.path.join(d, 'python_distributed.json'))\n\
                    print(enterprise_gateway.__version__)",
            after: launcher_steps,
        }
        .ensure()
    })
}

/// Fetches the release's source archive with pip and takes the Python
/// launcher and the `python_distributed` kernelspec out of it.
fn launcher_steps(venv: &Path) -> Vec<(&'static str, Command)> {
    let python = venv.join("bin").join("python");
    let dest = venv.join(LAUNCHERS);
    let sdist = dest.join("sdist");
    let mut download = Command::new(&python);
    download
        .args(["-m", "pip", "download", "--no-input", "--no-deps"])
        .args([
            "--no-binary",
            ":all:",
            &format!("{EG_PACKAGE}=={EG_VERSION}"),
            "-d",
        ])
        .arg(&sdist);
    let mut extract = Command::new(&python);
    extract.args(["-c", EXTRACT]).arg(&sdist).arg(&dest);
    vec![
        (
            "download the release's source archive (pip download)",
            download,
        ),
        ("take the launcher out of the source archive", extract),
    ]
}

/// `EXTRACT sdist_dir dest`: copies the two files out of the one archive
/// in `sdist_dir`, then removes that directory.
const EXTRACT: &str = r#"
import os, shutil, sys, tarfile
sdist, dest = sys.argv[1], sys.argv[2]
(archive,) = [f for f in os.listdir(sdist) if f.endswith(".tar.gz")]
wanted = {
    "etc/kernel-launchers/python/scripts/launch_ipykernel.py": "launch_ipykernel.py",
    "etc/kernelspecs/python_distributed/kernel.json": "python_distributed.json",
}
with tarfile.open(os.path.join(sdist, archive)) as tar:
    for member in tar.getmembers():
        inner = member.name.split("/", 1)[-1]
        if inner in wanted:
            with tar.extractfile(member) as src, open(os.path.join(dest, wanted.pop(inner)), "wb") as out:
                shutil.copyfileobj(src, out)
if wanted:
    sys.exit(f"not in {archive}: {sorted(wanted)}")
shutil.rmtree(sdist)
"#;
