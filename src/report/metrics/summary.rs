//! What an arm's summary is: a header and one section per group of metrics.

use serde::{Deserialize, Serialize};

use super::answers::Answers;
use super::execution::{Cost, Executions};
use super::header::Header;
use super::kernel_state::KernelState;
use super::repairs::Repairs;
use super::self_repair::SelfRepair;
use crate::report::environment::EnvironmentMetrics;

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
    /// `--execution` arms: kernel and replay time, repairs that used the
    /// kernel's state and failures for lack of it; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_state: Option<KernelState>,
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
