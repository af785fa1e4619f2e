//! What an arm's environment cost, apart from the answers: rounds lost to
//! missing or refused packages, kernel start time, memory per kernel.

use serde::{Deserialize, Serialize};

use super::installs::InstallMetrics;
use super::stats::{Percentiles, Rate};
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

/// What the arm's environment cost, in the summary's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvironmentMetrics {
    /// Executed rounds lost to the environment: the outcome is a
    /// `ModuleNotFoundError` / `ImportError` or `policy_denied`, or an
    /// install request of the round was denied; over executed rounds.
    #[serde(default)]
    pub environment_error_rounds: Option<Rate>,
    /// What the dynamic installer did (arms that install on demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installs: Option<InstallMetrics>,
    /// Kernel start time (ms), one value per kernel start recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_start_ms: Option<Percentiles>,
    /// Peak memory per kernel (one kernel per task), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<MemoryPeak>,
    /// The arm's image size on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
}

impl EnvironmentMetrics {
    /// `records` are the arm's records of the run's own tasks, `tasks` the
    /// arm's records grouped by task.
    pub(super) fn of(
        strategy: &str,
        records: &[&AttemptRecord],
        tasks: &[TaskRounds],
        image_bytes: Option<u64>,
    ) -> EnvironmentMetrics {
        EnvironmentMetrics {
            environment_error_rounds: error_rounds(records),
            installs: InstallMetrics::of(strategy, tasks),
            kernel_start_ms: kernel_start(records),
            memory_peak_bytes: MemoryPeak::of(tasks),
            image_bytes,
        }
    }
}

/// Environment-error rounds over executed rounds.
fn error_rounds(records: &[&AttemptRecord]) -> Option<Rate> {
    let executed = records.iter().filter(|r| r.executed()).count() as u64;
    let lost = records.iter().filter(|r| is_environment_error(r)).count() as u64;
    Rate::new(lost, executed)
}

/// Kernel start times of the rounds that started a kernel; `None` when no
/// record has one (journals from before the field).
fn kernel_start(records: &[&AttemptRecord]) -> Option<Percentiles> {
    let starts: Vec<f64> = records
        .iter()
        .filter_map(|r| r.timings_ms.kernel_start)
        .collect();
    (!starts.is_empty()).then(|| Percentiles::of(starts))
}

/// Peak memory per kernel: each task's kernel counts once, with the largest
/// peak its rounds reported (the cgroup's peak is cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{allowed, config, denied, step, task, wheel, R};
    use crate::record::StopOn;
    use crate::report::summarize;
    use crate::sandbox::Verdict;

    #[test]
    fn environment_errors_count_each_lost_round_once() {
        let (k, s) = (2, StopOn::Never);
        let mut a = task(
            "a",
            &[
                R::Raised("ModuleNotFoundError"),
                R::Killed(Verdict::PolicyDenied),
                R::Raised("ImportError"),
            ],
            s,
            k,
        );
        // A denied request in a round that failed anyway: still one round.
        a[2].installs = vec![step(
            vec![denied(
                "nunpy",
                json!({"reason": "likely_typosquat", "of": "numpy"}),
            )],
            vec![],
            1.0,
            None,
        )];
        let mut b = task("b", &[R::Right, R::NoCode, R::Wrong], s, k);
        // A missing import repaired by an install: the round ran cleanly.
        let mut repaired = step(
            vec![allowed("scipy")],
            vec![wheel("scipy", true, 1)],
            5.0,
            None,
        );
        let failed = task("x", &[R::Raised("ModuleNotFoundError")], s, k)[0]
            .outcome
            .clone()
            .unwrap();
        repaired.failed_outcome = Some(Box::new(failed));
        b[0].installs = vec![repaired];
        // A refused install line in a round whose code then ran cleanly.
        b[2].installs = vec![step(
            vec![denied("leftpadx", json!({"reason": "not_allowlisted"}))],
            vec![],
            1.0,
            None,
        )];
        let mut c = task("c", &[R::Raised("KeyError"), R::Right, R::Kept], s, k);
        c[0].timings_ms.kernel_start = Some(300.0);
        let records: Vec<_> = [a, b, c].into_iter().flatten().collect();
        let m = summarize(&config(&["a", "b", "c"], k, s), &records);
        // a: 3 rounds; b: the last; of 3 + 2 + 2 executed rounds.
        let env = m.environment.environment_error_rounds.unwrap();
        assert_eq!((env.successes, env.n), (4, 7));
        let start = m.environment.kernel_start_ms.unwrap();
        assert_eq!((start.n, start.p50), (1, 300.0));
    }

    #[test]
    fn memory_is_the_peak_of_each_kernel() {
        let (k, s) = (2, StopOn::Never);
        let peaks = |t: &mut Vec<crate::record::AttemptRecord>, values: &[Option<u64>]| {
            for (r, v) in t.iter_mut().zip(values) {
                if let Some(o) = r.outcome.as_mut() {
                    o.memory_peak_bytes = *v;
                }
            }
        };
        let mut a = task("a", &[R::Right, R::Wrong, R::Right], s, k);
        peaks(&mut a, &[Some(10), Some(30), Some(20)]);
        let mut b = task("b", &[R::Right], s, k);
        peaks(&mut b, &[Some(50)]);
        let mut c = task("c", &[R::Right], s, k);
        peaks(&mut c, &[None]);
        let records: Vec<_> = [a, b, c].into_iter().flatten().collect();
        let m = summarize(&config(&["a", "b", "c"], k, s), &records);
        let mem = m.environment.memory_peak_bytes.unwrap();
        assert_eq!((mem.n, mem.p50, mem.max), (2, 30, 50));
        // Journals without the fields report nothing rather than zeros.
        assert!(m.environment.kernel_start_ms.is_none());
        assert!(m.environment.image_bytes.is_none());
    }
}
