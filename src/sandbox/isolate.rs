//! The kernel's own view of the machine: a fresh root on tmpfs holding
//! read-only binds of the system directories, the interpreter and the image;
//! private size-limited `/tmp`, `/dev/shm`, working directory and HOME; the
//! runtime directory (ipc sockets) bound read-write; nothing of `/root` or
//! `/home`; host files that may hold credentials masked; the kernel's own
//! uid named in its `/etc/passwd`. Also the kernel's rlimits.
//!
//! Built by the init process (see `init.rs`) inside new mount, PID, network,
//! IPC and UTS namespaces, so none of it is visible on the host.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::resource::{setrlimit, Resource};
use serde::{Deserialize, Serialize};
use walkdir::WalkDir;

use super::resolver;
use crate::util::nofollow;

/// Everything the init needs, written by the harness as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IsolateSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub uid: u32,
    pub gid: u32,
    /// Empty directory on the host where the new root is assembled.
    pub new_root: PathBuf,
    /// Host paths bound read-only at the same path (missing ones skipped).
    pub ro_binds: Vec<PathBuf>,
    /// Host paths bound read-write at the same path (the runtime dir).
    pub rw_binds: Vec<PathBuf>,
    /// Private tmpfs directories; the kernel user owns them.
    pub private_dirs: Vec<PrivateDir>,
    pub cwd: PathBuf,
    pub rlimits: Rlimits,
    /// `oom_score_adj` of the kernel: it, not the harness, is the OOM victim.
    pub oom_score_adj: i32,
    /// The harness's pid: the relay kills the kernel when it is gone.
    #[serde(default)]
    pub harness_pid: u32,
    /// Cover [`MASKED`] host files. Kernels: yes; retrace's own package
    /// installer keeps the host's pip configuration (its index and CA settings).
    #[serde(default)]
    pub mask_host_files: bool,
    /// The zygote start (see `kernel/zygote.rs`): PID 1 builds the view,
    /// says `ready` on its stdout and then, instead of starting the kernel
    /// itself, waits for the in-namespace pid of a kernel forked into the
    /// namespaces from outside (one line on its stdin) and reaps as usual.
    #[serde(default)]
    pub adopt: bool,
    /// The kernel has a network namespace of its own: the init brings its
    /// loopback up (`loopback.rs`) and its resolver is kept off that
    /// loopback (`resolver.rs`). Not for the installer, which keeps the host's.
    #[serde(default)]
    pub private_network: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrivateDir {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub mode: u32,
    /// Host directory whose files are copied in (task files, caches).
    pub seed: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Rlimits {
    pub nofile: u64,
    /// The largest file; `None`: no bound of its own (a kernel's disk is
    /// bounded by the real usage of its private tmpfs mounts, which a
    /// sparse file of any apparent size hardly touches).
    pub fsize: Option<u64>,
    /// Lifetime CPU seconds of the kernel: a backstop if the harness dies.
    pub cpu_secs: u64,
}

/// System directories every kernel sees read-only.
pub const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc",
];

/// Host files and directories that may hold credentials and are often
/// world-readable: the kernel sees an empty file or directory in their place.
/// (`/root` and `/home` are not in its view at all.)
pub const MASKED: [&str; 15] = [
    "/etc/pip.conf",
    "/etc/xdg/pip",
    "/etc/pypirc",
    "/etc/netrc",
    "/etc/.netrc",
    "/etc/apt/auth.conf",
    "/etc/apt/auth.conf.d",
    "/etc/boto.cfg",
    "/etc/gitconfig",
    "/etc/npmrc",
    "/etc/wgetrc",
    "/etc/environment",
    "/etc/docker",
    "/etc/containers/auth.json",
    "/etc/rclone",
];

/// Device nodes bound into the private `/dev`.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Pseudo-terminals a kernel may hold at once: the `max` of its private
/// devpts instance. A shell escape (`!cmd`, pexpect) holds one while it
/// runs; past the bound opening `/dev/ptmx` fails with ENOSPC, and the
/// machine's shared pool (`kernel.pty.max`) stays for everyone else.
pub const PTY_MAX: u32 = 16;

/// A step of building the kernel's filesystem view or process failed.
/// Printed by the init to its stderr, which the harness shows when a
/// kernel does not start; the cause is part of the message, not a chain.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {cause}")]
pub struct IsolateError {
    step: String,
    cause: std::io::Error,
}

fn err(step: impl std::fmt::Display, cause: impl Into<std::io::Error>) -> IsolateError {
    IsolateError {
        step: step.to_string(),
        cause: cause.into(),
    }
}

fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Assembles the new root and pivots into it. Runs as root in the new mount
/// namespace, as PID 1 of the new PID namespace.
pub fn build_root(spec: &IsolateSpec) -> Result<(), IsolateError> {
    let root = &spec.new_root;
    let none: Option<&str> = None;
    // Nothing we mount may propagate back to the host.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| err("making / private", e))?;
    fs::create_dir_all(root).map_err(|e| err(root.display(), e))?;
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("size=16m,mode=0755"),
    )
    .map_err(|e| err("mounting the new root", e))?;

    // A read-only bind under a private directory (an image under a
    // $RETRACE_HOME in /tmp) would be covered by that directory's tmpfs: it
    // is mounted after it, below.
    let under_private = |path: &Path| spec.private_dirs.iter().any(|d| path.starts_with(&d.path));
    let (late_ro, early_ro): (Vec<&Path>, Vec<&Path>) = spec
        .ro_binds
        .iter()
        .map(PathBuf::as_path)
        .partition(|p| under_private(p));
    let mut bound: Vec<&Path> = Vec::new();
    for dir in SYSTEM_DIRS.iter().map(Path::new).chain(early_ro) {
        // A path inside an earlier bind (the interpreter under /usr) is
        // already visible, and its read-only parent could not take a mount point.
        if bound.iter().any(|b| dir.starts_with(b)) {
            continue;
        }
        bind(root, dir, Access::ReadOnly)?;
        bound.push(dir);
    }
    if spec.mask_host_files {
        for path in MASKED {
            mask(root, Path::new(path))?;
        }
        // The binds keep the empty file; its own name is not needed.
        let _ = fs::remove_file(root.join(".masked"));
    }
    name_kernel_ids(root, spec)?;
    if spec.private_network {
        cover_resolver(root)?;
    }
    make_dev(root)?;
    // Shallow mounts first: the runtime dir and working directory may live
    // under /tmp, which is itself a private tmpfs; so may a read-only bind.
    let mut writable: Vec<(usize, Result<&PrivateDir, Access>, &Path)> = spec
        .private_dirs
        .iter()
        .map(|d| (d.path.components().count(), Ok(d), d.path.as_path()))
        .chain(
            spec.rw_binds
                .iter()
                .map(|p| (p.components().count(), Err(Access::ReadWrite), p.as_path())),
        )
        .chain(
            late_ro
                .into_iter()
                .map(|p| (p.components().count(), Err(Access::ReadOnly), p)),
        )
        .collect();
    writable.sort_by_key(|(depth, _, _)| *depth);
    for (_, mount, path) in writable {
        match mount {
            Ok(dir) => private_tmpfs(root, dir, spec.uid, spec.gid)?,
            Err(access) => bind(root, path, access)?,
        }
    }
    let proc_dir = inside(root, Path::new("/proc"));
    fs::create_dir_all(&proc_dir).map_err(|e| err("creating /proc", e))?;
    mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        none,
    )
    .map_err(|e| err("mounting /proc", e))?;

    let old = root.join(".old-root");
    fs::create_dir_all(&old).map_err(|e| err("creating .old-root", e))?;
    nix::unistd::pivot_root(root, &old).map_err(|e| err("pivot_root", e))?;
    nix::unistd::chdir("/").map_err(|e| err("chdir /", e))?;
    umount2("/.old-root", MntFlags::MNT_DETACH).map_err(|e| err("detaching the old root", e))?;
    let _ = fs::remove_dir("/.old-root");
    // The root itself becomes read-only: nothing can be planted beside the binds.
    mount(
        none,
        "/",
        none,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
        none,
    )
    .map_err(|e| err("remounting / read-only", e))?;
    Ok(())
}

/// Binds a host path at the same place under `root`. Symlinks (such as
/// `/bin -> usr/bin` on merged-usr systems) are recreated, not followed.
/// How a bind mount may be used.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    ReadOnly,
    ReadWrite,
    /// A device node: it must keep working, so no `nodev`.
    Device,
}

