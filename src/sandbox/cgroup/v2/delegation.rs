//! Where retrace's v2 subtree goes: under the root cgroup if it is ours,
//! else under the cgroup delegated to us.

use std::path::{Path, PathBuf};

use crate::sandbox::cgroup::fs::{self, Fs};
use crate::sandbox::cgroup::{mountinfo, unified, CgroupError};
use crate::sandbox::SandboxError;

pub(crate) const FIX_ROOT: &str = "run retrace as root, or in a delegated cgroup: \
     `systemd-run --user --scope -p Delegate=yes retrace ...`";

/// The leaf the harness moves itself into.
const HARNESS_LEAF: &str = "harness";

fn unavailable(reason: String) -> SandboxError {
    SandboxError::Unavailable {
        reason,
        fix: FIX_ROOT.to_string(),
    }
}

/// The group retrace's subtree goes under. The root cgroup if it is ours
/// (we sit in it, or may write its `cgroup.subtree_control`); otherwise
/// the cgroup delegated to us, see [`delegate_v2`].
pub(super) fn parent(mount: &Path, mount_root: &str, fs: &Fs) -> Result<PathBuf, SandboxError> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| SandboxError::io("reading /proc/self/cgroup", e))?;
    let own = mountinfo::parse_proc_cgroup(&text)
        .unified
        .ok_or_else(|| unavailable("no cgroup v2 entry in /proc/self/cgroup".into()))?;
    // Paths are relative to the hierarchy; the mount may show a sub-tree.
    let own = match own.strip_prefix(mount_root.trim_end_matches('/')) {
        Some(rest) if mount_root != "/" => rest.to_string(),
        _ => own,
    };
    let control = mount.join(unified::SUBTREE_CONTROL);
    let root_is_ours =
        own == "/" || nix::unistd::access(&control, nix::unistd::AccessFlags::W_OK).is_ok();
    if root_is_ours {
        return Ok(mount.to_path_buf());
    }
    delegate_v2(mount, &own, fs).map_err(|e| unavailable(e.to_string()))
}

/// Delegation (`systemd-run --user --scope -p Delegate=yes`): our own
/// cgroup D may only hand controllers on while it holds no processes, so
/// move ourselves into `D/harness` and return D. A second call finds us in
/// `D/harness` already.
pub(crate) fn delegate_v2(mount: &Path, own: &str, fs: &Fs) -> Result<PathBuf, CgroupError> {
    let own_dir = mount.join(own.trim_start_matches('/'));
    if own_dir.file_name().is_some_and(|n| n == HARNESS_LEAF) {
        if let Some(parent) = own_dir.parent() {
            return Ok(parent.to_path_buf());
        }
    }
    let leaf = own_dir.join(HARNESS_LEAF);
    fs.ensure_dir(&leaf).map_err(|cause| CgroupError::Mkdir {
        dir: leaf.clone(),
        cause,
    })?;
    fs::write_file(&leaf.join(unified::PROCS), "0")?;
    Ok(own_dir)
}
