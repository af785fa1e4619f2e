//! Real cgroups on this machine (cgroup v1, v1 hybrid or v2): limits,
//! counters and kills against live processes, through the layout retrace
//! detects. Needs root; the plain-v1 freezer test also needs the v1
//! hierarchies. Without them a test fails in strict runs (CI,
//! `RETRACE_REQUIRE_ROOT=1`) and is skipped visibly elsewhere (see
//! `common::host`). The v2 job runs this file on a v2 host with
//! `RETRACE_CGROUP=v2`.

use crate::common;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::host::{Layout, Need};
use retrace::sandbox::cgroup::{CgroupHost, CgroupLimits, CgroupMode, KernelCgroup, KillMethod};

const ROOT: &str = "/sys/fs/cgroup";

/// How long a test waits for something that must happen (a process to
/// start, exit or be refused a fork): only a bound on "it happened at all",
/// far above what a loaded machine needs; never a speed goal.
const DEADLINE: Duration = Duration::from_secs(120);

/// The detected host, or `None` when this test is skipped (root and the
/// layout `needs` names are missing, outside strict runs).
fn ready(needs: &[Need]) -> Option<CgroupHost> {
    if common::host::lacks(&[&[Need::Root][..], needs].concat()) {
        return None;
    }
    let host = CgroupHost::detect().unwrap_or_else(|e| panic!("detect: {e}"));
    let expected = match common::host::declared_layout() {
        Some(Layout::V1) => Some(CgroupMode::V1),
        Some(Layout::Hybrid) => Some(CgroupMode::Hybrid),
        Some(Layout::V2) => Some(CgroupMode::V2),
        Some(Layout::None) | None => None,
    };
    if let Some(mode) = expected {
        assert_eq!(host.mode(), mode, "RETRACE_CGROUP declares another layout");
    }
    Some(host)
}

/// Where the hierarchy holding `group.path()` is mounted.
fn primary_mount(host: &CgroupHost) -> PathBuf {
    match host.mode() {
        CgroupMode::V2 => PathBuf::from(ROOT),
        CgroupMode::V1 | CgroupMode::Hybrid => Path::new(ROOT).join("memory"),
    }
}

fn limits() -> CgroupLimits {
    CgroupLimits {
        memory_bytes: 64 << 20,
        pids: 16,
        cpus: 0.5,
    }
}

/// Unique per test process and test, so parallel runs never share a group.
fn id(name: &str) -> String {
    format!("t-{}-{name}", std::process::id())
}

/// Debian's interpreter if present: the pyenv shim adds a shell and extra
/// processes in front of Python.
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Starts `argv` inside `group`: the child writes "0" into every
/// `cgroup.procs` after fork and before exec, so it never runs outside.
fn spawn_in(group: &KernelCgroup, argv: &[&str]) -> Child {
    spawn_into(&group.procs_files(), argv)
}

// pre_exec is unsafe by nature; the block says why it is sound.
#[allow(unsafe_code)]
fn spawn_into(procs_files: &[PathBuf], argv: &[&str]) -> Child {
    // Opened before fork: the child may only make async-signal-safe calls.
    let files: Vec<File> = procs_files
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect();
    let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure only calls write(2) on descriptors opened above.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn");
    drop(files);
    child
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("child {} did not exit within {timeout:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every directory of the group: the parents of its `cgroup.procs` files.
fn group_dirs(group: &KernelCgroup) -> Vec<PathBuf> {
    group
        .procs_files()
        .iter()
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect()
}

fn remove_and_check(group: &KernelCgroup) {
    let dirs = group_dirs(group);
    group.remove().unwrap();
    for dir in dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn probe_this_machine() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let probe = host.probe();
    eprintln!("{probe:#?}");
    assert_eq!(probe.mode, host.mode(), "{probe:?}");
    assert!(probe.writable, "{probe:?}");
    assert!(
        probe.host_has_swap || probe.problems.is_empty(),
        "{probe:?}"
    );
}

/// A v2 host's own files for one group, read back from the kernel: the
/// limits as written, no swap, and the whole group OOM-killed together.
/// Runs only on a v2 host (the v2 job); elsewhere it is skipped visibly.
#[test]
fn v2_group_files_hold_every_limit() {
    let Some(host) = ready(&[Need::CgroupV2]) else {
        return;
    };
    let group = host.create(&id("v2files"), &limits()).unwrap();
    let dir = group.path();
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
            .trim()
            .to_string()
    };
    assert_eq!(read("memory.max"), (64u64 << 20).to_string());
    assert_eq!(read("memory.swap.max"), "0");
    assert_eq!(read("memory.oom.group"), "1");
    assert_eq!(read("pids.max"), "16");
    assert_eq!(read("cpu.max"), "50000 100000");
    remove_and_check(&group);
}

#[test]
fn process_is_confined_before_exec_and_limits_read_back() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let group = host.create(&id("place"), &limits()).unwrap();
    assert_eq!(group.limits_read_back(), limits());
    let mut child = spawn_in(&group, &["sleep", "30"]);
    let pid = child.id() as i32;
    assert!(group.pids().contains(&pid), "{:?}", group.pids());
    // The kernel agrees: every hierarchy lists the group's path.
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let rel = group
        .path()
        .strip_prefix(primary_mount(&host))
        .unwrap()
        .to_path_buf();
    let rel = format!("/{}", rel.display());
    for line in own.lines() {
        let mut it = line.splitn(3, ':');
        let (_, controllers, path) = (it.next(), it.next().unwrap(), it.next().unwrap());
        let ours = [
            "memory",
            "pids",
            "cpu",
            "cpuacct",
            "freezer",
            "cpu,cpuacct",
            "",
        ];
        if ours.contains(&controllers) {
            assert_eq!(path, rel, "{line}");
        }
    }
    let report = group.kill_all(Some(pid));
    assert_eq!(report.survivors, 0);
    assert_eq!(wait_timeout(&mut child, DEADLINE).signal(), Some(9));
    remove_and_check(&group);
    // Idempotent.
    group.remove().unwrap();
}

