//! The result of one case and of a whole check.

use serde::Serialize;

use super::benign::{CellCounts, NotebookCells};
use super::HarnessMemory;
use crate::conformance::corpus::{Case, Category};
use crate::conformance::Expectation;
use crate::kernel::{AnyKernel, LocalBackend, Outcome};
use crate::sandbox::{SandboxInfo, SandboxLimits, Verdict};
use crate::util::stats::percentile;

/// A case left out of a check on a gateway.
#[derive(Debug, Clone, Serialize)]
pub struct NotApplicable {
    pub id: String,
    pub reason: String,
}

/// The verdict of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub category: Category,
    pub expected: Verdict,
    #[serde(skip_serializing_if = "is_empty")]
    pub expectation: Expectation,
    /// `None` when the case never ran (the kernel did not start).
    pub got: Option<Verdict>,
    pub flags: Vec<String>,
    /// Milliseconds from the kill decision until every process was gone.
    pub kill_ms: Option<f64>,
    /// Wall time of the hostile execution itself.
    pub exec_ms: Option<f64>,
    /// Wall time of the whole case: start, execution, checks, teardown.
    pub duration_ms: f64,
    pub pass: bool,
    /// Why the case failed; empty when it passed.
    pub failures: Vec<String>,
    pub kernel_id: Option<String>,
    pub limits: SandboxLimits,
    /// Everything the executor reported (image payloads removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// How the case's kernel started (`cold`, `zygote`, or `fallback: why`
    /// when the zygote was asked for and could not serve).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// The harness's resident memory while the case ran; `None` only when
    /// it could not be read (the case then fails), and for a benign
    /// notebook, where it is not measured.
    pub harness: Option<HarnessMemory>,
    /// A benign notebook's cells, as compared confined and unconfined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benign: Option<NotebookCells>,
}

fn is_empty(e: &Expectation) -> bool {
    *e == Expectation::default()
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub sandbox: SandboxInfo,
    /// Where the kernels ran.
    pub executor: crate::kernel::ExecutorInfo,
    /// Cases that do not apply on this executor (a gateway), and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<NotApplicable>,
    pub limits: SandboxLimits,
    pub jobs: usize,
    pub duration_ms: f64,
    pub summary: Summary,
    pub results: Vec<CaseResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    /// Cases whose execution needed a kill by the harness.
    pub killed: usize,
    pub kill_ms_p50: Option<f64>,
    pub kill_ms_p99: Option<f64>,
    pub kill_ms_max: Option<f64>,
    /// The largest growth of the harness's RSS during one case, and the
    /// case.
    pub harness_growth_max_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness_growth_max_case: Option<String>,
    /// The harness's highest RSS during the check.
    pub harness_peak_max_bytes: Option<u64>,
    /// A benign check's cells, over every notebook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<CellCounts>,
}

impl Summary {
    pub fn of(results: &[CaseResult]) -> Summary {
        let passed = results.iter().filter(|r| r.pass).count();
        let mut kills: Vec<f64> = results.iter().filter_map(|r| r.kill_ms).collect();
        kills.sort_by(f64::total_cmp);
        let measured = || {
            results
                .iter()
                .filter_map(|r| r.harness.as_ref().map(|m| (r, m)))
        };
        let growth = measured().max_by_key(|(_, m)| m.growth_bytes);
        Summary {
            total: results.len(),
            passed,
            failed: results.len() - passed,
            killed: kills.len(),
            kill_ms_p50: percentile(&kills, 50.0),
            kill_ms_p99: percentile(&kills, 99.0),
            kill_ms_max: kills.last().copied(),
            harness_growth_max_bytes: growth.map(|(_, m)| m.growth_bytes),
            harness_growth_max_case: growth.map(|(r, _)| r.id.clone()),
            harness_peak_max_bytes: measured().map(|(_, m)| m.peak_bytes).max(),
            cells: results.iter().filter_map(|r| r.benign.as_ref()).fold(
                None,
                |sum: Option<CellCounts>, nb| {
                    let mut sum = sum.unwrap_or_default();
                    sum.add(&nb.counts);
                    Some(sum)
                },
            ),
        }
    }
}

impl CaseResult {
    pub(super) fn new(case: &Case, limits: &SandboxLimits) -> CaseResult {
        CaseResult {
            expectation: case.expectation.clone(),
            ..CaseResult::named(&case.id, case.category, case.expect, limits)
        }
    }

    /// A result not yet run, for any entry of a corpus.
    pub(super) fn named(
        id: &str,
        category: Category,
        expected: Verdict,
        limits: &SandboxLimits,
    ) -> CaseResult {
        CaseResult {
            id: id.to_string(),
            category,
            expected,
            expectation: Expectation::default(),
            got: None,
            flags: Vec::new(),
            kill_ms: None,
            exec_ms: None,
            duration_ms: 0.0,
            pass: false,
            failures: Vec::new(),
            kernel_id: None,
            limits: *limits,
            outcome: None,
            start: None,
            harness: None,
            benign: None,
        }
    }

    /// Records how the kernel started; a fallback is never overwritten.
    pub(super) fn started(&mut self, kernel: &AnyKernel) {
        use crate::kernel::StartPath;
        let Some(path) = kernel.as_local().map(LocalBackend::start_path) else {
            self.start = Some("gateway".into());
            return;
        };
        if self
            .start
            .as_deref()
            .is_some_and(|s| s.starts_with("fallback"))
        {
            return;
        }
        self.start = Some(match path {
            StartPath::Cold => "cold".into(),
            StartPath::Zygote => "zygote".into(),
            StartPath::Fallback(why) => format!("fallback: {why}"),
        });
    }

    pub(super) fn fail(&mut self, reason: String) {
        self.failures.push(reason);
        self.pass = false;
    }
}
