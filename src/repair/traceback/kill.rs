//! The plain statement of why the harness ended an execution.

use std::time::Duration;

use crate::kernel::Outcome;
use crate::sandbox::{SandboxLimits, Verdict};
use crate::util::units::format_bytes;

fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The sentence added when the kernel lost its state.
pub const STATE_LOST: &str =
    "The kernel was restarted; your variables are gone — redefine everything you need.";

/// A plain statement of why an execution was ended, for the verdicts that
/// are not a plain exception, and of every other limit that fired in it.
/// `None` for `ok` and `error` unless a limit fired or the kernel was
/// restarted (then only those sentences).
pub fn kill_message(outcome: &Outcome, limits: &SandboxLimits) -> Option<String> {
    let mem = format_bytes(limits.memory_bytes);
    let message = match outcome.verdict {
        Verdict::Ok | Verdict::Error => None,
        Verdict::TimeoutWall => Some(format!(
            "Your code did not finish within {} of wall time and was stopped. Make it faster \
             (avoid long loops and sleeps) or compute less.",
            fmt_duration(limits.timeout)
        )),
        Verdict::TimeoutCpu => Some(format!(
            "Your code used more than {} of CPU time and was stopped. Use a faster algorithm \
             or vectorised operations.",
            fmt_duration(limits.cpu_time)
        )),
        Verdict::OomKilled => Some(format!(
            "Your code exceeded the memory limit of {mem} and was killed. Use less memory \
             (smaller arrays, process data in chunks)."
        )),
        Verdict::MemoryError => Some(format!(
            "Your code ran out of memory (MemoryError): the memory limit is {mem}. Use less memory."
        )),
        Verdict::PidsLimit => Some(format!(
            "Your code started too many processes or threads (limit {}). Do not start \
             processes or thread pools.",
            limits.pids
        )),
        Verdict::OutputLimit => Some(format!(
            "Your code printed more than {} of output; it was cut and the execution was \
             stopped. Print only what you need (summaries, not whole tables or long loops).",
            format_bytes(limits.output_cap_bytes)
        )),
        Verdict::DiskLimit => Some(format!(
            "Your code wrote more than the disk limit of {} (for files in the working \
             directory and /tmp). Write less data.",
            format_bytes(limits.disk_bytes)
        )),
        Verdict::FdLimit => Some(
            "Your code opened too many files at once. Close files when done (use `with open(...)`)."
                .to_string(),
        ),
        Verdict::LockLimit => Some(format!(
            "Your code's processes held more than {} file locks and were killed. Lock whole \
             files, not many byte ranges, and release locks when done.",
            crate::sandbox::locks::LOCKS_PER_KERNEL
        )),
        Verdict::Crash => {
            let how = outcome
                .exit
                .as_ref()
                .and_then(|e| {
                    e.signal_name
                        .clone()
                        .or_else(|| e.signal.map(|s| format!("signal {s}")))
                })
                .map(|s| format!(" with {s}"))
                .unwrap_or_default();
            Some(format!(
                "The Python process crashed{how}. Avoid the operation that crashed it \
                 (e.g. ctypes, huge recursion, broken native calls)."
            ))
        }
        Verdict::KernelExit => {
            let code = outcome
                .exit
                .as_ref()
                .and_then(|e| e.code)
                .map(|c| format!(" (code {c})"))
                .unwrap_or_default();
            Some(format!(
                "The Python process exited{code}. Do not call exit(), quit(), sys.exit() or os._exit()."
            ))
        }
        Verdict::NetworkBlocked => Some(
            "Your code tried to use the network: there is no network access in this sandbox. \
             Use only the files in the working directory."
                .to_string(),
        ),
        Verdict::PolicyDenied => Some(
            "Your code did something this sandbox does not allow (e.g. installing packages). \
             Use only the packages that are available."
                .to_string(),
        ),
        Verdict::CodeTooLarge => Some(match &outcome.code_too_large {
            Some(refused) => refused.message(),
            None => "Your code was too large to run. Send shorter code.".to_string(),
        }),
        Verdict::InternalError => Some(
            "The execution failed because of a problem in the evaluation harness, not in your \
             code. Run your code again."
                .to_string(),
        ),
    };
    // The package policy's own words name what is available.
    let message = match (&outcome.policy, message) {
        (Some(policy), Some(_)) if outcome.verdict == Verdict::PolicyDenied => Some(policy.clone()),
        (Some(policy), Some(m)) => Some(format!("{policy}\n{m}")),
        (Some(policy), None) => Some(policy.clone()),
        (None, m) => m,
    };
    let message = match (message, also_reached(outcome)) {
        (Some(m), Some(also)) => Some(format!("{m}\n{also}")),
        (m, also) => m.or(also),
    };
    match (message, outcome.state_lost) {
        (Some(m), true) => Some(format!("{m}\n{STATE_LOST}")),
        (Some(m), false) => Some(m),
        (None, true) => Some(STATE_LOST.to_string()),
        (None, false) => None,
    }
}