#[test]
fn fork_bomb_hits_pids_max() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let group = host.create(&id("forkbomb"), &limits()).unwrap();
    let before = group.counters();
    let bomb = "import os\nwhile True:\n  try: os.fork()\n  except OSError: pass";
    let mut child = spawn_in(&group, &[python(), "-c", bomb]);
    wait_for("refused forks", DEADLINE, || {
        group.counters().since(&before).pids_max_events > 0
    });
    std::thread::sleep(Duration::from_millis(300));
    let delta = group.counters().since(&before);
    let alive = group.pids().len();
    let report = group.kill_all(Some(child.id() as i32));
    eprintln!("fork bomb: {delta:?}, {alive} alive, kill {report:?}");
    assert!(delta.pids_max_events > 0);
    assert!(alive <= 16, "{alive} processes under pids.max=16");
    assert_eq!(report.survivors, 0, "{report:?}");
    assert!(group.pids().is_empty());
    let status = wait_timeout(&mut child, DEADLINE);
    assert_eq!(status.signal(), Some(9), "{status:?}");
    remove_and_check(&group);
}

#[test]
fn memory_hog_is_oom_killed() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let group = host.create(&id("hog"), &limits()).unwrap();
    let before = group.counters();
    let mut child = spawn_in(&group, &[python(), "-c", "b=bytearray(200*2**20)"]);
    let status = wait_timeout(&mut child, DEADLINE);
    let delta = group.counters().since(&before);
    eprintln!("hog: {status:?}, {delta:?}, peak {:?}", group.memory_peak());
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert!(delta.oom_kills >= 1, "{delta:?}");
    let peak = group.memory_peak().unwrap();
    assert!(peak <= 64 << 20, "peak {peak} above the limit");
    remove_and_check(&group);
}

#[test]
fn busy_loop_accrues_throttled_cpu() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let group = host.create(&id("busy"), &limits()).unwrap();
    let before = group.counters();
    let start = Instant::now();
    let mut child = spawn_in(&group, &[python(), "-c", "while True: pass"]);
    // Until it has used 300 ms and been throttled: on a loaded machine that
    // takes longer, and the quota check below holds whatever the wait. The
    // deadline only says the loop ran at all.
    let mut delta = group.counters().since(&before);
    wait_for("300 ms of CPU and a throttled period", DEADLINE, || {
        delta = group.counters().since(&before);
        delta.cpu_usage_usec > 300_000 && delta.nr_throttled > 0
    });
    let wall = start.elapsed();
    // Both sources of CPU time, for comparison.
    let dirs = group_dirs(&group);
    let cpuacct = dirs
        .iter()
        .find(|d| d.starts_with(Path::new(ROOT).join("cpuacct")))
        .map(|d| std::fs::read_to_string(d.join("cpuacct.usage")).unwrap());
    let unified = dirs
        .iter()
        .find(|d| d.starts_with(Path::new(ROOT).join("unified")))
        .and_then(|d| std::fs::read_to_string(d.join("cpu.stat")).ok());
    eprintln!(
        "busy: {delta:?} over {wall:?}; cpuacct.usage {cpuacct:?}; unified cpu.stat {unified:?}"
    );
    let report = group.kill_all(Some(child.id() as i32));
    assert_eq!(report.survivors, 0);
    wait_timeout(&mut child, DEADLINE);
    // 0.5 cpu: never more than half the wall time (plus one period's slack).
    let cap = (wall.as_micros() as u64) / 2 + 200_000;
    assert!(delta.cpu_usage_usec < cap, "{delta:?} above the quota");
    assert!(delta.nr_throttled > 0, "{delta:?}");
    remove_and_check(&group);
}

