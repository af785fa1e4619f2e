//! Starting an ipykernel process: its directories, its connection file with
//! `ipc://` sockets and a random key, a clean environment, and the drain of
//! its own stdout/stderr (a full pipe would block the kernel).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jupyter_protocol::connection_info::{ConnectionInfo, Transport};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use walkdir::WalkDir;

use super::KernelError;
use crate::pyenv::Image;
use crate::sandbox::{ExitInfo, Jail, KernelLayout, LaunchCommand};
use crate::util::nofollow;

/// How many lines of the kernel's own stderr are kept for error messages.
const STDERR_TAIL_LINES: usize = 40;
/// How much of each such line is kept.
const STDERR_LINE_BYTES: usize = 2000;

/// Everything needed to start kernels of one image.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub image: Image,
    /// Parent of the per-kernel directories.
    pub root: PathBuf,
    /// BLAS/OpenMP thread count, capped to the CPU limit.
    pub threads: u32,
    /// Files copied into each kernel's working directory.
    pub files: Vec<PathBuf>,
    /// Directories the kernel may read besides its image (the package
    /// store of the `dynamic` strategy).
    pub ro_binds: Vec<PathBuf>,
}

impl KernelSpec {
    pub fn new(image: Image, root: PathBuf) -> Self {
        Self {
            image,
            root,
            threads: 1,
            files: Vec::new(),
            ro_binds: Vec::new(),
        }
    }
}

/// The default parent of per-kernel directories. Short, because a unix
/// socket path must fit in 108 bytes.
pub fn default_kernel_root() -> PathBuf {
    std::env::temp_dir().join(format!("retrace-{}", nix::unistd::getuid()))
}

fn mkdir_private(path: &Path) -> Result<(), KernelError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| KernelError::io(format!("creating {}", path.display()), e))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
        .map_err(|e| KernelError::io(format!("chmod {}", path.display()), e))
}

/// Creates the directories of one kernel.
pub fn create_layout(spec: &KernelSpec, id: &str) -> Result<KernelLayout, KernelError> {
    // The root is shared by all kernels and must be reachable (x) by the
    // kernel user of a confined kernel, but not listable.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(&spec.root)
        .map_err(|e| KernelError::io(format!("creating {}", spec.root.display()), e))?;
    let base = spec.root.join(id);
    let layout = KernelLayout {
        id: id.to_string(),
        runtime_dir: base.join("rt"),
        work_dir: base.join("work"),
        home_dir: base.join("home"),
    };
    mkdir_private(&base)?;
    for dir in [&layout.runtime_dir, &layout.work_dir, &layout.home_dir] {
        mkdir_private(dir)?;
    }
    seed(spec, &layout)?;
    Ok(layout)
}

/// Makes the layout of a dead kernel as good as new before its restart, so
/// nothing the old kernel left can reach the new one: the working directory
/// and HOME (with `$IPYTHONDIR`) are recreated with the task files copied
/// anew; the runtime directory, which the kernel user owns and writes
/// (connection file, sockets), is emptied in place so its owner stays.
/// Nothing a planted symlink points to is touched. A confined kernel never
/// wrote the host's working directory or HOME (it had private copies), an
/// unconfined one did.
pub fn renew_layout(spec: &KernelSpec, layout: &KernelLayout) -> Result<(), KernelError> {
    let rt = &layout.runtime_dir;
    match fs::symlink_metadata(rt) {
        Ok(meta) if meta.is_dir() => nofollow::empty_dir(rt)
            .map_err(|e| KernelError::io(format!("emptying {}", rt.display()), e))?,
        _ => {
            nofollow::remove_entry(rt)
                .map_err(|e| KernelError::io(format!("removing {}", rt.display()), e))?;
            mkdir_private(rt)?;
        }
    }
    fs::set_permissions(rt, fs::Permissions::from_mode(0o700))
        .map_err(|e| KernelError::io(format!("chmod {}", rt.display()), e))?;
    for dir in [&layout.work_dir, &layout.home_dir] {
        nofollow::remove_entry(dir)
            .map_err(|e| KernelError::io(format!("removing {}", dir.display()), e))?;
        mkdir_private(dir)?;
    }
    seed(spec, layout)
}

/// Once the kernel has bound its sockets, its runtime directory becomes the
/// harness's and read-only to everyone else: the kernel can no longer swap a
/// socket for a link the harness's client would reconnect through, nor plant
/// anything there. For a restart the jail hands it back to the kernel user.
pub fn lock_runtime_dir(layout: &KernelLayout) -> Result<(), KernelError> {
    let rt = &layout.runtime_dir;
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    std::os::unix::fs::lchown(rt, Some(uid.as_raw()), Some(gid.as_raw()))
        .and_then(|()| fs::set_permissions(rt, fs::Permissions::from_mode(0o711)))
        .map_err(|e| KernelError::io(format!("locking {}", rt.display()), e))
}

