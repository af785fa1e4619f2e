//! Package strategies side by side: each non-baseline arm against the
//! baseline (the first `--strategy`) on the tasks both finished, with the
//! paired statistics `compare` reports ([`PairedDifference`]: McNemar's
//! exact test, the bootstrap interval of the difference, the minimum
//! detectable difference) on the final correctness, and the flipped tasks.

use serde::{Deserialize, Serialize};

use super::compare::{statistics, Pair};
use super::labels::{id_list, power_sentence};
use super::stats::{McNemar, PairedDifference, Rate};
use super::task_rounds::TaskRounds;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StrategyComparison {
    /// The first strategy of the run.
    pub baseline: String,
    /// One per other arm, in `--strategy` order.
    pub arms: Vec<ArmComparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmComparison {
    pub strategy: String,
    /// Tasks finished in both arms (an interrupted task is not paired).
    pub shared_tasks: u64,
    /// Acc@K of the baseline on the shared tasks.
    pub baseline_accuracy: Option<Rate>,
    /// Acc@K of this arm on the shared tasks.
    pub accuracy: Option<Rate>,
    /// Acc@r of both arms on the shared tasks, r = 0..=K (empty when no
    /// task is shared).
    pub accuracy_by_round: Vec<PairedAccuracy>,
    pub mcnemar: McNemar,
    /// Paired bootstrap 95% interval of Acc@K(arm) − Acc@K(baseline)
    /// (absent when no task is shared).
    #[serde(default)]
    pub difference_ci: Option<(f64, f64)>,
    /// The smallest difference of Acc@K the shared tasks could show at
    /// 80 % power; `None`: none could (or no task is shared).
    #[serde(default)]
    pub min_detectable_difference: Option<f64>,
    /// Right in the baseline, wrong in this arm at round K.
    #[serde(default)]
    pub now_wrong: Vec<String>,
    /// Wrong in the baseline, right in this arm at round K.
    #[serde(default)]
    pub now_right: Vec<String>,
}

impl ArmComparison {
    /// The difference's interval, the power and the flips, for the
    /// documents: `Δ +20.0 points [-20.0, +60.0]; minimum detectable …;
    /// now right: c, e; now wrong: b`.
    pub fn paired_line(&self) -> String {
        let pp = |x: f64| format!("{:+.1}", 100.0 * x);
        let mut parts = Vec::new();
        if let (Some(ci), Some(a), Some(b)) =
            (self.difference_ci, self.accuracy, self.baseline_accuracy)
        {
            parts.push(format!(
                "Δ {} points [{}, {}] (paired bootstrap)",
                pp(a.value - b.value),
                pp(ci.0),
                pp(ci.1)
            ));
        }
        parts.push(power_sentence(
            self.min_detectable_difference,
            self.shared_tasks,
        ));
        parts.push(format!("now right: {}", id_list(&self.now_right)));
        parts.push(format!("now wrong: {}", id_list(&self.now_wrong)));
        parts.join("; ")
    }
}

/// Acc@r of the baseline and of the arm on the same tasks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairedAccuracy {
    pub round: u32,
    pub baseline: Rate,
    pub arm: Rate,
}

