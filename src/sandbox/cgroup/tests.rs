//! Host-level tests on fixture trees shaped like cgroupfs. A small
//! simulator plays the kernel's part: it fills new directories with
//! interface files and ignores them on rmdir.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::detect::{delegate_v2, find_mounts, CGROUP_ROOT};
use super::fs::{Fs, Simulator};
use super::layout::{Dirs, Tree, SUBTREE};
use super::mountinfo::parse_mountinfo;
use super::reclaim::{harness_alive, is_retrace};
use super::*;
use crate::sandbox::{Counters, SandboxError};

const UNLIMITED_V1: &str = "9223372036854771712\n";

struct FakeKernfs {
    root: PathBuf,
    mode: CgroupMode,
    swap_accounting: bool,
    cgroup_kill: bool,
    /// A file that accepts writes and reads back empty (`/dev/null`).
    broken: Option<&'static str>,
}

impl FakeKernfs {
    fn new(root: &Path, mode: CgroupMode) -> FakeKernfs {
        FakeKernfs {
            root: root.to_path_buf(),
            mode,
            swap_accounting: true,
            cgroup_kill: true,
            broken: None,
        }
    }

    fn files(&self, dir: &Path) -> Vec<(&'static str, &'static str)> {
        let mut files = vec![(unified::PROCS, "")];
        let events = (unified::EVENTS, "populated 0\nfrozen 0\n");
        let memory_v1 = [
            (memory::V1_LIMIT, UNLIMITED_V1),
            (
                memory::V1_OOM_CONTROL,
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            ),
            (memory::V1_PEAK, "0\n"),
            (memory::V1_FAILCNT, "0\n"),
        ];
        let pids = [(pids::MAX, "max\n"), (pids::EVENTS, "max 0\n")];
        let cpu_v1 = [
            (cpu::V1_PERIOD, "100000\n"),
            (cpu::V1_QUOTA, "-1\n"),
            (cpu::V1_SHARES, "1024\n"),
            (
                cpu::STAT,
                "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
            ),
        ];
        let cpuacct = [(cpu::V1_USAGE, "0\n")];
        if self.mode == CgroupMode::V2 {
            files.extend([
                events,
                (freezer::V2_FREEZE, "0\n"),
                (unified::SUBTREE_CONTROL, ""),
                (unified::CONTROLLERS, "cpu io memory pids\n"),
                (memory::V2_MAX, "max\n"),
                (memory::V2_OOM_GROUP, "0\n"),
                (
                    memory::V2_EVENTS,
                    "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
                ),
                (memory::V2_PEAK, "0\n"),
                (cpu::V2_MAX, "max 100000\n"),
                (cpu::V2_WEIGHT, "100\n"),
                (
                    cpu::STAT,
                    "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\n",
                ),
            ]);
            files.extend(pids);
            if self.swap_accounting {
                files.push((memory::V2_SWAP_MAX, "max\n"));
            }
            if self.cgroup_kill {
                files.push((unified::KILL, ""));
            }
            return files;
        }
        let hierarchy = dir
            .strip_prefix(&self.root)
            .ok()
            .and_then(|r| r.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        match hierarchy.as_str() {
            "memory" => {
                files.extend(memory_v1);
                if self.swap_accounting {
                    files.push((memory::V1_MEMSW, UNLIMITED_V1));
                }
            }
            "pids" => files.extend(pids),
            "cpu" => files.extend(cpu_v1),
            "cpuacct" => files.extend(cpuacct),
            "cpu,cpuacct" => {
                files.extend(cpu_v1);
                files.extend(cpuacct);
            }
            "freezer" => files.push((freezer::V1_STATE, "THAWED\n")),
            "unified" => {
                files.extend([
                    events,
                    (freezer::V2_FREEZE, "0\n"),
                    (unified::SUBTREE_CONTROL, ""),
                    (unified::CONTROLLERS, ""),
                    (cpu::STAT, "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"),
                ]);
                if self.cgroup_kill {
                    files.push((unified::KILL, ""));
                }
            }
            other => panic!("fixture has no hierarchy {other:?} for {}", dir.display()),
        }
        files
    }
}

impl Simulator for FakeKernfs {
    fn populate(&self, dir: &Path) {
        for (name, content) in self.files(dir) {
            let path = dir.join(name);
            if self.broken == Some(name) {
                std::os::unix::fs::symlink("/dev/null", &path).unwrap();
            } else {
                std::fs::write(&path, content).unwrap();
            }
        }
    }