fn bind(root: &Path, host: &Path, access: Access) -> Result<(), IsolateError> {
    let Ok(meta) = fs::symlink_metadata(host) else {
        return Ok(());
    };
    let target = inside(root, host);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| err(parent.display(), e))?;
    }
    if meta.file_type().is_symlink() {
        let link = fs::read_link(host).map_err(|e| err(host.display(), e))?;
        if fs::symlink_metadata(&target).is_err() {
            symlink(&link, &target).map_err(|e| err(target.display(), e))?;
        }
        return Ok(());
    }
    if meta.is_dir() {
        fs::create_dir_all(&target).map_err(|e| err(target.display(), e))?;
    } else {
        fs::write(&target, b"").map_err(|e| err(target.display(), e))?;
    }
    let none: Option<&str> = None;
    mount(
        Some(host),
        &target,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|e| err(format!("binding {}", host.display()), e))?;
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID;
    match access {
        Access::ReadOnly => flags |= MsFlags::MS_RDONLY | MsFlags::MS_NODEV,
        Access::ReadWrite => flags |= MsFlags::MS_NODEV,
        Access::Device => {}
    }
    mount(none, &target, none, flags, none)
        .map_err(|e| err(format!("remounting {}", host.display()), e))?;
    Ok(())
}

/// Where a host path appears under `root`: symlinks resolved on the host
/// (the system directories are bound at the same paths), so a mount never
/// follows a link out of the new root. `None` when the path does not exist
/// or is outside the bound system directories.
fn covered_target(root: &Path, host: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(host).ok()?;
    SYSTEM_DIRS
        .iter()
        .any(|d| real.starts_with(d))
        .then(|| inside(root, &real))
}

/// Covers a host file with an empty read-only file, a directory with an
/// empty read-only tmpfs.
fn mask(root: &Path, host: &Path) -> Result<(), IsolateError> {
    let Some(target) = covered_target(root, host) else {
        return Ok(());
    };
    let ro = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY;
    if target.is_dir() {
        mount(
            Some("tmpfs"),
            &target,
            Some("tmpfs"),
            ro,
            Some("size=4k,mode=0755"),
        )
        .map_err(|e| err(format!("masking {}", host.display()), e))?;
        return Ok(());
    }
    let empty = root.join(".masked");
    if !empty.exists() {
        fs::write(&empty, b"").map_err(|e| err(empty.display(), e))?;
        fs::set_permissions(&empty, fs::Permissions::from_mode(0o444))
            .map_err(|e| err(empty.display(), e))?;
    }
    cover_file(&empty, &target).map_err(|e| err(format!("masking {}", host.display()), e))
}

/// Binds `source` over the file `target`, read-only.
fn cover_file(source: &Path, target: &Path) -> Result<(), nix::Error> {
    let none: Option<&str> = None;
    mount(Some(source), target, none, MsFlags::MS_BIND, none)?;
    let flags = MsFlags::MS_REMOUNT
        | MsFlags::MS_BIND
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | MsFlags::MS_NOEXEC;
    mount(none, target, none, flags, none)
}

/// The kernel's uid and gid get the name `retrace-kernel` in its view of
/// `/etc/passwd` and `/etc/group` (they are in no host database).
fn name_kernel_ids(root: &Path, spec: &IsolateSpec) -> Result<(), IsolateError> {
    let home = spec
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/nonexistent");
    let entries = [
        (
            "/etc/passwd",
            format!(
                "retrace-kernel:x:{}:{}:retrace kernel:{home}:/usr/sbin/nologin",
                spec.uid, spec.gid
            ),
        ),
        ("/etc/group", format!("retrace-kernel:x:{}:", spec.gid)),
    ];
    let dir = root.join(".ids");
    fs::create_dir_all(&dir).map_err(|e| err(dir.display(), e))?;
    for (host, line) in entries {
        let Some(target) = covered_target(root, Path::new(host)) else {
            continue;
        };
        let mut text = fs::read_to_string(host).unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
        let source = dir.join(Path::new(host).file_name().unwrap_or_default());
        fs::write(&source, text).map_err(|e| err(source.display(), e))?;
        fs::set_permissions(&source, fs::Permissions::from_mode(0o644))
            .map_err(|e| err(source.display(), e))?;
        cover_file(&source, &target).map_err(|e| err(format!("covering {host}"), e))?;
        // The bind keeps the file; its name in the new root is not needed.
        let _ = fs::remove_file(&source);
    }
    let _ = fs::remove_dir(&dir);
    Ok(())
}

fn make_dev(root: &Path) -> Result<(), IsolateError> {
    let dev = inside(root, Path::new("/dev"));
    fs::create_dir_all(&dev).map_err(|e| err("creating /dev", e))?;
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("size=64k,mode=0755"),
    )
    .map_err(|e| err("mounting /dev", e))?;
    for name in DEVICES {
        bind(root, &Path::new("/dev").join(name), Access::Device)?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(to, dev.join(link)).map_err(|e| err(format!("/dev/{link}"), e))?;
    }
    // A devpts instance of the kernel's own (shell escapes run under a
    // pseudo-terminal), bounded by PTY_MAX; /dev/ptmx opens in it.
    let pts = dev.join("pts");
    fs::create_dir_all(&pts).map_err(|e| err("creating /dev/pts", e))?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some(devpts_options(tty_gid()).as_str()),
    )
    .map_err(|e| err("mounting /dev/pts", e))?;
    symlink("pts/ptmx", dev.join("ptmx")).map_err(|e| err("/dev/ptmx", e))?;
    Ok(())
}

