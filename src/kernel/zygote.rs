//! The zygote start: fresh confined kernels forked from a Python process
//! that has already imported the image's libraries (the pattern of
//! Android's zygote and of the fork servers of sandboxed judges).
//!
//! The default (`KernelOptions::start`, `--kernel-start`,
//! `RETRACE_KERNEL_START`); `cold` is asked for by name, and is what an
//! unconfined kernel or a zygote that cannot serve falls back to.
//!
//! ```text
//! harness ──JSON lines──► zygote (root, host namespaces, own cgroup;
//!    │                     numpy/pandas/matplotlib/ipykernel imported,
//!    │                     gc frozen, one thread, never runs task code)
//!    │                      └─ C: joins the kernel's cgroups, setns into
//!    │                           PID 1's ipc/uts/net/cgroup/pid/mnt namespaces
//!    │                           └─ G1 (in the jail's PID namespace): forks, exits
//!    │                               └─ G: setsid, OOM score, rlimits, uid/gid,
//!    │                                     no_new_privs, cwd, env, RNG re-seed,
//!    │                                     seccomp last, then ipykernel
//!    └─ relay ─ PID 1 (builds the view, prints `ready`, reads G's pid from
//!                      stdin, reaps it and forwards signals, as on the cold path)
//! ```
//!
//! Why the extra fork (G1): an orphan is re-parented to the reaper of its
//! *parent's* PID namespace; C has only entered the jail's namespace for its
//! children, so a kernel forked by C directly would go to the host's init
//! when C exits. G1 lives in the jail's namespace, so G goes to the jail's
//! PID 1, which reaps it and mirrors its end to the relay: the harness sees
//! the kernel's exit status exactly as on the cold path.
//!
//! The jail is created as today (cgroup, identity, relay, PID 1 and its
//! filesystem view); only the last step, fork + `become_kernel` + exec,
//! moves to the zygote, which applies the same facts
//! ([`ForkPlan`](crate::sandbox::ForkPlan)): the syscall filter is the very
//! program the cold path compiles, passed as raw `sock_filter` bytes. The
//! zygote never sees the kernel's HMAC key (only the connection file's
//! path, which the kernel reads after it has dropped root).
//!
//! Differences from a cold kernel, on purpose or unavoidable: the
//! preloaded modules (numpy, pandas, matplotlib with pyplot, ipykernel's
//! modules; not scipy, whose mappings made every fork of a kernel dearer)
//! are already in `sys.modules` (their import-time state came from
//! the zygote, e.g. matplotlib's font list, and what they and the image's
//! kernel config put into the environment is set again in each kernel);
//! ipykernel's application has parsed its command line and config files
//! in the zygote (each kernel then sets its own connection file, IPython
//! profile under its own `$IPYTHONDIR` and crash handler, and runs the
//! rest of ipykernel's start); BLAS runs one thread (the
//! zygote must be single-threaded when it forks, so kernels whose spec asks
//! for more threads are refused and start cold); `hash()` randomisation is
//! shared by siblings (CPython fixes it at interpreter start) while
//! `random`, numpy's global state and everything built on `os.urandom`
//! differ; `/proc/self/cmdline` and `/proc/self/environ` show the
//! zygote's (`python -c <this program>`, the kernel's environment with the
//! zygote's HOME: nothing secret). The zygote's cgroup is charged for the
//! shared pages; what a kernel writes (copy-on-write included) is charged to
//! the kernel. A kernel's children inherit the preloaded mappings, so a fork
//! storm in a zygote kernel reaches the memory limit sooner than in a cold
//! one (more page tables and copies per child).
//!
//! ipykernel's application is parsed once in the zygote, and its kernel's
//! IPython shell (magics, formatters, completer, traceback handlers) built
//! there once; each kernel's `IPythonKernel` gets that shell from the
//! singleton and gives it its own kernel, profile, HOME, working directory
//! and streams (`adopt_shell` in zygote.py; `tests/kernel_zygote.rs`
//! compares the shell of a cold and a zygote kernel from inside). About
//! 25 ms less per start (Python side, measured unconfined). retrace's
//! probe is compiled there once too, and each kernel installs it itself
//! after ipykernel's `initialize` and before `start` (`install_probe` in
//! zygote.py: the installing cell's steps, inside the shell's builtin
//! trap), leaving a marker in its runtime directory; the harness then sends
//! no installing cell (one round trip less per start), and sends it when
//! the marker is missing. Last, the zygote asks for transparent
//! huge pages under its heap (`huge_pages` in zygote.py, where the host's
//! THP mode is `madvise` or `always`): a fork then copies one page-table
//! entry per 2 MiB, which made a fork of the fat zygote 4 ms instead of
//! 11 ms, for each of a start's three forks and for every fork a kernel's
//! code makes; a kernel that writes into a shared huge page copies only the
//! 4 KiB it wrote (its private memory measured the same).
//!
//! Status (2026-12-02): confined kernels only (`tests/kernel_zygote.rs`
//! compares cold and zygote kernels from inside and checks sibling
//! isolation and the fallback). Measured (`benches/kernel_start.rs`,
//! release, quiet machine): ready in 94 ms against 467 ms cold, first cell
//! with numpy/pandas/pyplot in 107 ms against 1218 ms, 21.0 MiB private
//! per kernel against 88 MiB (issue 14's ≤ 30 MB and ≤ 100 ms goals met; what
//! remains of a start is the jail, three forks and ipykernel's sockets,
//! threads and IO loop). The whole hostile corpus passes on zygote kernels
//! (`tests/sandbox_corpus.rs` runs it both ways); fork bombs take longer
//! to kill than in cold kernels. This is the default start path
//! (`KernelStart::default()`); unconfined kernels start cold (no jail PID 1
//! to adopt a forked kernel).
//!
//! Fallback: when the zygote cannot serve (it failed to start, died or
//! refused, or the sandbox cannot adopt a forked kernel, as without
//! confinement), the kernel starts cold and [`StartPath::Fallback`] and the
//! log say why. A dead zygote is replaced at the next start. One zygote per
//! image and harness process; [`shutdown_all`] ends them (the CLI calls it
//! on exit), and a zygote whose harness is gone sees EOF and exits.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::claim::{claim, release};
use super::layout::copy_dir;
use super::probe::{PROBE_FILE, PROBE_SOURCE};
use super::spec::{launch_command, KernelSpec};
use crate::sandbox::{ForkPlan, KernelCgroup, KernelLayout, Sandbox};

