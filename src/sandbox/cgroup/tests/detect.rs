//! Detection of the host's layout from mountinfo texts.

use super::*;

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
    assert!(err.to_string().contains("no cgroup filesystem"), "{err}");
    let no_pids: String = V1_SEPARATE
        .lines()
        .filter(|l| !l.contains("pids"))
        .map(|l| format!("{l}\n"))
        .collect();
    let err = find_mounts(&parse_mountinfo(&no_pids), Path::new(CGROUP_ROOT)).unwrap_err();
    assert!(err.to_string().contains("pids"), "{err}");
}
