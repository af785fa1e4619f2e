//! What became of the answers: Acc@r with the answer carried forward,
//! recovery and regression, exec-success@r and parse@r, round-0 failures
//! and their fate, accuracy by injected fault, multi-answer parts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use super::published::{published, PublishedAccuracy};
use crate::report::stats::Rate;
use crate::report::task_rounds::TaskRounds;
use crate::sandbox::Verdict;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Answers {
    /// Acc@r for r = 0..=rounds, over all tasks, the answer carried forward.
    pub accuracy_by_round: Vec<Rate>,
    /// Acc@r − Acc@(r−1); the first entry is Acc@0.
    pub delta_by_round: Vec<f64>,
    /// Correct at any round ≤ r (an upper bound, oracle-like).
    pub solved_by_round: Vec<f64>,
    /// Wrong at round 0 and right at K, over all tasks wrong at round 0.
    pub recovery_rate: Option<Rate>,
    /// The same over the tasks wrong at round 0 that got a repair round
    /// (under `clean`, a clean wrong answer stops a task unrepaired).
    pub recovery_rate_repaired: Option<Rate>,
    /// Right at round 0 and wrong at K, over all tasks right at round 0.
    pub regression_rate: Option<Rate>,
    /// Tasks whose latest execution by round r ran cleanly, over all tasks.
    pub exec_success_by_round: Vec<Rate>,
    /// Tasks with an answer the checker could read by round r, over all tasks.
    pub parse_by_round: Vec<Rate>,
    /// Round-0 failure kind (exception name, verdict, `no_code`,
    /// `no_answer`, `unsupported_answer`, `wrong_answer`) → fate by K.
    pub round0_failures: BTreeMap<String, FailureFate>,
    /// Accuracy by injected fault kind (synthetic `oracle:faults` runs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accuracy_by_fault: BTreeMap<String, FaultAccuracy>,
    /// Multi-answer tasks: parts correct over all parts, by round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multi_part_accuracy_by_round: Vec<Rate>,
    /// How each task's final answer was read (`number`, `number:unit`,
    /// `number:sentence`, `number:equation`, `number:ambiguous`, …; see
    /// `Check::reading`): how lenient the reading behind the accuracy was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub final_answers_read: BTreeMap<String, ReadCount>,
    /// Accuracy under each published rule that judged the arm's answers
    /// (`gsm8k`, `dabench`, `math_verify`, `minerva`), beside retrace's on
    /// the same tasks, with the tasks where they differ.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub published_rules: BTreeMap<String, PublishedAccuracy>,
    /// Accuracy by task tag (a MATH task's `subject:…` and `level:…`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accuracy_by_tag: BTreeMap<String, FaultAccuracy>,
}

/// Final answers read one way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReadCount {
    pub answers: u64,
    /// Of those, correct.
    pub correct: u64,
}

/// Round-0 failures of one kind, and what became of them by round K.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailureFate {
    /// Tasks whose round 0 ended this way.
    pub tasks: u64,
    /// Of those, correct at round K.
    pub fixed: u64,
    /// Of those, with a clean execution at some later round.
    pub ran_clean_later: u64,
}

/// Accuracy of a group of tasks: those that got one injected fault kind
/// (`oracle:faults`), or those with one tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FaultAccuracy {
    pub tasks: u64,
    pub round0: Option<Rate>,
    pub final_round: Option<Rate>,
}

impl Answers {
    pub(super) fn of(arm: &Arm) -> Answers {
        let k = arm.k();
        let accuracy = arm.over_all(|t, r| t.correct_at(r));
        let n = arm.n().max(1) as f64;
        let solved = (0..=k)
            .map(|r| arm.count(|t| (0..=r).any(|q| t.correct_at(q))) as f64 / n)
            .collect();
        let delta = accuracy
            .iter()
            .enumerate()
            .map(|(i, a)| a.value - if i == 0 { 0.0 } else { accuracy[i - 1].value })
            .collect();
        let wrong0 = |t: &TaskRounds| !t.correct_at(0);
        Answers {
            delta_by_round: delta,
            solved_by_round: solved,
            recovery_rate: Rate::new(
                arm.count(|t| wrong0(t) && t.correct_at(k)),
                arm.count(wrong0),
            ),
            recovery_rate_repaired: Rate::new(
                arm.count(|t| wrong0(t) && t.repaired() && t.correct_at(k)),
                arm.count(|t| wrong0(t) && t.repaired()),
            ),
            regression_rate: Rate::new(
                arm.count(|t| t.correct_at(0) && !t.correct_at(k)),
                arm.count(|t| t.correct_at(0)),
            ),
            accuracy_by_round: accuracy,
            exec_success_by_round: arm.over_all(|t, r| t.exec_ok_at(r)),
            parse_by_round: arm.over_all(|t, r| t.parsed_at(r)),
            round0_failures: round0_failures(arm),
            accuracy_by_fault: accuracy_by_fault(arm),
            multi_part_accuracy_by_round: multi_parts(arm),
            final_answers_read: final_answers_read(arm),
            published_rules: published(arm),
            accuracy_by_tag: accuracy_by_tag(arm),
        }
    }
}