    fn depopulate(&self, dir: &Path) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if !entry.file_type().unwrap().is_dir() {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
    }
}

/// A fixture tree for `sim.mode` with its root cgroups in place.
fn fixture(sim: FakeKernfs) -> CgroupHost {
    let root = sim.root.clone();
    let mode = sim.mode;
    match mode {
        CgroupMode::V2 => {
            std::fs::write(root.join(unified::PROCS), "1\n").unwrap();
            std::fs::write(root.join(unified::SUBTREE_CONTROL), "").unwrap();
            std::fs::write(root.join(unified::CONTROLLERS), "cpu io memory pids\n").unwrap();
        }
        _ => {
            let cpu: &[&str] = if root.join("cpu,cpuacct").exists() {
                &["cpu,cpuacct"]
            } else {
                &["cpu", "cpuacct"]
            };
            let mut names = vec!["memory", "pids", "freezer"];
            names.extend(cpu);
            if mode == CgroupMode::Hybrid {
                names.push("unified");
            }
            for name in names {
                let dir = root.join(name);
                std::fs::create_dir_all(&dir).unwrap();
                sim.populate(&dir);
            }
        }
    }
    let fs = Fs {
        sim: Some(Arc::new(sim)),
    };
    let mut host = CgroupHost::at_on(mode, &root, fs);
    host.host_has_swap = false;
    host
}

fn limits() -> CgroupLimits {
    CgroupLimits {
        memory_bytes: 64 << 20,
        pids: 16,
        cpus: 0.5,
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn write(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
}

fn pid_dir() -> String {
    std::process::id().to_string()
}

#[test]
fn mode_names() {
    assert_eq!(CgroupMode::V1.to_string(), "cgroup-v1");
    assert_eq!(CgroupMode::Hybrid.to_string(), "cgroup-v1-hybrid");
    assert_eq!(CgroupMode::V2.to_string(), "cgroup-v2");
    assert_eq!(KillMethod::CgroupKill.to_string(), "cgroup.kill");
    assert_eq!(KillMethod::Freezer.to_string(), "freezer");
}

#[test]
fn v2_create_writes_limits_and_enables_controllers_on_the_way() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V2));
    let group = host.create("k1", &limits()).unwrap();
    let leaf = t.path().join("retrace").join(pid_dir()).join("k1");
    assert_eq!(group.path(), leaf);
    assert_eq!(read(&leaf.join("memory.max")), "67108864");
    assert_eq!(read(&leaf.join("memory.swap.max")), "0");
    assert_eq!(read(&leaf.join("memory.oom.group")), "1");
    assert_eq!(read(&leaf.join("pids.max")), "16");
    assert_eq!(read(&leaf.join("cpu.max")), "50000 100000");
    for dir in [
        t.path().to_path_buf(),
        t.path().join("retrace"),
        t.path().join("retrace").join(pid_dir()),
    ] {
        assert_eq!(
            read(&dir.join(unified::SUBTREE_CONTROL)),
            "+memory +pids +cpu",
            "{}",
            dir.display()
        );
    }
    assert_eq!(group.limits_read_back(), limits());
    assert_eq!(group.procs_files(), vec![leaf.join("cgroup.procs")]);
    assert_eq!(group.kill_method(), KillMethod::CgroupKill);
    assert_eq!(group.memory_peak(), Some(0));
    group.remove().unwrap();
}

