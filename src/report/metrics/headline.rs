//! The numbers a run is quoted by, for the formats other tools read
//! (Inspect's results, Every Eval Ever's `evaluation_results`): Acc@r at
//! every round, recovery, regression and kill rate. Each is a rate with
//! its 95% Wilson interval, picked from the one registry of values
//! ([`super::values`]) so that every format quotes the same numbers.

use super::list::{values, Value};
use super::summary::ArmSummary;
use crate::report::stats::Rate;

/// One headline number of an arm.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Stable identifier: `acc@0`, `recovery_rate`, …
    pub id: String,
    /// As retrace's reports name it: `Acc@0`, `recovery`, …
    pub name: String,
    /// The round it is at (`Acc@r`); `None` for a rate of the whole arm.
    pub round: Option<usize>,
    pub description: String,
    pub lower_is_better: bool,
    /// `None` when its denominator is empty (no failed round 0 to recover).
    pub rate: Option<Rate>,
}

/// The headline numbers of an arm, Acc@0..=K first.
pub fn headline(arm: &ArmSummary) -> Vec<Headline> {
    values(arm)
        .into_iter()
        .filter_map(|v| {
            let Value::Rate(rate) = v.value else {
                return None;
            };
            let (id, name, description, lower_is_better) = match (v.name.as_str(), v.round) {
                ("accuracy", Some(r)) => (
                    format!("acc@{r}"),
                    format!("Acc@{r}"),
                    format!(
                        "share of tasks whose answer after round {r} is correct \
                         (round 0 is the first attempt; a stopped task keeps its answer)"
                    ),
                    false,
                ),
                ("recovery_rate", None) => (
                    "recovery_rate".into(),
                    "recovery".into(),
                    "share of tasks wrong at round 0 that are correct at the last round".into(),
                    false,
                ),
                ("regression_rate", None) => (
                    "regression_rate".into(),
                    "regression".into(),
                    "share of tasks correct at round 0 that are wrong at the last round".into(),
                    true,
                ),
                ("kill_rate", None) => (
                    "kill_rate".into(),
                    "kill_rate".into(),
                    "share of executions the sandbox killed (time, memory, output, processes)"
                        .into(),
                    true,
                ),
                _ => return None,
            };
            Some(Headline {
                id,
                name,
                round: v.round,
                description,
                lower_is_better,
                rate,
            })
        })
        .collect()
}
