//! What the dynamic installer did in one arm: steps, store hits and
//! downloads with their latencies, failures, denials by reason, and the
//! store space the arm's packages take.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::metrics::Percentiles;
use super::task_rounds::TaskRounds;
use crate::pyenv::dynamic::{Decision, Denial};
use crate::pyenv::Strategy;
use crate::record::InstallStep;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// time limit, refused content).
    pub failures: u64,
    /// Denied requests (one step may deny several).
    pub denials: u64,
    /// Denied requests by reason (`not_allowlisted`, `likely_typosquat`,
    /// `sdist_only`, `version_not_allowed`, `unsupported_spec`).
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
            if !step.failed() {
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