#[test]
fn v2_without_swap_accounting_is_refused_only_with_swap() {
    let t = tempfile::tempdir().unwrap();
    let mut sim = FakeKernfs::new(t.path(), CgroupMode::V2);
    sim.swap_accounting = false;
    let mut host = fixture(sim);
    host.create("ok", &limits()).unwrap().remove().unwrap();
    host.host_has_swap = true;
    let err = host.create("swap", &limits()).unwrap_err();
    assert!(err.to_string().contains("memory.swap.max"), "{err}");
    assert!(!t
        .path()
        .join("retrace")
        .join(pid_dir())
        .join("swap")
        .exists());
}

#[test]
fn v2_delegated_subtree() {
    let t = tempfile::tempdir().unwrap();
    let sim = Arc::new(FakeKernfs::new(t.path(), CgroupMode::V2));
    let fs = Fs {
        sim: Some(sim.clone()),
    };
    let own = "/user.slice/user-1000.slice/run-r1.scope";
    let scope = t.path().join(own.trim_start_matches('/'));
    std::fs::create_dir_all(&scope).unwrap();
    sim.populate(&scope);
    write(&scope.join(unified::PROCS), "4242\n");

    let parent = delegate_v2(t.path(), own, &fs).unwrap();
    assert_eq!(parent, scope);
    // We moved ourselves ("0") into the harness leaf.
    assert_eq!(read(&scope.join("harness").join(unified::PROCS)), "0");
    // Detecting again from inside the leaf finds the same group.
    let again = delegate_v2(t.path(), &format!("{own}/harness"), &fs).unwrap();
    assert_eq!(again, scope);

    let host = CgroupHost::build(
        CgroupMode::V2,
        Dirs(vec![(Tree::V2, parent.join(SUBTREE))]),
        Some(parent.clone()),
        false,
        fs,
    );
    let group = host.create("k", &limits()).unwrap();
    assert!(group.path().starts_with(scope.join("retrace")));
    assert_eq!(
        read(&scope.join(unified::SUBTREE_CONTROL)),
        "+memory +pids +cpu"
    );
    group.remove().unwrap();
}

#[test]
fn v1_create_writes_limits_in_each_hierarchy() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    let group = host.create("k1", &limits()).unwrap();
    let leaf = |h: &str| t.path().join(h).join("retrace").join(pid_dir()).join("k1");
    assert_eq!(
        read(&leaf("memory").join("memory.limit_in_bytes")),
        "67108864"
    );
    assert_eq!(
        read(&leaf("memory").join("memory.memsw.limit_in_bytes")),
        "67108864"
    );
    assert_eq!(read(&leaf("pids").join("pids.max")), "16");
    assert_eq!(read(&leaf("cpu").join("cpu.cfs_period_us")), "100000");
    assert_eq!(read(&leaf("cpu").join("cpu.cfs_quota_us")), "50000");
    assert_eq!(group.path(), leaf("memory"));
    assert_eq!(
        group.procs_files(),
        ["memory", "pids", "cpu", "cpuacct", "freezer"]
            .map(|h| leaf(h).join("cgroup.procs"))
            .to_vec()
    );
    assert_eq!(group.limits_read_back(), limits());
    assert_eq!(group.kill_method(), KillMethod::Freezer);
    group.remove().unwrap();
}

#[test]
fn v1_combined_cpu_cpuacct() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("cpu,cpuacct")).unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    let group = host.create("k1", &limits()).unwrap();
    let leaf = t
        .path()
        .join("cpu,cpuacct/retrace")
        .join(pid_dir())
        .join("k1");
    assert_eq!(read(&leaf.join("cpu.cfs_quota_us")), "50000");
    let files = group.procs_files();
    assert_eq!(files.len(), 4);
    assert_eq!(files[2], leaf.join("cgroup.procs"));
    write(&leaf.join("cpuacct.usage"), "3000000\n");
    assert_eq!(group.counters().cpu_usage_usec, 3000);
    group.remove().unwrap();
    assert!(!leaf.exists());
}