/// The mount options of a kernel's devpts: a new instance (never the
/// host's terminals), a ptmx anyone in the view may open, each terminal
/// its opener's and writable by the tty group, at most [`PTY_MAX`].
fn devpts_options(tty_gid: u32) -> String {
    format!("newinstance,ptmxmode=0666,mode=0620,gid={tty_gid},max={PTY_MAX}")
}

/// The `tty` group of the host's (and so the kernel's) /etc/group: glibc's
/// `grantpt` expects a terminal to belong to it. 5 on Debian and Red Hat.
fn tty_gid() -> u32 {
    nix::unistd::Group::from_name("tty")
        .ok()
        .flatten()
        .map_or(5, |g| g.gid.as_raw())
}

/// The kernel's /etc/resolv.conf when its host's would lead a lookup onto
/// the kernel's own loopback (see `resolver.rs`): a file in the view is
/// covered; a link out of the view (into the host's /run) gets its
/// destination made in the new root. A host without the file keeps none
/// (the view's /etc is read-only).
fn cover_resolver(root: &Path) -> Result<(), IsolateError> {
    let host = Path::new("/etc/resolv.conf");
    let Some(text) = resolver::kernel_resolv_conf(fs::read_to_string(host).ok().as_deref()) else {
        return Ok(());
    };
    let (source, target) = match covered_target(root, host) {
        Some(target) => (root.join(".resolv.conf"), Some(target)),
        None => match resolver::link_destination(host) {
            Some(dest) if !SYSTEM_DIRS.iter().any(|d| dest.starts_with(d)) => {
                (inside(root, &dest), None)
            }
            _ => return Ok(()),
        },
    };
    if let Some(parent) = source.parent() {
        fs::create_dir_all(parent).map_err(|e| err(parent.display(), e))?;
    }
    fs::write(&source, text).map_err(|e| err(source.display(), e))?;
    fs::set_permissions(&source, fs::Permissions::from_mode(0o644))
        .map_err(|e| err(source.display(), e))?;
    if let Some(target) = target {
        cover_file(&source, &target).map_err(|e| err("covering /etc/resolv.conf", e))?;
        // The bind keeps the file; its name in the new root is not needed.
        let _ = fs::remove_file(&source);
    }
    Ok(())
}

fn private_tmpfs(root: &Path, dir: &PrivateDir, uid: u32, gid: u32) -> Result<(), IsolateError> {
    let target = inside(root, &dir.path);
    fs::create_dir_all(&target).map_err(|e| err(target.display(), e))?;
    let options = format!(
        "size={},nr_inodes=20k,mode={:o},uid={uid},gid={gid}",
        dir.size_bytes.max(4096),
        dir.mode
    );
    mount(
        Some("tmpfs"),
        &target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| err(format!("mounting tmpfs at {}", dir.path.display()), e))?;
    if let Some(seed) = &dir.seed {
        copy_tree(seed, &target, uid, gid)?;
    }
    Ok(())
}

/// Copies what of `from` is readable (parents before children), owned by the
/// kernel user; an unreadable directory is skipped, a failed write is an error.
/// Symlinks and special files are left out and files are opened without
/// following links, so a link in a seed never copies a host file in.
fn copy_tree(from: &Path, to: &Path, uid: u32, gid: u32) -> Result<(), IsolateError> {
    let owner = (Some(uid), Some(gid));
    for entry in WalkDir::new(from).min_depth(1).into_iter().flatten() {
        let relative = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let dest = to.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&dest).map_err(|e| err(dest.display(), e))?;
            let _ = std::os::unix::fs::lchown(&dest, owner.0, owner.1);
        } else if kind.is_file() {
            let file =
                nofollow::copy(entry.path(), &dest, 0o644).map_err(|e| err(dest.display(), e))?;
            let _ = std::os::unix::fs::fchown(&file, owner.0, owner.1);
            let _ = file.set_permissions(fs::Permissions::from_mode(0o644));
        }
    }
    Ok(())
}

