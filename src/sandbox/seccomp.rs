//! The kernel's syscall filter: a deny list in the style of Docker's default
//! profile, installed just before the kernel execs (after no_new_privs) and
//! inherited by everything it starts. A denied call fails with `EPERM`
//! rather than killing the process, so libraries that probe a syscall see
//! an ordinary refusal and carry on. Built with `seccompiler` (the compiler
//! Firecracker uses): pure Rust, no C library at run time.
//!
//! Three filters stack (the kernel applies the strictest answer):
//! the deny list (`EPERM`); `clone3` answers `ENOSYS`, as under Docker, so
//! glibc falls back to `clone`, whose flags a filter can read (clone3 passes
//! them in memory); on x86_64 the x32 ABI's syscall numbers answer `ENOSYS`
//! (they would bypass a filter keyed on x86_64 numbers). A syscall of another
//! architecture (32-bit `int 0x80`) kills the process: no library does that.
//! The list and the reasons are in docs/sandbox.md ("How kernels are confined").

use std::collections::BTreeMap;

#[cfg(target_arch = "x86_64")]
use seccompiler::sock_filter;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "the kernel's syscall filter names x86_64 and aarch64 syscall numbers only; \
     add this architecture's table to src/sandbox/seccomp.rs"
);

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// Denied outright, grouped as in docs/sandbox.md's table.
const DENIED: &[(&str, i64)] = &[
    // Reading or steering other processes.
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("process_madvise", libc::SYS_process_madvise),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    // Kernel keyrings (not namespaced).
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    // New namespaces and mounts.
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fsconfig", libc::SYS_fsconfig),
    ("fspick", libc::SYS_fspick),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    // Large kernel attack surface, rarely needed by user code.
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    // Files by handle (bypass the mount view).
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    // The machine itself: kernels, modules, power, swap, accounting, time.
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("adjtimex", libc::SYS_adjtimex),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("quotactl", libc::SYS_quotactl),
    ("quotactl_fd", libc::SYS_quotactl_fd),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("nfsservctl", libc::SYS_nfsservctl),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    // NUMA placement (Docker denies it without CAP_SYS_NICE).
    ("mbind", libc::SYS_mbind),
    ("migrate_pages", libc::SYS_migrate_pages),
    ("move_pages", libc::SYS_move_pages),
    ("set_mempolicy", libc::SYS_set_mempolicy),
    ("set_mempolicy_home_node", libc::SYS_set_mempolicy_home_node),
    // x86 only: old or port-level interfaces.
    #[cfg(target_arch = "x86_64")]
    ("uselib", libc::SYS_uselib),
    #[cfg(target_arch = "x86_64")]
    ("_sysctl", libc::SYS__sysctl),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
];

/// `clone` flags that create namespaces: `clone` with any of them is denied
/// (plain fork and threads pass).
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// `fcntl` commands denied: locks and leases whose kernel memory no cgroup
/// is charged for and that `/proc/locks` cannot tie to a process (an OFD
/// lock shows pid -1; see `locks.rs`). The query is denied with them, so a
/// library that probes for OFD locks falls back to POSIX ones. sqlite,
/// IPython's history and `flock` users need none of them.
const FCNTL_DENIED: [u64; 4] = [
    libc::F_OFD_GETLK as u64,
    libc::F_OFD_SETLK as u64,
    libc::F_OFD_SETLKW as u64,
    libc::F_SETLEASE as u64,
];

/// `personality` values allowed (Docker's): `PER_LINUX` (0), `PER_LINUX32`
/// (8), `UNAME26` alone or with it, and the query `0xffffffff`. Others (e.g.
/// `ADDR_NO_RANDOMIZE`, `READ_IMPLIES_EXEC`) are denied.
const PERSONALITIES: [u64; 5] = [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// The syscalls the filter denies, by name (for `sandbox info` and tests).
pub fn denied_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = DENIED.iter().map(|(name, _)| *name).collect();
    names.extend([
        "clone (namespace flags)",
        "clone3 (ENOSYS)",
        "personality (non-default)",
        "clone (CLONE_FILES without CLONE_THREAD)",
        "fcntl (F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE)",
    ]);
    names
}

/// A filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[error("syscall filter: {0}")]
pub struct FilterError(String);

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| FilterError(e.to_string()))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    SeccompRule::new(conditions).map_err(|e| FilterError(e.to_string()))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    on_match: SeccompAction,
) -> Result<BpfProgram, FilterError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, on_match, ARCH)
        .map_err(|e| FilterError(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| FilterError(e.to_string()))
}