/// Each arm after the first against the first, by the statistics of
/// `retrace compare` (pairing, McNemar, the bootstrap interval, the flips).
/// `arms` are in `--strategy` order, each arm's tasks in the run's
/// `task_ids` order.
pub(super) fn compare(k: usize, arms: &[(String, Vec<TaskRounds>)]) -> StrategyComparison {
    let (baseline_name, baseline) = &arms[0];
    let compared = arms[1..]
        .iter()
        .map(|(name, tasks)| {
            let pairs: Vec<Pair> = (baseline.iter().zip(tasks))
                .filter(|(a, b)| a.finished() && b.finished())
                .map(|(a, b)| (a.records.first().map_or(&EMPTY, |r| &r.task_id), a, b))
                .collect();
            let rounds = match pairs.is_empty() {
                true => Vec::new(),
                false => statistics::rounds(&pairs, k),
            };
            let last = rounds.last();
            let none = PairedDifference::of(&[], &[]);
            ArmComparison {
                strategy: name.clone(),
                shared_tasks: pairs.len() as u64,
                baseline_accuracy: last.map(|r| r.base),
                accuracy: last.map(|r| r.new),
                accuracy_by_round: (rounds.iter())
                    .map(|r| PairedAccuracy {
                        round: r.round,
                        baseline: r.base,
                        arm: r.new,
                    })
                    .collect(),
                mcnemar: last.map_or(none.mcnemar, |r| r.mcnemar),
                difference_ci: last.map(|r| r.difference_ci),
                min_detectable_difference: last.and_then(|r| r.min_detectable_difference),
                now_wrong: statistics::flipped(&pairs, k, false),
                now_right: statistics::flipped(&pairs, k, true),
            }
        })
        .collect();
    StrategyComparison {
        baseline: baseline_name.clone(),
        arms: compared,
    }
}

/// The id of a task without records (never paired: it is not finished).
static EMPTY: String = String::new();

#[cfg(test)]
mod tests {
    use super::super::testing::{config, task, two_arms, R};
    use crate::record::StopOn;
    use crate::report::summarize;

    #[test]
    fn two_arms_are_split_and_the_baseline_is_the_top_level() {
        let (cfg, records) = two_arms();
        let s = summarize(&cfg, &records);
        assert_eq!(s.header.strategy, "fat");
        let names: Vec<&str> = s.arms.iter().map(|a| a.header.strategy.as_str()).collect();
        assert_eq!(names, ["fat", "dynamic"]);
        // The top level is the baseline arm, over its own records only.
        let finals = |m: &crate::report::ArmSummary| -> Vec<u64> {
            m.answers
                .accuracy_by_round
                .iter()
                .map(|r| r.successes)
                .collect()
        };
        assert_eq!(finals(&s), [3, 4]); // a b f | a b d f
        assert_eq!(s.execution.executions, 7);
        assert_eq!(s.header.tasks, 6);
        assert_eq!(s.header.tasks_finished, 6);
        assert_eq!(s.arms[0], s.baseline);
        let dynamic = &s.arms[1];
        assert_eq!(finals(dynamic), [3, 5]); // a c f | a c d e f
        assert_eq!(dynamic.execution.executions, 9);
        assert_eq!(dynamic.header.tasks_finished, 5);
        assert_eq!(
            dynamic.answers.round0_failures["ModuleNotFoundError"].tasks,
            1
        );
        let json = serde_json::to_value(dynamic).unwrap();
        assert!(json.get("arms").is_none() && json.get("comparison").is_none());
        assert_eq!(s.environment.image_bytes, Some(3 << 30));
        assert_eq!(dynamic.environment.image_bytes, Some(200 << 20));
        // b twice and e once, of 9 executed rounds; none in the fat arm.
        let env = dynamic.environment.environment_error_rounds.unwrap();
        assert_eq!((env.successes, env.n), (3, 9));
        let env = s.environment.environment_error_rounds.unwrap();
        assert_eq!((env.successes, env.n), (0, 7));
        // The dynamic arm reports its (empty) installs, the fat arm none.
        assert_eq!(dynamic.environment.installs.as_ref().unwrap().steps, 0);
        assert!(s.environment.installs.is_none());
    }

