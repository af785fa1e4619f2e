//! Detection: how the host mounts cgroups and where retrace's subtree goes.

use std::path::{Path, PathBuf};

use super::fs::Fs;
use super::layout::Tree;
use super::mountinfo::{self, CgroupMount};
use super::{CgroupError, CgroupHost, CgroupMode};
use crate::sandbox::SandboxError;
use crate::util::IoContext;

/// Where cgroup hierarchies are mounted.
pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

const FIX_CONTROLLERS: &str = "mount the memory, pids, cpu, cpuacct and freezer cgroup \
     controllers under /sys/fs/cgroup (cgroup v1), or boot with the unified hierarchy (cgroup v2)";

const FIX_SWAP: &str = "enable swap accounting (boot with `swapaccount=1`) or turn swap off \
     (`swapoff -a`): otherwise a kernel could swap past its memory limit";

/// The host's cgroup mounts as `/proc/self/mountinfo` shows them.
fn host_mounts() -> Result<Found, CgroupError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(path).at("reading", path)?;
    find_mounts(&mountinfo::parse_mountinfo(&text), Path::new(CGROUP_ROOT))
}

impl CgroupMode {
    /// The host's mode as `/proc/self/mountinfo` shows it, touching no
    /// cgroup (for reports when [`CgroupHost::detect`] fails).
    pub fn of_host() -> Result<CgroupMode, CgroupError> {
        host_mounts().map(|f| f.mode)
    }
}

impl CgroupHost {
    /// Detects the mode from `/proc/self/mountinfo`, chooses retrace's
    /// subtree, enables the controllers it needs and checks that groups can
    /// be created and limited. Fails closed with a fix to apply.
    pub fn detect() -> Result<CgroupHost, SandboxError> {
        let found = host_mounts().map_err(|e| match e {
            CgroupError::Proc(io) => SandboxError::Io(io),
            other => unavailable(other.to_string(), FIX_CONTROLLERS),
        })?;
        let fs = Fs::default();
        let version = found.mode.version();
        let (subtree, parent) = version.locate(found.trees, &found.v2_root, &fs)?;
        let host = CgroupHost::build(found.mode, subtree, parent, host_has_swap(), fs);
        let fix = version.fix();
        host.prepare()
            .map_err(|e| unavailable(e.to_string(), fix))?;
        let probe = host.probe();
        if !probe.writable {
            return Err(unavailable(probe.problems.join("; "), fix));
        }
        if probe.host_has_swap && !probe.swap_accounting {
            return Err(unavailable(
                "swap is on but the kernel does not account it per cgroup".into(),
                FIX_SWAP,
            ));
        }
        Ok(host)
    }
}

fn unavailable(reason: String, fix: &str) -> SandboxError {
    SandboxError::Unavailable {
        reason,
        fix: fix.to_string(),
    }
}

/// What mountinfo says about the host.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Found {
    pub(super) mode: CgroupMode,
    /// v1/hybrid: controller mount points (cpu and cpuacct may coincide),
    /// plus unified; v2: the single mount.
    pub(super) trees: Vec<(Tree, PathBuf)>,
    /// v2: the hierarchy path mounted at the mount point.
    pub(super) v2_root: String,
}

/// Chooses the mode: v2 is cgroup2 at `root`; hybrid is the v1 controllers
/// plus cgroup2 at `root/unified`; v1 is the controllers alone.
pub(super) fn find_mounts(mounts: &[CgroupMount], root: &Path) -> Result<Found, CgroupError> {
    if let Some(m) = mounts.iter().find(|m| m.v2 && m.point == root) {
        return Ok(Found {
            mode: CgroupMode::V2,
            trees: vec![(Tree::V2, m.point.clone())],
            v2_root: m.root.clone(),
        });
    }
    if !mounts.iter().any(|m| !m.v2) {
        return Err(CgroupError::NotMounted {
            root: root.to_path_buf(),
        });
    }
    let mut trees = Vec::new();
    let mut missing = Vec::new();
    for (tree, name) in Tree::V1 {
        // Prefer the canonical mount over bind mounts elsewhere.
        let mount = mounts
            .iter()
            .filter(|m| m.has_controller(name))
            .min_by_key(|m| !m.point.starts_with(root));
        match mount {
            Some(m) => trees.push((tree, m.point.clone())),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return Err(CgroupError::ControllersMissing { missing });
    }
    let unified = root.join("unified");
    let mode = match mounts.iter().find(|m| m.v2 && m.point == unified) {
        Some(m) => {
            trees.push((Tree::Unified, m.point.clone()));
            CgroupMode::Hybrid
        }
        None => CgroupMode::V1,
    };
    Ok(Found {
        mode,
        trees,
        v2_root: "/".into(),
    })
}

/// Any active swap area in /proc/swaps (header line excepted).
pub fn host_has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|t| t.lines().skip(1).any(|l| !l.trim().is_empty()))
        .unwrap_or(false)
}
