//! What a summary says about the run and the arm before any metric: ids,
//! model, stop rule, feedback, strategy, limits, executor, task counts.

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::kernel::ExecutorInfo;
use crate::record::{StopOn, SCHEMA_VERSION};
use crate::sandbox::SandboxLimits;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    pub schema_version: u32,
    pub run_id: String,
    pub suite: String,
    pub model: String,
    /// The model is a deterministic stand-in (oracle, replay), not a model.
    pub synthetic_model: bool,
    pub model_info: serde_json::Value,
    /// `clean`, `never` or `correct`.
    pub stop_on: String,
    /// `--stop-on correct`: stopping used ground truth.
    pub oracle_feedback: bool,
    /// `parsed`, `parsed+state`, `raw`, `minimal` or `none`.
    pub feedback: String,
    /// `repair` or `resample`.
    #[serde(default = "repair")]
    pub after_failure: String,
    /// The arm's name (its package strategy in a run of strategy arms).
    pub strategy: String,
    /// Kernels ran without confinement (`--unsafe-no-sandbox`).
    pub unconfined: bool,
    pub limits: SandboxLimits,
    /// Where the kernels ran; absent for local kernels.
    #[serde(default, skip_serializing_if = "ExecutorInfo::is_local")]
    pub executor: ExecutorInfo,
    pub tasks: usize,
    /// Tasks with every round recorded (the rest were interrupted).
    pub tasks_finished: usize,
    pub rounds: u32,
}

impl Header {
    pub(super) fn of(arm: &Arm) -> Header {
        let (run, provenance) = (&arm.config.spec, &arm.config.provenance);
        // The arm's own settings (the run's are the baseline's).
        let spec = run
            .arms()
            .into_iter()
            .find(|a| a.name == arm.strategy)
            .map_or_else(|| run.clone(), |a| a.spec);
        let model = arm.config.model_of(arm.strategy);
        Header {
            schema_version: SCHEMA_VERSION,
            run_id: provenance.run_id.clone(),
            suite: spec.tasks.suite.clone(),
            model,
            synthetic_model: provenance.synthetic_model,
            model_info: provenance.model_info.clone(),
            stop_on: spec.policy.stop_on.name().into(),
            oracle_feedback: spec.policy.stop_on == StopOn::Correct,
            feedback: spec.policy.feedback.name().into(),
            after_failure: spec.policy.after_failure.name().into(),
            strategy: arm.strategy.to_owned(),
            // A gateway's kernels are confined by the gateway, not unconfined.
            unconfined: !provenance.sandbox.confined && provenance.executor.is_local(),
            limits: spec.execution.limits,
            executor: provenance.executor.clone(),
            tasks: arm.tasks.len(),
            tasks_finished: arm.count(|t| t.records.iter().any(|r| r.is_final())) as usize,
            rounds: spec.policy.rounds,
        }
    }
}

fn repair() -> String {
    "repair".into()
}
