//! One case: a fresh kernel, the setup cell, the hostile cell, the next
//! cell, the leftovers, the harness, and a fresh kernel after it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::leftovers::{leftovers, PidNamespaces};
use super::{CaseResult, CheckConfig, HarnessState, RssSampler};
use crate::conformance::corpus::{Case, Setup};
use crate::conformance::expectation::{head, shorten};
use crate::kernel::{AnyKernel, ExecOptions, Executor, KernelOptions, KernelSpec, Outcome};
use crate::sandbox::{SandboxLimits, Verdict};

/// Extra time the executor gets beyond the case's own deadlines (interrupt
/// grace, kill, restart) before the check gives up on it.
const EXECUTOR_SLACK: Duration = Duration::from_secs(60);
/// Wall-clock limit of the follow-up `print(1)` cells.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs one case in a fresh kernel of `executor` and checks everything
/// around it, the harness's memory while it runs included.
pub async fn run_case(
    case: &Case,
    config: &CheckConfig,
    executor: &Executor,
    harness: &HarnessState,
    rss: &RssSampler,
) -> CaseResult {
    let started = Instant::now();
    let limits = case.limits.apply(&config.limits);
    let mut result = CaseResult::new(case, &limits);
    let watch = rss.watch(&case.id);
    run_case_into(case, config, executor, harness, &limits, &mut result).await;
    match watch.and_then(|w| w.finish()) {
        Ok(memory) => {
            if let Some(reason) = case.expectation.harness_failure(&memory) {
                result.fail(reason);
            }
            result.harness = Some(memory);
        }
        Err(e) => result.fail(format!("the harness's memory was not measured: {e}")),
    }
    result.pass = result.failures.is_empty();
    result.duration_ms = started.elapsed().as_secs_f64() * 1e3;
    result
}

async fn run_case_into(
    case: &Case,
    config: &CheckConfig,
    executor: &Executor,
    harness: &HarnessState,
    limits: &SandboxLimits,
    result: &mut CaseResult,
) {
    let spec = Arc::new(KernelSpec {
        threads: limits.threads(),
        ..(*config.spec).clone()
    });
    let options = KernelOptions {
        start: config.kernel_start,
        ..KernelOptions::enforcing(limits, true)
    };
    let mut kernel = match executor.start(spec.clone(), options.clone()).await {
        Ok(k) => k,
        Err(e) => return result.fail(format!("the kernel did not start: {e}")),
    };
    let id = kernel.id().to_string();
    result.kernel_id = Some(id.clone());
    result.started(&kernel);
    let mut namespaces = PidNamespaces::default();
    namespaces.record(&kernel);

    if let Some(setup) = &case.setup {
        run_setup(&mut kernel, setup, &case.id, result).await;
        namespaces.record(&kernel);
    }

    // The hostile cell.
    let exec = ExecOptions {
        timeout: limits.timeout,
        artifact_dir: None,
        artifact_prefix: case.id.clone(),
    };
    let budget = limits.timeout + limits.cpu_time + EXECUTOR_SLACK;
    match tokio::time::timeout(budget, kernel.execute(&case.code, &exec)).await {
        Ok(mut outcome) => {
            for a in &mut outcome.artifacts {
                a.base64 = None;
            }
            result.got = Some(outcome.verdict);
            result.flags = outcome.flags.clone();
            result.kill_ms = outcome.kill_ms;
            result.exec_ms = Some(outcome.timings_ms.total);
            if outcome.verdict != case.expect {
                result.fail(format!(
                    "expected verdict {} but got {}{}",
                    case.expect,
                    outcome.verdict,
                    describe(&outcome)
                ));
            }
            for reason in case.expectation.failures(&outcome) {
                result.fail(reason);
            }
            result.outcome = Some(outcome);
            result.started(&kernel);
        }
        Err(_) => result.fail(format!(
            "the executor did not return within {:.0} s",
            budget.as_secs_f64()
        )),
    }
    namespaces.record(&kernel);

    // The next cell in the same (possibly restarted) kernel.
    if let Err(reason) = probe(&mut kernel, &case.next_code, &case.next_stdout).await {
        result.fail(format!("next cell in the same kernel: {reason}"));
    }
    namespaces.record(&kernel);

    let id = kernel.id().to_string();
    kernel.shutdown().await;
    for reason in leftovers(executor, &id, &namespaces).await {
        result.fail(reason);
    }

    let now = HarnessState::now();
    if now.oom_score_adj != harness.oom_score_adj {
        result.fail(format!(
            "the harness's oom_score_adj changed from {} to {}",
            harness.oom_score_adj, now.oom_score_adj
        ));
    }
    if now.cgroup != harness.cgroup {
        result.fail(format!(
            "the harness's cgroup changed from {:?} to {:?}",
            harness.cgroup, now.cgroup
        ));
    }

    // A fresh kernel must still work.
    match executor.start(spec, options).await {
        Ok(mut fresh) => {
            let mut fresh_ns = PidNamespaces::default();
            fresh_ns.record(&fresh);
            if let Err(reason) = probe(&mut fresh, "print(1)", "1\n").await {
                result.fail(format!("fresh kernel: {reason}"));
            }
            let fresh_id = fresh.id().to_string();
            fresh.shutdown().await;
            for reason in leftovers(executor, &fresh_id, &fresh_ns).await {
                result.fail(format!("fresh kernel: {reason}"));
            }
        }
        Err(e) => result.fail(format!("a fresh kernel did not start: {e}")),
    }
}

