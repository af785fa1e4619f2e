//! cgroup v1: one hierarchy per controller. Hybrid hosts are v1 too: their
//! unified tree has no controllers and is ignored for limits, but its
//! `cgroup.kill` empties a group at once and its `cpu.stat` counts CPU
//! time in microseconds.

pub(crate) mod cpu;
pub(crate) mod freezer;
pub(crate) mod memory;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::fs::Fs;
use super::layout::{Dirs, Tree, SUBTREE};
use super::limits::CgroupLimits;
use super::version::Version;
use super::{cpu as cpu_common, pids, CgroupError};
use crate::sandbox::{Counters, SandboxError};

const FIX_ROOT: &str =
    "run retrace as root (cgroup v1 cannot be delegated to an unprivileged user)";

/// v1 controller hierarchies, plus the unified tree on hybrid hosts.
pub(crate) struct V1 {
    pub(crate) hybrid: bool,
}

impl Version for V1 {
    /// `root/memory`, `root/pids`, `root/cpu` and `root/cpuacct` (or
    /// `root/cpu,cpuacct`), `root/freezer`, and on hybrid `root/unified`.
    fn layout_at(&self, root: &Path) -> (Dirs, Option<PathBuf>) {
        let combined = root.join("cpu,cpuacct");
        let (cpu, cpuacct) = if combined.is_dir() {
            (combined.clone(), combined)
        } else {
            (root.join("cpu"), root.join("cpuacct"))
        };
        let mut trees = vec![
            (Tree::Memory, root.join("memory")),
            (Tree::Pids, root.join("pids")),
            (Tree::Cpu, cpu),
            (Tree::Cpuacct, cpuacct),
            (Tree::Freezer, root.join("freezer")),
        ];
        if self.hybrid {
            trees.push((Tree::Unified, root.join("unified")));
        }
        (Dirs(trees).join(SUBTREE), None)
    }

    fn locate(
        &self,
        trees: Vec<(Tree, PathBuf)>,
        _mount_root: &str,
        _fs: &Fs,
    ) -> Result<(Dirs, Option<PathBuf>), SandboxError> {
        Ok((Dirs(trees).join(SUBTREE), None))
    }

    fn fix(&self) -> &'static str {
        FIX_ROOT
    }

    fn needed(&self) -> Vec<&'static str> {
        Tree::V1.iter().map(|(_, n)| *n).collect()
    }

    /// The needed controllers whose hierarchy is there.
    fn controllers(&self, subtree: &Dirs, _parent: Option<&Path>) -> Vec<String> {
        Tree::V1
            .iter()
            .filter(|(t, _)| {
                let sub = subtree.dir(*t);
                sub.is_dir() || sub.parent().is_some_and(Path::is_dir)
            })
            .map(|(_, n)| n.to_string())
            .collect()
    }

    /// Every v1 hierarchy has its controller in every group.
    fn delegate(&self, _dirs: &Dirs) -> Result<(), CgroupError> {
        Ok(())
    }

    fn apply(
        &self,
        dirs: &Dirs,
        memory_bytes: u64,
        limits: &CgroupLimits,
        host_has_swap: bool,
    ) -> Result<(), CgroupError> {
        memory::apply(dirs.dir(Tree::Memory), memory_bytes, host_has_swap)?;
        pids::apply(dirs.dir(Tree::Pids), limits.pids)?;
        cpu::apply(dirs.dir(Tree::Cpu), limits.cpus)
    }

    fn limits(&self, dirs: &Dirs) -> CgroupLimits {
        CgroupLimits {
            memory_bytes: memory::limit(dirs.dir(Tree::Memory)),
            pids: pids::limit(dirs.dir(Tree::Pids)),
            cpus: cpu::cpus(dirs.dir(Tree::Cpu)),
        }
    }

    fn counters(&self, dirs: &Dirs) -> Counters {
        // The unified tree's cpu.stat needs no controller and is in
        // microseconds already; plain v1 has cpuacct.usage (ns).
        let usage = dirs
            .get(Tree::Unified)
            .and_then(cpu_common::usage_usec)
            .unwrap_or_else(|| cpu::usage_usec(dirs.dir(Tree::Cpuacct)));
        let memory = dirs.dir(Tree::Memory);
        Counters {
            oom_kills: memory::oom_kills(memory),
            memory_limit_hits: memory::limit_hits(memory),
            pids_max_events: pids::max_events(dirs.dir(Tree::Pids)),
            cpu_usage_usec: usage,
            nr_throttled: cpu_common::nr_throttled(dirs.dir(Tree::Cpu)),
            memory_peak_bytes: memory::peak(memory),
        }
    }

    fn memory_peak(&self, dirs: &Dirs) -> Option<u64> {
        memory::peak(dirs.dir(Tree::Memory))
    }

    fn swap_accounting(&self, sample: &Dirs, writable: bool) -> bool {
        let dir = sample.dir(Tree::Memory);
        memory::swap_accounting(dir)
            || (!writable && dir.parent().is_some_and(memory::swap_accounting))
    }

    fn kill_dir<'a>(&self, dirs: &'a Dirs) -> Option<&'a Path> {
        dirs.get(Tree::Unified)
    }

    fn freeze(&self, dirs: &Dirs, budget: Duration) -> bool {
        freezer::freeze(dirs.dir(Tree::Freezer), budget)
    }

    fn thaw(&self, dirs: &Dirs) {
        freezer::thaw(dirs.dir(Tree::Freezer));
    }

    fn cpu(&self) -> (Tree, &'static cpu_common::Files) {
        (Tree::Cpu, &cpu::FILES)
    }
}