/// The zygote's program (`python -c`).
const SOURCE: &str = include_str!("zygote.py");

/// How long a zygote may take to import the image's libraries.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one fork may take.
const FORK_TIMEOUT: Duration = Duration::from_secs(10);

/// How one kernel was actually started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPath {
    Cold,
    Zygote,
    /// Zygote asked for, cold used; why.
    Fallback(String),
}

/// The zygote could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ZygoteError {
    #[error("zygote of {image}: {message}")]
    Failed { image: PathBuf, message: String },
}

fn failed(image: &Path, message: impl Into<String>) -> ZygoteError {
    ZygoteError::Failed {
        image: image.to_path_buf(),
        message: message.into(),
    }
}

/// The zygote of one image in this harness process.
pub struct Zygote {
    image: PathBuf,
    running: Mutex<Option<Running>>,
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    group: Option<KernelCgroup>,
    home: PathBuf,
    stderr: Arc<Mutex<VecDeque<String>>>,
    ready: Option<Ready>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        if let Some(group) = &self.group {
            group.kill_all(None);
            let _ = group.remove();
        }
        let _ = self.child.wait();
        release(&self.home);
    }
}

/// What a zygote said when it was ready.
#[derive(Debug, Clone, Deserialize)]
pub struct Ready {
    pub pid: i32,
    /// The modules it imported before forking.
    #[serde(default)]
    pub preloaded: Vec<String>,
    /// Whether ipykernel's application was parsed once for all kernels.
    #[serde(default)]
    pub app_prepared: bool,
    /// Whether the kernel's IPython shell was built once for all kernels.
    #[serde(default)]
    pub shell_prebuilt: bool,
    /// Whether retrace's probe was compiled once for all kernels.
    #[serde(default)]
    pub probe_compiled: bool,
    /// Its anonymous memory on transparent huge pages (cheaper forks).
    #[serde(default)]
    pub huge_pages_mib: u64,
    #[serde(default)]
    pub threads: u32,
}

#[derive(Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    pid: i32,
    #[serde(default)]
    error: String,
    /// Where the fork's time went, in ms since the zygote forked.
    #[serde(default)]
    ms: std::collections::BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct Request<'a> {
    #[serde(flatten)]
    plan: &'a ForkPlan,
    pid1: i32,
}

static ZYGOTES: Mutex<Vec<Arc<Zygote>>> = Mutex::new(Vec::new());

extern "C" fn at_exit() {
    shutdown_all();
}

