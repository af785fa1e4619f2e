//! The execution mode of an arm: what the kernel of a repair round holds.
//! `live` keeps the task's kernel across rounds (a code interpreter's
//! kernel); `replay` gives each repair round a fresh kernel that first
//! re-runs, silently, the task's earlier cells that ran without error (a
//! notebook re-executed); `fresh` gives it a fresh kernel with nothing
//! carried (a process per call). Round 0 is the same in every mode.

use serde::{Deserialize, Serialize};

/// What the kernel of a repair round holds.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// The task's kernel is kept across its rounds: what earlier cells
    /// defined is there.
    #[default]
    Live,
    /// Each repair round gets a fresh kernel that first re-runs, silently,
    /// the task's earlier cells that ran without error.
    Replay,
    /// Each repair round gets a fresh kernel with nothing carried.
    Fresh,
}

impl ExecutionMode {
    pub fn name(self) -> &'static str {
        match self {
            ExecutionMode::Live => "live",
            ExecutionMode::Replay => "replay",
            ExecutionMode::Fresh => "fresh",
        }
    }

    /// Today's behaviour, which run.json leaves unsaid.
    pub fn is_live(&self) -> bool {
        *self == ExecutionMode::Live
    }

    /// A repair round starts in a new kernel.
    pub fn renews_kernel(self) -> bool {
        !self.is_live()
    }
}