/// Each task's answer in force at round K, by how it was read.
fn final_answers_read(arm: &Arm) -> BTreeMap<String, ReadCount> {
    let mut read: BTreeMap<String, ReadCount> = BTreeMap::new();
    for t in arm.tasks {
        if let Some(record) = t.at(arm.k()) {
            if let Some(check) = &record.check {
                let count = read.entry(check.reading()).or_default();
                count.answers += 1;
                count.correct += record.correct as u64;
            }
        }
    }
    read
}

/// Round-0 failure kind → its fate by K.
fn round0_failures(arm: &Arm) -> BTreeMap<String, FailureFate> {
    let mut fates: BTreeMap<String, FailureFate> = BTreeMap::new();
    for t in arm.tasks {
        if let Some(kind) = t.round0_failure() {
            let fate = fates.entry(kind).or_default();
            fate.tasks += 1;
            fate.fixed += t.correct_at(arm.k()) as u64;
            fate.ran_clean_later += t
                .records
                .iter()
                .skip(1)
                .any(|r| r.outcome.as_ref().is_some_and(|o| o.verdict == Verdict::Ok))
                as u64;
        }
    }
    fates
}

/// Acc@0 and Acc@K of the tasks of each injected fault kind.
fn accuracy_by_fault(arm: &Arm) -> BTreeMap<String, FaultAccuracy> {
    let mut faults: BTreeMap<String, Vec<&TaskRounds>> = BTreeMap::new();
    for t in arm.tasks {
        if let Some(f) = t.records.first().and_then(|r| r.fault.clone()) {
            faults.entry(f).or_default().push(t);
        }
    }
    group_accuracy(arm, faults)
}

/// Accuracy of the tasks with each tag (`subject:Algebra`, `level:5`, a
/// DABench concept), as the suite tagged them.
fn accuracy_by_tag(arm: &Arm) -> BTreeMap<String, FaultAccuracy> {
    let tags = &arm.config.provenance.task_tags;
    let mut groups: BTreeMap<String, Vec<&TaskRounds>> = BTreeMap::new();
    for (t, id) in arm.tasks.iter().zip(&arm.config.provenance.task_ids) {
        for tag in tags.get(id).into_iter().flatten() {
            groups.entry(tag.clone()).or_default().push(t);
        }
    }
    group_accuracy(arm, groups)
}

/// Acc@0 and Acc@K of each group of tasks.
fn group_accuracy(
    arm: &Arm,
    groups: BTreeMap<String, Vec<&TaskRounds>>,
) -> BTreeMap<String, FaultAccuracy> {
    groups
        .into_iter()
        .map(|(fault, ts)| {
            let m = ts.len() as u64;
            let right = |r: usize| ts.iter().filter(|t| t.correct_at(r)).count() as u64;
            let acc = FaultAccuracy {
                tasks: m,
                round0: Rate::new(right(0), m),
                final_round: Rate::new(right(arm.k()), m),
            };
            (fault, acc)
        })
        .collect()
}

/// Parts correct over all parts of the multi-answer tasks, by round (the
/// parts of the answer in force at that round; none counts as wrong).
fn multi_parts(arm: &Arm) -> Vec<Rate> {
    let parts_of = |t: &TaskRounds| -> usize {
        t.records
            .iter()
            .filter_map(|r| r.check.as_ref())
            .map(|c| c.parts.len())
            .max()
            .unwrap_or(0)
    };
    let multi: Vec<(&TaskRounds, usize)> = arm
        .tasks
        .iter()
        .map(|t| (t, parts_of(t)))
        .filter(|(_, p)| *p > 0)
        .collect();
    let total: usize = multi.iter().map(|(_, p)| p).sum();
    if total == 0 || arm.config.provenance.task_ids.is_empty() {
        return Vec::new();
    }
    (0..=arm.k())
        .map(|r| {
            let right: usize = multi
                .iter()
                .map(|(t, _)| {
                    t.at(r)
                        .and_then(|rec| rec.check.as_ref())
                        .map_or(0, |c| c.parts.iter().filter(|p| p.correct).count())
                })
                .sum();
            Rate::new(right as u64, total as u64).expect("total > 0")
        })
        .collect()
}
