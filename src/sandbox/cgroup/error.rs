//! What can go wrong in the cgroup layer. Every variant names the cgroup
//! path and the interface file or directory concerned.
//!
//! As with [`IoError`], an OS error is part of the message and
//! deliberately not a `source()`: a kernel start's outcome records the
//! message alone, and a printed error chain names the cause once.

use std::io;
use std::path::PathBuf;

use crate::util::IoError;

/// Why a limit on swap cannot be had.
const SWAP_FIX: &str = "swap is on but swap accounting is off, so the group could swap \
                        past its memory limit; boot with swapaccount=1 or turn swap off";

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// One write(2) of an interface file failed (ENOENT: no such feature).
    #[error("cgroup {}: writing {value:?}: {cause}", file.display())]
    Write {
        file: PathBuf,
        value: String,
        cause: io::Error,
    },
    /// A file written a moment ago could not be read back.
    #[error("cgroup {}: reading back: {cause}", file.display())]
    ReadBack { file: PathBuf, cause: io::Error },
    /// The kernel rounded or ignored a value: the limit did not stick.
    #[error("cgroup {}: read back {got:?}, expected {expected:?}", file.display())]
    Mismatch {
        file: PathBuf,
        got: String,
        expected: String,
    },
    /// Swap is on and the group has no swap limit file.
    #[error("cgroup {}: missing: {SWAP_FIX}", file.display())]
    NoSwapLimit { file: PathBuf },
    /// v1: `oom_kill_disable` stayed on after writing 0.
    #[error("cgroup {}: the OOM killer is still disabled", file.display())]
    OomKillerDisabled { file: PathBuf },
    /// v2: writing `cgroup.subtree_control` failed; `hint` says why.
    #[error("cgroup {}: writing {request:?}: {cause}{hint}", file.display())]
    Delegate {
        file: PathBuf,
        request: String,
        cause: io::Error,
        hint: String,
    },
    /// v2: controllers still off after enabling them.
    #[error("cgroup {}: controllers not enabled after writing: {}", file.display(), missing.join(" "))]
    NotDelegated { file: PathBuf, missing: Vec<String> },
    #[error("cgroup {}: mkdir: {cause}", dir.display())]
    Mkdir { dir: PathBuf, cause: io::Error },
    /// A group that exists already could hold processes we did not start.
    #[error("cgroup {}: already exists (kernel ids must be unique)", dir.display())]
    Exists { dir: PathBuf },
    #[error("cgroup {}: rmdir: {cause}", dir.display())]
    Rmdir { dir: PathBuf, cause: io::Error },
    #[error("cgroup {}: invalid kernel id {id:?}", dir.display())]
    InvalidId { dir: PathBuf, id: String },
    #[error(
        "cgroup {}: memory and pids limits must be positive (memory at least one page)",
        dir.display()
    )]
    NoLimit { dir: PathBuf },
    /// Detection: neither cgroup nor cgroup2 at the mount root.
    #[error("no cgroup filesystem is mounted at {}", root.display())]
    NotMounted { root: PathBuf },
    /// Detection: v1 without some controller retrace needs.
    #[error("cgroup v1 controllers not mounted: {}", missing.join(", "))]
    ControllersMissing { missing: Vec<&'static str> },
    /// Reading `/proc/self/mountinfo` or `/proc/self/cgroup`.
    #[error(transparent)]
    Proc(#[from] IoError),
}