/// In the kernel's process, before exec: its own session (so ipykernel's
/// interrupt, which signals its process group, reaches only the kernel and
/// its children), the OOM score, rlimits, the drop to the kernel user, then
/// the syscall filter.
pub fn become_kernel(spec: &IsolateSpec) -> Result<(), IsolateError> {
    nix::unistd::setsid().map_err(|e| err("setsid", e))?;
    fs::write("/proc/self/oom_score_adj", spec.oom_score_adj.to_string())
        .map_err(|e| err("oom_score_adj", e))?;
    let r = spec.rlimits;
    let fsize = r.fsize.unwrap_or(nix::sys::resource::RLIM_INFINITY);
    let limits = [
        (Resource::RLIMIT_CORE, 0, 0),
        (Resource::RLIMIT_NOFILE, r.nofile, r.nofile),
        (Resource::RLIMIT_FSIZE, fsize, fsize),
        (Resource::RLIMIT_CPU, r.cpu_secs, r.cpu_secs + 1),
    ];
    for (resource, soft, hard) in limits {
        setrlimit(resource, soft, hard).map_err(|e| err(format!("{resource:?}"), e))?;
    }
    nix::unistd::setgroups(&[]).map_err(|e| err("setgroups", e))?;
    nix::unistd::setgid(nix::unistd::Gid::from_raw(spec.gid)).map_err(|e| err("setgid", e))?;
    nix::unistd::setuid(nix::unistd::Uid::from_raw(spec.uid)).map_err(|e| err("setuid", e))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| err("no_new_privs", e))?;
    nix::unistd::chdir(&spec.cwd).map_err(|e| err(format!("chdir {}", spec.cwd.display()), e))?;
    // Last: from here on the denied syscalls fail with EPERM, for the
    // kernel and everything it starts.
    let programs =
        super::seccomp::programs().map_err(|e| err("building the syscall filter", other(e)))?;
    super::seccomp::install(&programs)
        .map_err(|e| err("installing the syscall filter", other(e)))?;
    Ok(())
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Replaces the process with the kernel program. Descriptors above stderr
/// that whoever started retrace left open (a shell's, a CI runner's) are
/// not handed to the kernel.
pub fn exec_kernel(spec: &IsolateSpec) -> IsolateError {
    close_on_exec_above_stderr();
    let cstr = |s: &str| CString::new(s).unwrap_or_default();
    let program = cstr(&spec.program.to_string_lossy());
    let mut argv = vec![program.clone()];
    argv.extend(spec.args.iter().map(|a| cstr(a)));
    let envp: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| cstr(&format!("{k}={v}")))
        .collect();
    match nix::unistd::execve(&program, &argv, &envp) {
        Ok(never) => match never {},
        Err(e) => err(format!("exec {}", spec.program.display()), e),
    }
}

/// Marks every descriptor above 2 close-on-exec (not closed: an exec that
/// fails can still report on stderr). `close_range` (Linux 5.11) where it
/// exists, else each entry of /proc/self/fd.
// close_range(2) and fcntl(2) on raw descriptors have no safe wrapper; each block says why it is sound.
#[allow(unsafe_code)]
fn close_on_exec_above_stderr() {
    // SAFETY: a plain syscall with integer arguments; it only sets flags.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if done {
        return;
    }
    let fds: Vec<i32> = fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        // SAFETY: setting FD_CLOEXEC on a descriptor number; one that was
        // the directory listing's own (closed by now) fails harmlessly.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_copied_without_their_links() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "host data").unwrap();
        let seed = tempfile::tempdir().unwrap();
        fs::write(seed.path().join("input.csv"), "a,b\n").unwrap();
        fs::create_dir(seed.path().join("sub")).unwrap();
        fs::write(seed.path().join("sub").join("kept"), "kept").unwrap();
        symlink(&secret, seed.path().join("file-link")).unwrap();
        symlink(outside.path(), seed.path().join("dir-link")).unwrap();
        symlink(&secret, seed.path().join("sub").join("file-link")).unwrap();
        nix::unistd::mkfifo(
            &seed.path().join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();

        let dest = tempfile::tempdir().unwrap();
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        copy_tree(seed.path(), dest.path(), uid, gid).unwrap();
        let mut names: Vec<String> = WalkDir::new(dest.path())
            .min_depth(1)
            .into_iter()
            .map(|e| {
                let e = e.unwrap();
                let relative = e.path().strip_prefix(dest.path()).unwrap();
                relative.display().to_string()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["input.csv", "sub", "sub/kept"]);
        assert_eq!(
            fs::read_to_string(dest.path().join("input.csv")).unwrap(),
            "a,b\n"
        );
        assert_eq!(fs::read_to_string(&secret).unwrap(), "host data");
    }
}
