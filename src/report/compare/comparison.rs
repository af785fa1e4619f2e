//! One arm of BASE against one arm of NEW on the tasks both finished: the
//! type `compare.json` and the `comparisons` of `summary.json` hold.

use serde::{Deserialize, Serialize};

use super::protocol::Vary;
use super::statistics::{LatencyRound, RoundComparison};
use crate::kernel::ExecutorInfo;
use crate::record::Difference;
use crate::report::metrics::KillRate;
use crate::report::stats::{Percentiles, Rate};

/// One arm of BASE against one arm of NEW (in a run's summary: an arm
/// against the baseline arm, each side labelled by its arm's name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub base_model: String,
    pub new_model: String,
    /// Where each side's kernels ran (absent when local).
    #[serde(default, skip_serializing_if = "ExecutorInfo::is_local")]
    pub base_executor: ExecutorInfo,
    #[serde(default, skip_serializing_if = "ExecutorInfo::is_local")]
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
