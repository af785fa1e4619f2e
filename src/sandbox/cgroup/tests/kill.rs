//! Emptying a group on fixture trees: the kill method, the freezer and
//! the CPU lifted while killed processes exit.

use super::*;

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
                v2::cpu::MAX,
                v2::cpu::WEIGHT,
                "max 100000",
                "10000",
            ),
            _ => (
                group.dirs.dir(Tree::Cpu).to_path_buf(),
                v1::cpu::QUOTA,
                v1::cpu::SHARES,
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
fn a_start_is_favoured_with_the_top_weight_and_its_quota_kept() {
    for mode in [CgroupMode::V1, CgroupMode::Hybrid, CgroupMode::V2] {
        let t = tempfile::tempdir().unwrap();
        let host = fixture(FakeKernfs::new(t.path(), mode));
        let group = host.create("k1", &limits()).unwrap();
        let (dir, quota, weight, top) = match mode {
            CgroupMode::V2 => (
                group.dirs.dir(Tree::V2).to_path_buf(),
                v2::cpu::MAX,
                v2::cpu::WEIGHT,
                "10000",
            ),
            _ => (
                group.dirs.dir(Tree::Cpu).to_path_buf(),
                v1::cpu::QUOTA,
                v1::cpu::SHARES,
                "262144",
            ),
        };
        let chain = [
            dir.clone(),
            dir.parent().unwrap().to_path_buf(),
            dir.parent().unwrap().parent().unwrap().to_path_buf(),
        ];
        assert!(chain[2].ends_with(SUBTREE), "{mode}");
        let weights = || {
            chain
                .clone()
                .map(|d| read(&d.join(weight)).trim().to_string())
        };
        let (before, quota_before) = (weights(), read(&dir.join(quota)));
        let favoured = group.favour();
        assert_eq!(weights(), [top, top, top].map(String::from), "{mode}");
        assert_eq!(
            read(&dir.join(quota)),
            quota_before,
            "the quota stays ({mode})"
        );
        drop(favoured);
        assert_eq!(weights(), before, "{mode}");
        group.remove().unwrap();
    }
}
