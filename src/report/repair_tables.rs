//! The self-repair tables the Markdown and HTML reports share, one table
//! per view with an arm column: accuracy against cumulative budget,
//! accuracy at comparable budgets, pass@k beside Acc@(k−1), transitions
//! between rounds, the failure-class matrix, repair after kills and
//! repeated errors. Cells are
//! plain text; each renderer only lays them out.

use std::collections::BTreeSet;

use super::cells::counted;
use super::metrics::{ArmSummary, CORRECT};
use super::Summary;

/// One table: a heading, what its numbers are over, and text cells.
pub(super) struct Table {
    pub(super) title: String,
    pub(super) note: &'static str,
    pub(super) head: Vec<String>,
    pub(super) rows: Vec<Vec<String>>,
}

/// Every table that has rows, in report order.
pub(super) fn tables(s: &Summary) -> Vec<Table> {
    let arms = s.each_arm();
    [
        budget(&arms),
        comparable(s),
        pass_at_k(&arms),
        execution_modes(&arms),
        transitions(&arms),
        failure_classes(&arms, s.header.rounds),
        kills(&arms, s.header.rounds),
        repeated(&arms),
        published(&arms),
        differing(&arms),
        by_tag(&arms),
    ]
    .into_iter()
    .filter(|t| !t.rows.is_empty())
    .collect()
}

/// Acc@0 and Acc@K of the tasks with each tag.
fn by_tag(arms: &[&ArmSummary]) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for (tag, g) in &a.answers.accuracy_by_tag {
            let p = |r: Option<&crate::report::stats::Rate>| {
                r.map_or_else(|| "-".into(), |x| pct(x.value))
            };
            rows.push(vec![
                name(a),
                tag.clone(),
                g.tasks.to_string(),
                p(g.round0.as_ref()),
                p(g.final_round.as_ref()),
            ]);
        }
    }
    Table {
        title: "Accuracy by tag".into(),
        note: "Over the tasks with each tag (a MATH task's subject and level, a DABench concept).",
        head: strings(&["arm", "tag", "tasks", "Acc@0", "Acc@K"]),
        rows,
    }
}

/// Acc@0 and Acc@K under each dataset's published rule beside retrace's
/// on the same tasks.
fn published(arms: &[&ArmSummary]) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for (rule, p) in &a.answers.published_rules {
            let at = |v: &[crate::report::stats::Rate], r: usize| {
                v.get(r).map_or_else(|| "-".into(), |x| pct(x.value))
            };
            let k = p.accuracy_by_round.len().saturating_sub(1);
            rows.push(vec![
                name(a),
                rule.clone(),
                p.tasks.to_string(),
                at(&p.retrace_by_round, 0),
                at(&p.accuracy_by_round, 0),
                at(&p.retrace_by_round, k),
                at(&p.accuracy_by_round, k),
                p.differing.len().to_string(),
            ]);
        }
    }
    Table {
        title: "Accuracy under the datasets' published rules".into(),
        note: "The same answers scored by each dataset's own published rule (GSM8K's exact \
               match, DABench's tagged closed form, Math-Verify, Minerva) beside retrace's \
               rule, over the tasks each applies to; docs/math-checking.md.",
        head: strings(&[
            "arm",
            "rule",
            "tasks",
            "Acc@0 retrace",
            "Acc@0 rule",
            "Acc@K retrace",
            "Acc@K rule",
            "tasks differing",
        ]),
        rows,
    }
}

/// The tasks whose final verdict differs between retrace and a published
/// rule.
fn differing(arms: &[&ArmSummary]) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for (rule, p) in &a.answers.published_rules {
            for d in &p.differing {
                let verdict = |v: bool| if v { "correct" } else { "wrong" }.to_string();
                rows.push(vec![
                    name(a),
                    rule.clone(),
                    d.task_id.clone(),
                    verdict(d.retrace),
                    verdict(!d.retrace),
                    d.answer.clone().unwrap_or_default(),
                    d.rule.clone().unwrap_or_default(),
                ]);
            }
        }
    }
    Table {
        title: "Tasks where retrace and a published rule differ".into(),
        note: "At round K: the final answer, how retrace read it, and both verdicts.",
        head: strings(&[
            "arm",
            "rule",
            "task",
            "retrace",
            "published rule",
            "answer",
            "read as",
        ]),
        rows,
    }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn pct(v: f64) -> String {
    format!("{:.1}%", 100.0 * v)
}

fn name(a: &ArmSummary) -> String {
    a.header.strategy.clone()
}

