//! The symbolic checker in its confined kernel: every row of the table in
//! docs/math-checking.md is what it says; equivalent forms of random
//! rationals and radicals agree; hostile answers are stopped at its limits
//! and the next answer is checked as usual.

use crate::common;

use std::sync::Arc;

use retrace::harness::math_checker::MathChecker;
use retrace::pyenv::ImageName;

fn checker() -> Option<Arc<MathChecker>> {
    let sandbox = common::confined()?;
    Some(Arc::new(MathChecker::new(
        common::image(ImageName::Checker),
        sandbox,
    )))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One row of the docs table.
struct Row {
    line: usize,
    expected: String,
    answer: String,
    retrace: bool,
    rule: String,
    math_verify: bool,
    minerva: bool,
}

/// The table under `| expected | answer | retrace | rule | Math-Verify |
/// Minerva |` in docs/math-checking.md.
fn table() -> Vec<Row> {
    let text = include_str!("../../docs/math-checking.md");
    let header = "| expected | answer | retrace | rule | Math-Verify | Minerva |";
    let start = text
        .lines()
        .position(|l| l.trim() == header)
        .expect("the docs hold the checker's table");
    let code = |cell: &str| {
        let cell = cell.trim();
        cell.strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .unwrap_or_else(|| panic!("not a code cell: {cell}"))
            .to_string()
    };
    let yes = |cell: &str| match cell.trim() {
        "yes" => true,
        "no" => false,
        other => panic!("not yes/no: {other}"),
    };
    text.lines()
        .enumerate()
        .skip(start + 2)
        .take_while(|(_, l)| l.starts_with('|'))
        .map(|(i, l)| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 6, "docs/math-checking.md:{}: {l}", i + 1);
            Row {
                line: i + 1,
                expected: code(cells[0]),
                answer: code(cells[1]),
                retrace: yes(cells[2]),
                rule: code(cells[3]),
                math_verify: yes(cells[4]),
                minerva: yes(cells[5]),
            }
        })
        .collect()
}

#[test]
fn every_row_of_the_docs_table_is_what_the_checker_says() {
    let rows = table();
    assert!(rows.len() >= 40, "the table has {} rows", rows.len());
    let Some(checker) = checker() else { return };
    let wrong: Vec<String> = runtime().block_on(async {
        let mut wrong = Vec::new();
        for row in &rows {
            let v = checker.check(&row.expected, Some(&row.answer)).await;
            let got = (
                v.retrace.correct,
                v.retrace.rule.as_str(),
                v.math_verify.correct,
                v.minerva.correct,
            );
            let want = (row.retrace, row.rule.as_str(), row.math_verify, row.minerva);
            if got != want {
                wrong.push(format!(
                    "docs/math-checking.md:{}: `{}` vs `{}`: table {want:?}, checker {got:?}",
                    row.line, row.expected, row.answer
                ));
            }
        }
        checker.close().await;
        wrong
    });
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn hostile_answers_are_stopped_and_the_next_answer_is_checked() {
    let Some(checker) = checker() else { return };
    runtime().block_on(async {
        for hostile in [
            "Pow(Integer(10), Integer(10**8))",
            "__import__('os').system('touch /tmp/retrace-pwned')",
            "().__class__.__base__.__subclasses__()",
            &format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)),
            "'\\\\underbrace{9^{9^{9^{9^{9}}}}}'",
            "factorial(Integer(10)**Integer(7))",
        ] {
            let v = checker.check("3\\sqrt{13}", Some(hostile)).await;
            assert!(!v.retrace.correct, "{hostile:.80}: {v:?}");
            assert!(!v.math_verify.correct && !v.minerva.correct, "{v:?}");
            let next = checker.check("3\\sqrt{13}", Some("sqrt(117)")).await;
            assert!(next.retrace.correct, "after {hostile:.80}: {next:?}");
        }
        assert!(!std::path::Path::new("/tmp/retrace-pwned").exists());
        checker.close().await;
    });
}

