//! cgroup v1 on fixture trees: one directory per hierarchy, limits and
//! counters in each.

use super::*;

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
