//! The probe on fixture trees.

use super::*;

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
