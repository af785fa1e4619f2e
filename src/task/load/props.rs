//! Properties of the dataset loaders: a flawed line gives an error naming
//! its file and line (or the labels file it points to), never a panic.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::fixtures::dir_with;
use super::*;
use crate::util::props::{hostile_text, megabyte_of, within_bound};

const GOOD: &str = r#"{"id": "a", "question": "q", "expected": {"type": "number", "value": 1}}"#;

/// The fields the three formats look at, so generated objects reach them.
const KEYS: &[&str] = &[
    "id",
    "question",
    "expected",
    "type",
    "value",
    "values",
    "answers",
    "ordered",
    "abs_tol",
    "rel_tol",
    "exact",
    "answer",
    "input",
    "target",
    "format",
    "file_name",
    "common_answers",
    "files",
    "tags",
    "packages",
    "reference",
    "code",
    "constraints",
    "concepts",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "-?[0-9]{1,25}(\\.[0-9]{0,5})?%?".prop_map(Value::String),
        hostile_text(6).prop_map(|t| Value::String(format!("x\n#### {t}"))),
        proptest::sample::select(&["number", "text", "list", "multi", "@a[1]", "x.csv"][..])
            .prop_map(Value::from),
        hostile_text(6).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..5).prop_map(
                |kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            ),
        ]
    })
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        hostile_text(20),
        proptest::collection::vec((proptest::sample::select(KEYS), json_value()), 0..8).prop_map(
            |kv| {
                let obj: Map<String, Value> =
                    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                Value::Object(obj).to_string()
            }
        ),
    ]
}

/// Where an error points, when it is about a line.
fn place(err: &TaskError) -> Option<(&Path, usize)> {
    match err {
        TaskError::Parse { file, line, .. } => Some((file.as_path(), *line)),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_bad_line_is_named_by_file_and_line(bad in line()) {
        // One line: a newline in the text would make it several.
        let bad = bad.replace(['\n', '\r'], " ");
        let dir = dir_with(&[("set.jsonl", &format!("{GOOD}\n{bad}\n"))]);
        let path = dir.path().join("set.jsonl");
        match load_file(&path) {
            Ok(tasks) => prop_assert!(!tasks.is_empty()),
            Err(err) => {
                let (file, line) = place(&err).ok_or_else(|| {
                    TestCaseError::fail(format!("not an error about a line: {err}"))
                })?;
                if file == path {
                    prop_assert_eq!(line, 2, "{}", err);
                } else {
                    // A DABench line's labels file, in the same directory.
                    prop_assert_eq!(file.parent(), Some(dir.path()), "{}", err);
                }
                let prefix = format!("{}:{line}: ", file.display());
                prop_assert!(err.to_string().starts_with(&prefix), "{}", err);
            }
        }
        // Skipping invalid records keeps the good one and lists the bad one.
        let skipping = LoadOptions {
            skip_invalid: true,
            ..LoadOptions::default()
        };
        let loaded = load_suite_with(path.to_str().unwrap(), dir.path(), &skipping).unwrap();
        prop_assert_eq!(&loaded.tasks[0].id, "a");
        for s in &loaded.skipped {
            prop_assert!(s.line >= 1 && s.file.starts_with(dir.path()), "{s:?}");
        }
    }
}

#[test]
fn a_megabyte_line_is_read_in_linear_time() {
    for bad in [
        megabyte_of("["),
        format!("{{\"id\": \"b\", \"question\": \"{}\"}}", megabyte_of("q")),
        format!(
            "{{\"question\": \"q\", \"answer\": \"{}#### 1\"}}",
            megabyte_of("#### x\\n")
        ),
        megabyte_of("{\"a\":"),
    ] {
        let dir = dir_with(&[("set.jsonl", &format!("{GOOD}\n{bad}\n"))]);
        let path = dir.path().join("set.jsonl");
        // Whether it loads does not matter here, only how long it takes.
        let _ = within_bound("load_file", &bad, |_| load_file(&path).map(|t| t.len()));
    }
}
