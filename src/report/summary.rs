//! A run's summary: the metrics of every arm (`metrics/`), the baseline
//! arm's at the top level, and each other arm paired with the baseline by
//! the `compare` engine.

use std::ops::Deref;

use serde::{Deserialize, Serialize};

use super::compare::{compare, Comparison, Side};
use super::metrics::{comparable, summarize_arms, ArmSummary, BudgetRow, CodeOrigin, TimeSpent};
use crate::record::{AttemptRecord, RunConfig};

/// Computes the summary of a run from its records. With several arms
/// (`--strategy fat,dynamic`, …), every arm is summarized over its own
/// records and the top level is the first arm's (the baseline), with every
/// arm in `arms` and each other arm compared with it in `comparisons`.
pub fn summarize(config: &RunConfig, records: &[AttemptRecord]) -> Summary {
    let mut arms = summarize_arms(config, records);
    let named: Vec<(&str, &ArmSummary)> = (arms.iter())
        .map(|a| (a.header.strategy.as_str(), a))
        .collect();
    let accuracy_at_budget = comparable(&named);
    let side = |arm: &ArmSummary| {
        let name = &arm.header.strategy;
        let mut side = Side::new("", config, records, name);
        side.label = name.clone();
        side
    };
    let base = side(&arms[0]);
    let comparisons = (arms[1..].iter())
        .filter_map(|arm| compare(&base, &side(arm)).map(|(c, _)| c))
        .collect();
    let code_origin = CodeOrigin::of(config, &arms.iter().collect::<Vec<_>>());
    let baseline = arms[0].clone();
    if arms.len() == 1 {
        arms.clear();
    }
    Summary {
        baseline,
        arms,
        comparisons,
        accuracy_at_budget,
        time: TimeSpent::of(config, records),
        code_origin,
        // Set from the control's own journal by the caller that has it.
        false_alarm: None,
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
    /// Each other arm against the baseline on the tasks both finished, as
    /// `retrace compare` pairs them (each side labelled by its arm's name);
    /// an arm that shares no finished task with the baseline has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Comparison>,
    /// Every arm's accuracy at the budgets where the arms can be compared
    /// (per round r, the median over arms of its mean cumulative tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accuracy_at_budget: Vec<BudgetRow>,
    /// Where the run's time went, over every arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeSpent>,
    /// `--round0-from`: the recorded round 0 and whose code each arm
    /// repaired (own or foreign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_origin: Option<CodeOrigin>,
    /// `--false-alarm N`: the control's harm rate, apart from every arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_alarm: Option<super::false_alarm::FalseAlarm>,
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

#[cfg(test)]
mod tests {
    use super::super::compare::{compare, Side};
    use super::super::testing::{config, task, two_arms, R};
    use super::summarize;
    use crate::record::StopOn;

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
        assert!(json.get("arms").is_none() && json.get("comparisons").is_none());
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
    fn the_comparison_is_compare_of_the_two_arms() {
        let (cfg, records) = two_arms();
        let s = summarize(&cfg, &records);
        assert_eq!(s.comparisons.len(), 1);
        let c = &s.comparisons[0];
        assert_eq!((c.base.as_str(), c.new.as_str()), ("fat", "dynamic"));
        // f was interrupted in the dynamic arm.
        assert_eq!(c.shared_tasks, ["a", "b", "c", "d", "e"]);
        let by_round: Vec<(u32, u64, u64)> = (c.rounds.iter())
            .map(|r| (r.round, r.base.successes, r.new.successes))
            .collect();
        assert_eq!(by_round, [(0, 2, 2), (1, 3, 4)]); // a b d | a c d e
                                                      // b: baseline right, arm wrong (b); c: the reverse (c, e);
                                                      // 2 · P[X ≤ 1], X ~ Bin(3, ½) = 2 · 4/8, capped at 1.
        let m = c.last().mcnemar;
        assert_eq!((m.b, m.c, m.p_value), (1, 2, 1.0));
        assert_eq!(
            (c.now_wrong.clone(), c.now_right.clone()),
            (vec!["b".to_string()], vec!["c".into(), "e".into()])
        );
        // Field for field what `retrace compare` finds for the two arms,
        // but for the sides' labels.
        let mut both = compare(
            &Side::new("BASE", &cfg, &records, "fat"),
            &Side::new("NEW", &cfg, &records, "dynamic"),
        )
        .unwrap()
        .0;
        (both.base, both.new) = (c.base.clone(), c.new.clone());
        assert_eq!(&both, c);
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
        assert!(s.arms.is_empty() && s.comparisons.is_empty());
        let json = serde_json::to_value(&s).unwrap();
        assert!(json.get("arms").is_none() && json.get("comparisons").is_none());
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
        let names: Vec<(&str, &str)> = (s.comparisons.iter())
            .map(|c| (c.base.as_str(), c.new.as_str()))
            .collect();
        assert_eq!(names, [("fat", "dynamic"), ("fat", "slim")]);
        let slim = &s.comparisons[1];
        assert_eq!(slim.shared_tasks.len(), 6);
        // Baseline right on a b d f, slim right on none.
        let m = slim.last().mcnemar;
        assert_eq!((m.b, m.c), (4, 0));
        assert!((m.p_value - 0.125).abs() < 1e-12);
        assert!(s.arms[2].environment.installs.is_none());
    }
}
