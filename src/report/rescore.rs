//! Re-scoring: every recorded answer checked again with the current
//! checker and the tasks' current expected answers, without running
//! anything. Pure: records and tasks in, new records and what changed out.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::summarize;
use crate::record::{AttemptRecord, RunConfig};
use crate::task::check::Check;
use crate::task::score::{score, Symbolic};
use crate::task::{Expected, Task};

/// The journal re-scored, and what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rescored {
    pub records: Vec<AttemptRecord>,
    pub changes: RescoreChanges,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RescoreChanges {
    /// Records whose check (correctness, parse or the check itself) changed.
    pub records_changed: usize,
    /// Acc@r successes before and after, per arm and round.
    pub by_round: Vec<RoundChange>,
    /// Tasks whose final correctness flipped, in journal order.
    pub flipped: Vec<Flip>,
    /// Task ids of the journal the suite no longer has: left as they were.
    pub missing_tasks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundChange {
    pub strategy: String,
    pub round: u32,
    pub correct_before: u64,
    pub correct_after: u64,
    pub tasks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    pub strategy: String,
    pub task_id: String,
    /// Final correctness after re-scoring (it was the opposite before).
    pub now_correct: bool,
}

/// The (expected LaTeX, answer) pairs a re-score of `records` against
/// `tasks` asks the symbolic checker, each once.
pub fn symbolic_pairs(records: &[AttemptRecord], tasks: &[Task]) -> Vec<(String, String)> {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut pairs: Vec<(String, String)> = records
        .iter()
        .filter(|r| r.answered)
        .filter_map(|r| {
            let answer = r.outcome.as_ref()?.answer.as_ref()?;
            match &by_id.get(r.task_id.as_str())?.expected {
                Expected::Math { latex } => Some((latex.clone(), answer.value.clone())),
                _ => None,
            }
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

/// Checks every round's answer again against `tasks` with the episode's
/// own scorer ([`score`]): a round whose code produced an answer value gets
/// a new check of that value (and its stdout); a round without one carries
/// the check in force before it. LaTeX answers take the symbolic checker's
/// verdicts from `symbolic` (asked beforehand, [`to_check`]).
pub fn rescore(
    config: &RunConfig,
    records: &[AttemptRecord],
    tasks: &[Task],
    symbolic: &Symbolic,
) -> Rescored {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut out = records.to_vec();
    // Each arm's task, its records' indices in round order.
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    let mut first_seen: Vec<(String, String)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let key = (r.arm_name().to_string(), r.task_id.clone());
        let entry = groups.entry(key.clone()).or_default();
        if entry.is_empty() {
            first_seen.push(key);
        }
        entry.push(i);
    }
    let mut changes = RescoreChanges::default();
    for key in &first_seen {
        let indices = groups.get_mut(key).expect("grouped above");
        indices.sort_by_key(|&i| records[i].round);
        let Some(task) = by_id.get(key.1.as_str()) else {
            if !changes.missing_tasks.contains(&key.1) {
                changes.missing_tasks.push(key.1.clone());
            }
            continue;
        };
        let mut carried: Option<Check> = None;
        for &i in indices.iter() {
            let rec = &mut out[i];
            let value = rec.outcome.as_ref().and_then(|o| o.answer.as_ref());
            carried = match (rec.answered, value) {
                (true, Some(a)) => {
                    let stdout = rec.outcome.as_ref().map_or("", |o| o.stdout.as_str());
                    let verdict = match &task.expected {
                        Expected::Math { latex } => symbolic.get(&(latex.clone(), a.value.clone())),
                        _ => None,
                    };
                    score(task, carried.as_ref(), Some(&a.value), stdout, verdict)
                }
                // An answered round always records its value; should one
                // not, its old check is the best there is.
                (true, None) => rec.check.clone(),
                (false, _) => carried,
            };
            let before = (rec.check.clone(), rec.correct, rec.parsed);
            rec.check = carried.clone();
            rec.correct = carried.as_ref().is_some_and(|c| c.correct);
            rec.parsed = carried.as_ref().is_some_and(|c| c.parsed);
            if before != (rec.check.clone(), rec.correct, rec.parsed) {
                changes.records_changed += 1;
            }
        }
        let last = *indices.last().expect("a group has a record");
        if records[last].correct != out[last].correct {
            changes.flipped.push(Flip {
                strategy: key.0.clone(),
                task_id: key.1.clone(),
                now_correct: out[last].correct,
            });
        }
    }
    changes.by_round = round_changes(config, records, &out);
    Rescored {
        records: out,
        changes,
    }
}

/// Acc@r successes of every arm, before and after.
fn round_changes(
    config: &RunConfig,
    before: &[AttemptRecord],
    after: &[AttemptRecord],
) -> Vec<RoundChange> {
    let (old, new) = (summarize(config, before), summarize(config, after));
    old.each_arm()
        .into_iter()
        .zip(new.each_arm())
        .flat_map(|(o, n)| {
            o.answers
                .accuracy_by_round
                .iter()
                .zip(&n.answers.accuracy_by_round)
                .enumerate()
                .map(|(r, (a, b))| RoundChange {
                    strategy: o.header.strategy.clone(),
                    round: r as u32,
                    correct_before: a.successes,
                    correct_after: b.successes,
                    tasks: a.n,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, number, task, R};
    use super::*;
    use crate::record::StopOn;

    /// Gives every answered round of `records` the answer value `value`.
    fn answering(mut records: Vec<AttemptRecord>, value: &str) -> Vec<AttemptRecord> {
        for r in records.iter_mut().filter(|r| r.answered) {
            let o = r.outcome.as_mut().unwrap();
            o.answer = Some(
                serde_json::from_value(
                    serde_json::json!({"value": value, "rule": "answer_variable"}),
                )
                .unwrap(),
            );
        }
        records
    }

    #[test]
    fn answers_are_checked_again_and_carried_forward() {
        let k = 2;
        let s = StopOn::Never;
        use R::*;
        // a: answers 1, then an error (carries), then keeps: right under an
        // expected of 1, though the journal said wrong.
        let a = answering(task("a", &[Wrong, Raised("KeyError"), Kept], s, k), "1");
        // b: answers 2 at round 1 only; the journal said right.
        let b = answering(task("b", &[NoCode, Right, Kept], s, k), "2");
        let cfg = config(&["a", "b"], k, s);
        let mut records = a;
        records.extend(b);
        let tasks = [number("a", 1.0), number("b", 3.0)];
        let out = rescore(&cfg, &records, &tasks, &Symbolic::new());
        let correct: Vec<(&str, u32, bool, bool)> = out
            .records
            .iter()
            .map(|r| (r.task_id.as_str(), r.round, r.correct, r.parsed))
            .collect();
        assert_eq!(
            correct,
            [
                ("a", 0, true, true),
                ("a", 1, true, true),
                ("a", 2, true, true),
                ("b", 0, false, false),
                ("b", 1, false, true),
                ("b", 2, false, true),
            ]
        );
        // The new checks are the checker's own.
        let c = out.records[1].check.as_ref().unwrap();
        assert_eq!(c.rule, "number:abs_tol");
        assert_eq!(c.extracted.as_deref(), Some("1"));
        // Everything but b's round 0 (no answer before or after) changed.
        assert_eq!(out.changes.records_changed, 5);
        let flips: Vec<(&str, bool)> = out
            .changes
            .flipped
            .iter()
            .map(|f| (f.task_id.as_str(), f.now_correct))
            .collect();
        assert_eq!(flips, [("a", true), ("b", false)]);
        let rounds: Vec<(u32, u64, u64)> = out
            .changes
            .by_round
            .iter()
            .map(|c| (c.round, c.correct_before, c.correct_after))
            .collect();
        assert_eq!(rounds, [(0, 0, 1), (1, 1, 1), (2, 1, 1)]);
        assert!(out.changes.by_round.iter().all(|c| c.strategy == "fat"));
        assert!(out.changes.missing_tasks.is_empty());
        // Nothing else in a record moves.
        for (old, new) in records.iter().zip(&out.records) {
            assert_eq!(old.outcome, new.outcome);
            assert_eq!(old.stop, new.stop);
        }
    }

    /// A journal checked by checker version 2 (the old verdicts and rules
    /// as it recorded them), re-scored with the one number-reading rule:
    /// only the verdicts the rule means to change flip.
    #[test]
    fn rescoring_with_the_number_rule_flips_only_what_it_means_to() {
        let s = StopOn::Never;
        // task, answer value, expected, old verdict, old rule, new rule.
        let answers = [
            (
                "weeks",
                "'3 weeks'",
                3.0,
                false,
                "number:unparsed",
                "number:unit:abs_tol",
            ),
            (
                "gallons",
                "'The answer is 14000 gallons.'",
                14000.0,
                false,
                "number:unparsed",
                "number:sentence:abs_tol",
            ),
            (
                "dollars",
                "The total cost is 7 dollars.",
                7.0,
                false,
                "number:unparsed",
                "number:sentence:abs_tol",
            ),
            (
                "division",
                "'56 / 4'",
                14.0,
                true,
                "number:abs_tol",
                "number:ambiguous",
            ),
            (
                "guess",
                "'maybe 7 or 8'",
                8.0,
                true,
                "number:last_number_fallback:abs_tol",
                "number:ambiguous",
            ),
            (
                "plain",
                "42",
                42.0,
                true,
                "number:abs_tol",
                "number:abs_tol",
            ),
            (
                "prose",
                "The answer is 42.",
                42.0,
                true,
                "number:last_number_fallback:abs_tol",
                "number:sentence:abs_tol",
            ),
            (
                "equation",
                "'26 * 5 * 1000 = 130,000'",
                130000.0,
                true,
                "number:last_number_fallback:abs_tol",
                "number:equation:abs_tol",
            ),
            (
                "wrong",
                "'The answer is 41.'",
                42.0,
                false,
                "number:last_number_fallback:mismatch",
                "number:sentence:mismatch",
            ),
            (
                "pair",
                "[1, 2]",
                1.0,
                false,
                "number:unparsed",
                "number:ambiguous",
            ),
        ];
        let ids: Vec<&str> = answers.iter().map(|a| a.0).collect();
        let mut records = Vec::new();
        let mut tasks = Vec::new();
        for (id, value, expected, was_correct, old_rule, _) in answers {
            let verdict = if was_correct { R::Right } else { R::Wrong };
            let mut rs = answering(task(id, &[verdict], s, 0), value);
            let check = rs[0].check.as_mut().unwrap();
            check.rule = old_rule.into();
            check.correct = was_correct;
            check.parsed = old_rule != "number:unparsed";
            records.extend(rs);
            tasks.push(number(id, expected));
        }
        let out = rescore(&config(&ids, 0, s), &records, &tasks, &Symbolic::new());
        for ((id, value, _, _, _, rule), r) in answers.iter().zip(&out.records) {
            assert_eq!(r.task_id, *id);
            assert_eq!(r.check.as_ref().unwrap().rule, *rule, "{value}");
        }
        let mut flips: Vec<(&str, bool)> = out
            .changes
            .flipped
            .iter()
            .map(|f| (f.task_id.as_str(), f.now_correct))
            .collect();
        flips.sort();
        assert_eq!(
            flips,
            [
                ("division", false),
                ("dollars", true),
                ("gallons", true),
                ("guess", false),
                ("weeks", true)
            ]
        );
        let read = &summarize(&config(&ids, 0, s), &out.records)
            .answers
            .final_answers_read;
        let count = |reading: &str| read.get(reading).map(|c| (c.answers, c.correct));
        assert_eq!(count("number"), Some((1, 1)));
        assert_eq!(count("number:unit"), Some((1, 1)));
        assert_eq!(count("number:sentence"), Some((4, 3)));
        assert_eq!(count("number:equation"), Some((1, 1)));
        assert_eq!(count("number:ambiguous"), Some((3, 0)));
    }

    #[test]
    fn the_same_expected_changes_nothing_and_a_missing_task_is_left_as_is() {
        let k = 1;
        let s = StopOn::Clean;
        let mut records = answering(task("a", &[R::Raised("E"), R::Right], s, k), "1");
        // The journal's checks as the checker would give them.
        let tasks = [number("a", 1.0)];
        records = rescore(
            &config(&["a", "gone"], k, s),
            &records,
            &tasks,
            &Symbolic::new(),
        )
        .records;
        let mut gone = answering(task("gone", &[R::Right], s, k), "7");
        gone[0].check.as_mut().unwrap().rule = "old".into();
        records.extend(gone.clone());
        let out = rescore(
            &config(&["a", "gone"], k, s),
            &records,
            &tasks,
            &Symbolic::new(),
        );
        assert_eq!(out.records, records);
        assert_eq!(out.changes.records_changed, 0);
        assert!(out.changes.flipped.is_empty());
        assert_eq!(out.changes.missing_tasks, ["gone"]);
        assert_eq!(out.records[2], gone[0]);
    }

    #[test]
    fn arms_are_rescored_apart() {
        let (cfg, records) = super::super::testing::two_arms();
        // Every answered round answered 5; task c now expects 5.
        let records = answering(records, "5");
        let tasks: Vec<Task> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|id| number(id, if *id == "c" { 5.0 } else { 0.0 }))
            .collect();
        let out = rescore(&cfg, &records, &tasks, &Symbolic::new());
        // Only c's answers are right now, in both arms.
        for r in &out.records {
            assert_eq!(r.correct, r.task_id == "c" && r.answered, "{r:?}");
        }
        let arms: Vec<&str> = out
            .changes
            .by_round
            .iter()
            .map(|c| c.strategy.as_str())
            .collect();
        assert_eq!(arms, ["fat", "fat", "dynamic", "dynamic"]);
        let fat_final = &out.changes.by_round[1];
        assert_eq!((fat_final.correct_before, fat_final.correct_after), (4, 1));
        // Fat: a b d f flip to wrong, c to right; dynamic: a c d e f were
        // right, c stays right.
        let flipped = |arm: &str| -> Vec<&str> {
            let mut v: Vec<&str> = out
                .changes
                .flipped
                .iter()
                .filter(|f| f.strategy == arm)
                .map(|f| f.task_id.as_str())
                .collect();
            v.sort();
            v
        };
        assert_eq!(flipped("fat"), ["a", "b", "c", "d", "f"]);
        assert_eq!(flipped("dynamic"), ["a", "d", "e", "f"]);
    }
}
