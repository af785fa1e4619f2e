//! The group of one kernel: its limits, counters and removal.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fs::{self, cgroup_err, Fs};
use super::host::Harness;
use super::layout::{Dirs, Tree};
use super::{cpu, memory, pids, unified, CgroupMode};
use crate::sandbox::{Counters, SandboxError};

/// How long rmdir keeps retrying EBUSY.
const RMDIR_BUDGET: Duration = Duration::from_secs(2);

/// Limits of one kernel's group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgroupLimits {
    /// Hard memory limit (page cache and tmpfs included); no swap on top.
    /// Rounded down to whole pages.
    pub memory_bytes: u64,
    /// Processes plus threads.
    pub pids: u64,
    /// CPU quota in cores per 100 ms period; 0 means no quota.
    pub cpus: f64,
}

/// The group of one kernel.
#[derive(Debug)]
pub struct KernelCgroup {
    pub(super) mode: CgroupMode,
    pub(super) dirs: Dirs,
    pub(super) fs: Fs,
    /// The harness whose count this group holds; `None` while reclaiming
    /// another harness's leftovers.
    pub(super) owner: Option<Arc<Harness>>,
    pub(super) removed: AtomicBool,
}

impl KernelCgroup {
    pub(super) fn apply(
        &self,
        memory_bytes: u64,
        limits: &CgroupLimits,
        host_has_swap: bool,
    ) -> Result<(), SandboxError> {
        match self.mode {
            CgroupMode::V2 => {
                let dir = self.dirs.dir(Tree::V2);
                memory::apply_v2(dir, memory_bytes, host_has_swap)?;
                pids::apply(dir, limits.pids)?;
                cpu::apply_v2(dir, limits.cpus)
            }
            CgroupMode::V1 | CgroupMode::Hybrid => {
                memory::apply_v1(self.dirs.dir(Tree::Memory), memory_bytes, host_has_swap)?;
                pids::apply(self.dirs.dir(Tree::Pids), limits.pids)?;
                cpu::apply_v1(self.dirs.dir(Tree::Cpu), limits.cpus)
            }
        }
    }

    /// Every `cgroup.procs` the kernel's first process must join before it
    /// execs: one per v1 hierarchy plus unified on hybrid, one on v2.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .unique()
            .into_iter()
            .map(|d| d.join(unified::PROCS))
            .collect()
    }

    /// A representative directory for messages (memory hierarchy on v1).
    pub fn path(&self) -> PathBuf {
        self.dirs.primary().to_path_buf()
    }

    /// Cumulative counters; missing files read as 0 (the memory peak as
    /// `None`).
    pub fn counters(&self) -> Counters {
        match self.mode {
            CgroupMode::V2 => {
                let dir = self.dirs.dir(Tree::V2);
                Counters {
                    oom_kills: memory::oom_kills_v2(dir),
                    memory_limit_hits: memory::limit_hits_v2(dir),
                    pids_max_events: pids::max_events(dir),
                    cpu_usage_usec: cpu::usage_usec_v2(dir).unwrap_or(0),
                    nr_throttled: cpu::nr_throttled(dir),
                    memory_peak_bytes: memory::peak_v2(dir),
                }
            }
            CgroupMode::V1 | CgroupMode::Hybrid => {
                // The unified tree's cpu.stat needs no controller and is in
                // microseconds already; plain v1 has cpuacct.usage (ns).
                let usage = self
                    .dirs
                    .get(Tree::Unified)
                    .and_then(cpu::usage_usec_v2)
                    .unwrap_or_else(|| cpu::usage_usec_v1(self.dirs.dir(Tree::Cpuacct)));
                Counters {
                    oom_kills: memory::oom_kills_v1(self.dirs.dir(Tree::Memory)),
                    memory_limit_hits: memory::limit_hits_v1(self.dirs.dir(Tree::Memory)),
                    pids_max_events: pids::max_events(self.dirs.dir(Tree::Pids)),
                    cpu_usage_usec: usage,
                    nr_throttled: cpu::nr_throttled(self.dirs.dir(Tree::Cpu)),
                    memory_peak_bytes: memory::peak_v1(self.dirs.dir(Tree::Memory)),
                }
            }
        }
    }

    /// Highest memory use so far (page cache included); `None` if unknown.
    pub fn memory_peak(&self) -> Option<u64> {
        match self.mode {
            CgroupMode::V2 => memory::peak_v2(self.dirs.dir(Tree::V2)),
            _ => memory::peak_v1(self.dirs.dir(Tree::Memory)),
        }
    }

    /// The limits as the kernel reports them (`u64::MAX` / 0.0 = none).
    pub fn limits_read_back(&self) -> CgroupLimits {
        match self.mode {
            CgroupMode::V2 => {
                let dir = self.dirs.dir(Tree::V2);
                CgroupLimits {
                    memory_bytes: memory::limit_v2(dir),
                    pids: pids::limit(dir),
                    cpus: cpu::cpus_v2(dir),
                }
            }
            _ => CgroupLimits {
                memory_bytes: memory::limit_v1(self.dirs.dir(Tree::Memory)),
                pids: pids::limit(self.dirs.dir(Tree::Pids)),
                cpus: cpu::cpus_v1(self.dirs.dir(Tree::Cpu)),
            },
        }
    }

    /// Live member processes (zombies excluded), of the group and any
    /// group below it, across all hierarchies.
    pub fn pids(&self) -> Vec<i32> {
        let mut out: Vec<i32> = self
            .dirs
            .unique()
            .into_iter()
            .flat_map(fs::bottom_up)
            .flat_map(|d| fs::read_pids(&d.join(unified::PROCS)))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Removes the group's directories in every hierarchy, children first,
    /// retrying EBUSY. Kills first if anything is alive; never moves
    /// processes out. Idempotent. The harness's `<pid>` directory goes with
    /// its last group.
    pub fn remove(&self) -> Result<(), SandboxError> {
        if self.removed.load(Ordering::Acquire) {
            return Ok(());
        }
        if !self.is_empty() {
            self.kill_all(None);
        }
        let deadline = Instant::now() + RMDIR_BUDGET;
        for dir in self.dirs.unique() {
            for d in fs::bottom_up(dir) {
                let mut result = self.fs.rmdir_retry(&d, deadline);
                if matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EBUSY))
                    && !self.is_empty()
                {
                    self.kill_all(None);
                    result = self.fs.rmdir_retry(&d, Instant::now() + RMDIR_BUDGET);
                }
                result.map_err(|e| cgroup_err(&d, format!("rmdir: {e}")))?;
            }
        }
        if !self.removed.swap(true, Ordering::AcqRel) {
            if let Some(owner) = &self.owner {
                owner.release_one();
            }
        }
        Ok(())
    }
}
