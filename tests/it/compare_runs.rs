//! `retrace compare`, `retrace report --rescore` and `run --junit` through
//! the binary, on real oracle runs (real kernels, confined: needs root).

use crate::common::{self, retrace};

use std::path::Path;

use retrace::pyenv::ImageName;

/// The first `n` tasks of the built-in math suite, as a suite file.
fn small_suite(dir: &Path, n: usize) -> (String, Vec<String>) {
    let all = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/math/tasks.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = all
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect();
    let ids = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    let path = dir.join("tasks.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path.to_str().unwrap().to_string(), ids)
}

fn oracle_run(suite: &str, model: &str, out: &Path, junit: Option<&Path>) {
    oracle_run_with(suite, model, out, junit, &[]);
}

fn oracle_run_with(suite: &str, model: &str, out: &Path, junit: Option<&Path>, extra: &[&str]) {
    let mut args = vec![
        "run", "--suite", suite, "--model", model, "--rounds", "0", "--out",
    ];
    args.push(out.to_str().unwrap());
    if let Some(j) = junit {
        args.extend(["--junit", j.to_str().unwrap()]);
    }
    args.extend(extra);
    let o = retrace(&args).run();
    assert_eq!(o.code, 0, "{}", o);
}

#[test]
fn compare_gates_a_worse_run_and_lists_the_flipped_tasks() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let (suite, ids) = small_suite(dir.path(), 6);
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    let junit = dir.path().join("junit.xml");
    oracle_run(&suite, "oracle", &good, None);
    oracle_run(&suite, "oracle:wrong", &bad, Some(&junit));

    // NEW worse than BASE: 6 discordant pairs against NEW, p = 1/32 (the
    // runs differ in their model, as meant).
    let o = retrace([
        "compare",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--vary",
        "model",
    ])
    .run();
    let out = o.to_string();
    assert_eq!(o.code, 1, "{out}");
    assert!(out.contains("model.name: oracle -> oracle:wrong"), "{out}");
    assert!(out.contains("McNemar b=6 c=0 p=0.03"), "{out}");
    assert!(
        out.contains(&format!("right in BASE, wrong in NEW: {}", ids.join(", "))),
        "{out}"
    );
    assert!(out.contains("FAIL"), "{out}");
    let run_id = |d: &Path| -> String {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("run.json")).unwrap()).unwrap();
        v["provenance"]["run_id"].as_str().unwrap().to_string()
    };
    let written = bad.join(format!("compare-{}", run_id(&good)));
    let md = std::fs::read_to_string(written.join("compare.md")).unwrap();
    assert!(md.contains("**Verdict: FAIL**"), "{md}");
    assert!(md.contains(&ids[0]), "{md}");
    let html = std::fs::read_to_string(written.join("compare.html")).unwrap();
    assert!(html.contains("Verdict: FAIL") && !html.contains("src=\"http"));

    // The reverse is an improvement: exit 0, the same tasks the other way.
    let elsewhere = dir.path().join("cmp");
    let o = retrace([
        "compare",
        bad.to_str().unwrap(),
        good.to_str().unwrap(),
        "--vary",
        "model.name",
        "--out",
        elsewhere.to_str().unwrap(),
    ])
    .run();
    let out = o.to_string();
    assert_eq!(o.code, 0, "{out}");
    assert!(
        out.contains(&format!("wrong in BASE, right in NEW: {}", ids.join(", "))),
        "{out}"
    );
    assert!(elsewhere.join("compare.json").is_file());
    // An explicit allowance larger than the drop passes the worse run.
    let o = retrace([
        "compare",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--max-acc-drop",
        "100",
        "--vary",
        "model",
        "--out",
        elsewhere.to_str().unwrap(),
    ])
    .run();
    assert_eq!(o.code, 0, "{}", o);
    // Usage errors exit 2.
    let o = retrace(["compare", good.to_str().unwrap(), "/nonexistent/run"]).run();
    assert_eq!(o.code, 2, "{}", o);
    let o = retrace([
        "compare",
        &format!("{}:slim", good.display()),
        bad.to_str().unwrap(),
    ])
    .run();
    assert_eq!(o.code, 2, "{}", o);

    // --junit: one failing case per task, saying what was expected.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 6, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 6, "{xml}");
    assert!(xml.contains("message=\"wrong answer: got "), "{xml}");
    assert!(xml.contains(", expected 481"), "{xml}");
}