fn budget(arms: &[&ArmSummary]) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for p in &a.self_repair.budget_curve {
            rows.push(vec![
                name(a),
                p.round.to_string(),
                format!("{:.0}", p.tokens),
                format!("{:.0}", p.model_ms),
                format!("{:.0}", p.exec_ms),
                format!("{:.0}", p.wall_ms),
                pct(p.accuracy),
            ]);
        }
    }
    Table {
        title: "Accuracy against cumulative budget".into(),
        note: "Per task, what rounds 0..=r spent, averaged over all tasks of the arm \
               (a stopped task spends nothing more); Acc@r with the answer carried forward.",
        head: strings(&[
            "arm", "round r", "tokens", "model ms", "exec ms", "wall ms", "Acc@r",
        ]),
        rows,
    }
}

fn comparable(s: &Summary) -> Table {
    let arms = s.each_arm();
    let mut head = vec!["budget (round r)".to_owned(), "tokens".to_owned()];
    head.extend(arms.iter().map(|a| name(a)));
    let rows = s
        .accuracy_at_budget
        .iter()
        .map(|b| {
            let mut row = vec![b.round.to_string(), format!("{:.0}", b.tokens)];
            row.extend(
                b.accuracy
                    .iter()
                    .map(|a| a.accuracy.map_or_else(|| "—".into(), pct)),
            );
            row
        })
        .collect();
    Table {
        title: "Accuracy at comparable budgets".into(),
        note: "Budget r is the median over arms of round r's mean cumulative tokens; each \
               arm's accuracy there is interpolated linearly between its two adjacent \
               points; beyond its last round, its final accuracy (every task had stopped); \
               — below its round 0.",
        head,
        rows,
    }
}

/// For the arms that resample, whose attempts are fresh draws, beside
/// the repairing arms' accuracy after as many attempts.
fn pass_at_k(arms: &[&ArmSummary]) -> Table {
    let resamples = |a: &&&ArmSummary| a.header.after_failure == "resample";
    let repairing: Vec<&ArmSummary> = arms.iter().filter(|a| !resamples(a)).copied().collect();
    let acc_at = |a: &ArmSummary, k: usize| {
        a.answers
            .accuracy_by_round
            .get(k - 1)
            .map_or_else(|| "n/a".into(), |r| pct(r.value))
    };
    let mut rows = Vec::new();
    for a in arms.iter().filter(resamples) {
        for p in &a.self_repair.pass_at_k {
            let mut row = vec![name(a), p.k.to_string(), pct(p.value), acc_at(a, p.k)];
            row.extend(repairing.iter().map(|r| acc_at(r, p.k)));
            row.push(p.tasks_short.to_string());
            rows.push(row);
        }
    }
    let mut head = ["arm", "k", "pass@k", "Acc@(k−1)"]
        .map(String::from)
        .to_vec();
    head.extend(
        repairing
            .iter()
            .map(|r| format!("Acc@(k−1) of {}", name(r))),
    );
    head.push("tasks with < k attempts".into());
    Table {
        title: "pass@k of the resampling arms".into(),
        note: "Unbiased pass@k (1 − C(n−c,k)/C(n,k)) per task over its n attempts with a \
               reply, c of them answered correctly in their own round, averaged over all \
               tasks; a task with fewer than k attempts counts 1 if one was correct. \
               Acc@(k−1) is the carried-forward accuracy after the same number of attempts, \
               of the resampling arm and of each repairing arm.",
        head,
        rows,
    }
}

/// `--execution` arms: what each mode's kernels cost and what the
/// repairs did with the state (rows only in runs that compare modes).
fn execution_modes(arms: &[&ArmSummary]) -> Table {
    let rate = |r: Option<crate::report::stats::Rate>| {
        r.map_or_else(
            || "—".into(),
            |r| format!("{}/{} ({})", r.successes, r.n, pct(r.value)),
        )
    };
    let rows = arms
        .iter()
        .filter_map(|a| {
            let k = a.kernel_state.as_ref()?;
            let acc = a.answers.accuracy_by_round.last().map_or(0.0, |r| r.value);
            Some(vec![
                name(a),
                k.mode.name().to_string(),
                pct(acc),
                format!("{} ({:.0} ms)", k.kernel_starts, k.kernel_start_ms),
                format!(
                    "{} ({:.0} ms, {} diverged)",
                    k.replays, k.replay_ms, k.replays_diverged
                ),
                rate(k.used_state),
                rate(k.lacked_state),
                rate(k.tasks_lacking_state),
            ])
        })
        .collect();
    Table {
        title: "Execution modes".into(),
        note: "Kernels started and replays (re-runs of the clean earlier cells) with their \
               time summed; repairs that read a name only an earlier cell defined, and that \
               failed with a NameError for such a name, over the repairs checked; tasks whose \
               last round failed so, over all tasks.",
        head: strings(&[
            "arm",
            "mode",
            "Acc@K",
            "kernel starts",
            "replays",
            "used state",
            "lacked state",
            "tasks lacking state",
        ]),
        rows,
    }
}

