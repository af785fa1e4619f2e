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

/// A group's CPU directory and files in `mode`, with the quota's open
/// value and the top weight.
struct CpuFiles {
    dir: std::path::PathBuf,
    quota: &'static str,
    weight: &'static str,
    open: &'static str,
    top: &'static str,
}

fn cpu_files(group: &crate::sandbox::cgroup::KernelCgroup, mode: CgroupMode) -> CpuFiles {
    match mode {
        CgroupMode::V2 => CpuFiles {
            dir: group.dirs.dir(Tree::V2).to_path_buf(),
            quota: v2::cpu::MAX,
            weight: v2::cpu::WEIGHT,
            open: "max 100000",
            top: "10000",
        },
        _ => CpuFiles {
            dir: group.dirs.dir(Tree::Cpu).to_path_buf(),
            quota: v1::cpu::QUOTA,
            weight: v1::cpu::SHARES,
            open: "-1",
            top: "262144",
        },
    }
}

#[test]
fn cpu_is_unleashed_while_killed_processes_exit_and_restored_after() {
    for mode in [CgroupMode::V1, CgroupMode::Hybrid, CgroupMode::V2] {
        let t = tempfile::tempdir().unwrap();
        let host = fixture(FakeKernfs::new(t.path(), mode));
        let group = host.create("k1", &limits()).unwrap();
        let CpuFiles {
            dir,
            quota,
            weight,
            open,
            top,
        } = cpu_files(&group, mode);
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
        let files = cpu_files(&group, mode);
        let (dir, quota, weight, top) = (files.dir, files.quota, files.weight, files.top);
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
