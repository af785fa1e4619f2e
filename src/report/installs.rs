//! What the dynamic installer did in one arm: steps, store hits and
//! downloads with their latencies, failures, denials by reason, and the
//! store space the arm's packages take.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::stats::Percentiles;
use super::task_rounds::TaskRounds;
use crate::pyenv::dynamic::{Decision, Denial};
use crate::pyenv::Strategy;
use crate::record::InstallStep;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstallMetrics {
    /// Install steps of every kind (allowed, denied, failed).
    pub steps: u64,
    /// Tasks with at least one install (a step with an allowed request
    /// that had wheels to install).
    pub tasks_with_installs: u64,
    /// Installs per task, over every task of the arm.
    pub installs_per_task: f64,
    /// Installs whose every wheel was already in the store.
    pub store_hits: u64,
    /// Installs with some wheel not in the store (downloaded).
    pub downloads: u64,
    /// Latency of the installs that reached the kernel, store hits only.
    pub latency_ms_store_hit: Percentiles,
    /// Latency of the installs that reached the kernel, with a download.
    pub latency_ms_download: Percentiles,
    /// Allowed installs that did not reach the kernel (installer error,
    /// time limit, no index).
    pub failures: u64,
    /// Denied requests (one step may deny several), and installs the
    /// installer refused after fetching them.
    pub denials: u64,
    /// Denials by reason (`not_allowlisted`, `likely_typosquat`,
    /// `sdist_only`, `version_not_allowed`, `unsupported_spec`,
    /// `refused_by_installer`: a hash mismatch or content that runs code).
    pub denials_by_reason: BTreeMap<String, u64>,
    /// Installed size of the distinct wheels (name and sha256) the arm used.
    pub store_bytes: u64,
}

/// The step installed wheels for an allowed request.
fn installs(step: &InstallStep) -> bool {
    !step.wheels.is_empty() && step.decisions.iter().any(Decision::is_allowed)
}