/// p/q in LaTeX is what a model leaves as a sympy Rational, its float or
/// a LaTeX string; a·√b likewise as sympy's tree, `sqrt(a²b)`, a float or
/// LaTeX; p+1 over q is not p/q. Random cases from proptest's generator,
/// all through one checker (a kernel per case would be minutes).
#[test]
fn equivalent_forms_of_random_rationals_and_radicals_agree() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let mut gen = TestRunner::deterministic();
    let strategy = (-500i64..500, 1i64..60, 1i64..12, 2i64..50);
    let cases: Vec<(i64, i64, i64, i64)> = (0..24)
        .map(|_| strategy.new_tree(&mut gen).unwrap().current())
        .collect();
    let Some(checker) = checker() else { return };
    let wrong: Vec<String> = runtime().block_on(async {
        let mut wrong = Vec::new();
        for (p, q, a, b) in cases {
            let frac = format!("\\frac{{{p}}}{{{q}}}");
            let radical = format!("{a}\\sqrt{{{b}}}");
            let mut asked: Vec<(String, String, bool)> = [
                format!("Rational({p}, {q})"),
                format!("{:?}", p as f64 / q as f64),
                format!("'\\\\frac{{{p}}}{{{q}}}'"),
            ]
            .into_iter()
            .map(|answer| (frac.clone(), answer, true))
            .collect();
            asked.extend(
                [
                    format!("Mul(Integer({a}), Pow(Integer({b}), Rational(1, 2)))"),
                    format!("sqrt({})", a * a * b),
                    format!("{:?}", a as f64 * (b as f64).sqrt()),
                    format!("'{a}\\\\sqrt{{{b}}}'"),
                ]
                .into_iter()
                .map(|answer| (radical.clone(), answer, true)),
            );
            asked.push((frac.clone(), format!("Rational({}, {q})", p + q), false));
            for (expected, answer, same) in asked {
                let v = checker.check(&expected, Some(&answer)).await;
                if v.retrace.correct != same {
                    wrong.push(format!("{expected} vs {answer}: want {same}, {v:?}"));
                }
            }
        }
        checker.close().await;
        wrong
    });
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Writes `tasks` (JSONL lines) and the replay model's `replies` (task id,
/// round, Python code) under `dir`; returns the suite and model arguments.
fn suite_and_replies(
    dir: &std::path::Path,
    tasks: &[serde_json::Value],
    replies: &[(&str, u32, &str)],
) -> (String, String) {
    let lines: Vec<String> = tasks.iter().map(|t| t.to_string()).collect();
    let suite = dir.join("test.jsonl");
    std::fs::write(&suite, lines.join("\n") + "\n").unwrap();
    let replies: Vec<String> = replies
        .iter()
        .map(|(id, round, code)| {
            let reply = format!("```python\n{code}\n```");
            serde_json::json!({"task_id": id, "round": round, "reply": reply}).to_string()
        })
        .collect();
    let model = dir.join("replies.jsonl");
    std::fs::write(&model, replies.join("\n") + "\n").unwrap();
    (
        suite.display().to_string(),
        format!("replay:{}", model.display()),
    )
}

fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `retrace run --suite SUITE --model MODEL ARGS… --out OUT`, which must
/// succeed; returns what it printed and its summary.json.
fn run_ok(
    suite: &str,
    model: &str,
    args: &[&str],
    out: &std::path::Path,
) -> (common::Ran, serde_json::Value) {
    let mut all = vec!["run", "--suite", suite, "--model", model];
    all.extend_from_slice(args);
    all.extend(["--out", out.to_str().unwrap()]);
    let ran = common::retrace(all).run();
    assert_eq!(ran.code, 0, "{ran:?}");
    let summary = json_file(&out.join("summary.json"));
    (ran, summary)
}

/// A MATH-500-format file (exactly its fields) runs end to end: answers
/// left as sympy trees, floats, LaTeX strings and tuples are checked in
/// the checker's jail, a wrong one is repaired, and the summary and
/// report show Acc@r, accuracy per subject and level, and Math-Verify's
/// and Minerva's verdicts beside retrace's.
#[test]
fn a_math500_file_runs_end_to_end() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let task = |id: &str, answer: &str, subject: &str, level: u32| {
        serde_json::json!({
            "problem": format!("Problem {id}."),
            "solution": format!("Hence $\\boxed{{{answer}}}$."),
            "answer": answer, "subject": subject, "level": level,
            "unique_id": format!("test/{}/{id}.json", subject.to_lowercase()),
        })
    };
    let tasks = [
        task("1", r"3\sqrt{13}", "Geometry", 3),
        task("2", r"\frac{14}{3}", "Algebra", 2),
        task("3", r"\left( 3, \frac{\pi}{2} \right)", "Precalculus", 2),
        task("4", r"90^\circ", "Geometry", 1),
    ];
    let id = |t: &serde_json::Value| t["unique_id"].as_str().unwrap().to_string();
    let ids: Vec<String> = tasks.iter().map(id).collect();
    let (suite, model) = suite_and_replies(
        dir.path(),
        &tasks,
        &[
            (&ids[0], 0, "from sympy import sqrt\nanswer = sqrt(117)"),
            (&ids[1], 0, "answer = 14 / 3"),
            (&ids[2], 0, "answer = (3, 1.5)"),
            (&ids[2], 1, "from sympy import pi\nanswer = (3, pi / 2)"),
            (&ids[3], 0, "answer = '90^\\\\circ'"),
        ],
    );
    let out = dir.path().join("run");
    let (_, summary) = run_ok(
        &suite,
        &model,
        &["--rounds", "1", "--stop-on", "correct"],
        &out,
    );
    assert_eq!(summary["tasks"], 4);
    assert_eq!(
        summary["accuracy_by_round"][0]["successes"], 3,
        "{summary:#}"
    );
    assert_eq!(
        summary["accuracy_by_round"][1]["successes"], 4,
        "{summary:#}"
    );
    let tags = &summary["accuracy_by_tag"];
    assert_eq!(tags["subject:Geometry"]["tasks"], 2, "{tags:#}");
    assert_eq!(tags["level:2"]["tasks"], 2, "{tags:#}");
    let rules = &summary["published_rules"];
    for rule in ["math_verify", "minerva"] {
        assert_eq!(rules[rule]["tasks"], 4, "{rules:#}");
    }
    let records: Vec<serde_json::Value> = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rule_of = |id: &str, round: u64| {
        records
            .iter()
            .find(|r| r["task_id"] == id && r["round"] == round)
            .map(|r| r["check"]["rule"].as_str().unwrap_or_default().to_string())
            .unwrap()
    };
    assert_eq!(rule_of(&ids[0], 0), "math:exact");
    assert_eq!(rule_of(&ids[1], 0), "math:numeric");
    assert_eq!(rule_of(&ids[2], 1), "math:tuple");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "Accuracy by tag",
        "subject:Precalculus",
        "Accuracy under the datasets' published rules",
        "math_verify",
    ] {
        assert!(report.contains(needle), "no `{needle}` in report.md");
    }

    // A re-score asks a checker of its own again: the same verdicts under
    // all three rules, from the recorded answers alone.
    let rescored = common::retrace(["report", out.to_str().unwrap(), "--rescore"]).run();
    assert_eq!(rescored.code, 0, "{rescored:?}");
    assert!(
        rescored.stdout.contains("Acc@K under minerva"),
        "{}",
        rescored.stdout
    );
    let again = json_file(&out.join("summary.json"));
    assert_eq!(again["accuracy_by_round"], summary["accuracy_by_round"]);
    assert_eq!(again["published_rules"], summary["published_rules"]);
}

