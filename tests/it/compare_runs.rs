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
    let mut args = vec![
        "run", "--suite", suite, "--model", model, "--rounds", "0", "--out",
    ];
    args.push(out.to_str().unwrap());
    if let Some(j) = junit {
        args.extend(["--junit", j.to_str().unwrap()]);
    }
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

    // NEW worse than BASE: 6 discordant pairs against NEW, p = 1/32.
    let o = retrace(["compare", good.to_str().unwrap(), bad.to_str().unwrap()]).run();
    let out = o.to_string();
    assert_eq!(o.code, 1, "{out}");
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
    let tasks = std::fs::read_to_string(&suite).unwrap();
    let mut lines: Vec<serde_json::Value> = tasks
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["expected"]["value"] = serde_json::json!(-12345.0);
    let edited: Vec<String> = lines.iter().map(|v| v.to_string()).collect();
    std::fs::write(&suite, edited.join("\n") + "\n").unwrap();
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
