//! The host: root, cgroups (mode, writable controllers, swap accounting),
//! the namespaces retrace creates, and seccomp. Namespaces and the filter
//! are tried in a forked child, so the doctor process itself never changes.

use std::io;

use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use super::check::Check;
use crate::sandbox::cgroup::{host_has_swap, CgroupHost, CgroupMode, Probe};
use crate::sandbox::seccomp;

/// README: "Running without root".
const FIX_ROOT: &str = "run retrace as root (`sudo retrace …`); with sudo on a cgroup v2 host, \
     `sudo systemd-run --scope -p Delegate=yes retrace run` gives it a delegated cgroup \
     (README: Running without root); without any root only `--unsafe-no-sandbox` runs, unconfined";

const FIX_SWAP: &str = "boot with `swapaccount=1` (cgroup v1) or use a kernel with \
     CONFIG_MEMCG_SWAP, or keep swap off";

/// The namespaces every confined kernel gets (see `sandbox::confined`).
const NAMESPACES: [(libc::c_int, &str); 6] = [
    (libc::CLONE_NEWNS, "mount"),
    (libc::CLONE_NEWPID, "pid"),
    (libc::CLONE_NEWNET, "net"),
    (libc::CLONE_NEWIPC, "ipc"),
    (libc::CLONE_NEWUTS, "uts"),
    (libc::CLONE_NEWCGROUP, "cgroup"),
];

pub fn checks() -> Vec<Check> {
    let root = nix::unistd::geteuid().is_root();
    let mut checks = vec![root_check(root)];
    let (cgroups, probe) = cgroup_check();
    checks.push(cgroups);
    checks.push(swap_check(probe.as_ref()));
    checks.push(namespace_check(root));
    checks.push(user_namespace_check());
    checks.push(seccomp_check());
    checks
}

fn root_check(root: bool) -> Check {
    if root {
        Check::ok(
            "root",
            "running as root (namespaces and per-kernel users need it)",
        )
    } else {
        Check::error(
            "root",
            format!(
                "running as uid {}: creating namespaces and switching kernels to their own user needs root",
                nix::unistd::geteuid()
            ),
            FIX_ROOT,
        )
    }
}

/// Detection as a run does it (retrace's own `retrace/` subtree only),
/// then the probe: a throwaway group created and removed there.
fn cgroup_check() -> (Check, Option<Probe>) {
    let host = match CgroupHost::detect() {
        Ok(host) => host,
        Err(e) => {
            let mode = CgroupMode::of_host()
                .map(|m| m.to_string())
                .unwrap_or_else(|reason| reason.to_string());
            let text = e.to_string();
            let (reason, fix) = text.split_once('\n').unwrap_or((&text, FIX_ROOT));
            return (
                Check::error("cgroups", format!("{mode}: {reason}"), fix.to_string()),
                None,
            );
        }
    };
    let probe = host.probe();
    let check = cgroups_of(&probe);
    (check, Some(probe))
}

/// The cgroups check from a probe (a run refuses any problem it reports).
fn cgroups_of(probe: &Probe) -> Check {
    let kill = if probe.cgroup_kill {
        "cgroup.kill"
    } else {
        "freezer kills"
    };
    if probe.writable && probe.problems.is_empty() {
        return Check::ok(
            "cgroups",
            format!(
                "{}: {} writable under retrace's own subtree (a throwaway group was created and removed), {kill}",
                probe.mode,
                probe.controllers.join(", ")
            ),
        );
    }
    Check::error(
        "cgroups",
        format!("{}: {}", probe.mode, probe.problems.join("; ")),
        "run as root on a host that mounts the memory, pids, cpu, cpuacct and freezer \
         controllers (v1) or the unified hierarchy (v2); see README: Running without root",
    )
}

