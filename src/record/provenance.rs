//! What a run turned out to be, recorded in `run.json` beside its spec.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
use crate::kernel::ExecutorInfo;
use crate::sandbox::SandboxInfo;
use crate::task::load::Skipped;

/// What the run was, beyond what was asked for: who made it and when, the
/// tasks as loaded, what the model, images, sandbox and executor turned out
/// to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    pub run_id: String,
    pub retrace_version: String,
    /// The commit the binary was built from (`retrace --version`'s, with
    /// `-dirty` when its tree differed); absent in runs older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrace_commit: Option<String>,
    pub created: String,
    /// Where the run was created; a resumed run uses the directory it is
    /// given, whatever this says.
    pub out_dir: PathBuf,
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
    /// The published scoring rules each task is judged by beside
    /// retrace's (`gsm8k`, `dabench`, `math_verify`, `minerva`), so a task
    /// never answered still counts, as wrong, in each rule's accuracy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_rules: BTreeMap<String, Vec<String>>,
    /// The model as its client names itself (`local:<name>`, `openai:<model>`, ...).
    pub model: String,
    pub synthetic_model: bool,
    /// What the model client says about itself (for a local model: the
    /// file's sha256, the server version, restarts of its server).
    #[serde(default)]
    pub model_info: serde_json::Value,
    /// The lock hash of the first arm's image.
    pub image_lock_hash: String,
    /// Each arm's image: lock hash and size on disk, by strategy.
    #[serde(default)]
    pub images: BTreeMap<String, ArmImage>,
    pub sandbox: SandboxInfo,
    /// Where the kernels ran (`local`, or a gateway with its URL and
    /// kernelspec).
    #[serde(default)]
    pub executor: ExecutorInfo,
    /// sha256 over every template's name and text as used.
    #[serde(default)]
    pub prompts_hash: String,
    /// Each arm's protocol fingerprint, by arm name: recorded when the run
    /// is written; a run.json without them gets them computed from its
    /// config when read ([`super::RunConfig`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fingerprints: BTreeMap<String, Fingerprint>,
    /// Wall time of the run's sessions so far (a resumed run adds its
    /// own), in ms; 0 until a session ends.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wall_ms: f64,
    /// `--round0-from`: the recorded run every task's round 0 came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round0_source: Option<Round0Source>,
}

/// The recorded run a run took its round 0 from, as it was when read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Round0Source {
    pub run_id: String,
    /// The recorded run's arm whose round 0 was taken.
    pub arm: String,
    /// The model that wrote that round 0 (as the recorded run names it).
    pub model: String,
    /// That arm's protocol fingerprint.
    pub fingerprint: Fingerprint,
}

impl Round0Source {
    /// What records of round 0 name as their source (`shared_from`).
    pub fn label(&self) -> String {
        format!("{}:{}", self.run_id, self.arm)
    }
}

impl Provenance {
    /// retrace's version as `retrace --version` printed it for this run:
    /// `0.1.0 (1a2b3c4d5e6f)` (the version alone in runs older than the
    /// recorded commit).
    pub fn version_line(&self) -> String {
        match &self.retrace_commit {
            Some(commit) => format!("{} ({commit})", self.retrace_version),
            None => self.retrace_version.clone(),
        }
    }

    /// When the run ended: its start plus its wall time (`None` when the
    /// recorded start does not parse).
    pub fn ended(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let started = chrono::DateTime::parse_from_rfc3339(&self.created).ok()?;
        let ms = chrono::Duration::milliseconds(self.wall_ms.max(0.0) as i64);
        started
            .checked_add_signed(ms)
            .map(|t| t.with_timezone(&chrono::Utc))
    }

    /// The commit the run's binary was built from and whether its tree
    /// differed; `None` when unrecorded or `unknown` (built outside git).
    pub fn commit(&self) -> Option<(&str, bool)> {
        let recorded = self.retrace_commit.as_deref()?;
        let (commit, dirty) = match recorded.strip_suffix("-dirty") {
            Some(c) => (c, true),
            None => (recorded, false),
        };
        let hex = !commit.is_empty() && commit.chars().all(|c| c.is_ascii_hexdigit());
        hex.then_some((commit, dirty))
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// The image an arm's kernels start from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmImage {
    pub name: String,
    pub lock_hash: String,
    /// The image directory's size on disk.
    pub bytes: u64,
}
