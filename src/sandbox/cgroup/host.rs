//! The host: retrace's subtree, this harness's directory in it, and the
//! creation of kernel groups.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use super::detect::host_has_swap;
use super::fs::{cgroup_err, Fs};
use super::layout::{valid_id, Dirs, Tree, SUBTREE};
use super::unified;
use super::{CgroupLimits, CgroupMode, KernelCgroup};
use crate::sandbox::SandboxError;

/// This harness's `<subtree>/<pid>` directories and how many kernel groups
/// live in them; the lock also orders creating and removing the directory.
#[derive(Debug)]
pub(super) struct Harness {
    pub(super) dirs: Dirs,
    pub(super) live: Mutex<usize>,
    pub(super) fs: Fs,
}

impl Harness {
    /// Best effort: fails harmlessly while groups remain.
    fn remove_dirs(&self) {
        for dir in self.dirs.unique() {
            let _ = self.fs.rmdir(dir);
        }
    }

    pub(super) fn release_one(&self) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        *live = live.saturating_sub(1);
        if *live == 0 {
            self.remove_dirs();
        }
    }
}

/// The host's cgroup setup and retrace's subtree in it.
#[derive(Debug)]
pub struct CgroupHost {
    pub(super) mode: CgroupMode,
    /// `<mount>/retrace` in each hierarchy.
    pub(super) subtree: Dirs,
    /// v2: the group whose `cgroup.subtree_control` hands controllers to
    /// `subtree` (the root, or the cgroup delegated to us).
    pub(super) v2_parent: Option<PathBuf>,
    pub(super) host_has_swap: bool,
    pub(super) harness: Arc<Harness>,
}

impl CgroupHost {
    /// A host whose cgroup mount root is `root` (in place of
    /// `/sys/fs/cgroup`), for fixture trees. v1/hybrid expect `root/memory`,
    /// `root/pids`, `root/cpu` and `root/cpuacct` (or `root/cpu,cpuacct`),
    /// `root/freezer`, and on hybrid `root/unified`. Creates nothing.
    pub fn at(mode: CgroupMode, root: &Path) -> CgroupHost {
        let (subtree, v2_parent) = match mode {
            CgroupMode::V2 => (
                Dirs(vec![(Tree::V2, root.join(SUBTREE))]),
                Some(root.to_path_buf()),
            ),
            CgroupMode::V1 | CgroupMode::Hybrid => {
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
                if mode == CgroupMode::Hybrid {
                    trees.push((Tree::Unified, root.join("unified")));
                }
                (Dirs(trees).join(SUBTREE), None)
            }
        };
        CgroupHost::build(mode, subtree, v2_parent, host_has_swap(), Fs::default())
    }

    pub(super) fn build(
        mode: CgroupMode,
        subtree: Dirs,
        v2_parent: Option<PathBuf>,
        host_has_swap: bool,
        fs: Fs,
    ) -> CgroupHost {
        let harness = Harness {
            dirs: subtree.join(&std::process::id().to_string()),
            live: Mutex::new(0),
            fs,
        };
        CgroupHost {
            mode,
            subtree,
            v2_parent,
            host_has_swap,
            harness: Arc::new(harness),
        }
    }

    pub fn mode(&self) -> CgroupMode {
        self.mode
    }

    pub(super) fn fs(&self) -> &Fs {
        &self.harness.fs
    }

    /// Creates `retrace/` in every hierarchy and, on v2, hands the
    /// controllers down to it. Idempotent.
    pub(super) fn prepare(&self) -> Result<(), SandboxError> {
        if let Some(parent) = &self.v2_parent {
            unified::enable_controllers(parent, &unified::NEEDED)?;
        }
        for dir in self.subtree.unique() {
            self.fs()
                .ensure_dir(dir)
                .map_err(|e| cgroup_err(dir, format!("mkdir: {e}")))?;
        }
        if self.mode == CgroupMode::V2 {
            unified::enable_controllers(self.subtree.dir(Tree::V2), &unified::NEEDED)?;
        }
        Ok(())
    }

    /// [`Self::prepare`] plus this harness's `<pid>` directories.
    fn prepare_harness(&self) -> Result<(), SandboxError> {
        self.prepare()?;
        for dir in self.harness.dirs.unique() {
            self.fs()
                .ensure_dir(dir)
                .map_err(|e| cgroup_err(dir, format!("mkdir: {e}")))?;
        }
        if self.mode == CgroupMode::V2 {
            unified::enable_controllers(self.harness.dirs.dir(Tree::V2), &unified::NEEDED)?;
        }
        Ok(())
    }

    /// Creates the group of one kernel, `<subtree>/<harness pid>/<id>` in
    /// every hierarchy, writes `limits` and reads them back. The group is
    /// removed again if anything fails.
    pub fn create(&self, id: &str, limits: &CgroupLimits) -> Result<KernelCgroup, SandboxError> {
        let page = page_size();
        let memory_bytes = limits.memory_bytes / page * page;
        let where_ = self.subtree.primary();
        if !valid_id(id) {
            return Err(cgroup_err(where_, format!("invalid kernel id {id:?}")));
        }
        if memory_bytes == 0 || limits.pids == 0 {
            return Err(cgroup_err(
                where_,
                "memory and pids limits must be positive (memory at least one page)",
            ));
        }
        let dirs = self.harness.dirs.join(id);
        {
            let mut live = self
                .harness
                .live
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.make_group(&dirs)?;
            *live += 1;
        }
        let group = KernelCgroup {
            mode: self.mode,
            dirs,
            fs: self.fs().clone(),
            owner: Some(self.harness.clone()),
            removed: AtomicBool::new(false),
        };
        if let Err(e) = group.apply(memory_bytes, limits, self.host_has_swap) {
            let _ = group.remove();
            return Err(e);
        }
        Ok(group)
    }

    /// mkdir in every hierarchy, undoing partial work on failure. An
    /// existing group is an error: it could hold processes we did not start.
    fn make_group(&self, dirs: &Dirs) -> Result<(), SandboxError> {
        let mut attempts = 0;
        loop {
            self.prepare_harness()?;
            let mut made = Vec::new();
            let mut failed = None;
            for dir in dirs.unique() {
                match self.fs().mkdir(dir) {
                    Ok(()) => made.push(dir),
                    Err(e) => {
                        failed = Some((dir, e));
                        break;
                    }
                }
            }
            let Some((dir, e)) = failed else {
                return Ok(());
            };
            for d in made.iter().rev() {
                let _ = self.fs().rmdir(d);
            }
            // Another host object in this process may have removed the
            // shared `<pid>` directory just now: make it again.
            if e.kind() == io::ErrorKind::NotFound && attempts < 3 {
                attempts += 1;
                continue;
            }
            let message = if e.kind() == io::ErrorKind::AlreadyExists {
                "already exists (kernel ids must be unique)".to_string()
            } else {
                format!("mkdir: {e}")
            };
            return Err(cgroup_err(dir, message));
        }
    }

    /// Removes this harness's `<pid>` directories (at shutdown, after the
    /// kernels). Best effort: fails harmlessly while groups remain.
    pub fn remove_harness_dir(&self) {
        let _live = self
            .harness
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.harness.remove_dirs();
    }
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| u64::try_from(size).ok())
        .filter(|s| *s > 0)
        .unwrap_or(4096)
}