/// A process that exits without calling [`shutdown_all`] (a test binary)
/// still ends its zygotes and removes their cgroups.
// atexit(3) has no safe wrapper; the block says why it is sound.
#[allow(unsafe_code)]
fn end_zygotes_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain function that takes no arguments. It
        // takes this module's locks; a fork still under way on another
        // thread holds one at most FORK_TIMEOUT.
        unsafe {
            libc::atexit(at_exit);
        }
    });
}

/// The zygote of `spec`'s image, started (or restarted, if it died) now.
/// Blocks while it starts (about a second for a fat image).
pub fn for_spec(spec: &KernelSpec, sandbox: &dyn Sandbox) -> Result<Arc<Zygote>, ZygoteError> {
    for_spec_then(spec, sandbox, || ())
}

/// [`for_spec`], calling `queued` once this call holds the zygote's lock
/// or waits behind whoever holds it (a start or a fork under way): from
/// then on, a later caller waits for what this call or that one does.
fn for_spec_then(
    spec: &KernelSpec,
    sandbox: &dyn Sandbox,
    queued: impl FnOnce(),
) -> Result<Arc<Zygote>, ZygoteError> {
    let image = spec.image.dir.clone();
    if !sandbox.info().confined {
        return Err(failed(
            &image,
            "refused: only confined kernels are forked (the unconfined path has no jail PID 1 to adopt them)",
        ));
    }
    end_zygotes_at_exit();
    let zygote = {
        let mut all = ZYGOTES.lock().unwrap_or_else(PoisonError::into_inner);
        match all.iter().find(|z| z.image == image) {
            Some(z) => z.clone(),
            None => {
                let z = Arc::new(Zygote {
                    image: image.clone(),
                    running: Mutex::new(None),
                });
                all.push(z.clone());
                z
            }
        }
    };
    {
        // Held, or someone else holds it and this call comes next.
        let attempt = zygote.running.try_lock();
        queued();
        let mut running = match attempt {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => zygote.lock(),
        };
        let alive = running
            .as_mut()
            .is_some_and(|r| matches!(r.child.try_wait(), Ok(None)));
        if !alive {
            if let Some(dead) = running.take() {
                tracing::warn!(image = %image.display(), stderr = %dead.stderr_tail(), "the zygote died; starting a new one");
            }
            *running = Some(start(spec, sandbox)?);
        }
    }
    Ok(zygote)
}

/// Starts the zygote of `spec`'s image on a thread of its own and returns
/// at once, so that its start (about 1.5 s for the fat image) overlaps
/// whatever the caller does before its first kernel. That kernel's
/// [`for_spec`] waits for this start rather than making its own; if it
/// fails, the kernel's `for_spec` tries again and falls back as usual.
/// Nothing is started for an unconfined sandbox (its kernels start cold).
pub fn start_early(spec: KernelSpec, sandbox: Arc<dyn Sandbox>) {
    if !sandbox.info().confined {
        return;
    }
    // Take the zygote's lock before returning: a kernel that asks right
    // after this call then waits for this start instead of racing it.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("zygote-start".into())
        .spawn(move || {
            let started = Instant::now();
            let result = for_spec_then(&spec, sandbox.as_ref(), || {
                let _ = ready_tx.send(());
            });
            match result {
                Ok(_) => tracing::debug!(
                    image = %spec.image.dir.display(),
                    ms = started.elapsed().as_millis() as u64,
                    "zygote started early"
                ),
                Err(e) => tracing::warn!(error = %e, "the zygote did not start early"),
            }
        });
    match spawned {
        Ok(_) => {
            let _ = ready_rx.recv();
        }
        Err(e) => tracing::warn!(error = %e, "no thread to start the zygote early"),
    }
}

/// The zygote of the image in `image_dir`, if this process asked for one
/// (started, starting or dead); never starts one.
pub fn of_image(image_dir: &Path) -> Option<Arc<Zygote>> {
    let all = ZYGOTES.lock().unwrap_or_else(PoisonError::into_inner);
    all.iter().find(|z| z.image == image_dir).cloned()
}

/// Ends every zygote of this process and removes their cgroups.
pub fn shutdown_all() {
    let all: Vec<Arc<Zygote>> =
        std::mem::take(&mut *ZYGOTES.lock().unwrap_or_else(PoisonError::into_inner));
    for zygote in all {
        zygote.lock().take();
    }
}

