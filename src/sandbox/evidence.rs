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

use serde::{Deserialize, Serialize};

use super::verdict::{Flag, Verdict};

/// Cumulative counters of a kernel's confinement. Zero when unconfined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub oom_kills: u64,
    /// Times the memory use reached the limit (v1 `memory.failcnt`, v2
    /// `memory.events` `max`).
    #[serde(default)]
    pub memory_limit_hits: u64,
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
            memory_limit_hits: self
                .memory_limit_hits
                .saturating_sub(before.memory_limit_hits),
            pids_max_events: self.pids_max_events.saturating_sub(before.pids_max_events),
            cpu_usage_usec: self.cpu_usage_usec.saturating_sub(before.cpu_usage_usec),
            nr_throttled: self.nr_throttled.saturating_sub(before.nr_throttled),
            // A peak cannot be split per execution: the later reading stands.
            memory_peak_bytes: self.memory_peak_bytes,
        }
    }
}

/// What the kernel's confinement shows beyond its cgroup, read from outside
/// the kernel before and after each execution (too costly to poll). Zero
/// when unconfined: there is then nothing that could confirm a claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traces {
    /// Refused network attempts: the refusal counters of the kernel's
    /// network namespace (see `netns.rs`).
    pub net_refusals: u64,
    /// Processes of the kernel whose descriptor table reached
    /// RLIMIT_NOFILE (see `fdtable.rs`).
    pub full_fd_tables: u64,
    /// Private tmpfs mounts of the kernel that are full (see `tmpfs.rs`): a
    /// level, after the execution.
    pub full_mounts: u64,
    /// Mounts that became full during the execution (a delta).
    #[serde(default)]
    pub filled_mounts: u64,
}

impl Traces {
    /// Per-execution change; `full_mounts` keeps the later level.
    pub fn since(&self, before: &Traces) -> Traces {
        Traces {
            net_refusals: self.net_refusals.saturating_sub(before.net_refusals),
            full_fd_tables: self.full_fd_tables.saturating_sub(before.full_fd_tables),
            full_mounts: self.full_mounts,
            filled_mounts: self.full_mounts.saturating_sub(before.full_mounts),
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
    /// Per-execution change of the traces outside the cgroup.
    pub traces: Traces,
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

/// What the evidence says about one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    pub verdict: Verdict,
    pub flags: Vec<Flag>,
    /// Every limit that fired, the verdict included when it is one; sorted
    /// by name, deduplicated.
    pub fired: Vec<Verdict>,
    /// The limit the error's text claims when the evidence does not confirm
    /// it (the verdict is then `error`).
    pub suggested: Option<Verdict>,
}

/// Turns evidence into a verdict, flags and the limits that fired.
pub fn classify(e: &Evidence) -> Classification {
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
    let suggested = match (&e.reply_error, verdict) {
        (Some((ename, evalue)), Verdict::Error) => claim(ename, evalue),
        _ => None,
    };
    if suggested.is_some() {
        flags.push(Flag::UnverifiedClaim);
    }
    flags.sort();
    flags.dedup();
    Classification {
        verdict,
        flags,
        fired: fired(e, verdict),
        suggested,
    }
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
        return harness_verdict(reason);
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
            Some(_) => Verdict::Crash,
            None => Verdict::KernelExit,
        };
    }
    if let Some((ename, evalue)) = &e.reply_error {
        return confirmed(claim(ename, evalue), &e.delta, &e.traces);
    }
    if e.delta.oom_kills > 0 {
        // A child died of OOM while the kernel lived on.
        return Verdict::OomKilled;
    }
    Verdict::Ok
}

fn harness_verdict(reason: HarnessReason) -> Verdict {
    match reason {
        HarnessReason::TimeoutWall => Verdict::TimeoutWall,
        HarnessReason::TimeoutCpu => Verdict::TimeoutCpu,
        HarnessReason::OutputLimit => Verdict::OutputLimit,
        HarnessReason::DiskLimit => Verdict::DiskLimit,
    }
}

