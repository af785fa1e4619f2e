//! One arm as every metric function reads it: the run's configuration, the
//! arm's records and the same grouped by task, and the counting every
//! denominator shares (all tasks, the answer carried forward).

use crate::record::{AttemptRecord, RunConfig};
use crate::report::stats::Rate;
use crate::report::task_rounds::TaskRounds;

pub(super) struct Arm<'a> {
    pub(super) config: &'a RunConfig,
    pub(super) strategy: &'a str,
    /// The arm's records.
    pub(super) records: &'a [&'a AttemptRecord],
    /// The same, grouped by task in the run's `task_ids` order.
    pub(super) tasks: &'a [TaskRounds<'a>],
}

impl<'a> Arm<'a> {
    /// K, the last round.
    pub(super) fn k(&self) -> usize {
        self.config.spec.policy.rounds as usize
    }

    /// Tasks of the arm: every denominator "over all tasks".
    pub(super) fn n(&self) -> u64 {
        self.tasks.len() as u64
    }

    /// Tasks for which `f` holds.
    pub(super) fn count(&self, f: impl Fn(&TaskRounds) -> bool) -> u64 {
        self.tasks.iter().filter(|t| f(t)).count() as u64
    }

    /// `f(task, r)` over all tasks, for r = 0..=K.
    pub(super) fn over_all(&self, f: impl Fn(&TaskRounds, usize) -> bool) -> Vec<Rate> {
        (0..=self.k())
            .map(|r| Rate::new(self.count(|t| f(t, r)), self.n().max(1)).expect("n ≥ 1"))
            .collect()
    }

    /// The arm's records of the run's own tasks.
    pub(super) fn ours(&self) -> Vec<&'a AttemptRecord> {
        let ids = &self.config.provenance.task_ids;
        self.records
            .iter()
            .copied()
            .filter(|r| ids.contains(&r.task_id))
            .collect()
    }
}
