//! One cgroup per kernel, on cgroup v1, v1 hybrid and v2 hosts.
//!
//! Plain reads and writes of cgroupfs files, one file per controller, rather
//! than the `cgroups-rs` crate: it hard-codes `/sys/fs/cgroup` (so it cannot
//! be tested on fixture trees), ignores some failed writes, and its destroy
//! moves live tasks to the root cgroup (reference §1.11).
//!
//! Layout: in every hierarchy `<mount>/retrace/<harness pid>/<kernel id>`.
//! The per-harness directory lets a later harness find and reclaim what a
//! crashed one left. On v2 without the root cgroup, `retrace/` lives in the
//! cgroup delegated to us and the harness moves itself into a `harness` leaf.
//!
//! Every limit is read back after writing, processes are never migrated out
//! of a group (a group is emptied by killing), and counters are cumulative:
//! callers classify on deltas ([`Counters::since`]).

mod cpu;
mod freezer;
mod fs;
mod memory;
mod mountinfo;
mod pids;
mod unified;

#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use self::fs::{cgroup_err, Fs};
use self::mountinfo::CgroupMount;
use crate::sandbox::{Counters, KillReport, SandboxError};

/// Where cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// retrace's own subtree in each hierarchy.
const SUBTREE: &str = "retrace";
/// v2 delegation: the leaf the harness moves itself into.
const HARNESS_LEAF: &str = "harness";
/// How long a kill may take before survivors are reported.
const KILL_BUDGET: Duration = Duration::from_secs(2);
/// Kill again if a group is not empty after this long.
const REKILL_EVERY: Duration = Duration::from_millis(50);
/// How long to wait for a freezer to reach FROZEN in one kill round.
const FREEZE_BUDGET: Duration = Duration::from_millis(100);
/// How long rmdir keeps retrying EBUSY.
const RMDIR_BUDGET: Duration = Duration::from_secs(2);
/// Poll interval while waiting for a group to empty.
const POLL: Duration = Duration::from_millis(1);

const FIX_ROOT_V1: &str =
    "run retrace as root (cgroup v1 cannot be delegated to an unprivileged user)";
const FIX_ROOT_V2: &str = "run retrace as root, or in a delegated cgroup: \
     `systemd-run --user --scope -p Delegate=yes retrace ...`";
const FIX_CONTROLLERS: &str = "mount the memory, pids, cpu, cpuacct and freezer cgroup \
     controllers under /sys/fs/cgroup (cgroup v1), or boot with the unified hierarchy (cgroup v2)";
const FIX_SWAP: &str = "enable swap accounting (boot with `swapaccount=1`) or turn swap off \
     (`swapoff -a`): otherwise a kernel could swap past its memory limit";

/// How the host mounts cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// v1 controller hierarchies only.
    V1,
    /// v1 controllers plus an (empty) cgroup2 tree at `/sys/fs/cgroup/unified`.
    Hybrid,
    /// The unified hierarchy at `/sys/fs/cgroup`.
    V2,
}

impl std::fmt::Display for CgroupMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgroupMode::V1 => "cgroup-v1",
            CgroupMode::Hybrid => "cgroup-v1-hybrid",
            CgroupMode::V2 => "cgroup-v2",
        })
    }
}

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

/// What the host offers, for startup checks and run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub mode: CgroupMode,
    /// A throwaway group could be created and removed.
    pub writable: bool,
    /// Controllers available to kernel groups.
    pub controllers: Vec<String>,
    /// `cgroup.kill` exists (v2, or the unified tree on hybrid).
    pub cgroup_kill: bool,
    /// Swap can be limited (`memory.memsw.*` on v1, `memory.swap.max` on v2).
    pub swap_accounting: bool,
    pub host_has_swap: bool,
    /// Human-readable findings; empty when all is well.
    pub problems: Vec<String>,
}

