//! cgroup v2: one unified hierarchy, controllers handed down through
//! `cgroup.subtree_control`, `cgroup.kill` and `cgroup.freeze` in every
//! group.

pub(crate) mod cpu;
mod delegation;
pub(crate) mod freezer;
pub(crate) mod memory;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::fs::Fs;
use super::layout::{Dirs, Tree, SUBTREE};
use super::limits::CgroupLimits;
use super::version::Version;
use super::{cpu as cpu_common, pids, unified, CgroupError};
use crate::sandbox::{Counters, SandboxError};

use delegation::FIX_ROOT;

#[cfg(test)]
pub(crate) use delegation::delegate_v2;

/// The unified hierarchy of a v2 host.
pub(crate) struct V2;

impl Version for V2 {
    fn layout_at(&self, root: &Path) -> (Dirs, Option<PathBuf>) {
        (
            Dirs(vec![(Tree::V2, root.join(SUBTREE))]),
            Some(root.to_path_buf()),
        )
    }

    fn locate(
        &self,
        trees: Vec<(Tree, PathBuf)>,
        mount_root: &str,
        fs: &Fs,
    ) -> Result<(Dirs, Option<PathBuf>), SandboxError> {
        let mount = &trees[0].1;
        let parent = delegation::parent(mount, mount_root, fs)?;
        Ok((Dirs(vec![(Tree::V2, parent.join(SUBTREE))]), Some(parent)))
    }

    fn fix(&self) -> &'static str {
        FIX_ROOT
    }

    fn needed(&self) -> Vec<&'static str> {
        unified::NEEDED.to_vec()
    }

    /// What the parent hands to retrace's subtree.
    fn controllers(&self, subtree: &Dirs, parent: Option<&Path>) -> Vec<String> {
        let sub = subtree.dir(Tree::V2);
        let dir = if sub.is_dir() {
            sub
        } else {
            parent.unwrap_or(sub)
        };
        unified::controllers(dir)
    }

    fn delegate(&self, dirs: &Dirs) -> Result<(), CgroupError> {
        unified::enable_controllers(dirs.dir(Tree::V2), &unified::NEEDED)
    }

    fn apply(
        &self,
        dirs: &Dirs,
        memory_bytes: u64,
        limits: &CgroupLimits,
        host_has_swap: bool,
    ) -> Result<(), CgroupError> {
        let dir = dirs.dir(Tree::V2);
        memory::apply(dir, memory_bytes, host_has_swap)?;
        pids::apply(dir, limits.pids)?;
        cpu::apply(dir, limits.cpus)
    }

    fn limits(&self, dirs: &Dirs) -> CgroupLimits {
        let dir = dirs.dir(Tree::V2);
        CgroupLimits {
            memory_bytes: memory::limit(dir),
            pids: pids::limit(dir),
            cpus: cpu::cpus(dir),
        }
    }

    fn counters(&self, dirs: &Dirs) -> Counters {
        let dir = dirs.dir(Tree::V2);
        Counters {
            oom_kills: memory::oom_kills(dir),
            memory_limit_hits: memory::limit_hits(dir),
            pids_max_events: pids::max_events(dir),
            cpu_usage_usec: cpu_common::usage_usec(dir).unwrap_or(0),
            nr_throttled: cpu_common::nr_throttled(dir),
            memory_peak_bytes: memory::peak(dir),
        }
    }

    fn memory_peak(&self, dirs: &Dirs) -> Option<u64> {
        memory::peak(dirs.dir(Tree::V2))
    }

    fn swap_accounting(&self, sample: &Dirs, _writable: bool) -> bool {
        memory::swap_accounting(sample.dir(Tree::V2))
    }

    fn kill_dir<'a>(&self, dirs: &'a Dirs) -> Option<&'a Path> {
        dirs.get(Tree::V2)
    }

    fn freeze(&self, dirs: &Dirs, budget: Duration) -> bool {
        freezer::freeze(dirs.dir(Tree::V2), budget)
    }

    fn thaw(&self, dirs: &Dirs) {
        freezer::thaw(dirs.dir(Tree::V2));
    }

    fn cpu(&self) -> (Tree, &'static cpu_common::Files) {
        (Tree::V2, &cpu::FILES)
    }
}