fn swap_check(probe: Option<&Probe>) -> Check {
    let swap_on = host_has_swap();
    match probe {
        None => Check::info(
            "swap-accounting",
            "not checked: cgroups are not usable (see `cgroups`)",
        ),
        Some(p) if p.swap_accounting => Check::ok(
            "swap-accounting",
            format!(
                "{}: the memory limit covers swap too",
                if p.mode == CgroupMode::V2 {
                    "memory.swap.max present"
                } else {
                    "memory.memsw.* present"
                }
            ),
        ),
        Some(_) if swap_on => Check::error(
            "swap-accounting",
            "swap is on but not accounted per cgroup: a kernel could swap past its memory limit, \
             so retrace refuses to run",
            format!("{FIX_SWAP}, or turn swap off (`swapoff -a`)"),
        ),
        Some(_) => Check::warn(
            "swap-accounting",
            "absent (no memory.memsw.* / memory.swap.max); no swap is active, so the memory \
             limit holds, but turning swap on would make retrace refuse to run",
            FIX_SWAP,
        ),
    }
}

/// Creates each namespace retrace uses in a child; fails with the names
/// the host refused.
fn namespace_check(root: bool) -> Check {
    let names: Vec<&str> = NAMESPACES.iter().map(|(_, n)| *n).collect();
    let result = in_child(|| {
        let mut refused = 0;
        for (bit, (flag, _)) in NAMESPACES.iter().enumerate() {
            // SAFETY: a raw syscall in the forked child.
            #[allow(unsafe_code)]
            if unsafe { libc::unshare(*flag) } != 0 {
                refused |= 1 << bit;
            }
        }
        refused
    });
    match result {
        Ok(0) => Check::ok(
            "namespaces",
            format!("{} namespaces can be created", names.join(", ")),
        ),
        Ok(mask) => {
            let refused: Vec<&str> = refused_names(mask, &names);
            let fix = if root {
                "the kernel or a container runtime forbids them: run retrace on the host, or in \
                 a container with CAP_SYS_ADMIN (`docker run --privileged`)"
            } else {
                FIX_ROOT
            };
            Check::error(
                "namespaces",
                format!("cannot create {} namespaces", refused.join(", ")),
                fix,
            )
        }
        Err(e) => Check::error("namespaces", format!("cannot test: {e}"), FIX_ROOT),
    }
}

/// The bits set in `mask`, by name.
fn refused_names<'a>(mask: i32, names: &[&'a str]) -> Vec<&'a str> {
    names
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// retrace does not create user namespaces (it runs as root); reported
/// because kernels are denied them by the filter either way.
fn user_namespace_check() -> Check {
    // SAFETY: a raw syscall in the forked child.
    #[allow(unsafe_code)]
    let result = in_child(|| (unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0) as i32);
    match result {
        Ok(0) => Check::ok(
            "user-namespaces",
            "available (retrace does not need them as root; kernels are denied them)",
        ),
        _ => Check::info(
            "user-namespaces",
            "not available; retrace does not use them (it runs as root)",
        ),
    }
}

