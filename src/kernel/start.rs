//! Starting a kernel, in order: its directories, its connection file with
//! `ipc://` sockets and a random key, a clean environment, its process
//! (forked by the image's zygote or cold), then the handshake and
//! retrace's probe. Restarts go through the same steps in the same jail.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jupyter_protocol::connection_info::{ConnectionInfo, Transport};
use walkdir::WalkDir;

use super::capture::OutputCap;
use super::client::{wait_for_sockets, Channels, WireCap};
use super::execution::ms;
use super::options::{KernelBanner, KernelOptions};
use super::process::{AdoptError, KernelProcess};
use super::requests::{handshake, install_probe, probe_from_home};
use super::zygote::{StartPath, Zygote};
use super::KernelError;
use crate::pyenv::Image;
use crate::sandbox::{Jail, KernelLayout, LaunchCommand};
use crate::util::{nofollow, IoContext};

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
        .at("creating", path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).at("chmod", path)?;
    Ok(())
}

/// Creates the directories of one kernel.
pub fn create_layout(spec: &KernelSpec, id: &str) -> Result<KernelLayout, KernelError> {
    // The root is shared by all kernels and must be reachable (x) by the
    // kernel user of a confined kernel, but not listable.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(&spec.root)
        .at("creating", &spec.root)?;
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
        Ok(meta) if meta.is_dir() => nofollow::empty_dir(rt).at("emptying", rt)?,
        _ => {
            nofollow::remove_entry(rt).at("removing", rt)?;
            mkdir_private(rt)?;
        }
    }
    fs::set_permissions(rt, fs::Permissions::from_mode(0o700)).at("chmod", rt)?;
    for dir in [&layout.work_dir, &layout.home_dir] {
        nofollow::remove_entry(dir).at("removing", dir)?;
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
        .at("locking", rt)?;
    Ok(())
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
        .at("writing", &probe)?;
    for file in &spec.files {
        let name = file
            .file_name()
            .ok_or_else(|| KernelError::TaskFileName(file.clone()))?;
        // The task file itself may be a link (it is the user's input); the
        // copy is a new file that nothing else holds.
        let dest = layout.work_dir.join(name);
        let copied = fs::File::open(file).and_then(|mut from| {
            let mut to = nofollow::create_new(&dest, 0o644)?;
            std::io::copy(&mut from, &mut to)
        });
        copied.at("copying task file", file)?;
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
            KernelError::Io(crate::util::IoError::new(format!("reading {at}"), e.into()))
        })?;
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&target).at("creating", &target)?;
        } else if kind.is_file() {
            nofollow::copy(entry.path(), &target, 0o644).at("copying", &target)?;
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

/// Writes the connection file, readable only by its owner. The kernel user
/// can write the runtime directory: whatever has the file's name there (a
/// planted symlink to a host file) is removed, never written through.
pub fn write_connection_file(
    layout: &KernelLayout,
    info: &ConnectionInfo,
) -> Result<PathBuf, KernelError> {
    let path = layout.runtime_dir.join("kernel.json");
    let text = serde_json::to_string_pretty(info).map_err(|source| KernelError::Encode {
        what: "the connection file",
        source,
    })?;
    nofollow::remove_entry(&path)
        .and_then(|()| nofollow::create_new(&path, 0o600))
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .at("writing", &path)?;
    Ok(path)
}

/// Resolves once the process has exited (or its waiter is gone).
pub(super) async fn wait_exit(
    exit: &mut tokio::sync::watch::Receiver<Option<crate::sandbox::ExitInfo>>,
) {
    let _ = exit.wait_for(|e| e.is_some()).await;
}

/// Removes the kernel's directories; std's `remove_dir_all` removes a
/// symlink planted inside, never what it points to.
pub(super) fn remove_layout(spec: &KernelSpec, layout: &KernelLayout) {
    let _ = std::fs::remove_dir_all(spec.root.join(&layout.id));
}

/// Runs blocking work (a zygote's answer) without stalling the other
/// tasks of a multi-threaded runtime.
pub(super) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Starts the kernel process: forked by `zygote` when there is one and it
/// serves, else cold.
async fn start_process(
    jail: &dyn Jail,
    command: &crate::sandbox::LaunchCommand,
    layout: &KernelLayout,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, StartPath), KernelError> {
    let Some(zygote) = zygote else {
        return Ok((
            KernelProcess::spawn(jail, command, layout)?,
            StartPath::Cold,
        ));
    };
    let fork = |plan: &crate::sandbox::ForkPlan, pid1: i32| blocking(|| zygote.fork(plan, pid1));
    // Whatever the attempt started (the jail's init, half a kernel) goes
    // before the cold start in the same jail.
    let unserved = |reason: String| {
        blocking(|| jail.kill_all(None));
        reason
    };
    let reason =
        match KernelProcess::spawn_adopted(jail, command, layout, options.startup_timeout, fork)
            .await
        {
            Ok(Some(process)) => return Ok((process, StartPath::Zygote)),
            Ok(None) => "this sandbox cannot adopt a forked kernel".to_string(),
            Err(AdoptError::Jail(e)) => return Err(e),
            Err(AdoptError::NoPid1) => {
                unserved("the jail's PID 1 is not among its processes".into())
            }
            Err(AdoptError::Zygote(e)) => unserved(e.to_string()),
        };
    tracing::warn!(kernel = %layout.id, reason = %reason, "the zygote cannot serve; starting cold");
    let process = KernelProcess::spawn(jail, command, layout)?;
    Ok((process, StartPath::Fallback(reason)))
}

/// Starts the kernel process in its jail and waits for `kernel_info_reply`.
pub(super) async fn launch(
    spec: &KernelSpec,
    layout: &KernelLayout,
    jail: &dyn Jail,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, Channels, KernelBanner, StartPath), KernelError> {
    let timeout = options.startup_timeout;
    let wire = wire_cap(spec, layout, &options.output_cap)?;
    let info = connection_info(layout);
    for path in socket_paths(&info) {
        let _ = std::fs::remove_file(path);
    }
    let conn_file = write_connection_file(layout, &info)?;
    let command = launch_command(spec, layout, &conn_file);
    let (process, path) = start_process(jail, &command, layout, options, zygote).await?;
    let mut exit = process.exit.clone();
    let handshake = async {
        // Where a start spends its time, for `-vv` and the start benchmarks.
        let began = Instant::now();
        wait_for_sockets(&socket_paths(&info)).await;
        let sockets = began.elapsed();
        let mut channels = Channels::connect(&info, &wire).await?;
        let mut banner = handshake(&mut channels).await?;
        let answered = began.elapsed();
        lock_runtime_dir(layout)?;
        // Taken away whatever the path: a forked kernel killed for a cold
        // fallback in the same jail may have left one.
        let marked = take_probe_marker(layout)?;
        banner.probe_preinstalled = path == StartPath::Zygote && marked;
        if !banner.probe_preinstalled {
            install_probe(&mut channels, &probe_from_home()).await?;
        }
        tracing::debug!(
            kernel = %layout.id,
            sockets_ms = ms(sockets),
            kernel_info_ms = ms(answered - sockets),
            probe_ms = ms(began.elapsed() - answered),
            probe_preinstalled = banner.probe_preinstalled,
            "kernel answering"
        );
        Ok::<_, KernelError>((channels, banner))
    };
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, handshake) => match r {
            Ok(r) => r,
            Err(_) => Err(KernelError::Startup {
                message: format!("no kernel_info_reply within {:?}", timeout),
                stderr: process.stderr_tail(),
            }),
        },
        _ = wait_exit(&mut exit) => {
            // Let the drain tasks collect the last words.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(KernelError::Startup {
                message: format!("the kernel process exited during startup ({:?})", process.exited()),
                stderr: process.stderr_tail(),
            })
        }
    };
    match result {
        Ok((channels, banner)) => Ok((process, channels, banner, path)),
        Err(e) => {
            jail.kill_all(Some(process.pid));
            Err(e)
        }
    }
}