const DAEMON: &str = "\
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.05)
    os._exit(0)
time.sleep(60)
";

fn session(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(3)?.parse().ok()
}

/// A setsid + double-forked daemon escapes process-group kills; the group
/// kill must still get it.
fn kill_daemon(host: &CgroupHost, name: &str, method: KillMethod) {
    let group = host.create(&id(name), &limits()).unwrap();
    assert_eq!(group.kill_method(), method);
    let mut child = spawn_in(&group, &[python(), "-c", DAEMON]);
    let pid = child.id() as i32;
    // The grandchild, in the session its exited parent created.
    let mut daemon = 0;
    wait_for("the daemon", DEADLINE, || {
        let own = session(pid);
        daemon = group
            .pids()
            .into_iter()
            .find(|p| *p != pid && session(*p).is_some_and(|s| Some(s) != own))
            .unwrap_or(0);
        daemon != 0
    });
    let report = group.kill_all(Some(pid));
    eprintln!("{name}: {report:?}");
    assert_eq!(report.method, method.to_string());
    assert_eq!(report.survivors, 0, "{report:?}");
    // No bound on `kill_ms`: `survivors == 0` is the evidence, and kill
    // latency is a speed goal (benches, `sandbox check`'s table).
    assert!(group.pids().is_empty());
    assert_eq!(wait_timeout(&mut child, DEADLINE).signal(), Some(9));
    // Not in the group, and not running (at most an unreaped zombie).
    assert!(!matches!(state(daemon), Some('R' | 'S' | 'D' | 'T')));
    remove_and_check(&group);
}

fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

#[test]
fn kill_all_gets_a_setsid_double_forked_daemon() {
    let Some(host) = ready(&[]) else {
        return;
    };
    // `cgroup.kill` needs Linux 5.14; CI's hosts and the v2 runners have it.
    let method = match host.mode() {
        CgroupMode::V1 => KillMethod::Freezer,
        CgroupMode::Hybrid | CgroupMode::V2 => KillMethod::CgroupKill,
    };
    kill_daemon(&host, "daemon", method);
}

#[test]
fn plain_v1_freezer_kill_on_the_real_hierarchies() {
    if ready(&[Need::CgroupV1]).is_none() {
        return;
    }
    // The v1 view of this host (no unified tree) exercises the freezer.
    let host = CgroupHost::at(CgroupMode::V1, Path::new(ROOT));
    kill_daemon(&host, "freezer", KillMethod::Freezer);
}

#[test]
fn reclaim_stale_removes_groups_of_a_dead_harness() {
    let Some(host) = ready(&[]) else {
        return;
    };
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Above pid_max: no process can ever have this pid.
    let dead = (pid_max + std::process::id()).to_string();
    let ours = host.create(&id("kept"), &limits()).unwrap();
    // `<hierarchy>/…/retrace/<pid>/<id>`: the same place for the dead
    // harness in every hierarchy this layout uses.
    let subtree = |dir: &Path| dir.parent().unwrap().parent().unwrap().to_path_buf();
    let stale: Vec<PathBuf> = group_dirs(&ours)
        .iter()
        .map(|d| subtree(d).join(&dead).join("k-stale"))
        .collect();
    for dir in &stale {
        std::fs::create_dir_all(dir).unwrap();
    }
    // A leftover process of the dead harness, still confined.
    let procs: Vec<PathBuf> = stale.iter().map(|d| d.join("cgroup.procs")).collect();
    let mut leftover = spawn_into(&procs, &["sleep", "60"]);

    let reclaimed = host.reclaim_stale();
    eprintln!("reclaimed {reclaimed:?}");
    assert!(reclaimed.contains(&subtree(&ours.path()).join(&dead).join("k-stale")));
    assert_eq!(wait_timeout(&mut leftover, DEADLINE).signal(), Some(9));
    for dir in &stale {
        assert!(!dir.parent().unwrap().exists(), "{} left", dir.display());
    }
    // Our own live group was not touched.
    assert!(ours.path().is_dir());
    remove_and_check(&ours);
}