fn transitions(arms: &[&ArmSummary]) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for t in &a.self_repair.transitions {
            rows.push(vec![
                name(a),
                format!("{} → {}", t.round - 1, t.round),
                t.correct_to_correct.to_string(),
                t.correct_to_incorrect.to_string(),
                t.incorrect_to_correct.to_string(),
                t.incorrect_to_incorrect.to_string(),
            ]);
        }
    }
    Table {
        title: "Transitions between rounds".into(),
        note: "Tasks by their carried-forward correctness at round r−1 and at r, over all \
               tasks of the arm (Huang et al.).",
        head: strings(&["arm", "rounds", "C→C", "C→I", "I→C", "I→I"]),
        rows,
    }
}

/// `correct` first, then the failure classes by name.
fn correct_first<'a>(classes: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut sorted: Vec<&str> = classes.collect::<BTreeSet<_>>().into_iter().collect();
    sorted.sort_by_key(|c| *c != CORRECT);
    sorted
}

fn failure_classes(arms: &[&ArmSummary], k: u32) -> Table {
    let finals = correct_first(
        arms.iter()
            .flat_map(|a| a.self_repair.failure_classes.values())
            .flat_map(|row| row.at_k.keys().map(String::as_str)),
    );
    let mut head = vec!["arm".to_owned(), "round-0 class".into(), "tasks".into()];
    head.extend(finals.iter().map(|c| format!("{c} at {k}")));
    head.push(format!("repair rate (correct at {k})"));
    let mut rows = Vec::new();
    for a in arms {
        let classes = &a.self_repair.failure_classes;
        for class in correct_first(classes.keys().map(String::as_str)) {
            let row = &classes[class];
            let mut cells = vec![name(a), class.to_owned(), row.tasks.to_string()];
            cells.extend(
                finals
                    .iter()
                    .map(|c| row.at_k.get(*c).copied().unwrap_or(0).to_string()),
            );
            cells.push(counted(row.repair_rate.as_ref()));
            rows.push(cells);
        }
    }
    Table {
        title: format!("Failure classes: round 0 against round {k}"),
        note: "Each task once, by how its round 0 ended (exception name, kill verdict, \
               wrong answer, no answer, …, or correct) and how its state at round K ends; \
               the repair rate is over the row's tasks.",
        head,
        rows,
    }
}

/// Per kill class: the tasks it ended a round of, recovery by round K and
/// the repairs that then ran within the limits, each with its interval.
fn kills(arms: &[&ArmSummary], k: u32) -> Table {
    let mut rows = Vec::new();
    for a in arms {
        for (class, row) in &a.self_repair.kill_recovery {
            rows.push(vec![
                name(a),
                class.clone(),
                row.executions.to_string(),
                row.tasks.to_string(),
                row.repaired.to_string(),
                counted(row.recovery.as_ref()),
                counted(row.within_limits.as_ref()),
            ]);
        }
    }
    Table {
        title: "Repair after kills".into(),
        note: "By the limit that ended a round (memory: OOM kill or MemoryError the OS \
               confirms; memory_unconfirmed: a MemoryError it does not; cpu; wall; output; \
               recursion: RecursionError; …). Rounds and tasks with one; repaired: \
               the tasks whose first such round had a next round, the denominator of both \
               rates. Recovered: correct at round K. Within limits: that next round ran its \
               code to verdict ok.",
        head: vec![
            "arm".into(),
            "kill class".into(),
            "rounds".into(),
            "tasks".into(),
            "repaired".into(),
            format!("recovered (correct at {k})"),
            "repair within limits".into(),
        ],
        rows,
    }
}