/// retrace's code inside every kernel: answer reader and state inspector.
pub(super) const PROBE_SOURCE: &str = include_str!("probe.py");
/// Where the kernel finds it in its HOME (the installing cell removes it).
pub(super) const PROBE_FILE: &str = ".retrace-probe.py";
/// In the runtime directory: a forked kernel installed the probe itself
/// before it answered (zygote.py's `PROBE_MARKER`).
pub(super) const PROBE_MARKER: &str = "probe-installed";

/// Copies the task files into the working directory, the image's
/// matplotlib cache and retrace's probe into HOME.
fn seed(spec: &KernelSpec, layout: &KernelLayout) -> Result<(), KernelError> {
    let probe = layout.home_dir.join(PROBE_FILE);
    nofollow::create_new(&probe, 0o644)
        .and_then(|mut f| f.write_all(PROBE_SOURCE.as_bytes()))
        .map_err(|e| KernelError::io(format!("writing {}", probe.display()), e))?;
    for file in &spec.files {
        let name = file.file_name().ok_or_else(|| {
            KernelError::Launch(format!("task file {} has no file name", file.display()))
        })?;
        // The task file itself may be a link (it is the user's input); the
        // copy is a new file that nothing else holds.
        let dest = layout.work_dir.join(name);
        let copied = fs::File::open(file).and_then(|mut from| {
            let mut to = nofollow::create_new(&dest, 0o644)?;
            std::io::copy(&mut from, &mut to)
        });
        copied.map_err(|e| KernelError::io(format!("copying task file {}", file.display()), e))?;
    }
    if let Some(cache) = spec.image.mpl_cache() {
        copy_dir(&cache, &layout.home_dir.join(".mplconfig"))?;
    }
    Ok(())
}

/// Copies a directory tree; links and special files are left out.
pub(super) fn copy_dir(from: &Path, to: &Path) -> Result<(), KernelError> {
    for entry in WalkDir::new(from) {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(from).display().to_string();
            KernelError::io(format!("reading {at}"), e.into())
        })?;
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&target)
                .map_err(|e| KernelError::io(format!("creating {}", target.display()), e))?;
        } else if kind.is_file() {
            nofollow::copy(entry.path(), &target, 0o644)
                .map_err(|e| KernelError::io(format!("copying {}", target.display()), e))?;
        }
    }
    Ok(())
}

/// A fresh connection description: ipc sockets in the runtime directory and
/// a random HMAC key.
pub fn connection_info(layout: &KernelLayout) -> ConnectionInfo {
    ConnectionInfo {
        transport: Transport::IPC,
        ip: layout.runtime_dir.join("k").to_string_lossy().into_owned(),
        stdin_port: 1,
        control_port: 2,
        hb_port: 3,
        shell_port: 4,
        iopub_port: 5,
        signature_scheme: "hmac-sha256".into(),
        key: format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
        kernel_name: Some("retrace".into()),
    }
}

/// Socket files the kernel creates when it binds; the client waits for them.
pub fn socket_paths(info: &ConnectionInfo) -> Vec<PathBuf> {
    [info.shell_port, info.iopub_port, info.control_port]
        .iter()
        .map(|port| PathBuf::from(format!("{}-{}", info.ip, port)))
        .collect()
}

/// The command line and environment of one kernel: the image's own
/// (shared with its kernelspec) plus this kernel's HOME and the
/// directories under it.
pub fn launch_command(spec: &KernelSpec, layout: &KernelLayout, conn_file: &Path) -> LaunchCommand {
    let image = &spec.image;
    let mut env: Vec<(OsString, OsString)> = image
        .kernel_env(spec.threads)
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    env.extend([
        ("HOME".into(), layout.home_dir.as_os_str().to_owned()),
        ("IPYTHONDIR".into(), layout.home_dir.join(".ipython").into()),
        (
            "MPLCONFIGDIR".into(),
            layout.home_dir.join(".mplconfig").into(),
        ),
    ]);
    LaunchCommand {
        program: image.python(),
        args: image.kernel_args(conn_file.as_os_str()),
        env,
        image_dir: image.dir.clone(),
        ro_binds: spec.ro_binds.clone(),
        network: false,
    }
}

