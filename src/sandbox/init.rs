//! The process tree of a confined kernel, run by retrace's own binary in a
//! hidden mode (`retrace __sandbox-init SPEC`), already inside the kernel's
//! cgroup and new mount/network/IPC/UTS namespaces:
//!
//! ```text
//! relay (caller's PID namespace; mirrors PID 1's end as its own; kills
//!  │     PID 1 when the harness dies)
//!  └─ PID 1: builds the filesystem view, brings the loopback up, reaps
//!      │     orphans, forwards SIGINT/TERM;
//!      │     dies with the relay (parent-death signal)
//!      └─ kernel: own session, rlimits, kernel user, no_new_privs, syscall
//!                 filter, exec python
//! ```
//!
//! When PID 1 exits the kernel kills everything left in the namespace. The
//! relay watches the harness through a pidfd rather than a parent-death
//! signal: that signal follows the *thread* that forked, and the harness
//! forks from whichever tokio thread happens to run the launch (a blocking
//! pool thread ends after a while idle).

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use super::isolate::{self, IsolateSpec};

/// The hidden first argument that selects this mode.
pub const INIT_ARG: &str = "__sandbox-init";

/// What PID 1 of an adopting jail writes on its stdout once the kernel's
/// filesystem view is built: the harness may now fork a kernel into it.
pub const READY_LINE: &str = "retrace-init: ready";

/// Exit codes of the init's own failures (the kernel never started).
const EXIT_SPEC: i32 = 121;
const EXIT_ROOT: i32 = 122;
const EXIT_BECOME: i32 = 123;
const EXIT_EXEC: i32 = 124;

static KERNEL_PID: AtomicI32 = AtomicI32::new(0);

// fork(2) has no safe wrapper; the block says why it is sound.
#[allow(unsafe_code)]
/// Entry point; never returns. Must run before any thread is started.
pub fn main(spec_path: &Path) -> ! {
    let spec: IsolateSpec = match std::fs::read(spec_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("retrace-init: reading {}: {e}", spec_path.display());
            std::process::exit(EXIT_SPEC);
        }
    };
    // SAFETY: single-threaded at this point (called first thing in main).
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            // The relay is single-threaded, so this follows the relay itself.
            // (Were the relay gone already, it would have killed us first:
            // it only exits after PID 1 has ended or been killed.)
            let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
            std::process::exit(pid1(&spec))
        }
        Ok(ForkResult::Parent { child }) => {
            watch_harness(child, spec.harness_pid);
            relay(child)
        }
        Err(e) => {
            eprintln!("retrace-init: fork: {e}");
            std::process::exit(EXIT_SPEC);
        }
    }
}

/// Until PID 1 ends: kills it (and with it the whole namespace) as soon as
/// the harness process is gone. Single-threaded: after `unshare(CLONE_NEWPID)`
/// the relay cannot start threads. `harness` 0 (an older spec) watches
/// nothing; without pidfds (Linux < 5.3) only a harness already gone is seen.
fn watch_harness(pid1: Pid, harness: u32) {
    if harness == 0 {
        return;
    }
    let is_parent = || nix::unistd::getppid().as_raw() as u32 == harness;
    let harness_fd = pidfd_open(harness);
    // The pidfd names the harness only if it was still our parent after it
    // was opened (otherwise the pid may have been reused).
    if !is_parent() {
        let _ = signal::kill(pid1, Signal::SIGKILL);
        return;
    }
    let (Some(harness_fd), Some(pid1_fd)) = (harness_fd, pidfd_open(pid1.as_raw() as u32)) else {
        return;
    };
    if first_to_exit(&harness_fd, &pid1_fd) == Some(0) {
        let _ = signal::kill(pid1, Signal::SIGKILL);
    }
}

/// PID 1 of our relay `relay`'s namespace, found among `members` (the
/// kernel's processes); `None` when `relay` is not a live child of ours or
/// PID 1 is gone. Killing it ends the whole namespace (no process can
/// enter it any more), and the relay reaps it before it exits itself, so
/// nothing of the tree is left for the host's init to collect.
pub fn pid1_of(relay: i32, members: &[i32]) -> Option<i32> {
    use crate::util::proc;
    let live_child_of = |p: &proc::ProcStat, parent: i32| p.ppid == parent && p.state != 'Z';
    proc::stat(relay).filter(|p| live_child_of(p, std::process::id() as i32))?;
    members
        .iter()
        .filter_map(|&pid| proc::stat(pid))
        .find(|p| live_child_of(p, relay))
        .map(|p| p.pid)
}