/// The relays of a kernel listen in a directory of the harness beside the
/// kernel's own (which is not bound into the kernel's view), and let no
/// message through that is larger than the output cap (with room for the
/// envelope) or 4 MiB, whichever is more: anything larger would exceed the
/// cap anyway.
fn wire_cap(
    spec: &KernelSpec,
    layout: &KernelLayout,
    cap: &OutputCap,
) -> Result<WireCap, KernelError> {
    let dir = spec.root.join(&layout.id).join("wire");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .at("creating", &dir)?;
    Ok(WireCap {
        dir,
        max_message: cap.bytes.saturating_add(64 * 1024).max(4 << 20),
    })
}

/// Whether a forked kernel installed retrace's probe itself before it
/// answered (zygote.py's `install_probe`, the same steps as the installing
/// cell): it left [`PROBE_MARKER`] in its runtime directory, which only
/// retrace's code in the kernel could write (no task code has run, and the
/// directory is locked now). The marker is removed, so the kernel's view
/// ends as a cold kernel's. Without it, the cell installs the probe.
fn take_probe_marker(layout: &KernelLayout) -> Result<bool, KernelError> {
    let marker = layout.runtime_dir.join(PROBE_MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(_) => nofollow::remove_entry(&marker)
            .map(|()| true)
            .at("removing", &marker)
            .map_err(KernelError::from),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(KernelError::Io(crate::util::IoError::new(
            format!("reading {}", marker.display()),
            e,
        ))),
    }
}
