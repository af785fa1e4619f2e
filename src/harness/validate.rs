//! `tasks validate`: every reference solution runs through the real confined
//! executor and must be checked correct.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::answer::symbolic;
use super::arm::ArmKernels;
use super::math_checker::MathChecker;
use super::packages::Activated;
use crate::kernel::{ExecOptions, Executor, KernelOptions, KernelSpec};
use crate::record::InstallStep;
use crate::sandbox::Verdict;
use crate::task::check::Check;
use crate::task::score::score;
use crate::task::{Expected, Task};

#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub task_id: String,
    pub correct: bool,
    pub verdict: Option<Verdict>,
    pub check: Option<Check>,
    /// Why the reference could not be checked (no reference, kernel failure,
    /// the reference raised).
    pub problem: Option<String>,
    pub ms: f64,
    /// Install steps (strategy `dynamic`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub installs: Vec<InstallStep>,
}

/// Validates tasks in `arm`'s kernels (a `dynamic` arm installs what the
/// references need), `jobs` at a time; results are in task order. A task
/// whose answer is LaTeX is checked by `math` (the symbolic checker): its
/// expected answer must be equivalent to itself before its reference's
/// answer is checked.
pub async fn validate(
    tasks: Vec<Task>,
    arm: Arc<ArmKernels>,
    math: Option<Arc<MathChecker>>,
    executor: Executor,
    options: KernelOptions,
    timeout: Duration,
    jobs: usize,
) -> Vec<Validation> {
    let slots = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut running = tokio::task::JoinSet::new();
    let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let (arm, executor, options, slots, math) = (
            arm.clone(),
            executor.clone(),
            options.clone(),
            slots.clone(),
            math.clone(),
        );
        running.spawn(async move {
            let _permit = slots.acquire_owned().await;
            let v = match self_equivalent(math.as_deref(), &task).await {
                Some(problem) => Validation::failed(&task.id, problem),
                None => {
                    validate_one(task, &arm, math.as_deref(), &executor, options, timeout).await
                }
            };
            (i, v)
        });
    }
    let mut results: Vec<Option<Validation>> = vec![None; ids.len()];
    while let Some(joined) = running.join_next().await {
        // A task whose validation panicked keeps its place (filled below);
        // the others are still collected.
        if let Ok((i, v)) = joined {
            results[i] = Some(v);
        }
    }
    results
        .into_iter()
        .zip(ids)
        .map(|(slot, task_id)| {
            slot.unwrap_or_else(|| {
                Validation::failed(
                    &task_id,
                    "the validation itself panicked on this task".into(),
                )
            })
        })
        .collect()
}

impl Validation {
    fn failed(task_id: &str, problem: String) -> Validation {
        Validation {
            task_id: task_id.to_string(),
            correct: false,
            verdict: None,
            check: None,
            problem: Some(problem),
            ms: 0.0,
            installs: Vec::new(),
        }
    }
}

/// Why a LaTeX task's expected answer is not equivalent to itself under
/// the checker (given as the string a model would leave), if it is not:
/// a dataset answer the checker cannot read would score every model wrong.
async fn self_equivalent(math: Option<&MathChecker>, task: &Task) -> Option<String> {
    let Expected::Math { latex } = &task.expected else {
        return None;
    };
    let Some(math) = math else {
        return Some("no symbolic checker for a LaTeX answer".into());
    };
    let as_string = serde_json::to_string(latex).unwrap_or_default();
    let verdict = math.check(latex, Some(&as_string)).await;
    (!verdict.expected_parsed || !verdict.retrace.correct).then(|| {
        format!(
            "the expected answer `{latex}` is not equivalent to itself under the checker ({})",
            verdict.retrace.rule
        )
    })
}

async fn validate_one(
    task: Task,
    arm: &ArmKernels,
    math: Option<&MathChecker>,
    executor: &Executor,
    options: KernelOptions,
    timeout: Duration,
) -> Validation {
    let started = std::time::Instant::now();
    let mut v = Validation {
        task_id: task.id.clone(),
        correct: false,
        verdict: None,
        check: None,
        problem: None,
        ms: 0.0,
        installs: Vec::new(),
    };
    let Some(reference) = task.reference.clone() else {
        v.problem = Some("the task has no reference solution".into());
        return v;
    };
    let spec = Arc::new(KernelSpec {
        files: task.files.clone(),
        ..(*arm.kernel).clone()
    });
    let mut kernel = match executor.start(spec, options).await {
        Ok(k) => k,
        Err(e) => {
            v.problem = Some(format!("kernel failed to start: {e}"));
            return v;
        }
    };
    let exec = ExecOptions {
        timeout,
        ..Default::default()
    };
    let outcome = match &arm.packages {
        Some(packages) => {
            let mut activated = Activated::default();
            let run = packages
                .run_cell(&mut kernel, &mut activated, &reference, &exec)
                .await;
            v.installs = run.steps;
            run.outcome
        }
        None => kernel.execute(&reference, &exec).await,
    };
    if let Some(why) = &outcome.infra_error {
        kernel.discard().await;
        v.problem = Some(format!("executor: {why}"));
        v.ms = started.elapsed().as_secs_f64() * 1e3;
        return v;
    }
    kernel.discard().await;
    v.verdict = Some(outcome.verdict);
    if outcome.succeeded() {
        // Scored as a live round is: an answer retrace does not read (a
        // DataFrame, say) is no answer, whatever stdout holds.
        let answer = outcome.answer.as_ref().and_then(|a| a.checkable());
        let symbolic = symbolic(math, &task, answer).await;
        match score(&task, None, answer, &outcome.stdout, symbolic.as_ref()) {
            Some(c) => {
                v.correct = c.correct;
                if !c.correct {
                    v.problem = Some(format!(
                        "answer {:?} does not match ({})",
                        c.extracted.as_deref().unwrap_or("<none>"),
                        c.rule
                    ));
                }
                v.check = Some(c);
            }
            None => v.problem = Some("the reference left no answer retrace reads".into()),
        }
    } else {
        let e = outcome.error.as_ref();
        v.problem = Some(format!(
            "the reference ended with {}: {}",
            outcome.verdict,
            e.map(|e| format!("{}: {}", e.ename, e.evalue))
                .unwrap_or_default()
        ));
    }
    v.ms = started.elapsed().as_secs_f64() * 1e3;
    v
}