#[test]
fn compare_refuses_undeclared_protocol_differences_unless_allowed() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    // Four tasks: the fewest with a detectable difference (√4 > 1.96).
    let (suite, _) = small_suite(dir.path(), 4);
    let (base, more) = (dir.path().join("base"), dir.path().join("more"));
    oracle_run(&suite, "oracle", &base, None);
    // The same run but for its memory limit.
    oracle_run_with(&suite, "oracle", &more, None, &["--memory", "1G"]);
    let run_json = |d: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("run.json")).unwrap()).unwrap()
    };
    let print = &run_json(&more)["provenance"]["fingerprints"]["fat"];
    assert_eq!(print["limits"]["memory"], 1u64 << 30, "{print}");
    assert!(print["checker"]["version"].is_u64(), "{print}");
    let out_dir = dir.path().join("cmp");
    let compare = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            base.to_str().unwrap(),
            more.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend(extra);
        retrace(&args).run()
    };

    // Undeclared: exit 2, the field named, nothing written.
    let o = compare(&[]);
    let out = o.to_string();
    assert_eq!(o.code, 2, "{out}");
    assert!(
        out.contains("limits.memory: 536870912 -> 1073741824  (NOT DECLARED)"),
        "{out}"
    );
    assert!(out.contains("--allow-differences"), "{out}");
    assert!(!out_dir.exists());
    // Declaring another field does not help; an unknown field is refused.
    let o = compare(&["--vary", "model,policy"]);
    assert_eq!(o.code, 2, "{o}");
    assert!(!out_dir.exists());
    let o = compare(&["--vary", "limits.memroy"]);
    assert_eq!(o.code, 2, "{o}");
    assert!(o.to_string().contains("names no fingerprint field"), "{o}");

    // Declared (by name or prefix): as before, exit 0 (same answers).
    for vary in ["limits.memory", "limits", "model,limits"] {
        let o = compare(&["--vary", vary]);
        let out = o.to_string();
        assert_eq!(o.code, 0, "--vary {vary}: {out}");
        assert!(!out.contains("NOT DECLARED"), "{out}");
        assert!(out.contains("minimum detectable difference"), "{out}");
        let md = std::fs::read_to_string(out_dir.join("compare.md")).unwrap();
        assert!(!md.contains("UNDECLARED"), "{md}");
        assert!(
            md.contains("| limits.memory | 536870912 | 1073741824 | yes |"),
            "{md}"
        );
    }

    // Allowed: written, labelled at the top of each document and in the JSON.
    let o = compare(&["--allow-differences"]);
    assert_eq!(o.code, 0, "{o}");
    let md = std::fs::read_to_string(out_dir.join("compare.md")).unwrap();
    let top: Vec<&str> = md.lines().take(3).collect();
    assert!(top[2].contains("UNDECLARED PROTOCOL DIFFERENCES"), "{md}");
    assert!(top[2].contains("limits.memory"), "{md}");
    let html = std::fs::read_to_string(out_dir.join("compare.html")).unwrap();
    assert!(html.contains("UNDECLARED PROTOCOL DIFFERENCES"), "{html}");
    let text = std::fs::read_to_string(out_dir.join("compare.json")).unwrap();
    crate::fast::schemas::assert_valid("compare", "compare.json", &text);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json[0]["undeclared_differences"][0]["name"],
        "limits.memory"
    );

    // A run against itself: identical protocols, exit 0 with no flag.
    let o = retrace([
        "compare",
        base.to_str().unwrap(),
        base.to_str().unwrap(),
        "--out",
        dir.path().join("self").to_str().unwrap(),
    ])
    .run();
    assert_eq!(o.code, 0, "{o}");
    assert!(o.to_string().contains("identical protocols"), "{o}");
}

