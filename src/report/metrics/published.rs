//! Accuracy under the datasets' own published rules (GSM8K's exact match,
//! DABench's tagged closed form, Math-Verify, Minerva), beside retrace's:
//! the same answers, the check in force carried forward as for Acc@r, and
//! the tasks whose final verdict differs, so a user sees how much of a
//! difference between runs could be the checker.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::report::stats::Rate;
use crate::report::task_rounds::TaskRounds;

/// Accuracy by round under one published rule, over the tasks it applies
/// to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PublishedAccuracy {
    /// Tasks the rule applies to (its dataset's).
    pub tasks: u64,
    /// Acc@r under the rule, r = 0..=K, over those tasks.
    pub accuracy_by_round: Vec<Rate>,
    /// Acc@r under retrace's rule over the same tasks.
    pub retrace_by_round: Vec<Rate>,
    /// Tasks whose verdict at round K differs between the two rules.
    pub differing: Vec<Differing>,
}

/// One task the rules disagree on at round K.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Differing {
    pub task_id: String,
    /// retrace's verdict (the published rule's is the opposite).
    pub retrace: bool,
    /// The final answer as recorded.
    pub answer: Option<String>,
    /// How retrace read it.
    pub rule: Option<String>,
}

/// Every published rule that applies to some task of the arm: as the run
/// recorded them per task (`provenance.task_rules`), so a task never
/// answered counts as wrong under its rules; for runs from before that
/// record, the rules that judged some answer.
pub(super) fn published(arm: &Arm) -> BTreeMap<String, PublishedAccuracy> {
    let recorded = &arm.config.provenance.task_rules;
    let mut rules: BTreeMap<String, Vec<(&str, &TaskRounds)>> = BTreeMap::new();
    for (t, id) in arm.tasks.iter().zip(&arm.config.provenance.task_ids) {
        let mut names: Vec<&String> = match recorded.is_empty() {
            false => recorded.get(id).into_iter().flatten().collect(),
            true => t
                .records
                .iter()
                .filter_map(|r| r.check.as_ref())
                .flat_map(|c| c.published.keys())
                .collect(),
        };
        names.sort();
        names.dedup();
        for name in names {
            rules
                .entry(name.clone())
                .or_default()
                .push((id.as_str(), t));
        }
    }
    let k = arm.k();
    rules
        .into_iter()
        .map(|(name, tasks)| {
            let n = tasks.len() as u64;
            let under = |r: usize, t: &TaskRounds| -> bool {
                t.at(r)
                    .and_then(|rec| rec.check.as_ref())
                    .and_then(|c| c.published.get(&name))
                    .copied()
                    .unwrap_or(false)
            };
            let rate = |f: &dyn Fn(usize, &TaskRounds) -> bool| -> Vec<Rate> {
                (0..=k)
                    .map(|r| {
                        let hits = tasks.iter().filter(|(_, t)| f(r, t)).count() as u64;
                        Rate::new(hits, n).expect("a rule judged at least one task")
                    })
                    .collect()
            };
            let differing = tasks
                .iter()
                .filter(|(_, t)| under(k, t) != t.correct_at(k))
                .map(|(id, t)| {
                    let check = t.at(k).and_then(|r| r.check.as_ref());
                    Differing {
                        task_id: id.to_string(),
                        retrace: t.correct_at(k),
                        answer: check.and_then(|c| c.extracted.clone()),
                        rule: check.map(|c| c.rule.clone()),
                    }
                })
                .collect();
            let accuracy = PublishedAccuracy {
                tasks: n,
                accuracy_by_round: rate(&under),
                retrace_by_round: rate(&|r, t| t.correct_at(r)),
                differing,
            };
            (name, accuracy)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::record::StopOn;
    use crate::report::summarize;
    use crate::report::testing::{config, task, R};

    /// Two GSM8K tasks: one right under both rules, one whose answer
    /// only retrace reads, and one never answered (an endpoint failure):
    /// it counts, as wrong, under the rule too.
    #[test]
    fn an_unanswered_task_counts_under_its_rules_and_differences_are_listed() {
        let mut cfg = config(&["a", "b", "c"], 0, StopOn::Clean);
        for id in ["a", "b", "c"] {
            cfg.provenance
                .task_rules
                .insert(id.into(), vec!["gsm8k".into()]);
        }
        let mut records = task("a", &[R::Right], StopOn::Clean, 0);
        records.extend(task("b", &[R::Right], StopOn::Clean, 0));
        records.extend(task("c", &[R::Infra], StopOn::Clean, 0));
        for r in &mut records {
            if let Some(c) = &mut r.check {
                c.published.insert("gsm8k".into(), r.task_id == "a");
            }
        }
        let s = summarize(&cfg, &records);
        let gsm = &s.answers.published_rules["gsm8k"];
        assert_eq!(gsm.tasks, 3);
        assert_eq!(gsm.accuracy_by_round[0].successes, 1);
        assert_eq!(gsm.retrace_by_round[0].successes, 2);
        let ids: Vec<&str> = gsm.differing.iter().map(|d| d.task_id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        assert!(gsm.differing[0].retrace);
    }
}
