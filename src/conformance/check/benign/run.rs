//! Runs benign notebooks: each once unconfined and once confined (and a
//! second time unconfined when some cell's text differs), then compares
//! them cell by cell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cell::{compare, text_differs, CellRun, CellStatus, Surface};
use super::normalise::KernelPaths;
use super::{CellCounts, Notebook, NotebookCells};
use crate::conformance::check::{
    run_jobs, CaseResult, CheckConfig, CheckError, CheckReport, Summary,
};
use crate::conformance::corpus::Category;
use crate::conformance::expectation::shorten;
use crate::kernel::{AnyKernel, ExecOptions, Executor, KernelOptions, KernelSpec};
use crate::sandbox::{Confined, Sandbox, SandboxLimits, Unconfined, Verdict};

/// Extra time a cell gets beyond its limits before the check gives up on
/// the executor.
const EXECUTOR_SLACK: Duration = Duration::from_secs(60);

/// Runs `notebooks`, at most `config.jobs` at a time (each runs its
/// kernels one after another, so no run competes with its own
/// reference); `on_done` sees each result as it completes. A gateway is
/// not supported: the check needs both sides on this machine.
pub async fn run(
    notebooks: &[Notebook],
    config: &CheckConfig,
    on_done: Arc<dyn Fn(&CaseResult) + Send + Sync>,
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    let confined =
        Arc::new(Confined::open(config.init_exe.clone()).map_err(CheckError::Unavailable)?);
    let sandbox = confined.info();
    let sides = Arc::new(Sides {
        confined: Executor::Local(confined),
        unconfined: Executor::Local(Arc::new(Unconfined)),
    });
    let jobs = config.jobs.max(1);
    let slots = run_jobs(
        notebooks.to_vec(),
        jobs,
        |_| 1,
        on_done,
        |notebook: Notebook| {
            let (config, sides) = (config.clone(), sides.clone());
            async move { run_notebook(&notebook, &config, &sides).await }
        },
    )
    .await;
    let results: Vec<CaseResult> = slots
        .into_iter()
        .zip(notebooks)
        .map(|(slot, nb)| {
            slot.unwrap_or_else(|| {
                let mut r = new_result(nb, &config.limits);
                r.fail("the check itself panicked while running this notebook".into());
                r
            })
        })
        .collect();
    Ok(CheckReport {
        sandbox,
        executor: crate::kernel::ExecutorInfo::Local,
        not_applicable: Vec::new(),
        limits: config.limits,
        jobs,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        summary: Summary::of(&results),
        results,
    })
}

/// The two executors a notebook runs on.
struct Sides {
    confined: Executor,
    unconfined: Executor,
}

fn new_result(nb: &Notebook, limits: &SandboxLimits) -> CaseResult {
    CaseResult::named(&nb.id, Category::FalsePositive, Verdict::Ok, limits)
}

async fn run_notebook(nb: &Notebook, config: &CheckConfig, sides: &Sides) -> CaseResult {
    let started = Instant::now();
    let mut result = new_result(nb, &config.limits);
    let outcome = async {
        let reference = run_cells(nb, config, &sides.unconfined, false).await?;
        let confined = run_cells(nb, config, &sides.confined, true).await?;
        // A second unconfined run tells variance from confinement where
        // some cell's text differs that the notebook does not list.
        let differs = reference
            .iter()
            .zip(&confined)
            .enumerate()
            .any(|(i, (u, c))| text_differs(u, c) && !declared(nb, i));
        let second = if differs {
            Some(run_cells(nb, config, &sides.unconfined, false).await?)
        } else {
            None
        };
        Ok::<_, String>((reference, confined, second))
    }
    .await;
    match outcome {
        Ok((reference, confined, second)) => {
            let cells: Vec<_> = (0..nb.cells.len())
                .map(|i| {
                    let second = second.as_ref().map(|s| &s[i]);
                    compare(i, &reference[i], &confined[i], second, declared(nb, i))
                })
                .collect();
            for c in cells.iter().filter(|c| c.status == CellStatus::Differs) {
                result.got.get_or_insert(c.confined);
                result.fail(format!(
                    "cell {} ({}): {}",
                    c.index,
                    first_line(&nb.cells[c.index]),
                    c.reason.as_deref().unwrap_or("differs")
                ));
            }
            result.got.get_or_insert(Verdict::Ok);
            result.exec_ms = Some(started.elapsed().as_secs_f64() * 1e3);
            result.benign = Some(NotebookCells {
                source: nb.source.clone(),
                counts: CellCounts::of(&cells),
                second_run: second.is_some(),
                cells,
            });
        }
        Err(reason) => result.fail(reason),
    }
    result.pass = result.failures.is_empty();
    result.duration_ms = started.elapsed().as_secs_f64() * 1e3;
    result
}

/// Whether the notebook lists cell `i` as varying.
fn declared(nb: &Notebook, i: usize) -> bool {
    nb.varies.iter().any(|v| v.cell == i)
}

/// The cell's first line, shortened, as a name for it.
fn first_line(code: &str) -> String {
    let line = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    format!("`{}`", shorten(line.trim(), 60))
}

/// Runs every cell of `nb` in order in one fresh kernel of `executor`.
/// Err when the kernel does not start.
async fn run_cells(
    nb: &Notebook,
    config: &CheckConfig,
    executor: &Executor,
    confined: bool,
) -> Result<Vec<CellRun>, String> {
    let side = if confined { "confined" } else { "unconfined" };
    let limits = config.limits;
    let spec = Arc::new(KernelSpec {
        threads: limits.threads(),
        ..(*config.spec).clone()
    });
    let options = KernelOptions {
        start: config.kernel_start,
        ..KernelOptions::enforcing(&limits, confined)
    };
    let mut kernel = executor
        .start(spec, options)
        .await
        .map_err(|e| format!("the {side} kernel did not start: {e}"))?;
    let exec = ExecOptions {
        timeout: limits.timeout,
        artifact_dir: None,
        artifact_prefix: nb.id.clone(),
    };
    let budget = limits.timeout + limits.cpu_time + EXECUTOR_SLACK;
    let mut runs = Vec::with_capacity(nb.cells.len());
    for code in &nb.cells {
        let run = match tokio::time::timeout(budget, kernel.execute(code, &exec)).await {
            Ok(outcome) => CellRun::of(&outcome, &paths(&kernel)),
            Err(_) => CellRun {
                verdict: Verdict::InternalError,
                surface: Surface::default(),
                error: Some(format!(
                    "the executor did not return within {:.0} s",
                    budget.as_secs_f64()
                )),
                ms: budget.as_secs_f64() * 1e3,
            },
        };
        runs.push(run);
    }
    kernel.shutdown().await;
    Ok(runs)
}

/// The paths of the kernel its output may name.
fn paths(kernel: &AnyKernel) -> KernelPaths {
    let Some(local) = kernel.as_local() else {
        return KernelPaths::default();
    };
    let layout = local.layout();
    KernelPaths {
        work_dir: layout.work_dir.display().to_string(),
        home_dir: layout.home_dir.display().to_string(),
        kernel_id: layout.id.clone(),
    }
}
