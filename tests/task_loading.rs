//! Loading suites from fixture files written to a temp dir: named suites,
//! paths, DABench labels files, duplicate ids, malformed lines, sampling.

use std::fs;
use std::path::Path;

use retrace::task::load::{datasets_dir, load_file, load_suite, select};
use retrace::task::{Expected, Task, TaskError};

fn write(root: &Path, name: &str, content: &str) {
    let path = root.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
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
    assert!(err.to_string().contains("no .jsonl files"), "{err}");
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

    let a = select(suite.clone(), None, Some(12), 42);
    let b = select(suite.clone(), None, Some(12), 42);
    let c = select(suite.clone(), None, Some(12), 43);
    assert_eq!(a, b, "same seed, same tasks");
    assert_ne!(ids(&a), ids(&c), "different seed, different tasks");
    assert_eq!(a.len(), 12);
    // Original order is kept.
    let pos = |t: &Task| suite.iter().position(|s| s.id == t.id).unwrap();
    assert!(a.windows(2).all(|w| pos(&w[0]) < pos(&w[1])));
    // Limit applies after sampling.
    let limited = select(suite.clone(), Some(5), Some(12), 42);
    assert_eq!(limited, a[..5].to_vec());
    // Limit alone keeps the first N.
    assert_eq!(
        ids(&select(suite.clone(), Some(2), None, 0)),
        vec!["many-1", "many-2"]
    );
}

#[test]
fn datasets_dir_default() {
    if std::env::var_os("RETRACE_DATASETS").is_none() {
        assert!(datasets_dir().ends_with("datasets"));
    }
}
