//! Run metrics from the journal, with the definitions of DESIGN.md:
//! Acc@r with the answer carried forward after a task stops, recovery and
//! regression rates, exec-success@r, parse@r, kill rate by reason, infra
//! errors, latency percentiles and tokens. Proportions carry a 95% Wilson
//! interval. No task is ever dropped from a denominator.
//!
//! A summary is a [`Header`] and one section per group of metrics, each
//! computed by its own small function over the arm ([`arm::Arm`]);
//! [`values`] lists every metric of an arm by name for the renderers that
//! loop over them.

mod answers;
mod arm;
mod budget;
mod execution;
mod failure_classes;
mod header;
mod headline;
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
pub use budget::{accuracy_at, tokens_recorded, ArmAccuracy, BudgetPoint, BudgetRow};
pub use execution::{Cost, Executions, KillRate, Latency, Tokens};
pub use failure_classes::{ClassRow, CORRECT, NOT_RECORDED};
pub use header::Header;
pub use headline::{headline, Headline};
pub use list::{values, MetricValue, Value};
pub use pass_at_k::{pass_at_k, PassAtK};
pub use published::{Differing, PublishedAccuracy};
pub use repairs::{Repairs, Reviews};
pub use self_repair::SelfRepair;
pub use summary::{ArmSummary, Summary};
pub use time_spent::TimeSpent;
pub use transitions::Transition;

use super::environment::EnvironmentMetrics;
use super::strategies;
use super::task_rounds::{self, TaskRounds};
use crate::record::{AttemptRecord, RunConfig};
use arm::Arm;

/// Computes the summary of a run from its records. With several package
/// strategies (`fat,dynamic`), every arm is summarized over its own records
/// and the top level is the first arm's (the baseline), with every arm in
/// `arms` and the paired comparison in `comparison`.
pub fn summarize(config: &RunConfig, records: &[AttemptRecord]) -> Summary {
    let by_arm = task_rounds::by_arm(config, records);
    let names: Vec<String> = by_arm.iter().map(|(name, _)| name.clone()).collect();
    if let [(name, all)] = by_arm.as_slice() {
        let tasks = task_rounds::by_task(config, all);
        let baseline = summarize_arm(config, name, all, &tasks);
        return Summary {
            accuracy_at_budget: budget::comparable(&[(name, &baseline)]),
            baseline,
            arms: Vec::new(),
            comparison: None,
            time: TimeSpent::of(config, records),
        };
    }
    let mut arms = Vec::with_capacity(by_arm.len());
    let mut arm_tasks = Vec::with_capacity(by_arm.len());
    for (name, mine) in &by_arm {
        let tasks = task_rounds::by_task(config, mine);
        arms.push(summarize_arm(config, name, mine, &tasks));
        arm_tasks.push((name.clone(), tasks));
    }
    let comparison = strategies::compare(config.spec.policy.rounds as usize, &arm_tasks);
    let named: Vec<(&str, &ArmSummary)> = names.iter().map(String::as_str).zip(&arms).collect();
    Summary {
        accuracy_at_budget: budget::comparable(&named),
        baseline: arms[0].clone(),
        arms,
        comparison: Some(comparison),
        time: TimeSpent::of(config, records),
    }
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
    }
}
