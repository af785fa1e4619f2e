//! Confined kernels: limits end executions with the right verdict, kills
//! restart the kernel and say so, and nothing leaks. Needs root: without it
//! a test fails in strict runs (CI) and is skipped visibly elsewhere.

mod common;

use std::sync::Arc;
use std::time::Duration;

use retrace::conformance::check;
use retrace::kernel::{ExecOptions, Kernel, KernelOptions};
use retrace::pyenv::ImageName;
use retrace::sandbox::{Sandbox, SandboxLimits, Verdict};

fn limits() -> SandboxLimits {
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

fn exec(l: &SandboxLimits) -> ExecOptions {
    ExecOptions {
        timeout: l.timeout,
        ..Default::default()
    }
}

async fn start(sandbox: &Arc<dyn Sandbox>, l: &SandboxLimits) -> Kernel {
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
    let sandbox = common::sandbox();
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
