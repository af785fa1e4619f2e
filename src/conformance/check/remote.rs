//! Which cases run against a gateway, and why the others do not.

use crate::conformance::corpus::{Case, Category};
use crate::sandbox::Verdict;

/// Verdicts retrace establishes itself on a gateway's kernel.
const REMOTE_VERDICTS: [Verdict; 5] = [
    Verdict::Ok,
    Verdict::Error,
    Verdict::TimeoutWall,
    Verdict::OutputLimit,
    Verdict::KernelExit,
];

/// Why `case` does not run against a gateway, or `None` when it does: its
/// category tests confinement that is the gateway's (memory, processes,
/// signals to other processes, disk, network, escapes), the case reaches
/// beyond its kernel (`local_only`), or its verdict needs evidence only a
/// local jail has (CPU time, OOM kills, exit signals, limits' counters).
/// What remains stays inside the kernel's own process: on a gateway that
/// does not confine its kernels, the rest could harm its host.
pub fn remote_reason(case: &Case) -> Option<String> {
    if let Some(why) = &case.local_only {
        return Some(format!("local only: {why}"));
    }
    let owned_by_gateway = matches!(
        case.category,
        Category::Memory
            | Category::Processes
            | Category::Signals
            | Category::Disk
            | Category::NetworkIpc
            | Category::Escape
            | Category::Crashes
    );
    if owned_by_gateway {
        return Some(format!(
            "{} is confinement the gateway's kernelspec provides, not retrace",
            case.category.as_str()
        ));
    }
    if !REMOTE_VERDICTS.contains(&case.expect) {
        return Some(format!(
            "verdict {} needs evidence from a local jail (cgroup counters, exit signals)",
            case.expect
        ));
    }
    None
}
