//! Kernels forked from the image's zygote: confined exactly like cold ones,
//! isolated from their siblings and from the zygote, and started cold when
//! the zygote cannot serve. Real kernels; needs root (strict in CI).
//!
//! A separate test binary, not a module of `tests/it`: the zygotes are
//! per process and these tests kill them and shut them all down, which
//! would pull the zygote from under other tests' kernel starts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use retrace::kernel::{zygote, Kernel, KernelOptions, KernelStart, StartPath, StateQuery};
use retrace::pyenv::ImageName;
use retrace::sandbox::{Sandbox, SandboxLimits, Verdict};
use serde_json::Value;

/// The tests of this binary share one zygote; the one that kills it runs
/// alone.
static ZYGOTE_USE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn limits() -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 256 << 20,
        pids: 64,
        cpu_time: Duration::from_secs(5),
        timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

fn options(start: KernelStart) -> KernelOptions {
    let l = limits();
    KernelOptions {
        start,
        ..KernelOptions::enforcing(&l, true)
    }
}

async fn start(sandbox: &Arc<dyn Sandbox>, how: KernelStart) -> Kernel {
    Kernel::start(common::spec(ImageName::Fat), sandbox.as_ref(), options(how))
        .await
        .expect("kernel starts")
}

/// Runs `code` that prints one JSON object; returns it.
async fn report(k: &mut Kernel, code: &str) -> serde_json::Map<String, Value> {
    let o = k.execute(code, &common::exec_opts(20)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let line = o.stdout.lines().last().unwrap_or_default();
    match serde_json::from_str(line) {
        Ok(Value::Object(map)) => map,
        _ => panic!("not a JSON object: {:?}", o.stdout),
    }
}

/// What a kernel says about its own confinement, from inside.
const SELF_REPORT: &str = r#"
import ctypes, json, os, resource, socket, sys
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
field = lambda k: " ".join(status.get(k, "").split())
libc = ctypes.CDLL(None, use_errno=True)
unshare = libc.unshare(0x10000000)  # CLONE_NEWUSER
unshare_errno = ctypes.get_errno()
def fds():
    kinds = {}
    for f in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{f}")
        except OSError:
            continue  # the listing's own descriptor
        kind = link.split(":")[0] if ":" in link else ("dev" if link.startswith("/dev") else "file")
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds
def zygote_traces():
    # What a kernel could read of how it was forked: the zygote's frames on
    # its stack, the fork request (its cgroup paths, PID 1's host pid, the
    # seccomp program) in any frame or object, the zygote's environment.
    import gc
    found = set()
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_name in ("fork_kernel", "_child", "_kernel", "main") and "zygote" in f.f_code.co_filename:
            found.add("frame " + f.f_code.co_name)
        for name, v in list(f.f_locals.items()):
            if isinstance(v, dict) and ("seccomp" in v or "pid1" in v):
                found.add("request in a frame")
            if name == "before" and isinstance(v, dict):
                found.add("starting environment in a frame")
        f = f.f_back
    for o in gc.get_objects():
        if isinstance(o, dict) and "seccomp" in o and "pid1" in o:
            found.add("request object")
    block = open("/proc/self/environ", "rb").read().split(b"\0")
    env = dict(e.decode(errors="replace").split("=", 1) for e in block if b"=" in e)
    if env.get("HOME") != os.environ.get("HOME"):
        found.add("another HOME in /proc/self/environ")
    return sorted(found)
masked = {p: os.path.getsize(p) for p in ("/etc/environment", "/etc/gitconfig") if os.path.exists(p)}
print(json.dumps({
    "uid": field("Uid"), "gid": field("Gid"), "groups": field("Groups"),
    "no_new_privs": field("NoNewPrivs"), "seccomp": field("Seccomp"),
    "seccomp_filters": field("Seccomp_filters"),
    "cap_eff": field("CapEff"), "cap_prm": field("CapPrm"), "cap_inh": field("CapInh"),
    "cap_amb": field("CapAmb"),
    "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("mnt", "net", "ipc", "uts", "pid", "cgroup")},
    "cgroup": sorted(set(l.split(":", 2)[2] for l in open("/proc/self/cgroup").read().splitlines())),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_CORE")},
    "env": sorted(os.environ),
    "home": os.environ.get("HOME") == os.path.expanduser("~"),
    "hostname": socket.gethostname(),
    "ppid": os.getppid(),
    "own_session": os.getsid(0) == os.getpid(),
    "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
    "masked": masked,
    "root_listing": sorted(os.listdir("/")),
    "home_exists": os.path.exists("/home") and os.listdir("/home") != [],
    "unshare": [unshare, unshare_errno],
    "cwd_is_work": os.getcwd().endswith("/work"),
    "fds": fds(),
    "proc_owned": os.stat("/proc/self/status").st_uid == os.getuid(),
    "umask": os.umask(0o22),
    "sig_ign": field("SigIgn"), "sig_blk": field("SigBlk"),
    "ipython": {
        "own_profile": get_ipython().profile_dir.location
            == os.path.join(os.environ["IPYTHONDIR"], "profile_default"),
        "colors": get_ipython().colors,
        "history": get_ipython().history_manager.enabled,
        "argv": [os.path.basename(sys.argv[0]), len(sys.argv)],
        "path_has_cwd": "" in sys.path or os.getcwd() in sys.path,
        "excepthook": type(sys.excepthook).__name__,
        # The shell: built in the zygote, adopted by each kernel.
        "shell": [type(ip).__name__ for ip in (get_ipython(), get_ipython().kernel, get_ipython().parent, get_ipython().compile)],
        "ipython_dir": get_ipython().ipython_dir == os.environ["IPYTHONDIR"],
        "home_dir": get_ipython().home_dir == os.environ["HOME"],
        "starting_dir": get_ipython().starting_dir == os.getcwd(),
        "dir_history": [str(p) == os.getcwd() for p in _dh],
        "main_is_user_module": sys.modules["__main__"] is get_ipython().user_module,
        "displayhook": type(sys.displayhook).__name__,
        "saved_streams": [type(v).__name__ for v in get_ipython()._orig_sys_module_state.values()],
        "configurables": [type(c).__name__ for c in get_ipython().configurables],
        "extensions": sorted(get_ipython().extension_manager.loaded),
        "line_magics": len(get_ipython().magics_manager.lsmagic()["line"]),
        "user_ns": sorted(k for k in get_ipython().user_ns if not k.startswith("_i")),
    },
    # retrace's probe, installed by the installing cell (cold) or by the
    # forked kernel before it answered: the same hooks, entry points and
    # private builtins either way.
    "probe": {
        "hooks": {e: [f.__name__ for f in get_ipython().events.callbacks[e]] for e in sorted(get_ipython().events.callbacks)},
        "print_on_error": getattr(get_ipython().events, "print_on_error", None),
        "user_expressions": get_ipython().user_expressions.__name__,
        "entry_points": sorted(n for n in vars(__import__("builtins")) if n.startswith("__retrace_")),
        "builtins": sorted(__retrace_answer__.__globals__["__builtins__"]),
        "namespace": __retrace_answer__.__globals__["__name__"],
        "thread_start": __import__("threading").Thread.start.__qualname__,
    },
    "probe_file_left": os.path.exists(os.path.join(os.environ["HOME"], ".retrace-probe.py")),
    "probe_code_left": hasattr(sys, "_retrace_probe"),
    "zygote_traces": zygote_traces(),
}))
"#;

fn uid_of(r: &serde_json::Map<String, Value>) -> u64 {
    let uid = r["uid"].as_str().unwrap();
    let ids: Vec<u64> = uid.split(' ').map(|x| x.parse().unwrap()).collect();
    assert!(
        ids.iter().all(|&i| i == ids[0]),
        "real/effective/saved/fs uid differ: {uid}"
    );
    ids[0]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zygote_kernel_is_confined_like_a_cold_one() {
    let _shared = ZYGOTE_USE.read().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut cold = start(&sandbox, KernelStart::Cold).await;
    let mut forked = start(&sandbox, KernelStart::Zygote).await;
    let mut sibling = start(&sandbox, KernelStart::Zygote).await;
    assert_eq!(cold.start_path(), &StartPath::Cold);
    assert_eq!(forked.start_path(), &StartPath::Zygote);
    assert_eq!(sibling.start_path(), &StartPath::Zygote);
    // A forked kernel installs retrace's probe before it answers; a cold
    // one gets the installing cell.
    assert!(!cold.banner().probe_preinstalled);
    assert!(forked.banner().probe_preinstalled);
    assert!(sibling.banner().probe_preinstalled);
    // Either way the end of a cell is checked against the main thread.
    for kernel in [&cold, &forked, &sibling] {
        assert!(kernel.sees_main_thread(), "{}", kernel.id());
    }
    let c = report(&mut cold, SELF_REPORT).await;
    let z = report(&mut forked, SELF_REPORT).await;
    let s = report(&mut sibling, SELF_REPORT).await;

    // Identical facts.
    for key in [
        "no_new_privs",
        "seccomp",
        "seccomp_filters",
        "groups",
        "cap_eff",
        "cap_prm",
        "cap_inh",
        "cap_amb",
        "cgroup",
        "rlimits",
        "env",
        "home",
        "hostname",
        "ppid",
        "own_session",
        "oom_score_adj",
        "masked",
        "root_listing",
        "home_exists",
        "unshare",
        "cwd_is_work",
        "proc_owned",
        "umask",
        "sig_ign",
        "sig_blk",
        "ipython",
        "probe",
        "probe_file_left",
        "probe_code_left",
        "zygote_traces",
    ] {
        assert_eq!(c[key], z[key], "{key}: cold {} zygote {}", c[key], z[key]);
    }
    // Open descriptors: nothing the cold kernel lacks (the zygote's pipes
    // to the harness are closed). The cold kernel may hold more: whatever
    // the harness process leaves inheritable passes through its init.
    for (kind, n) in z["fds"].as_object().unwrap() {
        let cold_n = c["fds"][kind].as_u64().unwrap_or(0);
        assert!(
            n.as_u64().unwrap() <= cold_n,
            "fds: cold {} zygote {}",
            c["fds"],
            z["fds"]
        );
    }
    assert_eq!(z["no_new_privs"], "1");
    // ipykernel's app was parsed and its shell built in the zygote (so the
    // comparison above covers them); the profile and directories are the
    // kernel's.
    let ready = zygote_ready(&sandbox).await;
    assert!(
        ready.app_prepared && ready.shell_prebuilt && ready.probe_compiled,
        "{ready:?}"
    );
    if huge_pages_on_request() {
        assert!(ready.huge_pages_mib > 0, "no heap on huge pages: {ready:?}");
    }
    for key in ["own_profile", "ipython_dir", "home_dir", "starting_dir"] {
        assert_eq!(z["ipython"][key], true, "{key}: {}", z["ipython"]);
    }
    assert_eq!(z["ipython"]["dir_history"], serde_json::json!([true]));
    assert_eq!(z["ipython"]["saved_streams"][1], "OutStream");
    // The probe's source file was read and removed before any task code.
    assert_eq!(z["probe_file_left"], false);
    assert_eq!(z["probe_code_left"], false);
    assert_eq!(z["seccomp"], "2");
    assert_eq!(z["cap_eff"], "0000000000000000");
    assert_eq!(z["unshare"], serde_json::json!([-1, libc::EPERM]));
    assert_eq!(z["ppid"], 1, "the jail's PID 1 adopted the kernel");
    assert_eq!(z["cgroup"], serde_json::json!(["/"]));
    assert_eq!(z["home_exists"], false);
    // Own unprivileged identities.
    let (uc, uz, us) = (uid_of(&c), uid_of(&z), uid_of(&s));
    assert!(uz >= 1000 && uz != uc && uz != us, "{uc} {uz} {us}");
    // Fresh namespaces: neither the harness's nor a sibling's.
    for n in ["mnt", "net", "ipc", "uts", "pid", "cgroup"] {
        let host = std::fs::read_link(format!("/proc/self/ns/{n}")).unwrap();
        let host = host.to_string_lossy();
        assert_ne!(z["ns"][n].as_str().unwrap(), host, "{n} is the harness's");
        assert_ne!(z["ns"][n], s["ns"][n], "{n} shared by siblings");
        assert_ne!(z["ns"][n], c["ns"][n], "{n} shared with the cold kernel");
    }
    // Every process of the kernel is in its own cgroup (seen from the host).
    let zygote_pid = zygote_pid(&sandbox).await;
    let live = forked.live_processes();
    assert!(
        !live.contains(&zygote_pid),
        "the zygote is not in the kernel's group"
    );
    assert!(live.len() >= 3, "relay, PID 1 and kernel: {live:?}");
    for k in [cold, forked, sibling] {
        k.shutdown().await;
    }
}

/// Whether a process can have its memory collapsed into transparent huge
/// pages right away: THP mode `madvise` or `always`, and MADV_COLLAPSE
/// (Linux 6.1).
fn huge_pages_on_request() -> bool {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut version = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    !mode.contains("[never]") && !mode.is_empty() && (major, minor) >= (6, 1)
}

async fn zygote_pid(sandbox: &Arc<dyn Sandbox>) -> i32 {
    fat_zygote(sandbox, |z| z.pid().expect("zygote pid")).await
}

/// What the fat image's zygote said when it was ready.
async fn zygote_ready(sandbox: &Arc<dyn Sandbox>) -> zygote::Ready {
    fat_zygote(sandbox, |z| z.ready().expect("zygote ready")).await
}

async fn fat_zygote<T: Send + 'static>(
    sandbox: &Arc<dyn Sandbox>,
    read: impl FnOnce(&zygote::Zygote) -> T + Send + 'static,
) -> T {
    let spec = common::spec(ImageName::Fat);
    let sandbox = sandbox.clone();
    tokio::task::spawn_blocking(move || {
        read(&zygote::for_spec(&spec, sandbox.as_ref()).expect("zygote runs"))
    })
    .await
    .unwrap()
}

const SEEDS: &str = r#"
import json, random, numpy as np
print(json.dumps({"random": random.random(), "numpy": float(np.random.rand()), "urandom": __import__("os").urandom(8).hex()}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn siblings_are_isolated_from_each_other_and_from_the_zygote() {
    let _shared = ZYGOTE_USE.read().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut a = start(&sandbox, KernelStart::Zygote).await;
    let mut b = start(&sandbox, KernelStart::Zygote).await;
    assert_eq!(a.start_path(), &StartPath::Zygote);
    assert_eq!(b.start_path(), &StartPath::Zygote);
    let zygote = zygote_pid(&sandbox).await;

    // Seeds differ between siblings.
    let (sa, sb) = (report(&mut a, SEEDS).await, report(&mut b, SEEDS).await);
    for key in ["random", "numpy", "urandom"] {
        assert_ne!(sa[key], sb[key], "{key} is shared by siblings");
    }

    let exec = common::exec_opts(20);
    let o = a.execute("precious = 41", &exec).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    // Memory a child writes is charged to its own cgroup.
    let o = b
        .execute(
            "import numpy as np\nblock = np.ones(96 * 2**20 // 8)",
            &exec,
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let peak = o.memory_peak_bytes.expect("the cgroup reports its peak");
    assert!(peak >= 96 << 20, "peak {peak} below what the kernel wrote");

    // A sibling that crashes, exits, runs out of memory or is killed: the
    // zygote keeps serving and the other sibling keeps its state.
    let hostile: [(&str, &[Verdict]); 3] = [
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
            &[Verdict::Crash],
        ),
        ("import os\nos._exit(3)", &[Verdict::KernelExit]),
        ("x = bytearray(600 * 2**20)", &[Verdict::OomKilled]),
    ];
    for (code, expected) in hostile {
        let o = b.execute(code, &exec).await;
        assert!(expected.contains(&o.verdict), "{code}: {o:?}");
        assert!(o.state_lost, "{code}: the kernel was replaced");
        assert_eq!(
            b.start_path(),
            &StartPath::Zygote,
            "{code}: restarted from the zygote"
        );
        let o = a.execute("precious + 1", &exec).await;
        assert_eq!(
            o.answer.as_ref().map(|a| a.value.as_str()),
            Some("42"),
            "{code}: {o:?}"
        );
        assert_eq!(
            zygote_pid(&sandbox).await,
            zygote,
            "{code}: the zygote died"
        );
    }
    b.shutdown().await;
    let o = a.execute("precious + 1", &exec).await;
    assert_eq!(o.answer.as_ref().map(|a| a.value.as_str()), Some("42"));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_zygote_is_replaced_and_kernels_still_start() {
    let _alone = ZYGOTE_USE.write().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    let first = zygote_pid(&sandbox).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Wait until it is really gone (its parent, this process, reaps it at the restart).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while retrace::util::proc::stat(first).is_some_and(|s| s.state != 'Z')
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut k = start(&sandbox, KernelStart::Zygote).await;
    assert!(
        matches!(k.start_path(), StartPath::Zygote | StartPath::Fallback(_)),
        "{:?}",
        k.start_path()
    );
    let o = k.execute("1 + 1", &common::exec_opts(20)).await;
    assert_eq!(
        o.answer.as_ref().map(|a| a.value.as_str()),
        Some("2"),
        "{o:?}"
    );
    assert_ne!(zygote_pid(&sandbox).await, first, "a new zygote serves");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zygote_started_early_serves_the_first_kernel() {
    let _alone = ZYGOTE_USE.write().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    let spec = common::spec(ImageName::Fat);
    // No zygote of this process runs, and no kernel asks for one.
    zygote::shutdown_all();
    assert!(zygote::of_image(&spec.image.dir).is_none());
    zygote::start_early((*spec).clone(), sandbox.clone());
    let early = zygote::of_image(&spec.image.dir).expect("asked for at once");
    // Its pid is read once its start is over: it started without a kernel.
    let pid = tokio::task::spawn_blocking(move || early.pid())
        .await
        .unwrap()
        .expect("the early zygote runs");
    let mut k = start(&sandbox, KernelStart::Zygote).await;
    assert_eq!(k.start_path(), &StartPath::Zygote);
    assert_eq!(
        zygote_pid(&sandbox).await,
        pid,
        "the early zygote forked it"
    );
    let o = k.execute("1 + 1", &common::exec_opts(20)).await;
    assert_eq!(
        o.answer.as_ref().map(|a| a.value.as_str()),
        Some("2"),
        "{o:?}"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unconfined_sandbox_starts_no_zygote_early() {
    let _alone = ZYGOTE_USE.write().await;
    let spec = common::spec(ImageName::Fat);
    zygote::shutdown_all();
    zygote::start_early((*spec).clone(), Arc::new(retrace::sandbox::Unconfined));
    assert!(zygote::of_image(&spec.image.dir).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_confinement_the_zygote_start_falls_back_to_cold() {
    let _shared = ZYGOTE_USE.read().await;
    // Unconfined sandboxes cannot adopt: the start falls back and says why.
    let sandbox: Arc<dyn Sandbox> = Arc::new(retrace::sandbox::Unconfined);
    if common::lacks_root() {
        return;
    }
    let mut k = Kernel::start(
        common::spec(ImageName::Fat),
        sandbox.as_ref(),
        options(KernelStart::Zygote),
    )
    .await
    .expect("kernel starts");
    let StartPath::Fallback(reason) = k.start_path().clone() else {
        panic!("{:?}", k.start_path())
    };
    assert!(reason.contains("confined"), "{reason}");
    let o = k.execute("1 + 1", &common::exec_opts(20)).await;
    assert_eq!(o.answer.as_ref().map(|a| a.value.as_str()), Some("2"));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn figures_render_inline_in_a_zygote_kernel() {
    let _shared = ZYGOTE_USE.read().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, KernelStart::Zygote).await;
    assert_eq!(k.start_path(), &StartPath::Zygote);
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint(plt.get_backend())";
    let o = k.execute(code, &common::exec_opts(20)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(o.stdout.contains("matplotlib_inline"), "{}", o.stdout);
    assert!(
        o.artifacts.iter().any(|a| a.mime == "image/png"),
        "a figure left open is sent at the end of the cell: {:?}",
        o.artifacts.iter().map(|a| &a.mime).collect::<Vec<_>>()
    );
    k.shutdown().await;
}

/// The completion probe is answered by retrace's reply at the dispatcher's
/// door on both kinds of kernel, and still only after the cell: a cell that
/// forges its own reply and idle, then works on, is not cut short; the
/// kernel's other shell requests (an async cell, the state inspector's
/// silent cells) still take ipykernel's path.
#[tokio::test(flavor = "multi_thread")]
async fn the_completion_probe_is_answered_only_after_the_cell() {
    let _shared = ZYGOTE_USE.read().await;
    let Some(sandbox) = common::confined() else {
        return;
    };
    const FORGE_THEN_WORK: &str = r#"
import time
k = get_ipython().kernel
parent = k.get_parent('shell')
k.session.send(k.shell_stream, 'execute_reply',
               {'status': 'ok', 'execution_count': 1, 'user_expressions': {}, 'payload': []},
               parent=parent, ident=k._parent_ident['shell'])
k.session.send(k.iopub_socket, 'status', {'execution_state': 'idle'}, parent=parent)
time.sleep(1.5)
print('worked on')
"#;
    for how in [KernelStart::Cold, KernelStart::Zygote] {
        let mut k = start(&sandbox, how).await;
        let door = k
            .execute(
                "print(get_ipython().kernel.dispatch_shell.__qualname__)",
                &common::exec_opts(20),
            )
            .await;
        assert_eq!(
            door.stdout.trim(),
            "_install_completion_reply.<locals>.dispatch_shell",
            "{how:?}: {door:?}"
        );
        let forged = k.execute(FORGE_THEN_WORK, &common::exec_opts(20)).await;
        assert_eq!(forged.verdict, Verdict::Ok, "{how:?}: {forged:?}");
        // Printed after the sleep: an execution ended by the forged reply
        // would not have it.
        assert!(forged.stdout.contains("worked on"), "{how:?}: {forged:?}");
        let awaited = k
            .execute(
                "import asyncio\nawait asyncio.sleep(0.01)\ntotal = 7\nanswer = total",
                &common::exec_opts(20),
            )
            .await;
        assert_eq!(awaited.verdict, Verdict::Ok, "{how:?}: {awaited:?}");
        assert_eq!(
            awaited.answer.as_ref().map(|a| a.value.as_str()),
            Some("7"),
            "{how:?}: {awaited:?}"
        );
        let query = StateQuery {
            names: vec!["total".into()],
            ..Default::default()
        };
        let state = k.inspect_state(&query).await.expect("state inspection");
        assert_eq!(
            state.variables.first().and_then(|v| v.value.as_deref()),
            Some("7"),
            "{how:?}: {state:?}"
        );
        k.shutdown().await;
    }
}