impl Zygote {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The zygote's host pid, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.lock().as_ref().map(|r| r.child.id() as i32)
    }

    /// What it said when it was ready, while it runs.
    pub fn ready(&self) -> Option<Ready> {
        self.lock().as_ref().and_then(|r| r.ready.clone())
    }

    /// Forks a kernel into the jail whose PID 1 has host pid `pid1`;
    /// returns the kernel's pid in the jail's namespace. One fork at a
    /// time. A zygote that does not answer in time is killed.
    pub fn fork(&self, plan: &ForkPlan, pid1: i32) -> Result<i32, ZygoteError> {
        let mut guard = self.lock();
        let Some(running) = guard.as_mut() else {
            return Err(failed(&self.image, "not running"));
        };
        let mut line = serde_json::to_vec(&Request { plan, pid1 })
            .map_err(|e| failed(&self.image, format!("encoding the request: {e}")))?;
        line.push(b'\n');
        let answer = running
            .stdin
            .write_all(&line)
            .and_then(|()| running.stdin.flush())
            .map_err(Silence::Write)
            .and_then(|()| read_line(&mut running.stdout, FORK_TIMEOUT));
        let text = match answer {
            Ok(text) => text,
            Err(e) => {
                let tail = running.stderr_tail();
                // Dropping it kills it; the next start makes a new one.
                guard.take();
                return Err(failed(&self.image, format!("{e}; its stderr: {tail}")));
            }
        };
        let reply: Reply = serde_json::from_str(&text)
            .map_err(|e| failed(&self.image, format!("bad reply {text:?}: {e}")))?;
        if !reply.ok || reply.pid <= 1 {
            return Err(failed(&self.image, reply.error));
        }
        tracing::debug!(pid = reply.pid, ms = ?reply.ms, "zygote forked a kernel");
        Ok(reply.pid)
    }
}

impl Running {
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Starts the image's zygote and waits until it has imported the image's
/// libraries and says it is ready.
fn start(spec: &KernelSpec, sandbox: &dyn Sandbox) -> Result<Running, ZygoteError> {
    let image = &spec.image.dir;
    let id = format!("z{}", &uuid::Uuid::new_v4().simple().to_string()[..11]);
    let home = claim(&spec.root, &id).map_err(|e| {
        failed(
            image,
            format!("claiming a directory in {}: {e}", spec.root.display()),
        )
    })?;
    let launch = match prepare_home(spec, &id, &home) {
        Ok(launch) => launch,
        Err(e) => {
            release(&home);
            return Err(e);
        }
    };
    let group = match sandbox.helper_group(&id) {
        Ok(group) => group,
        Err(e) => {
            release(&home);
            return Err(failed(image, format!("its cgroup: {e}")));
        }
    };
    let mut child = match spawn(image, &launch, &home, group.as_ref()) {
        Ok(child) => child,
        Err(e) => {
            if let Some(group) = &group {
                let _ = group.remove();
            }
            release(&home);
            return Err(e);
        }
    };
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(pipe) = child.stderr.take() {
        let tail = stderr.clone();
        std::thread::spawn(move || keep_tail(pipe, tail));
    }
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(failed(image, "no pipes"));
    };
    let running = Running {
        child,
        stdin,
        stdout: BufReader::new(stdout),
        group,
        home,
        stderr,
        ready: None,
    };
    await_ready(image, running)
}

/// The zygote's own HOME (the image's matplotlib cache, retrace's probe)
/// and the command line of the kernels it forks.
fn prepare_home(
    spec: &KernelSpec,
    id: &str,
    home: &Path,
) -> Result<crate::sandbox::LaunchCommand, ZygoteError> {
    let image = &spec.image.dir;
    let io = |what: &str, e: std::io::Error| failed(image, format!("{what}: {e}"));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home)
        .map_err(|e| io(&format!("creating {}", home.display()), e))?;
    // The kernel's environment with the zygote's own HOME: matplotlib
    // finds the image's font cache there and never rebuilds it.
    let layout = KernelLayout {
        id: id.to_string(),
        runtime_dir: home.to_path_buf(),
        work_dir: home.to_path_buf(),
        home_dir: home.to_path_buf(),
    };
    if let Some(cache) = spec.image.mpl_cache() {
        copy_dir(&cache, &home.join(".mplconfig")).map_err(|e| failed(image, e.to_string()))?;
    }
    // retrace's probe, compiled once by the zygote for every kernel's
    // installing cell (compiling it was a third of that cell).
    fs::write(home.join(PROBE_FILE), PROBE_SOURCE).map_err(|e| io("writing the probe", e))?;
    // One BLAS thread: OpenBLAS starts its pool when numpy is imported, and
    // the zygote must have a single thread when it forks.
    let single = KernelSpec {
        threads: 1,
        ..spec.clone()
    };
    let mut command = launch_command(&single, &layout, Path::new("/dev/null"));
    // Room in the zygote's environment block, which each forked kernel
    // overwrites with its own environment (zygote.py,
    // `_rewrite_environ_block`): /proc/self/environ then shows a kernel what
    // a cold one sees, never the zygote's.
    command
        .env
        .push((ENV_ROOM_VAR.into(), "_".repeat(ENV_ROOM).into()));
    Ok(command)
}

