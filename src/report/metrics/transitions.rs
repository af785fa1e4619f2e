//! How correctness changes from round to round (Huang et al. 2023): per
//! round r ≥ 1, the tasks going correct→correct, correct→incorrect,
//! incorrect→correct and incorrect→incorrect between their state in force
//! at r−1 and at r.

use serde::{Deserialize, Serialize};

use super::arm::Arm;

/// The transitions into one round, over all tasks of the arm (a task that
/// stopped carries its state, so it stays where it was).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Transition {
    pub round: usize,
    pub correct_to_correct: u64,
    pub correct_to_incorrect: u64,
    pub incorrect_to_correct: u64,
    pub incorrect_to_incorrect: u64,
}

impl Transition {
    /// Counts one task going from `before` to `after`.
    fn add(&mut self, before: bool, after: bool) {
        *match (before, after) {
            (true, true) => &mut self.correct_to_correct,
            (true, false) => &mut self.correct_to_incorrect,
            (false, true) => &mut self.incorrect_to_correct,
            (false, false) => &mut self.incorrect_to_incorrect,
        } += 1;
    }
}

/// One entry per round r = 1..=K.
pub(super) fn of(arm: &Arm) -> Vec<Transition> {
    (1..=arm.k())
        .map(|r| {
            let mut t = Transition {
                round: r,
                ..Transition::default()
            };
            for task in arm.tasks {
                t.add(task.correct_at(r - 1), task.correct_at(r));
            }
            t
        })
        .collect()
}