/// A denial's name as recorded (its serde tag), so a reason added later
/// is counted under its own name.
fn reason(denial: &Denial) -> String {
    serde_json::to_value(denial)
        .ok()
        .and_then(|v| v.get("reason")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

impl InstallMetrics {
    /// `None` for an arm that never installs and recorded no install step.
    pub(super) fn of(strategy: &str, tasks: &[TaskRounds]) -> Option<InstallMetrics> {
        let steps: Vec<(usize, &InstallStep)> = tasks
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                t.records
                    .iter()
                    .flat_map(move |r| r.installs.iter().map(move |s| (i, s)))
            })
            .collect();
        let dynamic = strategy.parse::<Strategy>().is_ok_and(Strategy::installs);
        if !dynamic && steps.is_empty() {
            return None;
        }
        let mut m = InstallMetrics {
            steps: steps.len() as u64,
            ..InstallMetrics::default()
        };
        let (mut hit_ms, mut download_ms) = (Vec::new(), Vec::new());
        let mut installed = 0u64;
        let mut tasks_installing = BTreeSet::new();
        let mut wheels = BTreeMap::new();
        for &(task, step) in &steps {
            for d in &step.decisions {
                if let Decision::Denied { denial, .. } = d {
                    m.denials += 1;
                    *m.denials_by_reason.entry(reason(denial)).or_default() += 1;
                }
            }
            // The installer refused what it fetched (hash, content).
            if step.refused.is_some() {
                m.denials += 1;
                *m.denials_by_reason
                    .entry("refused_by_installer".into())
                    .or_default() += 1;
            }
            for w in &step.wheels {
                wheels.insert((w.name.as_str(), w.sha256.as_str()), w.bytes);
            }
            m.failures += u64::from(step.failed());
            if !installs(step) {
                continue;
            }
            installed += 1;
            tasks_installing.insert(task);
            let hit = step.wheels.iter().all(|w| w.store_hit);
            if hit {
                m.store_hits += 1;
            } else {
                m.downloads += 1;
            }
            // A failed install never gave the kernel a package: it is in
            // `failures`, not in the latencies.
            if !step.failed() && !step.denied() {
                if hit {
                    hit_ms.push(step.ms);
                } else {
                    download_ms.push(step.ms);
                }
            }
        }
        m.tasks_with_installs = tasks_installing.len() as u64;
        m.installs_per_task = installed as f64 / tasks.len().max(1) as f64;
        m.latency_ms_store_hit = Percentiles::of(hit_ms);
        m.latency_ms_download = Percentiles::of(download_ms);
        m.store_bytes = wheels.values().sum();
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{allowed, config, denied, step, task, wheel, R};
    use crate::record::StopOn;
    use crate::report::summarize;

    #[test]
    fn hits_downloads_failures_and_denials() {
        let (k, s) = (0, StopOn::Clean);
        let mut cfg = config(&["a", "b", "c", "d"], k, s);
        cfg.spec.packages.strategies = vec![crate::pyenv::Strategy::Dynamic];
        let mut a = task("a", &[R::Right], s, k);
        // a: scipy and numpy downloaded.
        a[0].installs = vec![step(
            vec![allowed("scipy")],
            vec![wheel("scipy", false, 100), wheel("numpy", false, 50)],
            900.0,
            None,
        )];
        let mut b = task("b", &[R::Right], s, k);
        // b: the same from the store; then two refused names.
        b[0].installs = vec![
            step(
                vec![allowed("scipy")],
                vec![wheel("scipy", true, 100), wheel("numpy", true, 50)],
                40.0,
                None,
            ),
            step(
                vec![
                    denied("leftpadx", json!({"reason": "not_allowlisted"})),
                    denied(
                        "nunpy",
                        json!({"reason": "likely_typosquat", "of": "numpy"}),
                    ),
                ],
                vec![],
                2.0,
                None,
            ),
        ];
        let mut c = task("c", &[R::Wrong], s, k);
        // c: an sdist-only name, then a download that failed.
        c[0].installs = vec![
            step(
                vec![denied("oldpkg", json!({"reason": "sdist_only"}))],
                vec![],
                1.0,
                None,
            ),
            step(
                vec![allowed("pandas")],
                vec![wheel("pandas", false, 70)],
                5000.0,
                Some("installer timed out"),
            ),
        ];
        let d = task("d", &[R::Right], s, k);
        let records: Vec<_> = [a, b, c, d].into_iter().flatten().collect();
        let m = summarize(&cfg, &records)
            .baseline
            .environment
            .installs
            .unwrap();
        assert_eq!(m.steps, 5);
        assert_eq!(m.tasks_with_installs, 3);
        assert_eq!(m.installs_per_task, 0.75);
        assert_eq!((m.store_hits, m.downloads), (1, 2));
        // The failed download is a failure, not a latency.
        assert_eq!(m.latency_ms_store_hit.n, 1);
        assert_eq!(m.latency_ms_store_hit.p50, 40.0);
        assert_eq!(m.latency_ms_download.n, 1);
        assert_eq!(m.latency_ms_download.p95, 900.0);
        assert_eq!(m.failures, 1);
        assert_eq!(m.denials, 3);
        let reasons: Vec<(&str, u64)> = m
            .denials_by_reason
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect();
        assert_eq!(
            reasons,
            [
                ("likely_typosquat", 1),
                ("not_allowlisted", 1),
                ("sdist_only", 1)
            ]
        );
        // scipy and numpy once each (the same wheels twice), pandas.
        assert_eq!(m.store_bytes, 220);
    }

    #[test]
    fn an_arm_that_never_installs_has_no_install_metrics() {
        let (k, s) = (0, StopOn::Clean);
        let records = task("a", &[R::Right], s, k);
        assert!(summarize(&config(&["a"], k, s), &records)
            .environment
            .installs
            .is_none());
        // Unless its records say otherwise.
        let mut records = records;
        records[0].installs = vec![step(
            vec![allowed("six")],
            vec![wheel("six", true, 9)],
            3.0,
            None,
        )];
        let m = summarize(&config(&["a"], k, s), &records)
            .baseline
            .environment
            .installs
            .unwrap();
        assert_eq!((m.steps, m.store_hits, m.store_bytes), (1, 1, 9));
    }
}