/// The kernel supports seccomp, the filter compiles for this architecture,
/// and it loads (in a child, after no_new_privs, as a kernel's would).
fn seccomp_check() -> Check {
    let mode = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| seccomp_field(&s));
    // SAFETY: prctl with no pointers.
    #[allow(unsafe_code)]
    let supported = unsafe { libc::prctl(libc::PR_GET_SECCOMP) } >= 0;
    if !supported || mode.is_none() {
        return Check::error(
            "seccomp",
            "the kernel has no seccomp (prctl PR_GET_SECCOMP fails)",
            "use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER",
        );
    }
    let programs = match seccomp::programs() {
        Ok(p) => p,
        Err(e) => return Check::error(
            "seccomp",
            format!("{e} ({})", std::env::consts::ARCH),
            "report this: the filter tables in src/sandbox/seccomp.rs do not fit this architecture",
        ),
    };
    let filters: Vec<libc::sock_fprog> = programs
        .iter()
        .map(|p| libc::sock_fprog {
            len: p.len() as u16,
            filter: p.as_ptr() as *mut libc::sock_filter,
        })
        .collect();
    let loaded = in_child(|| {
        // SAFETY: raw syscalls in the forked child; the programs were
        // built before the fork and outlive it.
        #[allow(unsafe_code)]
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return 1;
            }
            for f in &filters {
                let f: *const libc::sock_fprog = f;
                if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, f) != 0 {
                    return 2;
                }
            }
        }
        0
    });
    let already = match mode {
        Some(2) => " (retrace itself already runs under a filter, e.g. a container's; they stack)",
        _ => "",
    };
    let instructions: usize = programs.iter().map(Vec::len).sum();
    match loaded {
        Ok(0) => Check::ok(
            "seccomp",
            format!(
                "the kernel filter compiles for {} ({} filters, {instructions} instructions) and loads{already}",
                std::env::consts::ARCH,
                programs.len()
            ),
        ),
        Ok(step) => Check::error(
            "seccomp",
            format!(
                "the filter compiles but does not load ({})",
                if step == 1 { "no_new_privs refused" } else { "seccomp(SET_MODE_FILTER) refused" }
            ),
            "use a kernel with CONFIG_SECCOMP_FILTER; in a container, allow seccomp filters \
             (e.g. docker's default profile allows them)",
        ),
        Err(e) => Check::error("seccomp", format!("cannot test: {e}"), FIX_ROOT),
    }
}

/// The `Seccomp:` field of `/proc/<pid>/status`: 0 none, 1 strict, 2 filter.
fn seccomp_field(status: &str) -> Option<u8> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Why a probe in a forked child gave no exit code.
#[derive(Debug, thiserror::Error)]
enum ChildError {
    #[error("fork: {0}")]
    Fork(io::Error),
    #[error("the test child ended with {0:?}")]
    Ended(WaitStatus),
    #[error("waitpid: {0}")]
    Wait(nix::Error),
}

/// Runs `probe` in a forked child and returns its exit code. The child
/// makes raw syscalls only and never returns into Rust code of the parent
/// (other threads' locks may be held at the fork).
fn in_child(probe: impl FnOnce() -> i32) -> Result<i32, ChildError> {
    // SAFETY: the child only runs `probe` (raw syscalls) and `_exit`.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(ChildError::Fork(io::Error::last_os_error())),
        0 => {
            let code = probe();
            // SAFETY: ends the child without running the parent's atexit
            // handlers or destructors.
            #[allow(unsafe_code)]
            unsafe {
                libc::_exit(code & 0x7f)
            }
        }
        pid => match waitpid(Pid::from_raw(pid), None) {
            Ok(WaitStatus::Exited(_, code)) => Ok(code),
            Ok(other) => Err(ChildError::Ended(other)),
            Err(e) => Err(ChildError::Wait(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_seccomp_field() {
        let status = "Name:\tretrace\nNoNewPrivs:\t0\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(seccomp_field(status), Some(2));
        assert_eq!(seccomp_field("Name:\tx\n"), None);
    }

    #[test]
    fn names_the_refused_namespaces() {
        let names = ["mount", "pid", "net"];
        assert_eq!(refused_names(0b101, &names), ["mount", "net"]);
        assert!(refused_names(0, &names).is_empty());
    }

    #[test]
    fn a_child_reports_its_code_and_leaves_the_parent_alone() {
        let before = std::fs::read_link("/proc/self/ns/uts").unwrap();
        // SAFETY: a raw syscall in the forked child.
        #[allow(unsafe_code)]
        let code = in_child(|| unsafe { libc::unshare(libc::CLONE_NEWUTS) }.abs() + 5).unwrap();
        assert!(code == 5 || code == 6, "{code}");
        assert_eq!(std::fs::read_link("/proc/self/ns/uts").unwrap(), before);
    }
}
