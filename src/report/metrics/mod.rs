//! Run metrics from the journal, with the definitions of DESIGN.md:
//! Acc@r with the answer carried forward after a task stops, recovery and
//! regression rates, exec-success@r, parse@r, kill rate by reason, infra
//! errors, latency percentiles and tokens. Proportions carry a 95% Wilson
//! interval. No task is ever dropped from a denominator.
//!
//! An arm's summary is a [`Header`] and one section per group of metrics, each
//! computed by its own small function over the arm ([`arm::Arm`]);
//! [`values`] lists every metric of an arm by name for the renderers that
//! loop over them.

mod answers;
mod arm;
mod budget;
mod code_origin;
pub(crate) mod code_text;
mod execution;
mod failure_classes;
mod header;
mod headline;
mod kernel_state;
mod kills;
mod list;
mod pass_at_k;
mod published;
mod repairs;
mod self_repair;
mod summary;
#[cfg(test)]
mod tests;
mod time_spent;
mod transitions;

pub use answers::{Answers, FailureFate, FaultAccuracy};
pub use budget::{accuracy_at, comparable, tokens_recorded, ArmAccuracy, BudgetPoint, BudgetRow};
pub use code_origin::{ArmOrigin, Authorship, CodeOrigin};
pub use execution::{Cost, Executions, KillRate, Latency, Tokens};
pub use failure_classes::{ClassRow, CORRECT, NOT_RECORDED};
pub use header::Header;
pub use headline::{headline, Headline};
pub use kernel_state::KernelState;
pub use kills::{kill_class, KillRecovery};
pub use list::{values, MetricValue, Value};
pub use pass_at_k::{pass_at_k, PassAtK};
pub use published::{Differing, PublishedAccuracy};
pub use repairs::{Repairs, Reviews};
pub use self_repair::SelfRepair;
pub use summary::ArmSummary;
pub use time_spent::TimeSpent;
pub use transitions::Transition;

use super::environment::EnvironmentMetrics;
use super::task_rounds::{self, TaskRounds};
use crate::record::{AttemptRecord, RunConfig};
use arm::Arm;

/// Every arm of a run summarized over its own records, in `--strategy`
/// order (the one arm of a one-strategy run takes every record).
pub fn summarize_arms(config: &RunConfig, records: &[AttemptRecord]) -> Vec<ArmSummary> {
    (task_rounds::by_arm(config, records).iter())
        .map(|(name, mine)| {
            let tasks = task_rounds::by_task(config, mine);
            summarize_arm(config, name, mine, &tasks)
        })
        .collect()
}

/// The run's arms in `--strategy` order: `fat,dynamic` → `fat`, `dynamic`.
pub fn arm_names(config: &RunConfig) -> Vec<String> {
    config.arm_names()
}

/// The summary of one arm: `records` are the arm's, `tasks` the same
/// grouped by task; one step per section.
fn summarize_arm(
    config: &RunConfig,
    strategy: &str,
    records: &[&AttemptRecord],
    tasks: &[TaskRounds],
) -> ArmSummary {
    let arm = Arm {
        config,
        strategy,
        records,
        tasks,
    };
    let image_bytes = config.provenance.images.get(strategy).map(|i| i.bytes);
    ArmSummary {
        header: Header::of(&arm),
        answers: Answers::of(&arm),
        repairs: Repairs::of(&arm),
        execution: Executions::of(&arm),
        cost: Cost::of(&arm),
        self_repair: SelfRepair::of(&arm),
        environment: EnvironmentMetrics::of(strategy, &arm.ours(), tasks, image_bytes),
        kernel_state: KernelState::of(&arm),
    }
}