fn repeated(arms: &[&ArmSummary]) -> Table {
    let rows = arms
        .iter()
        .filter(|a| a.repairs.repeated_error.is_some() || a.repairs.resent_code.is_some())
        .map(|a| {
            let mut rules: Vec<String> = a
                .repairs
                .masked_by_rule
                .iter()
                .map(|(rule, n)| format!("{rule} {n}"))
                .collect();
            let unchecked: Vec<String> = a
                .repairs
                .masking_unchecked
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            if !unchecked.is_empty() {
                rules.push(format!("not checked: {}", unchecked.join(", ")));
            }
            vec![
                name(a),
                counted(a.repairs.repeated_error.as_ref()),
                counted(a.repairs.resent_code.as_ref()),
                counted(a.repairs.oscillating.as_ref()),
                cycling(a),
                counted(a.repairs.masked.as_ref()),
                rules.join(", "),
            ]
        })
        .collect();
    Table {
        title: "Repairs that repeat or hide the error".into(),
        note: "Repeated error: a round r ≥ 1 that raised the exception of round r−1 at a \
               failing line of the same text, over rounds that ran code after a round that \
               raised. Resent code: over repair rounds with code after a round with code. \
               Oscillating: rounds r ≥ 2 whose code (comments and whitespace aside) is that of \
               a round ≤ r−2 and not of round r−1, over rounds r ≥ 2 with code; cycling \
               tasks: tasks with such a round, over tasks with a round r ≥ 2 with code. \
               Masked: repairs flagged by a masking rule, over repairs that ran code after \
               a failure the model was told of.",
        head: strings(&[
            "arm",
            "repeated error",
            "resent code",
            "oscillating",
            "cycling tasks",
            "masked",
            "masking rules",
        ]),
        rows,
    }
}

/// Cycling tasks with their rate, and their ids when few enough to read.
fn cycling(a: &ArmSummary) -> String {
    let rate = counted(a.repairs.cycling_tasks.as_ref());
    let ids = &a.repairs.cycling_task_ids;
    match ids.len() {
        0 => rate,
        1..=5 => format!("{rate}: {}", ids.join(", ")),
        n => format!("{rate}: {}, … ({n})", ids[..5].join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summarize;
    use crate::report::testing::two_arms;

    #[test]
    fn pass_at_k_of_a_resampling_arm_stands_beside_the_repairing_arms_accuracy() {
        let (mut cfg, records) = two_arms();
        cfg.spec.policy.after_failure = crate::record::AfterFailure::Resample;
        let mut summary = summarize(&cfg, &records);
        summary.arms[0].header.after_failure = "repair".into();
        let table = pass_at_k(&summary.each_arm());
        assert_eq!(
            table.head,
            [
                "arm",
                "k",
                "pass@k",
                "Acc@(k−1)",
                "Acc@(k−1) of fat",
                "tasks with < k attempts"
            ]
        );
        let fat = &summary.arms[0].answers.accuracy_by_round;
        let rows: Vec<&Vec<String>> = table.rows.iter().filter(|r| r[1] == "2").collect();
        assert_eq!(rows.len(), 1, "the resampling arm only");
        assert_eq!(rows[0][0], "dynamic");
        assert_eq!(rows[0][4], pct(fat[1].value), "fat's Acc@1 beside pass@2");
    }

    #[test]
    fn repairs_not_checked_for_masking_are_counted_by_reason_apart_from_the_rate() {
        use crate::record::StopOn;
        use crate::repair::{MaskFlag, Unchecked, UncheckedReason};
        use crate::report::testing::{config, task, R};
        let (k, s) = (3, StopOn::Clean);
        let mut records = task(
            "a",
            &[
                R::Raised("KeyError"),
                R::Raised("KeyError"),
                R::Raised("KeyError"),
                R::Right,
            ],
            s,
            k,
        );
        records[1].masking = Some(vec![MaskFlag::BroadHandler]);
        records[2].masking_unchecked =
            Some(Unchecked::new(UncheckedReason::ParserLimit, "MemoryError"));
        records[3].masking = Some(Vec::new());
        let summary = summarize(&config(&["a"], k, s), &records);
        let repairs = &summary.each_arm()[0].repairs;
        let masked = repairs.masked.as_ref().unwrap();
        assert_eq!(
            (masked.successes, masked.n),
            (1, 2),
            "the unchecked repair is not in it"
        );
        assert_eq!(
            repairs.masking_unchecked,
            std::collections::BTreeMap::from([("parser_limit".to_string(), 1)])
        );
        let table = repeated(&summary.each_arm());
        assert_eq!(
            table.rows[0][6],
            "broad_handler 1, not checked: parser_limit 1"
        );
    }
}
