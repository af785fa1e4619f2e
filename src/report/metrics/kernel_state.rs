//! What an arm's execution mode cost and what its repairs did with the
//! kernel's state (`--execution`; docs/methodology.md, "Execution
//! modes"): kernel starts and replays in time, repairs that read a name
//! only an earlier cell defined, and failures for lack of such a name.
//! Absent from the summaries of runs that do not compare modes.

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::record::ExecutionMode;
use crate::report::stats::Rate;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelState {
    pub mode: ExecutionMode,
    /// Kernels started for the arm's rounds (a shared round 0's kernel is
    /// the arm's that did it) and their start time, summed.
    pub kernel_starts: u64,
    pub kernel_start_ms: f64,
    /// Rounds that re-ran earlier cells first (`replay`), the time of
    /// those re-runs summed (apart from `exec`), and the rounds whose
    /// replay diverged (a re-run cell failed that ran cleanly before).
    pub replays: u64,
    pub replay_ms: f64,
    pub replays_diverged: u64,
    /// Repairs that read a name only an earlier cell of the task defined,
    /// over the repairs checked (rounds after round 0 that ran code, with
    /// an earlier cell, whose code the check could read).
    pub used_state: Option<Rate>,
    /// Repairs that failed with a `NameError` for such a name (the failure
    /// `fresh` makes for lack of state), over the same repairs.
    pub lacked_state: Option<Rate>,
    /// Tasks whose last round failed for lack of state, over all tasks.
    pub tasks_lacking_state: Option<Rate>,
}

impl KernelState {
    /// `None` unless the run compares execution modes.
    pub(super) fn of(arm: &Arm) -> Option<KernelState> {
        let spec = &arm.config.spec;
        if !spec.compares_execution() {
            return None;
        }
        let records = arm.ours();
        let mode = records
            .first()
            .map_or(spec.policy.execution, |r| r.execution);
        let started: Vec<f64> = records
            .iter()
            .filter_map(|r| r.timings_ms.kernel_start)
            .collect();
        let replays: Vec<_> = records.iter().filter_map(|r| r.replay.as_ref()).collect();
        let checked: Vec<_> = records
            .iter()
            .filter(|r| r.round > 0 && r.state_names.is_some())
            .collect();
        let used = checked
            .iter()
            .filter(|r| r.state_names.as_ref().is_some_and(|n| !n.is_empty()))
            .count();
        let lacked = checked.iter().filter(|r| r.lacked_state()).count();
        let tasks_lacking = arm.count(|t| t.records.last().is_some_and(|r| r.lacked_state()));
        let add = |v: &mut dyn Iterator<Item = f64>| v.fold(0.0, |a, b| a + b);
        Some(KernelState {
            mode,
            kernel_starts: started.len() as u64,
            kernel_start_ms: add(&mut started.iter().copied()),
            replays: replays.len() as u64,
            replay_ms: add(&mut replays.iter().map(|r| r.ms)),
            replays_diverged: replays.iter().filter(|r| !r.diverged.is_empty()).count() as u64,
            used_state: Rate::new(used as u64, checked.len() as u64),
            lacked_state: Rate::new(lacked as u64, checked.len() as u64),
            tasks_lacking_state: Rate::new(tasks_lacking, arm.n()),
        })
    }
}
