//! The paired statistics of a comparison, round by round: accuracy with
//! McNemar's exact test and a paired bootstrap interval of the difference
//! (both from [`crate::report::stats`]), model and exec time, the flips.

use serde::{Deserialize, Serialize};

use super::pairing::Pair;
use crate::record::AttemptRecord;
use crate::report::stats::{self, McNemar, PairedDifference, Percentiles, Rate};

/// Acc@r of both sides on the shared tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoundComparison {
    pub round: u32,
    pub base: Rate,
    pub new: Rate,
    /// new − base, as a fraction.
    pub difference: f64,
    /// Paired bootstrap 95% interval of the difference.
    pub difference_ci: (f64, f64),
    /// b: BASE right and NEW wrong; c: the reverse.
    pub mcnemar: McNemar,
    /// The smallest difference this round could show at 80 % power
    /// ([`stats::min_detectable_difference`]); `None`: none could.
    pub min_detectable_difference: Option<f64>,
}

/// p50/p95 of model and exec time of one round, both sides (ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyRound {
    pub round: u32,
    pub base_model: Percentiles,
    pub new_model: Percentiles,
    pub base_exec: Percentiles,
    pub new_exec: Percentiles,
}

/// Acc@r of both sides for r = 0..=k; a task's answer is carried past
/// its last round.
pub(super) fn rounds(pairs: &[Pair], k: usize) -> Vec<RoundComparison> {
    let n = pairs.len() as u64;
    (0..=k)
        .map(|r| {
            let (b, o) = correct_at(pairs, r);
            let count = |v: &[bool]| v.iter().filter(|x| **x).count() as u64;
            let paired = PairedDifference::of(&b, &o);
            RoundComparison {
                round: r as u32,
                base: Rate::new(count(&b), n).expect("n > 0"),
                new: Rate::new(count(&o), n).expect("n > 0"),
                difference: paired.difference,
                difference_ci: paired.difference_ci,
                mcnemar: paired.mcnemar,
                min_detectable_difference: paired.min_detectable_difference,
            }
        })
        .collect()
}

/// Each pair's correctness at round r, BASE's and NEW's.
fn correct_at(pairs: &[Pair], r: usize) -> (Vec<bool>, Vec<bool>) {
    pairs
        .iter()
        .map(|(_, b, o)| (b.correct_at(r), o.correct_at(r)))
        .unzip()
}

/// The paired tasks whose correctness at round k flipped: to right
/// (wrong in BASE, right in NEW) or to wrong.
pub(super) fn flipped(pairs: &[Pair], k: usize, to_right: bool) -> Vec<String> {
    let ids: Vec<&str> = pairs.iter().map(|(id, _, _)| id.as_str()).collect();
    let (b, o) = correct_at(pairs, k);
    stats::flipped(&ids, &b, &o, to_right)
}

/// Model and exec time of both sides' records (the shared tasks), round
/// by round.
pub(super) fn latency_by_round(
    base: &[AttemptRecord],
    new: &[AttemptRecord],
    k: usize,
) -> Vec<LatencyRound> {
    (0..=k)
        .map(|r| {
            let phase = |records: &[AttemptRecord], exec: bool| {
                Percentiles::of(
                    records
                        .iter()
                        .filter(|x| x.round as usize == r && (!exec || x.executed()))
                        .map(|x| {
                            if exec {
                                x.timings_ms.exec
                            } else {
                                x.timings_ms.model
                            }
                        })
                        .collect(),
                )
            };
            LatencyRound {
                round: r as u32,
                base_model: phase(base, false),
                new_model: phase(new, false),
                base_exec: phase(base, true),
                new_exec: phase(new, true),
            }
        })
        .collect()
}
