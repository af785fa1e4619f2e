//! DABench-style lines: a question with constraints and an `@name[...]`
//! format, a table file, and labels in the line or in a labels file next
//! to it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::fields::{
    dataset_number, id_value, json_number_expected, json_object, kind, numeral_expected, req_str,
    string_list,
};
use super::files::resolve_file;
use super::lines::json_lines;
use super::skipped::{line_id, Skipped};
use super::{Ctx, LineError, LineResult};
use crate::task::{Expected, Published, Task, TaskError};

/// Labels by task id: the answer pairs and where they were read.
type LabelsById = HashMap<String, (Value, PathBuf, usize)>;

/// Tolerance for DABench-style numeric sub-answers.
pub const DABENCH_ABS_TOL: f64 = 1e-6;

pub(super) fn dabench_task(ctx: &mut Ctx, obj: &Map<String, Value>) -> Result<Task, LineError> {
    let id = match obj.get("id") {
        Some(v) => id_value(v)?,
        None => return Err(String::from("missing field `id`").into()),
    };
    let question = req_str(obj, "question")?;
    let format = req_str(obj, "format")?;
    let constraints = match obj.get("constraints") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Array(_)) => string_list(obj, "constraints")?.join("\n"),
        Some(other) => {
            return Err(format!(
                "field `constraints` must be a string, found {}",
                kind(other)
            )
            .into())
        }
    };
    let mut text = question.trim().to_string();
    if !constraints.is_empty() {
        text.push_str("\n\nConstraints: ");
        text.push_str(&constraints);
    }
    text.push_str("\n\nFormat: ");
    text.push_str(format.trim());

    let files = match obj.get("file_name") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(name)) => {
            let release_tables = table_dir(&ctx.stem);
            let mut subdirs = vec!["tables", "da-dev-tables", "data"];
            subdirs.extend(release_tables.as_deref());
            vec![resolve_file(ctx, Path::new(name), &subdirs)?]
        }
        Some(other) => {
            return Err(format!("field `file_name` must be a string, found {}", kind(other)).into())
        }
    };

    let inline = obj.get("answers").or_else(|| obj.get("common_answers"));
    let expected = match inline {
        Some(pairs) => labels_expected(pairs).map_err(|m| format!("labels: {m}"))?,
        None => {
            let (pairs, lfile, lline) = lookup_labels(ctx, &id)?;
            labels_expected(&pairs).map_err(|m| {
                LineError::Elsewhere(TaskError::Parse {
                    file: lfile,
                    line: lline,
                    message: format!("labels for `{id}`: {m}"),
                })
            })?
        }
    };
    let multi = matches!(expected, Expected::Multi { .. });

    let mut tags = string_list(obj, "concepts")?;
    if let Some(level) = obj.get("level").and_then(Value::as_str) {
        tags.push(format!("level:{level}"));
    }
    tags.extend(string_list(obj, "tags")?);
    Ok(Task {
        id,
        question: text,
        files,
        expected,
        reference: None,
        packages: string_list(obj, "packages")?,
        tags,
        published: multi.then_some(Published::Dabench),
    })
}

/// `[["name", "value"], ...]` → a multi-answer.
fn labels_expected(pairs: &Value) -> LineResult<Expected> {
    let Value::Array(items) = pairs else {
        return Err(format!(
            "answers must be a list of [\"name\", \"value\"] pairs, found {}",
            kind(pairs)
        ));
    };
    if items.is_empty() {
        return Err("answers are empty".into());
    }
    let mut answers = BTreeMap::new();
    for item in items {
        let (name, value) = match item.as_array().map(Vec::as_slice) {
            Some([Value::String(n), v]) => (n.trim(), v),
            _ => {
                return Err(format!(
                    "each answer must be a [\"name\", \"value\"] pair, found {item}"
                ))
            }
        };
        if name.is_empty() {
            return Err("an answer has an empty name".into());
        }
        let expected = match value {
            Value::Number(n) => json_number_expected(n, DABENCH_ABS_TOL)?,
            Value::String(s) => match dataset_number(s).filter(|_| !s.contains('/')) {
                Some(n) => numeral_expected(&n, DABENCH_ABS_TOL)?,
                None => Expected::Text {
                    value: s.trim().to_string(),
                    case_sensitive: false,
                },
            },
            Value::Bool(b) => Expected::Text {
                value: if *b { "True" } else { "False" }.into(),
                case_sensitive: false,
            },
            other => {
                return Err(format!(
                    "answer `{name}` must be a string or a number, found {}",
                    kind(other)
                ))
            }
        };
        if answers.insert(name.to_string(), expected).is_some() {
            return Err(format!("answer `{name}` is given twice"));
        }
    }
    Ok(Expected::Multi { answers })
}

