//! The attempt record: everything about one round, one JSON line of
//! `results.jsonl`. Enough to resume a run and to re-score it offline.

use serde::{Deserialize, Serialize};

use super::InstallStep;

use crate::kernel::Outcome;
use crate::model::{Message, ServerTimings, Usage};
use crate::repair::extract::Extraction;
use crate::repair::masking::{MaskFlag, Unchecked};
use crate::task::check::Check;

use super::spec::StopOn;
use crate::repair::{ExecutionMode, FeedbackKind, FeedbackMode};

/// What kind of round this was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// The model replied and its code (if any) ran.
    Attempt,
    /// The harness could not do the round (model endpoint down after
    /// retries, kernel failed to start). Not a model error.
    InfraError,
}

/// Why a task stopped after this round (set on its last record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Non-oracle stopping: the code ran cleanly and produced an answer.
    #[serde(rename = "clean_answer")]
    Clean,
    /// Oracle stopping (`--stop-on correct`): the answer was correct.
    Correct,
    /// Every round was used.
    RoundsExhausted,
    /// `--max-task-tokens`: the task's cumulative tokens passed the budget.
    TokenBudget,
    /// The round could not be done; the task ends here.
    InfraError,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoundTimings {
    pub model: f64,
    pub exec: f64,
    pub total: f64,
    /// How long the task's kernel took to start (the round that first
    /// used it); it boots while the model writes round 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_start: Option<f64>,
    /// Install steps of the round (strategy `dynamic`), included in `exec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The arm the record belongs to (empty in journals written before
    /// arms had names of their own: the arm is then `strategy`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arm: String,
    /// Round 0 reused from this arm's: the same reply and execution
    /// outcome, so arms sharing round 0 differ in later rounds alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_from: Option<String>,
    /// The stop rule and feedback mode of the run, on every record so a
    /// record read alone says whether ground truth steered it.
    pub stop_on: StopOn,
    pub feedback: FeedbackMode,
    /// The arm's execution mode (`live`, left unsaid, keeps the kernel).
    #[serde(default, skip_serializing_if = "ExecutionMode::is_live")]
    pub execution: ExecutionMode,
    pub kind: RecordKind,
    /// Messages added this round (system and task on round 0, the repair
    /// message later); the conversation is their concatenation.
    pub prompt: Vec<Message>,
    pub reply: Option<String>,
    /// The reply kept the previous answer (the keep token after a review
    /// prompt); nothing ran.
    #[serde(default)]
    pub kept_answer: bool,
    /// What a synthetic model did on purpose (the fault `oracle:faults`
    /// injected), for accuracy by fault kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// What a synthetic model says it did this round (e.g. why it repaired
    /// or resent its code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub extraction: Option<Extraction>,
    pub code: Option<String>,
    pub outcome: Option<Outcome>,
    /// The check of the answer available after this round (carried forward
    /// from an earlier round when this one produced none).
    pub check: Option<Check>,
    /// `correct_i(r)`.
    pub correct: bool,
    /// This round's code produced an answer value (any plain value, read
    /// from this round only).
    pub answered: bool,
    /// The checker could read the answer available after this round as
    /// the expected kind of value (`parse@r`).
    #[serde(default)]
    pub parsed: bool,
    pub stop: Option<StopReason>,
    /// The message sent after this round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_kind: Option<FeedbackKind>,
    pub infra_error: Option<String>,
    /// Install steps (strategy `dynamic`): what was asked, decided,
    /// installed, and how long it took.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installs: Vec<InstallStep>,
    pub timings_ms: RoundTimings,
    pub tokens: Usage,
    /// What the task has spent up to and including this round.
    #[serde(default)]
    pub cumulative: Spent,
    /// Signs that this repair hid the error of the round before instead
    /// of fixing it: `None` when no check ran (not a repair of a failed
    /// round, the check failed, or a journal older than the check), so a
    /// clean check (`[]`) and no check stay apart in every rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masking: Option<Vec<MaskFlag>>,
    /// Why this repair of a failed round was not checked for masking (its
    /// `masking` is then `None`): either code unreadable, the parser's or
    /// the comparison's limits, or the check failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masking_unchecked: Option<Unchecked>,
    /// Where the model request's time went, as the server reported it
    /// (queue wait, prompt tokens evaluated and cached, generation);
    /// absent for servers that report nothing and synthetic models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// `--execution replay`: the earlier cells re-run in this round's
    /// fresh kernel before its code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// The names this round's code reads that only an earlier cell of the
    /// task defined (it relies on the kernel's state when not empty):
    /// checked on the rounds after round 0 of runs with execution-mode
    /// arms, `None` when not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_names: Option<Vec<String>>,
}

/// The replay of a round under `--execution replay`: the task's earlier
/// cells that ran without error, re-run silently in the round's fresh
/// kernel before its code.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replay {
    /// The rounds whose cells were re-run, in order.
    pub rounds: Vec<u32>,
    /// Their execution time (ms), apart from the round's `exec`.
    pub ms: f64,
    /// Rounds whose cell ran without error before and failed when re-run
    /// (the replay diverged): the round's code met another state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<u32>,
}

/// A task's cumulative spending up to a round: the budget view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spent {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub model_ms: f64,
    pub exec_ms: f64,
}

impl Spent {
    /// `self` plus one round's tokens and timings.
    pub fn plus(self, tokens: &Usage, timings: &RoundTimings) -> Spent {
        Spent {
            prompt_tokens: self.prompt_tokens.saturating_add(tokens.prompt()),
            completion_tokens: self.completion_tokens.saturating_add(tokens.completion()),
            model_ms: self.model_ms + timings.model,
            exec_ms: self.exec_ms + timings.exec,
        }
    }

    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

impl AttemptRecord {
    /// The last record of a task: the task is finished.
    pub fn is_final(&self) -> bool {
        self.stop.is_some()
    }

    pub fn executed(&self) -> bool {
        self.outcome.is_some()
    }

    /// The round's code failed with a `NameError` for a name only an
    /// earlier cell defined: under `fresh`, a failure for lack of state.
    pub fn lacked_state(&self) -> bool {
        let (Some(names), Some(outcome)) = (&self.state_names, &self.outcome) else {
            return false;
        };
        let Some(error) = &outcome.error else {
            return false;
        };
        error.ename == "NameError"
            && names
                .iter()
                .any(|n| error.evalue.contains(&format!("'{n}'")))
    }

    /// The record's arm (its strategy in journals older than arm names).
    pub fn arm_name(&self) -> &str {
        if self.arm.is_empty() {
            &self.strategy
        } else {
            &self.arm
        }
    }
}