const ENV_ROOM_VAR: &str = "RETRACE_ZYGOTE_ENV_ROOM";
const ENV_ROOM: usize = 8192;

/// Spawns the zygote's interpreter inside its own cgroup (`group`),
/// joined between fork and exec.
// pre_exec (between fork and exec) is unsafe by nature; the block says why it is sound.
#[allow(unsafe_code)]
fn spawn(
    image: &Path,
    launch: &crate::sandbox::LaunchCommand,
    home: &Path,
    group: Option<&KernelCgroup>,
) -> Result<Child, ZygoteError> {
    let io = |what: &str, e: std::io::Error| failed(image, format!("{what}: {e}"));
    let procs: Vec<fs::File> = group
        .iter()
        .flat_map(|g| g.procs_files())
        .map(|p| fs::OpenOptions::new().write(true).open(&p))
        .collect::<Result<_, _>>()
        .map_err(|e| io("opening its cgroup", e))?;
    let mut cmd = std::process::Command::new(&launch.program);
    // The kernel's own arguments (with the zygote's connection file): the
    // zygote parses them once for all its kernels.
    cmd.arg("-c")
        .arg(SOURCE)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs between fork and exec and only makes the
    // async-signal-safe call write(2).
    unsafe {
        cmd.pre_exec(move || {
            for file in &procs {
                if libc::write(file.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| io(&format!("starting {}", launch.program.display()), e))
}

/// Waits for the zygote's `ready` line; a zygote with more than one thread
/// after its imports cannot fork kernels.
fn await_ready(image: &Path, mut running: Running) -> Result<Running, ZygoteError> {
    let started = Instant::now();
    let ready = read_line(&mut running.stdout, START_TIMEOUT).and_then(|text| {
        serde_json::from_str::<Ready>(&text).map_err(|source| Silence::NotJson { text, source })
    });
    match ready {
        Ok(ready) if ready.threads == 1 => {
            tracing::info!(
                image = %image.display(),
                pid = ready.pid,
                ms = started.elapsed().as_millis() as u64,
                preloaded = %ready.preloaded.join(","),
                app_prepared = ready.app_prepared,
                shell_prebuilt = ready.shell_prebuilt,
                probe_compiled = ready.probe_compiled,
                huge_pages_mib = ready.huge_pages_mib,
                "zygote ready"
            );
            running.ready = Some(ready);
            Ok(running)
        }
        Ok(ready) => Err(failed(
            image,
            format!(
                "{} threads after its imports (a fork would lose them)",
                ready.threads
            ),
        )),
        Err(e) => {
            // Let the drain collect its last words.
            std::thread::sleep(Duration::from_millis(50));
            Err(failed(
                image,
                format!("did not start: {e}; its stderr: {}", running.stderr_tail()),
            ))
        }
    }
}

/// Why the zygote's answer did not come.
#[derive(Debug, thiserror::Error)]
enum Silence {
    #[error("writing to it: {0}")]
    Write(#[source] std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("reading: {0}")]
    Read(#[source] std::io::Error),
    #[error("it exited")]
    Exited,
    #[error("{text:?}: {source}")]
    NotJson {
        text: String,
        source: serde_json::Error,
    },
}

/// One line from the zygote, waiting at most `timeout`.
fn read_line(reader: &mut BufReader<ChildStdout>, timeout: Duration) -> Result<String, Silence> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    loop {
        if reader.buffer().is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !readable(reader.get_ref(), left) {
                return Err(Silence::Timeout(timeout));
            }
        }
        let available = reader.fill_buf().map_err(Silence::Read)?;
        if available.is_empty() {
            return Err(Silence::Exited);
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(end) => {
                line.extend_from_slice(&available[..end]);
                reader.consume(end + 1);
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            None => {
                let n = available.len();
                line.extend_from_slice(available);
                reader.consume(n);
            }
        }
    }
}

/// Whether `pipe` has data (or EOF) within `timeout`.
fn readable(pipe: &ChildStdout, timeout: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
    loop {
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) => return n > 0,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

fn keep_tail(mut pipe: impl Read, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(&mut pipe);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == 40 {
            tail.pop_front();
        }
        tail.push_back(line.trim_end().chars().take(2000).collect());
        line.clear();
    }
}
