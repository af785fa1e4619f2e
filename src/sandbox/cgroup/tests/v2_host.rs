//! cgroup v2 on fixture trees: limits, delegation and counters.

use super::*;

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

    let parent = v2::delegate_v2(t.path(), own, &fs).unwrap();
    assert_eq!(parent, scope);
    // We moved ourselves ("0") into the harness leaf.
    assert_eq!(read(&scope.join("harness").join(unified::PROCS)), "0");
    // Detecting again from inside the leaf finds the same group.
    let again = v2::delegate_v2(t.path(), &format!("{own}/harness"), &fs).unwrap();
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
