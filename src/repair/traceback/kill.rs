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
/// are not a plain exception (and for a `RecursionError`, the limit
/// Python itself keeps), and of every other limit that fired in it. A
/// limit is named with its value and with what was observed of it (the
/// time the cell ran, the CPU time it used, the kernel's peak memory, the
/// output it printed, the depth of its recursion), or with the fact that
/// nothing was. `None` for `ok` and other exceptions unless a limit fired
/// or the kernel was restarted (then only those sentences).
pub fn kill_message(outcome: &Outcome, limits: &SandboxLimits) -> Option<String> {
    let mem = format_bytes(limits.memory_bytes);
    let message = match outcome.verdict {
        Verdict::Error => recursion(outcome).or_else(|| memory_refused(outcome, &mem)),
        Verdict::Ok => None,
        Verdict::TimeoutWall => Some(format!(
            "Your code did not finish within {} of wall time and was stopped ({}; {}). Make \
             it faster (avoid long loops and sleeps) or compute less.",
            fmt_duration(limits.timeout),
            observed_wall(outcome),
            observed_cpu(outcome)
        )),
        Verdict::TimeoutCpu => Some(format!(
            "Your code used more than {} of CPU time and was stopped ({}). Use a faster \
             algorithm or vectorised operations.",
            fmt_duration(limits.cpu_time),
            observed_cpu(outcome)
        )),
        Verdict::OomKilled => Some(format!(
            "Your code exceeded the memory limit of {mem} and was killed ({}). Use less memory \
             (smaller arrays, process data in chunks).",
            observed_memory(outcome)
        )),
        Verdict::MemoryError => Some(format!(
            "Your code ran out of memory (MemoryError): the memory limit is {mem} ({}). Use \
             less memory.",
            observed_memory(outcome)
        )),
        Verdict::PidsLimit => Some(format!(
            "Your code started too many processes or threads (limit {}). Do not start \
             processes or thread pools.",
            limits.pids
        )),
        Verdict::OutputLimit => Some(format!(
            "Your code printed more than {} of output ({}); it was cut and the execution was \
             stopped. Print only what you need (summaries, not whole tables or long loops).",
            format_bytes(limits.output_cap_bytes),
            observed_output(outcome)
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

/// A `MemoryError` no OS evidence confirms (verdict `error`): one
/// allocation refused outright, typically larger than the machine, before
/// the memory limit was reached.
fn memory_refused(outcome: &Outcome, mem: &str) -> Option<String> {
    outcome
        .error
        .as_ref()
        .filter(|e| e.ename == "MemoryError")?;
    Some(format!(
        "Your code asked for more memory than can be had and raised MemoryError (the memory \
         limit is {mem}; {}). Use less memory (smaller arrays, process data in chunks, or a \
         formula instead of a table).",
        observed_memory(outcome)
    ))
}

/// The cell's running time before it was stopped: its total less the
/// kill that followed.
fn observed_wall(outcome: &Outcome) -> String {
    let t = &outcome.timings_ms;
    let ran = t.total - t.kill.unwrap_or(0.0);
    if ran > 0.0 {
        format!("it had run for {}", fmt_seconds(ran))
    } else {
        "its running time was not recorded".into()
    }
}

fn observed_cpu(outcome: &Outcome) -> String {
    match outcome.timings_ms.cpu {
        Some(ms) => format!("it used {} of CPU time", fmt_seconds(ms)),
        None => "its CPU time was not measured".into(),
    }
}

/// The kernel's peak memory: the cgroup's peak over the kernel's life,
/// which the cell's own use cannot be told apart from.
fn observed_memory(outcome: &Outcome) -> String {
    match outcome.memory_peak_bytes {
        Some(b) => format!("the kernel's peak memory use was {}", approx_bytes(b)),
        None => "no peak memory use was reported".into(),
    }
}

/// What the cell printed: what was kept and what was dropped past the cap,
/// up to the moment it was stopped.
fn observed_output(outcome: &Outcome) -> String {
    let kept = (outcome.stdout.len() + outcome.stderr.len()) as u64;
    let printed = kept + outcome.truncation.dropped_bytes;
    if printed > 0 {
        format!(
            "it printed at least {} before it was stopped",
            approx_bytes(printed)
        )
    } else {
        "how much it printed was not recorded".into()
    }
}

/// A measured size: exact multiples as the limits are written (`2M`),
/// others with one decimal (`511.7M`).
fn approx_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    match UNITS.iter().find(|(_, size)| bytes >= *size) {
        Some((suffix, size)) if !bytes.is_multiple_of(*size) => {
            format!("{:.1}{suffix}", bytes as f64 / *size as f64)
        }
        _ => format_bytes(bytes),
    }
}

/// Milliseconds as seconds with one decimal (`10.3s`), or milliseconds
/// below one second.
fn fmt_seconds(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1e3)
    }
}

/// A `RecursionError`: Python's own recursion limit, whose value the
/// kernel does not report; the depth is the frames its traceback shows
/// (IPython collapses long runs into "skipping similar frames (N times)",
/// which are counted too).
fn recursion(outcome: &Outcome) -> Option<String> {
    let error = outcome
        .error
        .as_ref()
        .filter(|e| e.ename == "RecursionError")?;
    let depth = recursion_depth(&error.traceback);
    let seen = match depth {
        0 => "its traceback shows no frames".to_string(),
        n => format!("its traceback shows {n} nested calls"),
    };
    Some(format!(
        "Your code went deeper than Python's recursion limit (sys.getrecursionlimit()) and \
         raised RecursionError ({seen}). Rewrite the recursion as a loop (bottom-up), or \
         keep its depth small; raising the limit can crash the kernel."
    ))
}

/// Frames in an IPython traceback: one entry per frame after the header,
/// and the count of each "skipping similar frames" line.
fn recursion_depth(traceback: &[String]) -> usize {
    let mut depth = 0;
    for entry in traceback {
        if let Some(rest) = entry.split("skipping similar frames").nth(1) {
            let times = rest
                .rsplit_once(" times)")
                .and_then(|(head, _)| head.rsplit_once('(').map(|(_, n)| n))
                .and_then(|n| n.trim().parse::<usize>().ok());
            depth += times.unwrap_or(0);
        } else if entry.starts_with("Cell In[") || entry.starts_with("File ") {
            depth += 1;
        }
    }
    depth
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
        assert!(msg(&o).contains("printed more than 1M of output ("));
        assert!(msg(&o).contains("); it was cut"));
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

    /// Each kill names its limit, the limit's value and what was observed
    /// of it, or says that nothing was.
    #[test]
    fn kills_name_the_limit_and_what_was_observed() {
        let limits = SandboxLimits::default();
        let msg = |o: &Outcome| kill_message(o, &limits).unwrap();

        let mut o = Outcome::ended(Verdict::TimeoutWall, 10_450.0);
        o.timings_ms.kill = Some(150.0);
        assert!(
            msg(&o).contains(
                "within 10s of wall time and was stopped (it had run for 10.3s; its CPU time \
                 was not measured)"
            ),
            "{}",
            msg(&o)
        );
        o.timings_ms.cpu = Some(4_900.0);
        assert!(
            msg(&o).contains("(it had run for 10.3s; it used 4.9s of CPU time)"),
            "{}",
            msg(&o)
        );
        o.timings_ms = Default::default();
        assert!(msg(&o).contains("(its running time was not recorded;"));

        let mut o = Outcome::ended(Verdict::TimeoutCpu, 12_000.0);
        assert!(msg(&o)
            .contains("more than 10s of CPU time and was stopped (its CPU time was not measured)"));
        o.timings_ms.cpu = Some(10_020.0);
        assert!(
            msg(&o).contains("(it used 10.0s of CPU time)"),
            "{}",
            msg(&o)
        );

        for verdict in [Verdict::OomKilled, Verdict::MemoryError] {
            let mut o = Outcome::ended(verdict, 900.0);
            assert!(msg(&o).contains("512M"), "{}", msg(&o));
            assert!(msg(&o).contains("(no peak memory use was reported)"));
            o.memory_peak_bytes = Some(511 * 1024 * 1024 + 700 * 1024);
            assert!(
                msg(&o).contains("(the kernel's peak memory use was 511.7M)"),
                "{}",
                msg(&o)
            );
        }

        let mut o = Outcome::ended(Verdict::OutputLimit, 300.0);
        assert!(msg(&o).contains("(how much it printed was not recorded)"));
        o.stdout = "x".repeat(1024 * 1024);
        o.truncation.dropped_bytes = 1024 * 1024;
        assert!(
            msg(&o)
                .contains("more than 1M of output (it printed at least 2M before it was stopped)"),
            "{}",
            msg(&o)
        );
    }

    /// A RecursionError is told as Python's recursion limit with the depth
    /// its traceback shows, collapsed runs of frames counted; another
    /// exception gets no such sentence.
    #[test]
    fn a_recursion_error_names_the_limit_and_the_depth_seen() {
        let limits = SandboxLimits::default();
        let mut o = Outcome::ended(Verdict::Error, 5.0);
        let frame = "Cell In[1], line 2, in f(n)\n----> 2     return f(n - 1)\n".to_string();
        let mut traceback = vec![
            "-----".to_string(),
            "RecursionError    Traceback (most recent call last)".to_string(),
        ];
        traceback.extend(std::iter::repeat_n(frame, 3));
        traceback.push("    [... skipping similar frames: f at line 2 (2964 times)]".into());
        traceback.push("RecursionError: maximum recursion depth exceeded".into());
        o.error = Some(crate::kernel::ErrorInfo {
            ename: "RecursionError".into(),
            evalue: "maximum recursion depth exceeded".into(),
            traceback,
        });
        let m = kill_message(&o, &limits).unwrap();
        assert!(m.contains("Python's recursion limit"), "{m}");
        assert!(m.contains("(its traceback shows 2967 nested calls)"), "{m}");
        o.error.as_mut().unwrap().traceback.clear();
        let m = kill_message(&o, &limits).unwrap();
        assert!(m.contains("(its traceback shows no frames)"), "{m}");
        o.error.as_mut().unwrap().ename = "KeyError".into();
        assert_eq!(kill_message(&o, &limits), None);
        // A MemoryError without OS evidence: an allocation refused outright.
        o.error.as_mut().unwrap().ename = "MemoryError".into();
        o.memory_peak_bytes = Some(50 << 20);
        let m = kill_message(&o, &limits).unwrap();
        assert!(
            m.contains("(the memory limit is 512M; the kernel's peak memory use was 50M)"),
            "{m}"
        );
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