/// The labels of DABench task `id` from the labels file next to the
/// questions file.
fn lookup_labels(ctx: &mut Ctx, id: &str) -> Result<(Value, PathBuf, usize), LineError> {
    if ctx.labels.is_none() {
        let skipped = ctx.skip_invalid.then_some(&mut ctx.skipped);
        ctx.labels = Some(read_labels(ctx.file, skipped).map_err(LineError::Elsewhere)?);
    }
    let labels = ctx.labels.as_ref().map(|m| m.get(id));
    match labels.flatten() {
        Some(found) => Ok(found.clone()),
        None => {
            let looked: Vec<String> = labels_paths(ctx.file)
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect();
            Err(format!(
                "no labels for DABench task `{id}`: the line has no `answers`/`common_answers` \
                 and there is no entry with this id in {}",
                looked.join(" or ")
            )
            .into())
        }
    }
}

/// Reads the labels files of a questions file (missing files are fine).
/// With `skipped`, a flawed labels line is listed there instead of stopping
/// the load (its question then has no labels and is skipped too).
fn read_labels(
    file: &Path,
    mut skipped: Option<&mut Vec<Skipped>>,
) -> Result<LabelsById, TaskError> {
    let mut out: LabelsById = HashMap::new();
    for path in labels_paths(file) {
        // Missing is fine; anything else there is read or refused.
        if !path.exists() {
            continue;
        }
        for read in json_lines(&path)? {
            let (line, trimmed) = match (read, skipped.as_deref_mut()) {
                (Ok(read), _) => read,
                (Err(e), Some(list)) => {
                    list.push(Skipped::from_error(e, None)?);
                    continue;
                }
                (Err(e), None) => return Err(e),
            };
            let err = |message: String| TaskError::Parse {
                file: path.clone(),
                line,
                message,
            };
            let entry = json_object(&trimmed).map_err(err).and_then(|obj| {
                let id = obj
                    .get("id")
                    .ok_or_else(|| err("missing field `id`".into()))
                    .and_then(|v| id_value(v).map_err(err))?;
                let pairs = obj
                    .get("common_answers")
                    .or_else(|| obj.get("answers"))
                    .cloned()
                    .ok_or_else(|| err("missing field `common_answers`".into()))?;
                if let Some((_, first_file, first)) = out.get(&id) {
                    return Err(err(format!(
                        "duplicate labels for `{id}` (first at {}:{first})",
                        first_file.display()
                    )));
                }
                Ok((id, pairs))
            });
            match (entry, skipped.as_deref_mut()) {
                (Ok((id, pairs)), _) => {
                    out.insert(id, (pairs, path.clone(), line));
                }
                (Err(e), Some(list)) => list.push(Skipped::from_error(e, line_id(&trimmed))?),
                (Err(e), None) => return Err(e),
            }
        }
    }
    Ok(out)
}

/// `x_labels.jsonl`, or `x-labels.jsonl` next to `x-questions.jsonl`.
pub(super) fn is_labels_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with("_labels.jsonl") {
        return true;
    }
    match name.strip_suffix("-labels.jsonl") {
        Some(prefix) => path
            .with_file_name(format!("{prefix}-questions.jsonl"))
            .is_file(),
        None => false,
    }
}

/// `<x>-tables` for the official release's `<x>-questions.jsonl`.
fn table_dir(stem: &str) -> Option<String> {
    stem.strip_suffix("-questions")
        .map(|x| format!("{x}-tables"))
}