    #[test]
    fn the_comparison_pairs_the_tasks_both_arms_finished() {
        let (cfg, records) = two_arms();
        let c = summarize(&cfg, &records).comparison.unwrap();
        assert_eq!(c.baseline, "fat");
        assert_eq!(c.arms.len(), 1);
        let a = &c.arms[0];
        assert_eq!(a.strategy, "dynamic");
        // f was interrupted in the dynamic arm.
        assert_eq!(a.shared_tasks, 5);
        let base = a.baseline_accuracy.unwrap();
        let arm = a.accuracy.unwrap();
        assert_eq!((base.successes, base.n), (3, 5)); // a b d
        assert_eq!((arm.successes, arm.n), (4, 5)); // a c d e
        let by_round: Vec<(u32, u64, u64)> = a
            .accuracy_by_round
            .iter()
            .map(|p| (p.round, p.baseline.successes, p.arm.successes))
            .collect();
        assert_eq!(by_round, [(0, 2, 2), (1, 3, 4)]);
        // b: baseline right, arm wrong (b); c: the reverse (c, e).
        assert_eq!((a.mcnemar.b, a.mcnemar.c), (1, 2));
        // 2 · P[X ≤ 1], X ~ Bin(3, ½) = 2 · 4/8, capped at 1.
        assert_eq!(a.mcnemar.p_value, 1.0);
        // The same flips and interval as `compare` of the two arms.
        assert_eq!(a.now_wrong, ["b"]);
        assert_eq!(a.now_right, ["c", "e"]);
        let (lo, hi) = a.difference_ci.unwrap();
        assert!(lo <= 0.2 && 0.2 <= hi, "{lo} {hi}");
        assert_eq!(
            a.min_detectable_difference,
            crate::report::stats::min_detectable_difference(5, 3)
        );
        let both = crate::report::compare::compare(
            &crate::report::compare::Side::new("BASE", &cfg, &records, "fat"),
            &crate::report::compare::Side::new("NEW", &cfg, &records, "dynamic"),
        )
        .unwrap();
        assert_eq!(both.last().difference_ci, (lo, hi));
        assert_eq!(
            (both.now_wrong, both.now_right),
            (a.now_wrong.clone(), a.now_right.clone())
        );
    }

    #[test]
    fn one_arm_has_no_arms_and_no_comparison() {
        let k = 1;
        let mut cfg = config(&["a"], k, StopOn::Clean);
        cfg.spec.packages.strategies = vec![crate::pyenv::Strategy::Dynamic];
        // A record naming another strategy still counts: one arm takes all.
        let records = task("a", &[R::Right], StopOn::Clean, k);
        let s = summarize(&cfg, &records);
        assert_eq!(s.header.strategy, "dynamic");
        assert_eq!(s.answers.accuracy_by_round[0].successes, 1);
        assert!(s.arms.is_empty() && s.comparison.is_none());
        let json = serde_json::to_value(&s).unwrap();
        assert!(json.get("arms").is_none() && json.get("comparison").is_none());
        assert!(json.get("environment_error_rounds").is_some());
    }

    #[test]
    fn three_arms_compare_each_with_the_first() {
        let (mut cfg, mut records) = two_arms();
        cfg.spec.packages.strategies = vec![
            crate::pyenv::Strategy::Fat,
            crate::pyenv::Strategy::Dynamic,
            crate::pyenv::Strategy::Slim,
        ];
        // The slim arm: everything fails on a missing module.
        for id in ["a", "b", "c", "d", "e", "f"] {
            let mut t = task(id, &[R::Raised("ModuleNotFoundError")], StopOn::Clean, 0);
            t[0].strategy = "slim".into();
            records.extend(t);
        }
        let s = summarize(&cfg, &records);
        let c = s.comparison.unwrap();
        let names: Vec<&str> = c.arms.iter().map(|a| a.strategy.as_str()).collect();
        assert_eq!(names, ["dynamic", "slim"]);
        let slim = &c.arms[1];
        assert_eq!(slim.shared_tasks, 6);
        // Baseline right on a b d f, slim right on none.
        assert_eq!((slim.mcnemar.b, slim.mcnemar.c), (4, 0));
        assert!((slim.mcnemar.p_value - 0.125).abs() < 1e-12);
        assert!(s.arms[2].environment.installs.is_none());
    }
}
