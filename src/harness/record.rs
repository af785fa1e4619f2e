//! The attempt record: everything about one round, one JSON line of
//! `results.jsonl`. Enough to resume a run and to re-score it offline.

use serde::{Deserialize, Serialize};

use crate::kernel::Outcome;
use crate::model::{Message, Usage};
use crate::repair::extract::Extraction;
use crate::task::check::Check;

/// Version of the record and summary formats.
pub const SCHEMA_VERSION: u32 = 1;

/// What kind of round this was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// The model replied and its code (if any) ran.
    Attempt,
    /// The harness could not do the round (model endpoint down after
    /// retries, kernel failed to start). Not a model error.
    InfraError,
}

/// Why a task stopped after this round (set on its last record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Non-oracle stopping: the code ran cleanly and produced an answer.
    CleanAnswer,
    /// Oracle stopping (`--stop-on correct`): the answer was correct.
    Correct,
    /// Every round was used.
    RoundsExhausted,
    /// The round could not be done; the task ends here.
    InfraError,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundTimings {
    pub model: f64,
    pub exec: f64,
    pub total: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub schema_version: u32,
    pub run_id: String,
    pub task_id: String,
    pub round: u32,
    pub model: String,
    /// The model is a deterministic stand-in (oracle, replay).
    pub synthetic_model: bool,
    /// How packages reach the kernel (the image name for now).
    pub strategy: String,
    pub kind: RecordKind,
    /// Messages added this round (system and task on round 0, the repair
    /// message later); the conversation is their concatenation.
    pub prompt: Vec<Message>,
    pub reply: Option<String>,
    pub extraction: Option<Extraction>,
    pub code: Option<String>,
    pub outcome: Option<Outcome>,
    /// The check of the answer available after this round (carried forward
    /// from an earlier round when this one produced none).
    pub check: Option<Check>,
    /// `correct_i(r)`.
    pub correct: bool,
    /// An answer could be extracted from this round (`parse@r`).
    pub answered: bool,
    pub stop: Option<StopReason>,
    pub infra_error: Option<String>,
    pub timings_ms: RoundTimings,
    pub tokens: Usage,
}

impl AttemptRecord {
    /// The last record of a task: the task is finished.
    pub fn is_final(&self) -> bool {
        self.stop.is_some()
    }

    pub fn executed(&self) -> bool {
        self.outcome.is_some()
    }
}
