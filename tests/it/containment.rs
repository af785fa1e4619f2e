//! Confined kernels: limits end executions with the right verdict, kills
//! restart the kernel and say so, and nothing leaks. Needs root: without it
//! a test fails in strict runs (CI) and is skipped visibly elsewhere.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use retrace::conformance::check;
use retrace::kernel::{ExecOptions, Kernel, KernelOptions};
use retrace::pyenv::ImageName;
use retrace::sandbox::{Sandbox, SandboxLimits, Verdict};

pub(crate) fn limits() -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 256 << 20,
        pids: 64,
        cpu_time: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn options(l: &SandboxLimits) -> KernelOptions {
    KernelOptions {
        limits: *l,
        cpu_time: Some(l.cpu_time),
        interrupt_grace: Duration::from_secs(1),
        ..Default::default()
    }
}

pub(crate) fn exec(l: &SandboxLimits) -> ExecOptions {
    ExecOptions {
        timeout: l.timeout,
        ..Default::default()
    }
}

pub(crate) async fn start(sandbox: &Arc<dyn Sandbox>, l: &SandboxLimits) -> Kernel {
    Kernel::start(common::spec(ImageName::Fat), sandbox.as_ref(), options(l))
        .await
        .expect("confined kernel starts")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kernel_sees_its_own_world() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let code = r#"
import os, socket
checks = {
    "uid_not_root": os.getuid() != 0,
    "pid_namespace": os.getpid() < 10,
    "no_home": not os.path.exists("/home") or os.listdir("/home") == [],
    "image_read_only": not os.access(os.path.dirname(os.__file__), os.W_OK),
    "usr_read_only": not os.access("/usr/bin", os.W_OK),
    "tmp_writable": os.access("/tmp", os.W_OK),
    "cwd_writable": os.access(os.getcwd(), os.W_OK),
    "no_cgroupfs": not os.path.exists("/sys/fs/cgroup/memory"),
    "user_site_off": os.environ.get("PYTHONNOUSERSITE") == "1",
    "threads_capped": os.environ.get("OPENBLAS_NUM_THREADS") == "1",
    "no_parent_pid_var": "JPY_PARENT_PID" not in os.environ,
    "dev_null_usable": open("/dev/null", "w").write("x") == 1,
    "dev_urandom_usable": len(open("/dev/urandom", "rb").read(4)) == 4,
}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    checks["no_network"] = False
except OSError:
    checks["no_network"] = True
answer = sorted(k for k, ok in checks.items() if not ok)
"#;
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert_eq!(o.answer.unwrap().value, "[]", "failed checks");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interruptible_cpu_loop_keeps_the_kernel_and_its_variables() {
    // The wall timeout far above the CPU limit: on a loaded machine the loop
    // gets a fraction of a core, and must still end on CPU time.
    let l = SandboxLimits {
        timeout: Duration::from_secs(120),
        ..limits()
    };
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    k.execute("precious = 41", &exec(&l)).await;
    let o = k.execute("while True:\n    pass", &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::TimeoutCpu, "{o:?}");
    assert!(!o.state_lost);
    // The cgroup's CPU counter is recorded, at least the limit it passed,
    // and the model is told it beside the limit.
    let cpu = o.timings_ms.cpu.expect("a confined kernel's CPU time");
    assert!(cpu >= l.cpu_time.as_secs_f64() * 1e3, "{cpu} ms");
    let told = retrace::repair::traceback::kill_message(&o, &l).unwrap();
    assert!(
        told.contains(" of CPU time and was stopped (it used "),
        "{told}"
    );
    let o = k.execute("precious + 1", &exec(&l)).await;
    assert_eq!(o.answer.unwrap().value, "42");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_that_ignores_the_interrupt_is_killed_and_restarted() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    k.execute("precious = 1", &exec(&l)).await;
    let code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)";
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::TimeoutWall, "{o:?}");
    assert!(o.flags.contains(&"interrupt_ignored".into()));
    assert!(o.flags.contains(&"restarted".into()));
    assert!(o.state_lost);
    assert!(o.kill_ms.is_some());
    let o = k.execute("'precious' in globals()", &exec(&l)).await;
    assert_eq!(o.answer.unwrap().value, "False");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_and_process_limits_are_named() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let o = k.execute("x = bytearray(600 * 2**20)", &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::OomKilled, "{o:?}");
    assert!(o.state_lost);
    k.shutdown().await;
    // A fork bomb with room to hit the pid limit before memory runs out.
    let l = SandboxLimits {
        memory_bytes: 1 << 30,
        ..limits()
    };
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let o = k
        .execute("import os\nwhile True:\n    os.fork()", &exec(&l))
        .await;
    assert_eq!(o.verdict, Verdict::PidsLimit, "{o:?}");
    assert!(o.flags.contains(&"restarted".into()));
    let o = k.execute("print('alive')", &exec(&l)).await;
    assert_eq!(o.stdout, "alive\n");
    assert!(
        k.live_processes().len() <= 3,
        "bomb children survived: {:?}",
        k.live_processes()
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_memory_peak_of_a_kernel_is_reported() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    // Bytes written, not a calloc'd bytearray whose pages stay untouched.
    let o = k
        .execute("x = b'x' * (100 * 2**20)\nlen(x)", &exec(&l))
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let peak = o
        .memory_peak_bytes
        .expect("a confined kernel reports its peak");
    assert!(peak >= 100 << 20, "peak {peak} below the 100 MiB allocated");
    assert!(peak <= l.memory_bytes, "peak {peak} above the limit");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_leaks_after_100_confined_kernels() {
    let root = tempfile::tempdir().unwrap();
    let root_name = root.path().to_string_lossy().to_string();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let spec = common::spec_in(ImageName::Slim, root.path());
    let mut ids = Vec::new();
    for batch in 0..25 {
        let mut starting = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let (spec, sandbox) = (spec.clone(), sandbox.clone());
            starting.spawn(async move {
                let mut k = Kernel::start(spec, sandbox.as_ref(), options(&limits()))
                    .await
                    .expect("kernel starts");
                let id = k.id().to_string();
                // Half are killed from inside, half shut down normally.
                let o = k
                    .execute(
                        "import os, subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\nos.kill(os.getpid(), 9)",
                        &exec(&limits()),
                    )
                    .await;
                assert_eq!(o.verdict, Verdict::Crash, "{o:?}");
                k.shutdown().await;
                id
            });
        }
        while let Some(id) = starting.join_next().await {
            ids.push(id.unwrap());
        }
        assert_eq!(ids.len(), (batch + 1) * 4);
    }
    // A zygote lives as long as its harness process (the CLI ends them at
    // exit): end them too, then nothing of a kernel or zygote may be left.
    retrace::kernel::zygote::shutdown_all();
    assert!(
        common::wait_gone(&root_name, 5).is_empty(),
        "processes left"
    );
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "kernel directories left: {left:?}");
    // Every mounted hierarchy, v1 controllers and the v2 tree (hybrid's
    // `unified` included), searched as `sandbox check` searches them.
    for id in &ids {
        let found = check::cgroup_dirs_named(id);
        assert!(found.is_empty(), "cgroup left: {found:?}");
    }
}

