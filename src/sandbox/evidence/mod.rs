//! The evidence gathered about one execution and the rules that turn it into
//! a verdict. The order follows the judges in the reference: harness failures
//! first, then what the harness itself decided, then how the kernel died,
//! then what the kernel reported while alive.
//!
//! Every verdict rests on evidence the code cannot write: cgroup counters,
//! the kernel's network-namespace counters, its tmpfs mounts and descriptor
//! tables (all read by the root harness from outside), the wait status and
//! the harness's own timers. An exception's name and text only *suggest* a
//! limit: without the evidence the verdict is `error`, the suggestion is
//! kept and flagged `unverified_claim`.

mod classify;
mod counters;
mod exit;
mod traces;

pub use classify::{classify, Classification};
pub use counters::Counters;
pub use exit::{signal_name, ExitInfo};
pub use traces::Traces;

use serde::{Deserialize, Serialize};

/// Why the harness ended an execution itself (first trigger wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessReason {
    TimeoutWall,
    TimeoutCpu,
    OutputLimit,
    DiskLimit,
    /// The kernel's processes held more file locks than their bound (the
    /// lock watchdog's count of `/proc/locks`): the kernel was killed.
    LockLimit,
}

/// Everything known about one execution when it ended.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub harness_failure: bool,
    pub harness_reason: Option<HarnessReason>,
    /// The harness had to kill the kernel (the interrupt was not enough).
    pub killed_by_harness: bool,
    /// The kernel process died during the execution, with this status.
    pub exit: Option<ExitInfo>,
    pub delta: Counters,
    /// Per-execution change of the traces outside the cgroup.
    pub traces: Traces,
    /// `ename` and `evalue` when the kernel replied with an error.
    pub reply_error: Option<(String, String)>,
    pub leftover_procs: usize,
    /// Threads of the kernel process beyond those it had before the cell.
    pub leftover_threads: usize,
    pub truncated: bool,
}