/// A running kernel process and what it has said on its own stderr.
pub struct KernelProcess {
    pub pid: i32,
    /// `Some` once the process has exited.
    pub exit: watch::Receiver<Option<ExitInfo>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl Drop for KernelProcess {
    fn drop(&mut self) {
        // A launch abandoned half-way (a cancelled task) must not leave the
        // process running. The jail kills the rest of its processes.
        if self.exit.borrow().is_none() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl KernelProcess {
    /// Spawns the kernel through its jail. The connection file must exist.
    pub fn spawn(
        jail: &dyn Jail,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<Self, KernelError> {
        let mut cmd = jail.command(launch, layout).map_err(KernelError::Sandbox)?;
        cmd.stdin(std::process::Stdio::null());
        let mut child = spawn_piped(cmd, launch)?;
        let stdout = child.stdout.take();
        Self::watch(child, stdout)
    }

    /// The zygote start (see `zygote.rs`): starts the jail's relay and PID 1,
    /// waits until PID 1 has built the kernel's view, has `fork` put a
    /// kernel into it (given PID 1's host pid, it returns the kernel's pid
    /// in the jail) and hands that pid to PID 1, which adopts it.
    /// `Ok(None)`: the jail cannot adopt, nothing was started.
    pub async fn spawn_adopted<F>(
        jail: &dyn Jail,
        launch: &LaunchCommand,
        layout: &KernelLayout,
        timeout: std::time::Duration,
        fork: F,
    ) -> Result<Option<Self>, AdoptError>
    where
        F: FnOnce(&crate::sandbox::ForkPlan, i32) -> Result<i32, String>,
    {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let Some(adoption) = jail
            .adopt(launch, layout)
            .map_err(|e| AdoptError::Jail(e.into()))?
        else {
            return Ok(None);
        };
        let began = std::time::Instant::now();
        let mut cmd = adoption.command;
        cmd.stdin(std::process::Stdio::piped());
        let mut child = spawn_piped(cmd, launch).map_err(AdoptError::Jail)?;
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take().map(tokio::io::BufReader::new);
        let mut line = String::new();
        let ready = match stdout.as_mut() {
            Some(out) => tokio::time::timeout(timeout, out.read_line(&mut line))
                .await
                .is_ok_and(|r| r.is_ok_and(|n| n > 0)),
            None => false,
        };
        let process = Self::watch(child, stdout).map_err(AdoptError::Jail)?;
        if !ready || line.trim_end() != crate::sandbox::init::READY_LINE {
            // PID 1 itself failed (it would have on the cold path too).
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            return Err(AdoptError::Jail(KernelError::Startup {
                message: format!("the kernel's init did not get ready: {:?}", line.trim_end()),
                stderr: process.stderr_tail(),
            }));
        }
        let jail_ready = began.elapsed();
        let handed = match pid1_of(jail) {
            Some(pid1) => fork(&adoption.plan, pid1),
            None => Err("the jail's PID 1 is not among its processes".into()),
        };
        tracing::debug!(
            kernel = %layout.id,
            jail_ms = jail_ready.as_secs_f64() * 1e3,
            fork_ms = (began.elapsed() - jail_ready).as_secs_f64() * 1e3,
            "zygote start: jail ready, kernel forked"
        );
        match handed {
            Ok(pid) => {
                let sent = match stdin.as_mut() {
                    Some(pipe) => pipe.write_all(format!("{pid}\n").as_bytes()).await,
                    None => Err(std::io::ErrorKind::BrokenPipe.into()),
                };
                drop(stdin);
                sent.map_err(|e| {
                    AdoptError::Jail(KernelError::io("handing the kernel to its init", e))
                })?;
                Ok(Some(process))
            }
            // Nothing of a kernel exists: the caller ends the jail's init
            // (dropping its stdin makes it exit) and starts cold.
            Err(reason) => Err(AdoptError::Zygote(reason)),
        }
    }

    fn watch<O>(mut child: tokio::process::Child, stdout: Option<O>) -> Result<Self, KernelError>
    where
        O: AsyncRead + Unpin + Send + 'static,
    {
        let pid = child.id().map(|p| p as i32).ok_or_else(|| {
            KernelError::Launch("the kernel process exited before it could be watched".into())
        })?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = stdout {
            tokio::spawn(drain(out, stderr_tail.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(drain(err, stderr_tail.clone()));
        }
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let info = match child.wait().await {
                Ok(status) => ExitInfo::from_status(status),
                Err(_) => ExitInfo {
                    code: None,
                    signal: None,
                    signal_name: None,
                },
            };
            let _ = tx.send(Some(info));
        });
        Ok(Self {
            pid,
            exit: rx,
            stderr_tail,
        })
    }

    pub fn exited(&self) -> Option<ExitInfo> {
        self.exit.borrow().clone()
    }

    /// The last lines the process wrote to its own stdout/stderr.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap();
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Why a zygote start did not happen.
#[derive(Debug)]
pub enum AdoptError {
    /// The jail failed as it would have on the cold path: the start fails.
    Jail(KernelError),
    /// The zygote could not serve: the caller falls back to the cold path.
    Zygote(String),
}

fn spawn_piped(
    mut cmd: tokio::process::Command,
    launch: &LaunchCommand,
) -> Result<tokio::process::Child, KernelError> {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(false);
    cmd.spawn()
        .map_err(|e| KernelError::io(format!("starting {}", launch.program.display()), e))
}

/// The host pid of the jail's PID 1: the one of its processes that is pid 1
/// in its own namespace (`NSpid` ends in 1).
fn pid1_of(jail: &dyn Jail) -> Option<i32> {
    jail.live_processes().into_iter().find(|pid| {
        fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .is_some_and(|ids| {
                    let ids: Vec<&str> = ids.split_whitespace().collect();
                    ids.len() > 1 && ids.last() == Some(&"1")
                })
        })
    })
}

/// Reads a pipe to its end, keeping the last lines. Reads are in fixed
/// chunks and each line keeps at most [`STDERR_LINE_BYTES`], so a line of
/// gigabytes without a newline costs no more memory than a short one.
async fn drain<R: AsyncRead + Unpin>(mut pipe: R, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut chunk = vec![0u8; 8192];
    let mut line = BoundedLine::default();
    let keep = |text: String| {
        let mut tail = tail.lock().unwrap();
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        line.feed(&chunk[..n], keep);
    }
    if let Some(last) = line.take() {
        keep(last);
    }
}

/// The line being read from a pipe: its first [`STDERR_LINE_BYTES`] bytes
/// and a count of the rest.
#[derive(Debug, Default)]
struct BoundedLine {
    head: Vec<u8>,
    dropped: u64,
}

impl BoundedLine {
    /// Adds bytes; every line they complete goes to `done`.
    fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(String)) {
        while let Some(end) = data.iter().position(|&b| b == b'\n') {
            self.push(&data[..end]);
            done(self.take().unwrap_or_default());
            data = &data[end + 1..];
        }
        self.push(data);
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = STDERR_LINE_BYTES.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        self.dropped += (bytes.len() - take) as u64;
    }

    /// The line so far, if it has anything, and a fresh start.
    fn take(&mut self) -> Option<String> {
        if self.head.is_empty() && self.dropped == 0 {
            return None;
        }
        let mut text = String::from_utf8_lossy(&self.head).trim_end().to_string();
        if self.dropped > 0 {
            text.push_str(&format!(" [... {} bytes dropped]", self.dropped));
        }
        self.head.clear();
        self.dropped = 0;
        Some(text)
    }
}

/// Writes the connection file, readable only by its owner. The kernel user
/// can write the runtime directory: whatever has the file's name there (a
/// planted symlink to a host file) is removed, never written through.
pub fn write_connection_file(
    layout: &KernelLayout,
    info: &ConnectionInfo,
) -> Result<PathBuf, KernelError> {
    let path = layout.runtime_dir.join("kernel.json");
    let text = serde_json::to_string_pretty(info)
        .map_err(|e| KernelError::Launch(format!("encoding connection file: {e}")))?;
    nofollow::remove_entry(&path)
        .and_then(|()| nofollow::create_new(&path, 0o600))
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| KernelError::io(format!("writing {}", path.display()), e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_line_without_newline_is_bounded() {
        let mut line = BoundedLine::default();
        let mut lines = Vec::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            line.feed(&chunk, |l| lines.push(l));
            assert!(line.head.len() <= STDERR_LINE_BYTES);
        }
        assert!(lines.is_empty());
        line.feed(b"\nnext line\npartial", |l| lines.push(l));
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0].len(),
            STDERR_LINE_BYTES + " [... 67106864 bytes dropped]".len()
        );
        assert!(
            lines[0].ends_with("[... 67106864 bytes dropped]"),
            "{}",
            &lines[0][1990..]
        );
        assert_eq!(lines[1], "next line");
        assert_eq!(line.take().as_deref(), Some("partial"));
        assert_eq!(line.take(), None);
    }

    #[tokio::test]
    async fn drain_keeps_the_last_lines_only() {
        let mut text = Vec::new();
        for i in 0..100 {
            text.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        text.extend(std::iter::repeat_n(b'y', 3 << 20));
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        drain(&text[..], tail.clone()).await;
        let tail = tail.lock().unwrap();
        assert_eq!(tail.len(), STDERR_TAIL_LINES);
        assert_eq!(tail[0], "line 61");
        assert!(tail.back().unwrap().ends_with("bytes dropped]"));
        let kept: usize = tail.iter().map(String::len).sum();
        assert!(kept < STDERR_TAIL_LINES * (STDERR_LINE_BYTES + 40));
    }
}