/// Two live kernels run as different uids (each its own, from the reserved
/// range), recorded in their outcomes; the sockets a kernel creates in its
/// runtime directory are its uid's. Keyrings are per uid: with `add_key`
/// denied by the syscall filter, the uid difference is what keeps them apart.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_kernels_have_their_own_uids() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let (mut a, mut b) = tokio::join!(start(&sandbox, &l), start(&sandbox, &l));
    let code = r#"
import ctypes, getpass, os
libc = ctypes.CDLL(None, use_errno=True)
# add_key("user", "k", "v", 1, KEY_SPEC_USER_KEYRING)
r = libc.syscall(248, b"user", b"k", b"v", 1, -4)
print("uid", os.getuid(), os.getgid(), getpass.getuser())
print("add_key", r, ctypes.get_errno())
"#;
    let e = exec(&l);
    let (oa, ob) = tokio::join!(a.execute(code, &e), b.execute(code, &e));
    for (o, k) in [(&oa, &a), (&ob, &b)] {
        assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
        let uid = o.kernel_uid.expect("a confined kernel records its uid");
        assert!(
            o.stdout
                .contains(&format!("uid {uid} {uid} retrace-kernel\n")),
            "{}",
            o.stdout
        );
        assert!(o.stdout.contains("add_key -1 1\n"), "{}", o.stdout);
        use std::os::unix::fs::MetadataExt;
        let sockets: Vec<u32> = std::fs::read_dir(&k.layout().runtime_dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_type().is_ok_and(|t| {
                    use std::os::unix::fs::FileTypeExt;
                    t.is_socket()
                })
            })
            .map(|e| e.metadata().unwrap().uid())
            .collect();
        assert!(!sockets.is_empty(), "no socket in the runtime dir");
        assert!(sockets.iter().all(|u| *u == uid), "{sockets:?} vs {uid}");
    }
    assert_ne!(oa.kernel_uid, ob.kernel_uid, "two live kernels share a uid");
    a.shutdown().await;
    b.shutdown().await;
}

