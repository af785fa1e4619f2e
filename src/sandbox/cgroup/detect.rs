//! Detection: how the host mounts cgroups and where retrace's subtree goes.

use std::path::{Path, PathBuf};

use super::fs::{self, cgroup_err, Fs};
use super::layout::{Dirs, Tree, SUBTREE};
use super::mountinfo::{self, CgroupMount};
use super::unified;
use super::CgroupHost;
use crate::sandbox::SandboxError;

/// Where cgroup hierarchies are mounted.
pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// v2 delegation: the leaf the harness moves itself into.
const HARNESS_LEAF: &str = "harness";

const FIX_ROOT_V1: &str =
    "run retrace as root (cgroup v1 cannot be delegated to an unprivileged user)";

const FIX_ROOT_V2: &str = "run retrace as root, or in a delegated cgroup: \
     `systemd-run --user --scope -p Delegate=yes retrace ...`";

const FIX_CONTROLLERS: &str = "mount the memory, pids, cpu, cpuacct and freezer cgroup \
     controllers under /sys/fs/cgroup (cgroup v1), or boot with the unified hierarchy (cgroup v2)";

const FIX_SWAP: &str = "enable swap accounting (boot with `swapaccount=1`) or turn swap off \
     (`swapoff -a`): otherwise a kernel could swap past its memory limit";

/// How the host mounts cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display)]
pub enum CgroupMode {
    /// v1 controller hierarchies only.
    #[strum(to_string = "cgroup-v1")]
    V1,
    /// v1 controllers plus an (empty) cgroup2 tree at `/sys/fs/cgroup/unified`.
    #[strum(to_string = "cgroup-v1-hybrid")]
    Hybrid,
    /// The unified hierarchy at `/sys/fs/cgroup`.
    #[strum(to_string = "cgroup-v2")]
    V2,
}

impl CgroupMode {
    /// The host's mode as `/proc/self/mountinfo` shows it, touching no
    /// cgroup (for reports when [`CgroupHost::detect`] fails).
    pub fn of_host() -> Result<CgroupMode, String> {
        let text = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
        find_mounts(&mountinfo::parse_mountinfo(&text), Path::new(CGROUP_ROOT)).map(|f| f.mode)
    }
}

impl CgroupHost {
    /// Detects the mode from `/proc/self/mountinfo`, chooses retrace's
    /// subtree, enables the controllers it needs and checks that groups can
    /// be created and limited. Fails closed with a fix to apply.
    pub fn detect() -> Result<CgroupHost, SandboxError> {
        let root = Path::new(CGROUP_ROOT);
        let text = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| SandboxError::io("reading /proc/self/mountinfo", e))?;
        let found = find_mounts(&mountinfo::parse_mountinfo(&text), root)
            .map_err(|reason| unavailable(reason, FIX_CONTROLLERS))?;
        let fs = Fs::default();
        let host = match found.mode {
            CgroupMode::V2 => {
                let mount = found.trees[0].1.clone();
                let parent = v2_parent(&mount, &found.v2_root, &fs)?;
                CgroupHost::build(
                    CgroupMode::V2,
                    Dirs(vec![(Tree::V2, parent.join(SUBTREE))]),
                    Some(parent),
                    host_has_swap(),
                    fs,
                )
            }
            mode => CgroupHost::build(
                mode,
                Dirs(found.trees).join(SUBTREE),
                None,
                host_has_swap(),
                fs,
            ),
        };
        let fix = host.fix();
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

    fn fix(&self) -> &'static str {
        match self.mode {
            CgroupMode::V2 => FIX_ROOT_V2,
            _ => FIX_ROOT_V1,
        }
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
pub(super) fn find_mounts(mounts: &[CgroupMount], root: &Path) -> Result<Found, String> {
    if let Some(m) = mounts.iter().find(|m| m.v2 && m.point == root) {
        return Ok(Found {
            mode: CgroupMode::V2,
            trees: vec![(Tree::V2, m.point.clone())],
            v2_root: m.root.clone(),
        });
    }
    if !mounts.iter().any(|m| !m.v2) {
        return Err(format!(
            "no cgroup filesystem is mounted at {}",
            root.display()
        ));
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
        return Err(format!(
            "cgroup v1 controllers not mounted: {}",
            missing.join(", ")
        ));
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

/// v2: the group retrace's subtree goes under. The root cgroup if it is
/// ours (we sit in it, or may write its `cgroup.subtree_control`);
/// otherwise the cgroup delegated to us, see [`delegate_v2`].
fn v2_parent(mount: &Path, mount_root: &str, fs: &Fs) -> Result<PathBuf, SandboxError> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| SandboxError::io("reading /proc/self/cgroup", e))?;
    let own = mountinfo::parse_proc_cgroup(&text).unified.ok_or_else(|| {
        unavailable(
            "no cgroup v2 entry in /proc/self/cgroup".into(),
            FIX_ROOT_V2,
        )
    })?;
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
    delegate_v2(mount, &own, fs).map_err(|e| unavailable(e.to_string(), FIX_ROOT_V2))
}

/// Delegation (`systemd-run --user --scope -p Delegate=yes`): our own
/// cgroup D may only hand controllers on while it holds no processes, so
/// move ourselves into `D/harness` and return D. A second call finds us in
/// `D/harness` already.
pub(super) fn delegate_v2(mount: &Path, own: &str, fs: &Fs) -> Result<PathBuf, SandboxError> {
    let own_dir = mount.join(own.trim_start_matches('/'));
    if own_dir.file_name().is_some_and(|n| n == HARNESS_LEAF) {
        if let Some(parent) = own_dir.parent() {
            return Ok(parent.to_path_buf());
        }
    }
    let leaf = own_dir.join(HARNESS_LEAF);
    fs.ensure_dir(&leaf)
        .map_err(|e| cgroup_err(&leaf, format!("mkdir: {e}")))?;
    fs::write_file(&leaf.join(unified::PROCS), "0")?;
    Ok(own_dir)
}

/// Any active swap area in /proc/swaps (header line excepted).
pub fn host_has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|t| t.lines().skip(1).any(|l| !l.trim().is_empty()))
        .unwrap_or(false)
}
