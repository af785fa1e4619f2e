//! The group of one kernel: its limits, counters and removal.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fs::{self, Fs};
use super::host::Harness;
use super::layout::{Dirs, Tree};
use super::{unified, CgroupError, CgroupLimits, CgroupMode};
use crate::sandbox::{Counters, SandboxError};

/// How long rmdir keeps retrying EBUSY.
const RMDIR_BUDGET: Duration = Duration::from_secs(2);

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
    ) -> Result<(), CgroupError> {
        let version = self.mode.version();
        version.apply(&self.dirs, memory_bytes, limits, host_has_swap)
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
        self.mode.version().counters(&self.dirs)
    }

    /// Highest memory use so far (page cache included); `None` if unknown.
    pub fn memory_peak(&self) -> Option<u64> {
        self.mode.version().memory_peak(&self.dirs)
    }

    /// The limits as the kernel reports them (`u64::MAX` / 0.0 = none).
    pub fn limits_read_back(&self) -> CgroupLimits {
        self.mode.version().limits(&self.dirs)
    }

    /// The group's members as one hierarchy lists them: the pids
    /// controller's on v1 (every process of the kernel is counted against
    /// its limit there), the one tree on v2. Per cell, where
    /// [`KernelCgroup::pids`] reads every hierarchy (for the kill).
    pub fn members(&self) -> Vec<i32> {
        match [Tree::Pids, Tree::V2]
            .into_iter()
            .find_map(|t| self.dirs.get(t))
        {
            Some(dir) => members_below([dir]),
            None => self.pids(),
        }
    }

    /// Live member processes (zombies excluded), of the group and any
    /// group below it, across all hierarchies.
    pub fn pids(&self) -> Vec<i32> {
        members_below(self.dirs.unique())
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
                result.map_err(|cause| CgroupError::Rmdir { dir: d, cause })?;
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

/// The processes listed in `dirs` and every group below them, once each.
fn members_below<'a>(dirs: impl IntoIterator<Item = &'a std::path::Path>) -> Vec<i32> {
    let mut out: Vec<i32> = dirs
        .into_iter()
        .flat_map(fs::bottom_up)
        .flat_map(|d| fs::read_pids(&d.join(unified::PROCS)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
