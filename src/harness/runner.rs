//! The scheduler that runs a run's tasks concurrently, each as an
//! [`Episode`] with its own fresh confined kernel.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::episode::Episode;
use super::journal::Journal;
use super::progress::Progress;
use super::HarnessError;
use crate::kernel::{KernelOptions, KernelSpec};
use crate::model::ModelClient;
use crate::record::{AttemptRecord, RunConfig};
use crate::repair::prompt::Templates;
use crate::sandbox::Sandbox;
use crate::task::Task;

/// Everything a task needs, shared by all tasks of a run.
pub struct Runner {
    pub config: Arc<RunConfig>,
    /// The run directory (journal, artifacts).
    pub out_dir: PathBuf,
    pub model: Arc<dyn ModelClient>,
    pub sandbox: Arc<dyn Sandbox>,
    pub spec: Arc<KernelSpec>,
    pub kernel_options: KernelOptions,
    pub templates: Arc<Templates>,
    pub journal: Arc<Journal>,
    pub progress: Arc<Progress>,
}

impl Runner {
    /// Runs every task (concurrently, up to the configured number).
    /// Stops early when `cancel` turns true (Ctrl-C): running tasks are
    /// aborted and awaited, so their kernels are killed before this returns;
    /// their unfinished rounds are redone by `--resume`.
    pub async fn run_all(
        self: Arc<Self>,
        tasks: Vec<Task>,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<(), HarnessError> {
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let mut running = tokio::task::JoinSet::new();
        let result = async {
            for task in tasks {
                let permit = tokio::select! {
                    p = slots.clone().acquire_owned() => p.map_err(|_| HarnessError::Interrupted)?,
                    _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
                };
                let runner = self.clone();
                running.spawn(async move {
                    let result = runner.run_task(&task).await;
                    drop(permit);
                    result
                });
                while let Some(done) = running.try_join_next() {
                    done.map_err(|e| HarnessError::Task(e.to_string()))??;
                }
            }
            loop {
                tokio::select! {
                    done = running.join_next() => match done {
                        Some(done) => done.map_err(|e| HarnessError::Task(e.to_string()))??,
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

    pub(super) fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        self.journal.append(record)?;
        self.progress.on_record(record);
        Ok(())
    }

    /// Where a task's plots go.
    pub(super) fn artifact_dir(&self, task_id: &str) -> PathBuf {
        self.out_dir.join("artifacts").join(sanitize(task_id))
    }

    /// All rounds of one task.
    pub async fn run_task(&self, task: &Task) -> Result<(), HarnessError> {
        Episode::begin(self, task)?.run().await
    }
}

/// A task id as a directory name.
pub fn sanitize(id: &str) -> PathBuf {
    PathBuf::from(
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>(),
    )
}
