//! How an execution ended, named from OS evidence (wait status, cgroup
//! counter deltas, the harness's own timers), never from what the kernel says
//! about itself.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The primary label of one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    /// The code raised an exception (the name is in the outcome's error).
    Error,
    TimeoutWall,
    TimeoutCpu,
    OomKilled,
    MemoryError,
    PidsLimit,
    OutputLimit,
    DiskLimit,
    FdLimit,
    /// The kernel died from a signal (the signal is in the outcome's exit).
    Crash,
    /// The kernel process exited by itself (`os._exit`, `quit()`).
    KernelExit,
    NetworkBlocked,
    PolicyDenied,
    /// The harness failed: could not start, confine, kill or clean up.
    InternalError,
}

impl Verdict {
    pub const ALL: [Verdict; 15] = [
        Verdict::Ok,
        Verdict::Error,
        Verdict::TimeoutWall,
        Verdict::TimeoutCpu,
        Verdict::OomKilled,
        Verdict::MemoryError,
        Verdict::PidsLimit,
        Verdict::OutputLimit,
        Verdict::DiskLimit,
        Verdict::FdLimit,
        Verdict::Crash,
        Verdict::KernelExit,
        Verdict::NetworkBlocked,
        Verdict::PolicyDenied,
        Verdict::InternalError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Error => "error",
            Verdict::TimeoutWall => "timeout_wall",
            Verdict::TimeoutCpu => "timeout_cpu",
            Verdict::OomKilled => "oom_killed",
            Verdict::MemoryError => "memory_error",
            Verdict::PidsLimit => "pids_limit",
            Verdict::OutputLimit => "output_limit",
            Verdict::DiskLimit => "disk_limit",
            Verdict::FdLimit => "fd_limit",
            Verdict::Crash => "crash",
            Verdict::KernelExit => "kernel_exit",
            Verdict::NetworkBlocked => "network_blocked",
            Verdict::PolicyDenied => "policy_denied",
            Verdict::InternalError => "internal_error",
        }
    }

    /// Executions that ended with the harness or the OS killing something.
    pub fn is_kill(self) -> bool {
        matches!(
            self,
            Verdict::TimeoutWall
                | Verdict::TimeoutCpu
                | Verdict::OomKilled
                | Verdict::PidsLimit
                | Verdict::OutputLimit
                | Verdict::Crash
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
                format!(
                    "unknown verdict `{s}`; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Secondary facts about an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// The kernel was restarted; its variables are gone.
    Restarted,
    /// The interrupt did not end the execution; a kill was needed.
    InterruptIgnored,
    /// Processes of the kernel were still alive after the execution.
    LeftoverProcs,
    Zombies,
    OutputTruncated,
    /// The CPU quota throttled the kernel.
    Throttled,
    /// The kernel ran without confinement (`--unsafe-no-sandbox`).
    Unconfined,
}

impl Flag {
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::Restarted => "restarted",
            Flag::InterruptIgnored => "interrupt_ignored",
            Flag::LeftoverProcs => "leftover_procs",
            Flag::Zombies => "zombies",
            Flag::OutputTruncated => "output_truncated",
            Flag::Throttled => "throttled",
            Flag::Unconfined => "unconfined",
        }
    }
}

impl FromStr for Flag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Flag::Restarted,
            Flag::InterruptIgnored,
            Flag::LeftoverProcs,
            Flag::Zombies,
            Flag::OutputTruncated,
            Flag::Throttled,
            Flag::Unconfined,
        ]
        .into_iter()
        .find(|f| f.as_str() == s)
        .ok_or_else(|| format!("unknown flag `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in Verdict::ALL {
            assert_eq!(v.as_str().parse::<Verdict>().unwrap(), v);
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
        }
        assert!("nope".parse::<Verdict>().is_err());
        assert_eq!("zombies".parse::<Flag>().unwrap(), Flag::Zombies);
    }
}
