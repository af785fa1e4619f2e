//! The rules that turn evidence into a verdict, in the judges' order.

use super::Evidence;
use super::{Counters, HarnessReason, Traces};
use crate::sandbox::verdict::{Flag, Verdict};

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
        HarnessReason::LockLimit => Verdict::LockLimit,
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
    if e.exit.as_ref().and_then(|x| x.signal) == Some(libc::SIGXCPU) {
        fired.push(Verdict::TimeoutCpu);
    }
    if verdict.is_limit() {
        fired.push(verdict);
    }
    fired.sort_by_key(|v| v.as_str());
    fired.dedup();
    fired
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
