//! Runs the hostile corpus through the real confined executor and checks,
//! case by case, what the reference asks of a sandbox:
//!
//! * a setup cell, when the case has one, runs first in the same kernel
//!   (round 0 leaving hostile state), optionally followed by a restart;
//! * the verdict is the expected one and the outcome meets the case's other
//!   expectations (flags, limits that fired, exception, errno, text printed
//!   or not printed, answer);
//! * the next cell in the same (possibly restarted) kernel prints exactly
//!   what it should, promptly;
//! * after `shutdown()` no process of that kernel is left (by command line,
//!   by cgroup membership and by PID namespace) and no cgroup directory
//!   named after it remains in any hierarchy;
//! * the harness is unharmed: its own `oom_score_adj` and cgroup are what
//!   they were before the case;
//! * a fresh kernel still runs `print(1)`;
//! * the harness's resident memory grew by no more than the case's bound
//!   while it ran ([`RssSampler`]; with several jobs the figure includes
//!   the cases running alongside, so it bounds the case from above, and a
//!   case allowed more than the default runs alone).
//!
//! Every case gets a fresh kernel with the command-line limits overridden
//! by the case's own `[limits]`.
//!
//! On a gateway ([`CheckConfig::gateway`]) only the cases whose outcome
//! retrace establishes run ([`remote_reason`] says why the others do not):
//! from its side of the socket, or, with retrace's kernelspec, from the
//! host evidence its launcher reports; leftovers are checked by asking the
//! gateway whether it still has the kernel.

pub mod benign;
mod case;
mod harness;
mod leftovers;
mod remote;
mod render;
mod result;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::corpus::Case;
use crate::kernel::gateway::Gateway;
use crate::kernel::{Executor, KernelSpec};
use crate::sandbox::{Confined, SandboxError, SandboxInfo, SandboxLimits};

pub use crate::conformance::rss::{HarnessMemory, RssError, RssSampler, MIB};
pub use case::run_case;
pub use harness::HarnessState;
pub use leftovers::cgroup_dirs_named;
pub use remote::remote_reason;
pub use render::{junit, row, summary_line, table, JUNIT_SUITE};
pub use result::{CaseResult, CheckReport, NotApplicable, Summary};

/// Everything a check run needs besides the cases.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Limits of every case unless the case overrides them.
    pub limits: SandboxLimits,
    /// The retrace binary, re-executed as each kernel's init.
    pub init_exe: PathBuf,
    /// Image and kernel directory root (threads are set per case).
    pub spec: Arc<KernelSpec>,
    /// Cases run at the same time.
    pub jobs: usize,
    /// How the cases' kernels start.
    pub kernel_start: crate::kernel::KernelStart,
    /// Run the cases on this gateway instead of in local confined kernels.
    pub gateway: Option<Arc<Gateway>>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No confinement on this host: nothing can be checked.
    #[error(transparent)]
    Unavailable(SandboxError),
}

/// Runs `run` on every item, `jobs` permits shared among them (an item
/// takes `weight(item)` of them); `on_done` sees each result as it
/// completes. Slots come back in the order of `items`; a slot whose task
/// panicked is `None` (a panic must not hide the other results).
pub(crate) async fn run_jobs<T, F, Fut>(
    items: Vec<T>,
    jobs: usize,
    weight: impl Fn(&T) -> usize,
    on_done: Arc<dyn Fn(&CaseResult) + Send + Sync>,
    run: F,
) -> Vec<Option<CaseResult>>
where
    T: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = CaseResult> + Send + 'static,
{
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let count = items.len();
    for (index, item) in items.into_iter().enumerate() {
        let need = u32::try_from(weight(&item).clamp(1, jobs.max(1))).unwrap_or(u32::MAX);
        let (permits, on_done) = (permits.clone(), on_done.clone());
        let task = run(item);
        set.spawn(async move {
            let _permits = permits
                .acquire_many_owned(need)
                .await
                .expect("semaphore open");
            let result = task.await;
            on_done(&result);
            (index, result)
        });
    }
    let mut slots: Vec<Option<CaseResult>> = vec![None; count];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((index, result)) => slots[index] = Some(result),
            Err(e) => eprintln!("a check task failed: {e}"),
        }
    }
    slots
}

/// Runs `cases` with at most `config.jobs` at a time; `on_done` sees each
/// result as it completes. Results come back in the order of `cases`.
pub async fn run(
    cases: &[Case],
    config: &CheckConfig,
    on_done: Arc<dyn Fn(&CaseResult) + Send + Sync>,
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    let (executor, sandbox, cases, not_applicable) = match &config.gateway {
        None => {
            // One sandbox for every case (each jail gets the case's limits),
            // set up before any case runs: fails closed, and sets the
            // harness's own OOM score, which every case is then compared
            // against.
            let confined =
                Arc::new(Confined::open(config.init_exe.clone()).map_err(CheckError::Unavailable)?);
            let info = crate::sandbox::Sandbox::info(confined.as_ref());
            (Executor::Local(confined), info, cases.to_vec(), Vec::new())
        }
        Some(gateway) => {
            let (remote, skipped): (Vec<&Case>, Vec<&Case>) = cases
                .iter()
                .partition(|c| remote_reason(c, gateway.info()).is_none());
            let not_applicable = skipped
                .into_iter()
                .map(|c| NotApplicable {
                    id: c.id.clone(),
                    reason: remote_reason(c, gateway.info()).unwrap_or_default(),
                })
                .collect();
            let launcher = gateway.info().retrace_launcher;
            let whose = if launcher {
                "confined on their hosts by retrace's launcher"
            } else {
                "confinement is the gateway's"
            };
            let info = SandboxInfo {
                confined: launcher,
                mode: "gateway".into(),
                notes: vec![format!("kernels on {}: {whose}", gateway.info().url)],
            };
            let remote = remote.into_iter().cloned().collect();
            (
                Executor::Gateway(gateway.clone()),
                info,
                remote,
                not_applicable,
            )
        }
    };
    let cases = &cases[..];
    let harness = HarnessState::now();
    let rss = Arc::new(RssSampler::start());

    let jobs = config.jobs.max(1);
    let slots = run_jobs(
        cases.to_vec(),
        jobs,
        // A case allowed more harness memory than the default runs alone:
        // overlapping, its growth would be charged to the cases alongside
        // it as well.
        |case: &Case| {
            if case.expectation.harness_heavy() {
                jobs
            } else {
                1
            }
        },
        on_done,
        {
            let (config, executor) = (config.clone(), executor.clone());
            move |case: Case| {
                let (config, executor) = (config.clone(), executor.clone());
                let (harness, rss) = (harness.clone(), rss.clone());
                async move { run_case(&case, &config, &executor, &harness, &rss).await }
            }
        },
    )
    .await;
    let results: Vec<CaseResult> = slots
        .into_iter()
        .zip(cases)
        .map(|(slot, case)| {
            slot.unwrap_or_else(|| {
                let mut r = CaseResult::new(case, &case.limits.apply(&config.limits));
                r.fail("the check itself panicked while running this case".into());
                r
            })
        })
        .collect();
    let executor_info = executor.info();
    drop(executor);
    Ok(CheckReport {
        sandbox,
        executor: executor_info,
        not_applicable,
        limits: config.limits,
        jobs,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        summary: Summary::of(&results),
        results,
    })
}