/// A task's expected answer changes under a run of two arms (the second
/// sharing the first's round 0): each arm's verdict flips on its own and
/// the records keep their arm and where their round 0 came from.
#[test]
fn report_rescore_of_arms_rechecks_each_arm() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let (suite, ids) = small_suite(dir.path(), 3);
    let run = dir.path().join("run");
    oracle_run_with(&suite, "oracle", &run, None, &["--feedback", "parsed,none"]);
    let before = retrace::harness::journal::read(&run.join("results.jsonl")).unwrap();
    edit_expected(&suite, 0, -12345.0);

    let o = retrace(["report", run.to_str().unwrap(), "--rescore"]).run();
    let out = o.to_string();
    assert_eq!(o.code, 0, "{out}");
    let after = retrace::harness::journal::read(&run.join("results.jsonl")).unwrap();
    let key = |r: &retrace::record::AttemptRecord| {
        (
            r.arm.clone(),
            r.task_id.clone(),
            r.round,
            r.shared_from.clone(),
        )
    };
    assert_eq!(
        after.iter().map(key).collect::<Vec<_>>(),
        before.iter().map(key).collect::<Vec<_>>(),
        "the same records, arms and shared round 0s"
    );
    for r in &after {
        assert_eq!(r.correct, r.task_id != ids[0], "{} {}", r.arm, r.task_id);
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let arms = summary["arms"].as_array().expect("one entry per arm");
    assert_eq!(arms.len(), 2);
    for arm in arms {
        assert_eq!(arm["accuracy_by_round"][0]["successes"], 2, "{arm}");
    }
    for arm in ["parsed", "none"] {
        assert!(out.contains(arm), "each arm's change is reported: {out}");
    }
}

/// Sets the expected value of the suite's `line`-th task.
fn edit_expected(suite: &str, line: usize, value: f64) {
    let tasks = std::fs::read_to_string(suite).unwrap();
    let mut lines: Vec<serde_json::Value> = tasks
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[line]["expected"]["value"] = serde_json::json!(value);
    let edited: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
    std::fs::write(suite, edited.join("\n") + "\n").unwrap();
}

#[test]
fn report_rescore_rechecks_answers_and_keeps_the_original_journal() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let (suite, ids) = small_suite(dir.path(), 3);
    let run = dir.path().join("run");
    oracle_run(&suite, "oracle", &run, None);
    let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();

    // Plain regeneration rewrites the reports and changes no record.
    std::fs::remove_file(run.join("report.md")).unwrap();
    let o = retrace(["report", run.to_str().unwrap()]).run();
    assert_eq!(o.code, 0, "{}", o);
    assert!(run.join("report.md").is_file());
    assert_eq!(
        std::fs::read_to_string(run.join("results.jsonl")).unwrap(),
        journal
    );

    // The first task's expected answer changes: it flips to wrong.
    edit_expected(&suite, 0, -12345.0);
    let o = retrace(["report", run.to_str().unwrap(), "--rescore"]).run();
    let out = o.to_string();
    assert_eq!(o.code, 0, "{out}");
    assert!(
        out.contains(&format!("{}: right -> wrong", ids[0])),
        "{out}"
    );
    assert!(out.contains("Acc@0: 3/3 -> 2/3"), "{out}");
    assert!(!out.contains(&format!("{}: right", ids[1])), "{out}");
    assert_eq!(
        std::fs::read_to_string(run.join("results.jsonl.orig")).unwrap(),
        journal
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["accuracy_by_round"][0]["successes"], 2);

    // Re-scoring again keeps the run's own journal as the original.
    let o = retrace(["report", run.to_str().unwrap(), "--rescore"]).run();
    let out = o.to_string();
    assert_eq!(o.code, 0, "{out}");
    assert!(out.contains("no task changed"), "{out}");
    assert_eq!(
        std::fs::read_to_string(run.join("results.jsonl.orig")).unwrap(),
        journal
    );
}

