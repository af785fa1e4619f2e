//! What a summary is: a header and one section per group of metrics for
//! an arm; for a run, its baseline arm, every arm and their comparison.

use std::ops::Deref;

use serde::{Deserialize, Serialize};

use super::answers::Answers;
use super::budget::BudgetRow;
use super::execution::{Cost, Executions};
use super::header::Header;
use super::repairs::Repairs;
use super::self_repair::SelfRepair;
use super::time_spent::TimeSpent;
use crate::report::environment::EnvironmentMetrics;
use crate::report::strategies::StrategyComparison;

/// The summary of one arm: the header and every section, each flattened
/// into one JSON object (the field order is the schema's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmSummary {
    #[serde(flatten)]
    pub header: Header,
    #[serde(flatten)]
    pub answers: Answers,
    #[serde(flatten)]
    pub repairs: Repairs,
    #[serde(flatten)]
    pub execution: Executions,
    #[serde(flatten)]
    pub cost: Cost,
    #[serde(flatten)]
    pub self_repair: SelfRepair,
    #[serde(flatten)]
    pub environment: EnvironmentMetrics,
}

impl ArmSummary {
    /// `Acc@0 40.0%  Acc@1 55.0%`: accuracy by round, as the terminal
    /// prints it.
    pub fn accuracy_line(&self) -> String {
        let accs: Vec<String> = self
            .answers
            .accuracy_by_round
            .iter()
            .enumerate()
            .map(|(r, a)| format!("Acc@{r} {:.1}%", 100.0 * a.value))
            .collect();
        accs.join("  ")
    }

    /// `Acc@K under math_verify 40.0% (retrace 46.7%, 2 tasks differ)`,
    /// one line per published rule that judged the arm's answers.
    pub fn published_lines(&self) -> Vec<String> {
        self.answers
            .published_rules
            .iter()
            .map(|(rule, p)| {
                let last =
                    |v: &[crate::report::stats::Rate]| v.last().map_or(0.0, |r| 100.0 * r.value);
                format!(
                    "Acc@K under {rule} {:.1}% (retrace {:.1}% on its {} tasks, {} differ)",
                    last(&p.accuracy_by_round),
                    last(&p.retrace_by_round),
                    p.tasks,
                    p.differing.len()
                )
            })
            .collect()
    }
}

/// The summary of a run: the baseline arm's (the only arm of a
/// one-strategy run) at the top level, then every arm and the paired
/// comparison when there are several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    #[serde(flatten)]
    pub baseline: ArmSummary,
    /// Every arm (the baseline first) of a run with several strategies;
    /// empty with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<ArmSummary>,
    /// The non-baseline arms against the baseline on their shared tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<StrategyComparison>,
    /// Every arm's accuracy at the budgets where the arms can be compared
    /// (per round r, the median over arms of its mean cumulative tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accuracy_at_budget: Vec<BudgetRow>,
    /// Where the run's time went, over every arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeSpent>,
}

/// A run's summary reads as its baseline arm's (the top level of
/// `summary.json` is that arm), so renderers of one arm take either.
impl Deref for Summary {
    type Target = ArmSummary;

    fn deref(&self) -> &ArmSummary {
        &self.baseline
    }
}

impl Summary {
    /// Every arm, the baseline first; the one arm of a one-strategy run.
    pub fn each_arm(&self) -> Vec<&ArmSummary> {
        if self.arms.is_empty() {
            vec![&self.baseline]
        } else {
            self.arms.iter().collect()
        }
    }
}