/// How [`KernelCgroup::kill_all`] kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillMethod {
    /// Write `1` to `cgroup.kill` (v2, and the unified tree on hybrid).
    CgroupKill,
    /// Freeze, SIGKILL every member, thaw (v1 `freezer`; v2 `cgroup.freeze`
    /// before Linux 5.14).
    Freezer,
}

impl std::fmt::Display for KillMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KillMethod::CgroupKill => "cgroup.kill",
            KillMethod::Freezer => "freezer",
        })
    }
}

/// One hierarchy a group has a directory in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tree {
    Memory,
    Pids,
    Cpu,
    Cpuacct,
    Freezer,
    /// The cgroup2 tree of a hybrid host (no controllers).
    Unified,
    /// The cgroup2 tree of a v2 host.
    V2,
}

impl Tree {
    /// The v1 controllers retrace needs, with their names.
    const V1: [(Tree, &'static str); 5] = [
        (Tree::Memory, "memory"),
        (Tree::Pids, "pids"),
        (Tree::Cpu, "cpu"),
        (Tree::Cpuacct, "cpuacct"),
        (Tree::Freezer, "freezer"),
    ];
}

/// The directories of one group path, one per hierarchy. `cpu` and
/// `cpuacct` share a directory where they are mounted together.
#[derive(Debug, Clone)]
struct Dirs(Vec<(Tree, PathBuf)>);

impl Dirs {
    fn get(&self, tree: Tree) -> Option<&Path> {
        self.0
            .iter()
            .find(|(t, _)| *t == tree)
            .map(|(_, p)| p.as_path())
    }

    /// The directory of `tree`; the constructors give every mode its trees.
    fn dir(&self, tree: Tree) -> &Path {
        self.get(tree)
            .unwrap_or_else(|| panic!("cgroup layout without a {tree:?} hierarchy"))
    }

    fn join(&self, name: &str) -> Dirs {
        Dirs(self.0.iter().map(|(t, p)| (*t, p.join(name))).collect())
    }

    /// Each directory once, in hierarchy order.
    fn unique(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for (_, p) in &self.0 {
            if !out.contains(&p.as_path()) {
                out.push(p);
            }
        }
        out
    }

    /// The directory used in messages: memory on v1, the group on v2.
    fn primary(&self) -> &Path {
        self.get(Tree::Memory)
            .or_else(|| self.get(Tree::V2))
            .unwrap_or_else(|| self.0[0].1.as_path())
    }
}

/// This harness's `<subtree>/<pid>` directories and how many kernel groups
/// live in them; the lock also orders creating and removing the directory.
#[derive(Debug)]
struct Harness {
    dirs: Dirs,
    live: Mutex<usize>,
    fs: Fs,
}

impl Harness {
    /// Best effort: fails harmlessly while groups remain.
    fn remove_dirs(&self) {
        for dir in self.dirs.unique() {
            let _ = self.fs.rmdir(dir);
        }
    }

