//! Creating, removing and reclaiming groups on fixture trees.

use super::*;

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