#[test]
fn v1_missing_memsw_is_refused_only_with_swap() {
    let t = tempfile::tempdir().unwrap();
    let mut sim = FakeKernfs::new(t.path(), CgroupMode::V1);
    sim.swap_accounting = false;
    let mut host = fixture(sim);
    host.create("ok", &limits()).unwrap().remove().unwrap();
    host.host_has_swap = true;
    let err = host.create("swap", &limits()).unwrap_err();
    assert!(
        err.to_string().contains("memory.memsw.limit_in_bytes"),
        "{err}"
    );
    assert!(err.to_string().contains("swapaccount=1"), "{err}");
}

#[test]
fn hybrid_also_creates_the_unified_group_and_uses_cgroup_kill() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::Hybrid));
    let group = host.create("k1", &limits()).unwrap();
    let unified_leaf = t.path().join("unified/retrace").join(pid_dir()).join("k1");
    assert!(unified_leaf.is_dir());
    let files = group.procs_files();
    assert_eq!(files.len(), 6);
    assert_eq!(files[5], unified_leaf.join("cgroup.procs"));
    assert_eq!(group.kill_method(), KillMethod::CgroupKill);
    let report = group.kill_all(None);
    assert_eq!(report.method, "cgroup.kill");
    assert_eq!(report.survivors, 0);
    assert_eq!(read(&unified_leaf.join("cgroup.kill")), "1");
    group.remove().unwrap();
}

#[test]
fn kill_method_falls_back_to_the_freezer_without_cgroup_kill() {
    for mode in [CgroupMode::Hybrid, CgroupMode::V2] {
        let t = tempfile::tempdir().unwrap();
        let mut sim = FakeKernfs::new(t.path(), mode);
        sim.cgroup_kill = false;
        let host = fixture(sim);
        let group = host.create("k1", &limits()).unwrap();
        assert_eq!(group.kill_method(), KillMethod::Freezer, "{mode}");
        let report = group.kill_all(None);
        assert_eq!(report.method, "freezer");
        assert_eq!(report.survivors, 0);
        group.remove().unwrap();
    }
}

#[test]
fn v1_kill_all_thaws_after_freezing() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    let group = host.create("k1", &limits()).unwrap();
    let report = group.kill_all(None);
    assert_eq!(report.method, "freezer");
    assert_eq!(report.survivors, 0);
    let state = group.dirs.dir(Tree::Freezer).join("freezer.state");
    assert_eq!(read(&state), "THAWED");
    group.remove().unwrap();
}

#[test]
fn cpu_is_unleashed_while_killed_processes_exit_and_restored_after() {
    for mode in [CgroupMode::V1, CgroupMode::Hybrid, CgroupMode::V2] {
        let t = tempfile::tempdir().unwrap();
        let host = fixture(FakeKernfs::new(t.path(), mode));
        let group = host.create("k1", &limits()).unwrap();
        let (dir, quota, weight, open, top) = match mode {
            CgroupMode::V2 => (
                group.dirs.dir(Tree::V2).to_path_buf(),
                cpu::V2_MAX,
                cpu::V2_WEIGHT,
                "max 100000",
                "10000",
            ),
            _ => (
                group.dirs.dir(Tree::Cpu).to_path_buf(),
                cpu::V1_QUOTA,
                cpu::V1_SHARES,
                "-1",
                "262144",
            ),
        };
        // The harness's directory and the subtree: every level of the path
        // that is retrace's own; never the host's root above.
        let ancestors = [
            dir.parent().unwrap(),
            dir.parent().unwrap().parent().unwrap(),
        ];
        assert!(ancestors[1].ends_with(SUBTREE), "{mode}");
        let root_weight = ancestors[1].parent().unwrap().join(weight);
        let weights = || ancestors.map(|a| read(&a.join(weight)).trim().to_string());
        let before = (read(&dir.join(quota)), read(&dir.join(weight)), weights());
        let root_before = std::fs::read_to_string(&root_weight).ok();
        let during = group
            .with_cpu_unleashed(|| (read(&dir.join(quota)), read(&dir.join(weight)), weights()));
        let raised = [top.to_string(), top.to_string()];
        assert_eq!(
            during,
            (open.to_string(), top.to_string(), raised),
            "{mode}"
        );
        let after = (read(&dir.join(quota)), read(&dir.join(weight)), weights());
        assert_eq!(after.0.trim(), before.0.trim(), "{mode}");
        assert_eq!(after.1.trim(), before.1.trim(), "{mode}");
        assert_eq!(after.2, before.2, "{mode}");
        assert_eq!(
            std::fs::read_to_string(&root_weight).ok(),
            root_before,
            "{mode}"
        );
        assert_eq!(group.limits_read_back().cpus, limits().cpus, "{mode}");
        group.remove().unwrap();
    }
}

