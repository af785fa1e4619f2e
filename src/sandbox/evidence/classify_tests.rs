//! The classification rules, case by case.

use super::*;
use crate::sandbox::evidence::{signal_name, ExitInfo};

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

/// Evidence to the verdict, with no text involved or text confirmed by
/// the OS: no suggestion, no unverified claim.
fn confirmed_cases(cases: Vec<(Evidence, Verdict)>) {
    for (i, (evidence, want)) in cases.iter().enumerate() {
        let got = classify(evidence);
        assert_eq!(got.verdict, *want, "case {i}: {evidence:?}");
        assert_eq!(got.suggested, None, "case {i}");
        assert!(!got.flags.contains(&Flag::UnverifiedClaim), "case {i}");
    }
}

#[test]
fn a_quiet_execution_is_ok_and_an_exception_an_error() {
    confirmed_cases(vec![
        (Evidence::default(), Verdict::Ok),
        (
            Evidence {
                reply_error: error("ZeroDivisionError", "division by zero"),
                ..Default::default()
            },
            Verdict::Error,
        ),
    ]);
}

/// The harness's timers, the OOM killer and the wait status.
#[test]
fn how_the_kernel_ended_decides() {
    confirmed_cases(vec![
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
        // No limit of a kernel sends SIGXFSZ (it has no file-size rlimit):
        // dying of it is the code's own doing.
        (
            Evidence {
                exit: died(libc::SIGXFSZ),
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
    ]);
}

/// Refused forks and memory limit hits, whatever the text says.
#[test]
fn counters_confirm_limits() {
    confirmed_cases(vec![
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
    ]);
}

/// Full mounts, refused connections and full descriptor tables.
#[test]
fn traces_confirm_limits() {
    confirmed_cases(vec![
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
    ]);
}

#[test]
fn a_harness_failure_is_an_internal_error() {
    confirmed_cases(vec![(
        Evidence {
            harness_failure: true,
            harness_reason: Some(HarnessReason::TimeoutWall),
            ..Default::default()
        },
        Verdict::InternalError,
    )]);
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

/// The lock watchdog kills the kernel itself (no interrupt first): its
/// reason decides over the SIGKILL the kernel died of.
#[test]
fn the_lock_watchdogs_kill_is_a_lock_limit() {
    let e = Evidence {
        harness_reason: Some(HarnessReason::LockLimit),
        exit: died(libc::SIGKILL),
        ..Default::default()
    };
    let got = classify(&e);
    assert_eq!(got.verdict, Verdict::LockLimit);
    assert_eq!(got.flags, vec![Flag::Restarted]);
    assert_eq!(got.fired, vec![Verdict::LockLimit]);
    assert!(Verdict::LockLimit.is_limit() && Verdict::LockLimit.is_kill());
}
