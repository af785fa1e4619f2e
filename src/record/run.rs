//! A run's configuration, written to `run.json` when the run starts and
//! read back by `--resume`, so a resumed run is the same run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::Generation;
use crate::repair::FeedbackMode;
use crate::sandbox::{SandboxInfo, SandboxLimits};
use crate::task::load::Skipped;

/// Version of the record and summary formats.
pub const SCHEMA_VERSION: u32 = 2;

/// When a task stops before its last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum StopOn {
    /// Non-oracle (default): the code ran cleanly and produced an answer
    /// value of any type; the checker decides correctness afterwards.
    #[value(name = "clean")]
    #[serde(alias = "clean_answer")]
    Clean,
    /// Every task runs all rounds; after a clean round the model is asked
    /// to review its answer (intrinsic self-correction).
    Never,
    /// Oracle feedback: stop on a correct answer; a clean wrong answer is
    /// reported as wrong (uses ground truth; labelled everywhere).
    Correct,
}

/// What makes the `dynamic` strategy install a package.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum InstallOn {
    /// The model's own `pip install` lines (intercepted; they never run).
    Explicit,
    /// A `ModuleNotFoundError` for a module the image lacks.
    Missing,
    /// Both.
    #[default]
    Both,
}

impl InstallOn {
    pub fn explicit(self) -> bool {
        self != InstallOn::Missing
    }

    pub fn missing(self) -> bool {
        self != InstallOn::Explicit
    }
}

impl StopOn {
    pub fn name(self) -> &'static str {
        match self {
            StopOn::Clean => "clean",
            StopOn::Never => "never",
            StopOn::Correct => "correct",
        }
    }
}

/// Which tasks of the suite, reproducibly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub limit_tasks: Option<usize>,
    pub sample: Option<usize>,
    pub seed: u64,
}

/// The image an arm's kernels start from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmImage {
    pub name: String,
    pub lock_hash: String,
    /// The image directory's size on disk.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub schema_version: u32,
    pub run_id: String,
    pub retrace_version: String,
    pub created: String,
    /// Where the run was created; a resumed run uses the directory it is
    /// given, whatever this says.
    pub out_dir: PathBuf,
    pub suite: String,
    pub selection: Selection,
    /// `--skip-invalid`: flawed dataset records were left out (and are
    /// left out again on resume) instead of stopping the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_invalid: bool,
    /// The records `--skip-invalid` left out: file, line, id, reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    pub task_ids: Vec<String>,
    /// sha256 of each selected task as loaded (question, files' contents,
    /// expected, reference): a resume refuses a changed dataset.
    #[serde(default)]
    pub task_hashes: BTreeMap<String, String>,
    /// Each selected task's tags, so reports can filter by them.
    #[serde(default)]
    pub task_tags: BTreeMap<String, Vec<String>>,
    /// Rounds are 0..=rounds.
    pub rounds: u32,
    pub stop_on: StopOn,
    #[serde(default)]
    pub feedback: FeedbackMode,
    pub concurrency: usize,
    /// The model as recorded (`local:<name>`, `openai:<model>`, ...).
    pub model: String,
    /// The `--model` value that builds the client again on resume.
    #[serde(default)]
    pub model_spec: String,
    pub synthetic_model: bool,
    /// What the model client says about itself (for a local model: the
    /// file's sha256, the server version).
    #[serde(default)]
    pub model_info: serde_json::Value,
    pub generation: Generation,
    /// Failing rounds' plots are sent to the model as images.
    #[serde(default)]
    pub vision: bool,
    /// How packages reach the kernel: one strategy (`fat`, `dynamic`,
    /// `slim`) or several, comma-separated, one arm each on the same
    /// tasks; the first is the baseline the others are compared with.
    pub strategy: String,
    /// The lock hash of the first arm's image.
    pub image_lock_hash: String,
    /// What triggers installs in a `dynamic` arm.
    #[serde(default)]
    pub install_on: InstallOn,
    /// Each arm's image: lock hash and size on disk, by strategy.
    #[serde(default)]
    pub images: BTreeMap<String, ArmImage>,
    pub limits: SandboxLimits,
    pub sandbox: SandboxInfo,
    /// Where the kernels ran (`local`, or a gateway with its URL and
    /// kernelspec); `local` in runs made before there was a choice.
    #[serde(default)]
    pub executor: crate::kernel::ExecutorInfo,
    /// Characters of feedback per repair message.
    pub feedback_budget: usize,
    /// `--prompts DIR`, when the templates were overridden.
    #[serde(default)]
    pub prompts_dir: Option<PathBuf>,
    /// sha256 over every template's name and text as used.
    #[serde(default)]
    pub prompts_hash: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A run.json written before `--skip-invalid` existed.
    fn old_run_json() -> serde_json::Value {
        json!({
            "schema_version": SCHEMA_VERSION,
            "run_id": "t", "retrace_version": "0", "created": "now", "out_dir": "x",
            "suite": "s", "selection": {"limit_tasks": null, "sample": null, "seed": 0},
            "task_ids": ["a"], "rounds": 0, "stop_on": "clean", "concurrency": 1,
            "model": "m", "synthetic_model": false,
            "generation": {"temperature": 0.0, "max_tokens": 1, "request_timeout": 1.0, "max_retries": 0},
            "strategy": "fat", "image_lock_hash": "h", "limits": SandboxLimits::default(),
            "sandbox": {"confined": true, "mode": "test", "notes": []}, "feedback_budget": 100
        })
    }

    #[test]
    fn skipped_records_round_trip_and_old_run_json_still_loads() {
        let mut config: RunConfig = serde_json::from_value(old_run_json()).unwrap();
        assert!(!config.skip_invalid);
        assert!(config.skipped.is_empty());
        let text = serde_json::to_string(&config).unwrap();
        assert!(
            !text.contains("skip"),
            "nothing new written when unused: {text}"
        );

        config.skip_invalid = true;
        config.skipped = vec![Skipped {
            id: None,
            file: "data/test.jsonl".into(),
            line: 3,
            reason: "invalid JSON at column 9: EOF while parsing an object".into(),
        }];
        let back: RunConfig =
            serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
    }
}
