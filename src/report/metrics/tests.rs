use super::code_text::same_code;
use crate::record::StopOn;
use crate::report::testing::{config, task, R};
use crate::report::{summarize, Summary};
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
fn code_that_returns_to_an_earlier_round_is_oscillating_and_its_task_cycles() {
    use R::*;
    let (k, s) = (4, StopOn::Clean);
    let with = |id: &str, codes: &[Option<&str>]| {
        let rounds: Vec<R> = codes.iter().map(|_| Raised("KeyError")).collect();
        let mut t = task(id, &rounds, s, k);
        for (rec, code) in t.iter_mut().zip(codes) {
            rec.code = code.map(str::to_owned);
        }
        t
    };
    let (a, b) = (Some("v = d['a']\n"), Some("v = d['b']\n"));
    let a_commented = Some("# try a again\nv  =  d['a']   # a\n");
    let records: Vec<_> = [
        // flip: A B A B A — rounds 2, 3 and 4 return (A's comment aside).
        with("flip", &[a, b, a_commented, b, a]),
        // converge: A B C C C — new code, then resent code: no cycle.
        with(
            "converge",
            &[
                a,
                b,
                Some("v = d['c']"),
                Some("v = d['c']"),
                Some("v = d['c']"),
            ],
        ),
        // gap: A, no code, A — round 2 is round 0's code after a round
        // without code: a return, not resent code.
        with("gap", &[a, None, a]),
        // short: two rounds, nothing to count.
        with("short", &[a, b]),
    ]
    .concat();
    let m = summarize(
        &config(&["flip", "converge", "gap", "short"], k, s),
        &records,
    );
    let o = m.repairs.oscillating.unwrap();
    assert_eq!((o.successes, o.n), (4, 7), "3 of flip's, gap's round 2");
    let c = m.repairs.cycling_tasks.unwrap();
    assert_eq!((c.successes, c.n), (2, 3));
    assert_eq!(m.repairs.cycling_task_ids, ["flip", "gap"]);
    // Converging code resends, it does not cycle.
    let only: Vec<_> = records
        .iter()
        .filter(|r| r.task_id == "converge")
        .cloned()
        .collect();
    let converged = summarize(&config(&["converge"], k, s), &only);
    assert_eq!(converged.repairs.oscillating.unwrap().successes, 0);
    assert_eq!(converged.repairs.cycling_tasks.unwrap().successes, 0);
    assert!(converged.repairs.cycling_task_ids.is_empty());
    assert_eq!(converged.repairs.resent_code.unwrap().successes, 2);
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

/// Seven tasks under `--stop-on never`, K = 2, each round 100 prompt and
/// 20 completion tokens, 10 ms model, 5 ms exec, 16 ms total:
///
/// | task | r0 | r1 | r2 |
/// |---|---|---|---|
/// | a | right | kept | kept |
/// | b | KeyError | right | kept |
/// | c | right | kept | wrong |
/// | d | wrong | wrong | ValueError |
/// | e | timeout_wall | no code | right |
/// | f | NameError (stopped) | | |
/// | g | (no record) | | |
fn self_repair_journal() -> Summary {
    use R::*;
    let (k, s) = (2, StopOn::Never);
    let mut records = Vec::new();
    records.extend(task("a", &[Right, Kept, Kept], s, k));
    records.extend(task("b", &[Raised("KeyError"), Right, Kept], s, k));
    records.extend(task("c", &[Right, Kept, Wrong], s, k));
    records.extend(task("d", &[Wrong, Wrong, Raised("ValueError")], s, k));
    let wall = Killed(Verdict::TimeoutWall);
    records.extend(task("e", &[wall, NoCode, Right], s, k));
    records.extend(task("f", &[Raised("NameError")], s, k));
    let ids = ["a", "b", "c", "d", "e", "f", "g"];
    summarize(&config(&ids, k, s), &records)
}

#[test]
fn the_budget_curve_is_the_mean_cumulative_cost_and_acc_at_each_round() {
    let m = self_repair_journal();
    let curve = &m.self_repair.budget_curve;
    assert_eq!(curve.len(), 3);
    // Records by round ≤ r: 6, 11, 16 (f stopped at 0, g has none).
    for (p, records) in curve.iter().zip([6.0, 11.0, 16.0]) {
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} vs {b} at {}", p.round);
        close(p.tokens, 120.0 * records / 7.0);
        close(p.prompt_tokens, 100.0 * records / 7.0);
        close(p.completion_tokens, 20.0 * records / 7.0);
        close(p.model_ms, 10.0 * records / 7.0);
        close(p.exec_ms, 5.0 * records / 7.0);
        close(p.wall_ms, 16.0 * records / 7.0);
    }
    let acc: Vec<f64> = curve.iter().map(|p| p.accuracy * 7.0).collect();
    assert_eq!(acc, [2.0, 3.0, 3.0]);
    assert_eq!(
        curve.iter().map(|p| p.accuracy).collect::<Vec<_>>(),
        m.answers
            .accuracy_by_round
            .iter()
            .map(|r| r.value)
            .collect::<Vec<_>>()
    );
    // One arm: the comparable budgets are its own, at its own Acc@r.
    let rows = &m.accuracy_at_budget;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1].tokens, curve[1].tokens);
    assert_eq!(rows[1].accuracy[0].arm, "fat");
    assert_eq!(rows[1].accuracy[0].accuracy, Some(3.0 / 7.0));
}