/// Answers as models write them, through real kernels (an `answer` string
/// and a printed last line alike), read by the one number rule; a journal
/// as checker version 2 recorded it, re-scored, flips only the verdicts the
/// rule means to change, and the report counts how answers were read.
#[test]
fn report_rescore_reads_numbers_by_the_one_rule() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    // id, code, expected, the verdict and rule checker version 2 recorded,
    // the rule now.
    let cases = [
        (
            "weeks",
            "answer = '3 weeks'",
            3.0,
            false,
            "number:unparsed",
            "number:unit:abs_tol",
        ),
        (
            "dollars",
            "print('The total cost is 7 dollars.')",
            7.0,
            false,
            "number:unparsed",
            "number:sentence:abs_tol",
        ),
        (
            "equation",
            "print('26 * 5 * 1000 = 130,000')",
            130000.0,
            true,
            "number:last_number_fallback:abs_tol",
            "number:equation:abs_tol",
        ),
        (
            "division",
            "answer = '56 / 4'",
            14.0,
            true,
            "number:abs_tol",
            "number:ambiguous",
        ),
        (
            "guess",
            "print('maybe 7 or 8')",
            8.0,
            true,
            "number:last_number_fallback:abs_tol",
            "number:ambiguous",
        ),
        (
            "plain",
            "answer = 42",
            42.0,
            true,
            "number:abs_tol",
            "number:abs_tol",
        ),
    ];
    let (mut suite, mut replies) = (String::new(), String::new());
    for (id, code, expected, ..) in &cases {
        let task = serde_json::json!({
            "id": id, "question": format!("How many ({id})?"),
            "expected": {"type": "number", "value": expected},
        });
        let reply = format!("```python\n{code}\n```");
        suite += &format!("{task}\n");
        replies += &format!(
            "{}\n",
            serde_json::json!({"task_id": id, "round": 0, "reply": reply})
        );
    }
    let (suite_file, model_file) = (
        dir.path().join("tasks.jsonl"),
        dir.path().join("replies.jsonl"),
    );
    std::fs::write(&suite_file, suite).unwrap();
    std::fs::write(&model_file, replies).unwrap();
    let run = dir.path().join("run");
    oracle_run(
        suite_file.to_str().unwrap(),
        &format!("replay:{}", model_file.display()),
        &run,
        None,
    );
    let journal = run.join("results.jsonl");
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let case_of = |r: &serde_json::Value| {
        cases
            .iter()
            .find(|c| c.0 == r["task_id"])
            .unwrap_or_else(|| panic!("{r}"))
    };
    for r in &records {
        let (id, _, _, _, _, rule) = case_of(r);
        assert_eq!(r["check"]["rule"], *rule, "{id}: {r}");
    }

    // The journal as checker version 2 wrote it.
    let old: Vec<String> = records
        .iter()
        .map(|r| {
            let (_, _, _, correct, rule, _) = case_of(r);
            let mut r = r.clone();
            r["correct"] = (*correct).into();
            r["parsed"] = (*rule != "number:unparsed").into();
            r["check"]["correct"] = (*correct).into();
            r["check"]["parsed"] = r["parsed"].clone();
            r["check"]["rule"] = (*rule).into();
            r.to_string()
        })
        .collect();
    std::fs::write(&journal, old.join("\n") + "\n").unwrap();
    let checker_version = |run: &Path| {
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
        config["provenance"]["fingerprints"]["fat"]["checker"]["version"].clone()
    };
    let current = checker_version(&run);
    let config = std::fs::read_to_string(run.join("run.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["provenance"]["fingerprints"]["fat"]["checker"]["version"] = 2.into();
    std::fs::write(run.join("run.json"), config.to_string()).unwrap();
    let o = retrace(["report", run.to_str().unwrap(), "--rescore"]).run();
    let out = o.to_string();
    assert_eq!(o.code, 0, "{out}");
    for flip in [
        "weeks: wrong -> right",
        "dollars: wrong -> right",
        "division: right -> wrong",
        "guess: right -> wrong",
    ] {
        assert!(out.contains(flip), "{flip}: {out}");
    }
    for kept in ["equation:", "plain:"] {
        assert!(!out.contains(kept), "{kept} flipped: {out}");
    }
    assert!(out.contains("6 tasks: Acc@0 66.7%"), "{out}");
    assert_eq!(
        checker_version(&run),
        current,
        "the run's checker is now the current one"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    for row in [
        "| number | 1 | 1 |",
        "| number:unit | 1 | 1 |",
        "| number:sentence | 1 | 1 |",
        "| number:equation | 1 | 1 |",
        "| number:ambiguous | 2 | 0 |",
    ] {
        assert!(report.contains(row), "{row}: {report}");
    }
}
