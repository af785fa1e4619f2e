//! A run's configuration, written to `run.json` when the run starts and
//! read back by `--resume`, so a resumed run is the same run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::Generation;
use crate::sandbox::{SandboxInfo, SandboxLimits};

/// When a task stops before its last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum StopOn {
    /// Non-oracle (default): the code ran cleanly and produced an answer.
    #[value(name = "clean")]
    CleanAnswer,
    /// Oracle feedback: the answer is correct (uses ground truth; labelled).
    Correct,
}

/// Which tasks of the suite, reproducibly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub limit_tasks: Option<usize>,
    pub sample: Option<usize>,
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub schema_version: u32,
    pub run_id: String,
    pub retrace_version: String,
    pub created: String,
    pub out_dir: PathBuf,
    pub suite: String,
    pub selection: Selection,
    pub task_ids: Vec<String>,
    /// Rounds are 0..=rounds.
    pub rounds: u32,
    pub stop_on: StopOn,
    pub concurrency: usize,
    pub model: String,
    pub synthetic_model: bool,
    /// What the model client says about itself (for a local model: the
    /// file's sha256, the server version).
    #[serde(default)]
    pub model_info: serde_json::Value,
    pub generation: Generation,
    /// How packages reach the kernel: the image name.
    pub strategy: String,
    pub image_lock_hash: String,
    pub limits: SandboxLimits,
    pub sandbox: SandboxInfo,
    /// Characters of feedback per repair message.
    pub feedback_budget: usize,
}
