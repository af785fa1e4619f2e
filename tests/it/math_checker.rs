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