#[test]
fn accuracy_at_comparable_budgets_uses_the_median_over_arms() {
    let (cfg, records) = crate::report::testing::two_arms();
    let m = summarize(&cfg, &records);
    // fat: 7 records over 6 tasks (120, 140 tokens), Acc 3/6 then 4/6;
    // dynamic: 9 records (120, 180 tokens), Acc 3/6 then 5/6.
    let rows: Vec<(usize, f64, Vec<Option<f64>>)> = m
        .accuracy_at_budget
        .iter()
        .map(|r| {
            let accs = r.accuracy.iter().map(|a| a.accuracy).collect();
            (r.round, r.tokens, accs)
        })
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], (0, 120.0, vec![Some(0.5), Some(0.5)]));
    assert_eq!((rows[1].0, rows[1].1), (1, 160.0));
    // fat had stopped every task by 140 tokens: its final 2/3 holds at 160;
    // dynamic is 2/3 of the way to its round 1.
    assert!((rows[1].2[0].unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert!((rows[1].2[1].unwrap() - 13.0 / 18.0).abs() < 1e-12);
    let arms: Vec<&str> = m.accuracy_at_budget[1]
        .accuracy
        .iter()
        .map(|a| a.arm.as_str())
        .collect();
    assert_eq!(arms, ["fat", "dynamic"]);
}

#[test]
fn pass_at_k_is_the_mean_over_tasks_of_the_attempts_drawn() {
    let m = self_repair_journal();
    // a b c e: 3 draws, 1 answered right in its own round; d: 3, none;
    // f: 1 draw, none; g: none drawn.
    let p = &m.self_repair.pass_at_k;
    let ks: Vec<usize> = p.iter().map(|p| p.k).collect();
    assert_eq!(ks, [1, 2, 3]);
    assert!((p[0].value - 4.0 / 21.0).abs() < 1e-12, "{p:?}");
    assert!((p[1].value - 8.0 / 21.0).abs() < 1e-12, "{p:?}");
    assert!((p[2].value - 4.0 / 7.0).abs() < 1e-12, "{p:?}");
    let short: Vec<u64> = p.iter().map(|p| p.tasks_short).collect();
    assert_eq!(short, [1, 2, 2]);
}

#[test]
fn transitions_count_every_task_between_its_carried_states() {
    let m = self_repair_journal();
    let t: Vec<[u64; 4]> = m
        .self_repair
        .transitions
        .iter()
        .map(|t| {
            [
                t.correct_to_correct,
                t.correct_to_incorrect,
                t.incorrect_to_correct,
                t.incorrect_to_incorrect,
            ]
        })
        .collect();
    // r1: a c stay right, b fixed, d e f g stay wrong; r2: a b stay
    // right, c broken, e fixed, d f g stay wrong.
    assert_eq!(t, [[2, 0, 1, 4], [2, 1, 1, 3]]);
    let rounds: Vec<usize> = m.self_repair.transitions.iter().map(|t| t.round).collect();
    assert_eq!(rounds, [1, 2]);
}

#[test]
fn the_failure_class_matrix_has_a_row_per_round0_class() {
    let m = self_repair_journal();
    let rows = &m.self_repair.failure_classes;
    let row = |class: &str| -> (u64, Vec<(&str, u64)>, (u64, u64)) {
        let r = &rows[class];
        let at_k = r.at_k.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let rate = r.repair_rate.unwrap();
        (r.tasks, at_k, (rate.successes, rate.n))
    };
    let names: Vec<&str> = rows.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "KeyError",
            "NameError",
            "correct",
            "not_recorded",
            "timeout_wall",
            "wrong_answer"
        ]
    );
    assert_eq!(
        row("correct"),
        (2, vec![("correct", 1), ("wrong_answer", 1)], (1, 2))
    );
    assert_eq!(row("KeyError"), (1, vec![("correct", 1)], (1, 1)));
    assert_eq!(row("wrong_answer"), (1, vec![("ValueError", 1)], (0, 1)));
    assert_eq!(row("timeout_wall"), (1, vec![("correct", 1)], (1, 1)));
    assert_eq!(row("NameError"), (1, vec![("NameError", 1)], (0, 1)));
    assert_eq!(row("not_recorded"), (1, vec![("not_recorded", 1)], (0, 1)));
    assert_eq!(rows.values().map(|r| r.tasks).sum::<u64>(), 7);
}

