//! The kernel's own view of the machine: a fresh root on tmpfs holding
//! read-only binds of the system directories, the interpreter and the image;
//! private size-limited `/tmp`, `/dev/shm`, working directory and HOME; the
//! runtime directory (ipc sockets) bound read-write; nothing of `/root` or
//! `/home`. Also the kernel user and its rlimits.
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
    pub fsize: u64,
    /// Lifetime CPU seconds of the kernel: a backstop if the harness dies.
    pub cpu_secs: u64,
}

/// System directories every kernel sees read-only.
pub const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc",
];

/// Device nodes bound into the private `/dev`.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// The unprivileged user kernels run as: `retrace-kernel`, created if
/// missing (a setup step of [`super::Confined::open`]), else `nobody`.
pub fn ensure_kernel_user() -> (u32, u32) {
    let lookup = |name: &str| nix::unistd::User::from_name(name).ok().flatten();
    if let Some(user) = lookup("retrace-kernel") {
        return (user.uid.as_raw(), user.gid.as_raw());
    }
    if nix::unistd::geteuid().is_root() {
        let _ = std::process::Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--user-group",
                "retrace-kernel",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if let Some(user) = lookup("retrace-kernel") {
            return (user.uid.as_raw(), user.gid.as_raw());
        }
    }
    lookup("nobody")
        .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
        .unwrap_or((65534, 65534))
}

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

    let mut bound: Vec<&Path> = Vec::new();
    for dir in SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .chain(spec.ro_binds.iter().map(PathBuf::as_path))
    {
        // A path inside an earlier bind (the interpreter under /usr) is
        // already visible, and its read-only parent could not take a mount point.
        if bound.iter().any(|b| dir.starts_with(b)) {
            continue;
        }
        bind(root, dir, Access::ReadOnly)?;
        bound.push(dir);
    }
    make_dev(root)?;
    // Shallow mounts first: the runtime dir and working directory may live
    // under /tmp, which is itself a private tmpfs.
    let mut writable: Vec<(usize, Option<&PrivateDir>, &Path)> = spec
        .private_dirs
        .iter()
        .map(|d| (d.path.components().count(), Some(d), d.path.as_path()))
        .chain(
            spec.rw_binds
                .iter()
                .map(|p| (p.components().count(), None, p.as_path())),
        )
        .collect();
    writable.sort_by_key(|(depth, _, _)| *depth);
    for (_, private, path) in writable {
        match private {
            Some(dir) => private_tmpfs(root, dir, spec.uid, spec.gid)?,
            None => bind(root, path, Access::ReadWrite)?,
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
/// its children), the OOM score, rlimits, then the drop to the kernel user.
pub fn become_kernel(spec: &IsolateSpec) -> Result<(), IsolateError> {
    nix::unistd::setsid().map_err(|e| err("setsid", e))?;
    fs::write("/proc/self/oom_score_adj", spec.oom_score_adj.to_string())
        .map_err(|e| err("oom_score_adj", e))?;
    let r = spec.rlimits;
    let limits = [
        (Resource::RLIMIT_CORE, 0, 0),
        (Resource::RLIMIT_NOFILE, r.nofile, r.nofile),
        (Resource::RLIMIT_FSIZE, r.fsize, r.fsize),
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
    Ok(())
}

/// Replaces the process with the kernel program.
pub fn exec_kernel(spec: &IsolateSpec) -> IsolateError {
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