#[test]
fn v1_counters_and_deltas() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    let group = host.create("k1", &limits()).unwrap();
    // A fresh group's peak reads 0: known, unlike a missing file.
    assert_eq!(
        group.counters(),
        Counters {
            memory_peak_bytes: Some(0),
            ..Default::default()
        }
    );
    let d = |tree| group.dirs.dir(tree).to_path_buf();
    let oom = d(Tree::Memory).join("memory.oom_control");
    write(&oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
    write(&d(Tree::Pids).join("pids.events"), "max 3\n");
    write(&d(Tree::Cpuacct).join("cpuacct.usage"), "2500000\n");
    let stat = "nr_periods 5\nnr_throttled 2\nthrottled_time 100\n";
    write(&d(Tree::Cpu).join("cpu.stat"), stat);
    let peak = d(Tree::Memory).join("memory.max_usage_in_bytes");
    write(&peak, "3000000\n");
    let failcnt = d(Tree::Memory).join("memory.failcnt");
    write(&failcnt, "4\n");
    let before = group.counters();
    assert_eq!(
        before,
        Counters {
            oom_kills: 1,
            memory_limit_hits: 4,
            pids_max_events: 3,
            cpu_usage_usec: 2500,
            nr_throttled: 2,
            memory_peak_bytes: Some(3_000_000),
        }
    );
    write(&oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
    write(&d(Tree::Pids).join("pids.events"), "max 10\n");
    write(&d(Tree::Cpuacct).join("cpuacct.usage"), "10000000\n");
    let stat = "nr_periods 9\nnr_throttled 4\nthrottled_time 300\n";
    write(&d(Tree::Cpu).join("cpu.stat"), stat);
    write(&peak, "5000000\n");
    write(&failcnt, "9\n");
    // The peak is a level: the delta carries the later reading.
    assert_eq!(
        group.counters().since(&before),
        Counters {
            oom_kills: 1,
            memory_limit_hits: 5,
            pids_max_events: 7,
            cpu_usage_usec: 7500,
            nr_throttled: 2,
            memory_peak_bytes: Some(5_000_000),
        }
    );
    assert_eq!(group.memory_peak(), Some(5_000_000));
    group.remove().unwrap();
}

#[test]
fn hybrid_cpu_usage_comes_from_unified_cpu_stat() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::Hybrid));
    let group = host.create("k1", &limits()).unwrap();
    let cpuacct = group.dirs.dir(Tree::Cpuacct).join("cpuacct.usage");
    write(&cpuacct, "9000000\n");
    let stat = group.dirs.dir(Tree::Unified).join("cpu.stat");
    write(&stat, "usage_usec 4242\nuser_usec 4000\nsystem_usec 242\n");
    assert_eq!(group.counters().cpu_usage_usec, 4242);
    // Without the unified file, cpuacct.usage (ns) is used.
    std::fs::remove_file(&stat).unwrap();
    assert_eq!(group.counters().cpu_usage_usec, 9000);
    group.remove().unwrap();
}

