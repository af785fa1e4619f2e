//! The process tree of a confined kernel, run by retrace's own binary in a
//! hidden mode (`retrace __sandbox-init SPEC`), already inside the kernel's
//! cgroup and new mount/network/IPC/UTS namespaces:
//!
//! ```text
//! relay (caller's PID namespace; mirrors PID 1's end as its own)
//!  └─ PID 1: builds the filesystem view, reaps orphans, forwards SIGINT/TERM
//!      └─ kernel: own session, rlimits, kernel user, no_new_privs, exec python
//! ```
//!
//! When PID 1 exits the kernel kills everything left in the namespace.

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use super::isolate::{self, IsolateSpec};

/// The hidden first argument that selects this mode.
pub const INIT_ARG: &str = "__sandbox-init";

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
        Ok(ForkResult::Child) => std::process::exit(pid1(&spec)),
        Ok(ForkResult::Parent { child }) => relay(child),
        Err(e) => {
            eprintln!("retrace-init: fork: {e}");
            std::process::exit(EXIT_SPEC);
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

// fork(2) and signal(2) have no safe wrapper; each block says why it is sound.
#[allow(unsafe_code)]
/// PID 1 of the kernel's namespace. Returns the exit code for the relay.
fn pid1(spec: &IsolateSpec) -> i32 {
    if let Err(e) = isolate::build_root(spec) {
        eprintln!("retrace-init: building the kernel's filesystem: {e}");
        return EXIT_ROOT;
    }
    let _ = nix::unistd::sethostname("retrace-kernel");
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
            for sig in [Signal::SIGINT, Signal::SIGTERM] {
                // SAFETY: the handler only calls kill(2).
                unsafe {
                    let _ = signal::signal(sig, SigHandler::Handler(forward));
                }
            }
            reap_until(child)
        }
        Err(e) => {
            eprintln!("retrace-init: fork: {e}");
            EXIT_BECOME
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