/// The filters, in the order they are installed.
pub fn programs() -> Result<Vec<BpfProgram>, FilterError> {
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    // Any one namespace flag matches (rules of a syscall are alternatives).
    let mut clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    // A process sharing its descriptor table with another one: its POSIX
    // locks would outlive it under its dead pid, out of the watchdog's
    // sight (threads share it within one pid; fork and vfork do not).
    let shared_files = (libc::CLONE_FILES | libc::CLONE_THREAD) as u64;
    clone_rules.push(rule(vec![cond(
        0,
        SeccompCmpOp::MaskedEq(shared_files),
        libc::CLONE_FILES as u64,
    )?])?);
    deny.insert(libc::SYS_clone, clone_rules);
    let fcntl_rules = FCNTL_DENIED
        .iter()
        .map(|cmd| rule(vec![cond(1, SeccompCmpOp::Eq, *cmd)?]))
        .collect::<Result<Vec<_>, _>>()?;
    deny.insert(libc::SYS_fcntl, fcntl_rules);
    // Denied when it equals none of the allowed values (conditions of a rule
    // all hold).
    let personality = PERSONALITIES
        .iter()
        .map(|v| cond(0, SeccompCmpOp::Ne, *v))
        .collect::<Result<Vec<_>, _>>()?;
    deny.insert(libc::SYS_personality, vec![rule(personality)?]);
    let eperm = compile(deny, SeccompAction::Errno(libc::EPERM as u32))?;

    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let enosys = compile(clone3, SeccompAction::Errno(libc::ENOSYS as u32))?;

    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut programs = vec![eperm, enosys];
    #[cfg(target_arch = "x86_64")]
    programs.push(x32_block());
    Ok(programs)
}

/// x32 syscalls carry bit 30 in their number under the x86_64 audit arch:
/// `ENOSYS` for all of them.
#[cfg(target_arch = "x86_64")]
fn x32_block() -> BpfProgram {
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // struct seccomp_data: nr at offset 0.
    let load_nr = sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    };
    let is_x32 = sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k: X32_SYSCALL_BIT,
    };
    let refuse = sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
    };
    let allow = sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    };
    vec![load_nr, is_x32, refuse, allow]
}

/// The filters as raw `struct sock_filter` arrays (code u16, jt u8, jf u8,
/// k u32, native byte order), for a process that installs them itself with
/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sock_fprog)`: the zygote
/// (see `kernel/zygote.py`), which forks kernels rather than exec'ing them.
pub fn program_bytes() -> Result<Vec<Vec<u8>>, FilterError> {
    Ok(programs()?
        .iter()
        .map(|program| {
            let mut bytes = Vec::with_capacity(program.len() * 8);
            for f in program {
                bytes.extend_from_slice(&f.code.to_ne_bytes());
                bytes.push(f.jt);
                bytes.push(f.jf);
                bytes.extend_from_slice(&f.k.to_ne_bytes());
            }
            bytes
        })
        .collect())
}

/// Installs the filters on the calling thread. Needs no_new_privs (or
/// CAP_SYS_ADMIN). Called last before `execve`.
pub fn install(programs: &[BpfProgram]) -> Result<(), FilterError> {
    for program in programs {
        seccompiler::apply_filter(program).map_err(|e| FilterError(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_architecture() {
        let programs = programs().expect("filters compile");
        assert!(programs.len() >= 2);
        // The deny list holds every named syscall plus clone and personality.
        assert!(programs[0].len() > DENIED.len());
    }

    #[test]
    fn the_raw_programs_are_the_compiled_ones() {
        let programs = programs().unwrap();
        let raw = program_bytes().unwrap();
        assert_eq!(raw.len(), programs.len());
        for (bytes, program) in raw.iter().zip(&programs) {
            assert_eq!(bytes.len(), program.len() * 8);
            let first = &program[0];
            assert_eq!(bytes[..2], first.code.to_ne_bytes());
            assert_eq!(bytes[4..8], first.k.to_ne_bytes());
        }
    }

    #[test]
    fn the_list_names_the_issue_syscalls() {
        let names = denied_names();
        for needed in [
            "ptrace",
            "keyctl",
            "unshare",
            "mount",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "io_uring_setup",
            "kexec_load",
            "open_by_handle_at",
            "fcntl (F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE)",
            "clone (CLONE_FILES without CLONE_THREAD)",
        ] {
            assert!(names.contains(&needed), "{needed} is not denied");
        }
    }
}
