//! The scheduler: a run's tasks, concurrently up to the run's
//! concurrency, each as an [`Episode`] with its own fresh confined kernel.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::arm::Arm;
use super::episode::Episode;
use super::error::HarnessError;
use super::journal::ArmTask;
use super::round0_source::Round0s;
use super::runner::Runner;
use crate::record::AttemptRecord;
use crate::task::Task;

/// One task in the arms of one round-0 group that still have to run it.
pub(super) struct Job {
    /// Arm indexes, in the run's order; the first does round 0 unless
    /// `round0` is known.
    arms: Vec<usize>,
    task: Task,
    /// The group's round 0 from an arm that finished the task earlier.
    round0: Option<AttemptRecord>,
}

impl Job {
    /// `task` in arm `arm` alone, from `round0` (the false-alarm control).
    pub(super) fn from_round0(arm: usize, task: Task, round0: AttemptRecord) -> Job {
        Job {
            arms: vec![arm],
            task,
            round0: Some(round0),
        }
    }

    /// The (arm, task) pairs the job runs.
    pub(super) fn pairs(&self) -> usize {
        self.arms.len()
    }
}

/// The jobs of a run, task by task and group by group (an interrupted run
/// has compared arms on the same tasks), leaving out arms that `finished`.
/// A group's round 0 is the one an arm of it finished earlier, else the
/// one `recorded` (`--round0-from`) has.
pub(super) fn jobs(
    arms: &[Arm],
    tasks: &[Task],
    finished: &HashSet<ArmTask>,
    round0s: Vec<AttemptRecord>,
    recorded: &Round0s,
) -> Vec<Job> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, arm) in arms.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|g| arms[g[0]].round0_key == arm.round0_key)
        {
            Some(group) => group.push(i),
            None => groups.push(vec![i]),
        }
    }
    let is_done = |a: usize, task: &Task| {
        finished.contains(&ArmTask {
            arm: arms[a].name.clone(),
            task_id: task.id.clone(),
        })
    };
    let mut jobs = Vec::new();
    for task in tasks {
        for group in &groups {
            let todo: Vec<usize> = group
                .iter()
                .copied()
                .filter(|&a| !is_done(a, task))
                .collect();
            if todo.is_empty() {
                continue;
            }
            let round0 = group
                .iter()
                .find(|&&a| is_done(a, task))
                .and_then(|&a| {
                    round0s
                        .iter()
                        .find(|r| r.task_id == task.id && r.arm_name() == arms[a].name)
                        .cloned()
                })
                .or_else(|| recorded.get(&task.id).cloned());
            jobs.push(Job {
                arms: todo,
                task: task.clone(),
                round0,
            });
        }
    }
    jobs
}

/// Runs every task (concurrently, up to the configured number).
/// Stops early when `cancel` turns true (Ctrl-C): running tasks are
/// aborted and awaited, so their kernels are killed before this returns;
/// their unfinished rounds are redone by `--resume`.
pub(super) async fn run_all(
    runner: Arc<Runner>,
    jobs: Vec<Job>,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), HarnessError> {
    let slots = Arc::new(Semaphore::new(
        runner.config.spec.execution.concurrency.max(1),
    ));
    let mut running = tokio::task::JoinSet::new();
    let result = async {
        for job in jobs {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.map_err(|_| HarnessError::Interrupted)?,
                _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
            };
            let runner = runner.clone();
            running.spawn(async move {
                let result = run_job(&runner, job).await;
                drop(permit);
                // The task's kernel, conversation and outcome are freed by
                // now: without this their pages stay resident and a long
                // run's RSS creeps up (see util::heap).
                crate::util::heap::release_free_memory();
                result
            });
            while let Some(done) = running.try_join_next() {
                done??;
            }
        }
        loop {
            tokio::select! {
                done = running.join_next() => match done {
                    Some(done) => done??,
                    None => return Ok(()),
                },
                _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
            }
        }
    }
    .await;
    running.abort_all();
    while running.join_next().await.is_some() {}
    result
}

/// All rounds of one task in each arm of its job, one arm after the
/// other: the first arm's round 0 (or the one the journal has) is every
/// other arm's.
async fn run_job(runner: &Runner, job: Job) -> Result<(), HarnessError> {
    let mut round0 = job.round0;
    for &arm in &job.arms {
        let first = Episode::begin(runner, &runner.arms[arm], &job.task, round0.as_ref())?
            .run()
            .await?;
        round0 = round0.or(first);
    }
    Ok(())
}
