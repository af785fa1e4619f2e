//! The scheduler: a run's tasks, concurrently up to the run's
//! concurrency, each as an [`Episode`] with its own fresh confined kernel.

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::episode::Episode;
use super::error::HarnessError;
use super::runner::Runner;
use crate::task::Task;

/// Runs every task (concurrently, up to the configured number).
/// Stops early when `cancel` turns true (Ctrl-C): running tasks are
/// aborted and awaited, so their kernels are killed before this returns;
/// their unfinished rounds are redone by `--resume`.
pub(super) async fn run_all(
    runner: Arc<Runner>,
    tasks: Vec<(usize, Task)>,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), HarnessError> {
    let slots = Arc::new(Semaphore::new(
        runner.config.spec.execution.concurrency.max(1),
    ));
    let mut running = tokio::task::JoinSet::new();
    let result = async {
        for (arm, task) in tasks {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.map_err(|_| HarnessError::Interrupted)?,
                _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
            };
            let runner = runner.clone();
            running.spawn(async move {
                let result = run_task(&runner, arm, &task).await;
                drop(permit);
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

/// All rounds of one task in one arm.
async fn run_task(runner: &Runner, arm: usize, task: &Task) -> Result<(), HarnessError> {
    Episode::begin(runner, &runner.arms[arm], task)?.run().await
}