/// A short account of an outcome for failure messages.
fn describe(o: &Outcome) -> String {
    let mut s = String::new();
    if let Some(e) = &o.error {
        let _ = write!(s, "; error {}: {}", e.ename, shorten(&e.evalue, 200));
    }
    if let Some(exit) = &o.exit {
        let _ = write!(
            s,
            "; exit code {:?} signal {}",
            exit.code,
            exit.signal_name.as_deref().unwrap_or("-")
        );
    }
    if !o.flags.is_empty() {
        let _ = write!(s, "; flags [{}]", o.flags.join(", "));
    }
    let _ = write!(s, "; {:.0} ms", o.timings_ms.total);
    s
}

/// Runs the case's setup cell (and the restart after it, if asked).
async fn run_setup(kernel: &mut AnyKernel, setup: &Setup, id: &str, result: &mut CaseResult) {
    let exec = ExecOptions {
        timeout: PROBE_TIMEOUT,
        artifact_dir: None,
        artifact_prefix: format!("{id}-setup"),
    };
    match tokio::time::timeout(
        PROBE_TIMEOUT + EXECUTOR_SLACK,
        kernel.execute(&setup.code, &exec),
    )
    .await
    {
        Ok(outcome) => {
            if let Some(want) = setup.expect.filter(|v| *v != outcome.verdict) {
                result.fail(format!(
                    "setup cell: expected verdict {want} but got {}{}",
                    outcome.verdict,
                    describe(&outcome)
                ));
            }
        }
        Err(_) => result.fail("the setup cell did not return".into()),
    }
    if setup.restart_before {
        if let Err(e) = kernel.restart().await {
            result.fail(format!("restart after the setup cell: {e}"));
        }
    }
}

/// Why a follow-up cell failed.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    /// `code` is the cell's first line, shortened.
    #[error("{code} did not return")]
    NoReturn { code: String },
    #[error("{code} gave {verdict} with stdout {stdout:?} (expected {expected:?}){details}")]
    Unexpected {
        code: String,
        verdict: Verdict,
        /// The start of what it printed.
        stdout: String,
        expected: String,
        /// The outcome's error, exit and flags ([`describe`]).
        details: String,
    },
}

/// Runs `code` and requires exactly `stdout` from it, with verdict `ok`.
async fn probe(kernel: &mut AnyKernel, code: &str, stdout: &str) -> Result<(), ProbeError> {
    let exec = ExecOptions {
        timeout: PROBE_TIMEOUT,
        artifact_dir: None,
        artifact_prefix: "probe".into(),
    };
    let outcome =
        match tokio::time::timeout(PROBE_TIMEOUT + EXECUTOR_SLACK, kernel.execute(code, &exec))
            .await
        {
            Ok(o) => o,
            Err(_) => {
                let code = shorten(code, 60);
                return Err(ProbeError::NoReturn { code });
            }
        };
    if outcome.verdict != Verdict::Ok || outcome.stdout != stdout {
        return Err(ProbeError::Unexpected {
            code: shorten(code, 60),
            verdict: outcome.verdict,
            stdout: head(&outcome.stdout, 200),
            expected: stdout.to_string(),
            details: describe(&outcome),
        });
    }
    Ok(())
}