/// A KeyError traceback as IPython prints it, failing at `line` of a cell.
fn key_error(line: usize, source: &str) -> crate::kernel::ErrorInfo {
    crate::kernel::ErrorInfo {
        ename: "KeyError".into(),
        evalue: "'a'".into(),
        traceback: vec![
            "-".repeat(75),
            "KeyError                                  Traceback (most recent call last)".into(),
            format!("Cell In[1], line {line}\n----> {line} {source}\n"),
            "KeyError: 'a'".into(),
        ],
    }
}

#[test]
fn a_repeated_error_is_the_same_exception_at_a_line_of_the_same_text() {
    use R::*;
    let (k, s) = (2, StopOn::Clean);
    let key = Raised("KeyError");
    // x: the same failing line at 1 (moved down by a blank line), another
    // line at 2.
    let mut x = task("x", &[key, key, key], s, k);
    let codes = [
        ("df = load()\nv = df['a']\n", 2, "v = df['a']"),
        ("df = load()\n\nv = df['a']\n", 3, "v = df['a']"),
        ("v = df['b']\n", 1, "v = df['b']"),
    ];
    for (rec, (code, line, source)) in x.iter_mut().zip(codes) {
        rec.code = Some(code.into());
        rec.outcome.as_mut().unwrap().error = Some(key_error(line, source));
    }
    // y: the same exception twice, no line known: not the same line.
    let name = Raised("NameError");
    let y = task("y", &[name, name], s, k);
    // z: no code after the error: no repair ran.
    let z = task("z", &[Raised("TypeError"), NoCode], s, k);
    let records: Vec<_> = x.into_iter().chain(y).chain(z).collect();
    let m = summarize(&config(&["x", "y", "z"], k, s), &records);
    let r = m.repairs.repeated_error.unwrap();
    assert_eq!((r.successes, r.n), (1, 3));
    // Resent code is counted apart: x's round 1 (a blank line added) and
    // y's round 1 (the same `x = 1`).
    let resent = m.repairs.resent_code.unwrap();
    assert_eq!((resent.successes, resent.n), (2, 3));
}