/// The syscall filter answers EPERM (clone3: ENOSYS) and leaves what
/// libraries need working: fork, threads, subprocesses, numpy.
#[tokio::test(flavor = "multi_thread")]
async fn the_syscall_filter_refuses_without_killing() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let code = r#"
import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(nr, *args)
    return (r, ctypes.get_errno() if r < 0 else 0)
seen = {
    "ptrace_attach_1": call(101, 16, 1, 0, 0),
    "unshare_user": call(272, 0x10000000),
    "keyctl": call(250, 0, -4, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "perf_event_open": call(298, 0, 0, -1, -1, 0),
    "userfaultfd": call(323, 0),
    "io_uring_setup": call(425, 1, 0),
    "kexec_load": call(246, 0, 0, 0, 0),
    "mount": call(165, b"none", b"/tmp", b"tmpfs", 0, 0),
    "clone3": call(435, 0, 0),
    "clone_newns": call(56, 0x20000 | 17, 0, 0, 0, 0),
    "personality_norandom": call(135, 0x0040000),
}
for name, got in sorted(seen.items()):
    print(name, got)
status = open("/proc/self/status").read()
print("seccomp", [l.split()[1] for l in status.splitlines() if l.startswith("Seccomp:")])
t = threading.Thread(target=lambda: None); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print("subprocess", subprocess.run(["true"]).returncode)
import numpy
print("numpy", int(numpy.arange(4).sum()))
"#;
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    for expected in [
        "ptrace_attach_1 (-1, 1)",
        "unshare_user (-1, 1)",
        "keyctl (-1, 1)",
        "bpf (-1, 1)",
        "perf_event_open (-1, 1)",
        "userfaultfd (-1, 1)",
        "io_uring_setup (-1, 1)",
        "kexec_load (-1, 1)",
        "mount (-1, 1)",
        "clone3 (-1, 38)",
        "clone_newns (-1, 1)",
        "personality_norandom (-1, 1)",
        "seccomp ['2']",
        "fork 7",
        "subprocess 0",
        "numpy 6",
    ] {
        assert!(o.stdout.contains(expected), "{expected}: {}", o.stdout);
    }
    k.shutdown().await;
}

/// The harness's environment never reaches a kernel; host credential files
/// are empty in its view; its cgroup namespace hides the host's cgroup path.
#[tokio::test(flavor = "multi_thread")]
async fn harness_secrets_and_host_paths_stay_out() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    // A planted secret: the kernel's environment is built from scratch.
    // (Edition 2021: set_var is safe; no other test reads these names.)
    std::env::set_var("OPENAI_API_KEY", "sk-planted-by-the-containment-test");
    std::env::set_var("RETRACE_PLANTED_SECRET", "planted-value-7f3a");
    let mut k = start(&sandbox, &l).await;
    let code = r#"