/// The limits that fired besides the verdict, in words.
fn also_reached(outcome: &Outcome) -> Option<String> {
    let others: Vec<&str> = outcome
        .fired
        .iter()
        .filter(|&&v| v != outcome.verdict)
        .map(|&v| limit_words(v))
        .collect();
    if others.is_empty() {
        return None;
    }
    let lead = if outcome.verdict.is_limit() {
        "Also reached"
    } else {
        "Limits reached"
    };
    Some(format!("{lead}: {}.", others.join(", ")))
}

fn limit_words(v: Verdict) -> &'static str {
    match v {
        Verdict::TimeoutWall => "the wall-time limit",
        Verdict::TimeoutCpu => "the CPU-time limit",
        Verdict::OomKilled => "the memory limit (a process was killed)",
        Verdict::MemoryError => "the memory limit",
        Verdict::PidsLimit => "the process and thread limit",
        Verdict::OutputLimit => "the output limit",
        Verdict::DiskLimit => "the disk limit",
        Verdict::FdLimit => "the open-file limit",
        Verdict::LockLimit => "the file-lock limit",
        Verdict::NetworkBlocked => "the network block (there is no network)",
        Verdict::PolicyDenied => "the package policy",
        Verdict::CodeTooLarge => "the code size limit",
        _ => v.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_messages() {
        let limits = SandboxLimits::default();
        let mut o = Outcome::ended(Verdict::TimeoutWall, 1.0);
        let msg = |o: &Outcome| kill_message(o, &limits).unwrap_or_default();
        assert!(msg(&o).contains("did not finish within 10s of wall time"));
        o.verdict = Verdict::TimeoutCpu;
        assert!(msg(&o).contains("more than 10s of CPU time"));
        o.verdict = Verdict::OomKilled;
        assert!(msg(&o).contains("exceeded the memory limit of 512M"));
        o.verdict = Verdict::MemoryError;
        assert!(msg(&o).contains("512M"));
        o.verdict = Verdict::PidsLimit;
        assert!(msg(&o).contains("started too many processes or threads (limit 128)"));
        o.verdict = Verdict::OutputLimit;
        assert!(msg(&o).contains("printed more than 1M of output; it was cut"));
        o.verdict = Verdict::DiskLimit;
        assert!(msg(&o).contains("256M"));
        o.verdict = Verdict::FdLimit;
        assert!(msg(&o).contains("too many files"));
        o.verdict = Verdict::LockLimit;
        assert!(msg(&o).contains("more than 4096 file locks"));
        o.verdict = Verdict::Crash;
        o.exit = Some(crate::sandbox::ExitInfo {
            code: None,
            signal: Some(11),
            signal_name: Some("SIGSEGV".into()),
        });
        assert!(msg(&o).contains("crashed with SIGSEGV"));
        o.verdict = Verdict::KernelExit;
        o.exit = Some(crate::sandbox::ExitInfo {
            code: Some(3),
            signal: None,
            signal_name: None,
        });
        assert!(msg(&o).contains("Python process exited (code 3)"));
        o.verdict = Verdict::NetworkBlocked;
        assert!(msg(&o).contains("there is no network access in this sandbox"));
        o.verdict = Verdict::InternalError;
        assert!(msg(&o).contains("not in your code"));
        o.state_lost = true;
        assert!(msg(&o).ends_with(STATE_LOST));
        o.verdict = Verdict::Error;
        assert_eq!(msg(&o), STATE_LOST);
        o.state_lost = false;
        assert_eq!(kill_message(&o, &limits), None);
        o.verdict = Verdict::Ok;
        assert_eq!(kill_message(&o, &limits), None);
        let custom = SandboxLimits {
            timeout: Duration::from_millis(2500),
            ..limits
        };
        o.verdict = Verdict::TimeoutWall;
        assert!(kill_message(&o, &custom).unwrap().contains("within 2.5s"));
        // Children OOM-killed while the cell ran into the wall timeout.
        o.fired = vec![Verdict::OomKilled, Verdict::TimeoutWall];
        assert!(msg(&o).ends_with("Also reached: the memory limit (a process was killed)."));
        o.verdict = Verdict::Ok;
        o.fired = vec![Verdict::DiskLimit];
        assert_eq!(msg(&o), "Limits reached: the disk limit.");
    }

    #[test]
    fn refused_code_is_told_its_size_and_the_limit() {
        let code = "#".repeat(crate::kernel::MAX_CODE_BYTES as usize + 10);
        let o = crate::kernel::code_refusal(&code).expect("refused");
        let m = kill_message(&o, &SandboxLimits::default()).unwrap();
        assert!(
            m.starts_with("Your code is 1048586 bytes, 10 bytes over the limit of 1048576 bytes"),
            "{m}"
        );
        assert!(!m.contains("Also reached"), "{m}");
    }
}
