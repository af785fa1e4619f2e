//! The evidence gathered about one execution and the rules that turn it into
//! a verdict. The order follows the judges in the reference: harness failures
//! first, then what the harness itself decided, then how the kernel died,
//! then what the kernel reported while alive.

use serde::{Deserialize, Serialize};

use super::verdict::{Flag, Verdict};

/// Cumulative counters of a kernel's confinement. Zero when unconfined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub oom_kills: u64,
    pub pids_max_events: u64,
    pub cpu_usage_usec: u64,
    pub nr_throttled: u64,
    /// Highest memory use of the group so far (page cache included): a
    /// level, not a count. `None` when unconfined or not reported (cgroup
    /// v2 before Linux 5.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
}

impl Counters {
    /// Per-execution change; counters are sticky for a cgroup's lifetime.
    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            oom_kills: self.oom_kills.saturating_sub(before.oom_kills),
            pids_max_events: self.pids_max_events.saturating_sub(before.pids_max_events),
            cpu_usage_usec: self.cpu_usage_usec.saturating_sub(before.cpu_usage_usec),
            nr_throttled: self.nr_throttled.saturating_sub(before.nr_throttled),
            // A peak cannot be split per execution: the later reading stands.
            memory_peak_bytes: self.memory_peak_bytes,
        }
    }
}

/// Why the harness ended an execution itself (first trigger wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HarnessReason {
    TimeoutWall,
    TimeoutCpu,
    OutputLimit,
    DiskLimit,
}

/// How the kernel process ended, from its wait status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Signal name such as `SIGSEGV`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
}

impl ExitInfo {
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let signal = status.signal();
        ExitInfo {
            code: status.code(),
            signal,
            signal_name: signal.map(signal_name),
        }
    }
}

pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
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
    /// `ename` and `evalue` when the kernel replied with an error.
    pub reply_error: Option<(String, String)>,
    pub leftover_procs: usize,
    pub truncated: bool,
}

