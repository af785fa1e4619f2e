//! What a run writes down: its configuration (`run.json`) and one attempt
//! record per round (`results.jsonl`). The harness writes these; reports,
//! re-scoring and comparisons read them, and nothing else.

mod attempt;
mod install;
mod run;

pub use crate::repair::FeedbackMode;
pub use attempt::{AttemptRecord, FeedbackKind, RecordKind, RoundTimings, StopReason};
pub use install::{InstallStep, InstallTrigger, WheelRecord};
pub use run::{ArmImage, InstallOn, RunConfig, Selection, StopOn, SCHEMA_VERSION};
