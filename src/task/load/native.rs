//! The native format: a [`Task`] in its serde shape, with `expected`
//! checked field by field and input files resolved.

use serde_json::{json, Map, Value};

use super::fields::{dataset_number, id_value, kind, req_str};
use super::files::task_files;
use super::{Ctx, LineResult};
use crate::task::check::F64_EXACT_INT;
use crate::task::Task;

pub(super) fn native(ctx: &Ctx, mut obj: Map<String, Value>) -> LineResult<Task> {
    match obj.get("id") {
        None => return Err("missing field `id`".into()),
        Some(v) => {
            let id = id_value(v)?;
            obj.insert("id".into(), Value::String(id));
        }
    }
    req_str(&obj, "question")?;
    if let Some(expected) = obj.get_mut("expected") {
        prepare_expected(expected, "expected")?;
    }
    let mut task: Task = serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())?;
    task.files = task_files(ctx, &task.files)?;
    Ok(task)
}

/// Checks an `expected` object's `type` (with a clear message), turns
/// numeric strings into numbers and records exact digits of big integers.
fn prepare_expected(v: &mut Value, at: &str) -> LineResult<()> {
    let Value::Object(obj) = v else {
        return Err(format!(
            "`{at}` must be an object with a `type` (number, text, list or multi), found {}",
            kind(v)
        ));
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(format!(
                "`{at}.type` must be a string, found {}",
                kind(other)
            ))
        }
        None => {
            return Err(format!(
                "`{at}`: missing field `type` (number, text, list or multi)"
            ))
        }
    };
    let required = match ty.as_str() {
        "number" | "text" => Some("value"),
        "list" => Some("values"),
        "multi" => Some("answers"),
        _ => None,
    };
    if let Some(field) = required.filter(|f| !obj.contains_key(*f)) {
        return Err(format!("`{at}`: missing field `{field}`"));
    }
    match ty.as_str() {
        "number" => {
            let digits = match obj.get("value") {
                Some(Value::String(s)) => {
                    let n = dataset_number(s)
                        .ok_or_else(|| format!("`{at}.value` `{s}` is not a number"))?;
                    obj.insert("value".into(), json!(n.value));
                    n.int_digits
                }
                Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Some(n.to_string()),
                _ => None,
            };
            let big = obj
                .get("value")
                .and_then(Value::as_f64)
                .is_some_and(|x| x.abs() >= F64_EXACT_INT);
            if let (Some(d), true, false) = (digits, big, obj.contains_key("exact")) {
                obj.insert("exact".into(), Value::String(d));
            }
            Ok(())
        }
        "text" | "list" => Ok(()),
        "multi" => match obj.get_mut("answers") {
            Some(Value::Object(parts)) => {
                for (name, part) in parts.iter_mut() {
                    prepare_expected(part, &format!("{at}.answers.{name}"))?;
                }
                Ok(())
            }
            Some(other) => Err(format!(
                "`{at}.answers` must be an object of name → expected, found {}",
                kind(other)
            )),
            None => Err(format!("`{at}`: missing field `answers`")),
        },
        other => Err(format!(
            "`{at}`: unknown `type` `{other}` (use number, text, list or multi)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::fixtures::{dir_with, number};
    use super::super::load_file;
    use crate::task::Expected;

    #[test]
    fn native_lines_resolve_files() {
        let jsonl = r#"{"id": "n1", "question": "Sum the price column.", "files": ["data/prices.csv"], "expected": {"type": "number", "value": 12.5, "abs_tol": 0.01}, "packages": ["pandas"], "tags": ["sum"]}
{"id": 2, "question": "Capital?", "expected": {"type": "text", "value": "Paris"}}
{"id": "n3", "question": "Parts?", "expected": {"type": "multi", "answers": {"a": {"type": "number", "value": "1,000"}, "b": {"type": "list", "values": [1, 2], "ordered": true}}}}
"#;
        let dir = dir_with(&[
            ("set/native.jsonl", jsonl),
            ("set/data/prices.csv", "price\n12.5\n"),
        ]);
        let tasks = load_file(&dir.path().join("set/native.jsonl")).unwrap();
        assert_eq!(tasks.len(), 3);
        assert!(tasks[0].files[0].is_absolute());
        assert_eq!(tasks[0].files[0], dir.path().join("set/data/prices.csv"));
        assert_eq!(tasks[0].packages, vec!["pandas"]);
        assert_eq!(tasks[1].id, "2");
        let Expected::Multi { answers } = &tasks[2].expected else {
            panic!("multi expected");
        };
        assert_eq!(number(&answers["a"]).0, 1000.0);
    }

    #[test]
    fn native_relative_path_is_made_absolute() {
        // A relative dataset path still yields absolute input files.
        let dir = dir_with(&[
            (
                "d/t.jsonl",
                r#"{"id": "x", "question": "q", "files": ["f.csv"], "expected": {"type": "number", "value": 1}}"#,
            ),
            ("d/f.csv", "a\n1\n"),
        ]);
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(dir.path(), &cwd).join("d/t.jsonl");
        let tasks = load_file(&rel).unwrap();
        assert!(tasks[0].files[0].is_absolute(), "{:?}", tasks[0].files);
        assert!(tasks[0].files[0].is_file());
    }

    /// `target` relative to `base` (enough for temp dirs under `/`).
    fn pathdiff(target: &Path, base: &Path) -> PathBuf {
        let ups = base.components().count() - 1;
        let mut p = PathBuf::new();
        for _ in 0..ups {
            p.push("..");
        }
        p.join(target.strip_prefix("/").unwrap())
    }
}
