//! What a forker outside the jail needs to turn a forked process into a
//! kernel of the jail (the zygote start, see `kernel/zygote.rs`): the
//! cgroup files to join, the identity, rlimits, OOM score, working
//! directory, environment, command line and the syscall filter, i.e. every
//! fact `isolate::become_kernel` and `exec_kernel` use on the cold path.

use std::path::PathBuf;

use serde::Serialize;

use super::isolate::Rlimits;

/// One kernel's confinement, as the zygote applies it after fork.
#[derive(Debug, Clone, Serialize)]
pub struct ForkPlan {
    /// Every `cgroup.procs` the forked process joins first.
    pub procs: Vec<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub rlimits: Rlimits,
    pub oom_score_adj: i32,
    pub cwd: PathBuf,
    /// The complete environment (nothing of the zygote's is kept).
    pub env: Vec<(String, String)>,
    /// Program and arguments the cold path would exec.
    pub argv: Vec<String>,
    /// The syscall filters, hex of raw `sock_filter` arrays, in install order.
    pub seccomp: Vec<String>,
}

/// A jail prepared for a kernel forked from outside: the command starts its
/// relay and PID 1 (which builds the view, prints
/// [`READY_LINE`](super::init::READY_LINE) and waits for the kernel's pid on
/// stdin); `plan` is what the forker applies.
pub struct Adoption {
    pub command: tokio::process::Command,
    pub plan: ForkPlan,
}