/// The verdict of an error reply: a refused fork in this execution makes
/// it `pids_limit` whatever the text; a claimed limit stands only with its
/// evidence; anything else is the code's own `error`.
fn confirmed(claim: Option<Verdict>, d: &Counters, t: &Traces) -> Verdict {
    if d.pids_max_events > 0 {
        return Verdict::PidsLimit;
    }
    let evidence = match claim {
        Some(Verdict::MemoryError) => d.memory_limit_hits > 0 || d.oom_kills > 0,
        Some(Verdict::DiskLimit) => t.full_mounts > 0,
        Some(Verdict::FdLimit) => t.full_fd_tables > 0,
        Some(Verdict::NetworkBlocked) => t.net_refusals > 0,
        // EPERM is the OS refusing (capabilities, the syscall filter);
        // `policy_denied` is only ever retrace's own package policy.
        _ => false,
    };
    match claim {
        Some(v) if evidence => v,
        _ => Verdict::Error,
    }
}

/// The limit an exception's name and text point at. Code can write any
/// text, so this never decides a verdict on its own.
fn claim(ename: &str, evalue: &str) -> Option<Verdict> {
    let has = |needle: &str| evalue.contains(needle);
    if ename == "MemoryError" {
        Some(Verdict::MemoryError)
    } else if ename == "BlockingIOError"
        || has("Resource temporarily unavailable")
        || has("can't start new thread")
    {
        Some(Verdict::PidsLimit)
    } else if has("[Errno 27]")
        || has("File too large")
        || has("[Errno 28]")
        || has("No space left")
        || has("[Errno 122]")
    {
        Some(Verdict::DiskLimit)
    } else if has("[Errno 24]") || has("Too many open files") {
        Some(Verdict::FdLimit)
    } else if has("[Errno 101]")
        || has("Network is unreachable")
        || has("[Errno -3]")
        || has("Temporary failure in name resolution")
        || has("[Errno -2]")
        || has("Name or service not known")
        || has("[Errno 99]")
        || has("Cannot assign requested address")
        || (ename == "URLError" && has("unreachable"))
    {
        Some(Verdict::NetworkBlocked)
    } else if ename == "PermissionError" && (has("[Errno 1]") || has("Operation not permitted")) {
        Some(Verdict::PolicyDenied)
    } else {
        None
    }
}

