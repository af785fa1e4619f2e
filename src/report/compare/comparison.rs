//! One arm of BASE against one arm of NEW on the tasks both finished.

use serde::Serialize;

use super::pairing::{pair_tasks, unpaired, Side};
use super::protocol::{self, Vary};
use super::statistics::{self, LatencyRound, RoundComparison};
use crate::kernel::ExecutorInfo;
use crate::record::{AttemptRecord, Difference};
use crate::report::metrics::KillRate;
use crate::report::metrics::{summarize, Summary};
use crate::report::stats::{Percentiles, Rate};
use crate::report::task_rounds::by_task;

/// One arm of BASE against one arm of NEW.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub base_model: String,
    pub new_model: String,
    /// Where each side's kernels ran (absent when local).
    #[serde(skip_serializing_if = "ExecutorInfo::is_local")]
    pub base_executor: ExecutorInfo,
    #[serde(skip_serializing_if = "ExecutorInfo::is_local")]
    pub new_executor: ExecutorInfo,
    /// The protocol fingerprint fields whose values differ (`left` is
    /// BASE's, `right` NEW's).
    pub protocol_differences: Vec<Difference>,
    /// Those of them not declared: not named by `--vary`, and the sides
    /// are not two arms of one run. Not empty: the comparison compares
    /// more than was meant (written only with `--allow-differences`).
    pub undeclared_differences: Vec<Difference>,
    /// Tasks both sides finished, in BASE's order.
    pub shared_tasks: Vec<String>,
    /// Tasks of one side only (or unfinished on the other): not paired.
    pub unpaired_tasks: usize,
    /// r = 0..=max(K of BASE, K of NEW); a task's answer is carried past
    /// its last round.
    pub rounds: Vec<RoundComparison>,
    pub base_recovery: Option<Rate>,
    pub new_recovery: Option<Rate>,
    pub base_kill_rate: KillRate,
    pub new_kill_rate: KillRate,
    /// Round time (model + exec + the rest), all rounds.
    pub base_latency_total: Percentiles,
    pub new_latency_total: Percentiles,
    pub latency_by_round: Vec<LatencyRound>,
    /// Right in BASE, wrong in NEW at the last round.
    pub now_wrong: Vec<String>,
    /// Wrong in BASE, right in NEW at the last round.
    pub now_right: Vec<String>,
    /// Both sides summarized over the shared tasks (for the chart).
    #[serde(skip)]
    pub summaries: (Summary, Summary),
}

impl Comparison {
    /// The last round's comparison (there is always one).
    pub fn last(&self) -> &RoundComparison {
        self.rounds.last().expect("round 0 at least")
    }

    /// Takes the fields `vary` declares off the undeclared differences.
    pub fn declare(&mut self, vary: &Vary) {
        self.undeclared_differences
            .retain(|d| !vary.declares(&d.name));
    }
}

/// Pairs `base` and `new` on the tasks both finished. `None` when they
/// share none.
pub fn compare(base: &Side, new: &Side) -> Option<Comparison> {
    let base_refs: Vec<&AttemptRecord> = base.records.iter().collect();
    let new_refs: Vec<&AttemptRecord> = new.records.iter().collect();
    let b_tasks = by_task(&base.config, &base_refs);
    let n_tasks = by_task(&new.config, &new_refs);
    let (base_ids, new_ids) = (
        &base.config.provenance.task_ids,
        &new.config.provenance.task_ids,
    );
    let pairs = pair_tasks(base_ids, &b_tasks, new_ids, &n_tasks)?;
    let ids: Vec<String> = pairs.iter().map(|(id, _, _)| (*id).clone()).collect();
    let k = base
        .config
        .spec
        .policy
        .rounds
        .max(new.config.spec.policy.rounds) as usize;
    let (bc, br) = base.restricted(&ids);
    let (nc, nr) = new.restricted(&ids);
    let (bs, ns) = (summarize(&bc, &br), summarize(&nc, &nr));
    let (protocol_differences, undeclared_differences) = protocol::differences(base, new);
    Some(Comparison {
        base: base.label.clone(),
        new: new.label.clone(),
        base_model: base.config.provenance.model.clone(),
        new_model: new.config.provenance.model.clone(),
        base_executor: base.config.provenance.executor.clone(),
        new_executor: new.config.provenance.executor.clone(),
        protocol_differences,
        undeclared_differences,
        unpaired_tasks: unpaired(base_ids, new_ids, ids.len()),
        shared_tasks: ids,
        rounds: statistics::rounds(&pairs, k),
        base_recovery: bs.answers.recovery_rate,
        new_recovery: ns.answers.recovery_rate,
        base_kill_rate: bs.execution.kill_rate.clone(),
        new_kill_rate: ns.execution.kill_rate.clone(),
        base_latency_total: bs.cost.latency_ms.total,
        new_latency_total: ns.cost.latency_ms.total,
        latency_by_round: statistics::latency_by_round(&br, &nr, k),
        now_wrong: statistics::flipped(&pairs, k, false),
        now_right: statistics::flipped(&pairs, k, true),
        summaries: (bs, ns),
    })
}
