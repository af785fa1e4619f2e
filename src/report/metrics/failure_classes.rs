//! The failure-class matrix: how each task's round 0 ended (a failure
//! class of `task_rounds`, or `correct`) against how its state at round
//! K ends, with the repair rate of each round-0 class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::report::stats::Rate;
use crate::report::task_rounds::TaskRounds;

/// The class of a correct state.
pub const CORRECT: &str = "correct";
/// The class of a task without a record at that round (interrupted
/// before its round 0).
pub const NOT_RECORDED: &str = "not_recorded";

/// The tasks of one round-0 class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClassRow {
    pub tasks: u64,
    /// Class at round K → tasks.
    pub at_k: BTreeMap<String, u64>,
    /// Tasks correct at round K over the row's tasks (for the `correct`
    /// row: those still correct).
    pub repair_rate: Option<Rate>,
}

/// The class of a task's state in force at `round`.
fn class_at(t: &TaskRounds, round: usize) -> String {
    match t.at(round) {
        None => NOT_RECORDED.into(),
        Some(r) if r.correct => CORRECT.into(),
        Some(_) => t.failure_at(round).unwrap_or_else(|| NOT_RECORDED.into()),
    }
}

/// Round-0 class → its row, over all tasks of the arm.
pub(super) fn of(arm: &Arm) -> BTreeMap<String, ClassRow> {
    let mut rows: BTreeMap<String, ClassRow> = BTreeMap::new();
    for t in arm.tasks {
        let row = rows.entry(class_at(t, 0)).or_default();
        row.tasks += 1;
        *row.at_k.entry(class_at(t, arm.k())).or_default() += 1;
    }
    for row in rows.values_mut() {
        let fixed = row.at_k.get(CORRECT).copied().unwrap_or(0);
        row.repair_rate = Rate::new(fixed, row.tasks);
    }
    rows
}
