use super::repairs::same_code;
use super::*;
use crate::record::StopOn;
use crate::report::testing::{config, task, R};
use crate::sandbox::Verdict;

/// The successes of each rate, in order.
fn successes(rates: &[crate::report::stats::Rate]) -> Vec<u64> {
    rates.iter().map(|r| r.successes).collect()
}

#[test]
fn every_metric_on_a_hand_built_journal() {
    use R::*;
    let k = 2;
    let s = StopOn::Never;
    let mut records = Vec::new();
    // a: right throughout (kept after reviews).
    records.extend(task("a", &[Right, Kept, Kept], s, k));
    // b: raised, then fixed at round 1, kept.
    records.extend(task("b", &[Raised("KeyError"), Right, Kept], s, k));
    // c: right at 0, broken into a wrong answer at 2: a regression.
    records.extend(task("c", &[Right, Kept, Wrong], s, k));
    // d: wrong at 0, still wrong; then an error (carries wrong).
    records.extend(task("d", &[Wrong, Wrong, Raised("ValueError")], s, k));
    // e: killed at 0, no code at 1, right at 2.
    records.extend(task(
        "e",
        &[Killed(Verdict::TimeoutWall), NoCode, Right],
        s,
        k,
    ));
    // f: the endpoint failed at round 0.
    records.extend(task("f", &[Infra], s, k));
    let cfg = config(&["a", "b", "c", "d", "e", "f"], k, s);
    let m = summarize(&cfg, &records);

    let acc = successes(&m.answers.accuracy_by_round);
    assert_eq!(acc, [2, 3, 3]); // a c | a b c | a b e
    assert!(m.answers.accuracy_by_round.iter().all(|r| r.n == 6));
    assert!((m.answers.delta_by_round[1] - 1.0 / 6.0).abs() < 1e-12);
    assert_eq!(m.answers.solved_by_round, [2.0 / 6.0, 3.0 / 6.0, 4.0 / 6.0]);
    // Wrong at 0: b d e f; right at K among them: b e.
    let rec = m.answers.recovery_rate.unwrap();
    assert_eq!((rec.successes, rec.n), (2, 4));
    // Repaired (got a round ≥ 1) among them: b d e.
    let rep = m.answers.recovery_rate_repaired.unwrap();
    assert_eq!((rep.successes, rep.n), (2, 3));
    // Right at 0: a c; wrong at K: c.
    let reg = m.answers.regression_rate.unwrap();
    assert_eq!((reg.successes, reg.n), (1, 2));

    // Carry-forward, all tasks in every denominator.
    let exec = successes(&m.answers.exec_success_by_round);
    // r0: a c d ok; r1: a b c d (e's r1 had no code, its r0 was a kill);
    // r2: a b c e (d raised).
    assert_eq!(exec, [3, 4, 4]);
    let parse = successes(&m.answers.parse_by_round);
    assert_eq!(parse, [3, 4, 5]);
    assert!(m.answers.parse_by_round.iter().all(|r| r.n == 6));

    let f = &m.answers.round0_failures;
    assert_eq!(f.len(), 4, "{f:?}");
    assert_eq!((f["KeyError"].tasks, f["KeyError"].fixed), (1, 1));
    assert_eq!((f["wrong_answer"].tasks, f["wrong_answer"].fixed), (1, 0));
    assert_eq!(f["timeout_wall"].fixed, 1);
    assert_eq!(f["timeout_wall"].ran_clean_later, 1);
    assert_eq!(f["infra_error"].tasks, 1);

    // Reviews: after a's r0 and r1, b's r1, c's r0 and r1, d's r0 and
    // r1; revised by c's r2 and d's r1 and r2.
    let r = &m.repairs.reviews;
    assert_eq!(r.prompts, 7, "{r:?}");
    assert_eq!(r.kept, 4);
    assert_eq!(r.revised, 3);
    assert_eq!(r.right_to_wrong, 1);
    assert_eq!(r.wrong_to_right, 0);

    // Kept answers and replies without code run nothing.
    assert_eq!(m.execution.executions, 10);
    let kill = m.execution.kill_rate.total.unwrap();
    assert_eq!((kill.successes, kill.n), (1, 10));
    assert_eq!(m.execution.kill_rate.counts["timeout_wall"], 1);
    assert_eq!(m.execution.verdicts["ok"], 7);
    assert_eq!(m.execution.verdicts["error"], 2);
    let infra = m.execution.infra_error_rate.unwrap();
    assert_eq!((infra.successes, infra.n), (1, 6));
    assert_eq!(m.header.tasks_finished, 6);
    assert_eq!(m.cost.tokens.prompt, 100 * 16);
    assert_eq!(m.cost.rounds_used_mean, 16.0 / 6.0);
    assert_eq!(m.header.stop_on, "never");
    assert!(!m.header.oracle_feedback);
    assert!(m.answers.accuracy_by_fault.is_empty());
    assert!(m.answers.multi_part_accuracy_by_round.is_empty());
}

