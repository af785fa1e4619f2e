//! What a run writes down: its configuration (`run.json`) and one attempt
//! record per round (`results.jsonl`). The harness writes these; reports,
//! re-scoring and comparisons read them, and nothing else.

pub mod artifacts;
mod attempt;
pub mod false_alarm;
mod fingerprint;
mod install;
mod legacy;
mod provenance;
mod run;
mod spec;

pub use crate::repair::{ExecutionMode, FeedbackKind, FeedbackMode};
pub use attempt::{AttemptRecord, RecordKind, Replay, RoundTimings, Spent, StopReason};
pub use fingerprint::{covers, Difference, Fingerprint};
pub use install::{InstallStep, InstallTrigger, WheelRecord};
pub use provenance::{ArmImage, Provenance, Round0Source};
pub use run::{RunConfig, RunConfigError, RUN_SCHEMA_VERSION, SCHEMA_VERSION};
pub use spec::{
    AfterFailure, ArmAxes, ArmSpec, Execution, ExecutorSpec, GatewaySpec, InstallOn, LoopPolicy,
    ModelSetup, PackageSpec, Round0From, RunSpec, Selection, StopOn, TaskSpec,
};