// pidfd_open(2) and poll(2) have no safe wrapper; each block says why it is sound.
#[allow(unsafe_code)]
fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a new descriptor that we own.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Blocks until one of two processes has exited: its index, or `None` when
/// polling fails (then nothing is known and nothing is killed).
#[allow(unsafe_code)]
fn first_to_exit(a: &std::os::fd::OwnedFd, b: &std::os::fd::OwnedFd) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let entry = |fd: &std::os::fd::OwnedFd| libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut fds = [entry(a), entry(b)];
    loop {
        // SAFETY: a valid array of pollfd and its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n > 0 {
            return fds.iter().position(|p| p.revents != 0);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// Waits for PID 1 and ends the same way, so the harness's wait status is
/// the kernel's: exit code as is, death by signal as death by that signal.
fn relay(child: Pid) -> ! {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => {
                if (129..=128 + 64).contains(&code) {
                    die_by(code - 128);
                }
                std::process::exit(code);
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => die_by(sig as i32),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => std::process::exit(EXIT_SPEC),
        }
    }
}

// signal(2) has no safe wrapper; the block says why it is sound.
#[allow(unsafe_code)]
fn die_by(sig: i32) -> ! {
    if let Ok(signal) = Signal::try_from(sig) {
        // SAFETY: restoring the default disposition before raising.
        unsafe {
            let _ = signal::signal(signal, SigHandler::SigDfl);
        }
        let _ = signal::sigprocmask(
            signal::SigmaskHow::SIG_UNBLOCK,
            Some(&signal::SigSet::all()),
            None,
        );
        let _ = signal::raise(signal);
    }
    std::process::exit(128 + sig);
}

extern "C" fn forward(sig: libc::c_int) {
    let pid = KERNEL_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // kill(2) is async-signal-safe; the conversions allocate nothing.
        if let Ok(sig) = Signal::try_from(sig) {
            let _ = signal::kill(Pid::from_raw(pid), sig);
        }
    }
}

// fork(2) has no safe wrapper; the block says why it is sound.
#[allow(unsafe_code)]
/// PID 1 of the kernel's namespace. Returns the exit code for the relay.
fn pid1(spec: &IsolateSpec) -> i32 {
    if let Err(e) = isolate::build_root(spec) {
        eprintln!("retrace-init: building the kernel's filesystem: {e}");
        return EXIT_ROOT;
    }
    let _ = nix::unistd::sethostname("retrace-kernel");
    if spec.private_network {
        if let Err(e) = super::loopback::bring_up() {
            eprintln!("retrace-init: bringing the kernel's loopback up: {e}");
            return EXIT_ROOT;
        }
    }
    if spec.adopt {
        return adopt();
    }
    // SAFETY: single-threaded; fork duplicates only this thread.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            if let Err(e) = isolate::become_kernel(spec) {
                eprintln!("retrace-init: {e}");
                std::process::exit(EXIT_BECOME);
            }
            let e = isolate::exec_kernel(spec);
            eprintln!("retrace-init: {e}");
            std::process::exit(EXIT_EXEC);
        }
        Ok(ForkResult::Parent { child }) => {
            KERNEL_PID.store(child.as_raw(), Ordering::Relaxed);
            install_forwarding();
            reap_until(child)
        }
        Err(e) => {
            eprintln!("retrace-init: fork: {e}");
            EXIT_BECOME
        }
    }
}

/// PID 1 of a zygote kernel: says the view is ready, reads the kernel's pid
/// in this namespace from stdin (the zygote forked it into the namespace;
/// it re-parented to us), then forwards signals to it and reaps as usual.
/// EOF or garbage on stdin: the harness gave up, and so does the jail.
fn adopt() -> i32 {
    use std::io::{BufRead, Write};
    let mut out = std::io::stdout();
    if writeln!(out, "{READY_LINE}")
        .and_then(|()| out.flush())
        .is_err()
    {
        return EXIT_BECOME;
    }
    let mut line = String::new();
    let pid = match std::io::stdin().lock().read_line(&mut line) {
        Ok(n) if n > 0 => line.trim().parse::<i32>().ok().filter(|p| *p > 1),
        _ => None,
    };
    let Some(pid) = pid else {
        eprintln!("retrace-init: no kernel was handed over");
        return EXIT_BECOME;
    };
    let kernel = Pid::from_raw(pid);
    KERNEL_PID.store(pid, Ordering::Relaxed);
    install_forwarding();
    reap_until(kernel)
}

// signal(2) has no safe wrapper; the block says why it is sound.
#[allow(unsafe_code)]
fn install_forwarding() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only calls kill(2).
        unsafe {
            let _ = signal::signal(sig, SigHandler::Handler(forward));
        }
    }
}

/// Reaps every child (orphans re-parent to PID 1 and would stay zombies,
/// holding pids) until the kernel itself ends.
fn reap_until(kernel: Pid) -> i32 {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == kernel => return code,
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == kernel => return 128 + sig as i32,
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return EXIT_BECOME,
        }
    }
}