/// DABench's official evaluation requires the tagged `@name[value]`
/// form; retrace reads a plain value as a one-part task's part. The
/// report shows Acc@K under both and lists the task where they differ.
#[test]
fn a_dabench_run_reports_the_official_rule_beside_retraces() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.csv"), "price\n12.35\n").unwrap();
    let task = |id: u32, name: &str, value: &str| {
        serde_json::json!({
            "id": id, "question": "What is the mean price?", "concepts": ["Summary Statistics"],
            "format": format!("@{name}[value]"), "file_name": "shop.csv",
            "common_answers": [[name, value]],
        })
    };
    let tasks = [
        task(0, "mean_price", "12.35"),
        task(1, "max_price", "12.35"),
    ];
    let (suite, model) = suite_and_replies(
        dir.path(),
        &tasks,
        &[
            ("0", 0, "answer = 12.35"),
            (
                "1",
                0,
                "print('@max_price[12.35]')\nanswer = '@max_price[12.35]'",
            ),
        ],
    );
    let out = dir.path().join("run");
    let (ran, summary) = run_ok(&suite, &model, &["--rounds", "0"], &out);
    assert_eq!(
        summary["accuracy_by_round"][0]["successes"], 2,
        "{summary:#}"
    );
    let official = &summary["published_rules"]["dabench"];
    assert_eq!(
        official["accuracy_by_round"][0]["successes"], 1,
        "{official:#}"
    );
    assert_eq!(official["differing"][0]["task_id"], "0", "{official:#}");
    assert!(
        ran.stdout.contains("Acc@K under dabench 50.0%"),
        "{}",
        ran.stdout
    );
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report.contains("Tasks where retrace and a published rule differ"));
}

/// An answer within the checker's guards that still makes sympy work for
/// long (a power it must expand) outlasts the checker's limit: the kernel
/// is interrupted or killed, the answer is "not equivalent, checker timed
/// out", and the next answer is checked in a checker set up again.
#[test]
fn an_answer_over_the_checkers_limit_is_a_timeout_and_the_next_is_checked() {
    let Some(sandbox) = common::confined() else {
        return;
    };
    let checker = MathChecker::new(common::image(ImageName::Checker), sandbox)
        .with_answer_timeout(std::time::Duration::from_secs(2));
    runtime().block_on(async {
        let slow =
            "Pow(Add(Symbol('x'), Symbol('y'), Symbol('z'), Symbol('w'), Integer(1)), Integer(60))";
        let v = checker.check("(x+y+z+1)^{40} - 1", Some(slow)).await;
        assert_eq!(v.retrace.rule, "math:checker_timeout", "{v:?}");
        assert!(!v.retrace.correct && !v.math_verify.correct && !v.minerva.correct);
        let next = checker.check("3\\sqrt{13}", Some("sqrt(117)")).await;
        assert!(next.retrace.correct, "{next:?}");
        checker.close().await;
    });
}

/// The built-in competition suite with the oracle and injected faults:
/// every task recovers, each LaTeX answer is decided by the checker, and
/// the summary has Math-Verify's and Minerva's accuracy beside retrace's.
#[test]
fn the_competition_suite_runs_with_the_oracle() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (_, summary) = run_ok("competition", "oracle:faults", &["--rounds", "2"], &out);
    assert_eq!(summary["tasks"], 20);
    assert_eq!(
        summary["accuracy_by_round"][2]["successes"], 20,
        "{summary:#}"
    );
    let rules = &summary["published_rules"];
    assert_eq!(rules["math_verify"]["tasks"], 20, "{rules:#}");
    assert_eq!(rules["minerva"]["tasks"], 20, "{rules:#}");
    assert!(summary["accuracy_by_tag"]["subject:Algebra"]["tasks"].as_u64() >= Some(3));
}
