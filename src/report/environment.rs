//! What an arm's environment cost, apart from the answers: rounds lost to
//! missing or refused packages, kernel start time, memory per kernel.

use serde::{Deserialize, Serialize};

use super::metrics::{Percentiles, Rate};
use super::task_rounds::TaskRounds;
use crate::record::AttemptRecord;
use crate::sandbox::Verdict;
use crate::util::stats::percentile;

/// Exceptions that mean "this package is not here".
const MISSING_PACKAGE: [&str; 2] = ["ModuleNotFoundError", "ImportError"];

/// The round ran and was lost to the environment: its (final) outcome is a
/// missing module or a policy refusal, or one of its install requests was
/// denied. A missing import that an install step repaired is not counted:
/// the round's outcome is the re-run, and the step is in the install metrics.
pub fn is_environment_error(r: &AttemptRecord) -> bool {
    let Some(o) = &r.outcome else {
        return false;
    };
    let missing = o.verdict == Verdict::Error
        && o.error
            .as_ref()
            .is_some_and(|e| MISSING_PACKAGE.contains(&e.ename.as_str()));
    missing || o.verdict == Verdict::PolicyDenied || r.installs.iter().any(|s| s.denied())
}

/// Environment-error rounds over executed rounds.
pub fn error_rounds(records: &[&AttemptRecord]) -> Option<Rate> {
    let executed = records.iter().filter(|r| r.executed()).count() as u64;
    let lost = records.iter().filter(|r| is_environment_error(r)).count() as u64;
    Rate::new(lost, executed)
}

/// Kernel start times of the rounds that started a kernel; `None` when no
/// record has one (journals from before the field).
pub fn kernel_start(records: &[&AttemptRecord]) -> Option<Percentiles> {
    let starts: Vec<f64> = records
        .iter()
        .filter_map(|r| r.timings_ms.kernel_start)
        .collect();
    (!starts.is_empty()).then(|| Percentiles::of(starts))
}

/// Peak memory per kernel: each task's kernel counts once, with the largest
/// peak its rounds reported (the cgroup's peak is cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPeak {
    /// Kernels with a reported peak.
    pub n: usize,
    /// Nearest-rank median over kernels.
    pub p50: u64,
    pub max: u64,
}

impl MemoryPeak {
    pub(super) fn of(tasks: &[TaskRounds]) -> Option<MemoryPeak> {
        let mut peaks: Vec<u64> = tasks
            .iter()
            .filter_map(|t| {
                t.records
                    .iter()
                    .filter_map(|r| r.outcome.as_ref()?.memory_peak_bytes)
                    .max()
            })
            .collect();
        peaks.sort_unstable();
        let max = *peaks.last()?;
        // Byte counts below 2^53 are exact in f64; the result is an observed value.
        let as_f64: Vec<f64> = peaks.iter().map(|&b| b as f64).collect();
        let p50 = percentile(&as_f64, 50.0)? as u64;
        Some(MemoryPeak {
            n: peaks.len(),
            p50,
            max,
        })
    }
}