/// Every limit with evidence that it fired in this execution.
fn fired(e: &Evidence, verdict: Verdict) -> Vec<Verdict> {
    if verdict == Verdict::InternalError {
        return Vec::new();
    }
    let mut fired = Vec::new();
    if let Some(reason) = e.harness_reason {
        fired.push(harness_verdict(reason));
    }
    if e.delta.oom_kills > 0 {
        fired.push(Verdict::OomKilled);
    }
    if e.delta.pids_max_events > 0 {
        fired.push(Verdict::PidsLimit);
    }
    if e.traces.filled_mounts > 0 {
        fired.push(Verdict::DiskLimit);
    }
    if e.traces.net_refusals > 0 {
        fired.push(Verdict::NetworkBlocked);
    }
    match e.exit.as_ref().and_then(|x| x.signal) {
        Some(libc::SIGXCPU) => fired.push(Verdict::TimeoutCpu),
        Some(libc::SIGXFSZ) => fired.push(Verdict::DiskLimit),
        _ => {}
    }
    if verdict.is_limit() {
        fired.push(verdict);
    }
    fired.sort_by_key(|v| v.as_str());
    fired.dedup();
    fired
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

    fn error(ename: &str, evalue: &str) -> Option<(String, String)> {
        Some((ename.into(), evalue.into()))
    }

    fn counters(f: impl FnOnce(&mut Counters)) -> Counters {
        let mut c = Counters::default();
        f(&mut c);
        c
    }

    fn traces(f: impl FnOnce(&mut Traces)) -> Traces {
        let mut t = Traces::default();
        f(&mut t);
        t
    }

    /// Evidence to the verdict, with no text involved or text confirmed
    /// by the OS.
    #[test]
    fn classification_table() {
        let cases: Vec<(Evidence, Verdict)> = vec![
            (Evidence::default(), Verdict::Ok),
            (
                Evidence {
                    reply_error: error("ZeroDivisionError", "division by zero"),
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
                    delta: counters(|c| c.oom_kills = 1),
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
                    reply_error: error(
                        "BlockingIOError",
                        "[Errno 11] Resource temporarily unavailable",
                    ),
                    delta: counters(|c| c.pids_max_events = 40),
                    ..Default::default()
                },
                Verdict::PidsLimit,
            ),
            // A refused fork decides, whatever the text.
            (
                Evidence {
                    reply_error: error("ValueError", "no workers"),
                    delta: counters(|c| c.pids_max_events = 1),
                    ..Default::default()
                },
                Verdict::PidsLimit,
            ),
            (
                Evidence {
                    reply_error: error("OSError", "[Errno 28] No space left on device"),
                    traces: traces(|t| t.full_mounts = 1),
                    ..Default::default()
                },
                Verdict::DiskLimit,
            ),
            (
                Evidence {
                    reply_error: error("OSError", "[Errno 101] Network is unreachable"),
                    traces: traces(|t| t.net_refusals = 1),
                    ..Default::default()
                },
                Verdict::NetworkBlocked,
            ),
            (
                Evidence {
                    reply_error: error(
                        "gaierror",
                        "[Errno -3] Temporary failure in name resolution",
                    ),
                    traces: traces(|t| t.net_refusals = 2),
                    ..Default::default()
                },
                Verdict::NetworkBlocked,
            ),
            (
                Evidence {
                    reply_error: error("OSError", "[Errno 24] Too many open files: '/dev/null'"),
                    traces: traces(|t| t.full_fd_tables = 1),
                    ..Default::default()
                },
                Verdict::FdLimit,
            ),
            (
                Evidence {
                    reply_error: error("MemoryError", ""),
                    delta: counters(|c| c.memory_limit_hits = 3),
                    ..Default::default()
                },
                Verdict::MemoryError,
            ),
            (
                Evidence {
                    harness_reason: Some(HarnessReason::TimeoutCpu),
                    killed_by_harness: true,
                    delta: counters(|c| c.pids_max_events = 5000),
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
            let got = classify(evidence);
            assert_eq!(got.verdict, *want, "case {i}: {evidence:?}");
            assert_eq!(got.suggested, None, "case {i}");
            assert!(!got.flags.contains(&Flag::UnverifiedClaim), "case {i}");
        }
    }

    /// Text the code can write, without the OS evidence: `error`, the
    /// claim kept as a suggestion and flagged.
    #[test]
    fn forged_text_is_an_unverified_claim() {
        let cases = [
            (
                "OSError",
                "[Errno 101] Network is unreachable",
                Verdict::NetworkBlocked,
            ),
            (
                "gaierror",
                "[Errno -3] Temporary failure in name resolution",
                Verdict::NetworkBlocked,
            ),
            (
                "OSError",
                "[Errno 99] Cannot assign requested address",
                Verdict::NetworkBlocked,
            ),
            ("MemoryError", "", Verdict::MemoryError),
            (
                "OSError",
                "[Errno 28] No space left on device",
                Verdict::DiskLimit,
            ),
            ("OSError", "[Errno 27] File too large", Verdict::DiskLimit),
            (
                "OSError",
                "[Errno 24] Too many open files",
                Verdict::FdLimit,
            ),
            (
                "BlockingIOError",
                "[Errno 11] Resource temporarily unavailable",
                Verdict::PidsLimit,
            ),
            ("RuntimeError", "can't start new thread", Verdict::PidsLimit),
            (
                "PermissionError",
                "[Errno 1] Operation not permitted",
                Verdict::PolicyDenied,
            ),
        ];
        for (ename, evalue, claimed) in cases {
            let e = Evidence {
                reply_error: error(ename, evalue),
                ..Default::default()
            };
            let got = classify(&e);
            assert_eq!(got.verdict, Verdict::Error, "{ename}: {evalue}");
            assert_eq!(got.suggested, Some(claimed), "{ename}: {evalue}");
            assert_eq!(got.flags, vec![Flag::UnverifiedClaim], "{ename}: {evalue}");
            assert!(got.fired.is_empty(), "{ename}: {evalue}");
        }
        // Evidence of another limit confirms nothing: a full disk does not
        // make a network claim true, nor page-cache reclaim an fd claim.
        let e = Evidence {
            reply_error: error("OSError", "[Errno 101] Network is unreachable"),
            delta: counters(|c| c.memory_limit_hits = 9),
            traces: traces(|t| {
                t.full_mounts = 1;
                t.full_fd_tables = 1;
            }),
            ..Default::default()
        };
        let got = classify(&e);
        assert_eq!(
            (got.verdict, got.suggested),
            (Verdict::Error, Some(Verdict::NetworkBlocked))
        );
        // A MemoryError with a child OOM-killed in the same execution is real.
        let e = Evidence {
            reply_error: error("MemoryError", ""),
            delta: counters(|c| c.oom_kills = 1),
            ..Default::default()
        };
        assert_eq!(classify(&e).verdict, Verdict::MemoryError);
    }

    #[test]
    fn every_limit_that_fired_is_listed() {
        // Children OOM-killed while the parent sleeps into the wall timeout.
        let e = Evidence {
            harness_reason: Some(HarnessReason::TimeoutWall),
            killed_by_harness: true,
            exit: died(libc::SIGKILL),
            delta: counters(|c| c.oom_kills = 3),
            ..Default::default()
        };
        let got = classify(&e);
        assert_eq!(got.verdict, Verdict::TimeoutWall);
        assert_eq!(got.fired, vec![Verdict::OomKilled, Verdict::TimeoutWall]);
        // Output cap and a fork storm racing the OOM killer.
        let e = Evidence {
            harness_reason: Some(HarnessReason::OutputLimit),
            delta: counters(|c| {
                c.oom_kills = 1;
                c.pids_max_events = 7;
            }),
            ..Default::default()
        };
        let got = classify(&e);
        assert_eq!(got.verdict, Verdict::OutputLimit);
        assert_eq!(
            got.fired,
            vec![Verdict::OomKilled, Verdict::OutputLimit, Verdict::PidsLimit]
        );
        // Pids events during a CPU timeout: the verdict names the cause,
        // the list keeps both.
        let e = Evidence {
            harness_reason: Some(HarnessReason::TimeoutCpu),
            delta: counters(|c| c.pids_max_events = 2),
            ..Default::default()
        };
        let got = classify(&e);
        assert_eq!(got.verdict, Verdict::PidsLimit);
        assert_eq!(got.fired, vec![Verdict::PidsLimit, Verdict::TimeoutCpu]);
        // Code that caught ENOSPC and a refused connect ends ok; both fired.
        let e = Evidence {
            traces: traces(|t| {
                t.full_mounts = 1;
                t.filled_mounts = 1;
                t.net_refusals = 1;
            }),
            ..Default::default()
        };
        let got = classify(&e);
        assert_eq!(got.verdict, Verdict::Ok);
        assert_eq!(got.fired, vec![Verdict::DiskLimit, Verdict::NetworkBlocked]);
        // A mount full since an earlier execution did not fire in this one.
        let e = Evidence {
            traces: traces(|t| t.full_mounts = 1),
            ..Default::default()
        };
        assert!(classify(&e).fired.is_empty());
        // The verdict itself when it is a limit; nothing for a plain error.
        let e = Evidence {
            reply_error: error("OSError", "[Errno 24] Too many open files"),
            traces: traces(|t| t.full_fd_tables = 1),
            ..Default::default()
        };
        assert_eq!(classify(&e).fired, vec![Verdict::FdLimit]);
        let e = Evidence {
            reply_error: error("KeyError", "'x'"),
            ..Default::default()
        };
        assert!(classify(&e).fired.is_empty());
    }

    #[test]
    fn kill_flags() {
        let e = Evidence {
            harness_reason: Some(HarnessReason::TimeoutWall),
            killed_by_harness: true,
            truncated: true,
            ..Default::default()
        };
        let flags = classify(&e).flags;
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
    fn trace_deltas() {
        let before = Traces {
            net_refusals: 2,
            full_fd_tables: 1,
            full_mounts: 1,
            filled_mounts: 0,
        };
        let after = Traces {
            net_refusals: 5,
            full_fd_tables: 1,
            full_mounts: 2,
            filled_mounts: 0,
        };
        assert_eq!(
            after.since(&before),
            Traces {
                net_refusals: 3,
                full_fd_tables: 0,
                full_mounts: 2,
                filled_mounts: 1,
            }
        );
        // Processes gone since: no negative change.
        assert_eq!(Traces::default().since(&after).full_fd_tables, 0);
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
