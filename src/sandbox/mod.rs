//! Confinement of kernel processes.
//!
//! The kernel launcher talks to confinement through two traits: a
//! [`Sandbox`] creates a [`Jail`] for each kernel *before* its process exists;
//! the jail builds the command (placing the child before it execs), reads the
//! counters the verdict is made from, kills every process of the kernel and
//! removes what it created.

pub mod cgroup;
mod confined;
pub mod evidence;
mod fdtable;
pub mod fork_plan;
mod identity;
pub mod init;
mod isolate;
pub mod limits;
pub mod locks;
mod loopback;
mod netns;
mod resolver;
pub mod seccomp;
mod tmpfs;
pub mod unconfined;
pub mod verdict;

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use cgroup::{harness_alive, made_at, KernelCgroup};
pub use confined::Confined;
pub use evidence::{classify, Classification, Counters, Evidence, ExitInfo, HarnessReason, Traces};
pub use fork_plan::{Adoption, ForkPlan};
pub use isolate::PTY_MAX;
pub use limits::SandboxLimits;
pub use resolver::UNROUTABLE_NAMESERVER;
pub use unconfined::Unconfined;
pub use verdict::{Flag, Verdict};

/// The directories of one kernel, created by the launcher.
#[derive(Debug, Clone)]
pub struct KernelLayout {
    /// Short unique id, also used in cgroup and directory names.
    pub id: String,
    /// 0700 directory holding the connection file and the ipc sockets.
    pub runtime_dir: PathBuf,
    /// The kernel's working directory (task files are copied here).
    pub work_dir: PathBuf,
    /// An ephemeral HOME for the kernel.
    pub home_dir: PathBuf,
}

/// The program a jail must run: the image's Python with ipykernel.
#[derive(Debug, Clone)]
pub struct LaunchCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The complete environment; nothing of the caller's is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// The image directory (read-only inside a confined kernel).
    pub image_dir: PathBuf,
    /// More directories visible read-only (the package store of the
    /// `dynamic` strategy: packages published later appear in it too).
    pub ro_binds: Vec<PathBuf>,
    /// Keep the host's network. Only the package installer gets it; a
    /// kernel never does.
    pub network: bool,
}

/// How a kernel's processes were ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KillReport {
    /// Which mechanism ended them (e.g. `cgroup.kill`, `freezer`, `killpg`).
    pub method: String,
    /// Milliseconds from the kill decision until no process was left.
    pub kill_ms: f64,
    /// Processes still alive afterwards (should be zero).
    pub survivors: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("confinement is not available: {reason}\n{fix}")]
    Unavailable { reason: String, fix: String },
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

impl SandboxError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io(crate::util::IoError::new(context, source))
    }
}

/// Describes the confinement in effect, for every run's outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxInfo {
    pub confined: bool,
    /// e.g. `cgroup-v1-hybrid`, `cgroup-v2`, `none`.
    pub mode: String,
    pub notes: Vec<String>,
}

/// Creates confinement for kernels.
pub trait Sandbox: Send + Sync {
    /// Creates the confinement of one kernel before its process exists.
    /// `limits` are this kernel's: one sandbox serves kernels with
    /// different limits (the conformance corpus overrides them per case).
    fn jail(
        &self,
        layout: &KernelLayout,
        limits: &SandboxLimits,
    ) -> Result<Box<dyn Jail>, SandboxError>;
    fn info(&self) -> SandboxInfo;
    /// A cgroup of its own (no memory or CPU limit to speak of) for a
    /// helper process that runs as root on the host beside the kernels:
    /// the zygote. `None` when this sandbox has no cgroups.
    fn helper_group(&self, _id: &str) -> Result<Option<KernelCgroup>, SandboxError> {
        Ok(None)
    }
}

/// The confinement of one kernel.
pub trait Jail: Send + Sync {
    /// The command that starts the kernel, arranged so that the child is
    /// confined before it execs.
    fn command(
        &self,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<tokio::process::Command, SandboxError>;
    /// The zygote start: a command whose PID 1 waits for a kernel forked
    /// into the jail from outside, and the plan the forker applies. `None`
    /// when this jail cannot adopt a kernel (then the cold path is used).
    fn adopt(
        &self,
        _launch: &LaunchCommand,
        _layout: &KernelLayout,
    ) -> Result<Option<Adoption>, SandboxError> {
        Ok(None)
    }
    /// Current cumulative counters; verdicts use per-execution deltas.
    /// Cheap: polled during an execution.
    fn counters(&self) -> Counters;
    /// What the kernel's namespaces show (network refusals, full tmpfs
    /// mounts, full descriptor tables), read once before and once after
    /// an execution. Nothing without confinement.
    fn traces(&self) -> Traces {
        Traces::default()
    }
    /// Kills every process of the kernel and waits until none is left.
    /// `pid` is the launched process.
    fn kill_all(&self, pid: Option<i32>) -> KillReport;
    /// Raises the CPU weight of the kernel's group, and of retrace's
    /// directories above it, until the guard is dropped: a kernel that is
    /// starting runs no task code yet, and the model's generation threads
    /// beside it would otherwise stretch its start. Nothing to raise
    /// without a group.
    fn favour_start(&self) -> Box<dyn Send> {
        Box::new(())
    }
    /// Processes of the kernel still alive (zombies excluded).
    fn live_processes(&self) -> Vec<i32>;
    /// Removes what the jail created. Only called once nothing is alive.
    fn release(&self) -> Result<(), SandboxError>;
    /// The uid the kernel runs as (`None` unconfined).
    fn uid(&self) -> Option<u32>;
    /// The gid the kernel runs as (`None` unconfined).
    fn gid(&self) -> Option<u32>;
}

/// The sandbox; fails closed: without `unconfined` it is confinement or an
/// error saying why it is impossible. `init` is retrace's own binary, which
/// runs as PID 1 of each kernel's PID namespace.
pub fn open(
    unconfined: bool,
    init: std::path::PathBuf,
) -> Result<std::sync::Arc<dyn Sandbox>, SandboxError> {
    if unconfined {
        return Ok(std::sync::Arc::new(Unconfined));
    }
    Ok(std::sync::Arc::new(Confined::open(init)?))
}