    fn release_one(&self) {
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
    mode: CgroupMode,
    /// `<mount>/retrace` in each hierarchy.
    subtree: Dirs,
    /// v2: the group whose `cgroup.subtree_control` hands controllers to
    /// `subtree` (the root, or the cgroup delegated to us).
    v2_parent: Option<PathBuf>,
    host_has_swap: bool,
    harness: Arc<Harness>,
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

    fn build(
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

    fn fs(&self) -> &Fs {
        &self.harness.fs
    }

    fn fix(&self) -> &'static str {
        match self.mode {
            CgroupMode::V2 => FIX_ROOT_V2,
            _ => FIX_ROOT_V1,
        }
    }

    /// Creates `retrace/` in every hierarchy and, on v2, hands the
    /// controllers down to it. Idempotent.
    fn prepare(&self) -> Result<(), SandboxError> {
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

    /// Checks what kernel groups would get, creating and removing a
    /// throwaway group.
    pub fn probe(&self) -> Probe {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut problems = Vec::new();
        let controllers = self.controllers();
        let needed: Vec<&str> = match self.mode {
            CgroupMode::V2 => unified::NEEDED.to_vec(),
            _ => Tree::V1.iter().map(|(_, n)| *n).collect(),
        };
        for name in needed {
            if !controllers.iter().any(|c| c == name) {
                problems.push(format!("controller {name} is not available"));
            }
        }

        let name = format!(
            "probe-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let scratch = self.subtree.join(&name);
        let mut made = Vec::new();
        let mut failure = self.prepare().err().map(|e| e.to_string());
        if failure.is_none() {
            for dir in scratch.unique() {
                match self.fs().mkdir(dir) {
                    Ok(()) => made.push(dir),
                    Err(e) => {
                        failure = Some(format!("cannot create {}: {e}", dir.display()));
                        break;
                    }
                }
            }
        }
        let writable = failure.is_none();
        // Ask the throwaway group (a non-root group has every file a kernel
        // group would); without one, fall back to what the subtree shows.
        let sample = if writable { &scratch } else { &self.subtree };
        let cgroup_kill = match self.mode {
            CgroupMode::V1 => false,
            CgroupMode::Hybrid => sample.get(Tree::Unified).is_some_and(unified::has_kill),
            CgroupMode::V2 => unified::has_kill(sample.dir(Tree::V2)),
        };
        let swap_accounting = match self.mode {
            CgroupMode::V2 => memory::swap_accounting_v2(sample.dir(Tree::V2)),
            _ => {
                let dir = sample.dir(Tree::Memory);
                memory::swap_accounting_v1(dir)
                    || (!writable && dir.parent().is_some_and(memory::swap_accounting_v1))
            }
        };
        let deadline = Instant::now() + Duration::from_millis(200);
        for dir in made.iter().rev() {
            let _ = self.fs().rmdir_retry(dir, deadline);
        }

        if let Some(failure) = failure {
            problems.push(failure);
        }
        if self.host_has_swap && !swap_accounting {
            problems.push("swap is on but swap accounting is off (swapaccount=1)".into());
        }
        if self.mode != CgroupMode::V1 && writable && !cgroup_kill {
            problems.push("no cgroup.kill (Linux < 5.14): kills use the freezer".into());
        }
        Probe {
            mode: self.mode,
            writable,
            controllers,
            cgroup_kill,
            swap_accounting,
            host_has_swap: self.host_has_swap,
            problems,
        }
    }

    /// v1: the needed controllers whose hierarchy is there; v2: what the
    /// parent hands to retrace's subtree.
    fn controllers(&self) -> Vec<String> {
        match self.mode {
            CgroupMode::V2 => {
                let sub = self.subtree.dir(Tree::V2);
                let dir = if sub.is_dir() {
                    sub
                } else {
                    self.v2_parent.as_deref().unwrap_or(sub)
                };
                unified::controllers(dir)
            }
            _ => Tree::V1
                .iter()
                .filter(|(t, _)| {
                    let sub = self.subtree.dir(*t);
                    sub.is_dir() || sub.parent().is_some_and(Path::is_dir)
                })
                .map(|(_, n)| n.to_string())
                .collect(),
        }
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

    /// Kills and removes the groups of harnesses that are gone: `<pid>`
    /// directories whose process is dead, a zombie, or (pid reused) not a
    /// retrace process. Returns the removed groups' paths. Touches nothing
    /// outside retrace's subtree, nor directories not named by a pid.
    pub fn reclaim_stale(&self) -> Vec<PathBuf> {
        let own = std::process::id();
        let mut names: Vec<String> = Vec::new();
        for dir in self.subtree.unique() {
            for name in fs::child_names(dir) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut reclaimed = Vec::new();
        for name in names {
            let Ok(pid) = name.parse::<u32>() else {
                continue;
            };
            // A crash may leave only some hierarchies; any one dates the dir.
            let dirs = self.subtree.join(&name);
            let made = dirs.unique().into_iter().find_map(modified);
            if pid == own || harness_alive(pid, made) {
                continue;
            }
            let mut ids: Vec<String> = Vec::new();
            for dir in dirs.unique() {
                for id in fs::child_names(dir) {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
            for id in ids {
                let group = KernelCgroup {
                    mode: self.mode,
                    dirs: dirs.join(&id),
                    fs: self.fs().clone(),
                    owner: None,
                    removed: AtomicBool::new(false),
                };
                if group.remove().is_ok() {
                    reclaimed.push(group.path());
                }
            }
            let deadline = Instant::now() + Duration::from_millis(100);
            for dir in dirs.unique() {
                let _ = self.fs().rmdir_retry(dir, deadline);
            }
        }
        reclaimed
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

/// The group of one kernel.
#[derive(Debug)]
pub struct KernelCgroup {
    mode: CgroupMode,
    dirs: Dirs,
    fs: Fs,
    /// The harness whose count this group holds; `None` while reclaiming
    /// another harness's leftovers.
    owner: Option<Arc<Harness>>,
    removed: AtomicBool,
}

impl KernelCgroup {
    fn apply(
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

    /// Cumulative counters; missing files read as 0.
    pub fn counters(&self) -> Counters {
        match self.mode {
            CgroupMode::V2 => {
                let dir = self.dirs.dir(Tree::V2);
                Counters {
                    oom_kills: memory::oom_kills_v2(dir),
                    pids_max_events: pids::max_events(dir),
                    cpu_usage_usec: cpu::usage_usec_v2(dir).unwrap_or(0),
                    nr_throttled: cpu::nr_throttled(dir),
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
                    pids_max_events: pids::max_events(self.dirs.dir(Tree::Pids)),
                    cpu_usage_usec: usage,
                    nr_throttled: cpu::nr_throttled(self.dirs.dir(Tree::Cpu)),
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

    pub fn kill_method(&self) -> KillMethod {
        let kill_dir = self.dirs.get(Tree::Unified).or(self.dirs.get(Tree::V2));
        match kill_dir {
            Some(dir) if unified::has_kill(dir) => KillMethod::CgroupKill,
            _ => KillMethod::Freezer,
        }
    }

    /// Nothing alive in any hierarchy: `populated 0` where `cgroup.events`
    /// exists, an empty `cgroup.procs` elsewhere.
    fn is_empty(&self) -> bool {
        self.dirs
            .unique()
            .into_iter()
            .flat_map(fs::bottom_up)
            .all(|d| match unified::populated(&d) {
                Some(populated) => !populated,
                None => fs::read_pids(&d.join(unified::PROCS)).is_empty(),
            })
    }

    /// Kills every process of the group and waits (up to 2 s) until none is
    /// left. `extra_pid`, the namespace init, also gets SIGCONT and SIGKILL
    /// (a stopped namespaced process may ignore a lone SIGKILL); it must not
    /// have been reaped yet.
    pub fn kill_all(&self, extra_pid: Option<i32>) -> KillReport {
        let start = Instant::now();
        let method = self.kill_method();
        let mut last_round: Option<Instant> = None;
        loop {
            if last_round.is_none_or(|t| t.elapsed() >= REKILL_EVERY) {
                self.kill_round(method, last_round.is_some());
                if last_round.is_none() {
                    if let Some(pid) = extra_pid.filter(|p| *p > 1) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                }
                last_round = Some(Instant::now());
            }
            if self.is_empty() || start.elapsed() >= KILL_BUDGET {
                break;
            }
            std::thread::sleep(POLL);
        }
        KillReport {
            method: method.to_string(),
            kill_ms: start.elapsed().as_secs_f64() * 1e3,
            survivors: self.pids().len(),
        }
    }

    fn kill_round(&self, method: KillMethod, again: bool) {
        match method {
            KillMethod::CgroupKill => {
                let dir = self
                    .dirs
                    .get(Tree::Unified)
                    .or(self.dirs.get(Tree::V2))
                    .expect("cgroup.kill implies a unified directory");
                let killed = unified::kill(dir).is_ok();
                // cgroup.kill handles racing forks; a later round only
                // catches what it could not see (on hybrid, a process that
                // is in the v1 hierarchies only).
                if !killed {
                    self.freeze_kill_thaw();
                } else if again {
                    self.sigkill_members();
                }
            }
            KillMethod::Freezer => self.freeze_kill_thaw(),
        }
    }

    /// Frozen processes cannot fork, so the member list is complete; the
    /// SIGKILLs take effect on thaw.
    fn freeze_kill_thaw(&self) {
        if let Some(dir) = self.dirs.get(Tree::Freezer) {
            freezer::freeze_v1(dir, FREEZE_BUDGET);
            self.sigkill_members();
            freezer::thaw_v1(dir);
        } else if let Some(dir) = self.dirs.get(Tree::V2) {
            freezer::freeze_v2(dir, FREEZE_BUDGET);
            self.sigkill_members();
            freezer::thaw_v2(dir);
        } else {
            self.sigkill_members();
        }
    }

    fn sigkill_members(&self) {
        let own = std::process::id() as i32;
        // Never pid 1 or ourselves, whatever a group lists.
        for pid in self.pids().into_iter().filter(|p| *p > 1 && *p != own) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
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

fn unavailable(reason: String, fix: &str) -> SandboxError {
    SandboxError::Unavailable {
        reason,
        fix: fix.to_string(),
    }
}

/// What mountinfo says about the host.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    mode: CgroupMode,
    /// v1/hybrid: controller mount points (cpu and cpuacct may coincide),
    /// plus unified; v2: the single mount.
    trees: Vec<(Tree, PathBuf)>,
    /// v2: the hierarchy path mounted at the mount point.
    v2_root: String,
}

/// Chooses the mode: v2 is cgroup2 at `root`; hybrid is the v1 controllers
/// plus cgroup2 at `root/unified`; v1 is the controllers alone.
fn find_mounts(mounts: &[CgroupMount], root: &Path) -> Result<Found, String> {
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
fn delegate_v2(mount: &Path, own: &str, fs: &Fs) -> Result<PathBuf, SandboxError> {
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

/// Kernel ids become directory names.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// Any active swap area in /proc/swaps (header line excepted).
fn host_has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|t| t.lines().skip(1).any(|l| !l.trim().is_empty()))
        .unwrap_or(false)
}

/// Seconds since the epoch of a directory's last modification; a cgroupfs
/// directory keeps its creation time (child groups do not change it).
fn modified(path: &Path) -> Option<f64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

/// Start of a process, in seconds since the epoch (to about 1 s: `btime`
/// is whole seconds).
fn process_start(starttime_ticks: u64) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime = fs::keyed(&stat, "btime")?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    Some(btime as f64 + starttime_ticks as f64 / hz as f64)
}

/// Whether the harness that made a `<pid>` directory (last modified at
/// `made`) still runs. A live process that started before the directory
/// existed must be its maker (a pid is never shared by two live
/// processes); a later one holds a reused pid unless it is retrace itself.
fn harness_alive(pid: u32, made: Option<f64>) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name may contain spaces and ')': fields follow the last ')'.
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    if matches!(fields.first(), None | Some(&"Z") | Some(&"X")) {
        return false;
    }
    // Field 22 of stat, starttime, is the 20th after the command name.
    let started = fields
        .get(19)
        .and_then(|t| t.parse().ok())
        .and_then(process_start);
    if let (Some(started), Some(made)) = (started, made) {
        // One second of slack for btime's rounding.
        if started <= made + 1.0 {
            return true;
        }
    }
    is_retrace(pid)
}

/// Same executable name as ours, or a command name mentioning retrace.
fn is_retrace(pid: u32) -> bool {
    let name = |p: PathBuf| {
        p.file_name().map(|n| {
            n.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string()
        })
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(name);
    let own = std::fs::read_link("/proc/self/exe").ok().and_then(name);
    if exe.is_some() && exe == own {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.contains("retrace"))
}
