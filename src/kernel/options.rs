//! The settings of a kernel session and of one execution, and what a live
//! kernel says about itself.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::capture::OutputCap;
use super::env::KernelEnv;
use crate::sandbox::SandboxLimits;

/// Session-wide settings.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// How long a kernel may take to answer `kernel_info_request`.
    pub startup_timeout: Duration,
    /// How long an interrupted execution may take to stop before the kill.
    pub interrupt_grace: Duration,
    pub output_cap: OutputCap,
    /// CPU time per execution, read from the jail's counters; `None` when
    /// the jail has no CPU accounting.
    pub cpu_time: Option<Duration>,
    /// Also wait for a pipelined `comm_info` probe before an execution
    /// counts as complete, so code that forges its own reply and idle (it
    /// holds the HMAC key) cannot end it early. The kernel answers it at
    /// its dispatcher without status messages (`probe.py`): about 0.3 ms
    /// per execution; only benchmarks of the bare protocol turn it off.
    pub verify_completion: bool,
    /// The limits of the kernel's jail (memory, processes, CPU share, disk,
    /// CPU-time backstop); ignored by an unconfined sandbox.
    pub limits: SandboxLimits,
    /// Cold (exec a new interpreter) or forked from the image's zygote.
    pub start: KernelStart,
    /// The user's variables, added to the environment retrace makes.
    pub env: KernelEnv,
}

impl KernelOptions {
    /// Options that enforce `limits`: the output caps always, CPU time only
    /// when the kernel is confined (it needs the cgroup's accounting).
    pub fn enforcing(limits: &SandboxLimits, confined: bool) -> Self {
        KernelOptions {
            limits: *limits,
            output_cap: OutputCap {
                bytes: limits.output_cap_bytes,
                messages: limits.output_cap_messages,
            },
            cpu_time: confined.then_some(limits.cpu_time),
            ..Default::default()
        }
    }
}

impl Default for KernelOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            interrupt_grace: Duration::from_secs(2),
            output_cap: OutputCap::default(),
            cpu_time: None,
            verify_completion: true,
            limits: SandboxLimits::default(),
            start: KernelStart::default(),
            env: KernelEnv::default(),
        }
    }
}

/// Per-execution settings.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Wall-clock limit of this execution.
    pub timeout: Duration,
    /// Where images are written; `None` keeps them only in the outcome.
    pub artifact_dir: Option<PathBuf>,
    /// File name prefix of this execution's artifacts.
    pub artifact_prefix: String,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            artifact_dir: None,
            artifact_prefix: "out".into(),
        }
    }
}

/// What a live kernel said about itself at startup.
#[derive(Debug, Clone, Default)]
pub struct KernelBanner {
    pub implementation: String,
    pub language_version: String,
    /// The kernel installed retrace's probe itself before it answered (a
    /// forked kernel), so no installing cell was sent.
    pub probe_preinstalled: bool,
}

/// How kernels are started.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum KernelStart {
    /// A new interpreter per kernel (exec), importing everything itself.
    Cold,
    /// Forked from the image's zygote; cold when the zygote cannot serve
    /// and for unconfined kernels.
    #[default]
    Zygote,
}

impl KernelStart {
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStart::Cold => "cold",
            KernelStart::Zygote => "zygote",
        }
    }
}

impl std::str::FromStr for KernelStart {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "cold" => Ok(KernelStart::Cold),
            "zygote" => Ok(KernelStart::Zygote),
            other => Err(format!("unknown kernel start {other:?} (cold or zygote)")),
        }
    }
}

impl std::fmt::Display for KernelStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_paths_parse() {
        assert_eq!("cold".parse::<KernelStart>(), Ok(KernelStart::Cold));
        assert_eq!("zygote".parse::<KernelStart>(), Ok(KernelStart::Zygote));
        assert!("warm".parse::<KernelStart>().is_err());
        assert_eq!(KernelStart::default(), KernelStart::Zygote);
    }
}
