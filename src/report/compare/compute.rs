//! [`compare`]: the paired statistics of two sides, over the tasks both
//! finished, and each side summarized over them.

use super::comparison::Comparison;
use super::pairing::{pair_tasks, unpaired, Side};
use super::protocol;
use super::statistics;
use crate::record::AttemptRecord;
use crate::report::metrics::{summarize_arms, ArmSummary};
use crate::report::task_rounds::by_task;

/// Both sides summarized over the shared tasks (BASE's, NEW's), for the chart.
pub type Summaries = (ArmSummary, ArmSummary);

/// Pairs `base` and `new` on the tasks both finished, with both sides
/// summarized over them. `None` when they share none.
pub fn compare(base: &Side, new: &Side) -> Option<(Comparison, Summaries)> {
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
    // The restricted sides are one-arm runs: one summary each.
    let one = |c, r| summarize_arms(c, r).swap_remove(0);
    let (bs, ns) = (one(&bc, &br), one(&nc, &nr));
    let (protocol_differences, undeclared_differences) = protocol::differences(base, new);
    let comparison = Comparison {
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
    };
    Some((comparison, (bs, ns)))
}
