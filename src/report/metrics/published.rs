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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Differing {
    pub task_id: String,
    /// retrace's verdict (the published rule's is the opposite).
    pub retrace: bool,
    /// The final answer as recorded.
    pub answer: Option<String>,
    /// How retrace read it.
    pub rule: Option<String>,
}

/// Every published rule that judged some task of the arm.
pub(super) fn published(arm: &Arm) -> BTreeMap<String, PublishedAccuracy> {
    let mut rules: BTreeMap<String, Vec<&TaskRounds>> = BTreeMap::new();
    for t in arm.tasks {
        let names = t
            .records
            .iter()
            .filter_map(|r| r.check.as_ref())
            .flat_map(|c| c.published.keys());
        for name in names {
            let tasks = rules.entry(name.clone()).or_default();
            if !tasks.iter().any(|seen| std::ptr::eq(*seen, t)) {
                tasks.push(t);
            }
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
                        let hits = tasks.iter().filter(|t| f(r, t)).count() as u64;
                        Rate::new(hits, n).expect("a rule judged at least one task")
                    })
                    .collect()
            };
            let differing = tasks
                .iter()
                .filter(|t| under(k, t) != t.correct_at(k))
                .map(|t| {
                    let rec = t.at(k);
                    let check = rec.and_then(|r| r.check.as_ref());
                    Differing {
                        task_id: rec.map(|r| r.task_id.clone()).unwrap_or_default(),
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