#[test]
fn a_stopped_task_carries_its_state_and_unfinished_tasks_count_as_wrong() {
    use R::*;
    let k = 3;
    let mut records = task("a", &[Raised("NameError"), Right], StopOn::Clean, k);
    // b: interrupted after round 0 (no final record).
    let mut b = task("b", &[Right], StopOn::Clean, k);
    b[0].stop = None;
    records.extend(b);
    let m = summarize(&config(&["a", "b", "c"], k, StopOn::Clean), &records);
    let acc = successes(&m.answers.accuracy_by_round);
    assert_eq!(acc, [1, 2, 2, 2]);
    assert_eq!(m.header.tasks_finished, 1);
    // c has no record: wrong at 0, never repaired.
    let rep = m.answers.recovery_rate_repaired.unwrap();
    assert_eq!((rep.successes, rep.n), (1, 1));
    let rec = m.answers.recovery_rate.unwrap();
    assert_eq!((rec.successes, rec.n), (1, 2));
    assert_eq!(m.answers.regression_rate.unwrap().successes, 0);
}

#[test]
fn faults_and_multi_parts() {
    use R::*;
    let k = 1;
    let mut records = task("a", &[Raised("NameError"), Right], StopOn::Clean, k);
    records[0].fault = Some("undefined_name".into());
    let mut b = task(
        "b",
        &[Raised("NameError"), Raised("NameError")],
        StopOn::Clean,
        k,
    );
    b[0].fault = Some("undefined_name".into());
    records.extend(b);
    let mut c = task("c", &[Wrong, Right], StopOn::Correct, k);
    let part = |ok| crate::task::check::PartCheck {
        name: "x".into(),
        correct: ok,
        extracted: None,
        normalized: None,
        rule: "r".into(),
        tolerance: None,
    };
    c[0].check.as_mut().unwrap().parts = vec![part(true), part(false)];
    c[1].check.as_mut().unwrap().parts = vec![part(true), part(true)];
    records.extend(c);
    let m = summarize(&config(&["a", "b", "c"], k, StopOn::Correct), &records);
    let f = &m.answers.accuracy_by_fault["undefined_name"];
    assert_eq!(f.tasks, 2);
    assert_eq!(f.round0.unwrap().successes, 0);
    assert_eq!(f.final_round.unwrap().successes, 1);
    let parts: Vec<(u64, u64)> = m
        .answers
        .multi_part_accuracy_by_round
        .iter()
        .map(|r| (r.successes, r.n))
        .collect();
    assert_eq!(parts, [(1, 2), (2, 2)]);
    assert!(m.header.oracle_feedback);
}

#[test]
fn resent_code_counts_repairs_that_change_nothing() {
    use R::*;
    let k = 2;
    let s = StopOn::Clean;
    let mut records = Vec::new();
    // a: raised, resent (re-wrapped only), then changed and right.
    let mut a = task("a", &[Raised("KeyError"), Raised("KeyError"), Right], s, k);
    a[0].code = Some("x = 1\nanswer = x\n".into());
    a[1].code = Some("x = 1   \n\nanswer = x".into());
    a[2].code = Some("x = 2\nanswer = x".into());
    records.extend(a);
    // b: raised, then no code: not a repair with code.
    records.extend(task("b", &[Raised("TypeError"), NoCode], s, k));
    let m = summarize(&config(&["a", "b"], k, s), &records);
    let resent = m.repairs.resent_code.unwrap();
    assert_eq!((resent.successes, resent.n), (1, 2));
    assert!(same_code("a\n\n b", "a\n b  \n"));
    assert!(!same_code("a\n b", "a\nb"));
}

#[test]
fn a_summary_reads_back_from_its_json() {
    // The sections are flattened into one object; reading it back must
    // give the same summary (one arm and several).
    let (cfg, records) = crate::report::testing::two_arms();
    let two = summarize(&cfg, &records);
    let one = summarize(
        &config(&["a"], 1, StopOn::Clean),
        &task("a", &[R::Right], StopOn::Clean, 1),
    );
    for s in [two, one] {
        let text = serde_json::to_string_pretty(&s).unwrap();
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    }
}
