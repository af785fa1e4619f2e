//! Loading suites from fixture files written to a temp dir: named suites,
//! paths, DABench labels files, duplicate ids, malformed lines, sampling;
//! files shaped like the official DABench and GSM8K releases, refused by
//! default and loaded around their flawed records with `--skip-invalid`.

use std::fs;
use std::path::Path;

use crate::common;
use retrace::model::spec::ModelSpec;
use retrace::task::load::{
    datasets_dir, load_file, load_suite, load_suite_with, select, LoadOptions,
};
use retrace::task::{Expected, Task, TaskError};

fn write(root: &Path, name: &str, content: &str) {
    let path = root.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// `--skip-invalid`, the other options as their defaults.
fn skipping() -> LoadOptions {
    LoadOptions {
        skip_invalid: true,
        ..LoadOptions::default()
    }
}

fn ids(tasks: &[Task]) -> Vec<&str> {
    tasks.iter().map(|t| t.id.as_str()).collect()
}

const GSM_LINES: &str = r#####"{"question": "Mara reads 15 pages a day for 4 days. How many pages?", "answer": "15 * 4 = 60\n#### 60"}
{"question": "A crate holds 1,200 apples; 350 are sold. How many remain?", "answer": "1200 - 350 = 850\n#### 850"}
"#####;

const NATIVE_LINES: &str = r#"// native tasks
{"id": "m-native-1", "question": "What is 7 * 6?", "expected": {"type": "number", "value": 42}, "reference": "answer = 7 * 6"}
{"id": "m-native-2", "question": "List the first three primes.", "expected": {"type": "list", "values": [2, 3, 5], "ordered": true}}
"#;

const DA_QUESTIONS: &str = r#"{"id": 10, "question": "What is the mean score?", "constraints": "Use all rows.", "format": "@mean_score[value]", "file_name": "exams.csv"}
{"id": 11, "question": "Which subject has the highest median?", "format": "@subject[name] @median[value]", "file_name": "exams.csv"}
"#;

const DA_LABELS: &str = r#"{"id": 11, "common_answers": [["subject", "algebra"], ["median", "71.5"]]}
{"id": 10, "common_answers": [["mean_score", "68.25"]]}
"#;

fn datasets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "math/a_gsm.jsonl", GSM_LINES);
    write(root, "math/b_native.jsonl", NATIVE_LINES);
    write(root, "tabular/exams.jsonl", DA_QUESTIONS);
    write(root, "tabular/exams_labels.jsonl", DA_LABELS);
    write(
        root,
        "tabular/data/exams.csv",
        "subject,score\nalgebra,70\n",
    );
    write(
        root,
        "packages/p.jsonl",
        r#"{"id": "p1", "question": "Use sympy to factor 91.", "expected": {"type": "text", "value": "7*13"}, "packages": ["sympy"]}"#,
    );
    dir
}