#[test]
fn v2_counters_and_missing_files() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V2));
    let group = host.create("k1", &limits()).unwrap();
    let dir = group.path();
    write(
        &dir.join("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 1\n",
    );
    write(&dir.join("pids.events"), "max 5\n");
    write(
        &dir.join("cpu.stat"),
        "usage_usec 1000\nuser_usec 800\nsystem_usec 200\n\
         nr_periods 4\nnr_throttled 1\nthrottled_usec 10\n",
    );
    write(&dir.join("memory.peak"), "7340032\n");
    assert_eq!(
        group.counters(),
        Counters {
            oom_kills: 1,
            memory_limit_hits: 3,
            pids_max_events: 5,
            cpu_usage_usec: 1000,
            nr_throttled: 1,
            memory_peak_bytes: Some(7_340_032),
        }
    );
    // Linux < 5.19 has no memory.peak: unknown, not zero.
    std::fs::remove_file(dir.join("memory.peak")).unwrap();
    assert_eq!(group.counters().memory_peak_bytes, None);
    for f in ["memory.events", "pids.events", "cpu.stat"] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    assert_eq!(group.counters(), Counters::default());
    assert_eq!(group.memory_peak(), None);
    group.remove().unwrap();
}

#[test]
fn read_back_mismatch_names_the_file_and_removes_the_group() {
    let t = tempfile::tempdir().unwrap();
    let mut sim = FakeKernfs::new(t.path(), CgroupMode::Hybrid);
    sim.broken = Some("pids.max");
    let host = fixture(sim);
    let err = host.create("k1", &limits()).unwrap_err();
    let pid_dir = |h: &str| t.path().join(h).join("retrace").join(pid_dir());
    match err {
        SandboxError::Cgroup { path, message } => {
            assert_eq!(path, pid_dir("pids").join("k1/pids.max"));
            assert!(message.contains("expected \"16\""), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    for h in ["memory", "pids", "cpu", "cpuacct", "freezer", "unified"] {
        assert!(!pid_dir(h).exists(), "{h} left behind");
        assert!(t.path().join(h).join("retrace").is_dir());
    }
}

#[test]
fn create_rejects_bad_and_duplicate_ids_and_limits() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    for id in ["", ".", "..", "a/b", "../x", "x y"] {
        assert!(host.create(id, &limits()).is_err(), "{id:?}");
    }
    let zero = CgroupLimits {
        pids: 0,
        ..limits()
    };
    assert!(host.create("z", &zero).is_err());
    let group = host.create("dup", &limits()).unwrap();
    let err = host.create("dup", &limits()).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    // The failed duplicate undid nothing of the first group.
    assert!(group.path().is_dir());
    assert_eq!(group.limits_read_back(), limits());
    group.remove().unwrap();
}

#[test]
fn memory_limit_is_rounded_down_to_pages() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V2));
    let odd = CgroupLimits {
        memory_bytes: (64 << 20) + 123,
        ..limits()
    };
    let group = host.create("k1", &odd).unwrap();
    assert_eq!(group.limits_read_back().memory_bytes, 64 << 20);
    group.remove().unwrap();
}

#[test]
fn remove_is_idempotent_and_the_last_group_takes_the_harness_dir() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::Hybrid));
    let a = host.create("a", &limits()).unwrap();
    let b = host.create("b", &limits()).unwrap();
    let hierarchies = ["memory", "pids", "cpu", "cpuacct", "freezer", "unified"];
    let pid_dir = |h: &str| t.path().join(h).join("retrace").join(pid_dir());
    a.remove().unwrap();
    a.remove().unwrap();
    for h in hierarchies {
        assert!(!pid_dir(h).join("a").exists(), "{h}");
        assert!(pid_dir(h).join("b").is_dir(), "{h}");
    }
    b.remove().unwrap();
    for h in hierarchies {
        assert!(!pid_dir(h).exists(), "{h}");
        assert!(t.path().join(h).join("retrace").is_dir(), "{h}");
    }
    // A new group makes the directory again.
    let c = host.create("c", &limits()).unwrap();
    assert!(pid_dir("memory").join("c").is_dir());
    c.remove().unwrap();
    host.remove_harness_dir();
}

#[test]
fn remove_takes_nested_groups_children_first() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V2));
    let group = host.create("k1", &limits()).unwrap();
    let nested = group.path().join("inner/deeper");
    for d in [group.path().join("inner"), nested.clone()] {
        host.fs().mkdir(&d).unwrap();
    }
    group.remove().unwrap();
    assert!(!group.path().exists());
}

