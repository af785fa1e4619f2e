//! Hybrid hosts on fixture trees: v1 controllers plus the unified tree
//! for `cgroup.kill` and CPU time.

use super::*;

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
fn read_back_mismatch_names_the_file_and_removes_the_group() {
    let t = tempfile::tempdir().unwrap();
    let mut sim = FakeKernfs::new(t.path(), CgroupMode::Hybrid);
    sim.broken = Some("pids.max");
    let host = fixture(sim);
    let err = host.create("k1", &limits()).unwrap_err();
    let pid_dir = |h: &str| t.path().join(h).join("retrace").join(pid_dir());
    match err {
        SandboxError::Cgroup(ref e @ CgroupError::Mismatch { ref file, .. }) => {
            assert_eq!(file, &pid_dir("pids").join("k1/pids.max"));
            assert!(e.to_string().contains("expected \"16\""), "{e}");
        }
        other => panic!("unexpected {other:?}"),
    }
    for h in ["memory", "pids", "cpu", "cpuacct", "freezer", "unified"] {
        assert!(!pid_dir(h).exists(), "{h} left behind");
        assert!(t.path().join(h).join("retrace").is_dir());
    }
}