const SIGSEGV: i32 = libc::SIGSEGV;
const CRASH_SIGNALS: [i32; 5] = [
    SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// Turns evidence into a verdict and flags.
pub fn classify(e: &Evidence) -> (Verdict, Vec<Flag>) {
    let mut flags = Vec::new();
    if e.truncated {
        flags.push(Flag::OutputTruncated);
    }
    if e.delta.nr_throttled > 0 {
        flags.push(Flag::Throttled);
    }
    if e.leftover_procs > 0 {
        flags.push(Flag::LeftoverProcs);
    }
    if e.killed_by_harness {
        flags.push(Flag::InterruptIgnored);
    }
    if e.killed_by_harness || e.exit.is_some() {
        flags.push(Flag::Restarted);
    }
    let verdict = primary(e);
    flags.sort();
    flags.dedup();
    (verdict, flags)
}

fn primary(e: &Evidence) -> Verdict {
    if e.harness_failure {
        return Verdict::InternalError;
    }
    if let Some(reason) = e.harness_reason {
        // A fork bomb spins until a timer fires; the pid limit it hit is the
        // cause worth reporting.
        if e.delta.pids_max_events > 0
            && matches!(
                reason,
                HarnessReason::TimeoutWall | HarnessReason::TimeoutCpu
            )
        {
            return Verdict::PidsLimit;
        }
        return match reason {
            HarnessReason::TimeoutWall => Verdict::TimeoutWall,
            HarnessReason::TimeoutCpu => Verdict::TimeoutCpu,
            HarnessReason::OutputLimit => Verdict::OutputLimit,
            HarnessReason::DiskLimit => Verdict::DiskLimit,
        };
    }
    if let Some(exit) = &e.exit {
        // Copies of a forking kernel exhaust memory too; the process
        // explosion is the cause.
        if e.delta.pids_max_events > 0 {
            return Verdict::PidsLimit;
        }
        if e.delta.oom_kills > 0 {
            return Verdict::OomKilled;
        }
        return match exit.signal {
            Some(libc::SIGXCPU) => Verdict::TimeoutCpu,
            Some(libc::SIGXFSZ) => Verdict::DiskLimit,
            Some(sig) if CRASH_SIGNALS.contains(&sig) => Verdict::Crash,
            // A SIGKILL nobody in the harness sent, with a pids limit hit,
            // is how a fork bomb usually ends under a memory squeeze.
            Some(libc::SIGKILL) if e.delta.pids_max_events > 0 => Verdict::PidsLimit,
            Some(_) => Verdict::Crash,
            None => Verdict::KernelExit,
        };
    }
    if let Some((ename, evalue)) = &e.reply_error {
        return classify_error(ename, evalue, &e.delta);
    }
    if e.delta.oom_kills > 0 {
        // A child died of OOM while the kernel lived on.
        return Verdict::OomKilled;
    }
    Verdict::Ok
}

fn classify_error(ename: &str, evalue: &str, delta: &Counters) -> Verdict {
    let has = |needle: &str| evalue.contains(needle);
    match ename {
        "MemoryError" => Verdict::MemoryError,
        _ if delta.pids_max_events > 0
            && (ename == "BlockingIOError"
                || has("Resource temporarily unavailable")
                || has("can't start new thread")) =>
        {
            Verdict::PidsLimit
        }
        _ if has("[Errno 27]") || has("File too large") => Verdict::DiskLimit,
        _ if has("[Errno 28]") || has("No space left") || has("[Errno 122]") => Verdict::DiskLimit,
        _ if has("[Errno 24]") || has("Too many open files") => Verdict::FdLimit,
        _ if has("[Errno 101]")
            || has("Network is unreachable")
            || has("[Errno -3]")
            || has("Temporary failure in name resolution")
            || has("[Errno -2]")
            || has("Name or service not known")
            || has("[Errno 99]")
            || has("Cannot assign requested address")
            || (ename == "URLError" && has("unreachable")) =>
        {
            Verdict::NetworkBlocked
        }
        "PermissionError" if has("[Errno 1]") || has("Operation not permitted") => {
            Verdict::PolicyDenied
        }
        _ => Verdict::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn died(sig: i32) -> Option<ExitInfo> {
        Some(ExitInfo {
            code: None,
            signal: Some(sig),
            signal_name: Some(signal_name(sig)),
        })
    }

    #[test]
    fn classification_table() {
        let cases: Vec<(Evidence, Verdict)> = vec![
            (Evidence::default(), Verdict::Ok),
            (
                Evidence {
                    reply_error: Some(("ZeroDivisionError".into(), "division by zero".into())),
                    ..Default::default()
                },
                Verdict::Error,
            ),
            (
                Evidence {
                    harness_reason: Some(HarnessReason::TimeoutWall),
                    exit: died(libc::SIGKILL),
                    ..Default::default()
                },
                Verdict::TimeoutWall,
            ),
            (
                Evidence {
                    exit: died(libc::SIGKILL),
                    delta: Counters {
                        oom_kills: 1,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                Verdict::OomKilled,
            ),
            (
                Evidence {
                    exit: died(libc::SIGSEGV),
                    ..Default::default()
                },
                Verdict::Crash,
            ),
            (
                Evidence {
                    exit: Some(ExitInfo {
                        code: Some(0),
                        signal: None,
                        signal_name: None,
                    }),
                    ..Default::default()
                },
                Verdict::KernelExit,
            ),
            (
                Evidence {
                    reply_error: Some((
                        "BlockingIOError".into(),
                        "[Errno 11] Resource temporarily unavailable".into(),
                    )),
                    delta: Counters {
                        pids_max_events: 40,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                Verdict::PidsLimit,
            ),
            (
                Evidence {
                    reply_error: Some(("OSError".into(), "[Errno 27] File too large".into())),
                    ..Default::default()
                },
                Verdict::DiskLimit,
            ),
            (
                Evidence {
                    reply_error: Some((
                        "OSError".into(),
                        "[Errno 101] Network is unreachable".into(),
                    )),
                    ..Default::default()
                },
                Verdict::NetworkBlocked,
            ),
            (
                Evidence {
                    reply_error: Some(("MemoryError".into(), String::new())),
                    ..Default::default()
                },
                Verdict::MemoryError,
            ),
            (
                Evidence {
                    harness_reason: Some(HarnessReason::TimeoutCpu),
                    killed_by_harness: true,
                    delta: Counters {
                        pids_max_events: 5000,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                Verdict::PidsLimit,
            ),
            (
                Evidence {
                    harness_failure: true,
                    harness_reason: Some(HarnessReason::TimeoutWall),
                    ..Default::default()
                },
                Verdict::InternalError,
            ),
        ];
        for (i, (evidence, want)) in cases.iter().enumerate() {
            assert_eq!(classify(evidence).0, *want, "case {i}: {evidence:?}");
        }
    }

    #[test]
    fn kill_flags() {
        let e = Evidence {
            harness_reason: Some(HarnessReason::TimeoutWall),
            killed_by_harness: true,
            truncated: true,
            ..Default::default()
        };
        let (_, flags) = classify(&e);
        assert_eq!(
            flags,
            vec![
                Flag::Restarted,
                Flag::InterruptIgnored,
                Flag::OutputTruncated
            ]
        );
    }

    #[test]
    fn counter_deltas() {
        let before = Counters {
            oom_kills: 2,
            cpu_usage_usec: 100,
            ..Default::default()
        };
        let after = Counters {
            oom_kills: 3,
            cpu_usage_usec: 250,
            ..Default::default()
        };
        let d = after.since(&before);
        assert_eq!((d.oom_kills, d.cpu_usage_usec), (1, 150));
    }

    #[test]
    fn memory_peak_keeps_the_later_reading() {
        let before = Counters {
            memory_peak_bytes: Some(300),
            ..Default::default()
        };
        let after = Counters {
            memory_peak_bytes: Some(500),
            ..Default::default()
        };
        assert_eq!(after.since(&before).memory_peak_bytes, Some(500));
        let unknown = Counters::default();
        assert_eq!(unknown.since(&before).memory_peak_bytes, None);
    }
}