fn set_mtime(dir: &Path, when: SystemTime) {
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn reclaim_stale_touches_only_dead_harness_dirs() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::Hybrid));
    let mine = host.create("mine", &limits()).unwrap();

    let pid_max: u32 = read(Path::new("/proc/sys/kernel/pid_max"))
        .trim()
        .parse()
        .unwrap();
    let dead = (pid_max + 12_345).to_string();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let reused = sleeper.id().to_string();
    let make = |harness: &str, id: &str| {
        for dir in host.subtree.join(harness).unique() {
            host.fs().ensure_dir(dir).unwrap();
            host.fs().mkdir(&dir.join(id)).unwrap();
        }
    };
    make(&dead, "k-dead");
    // A live process that started after its directory was made holds a
    // reused pid; it is not retrace, so the directory is stale.
    make(&reused, "k-reused");
    for dir in host.subtree.join(&reused).unique() {
        set_mtime(dir, SystemTime::now() - Duration::from_secs(3600));
    }
    // pid 1 started before this directory: it is the (live) maker.
    make("1", "k-init");
    // Not a pid: never ours to judge.
    make("notes", "k-other");
    let outside = t.path().join("memory/other-app");
    std::fs::create_dir(&outside).unwrap();

    let mut reclaimed = host.reclaim_stale();
    reclaimed.sort();
    let mem = t.path().join("memory/retrace");
    let mut expected = vec![
        mem.join(&dead).join("k-dead"),
        mem.join(&reused).join("k-reused"),
    ];
    expected.sort();
    assert_eq!(reclaimed, expected);
    for dir in host.subtree.unique() {
        assert!(!dir.join(&dead).exists(), "{}", dir.display());
        assert!(!dir.join(&reused).exists(), "{}", dir.display());
        assert!(dir.join("1/k-init").is_dir(), "{}", dir.display());
        assert!(dir.join("notes/k-other").is_dir(), "{}", dir.display());
        assert!(dir.join(pid_dir()).join("mine").is_dir());
    }
    assert!(outside.is_dir());
    assert!(host.reclaim_stale().is_empty());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    mine.remove().unwrap();
}

#[test]
fn liveness_of_harness_pids() {
    let own = std::process::id();
    assert!(is_retrace(own), "the test binary is named retrace-*");
    assert!(harness_alive(own, None));
    assert!(!harness_alive(u32::MAX - 1, None));
    // pid 1 started before anything made now.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(harness_alive(1, Some(now)));
}

#[test]
fn probe_reports_fixture_capabilities() {
    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V2));
    let probe = host.probe();
    assert!(probe.writable, "{probe:?}");
    assert!(probe.cgroup_kill);
    assert!(probe.swap_accounting);
    assert!(!probe.host_has_swap);
    assert_eq!(probe.mode, CgroupMode::V2);
    assert_eq!(probe.controllers, ["cpu", "io", "memory", "pids"]);
    assert!(probe.problems.is_empty(), "{:?}", probe.problems);
    // The throwaway group is gone.
    assert!(fs::child_names(&t.path().join("retrace")).is_empty());

    let t = tempfile::tempdir().unwrap();
    let host = fixture(FakeKernfs::new(t.path(), CgroupMode::V1));
    let probe = host.probe();
    assert!(probe.writable && !probe.cgroup_kill && probe.swap_accounting);
    assert_eq!(
        probe.controllers,
        ["memory", "pids", "cpu", "cpuacct", "freezer"]
    );
    assert!(probe.problems.is_empty(), "{:?}", probe.problems);

    let t = tempfile::tempdir().unwrap();
    let mut sim = FakeKernfs::new(t.path(), CgroupMode::Hybrid);
    sim.cgroup_kill = false;
    sim.swap_accounting = false;
    let mut host = fixture(sim);
    host.host_has_swap = true;
    let probe = host.probe();
    assert!(probe.writable && !probe.cgroup_kill && !probe.swap_accounting);
    assert_eq!(probe.problems.len(), 2, "{:?}", probe.problems);
}