#[test]
fn named_suites_load_every_jsonl_in_order() {
    let dir = datasets();
    let math = load_suite("math", dir.path()).unwrap();
    assert_eq!(
        ids(&math),
        vec!["a_gsm-1", "a_gsm-2", "m-native-1", "m-native-2"]
    );
    match &math[1].expected {
        Expected::Number { value, abs_tol, .. } => {
            assert_eq!((*value, *abs_tol), (850.0, Some(1e-3)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(math[2].reference.as_deref(), Some("answer = 7 * 6"));

    let tabular = load_suite("tabular", dir.path()).unwrap();
    assert_eq!(
        ids(&tabular),
        vec!["10", "11"],
        "labels file is not a task file"
    );
    let csv = dir.path().join("tabular/data/exams.csv");
    assert!(tabular.iter().all(|t| t.files == vec![csv.clone()]));
    let Expected::Multi { answers } = &tabular[1].expected else {
        panic!("multi expected");
    };
    assert_eq!(
        answers.keys().collect::<Vec<_>>(),
        vec!["median", "subject"]
    );

    let packages = load_suite("packages", dir.path()).unwrap();
    assert_eq!(packages[0].packages, vec!["sympy"]);
}

#[test]
fn paths_and_unknown_names() {
    let dir = datasets();
    let file = dir.path().join("math/b_native.jsonl");
    let by_file = load_suite(file.to_str().unwrap(), Path::new("/nonexistent")).unwrap();
    assert_eq!(ids(&by_file), vec!["m-native-1", "m-native-2"]);
    assert_eq!(by_file, load_file(&file).unwrap());

    let by_dir = load_suite(dir.path().join("math").to_str().unwrap(), Path::new("/x")).unwrap();
    assert_eq!(by_dir.len(), 4);

    let err = load_suite("algebra", dir.path()).unwrap_err();
    assert!(
        matches!(err, TaskError::UnknownSuite(ref s) if s == "algebra"),
        "{err:?}"
    );

    let missing = dir.path().join("nope/tasks.jsonl");
    let err = load_suite(missing.to_str().unwrap(), dir.path()).unwrap_err();
    assert!(matches!(err, TaskError::File { .. }), "{err:?}");

    // A named suite whose directory is missing or empty says so.
    let empty = tempfile::tempdir().unwrap();
    let err = load_suite("math", empty.path()).unwrap_err();
    assert!(
        err.to_string().contains("suite directory not found"),
        "{err}"
    );
    fs::create_dir(empty.path().join("math")).unwrap();
    let err = load_suite("math", empty.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("no .jsonl, .parquet or .json files"),
        "{err}"
    );
}

#[test]
fn duplicate_ids_across_files_name_both_places() {
    let dir = datasets();
    write(
        dir.path(),
        "math/c_more.jsonl",
        "\n{\"id\": \"m-native-2\", \"question\": \"again\", \"expected\": {\"type\": \"text\", \"value\": \"x\"}}\n",
    );
    let err = load_suite("math", dir.path()).unwrap_err();
    let msg = err.to_string();
    match err {
        TaskError::Parse { file, line, .. } => {
            assert!(file.ends_with("math/c_more.jsonl"), "{msg}");
            assert_eq!(line, 2);
        }
        other => panic!("{other:?}"),
    }
    assert!(msg.contains("duplicate task id `m-native-2`"), "{msg}");
    assert!(msg.contains("b_native.jsonl:3"), "{msg}");
}

#[test]
fn malformed_line_in_the_middle_reports_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = |i: usize| {
        format!(
            "{{\"id\": \"t{i}\", \"question\": \"q{i}\", \"expected\": {{\"type\": \"number\", \"value\": {i}}}}}\n"
        )
    };
    let mut content = String::new();
    for i in 0..4 {
        content.push_str(&good(i));
    }
    content.push_str("# a comment\n");
    content.push_str("{\"id\": \"t4\", \"question\": \"q4\", \"expected\": {\"type\": \"number\", \"value\": 4}\n");
    for i in 5..9 {
        content.push_str(&good(i));
    }
    write(dir.path(), "mid.jsonl", &content);
    let path = dir.path().join("mid.jsonl");
    let err = load_suite(path.to_str().unwrap(), dir.path()).unwrap_err();
    let msg = err.to_string();
    match &err {
        TaskError::Parse {
            file,
            line,
            message,
        } => {
            assert_eq!(file, &path);
            assert_eq!(*line, 6, "{msg}");
            assert!(message.starts_with("invalid JSON"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert!(msg.contains("mid.jsonl:6: invalid JSON"), "{msg}");
}

#[test]
fn select_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let mut content = String::new();
    for i in 0..60 {
        content.push_str(&format!(
            "{{\"question\": \"How much is {i} + 1?\", \"answer\": \"#### {}\"}}\n",
            i + 1
        ));
    }
    write(dir.path(), "math/many.jsonl", &content);
    let suite = load_suite("math", dir.path()).unwrap();
    assert_eq!(suite.len(), 60);

    let a = select(suite.clone(), None, Some(12), None, 42);
    let b = select(suite.clone(), None, Some(12), None, 42);
    let c = select(suite.clone(), None, Some(12), None, 43);
    assert_eq!(a, b, "same seed, same tasks");
    assert_ne!(ids(&a), ids(&c), "different seed, different tasks");
    assert_eq!(a.len(), 12);
    // Original order is kept.
    let pos = |t: &Task| suite.iter().position(|s| s.id == t.id).unwrap();
    assert!(a.windows(2).all(|w| pos(&w[0]) < pos(&w[1])));
    // Limit applies after sampling.
    let limited = select(suite.clone(), Some(5), Some(12), None, 42);
    assert_eq!(limited, a[..5].to_vec());
    // Limit alone keeps the first N.
    assert_eq!(
        ids(&select(suite.clone(), Some(2), None, None, 0)),
        vec!["many-1", "many-2"]
    );
}

/// The default local run: most of its sample from the math suite's
/// `organic-error` tasks, the same tasks on every machine.
#[test]
fn the_default_local_sample_draws_half_from_organic_error_tasks() {
    let defaults = "local"
        .parse::<ModelSpec>()
        .unwrap()
        .defaults(&Default::default());
    let (n, quota) = (defaults.sample.unwrap(), defaults.sample_tagged.unwrap());
    let suite = load_suite("math", &datasets_dir("math").unwrap()).unwrap();
    let picked = select(suite.clone(), None, Some(n), Some(&quota), 0);
    let tagged = |ts: &[Task]| ts.iter().filter(|t| t.tags.contains(&quota.tag)).count();
    assert_eq!(picked.len(), n);
    assert_eq!(tagged(&picked), quota.count);
    assert!(quota.count * 2 >= n, "at least half of the sample");
    assert_eq!(picked, select(suite, None, Some(n), Some(&quota), 0));
}

#[test]
fn datasets_dir_default() {
    if std::env::var_os("RETRACE_DATASETS").is_none() {
        assert!(datasets_dir("math").unwrap().ends_with("datasets"));
    }
}

// ------------------------------------------------- official release shapes

/// The InfiAgent-DABench dev release's layout and field names: line 2's
/// labels give `max_fare` twice, line 3 is cut-off JSON.
const DA_DEV_QUESTIONS: &str = r#"{"id": 0, "question": "Calculate the mean fare paid by the passengers.", "concepts": ["Summary Statistics"], "constraints": "Calculate the mean fare using Python's built-in statistics module or appropriate statistical method in pandas. Rounding off the answer to two decimal places.", "format": "@mean_fare[mean_fare_value] where \"mean_fare_value\" is a floating-point number rounded to two decimal places.", "file_name": "test_ave.csv", "level": "easy"}
{"id": 5, "question": "What is the highest fare paid?", "concepts": ["Summary Statistics"], "constraints": "Use the Fare column.", "format": "@max_fare[value]", "file_name": "test_ave.csv", "level": "easy"}
{"id": 6, "question": "Count the passengers", "concepts": ["Summary Statistics"], "format": "@count[n]", "file_name": "test_ave.csv"
{"id": 7, "question": "Which port did most passengers embark from?", "concepts": ["Distribution Analysis"], "constraints": "Use the Embarked column.", "format": "@port[letter] @share[percent]", "file_name": "test_ave.csv", "level": "medium"}
"#;

const DA_DEV_LABELS: &str = r#"{"id": 0, "common_answers": [["mean_fare", "34.65"]]}
{"id": 5, "common_answers": [["max_fare", "512.33"], ["max_fare", "512.3292"]]}
{"id": 6, "common_answers": [["count", "3"]]}
{"id": 7, "common_answers": [["port", "S"], ["share", "72.44"]]}
"#;

const GSM_TEST: &str = r#####"{"question": "A farmer has 12 hens. Each lays 3 eggs a day. How many eggs in a day?", "answer": "12 hens lay 12 * 3 = <<12*3=36>>36 eggs.\n#### 36"}
{"question": "Tom buys 4 pens at $2 each. How much does he pay?", "answer": "4 * 2 = 8 dollars"}
{"question": "Broken line", "answer": "#### 1"
{"question": "A class of 30 splits into teams of 5. How many teams?", "answer": "30 / 5 = <<30/5=6>>6\n#### 6"}
"#####;

/// A DABench dev release (`da-dev-*`) and a GSM8K `test.jsonl` in their
/// own folders.
fn releases() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "dabench/da-dev-questions.jsonl", DA_DEV_QUESTIONS);
    write(root, "dabench/da-dev-labels.jsonl", DA_DEV_LABELS);
    write(
        root,
        "dabench/da-dev-tables/test_ave.csv",
        "PassengerId,Fare,Embarked\n1,7.25,S\n2,71.28,C\n",
    );
    write(root, "gsm8k/test.jsonl", GSM_TEST);
    dir
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn official_releases_are_refused_at_their_first_flaw() {
    let dir = releases();
    let da = dir.path().join("dabench");
    let err = load_suite(path_str(&da), Path::new("/nonexistent")).unwrap_err();
    let TaskError::Parse {
        file,
        line,
        message,
    } = &err
    else {
        panic!("expected a parse error, got {err:?}");
    };
    assert_eq!(file, &da.join("da-dev-labels.jsonl"), "{err}");
    assert_eq!(*line, 2, "{err}");
    assert!(
        message.contains("answer `max_fare` is given twice"),
        "{err}"
    );
    assert!(err.to_string().contains("da-dev-labels.jsonl:2: "), "{err}");

    let gsm = dir.path().join("gsm8k/test.jsonl");
    let err = load_suite(path_str(&gsm), Path::new("/nonexistent")).unwrap_err();
    assert!(err.to_string().contains("test.jsonl:2: "), "{err}");
    assert!(err.to_string().contains("no `#### <number>` line"), "{err}");
}

#[test]
fn skip_invalid_loads_the_rest_and_lists_each_skipped_record() {
    let dir = releases();
    let da = dir.path().join("dabench");
    let loaded = load_suite_with(path_str(&da), Path::new("/nonexistent"), &skipping()).unwrap();
    assert_eq!(ids(&loaded.tasks), vec!["0", "7"]);
    // Labels and tables found as the release names them.
    assert_eq!(
        loaded.tasks[0].files,
        vec![da.join("da-dev-tables/test_ave.csv")]
    );
    let Expected::Multi { answers } = &loaded.tasks[1].expected else {
        panic!("multi expected");
    };
    assert_eq!(answers.keys().collect::<Vec<_>>(), vec!["port", "share"]);
    let skipped: Vec<(Option<&str>, &Path, usize)> = loaded
        .skipped
        .iter()
        .map(|s| (s.id.as_deref(), s.file.as_path(), s.line))
        .collect();
    let questions = da.join("da-dev-questions.jsonl");
    assert_eq!(
        skipped,
        vec![
            (Some("5"), da.join("da-dev-labels.jsonl").as_path(), 2),
            (None, questions.as_path(), 3),
        ]
    );
    assert!(loaded.skipped[0].reason.contains("given twice"));
    assert!(loaded.skipped[1].reason.contains("invalid JSON"));
    let shown = loaded.skipped[0].to_string();
    assert!(shown.contains("da-dev-labels.jsonl:2: `5`: "), "{shown}");

    let gsm = dir.path().join("gsm8k/test.jsonl");
    let loaded = load_suite_with(path_str(&gsm), Path::new("/nonexistent"), &skipping()).unwrap();
    assert_eq!(ids(&loaded.tasks), vec!["test-1", "test-4"]);
    let lines: Vec<usize> = loaded.skipped.iter().map(|s| s.line).collect();
    assert_eq!(lines, vec![2, 3]);
    assert!(loaded.skipped.iter().all(|s| s.file == gsm));

    // Without the flag the same call refuses, as `load_suite` does.
    assert!(load_suite_with(
        path_str(&gsm),
        Path::new("/nonexistent"),
        &LoadOptions::default()
    )
    .is_err());
}

#[test]
fn skip_invalid_with_nothing_valid_is_still_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.jsonl", "{\"question\": \"q\"\n[1]\n");
    let path = dir.path().join("bad.jsonl");
    let err = load_suite_with(path_str(&path), Path::new("/nonexistent"), &skipping()).unwrap_err();
    assert!(
        err.to_string()
            .contains("no valid tasks found (2 invalid records skipped)"),
        "{err}"
    );
}

#[test]
fn release_named_tables_folder_follows_the_questions_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "da-test-questions.jsonl",
        r#"{"id": 1, "question": "Mean?", "format": "@m[v]", "file_name": "t.csv"}"#,
    );
    write(
        root,
        "da-test-labels.jsonl",
        r#"{"id": 1, "common_answers": [["m", "2"]]}"#,
    );
    write(root, "da-test-tables/t.csv", "x\n2\n");
    let tasks = load_suite(path_str(root), Path::new("/nonexistent")).unwrap();
    assert_eq!(tasks[0].files, vec![root.join("da-test-tables/t.csv")]);
}

/// `retrace tasks list` on the releases from an unrelated directory.
fn tasks_list(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let ran = common::retrace(["tasks", "list"].iter().chain(args))
        .cwd(cwd)
        .run();
    (ran.code, ran.stdout, ran.stderr)
}

#[test]
fn tasks_list_skip_invalid_via_the_cli() {
    let dir = releases();
    let elsewhere = tempfile::tempdir().unwrap();
    let da = dir.path().join("dabench");
    let questions = da.join("da-dev-questions.jsonl");

    let (code, stdout, stderr) = tasks_list(&[path_str(&da)], elsewhere.path());
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("da-dev-labels.jsonl:2: "), "{stderr}");

    let (code, stdout, stderr) = tasks_list(&["--skip-invalid", path_str(&da)], elsewhere.path());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.ends_with("2 tasks\n"), "{stdout}");
    assert!(
        stderr.contains(&format!("skipped {}:3: invalid JSON", questions.display())),
        "{stderr}"
    );
    assert!(stderr.contains("da-dev-labels.jsonl:2: `5`: "), "{stderr}");
    assert!(stderr.contains("skipped 2 invalid record(s)"), "{stderr}");
    assert!(
        !stdout.contains("skipped"),
        "stdout stays the list: {stdout}"
    );

    // The JSON listing stays parseable: skipped records go to stderr.
    let gsm = dir.path().join("gsm8k/test.jsonl");
    let (code, stdout, stderr) = tasks_list(
        &["--skip-invalid", "--json", path_str(&gsm)],
        elsewhere.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    let tasks: Vec<Task> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(ids(&tasks), vec!["test-1", "test-4"]);
    assert_eq!(stderr.matches("test.jsonl:").count(), 2, "{stderr}");
}
