//! Which cases run against a gateway, and why the others do not.

use crate::conformance::corpus::{Case, Category};
use crate::kernel::gateway::GatewayInfo;
use crate::sandbox::Verdict;

/// Verdicts retrace establishes itself on a gateway's kernel.
const REMOTE_VERDICTS: [Verdict; 5] = [
    Verdict::Ok,
    Verdict::Error,
    Verdict::TimeoutWall,
    Verdict::OutputLimit,
    Verdict::KernelExit,
];

/// Why `case` does not run against `gateway`, or `None` when it does.
/// Never when it reaches beyond its kernel (`local_only`). With retrace's
/// kernelspec the kernel is confined on its host as a local one and its
/// launcher reports the host's evidence ([`launcher_reason`]); otherwise
/// the case's category tests confinement that is the gateway's (memory,
/// processes, signals to other processes, disk, network, escapes) or its
/// verdict needs evidence only a jail has (CPU time, OOM kills, exit
/// signals, limits' counters). What remains then stays inside the
/// kernel's own process: on a gateway that does not confine its kernels,
/// the rest could harm its host.
pub fn remote_reason(case: &Case, gateway: &GatewayInfo) -> Option<String> {
    if let Some(why) = &case.local_only {
        return Some(format!("local only: {why}"));
    }
    if gateway.retrace_launcher {
        return launcher_reason(case);
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

/// Why `case` does not run on a kernel retrace's launcher confines on a
/// gateway's host: what the launcher does not report or take.
fn launcher_reason(case: &Case) -> Option<String> {
    let expects = |v: Verdict| case.expect == v || case.expectation.fired.contains(&v);
    // A runaway case (a fork bomb) ends by its CPU timer: without it, by
    // the wall timeout's restart, after which no reading of the host comes.
    if expects(Verdict::TimeoutCpu) || case.limits.cpu_time.is_some() {
        return Some(
            "it ends by a CPU-time limit: a cell's CPU time is measured from the host's \
             readings after it, not watched during it"
                .into(),
        );
    }
    // Each of these was seen failing through Enterprise Gateway 3.3: the
    // evidence it needs is on the host and does not reach the verdict yet.
    if expects(Verdict::NetworkBlocked) {
        return Some(
            "a refused connection is traced in the kernel's network namespace on its host; \
             the host's readings do not carry it into the verdict yet"
                .into(),
        );
    }
    if case.category == Category::JupyterProtocol && expects(Verdict::TimeoutWall) {
        return Some(
            "a forged end of a cell is caught against the kernel's main thread as its host \
             sees it, which the launcher does not report"
                .into(),
        );
    }
    if expects(Verdict::OutputLimit) {
        return Some(
            "a flood past the cap ends by the wall timeout through the gateway (seen with \
             Enterprise Gateway 3.3: its buffers hold what the host's wire cap passed, and \
             the interrupt does not get through); a message the host empties is reported, \
             but that alone does not cover the class"
                .into(),
        );
    }
    // The lock watchdog runs on the host; its kills come in the readings.
    // The case's memory, CPUs, processes and disk travel to the launcher
    // as KERNEL_* variables; the wall timeout is the client's.
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::corpus::load_dir;

    fn gateway(retrace_launcher: bool) -> GatewayInfo {
        GatewayInfo {
            url: "http://gateway.test".into(),
            kernel: "k".into(),
            kernel_display_name: None,
            version: None,
            concurrency: 1,
            retrace_launcher,
            hosts: Default::default(),
        }
    }

    #[test]
    fn retraces_launcher_brings_the_confinement_cases_back() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/hostile");
        let cases = load_dir(&dir).expect("the shipped corpus");
        let runs = |launcher: bool| -> Vec<&Case> {
            let info = gateway(launcher);
            cases
                .iter()
                .filter(|c| remote_reason(c, &info).is_none())
                .collect()
        };
        let (plain, confined) = (runs(false), runs(true));
        eprintln!(
            "{} of {} cases run; {} without retrace's launcher",
            confined.len(),
            cases.len(),
            plain.len()
        );
        assert!(
            confined.len() > plain.len() + 30,
            "{} vs {}",
            confined.len(),
            plain.len()
        );
        for verdict in [
            Verdict::OomKilled,
            Verdict::Crash,
            Verdict::DiskLimit,
            Verdict::LockLimit,
        ] {
            assert!(
                confined.iter().any(|c| c.expect == verdict),
                "a {verdict} case runs through retrace's launcher"
            );
            assert!(!plain.iter().any(|c| c.expect == verdict));
        }
        // Not yet: they end by a CPU timer the launcher does not run, or
        // their evidence stays on the host.
        for verdict in [
            Verdict::TimeoutCpu,
            Verdict::PidsLimit,
            Verdict::NetworkBlocked,
            Verdict::OutputLimit,
        ] {
            assert!(confined.iter().all(|c| c.expect != verdict), "{verdict}");
        }
    }
}