import os
def environ_of(path):
    try:
        return open(path, "rb").read().decode(errors="replace")
    except OSError as e:
        return "unreadable " + type(e).__name__
env = repr(dict(os.environ))
env += environ_of("/proc/self/environ") + environ_of("/proc/1/environ")
env += environ_of("/proc/%d/environ" % os.getppid())
print("secret_seen", "sk-planted" in env or "planted-value-7f3a" in env or "OPENAI_API_KEY" in env)
for path in ["/etc/pip.conf", "/etc/netrc", "/etc/environment", "/etc/gitconfig"]:
    if os.path.exists(path):
        print("masked", path, repr(open(path).read()))
print("cgroup", sorted(set(l.rsplit(":", 1)[1] for l in open("/proc/self/cgroup").read().splitlines())))
print("retrace_subtree_in_cgroup", "retrace/" in open("/proc/self/cgroup").read())
"#;
    let o = k.execute(code, &exec(&l)).await;
    std::env::remove_var("OPENAI_API_KEY");
    std::env::remove_var("RETRACE_PLANTED_SECRET");
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(o.stdout.contains("secret_seen False\n"), "{}", o.stdout);
    for line in o.stdout.lines().filter(|l| l.starts_with("masked ")) {
        assert!(line.ends_with(" ''"), "a host file is visible: {line}");
    }
    if std::path::Path::new("/etc/pip.conf").exists() {
        assert!(o.stdout.contains("masked /etc/pip.conf ''"), "{}", o.stdout);
    }
    assert!(o.stdout.contains("cgroup ['/']\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains("retrace_subtree_in_cgroup False\n"),
        "{}",
        o.stdout
    );
    k.shutdown().await;
}

/// `kill -9` of `retrace exec` in the middle of a long cell: within a few
/// seconds no process of its kernel is left (the relay sees the harness go
/// and kills the kernel's PID 1, which takes its namespace with it). The
/// cgroup directory may stay until the next retrace start reclaims it.
#[test]
fn kernels_die_with_the_harness() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Slim);
    let mut harness = std::process::Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(["exec", "--image", "slim", "--timeout", "600s", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = harness.stdin.take().unwrap();
        stdin
            .write_all(
                b"import subprocess, time\nsubprocess.Popen(['sleep', '607'])\ntime.sleep(600)\n",
            )
            .unwrap();
    }
    let harness_pid = harness.id() as i32;
    // Wait for the cell's child: then the kernel runs the long cell.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let kernel_tree = loop {
        let tree = descendants(harness_pid);
        if tree.iter().any(|(_, cmd)| cmd.starts_with("sleep\x00607")) {
            break tree;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the long cell did not start: {tree:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        kernel_tree.len() >= 4,
        "relay, init, kernel, sleep: {kernel_tree:?}"
    );
    harness.kill().unwrap();
    harness.wait().unwrap();
    // A generous bound: on a loaded machine the kill takes more than the
    // second it takes idle; any survivor past it is a leak, not slowness.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<_> = kernel_tree.iter().filter(|(pid, _)| alive(*pid)).collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kernel outlived its harness: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every descendant of `root` (pid, command line with NUL separators).
fn descendants(root: i32) -> Vec<(i32, String)> {
    let mut children: std::collections::HashMap<i32, Vec<i32>> = Default::default();
    let mut cmdlines = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Some(stat) = retrace::util::proc::stat(pid) else {
            continue;
        };
        children.entry(stat.ppid).or_default().push(pid);
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        cmdlines.insert(pid, String::from_utf8_lossy(&cmd).into_owned());
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            found.push((*child, cmdlines.get(child).cloned().unwrap_or_default()));
            queue.push(*child);
        }
    }
    found
}

/// Alive and not a zombie waiting for its reaper.
fn alive(pid: i32) -> bool {
    retrace::util::proc::stat(pid).is_some_and(|s| s.state != 'Z')
}
