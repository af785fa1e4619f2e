//! What differs between cgroup v1 and v2, behind one trait: where a
//! group's limits and counters live, how controllers reach a group, how it
//! is frozen and where it can be killed at once. One implementation per
//! version (`v1/`, `v2/`, one file per controller in each), chosen once
//! from the [`CgroupMode`](super::CgroupMode); hybrid hosts are v1 with
//! the unified tree beside the controllers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cpu;
use super::fs::Fs;
use super::layout::{Dirs, Tree};
use super::limits::CgroupLimits;
use super::CgroupError;
use crate::sandbox::{Counters, SandboxError};

pub(super) trait Version: Send + Sync {
    /// retrace's subtree (`<mount>/retrace` in each hierarchy) and, on v2,
    /// the group that hands controllers to it, for hierarchies mounted
    /// under `root` (a fixture tree, or the host's mount root).
    fn layout_at(&self, root: &Path) -> (Dirs, Option<PathBuf>);

    /// The same from what mountinfo showed: the mounted trees and, on v2,
    /// the hierarchy path at the mount point. v2 may move the harness into
    /// a delegated leaf.
    fn locate(
        &self,
        trees: Vec<(Tree, PathBuf)>,
        mount_root: &str,
        fs: &Fs,
    ) -> Result<(Dirs, Option<PathBuf>), SandboxError>;

    /// What to do when retrace may not use cgroups.
    fn fix(&self) -> &'static str;

    /// The controllers every kernel group needs.
    fn needed(&self) -> Vec<&'static str>;

    /// The needed controllers kernel groups under `subtree` can get.
    fn controllers(&self, subtree: &Dirs, parent: Option<&Path>) -> Vec<String>;

    /// Hands the needed controllers to the children of `dirs` (v2).
    fn delegate(&self, dirs: &Dirs) -> Result<(), CgroupError>;

    /// Writes a group's limits and reads each back.
    fn apply(
        &self,
        dirs: &Dirs,
        memory_bytes: u64,
        limits: &CgroupLimits,
        host_has_swap: bool,
    ) -> Result<(), CgroupError>;

    /// The limits as the kernel reports them.
    fn limits(&self, dirs: &Dirs) -> CgroupLimits;

    /// Cumulative counters; missing files read as 0.
    fn counters(&self, dirs: &Dirs) -> Counters;

    fn memory_peak(&self, dirs: &Dirs) -> Option<u64>;

    /// Whether swap can be limited; `writable` says `sample` is a group
    /// (not retrace's subtree, whose parent may show more).
    fn swap_accounting(&self, sample: &Dirs, writable: bool) -> bool;

    /// The unified directory where `cgroup.kill` may be; `None` on plain v1.
    fn kill_dir<'a>(&self, dirs: &'a Dirs) -> Option<&'a Path>;

    /// Freezes the group; whether it froze within `budget`.
    fn freeze(&self, dirs: &Dirs, budget: Duration) -> bool;

    fn thaw(&self, dirs: &Dirs);

    /// The hierarchy of the CPU quota and weight, and their files.
    fn cpu(&self) -> (Tree, &'static cpu::Files);
}