/// Candidate labels files for a questions file.
fn labels_paths(file: &Path) -> Vec<PathBuf> {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut out = vec![file.with_file_name(format!("{stem}_labels.jsonl"))];
    if let Some(prefix) = stem.strip_suffix("-questions") {
        out.push(file.with_file_name(format!("{prefix}-labels.jsonl")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dir_with, load_err, number, parse_line_of};
    use super::super::load_file;
    use super::*;

    const QUESTIONS: &str = r#"{"id": 0, "question": "What is the mean of the price column?", "concepts": ["Summary Statistics"], "constraints": "Round to two decimal places.", "format": "@mean_price[mean_value] where mean_value is a number rounded to two decimals.", "file_name": "shop.csv", "level": "easy"}
{"id": 1, "question": "Which city has the most customers?", "format": "@top_city[city_name]", "file_name": "shop.csv", "answers": [["top_city", "Colden"]]}
"#;
    const LABELS: &str = r#"{"id": 0, "common_answers": [["mean_price", "12.35"]]}
"#;

    #[test]
    fn dabench_question_and_labels() {
        let dir = dir_with(&[
            ("da.jsonl", QUESTIONS),
            ("da_labels.jsonl", LABELS),
            ("tables/shop.csv", "price,city\n12.35,Colden\n"),
        ]);
        let tasks = load_file(&dir.path().join("da.jsonl")).unwrap();
        assert_eq!(tasks.len(), 2);
        let t = &tasks[0];
        assert_eq!(t.id, "0");
        assert!(t.question.starts_with("What is the mean"));
        assert!(t
            .question
            .contains("Constraints: Round to two decimal places."));
        assert!(t.question.contains("Format: @mean_price[mean_value]"));
        assert_eq!(t.files, vec![dir.path().join("tables/shop.csv")]);
        assert_eq!(t.tags, vec!["Summary Statistics", "level:easy"]);
        let Expected::Multi { answers } = &t.expected else {
            panic!("multi expected");
        };
        assert_eq!(
            number(&answers["mean_price"]),
            (12.35, Some(DABENCH_ABS_TOL))
        );
        let Expected::Multi { answers } = &tasks[1].expected else {
            panic!("multi expected");
        };
        assert_eq!(
            answers["top_city"],
            Expected::Text {
                value: "Colden".into(),
                case_sensitive: false
            }
        );
    }

    #[test]
    fn dabench_without_labels_names_the_places_looked() {
        let (msg, err) = load_err(
            &[("da.jsonl", QUESTIONS), ("tables/shop.csv", "price\n1\n")],
            "da.jsonl",
        );
        let (file, line, message) = parse_line_of(&err);
        assert_eq!((file.as_str(), line), ("da.jsonl", 1));
        assert!(message.contains("no labels for DABench task `0`"), "{msg}");
        assert!(message.contains("da_labels.jsonl"), "{msg}");
    }

    #[test]
    fn dabench_bad_labels_file_is_reported_there() {
        let (msg, err) = load_err(
            &[
                ("da.jsonl", QUESTIONS),
                (
                    "da_labels.jsonl",
                    "{\"id\": 0, \"common_answers\": [[\"mean_price\"]]}\n",
                ),
                ("shop.csv", "price\n1\n"),
            ],
            "da.jsonl",
        );
        let (file, line, message) = parse_line_of(&err);
        assert_eq!((file.as_str(), line), ("da_labels.jsonl", 1), "{msg}");
        assert!(message.contains("pair"), "{msg}");
    }

    #[test]
    fn labels_files_are_recognised() {
        let dir = dir_with(&[
            ("a_labels.jsonl", ""),
            ("da-dev-questions.jsonl", ""),
            ("da-dev-labels.jsonl", ""),
            ("lonely-labels.jsonl", ""),
        ]);
        let p = |n: &str| dir.path().join(n);
        assert!(is_labels_file(&p("a_labels.jsonl")));
        assert!(is_labels_file(&p("da-dev-labels.jsonl")));
        assert!(!is_labels_file(&p("lonely-labels.jsonl")));
        assert!(!is_labels_file(&p("da-dev-questions.jsonl")));
    }
}
