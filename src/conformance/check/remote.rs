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
/// kernelspec the kernel is confined on its host as a local one, its
/// launcher stops a cell past its CPU time or output there and reports
/// the host's evidence, so every other case runs; otherwise
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
    // Confined on its host as a local kernel, judged from the host's
    // readings: every case runs.
    if gateway.retrace_launcher {
        return None;
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
            Verdict::PidsLimit,
            Verdict::NetworkBlocked,
        ] {
            assert!(
                confined.iter().any(|c| c.expect == verdict),
                "a {verdict} case runs through retrace's launcher"
            );
            assert!(!plain.iter().any(|c| c.expect == verdict));
        }
        // Every case but those reaching beyond the kernel.
        let left_out = cases.iter().filter(|c| c.local_only.is_some()).count();
        assert_eq!(confined.len() + left_out, cases.len());
    }
}
