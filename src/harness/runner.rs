//! What every task of a run shares: the model, the executor, the arms,
//! the templates, the journal and progress.

use std::path::PathBuf;
use std::sync::Arc;

use super::arm::Arm;
use super::error::HarnessError;
use super::journal::Journal;
use super::progress::Progress;
use crate::kernel::{Executor, KernelOptions};
use crate::model::ModelClient;
use crate::record::{artifacts, AttemptRecord, RunConfig};
use crate::repair::prompt::Templates;
use crate::sandbox::Sandbox;

/// Everything a task needs, shared by all tasks of a run.
pub struct Runner {
    pub config: Arc<RunConfig>,
    /// The run directory (journal, artifacts).
    pub out_dir: PathBuf,
    pub model: Arc<dyn ModelClient>,
    pub sandbox: Arc<dyn Sandbox>,
    /// Where the tasks' kernels run (locally in `sandbox`, or a gateway).
    pub executor: Executor,
    /// One per package strategy, in `--strategy` order; every task runs
    /// in every arm.
    pub arms: Vec<Arm>,
    pub kernel_options: KernelOptions,
    pub templates: Arc<Templates>,
    pub journal: Arc<Journal>,
    pub progress: Arc<Progress>,
}

impl Runner {
    pub(super) fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        self.journal.append(record)?;
        self.progress.on_record(record);
        Ok(())
    }

    /// Where a task's plots go (per arm when the run has several).
    pub(super) fn artifact_dir(&self, arm: &Arm, task_id: &str) -> PathBuf {
        let arm = (self.arms.len() > 1).then_some(arm.name.as_str());
        self.out_dir.join(artifacts::dir(arm, task_id))
    }
}