#[test]
fn probe_on_a_missing_tree_is_not_writable() {
    let t = tempfile::tempdir().unwrap();
    let host = CgroupHost::at(CgroupMode::V1, &t.path().join("nothing"));
    let probe = host.probe();
    assert!(!probe.writable);
    assert!(probe.controllers.is_empty());
    assert!(probe.problems.len() >= 6, "{:?}", probe.problems);
}

const V1_SEPARATE: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
";

#[test]
fn detects_v1_with_separate_cpu_and_cpuacct() {
    let found = find_mounts(&parse_mountinfo(V1_SEPARATE), Path::new(CGROUP_ROOT)).unwrap();
    assert_eq!(found.mode, CgroupMode::V1);
    let dirs = Dirs(found.trees);
    assert_eq!(dirs.dir(Tree::Cpu), Path::new("/sys/fs/cgroup/cpu"));
    assert_eq!(dirs.dir(Tree::Cpuacct), Path::new("/sys/fs/cgroup/cpuacct"));
    assert_eq!(dirs.unique().len(), 5);
    assert!(dirs.get(Tree::Unified).is_none());
}

#[test]
fn detects_hybrid() {
    let text = format!(
        "{V1_SEPARATE}41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    );
    let found = find_mounts(&parse_mountinfo(&text), Path::new(CGROUP_ROOT)).unwrap();
    assert_eq!(found.mode, CgroupMode::Hybrid);
    let dirs = Dirs(found.trees);
    assert_eq!(dirs.dir(Tree::Unified), Path::new("/sys/fs/cgroup/unified"));
    assert_eq!(dirs.dir(Tree::Memory), Path::new("/sys/fs/cgroup/memory"));
    assert_eq!(dirs.unique().len(), 6);
}

#[test]
fn detects_v1_with_combined_cpu_cpuacct() {
    let text = "\
25 24 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid shared:10 - cgroup cgroup rw,xattr,name=systemd
27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:11 - cgroup cgroup rw,cpu,cpuacct
28 25 0:25 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory
29 25 0:26 / /sys/fs/cgroup/pids rw,nosuid shared:13 - cgroup cgroup rw,pids
30 25 0:27 / /sys/fs/cgroup/freezer rw,nosuid shared:14 - cgroup cgroup rw,freezer
";
    let found = find_mounts(&parse_mountinfo(text), Path::new(CGROUP_ROOT)).unwrap();
    assert_eq!(found.mode, CgroupMode::V1);
    let dirs = Dirs(found.trees);
    let combined = Path::new("/sys/fs/cgroup/cpu,cpuacct");
    assert_eq!(dirs.dir(Tree::Cpu), combined);
    assert_eq!(dirs.dir(Tree::Cpuacct), combined);
    assert_eq!(dirs.unique().len(), 4);
}

#[test]
fn detects_v2() {
    let text = "\
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
    let found = find_mounts(&parse_mountinfo(text), Path::new(CGROUP_ROOT)).unwrap();
    assert_eq!(found.mode, CgroupMode::V2);
    assert_eq!(found.trees, vec![(Tree::V2, PathBuf::from(CGROUP_ROOT))]);
    assert_eq!(found.v2_root, "/");
}

#[test]
fn detection_fails_without_cgroups_or_controllers() {
    let none = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n";
    let err = find_mounts(&parse_mountinfo(none), Path::new(CGROUP_ROOT)).unwrap_err();
    assert!(err.contains("no cgroup filesystem"), "{err}");
    let no_pids: String = V1_SEPARATE
        .lines()
        .filter(|l| !l.contains("pids"))
        .map(|l| format!("{l}\n"))
        .collect();
    let err = find_mounts(&parse_mountinfo(&no_pids), Path::new(CGROUP_ROOT)).unwrap_err();
    assert!(err.contains("pids"), "{err}");
}
