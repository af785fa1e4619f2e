//! A kernel's directories (runtime, working directory, HOME): created,
//! seeded with the probe and, once the kernel's jail (and so its user) is
//! known, the task files; renewed for a restart, locked once the kernel has
//! bound its sockets, removed.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use walkdir::WalkDir;

use super::claim::{claim, release};
use super::probe::{PROBE_FILE, PROBE_SOURCE};
use super::spec::KernelSpec;
use super::KernelError;
use crate::sandbox::{Jail, KernelLayout};
use crate::util::input_file::{open_task_file, ReadAs};
use crate::util::{nofollow, IoContext};

fn mkdir_private(path: &Path) -> Result<(), KernelError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .at("creating", path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).at("chmod", path)?;
    Ok(())
}

/// Creates the directories of one kernel, HOME seeded; the task files
/// follow once the jail exists ([`copy_task_files`]).
pub fn create_layout(spec: &KernelSpec, id: &str) -> Result<KernelLayout, KernelError> {
    let base = claim(&spec.root, id).at("claiming a directory in", &spec.root)?;
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
    seed_home(spec, &layout)?;
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
pub fn renew_layout(
    spec: &KernelSpec,
    layout: &KernelLayout,
    jail: &dyn Jail,
) -> Result<(), KernelError> {
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
    seed_home(spec, layout)?;
    copy_task_files(spec, layout, jail)
}

/// Once the kernel has bound its sockets, its runtime directory and the
/// files in it become the harness's and read-only to everyone else: the kernel can no longer swap a
/// socket for a link the harness's client would reconnect through, nor plant
/// anything there. For a restart the jail hands it back to the kernel user.
pub fn lock_runtime_dir(layout: &KernelLayout) -> Result<(), KernelError> {
    let rt = &layout.runtime_dir;
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    std::os::unix::fs::lchown(rt, Some(uid.as_raw()), Some(gid.as_raw()))
        .and_then(|()| fs::set_permissions(rt, fs::Permissions::from_mode(0o711)))
        .at("locking", rt)?;
    // Its files too (the connection file): the directory is on the host's
    // disk, which no limit of the kernel bounds (it has no file-size rlimit;
    // its disk is its private tmpfs mounts).
    for entry in fs::read_dir(rt).at("reading", rt)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let path = entry.path();
            std::os::unix::fs::lchown(&path, Some(uid.as_raw()), Some(gid.as_raw()))
                .at("locking", &path)?;
        }
    }
    Ok(())
}

/// Writes retrace's probe and the image's matplotlib cache into HOME.
fn seed_home(spec: &KernelSpec, layout: &KernelLayout) -> Result<(), KernelError> {
    let probe = layout.home_dir.join(PROBE_FILE);
    nofollow::create_new(&probe, 0o644)
        .and_then(|mut f| f.write_all(PROBE_SOURCE.as_bytes()))
        .at("writing", &probe)?;
    if let Some(cache) = spec.image.mpl_cache() {
        copy_dir(&cache, &layout.home_dir.join(".mplconfig"))?;
    }
    Ok(())
}

/// Copies the task files into the working directory. Each is opened the
/// one way task files are (`input_file::open_task_file`: no link followed,
/// a regular file within `--max-task-file-bytes`) and, for a confined
/// kernel, with its user's rights rather than root's: a file the kernel
/// could not read itself is refused. The copy is a new file that nothing
/// else holds.
pub fn copy_task_files(
    spec: &KernelSpec,
    layout: &KernelLayout,
    jail: &dyn Jail,
) -> Result<(), KernelError> {
    let read_as = match (jail.uid(), jail.gid()) {
        (Some(uid), Some(gid)) => ReadAs::User { uid, gid },
        _ => ReadAs::Harness,
    };
    for file in &spec.files {
        let name = file
            .file_name()
            .ok_or_else(|| KernelError::TaskFileName(file.clone()))?;
        let mut from = open_task_file(file, spec.max_file_bytes, read_as).map_err(|source| {
            KernelError::TaskFile {
                file: file.clone(),
                source,
            }
        })?;
        let dest = layout.work_dir.join(name);
        nofollow::create_new(&dest, 0o644)
            .and_then(|mut to| std::io::copy(&mut from, &mut to))
            .at("copying task file", file)?;
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

/// Removes the kernel's directories.
pub(super) fn remove_layout(spec: &KernelSpec, layout: &KernelLayout) {
    release(&spec.root.join(&layout.id));
}
