//! The host: retrace's subtree, this harness's directory in it, and the
//! creation of kernel groups.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::detect::host_has_swap;
use super::fs::Fs;
use super::layout::{valid_id, Dirs};
use super::{unified, CgroupError, CgroupLimits, CgroupMode, KernelCgroup};
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
    /// The one `Harness` of this process for `dirs`: every host object
    /// that reaches the same `<pid>` directories shares its lock and count,
    /// so one can never remove the directory while another creates a group
    /// in it.
    fn shared(dirs: Dirs, fs: Fs) -> Arc<Harness> {
        static LIVE: Mutex<Vec<Weak<Harness>>> = Mutex::new(Vec::new());
        let mut all = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|h| h.strong_count() > 0);
        if let Some(found) = all
            .iter()
            .filter_map(Weak::upgrade)
            .find(|h| h.dirs.0 == dirs.0)
        {
            return found;
        }
        let harness = Arc::new(Harness {
            dirs,
            live: Mutex::new(0),
            fs,
        });
        all.push(Arc::downgrade(&harness));
        harness
    }

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
        Self::at_on(mode, root, Fs::default())
    }

    /// [`Self::at`] with directory operations through `fs`.
    pub(super) fn at_on(mode: CgroupMode, root: &Path, fs: Fs) -> CgroupHost {
        let (subtree, v2_parent) = mode.version().layout_at(root);
        CgroupHost::build(mode, subtree, v2_parent, host_has_swap(), fs)
    }

    pub(super) fn build(
        mode: CgroupMode,
        subtree: Dirs,
        v2_parent: Option<PathBuf>,
        host_has_swap: bool,
        fs: Fs,
    ) -> CgroupHost {
        let harness = Harness::shared(subtree.join(&std::process::id().to_string()), fs);
        CgroupHost {
            mode,
            subtree,
            v2_parent,
            host_has_swap,
            harness,
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
    pub(super) fn prepare(&self) -> Result<(), CgroupError> {
        if let Some(parent) = &self.v2_parent {
            unified::enable_controllers(parent, &unified::NEEDED)?;
        }
        self.make_and_delegate(&self.subtree)
    }

    /// [`Self::prepare`] plus this harness's `<pid>` directories.
    fn prepare_harness(&self) -> Result<(), CgroupError> {
        self.prepare()?;
        self.make_and_delegate(&self.harness.dirs)
    }

    /// Creates `dirs` if missing and hands the controllers on below them.
    fn make_and_delegate(&self, dirs: &Dirs) -> Result<(), CgroupError> {
        for dir in dirs.unique() {
            self.fs()
                .ensure_dir(dir)
                .map_err(|cause| CgroupError::Mkdir {
                    dir: dir.to_path_buf(),
                    cause,
                })?;
        }
        self.mode.version().delegate(dirs)
    }

    /// Creates the group of one kernel, `<subtree>/<harness pid>/<id>` in
    /// every hierarchy, writes `limits` and reads them back. The group is
    /// removed again if anything fails.
    pub fn create(&self, id: &str, limits: &CgroupLimits) -> Result<KernelCgroup, SandboxError> {
        let page = page_size();
        let memory_bytes = limits.memory_bytes / page * page;
        let dir = self.subtree.primary().to_path_buf();
        if !valid_id(id) {
            let id = id.to_string();
            return Err(CgroupError::InvalidId { dir, id }.into());
        }
        if memory_bytes == 0 || limits.pids == 0 {
            return Err(CgroupError::NoLimit { dir }.into());
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
            return Err(e.into());
        }
        Ok(group)
    }

    /// mkdir in every hierarchy, undoing partial work on failure. An
    /// existing group is an error: it could hold processes we did not start.
    /// Called with the harness lock held, so the `<pid>` directories made
    /// first stay until the group is in them.
    fn make_group(&self, dirs: &Dirs) -> Result<(), CgroupError> {
        self.prepare_harness()?;
        let mut made: Vec<&Path> = Vec::new();
        for dir in dirs.unique() {
            if let Err(e) = self.fs().mkdir(dir) {
                for d in made.iter().rev() {
                    let _ = self.fs().rmdir(d);
                }
                let dir = dir.to_path_buf();
                return Err(if e.kind() == io::ErrorKind::AlreadyExists {
                    CgroupError::Exists { dir }
                } else {
                    CgroupError::Mkdir { dir, cause: e }
                });
            }
            made.push(dir);
        }
        Ok(())
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
