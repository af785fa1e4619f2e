//! MATH-style records (Hendrycks et al.'s MATH and its 500-problem test
//! subset MATH-500): `problem`, `solution`, `answer`, `subject`, `level`,
//! optional `unique_id`, one per JSONL line or Parquet row; and the
//! original release's one JSON file per problem (`problem`, `level` as
//! `"Level 3"`, `type` for the subject, `solution`), whose answer is the
//! solution's last `\boxed{…}`. Subject and level become the tags
//! `subject:<name>` and `level:<n>`.

use serde_json::{Map, Value};

use super::fields::{id_value, kind, opt_id, req_str, string_list};
use super::{Ctx, LineResult};
use crate::task::{Expected, Task};

/// Whether an object is a MATH-style record.
pub(super) fn is_math(obj: &Map<String, Value>) -> bool {
    obj.contains_key("problem") && (obj.contains_key("solution") || obj.contains_key("answer"))
}

/// A MATH-style record as a task whose answer is LaTeX.
pub(super) fn math_task(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<Task> {
    let problem = req_str(obj, "problem")?;
    let latex = match obj.get("answer") {
        Some(Value::String(a)) if !a.trim().is_empty() => a.trim().to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(_)) => return Err("field `answer` is empty".into()),
        Some(other) if !other.is_null() => {
            return Err(format!(
                "field `answer` must be LaTeX text, found {}",
                kind(other)
            ))
        }
        _ => {
            let solution = req_str(obj, "solution")
                .map_err(|_| "no `answer` field and no `solution` to take it from".to_string())?;
            last_boxed(solution)
                .filter(|a| !a.trim().is_empty())
                .ok_or("the solution has no complete `\\boxed{...}` answer")?
                .trim()
                .to_string()
        }
    };
    let id = match obj.get("unique_id") {
        Some(v) if !v.is_null() => id_value(v)?,
        _ if ctx.file.extension().is_some_and(|x| x == "json") => one_file_id(ctx),
        _ => opt_id(ctx, obj, line)?,
    };
    let mut tags = Vec::new();
    if let Some(subject) = text_field(obj, "subject")?.or(text_field(obj, "type")?) {
        tags.push(format!("subject:{subject}"));
    }
    if let Some(level) = level(obj)? {
        tags.push(format!("level:{level}"));
    }
    tags.extend(string_list(obj, "tags")?);
    Ok(Task {
        id,
        question: problem.to_string(),
        files: Vec::new(),
        expected: Expected::Math { latex },
        reference: obj.get("code").and_then(Value::as_str).map(str::to_string),
        packages: string_list(obj, "packages")?,
        tags,
        published: None,
    })
}

/// The original release names a problem by its subject folder and file:
/// `algebra/1` (file names repeat across folders).
fn one_file_id(ctx: &Ctx) -> String {
    match ctx.dir.file_name().and_then(|d| d.to_str()) {
        Some(folder) => format!("{folder}/{}", ctx.stem),
        None => ctx.stem.clone(),
    }
}

fn text_field(obj: &Map<String, Value>, key: &str) -> LineResult<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(format!(
            "field `{key}` must be a string, found {}",
            kind(other)
        )),
    }
}

/// `3`, `"3"` or `"Level 3"` → `3` (`"Level ?"`, as a few of the
/// original's problems have it, → `?`).
fn level(obj: &Map<String, Value>) -> LineResult<Option<String>> {
    match obj.get("level") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::String(s)) => {
            let s = s.trim();
            let bare = s
                .strip_prefix("Level")
                .or_else(|| s.strip_prefix("level"))
                .unwrap_or(s);
            Ok(Some(bare.trim().to_string()).filter(|l| !l.is_empty()))
        }
        Some(other) => Err(format!(
            "field `level` must be a number or text, found {}",
            kind(other)
        )),
    }
}

/// The content of the last `\boxed{…}` (or `\fbox{…}`) in `text`, braces
/// nested and `\{`, `\}` escapes kept; `\boxed 5` (no braces) is read to
/// the next space or `$`. `None` when there is none or its braces never
/// close.
pub fn last_boxed(text: &str) -> Option<String> {
    let (at, name) = ["\\boxed", "\\fbox"]
        .iter()
        .filter_map(|name| text.rfind(name).map(|at| (at, *name)))
        .max_by_key(|(at, _)| *at)?;
    let rest = &text[at + name.len()..];
    if let Some(bare) = rest.strip_prefix(' ') {
        let end = bare.find(['$', ' ', '\n']).unwrap_or(bare.len());
        return Some(bare[..end].to_string()).filter(|s| !s.is_empty());
    }
    let body = rest.strip_prefix('{')?;
    let mut depth = 1usize;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(body[..i].to_string());
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dir_with, load_err, parse_line_of};
    use super::super::{load_file, load_suite};
    use super::*;

    /// Two lines as MATH-500's `test.jsonl` has them.
    const MATH500: &str = r#"{"problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.", "solution": "We have that $r = 3$ ... $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$", "answer": "\\left( 3, \\frac{\\pi}{2} \\right)", "subject": "Precalculus", "level": 2, "unique_id": "test/precalculus/807.json"}
{"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$.", "answer": "2", "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"}
"#;

    #[test]
    fn math500_lines_are_latex_tasks_tagged_by_subject_and_level() {
        let dir = dir_with(&[("test.jsonl", MATH500)]);
        let tasks = load_file(&dir.path().join("test.jsonl")).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].id, "test/precalculus/807.json");
        assert_eq!(
            tasks[0].expected,
            Expected::Math {
                latex: "\\left( 3, \\frac{\\pi}{2} \\right)".into()
            }
        );
        assert_eq!(tasks[0].tags, ["subject:Precalculus", "level:2"]);
        assert_eq!(tasks[1].tags, ["subject:Prealgebra", "level:1"]);
        assert!(tasks[0].question.starts_with("Convert the point"));
    }

    #[test]
    fn the_original_release_is_a_folder_of_one_problem_files() {
        let algebra = r#"{
    "problem": "Solve $3x = 14$.",
    "level": "Level 3",
    "type": "Algebra",
    "solution": "Divide: $x = \\boxed{\\frac{14}{3}}$."
}"#;
        let geometry = r#"{"problem": "Area?", "level": "Level ?", "type": "Geometry", "solution": "$\\boxed{25\\pi}$"}"#;
        let dir = dir_with(&[
            ("test/algebra/1.json", algebra),
            ("test/geometry/1.json", geometry),
        ]);
        let tasks = load_suite(dir.path().join("test").to_str().unwrap(), dir.path()).unwrap();
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["algebra/1", "geometry/1"]);
        assert_eq!(
            tasks[0].expected,
            Expected::Math {
                latex: "\\frac{14}{3}".into()
            }
        );
        assert_eq!(tasks[0].tags, ["subject:Algebra", "level:3"]);
        assert_eq!(tasks[1].tags, ["subject:Geometry", "level:?"]);
    }

    #[test]
    fn json_files_beside_jsonl_are_task_data_not_tasks() {
        let native = r#"{"id": "a", "question": "q", "expected": {"type": "number", "value": 1}}"#;
        let dir = dir_with(&[
            ("suite/tasks.jsonl", native),
            ("suite/data/config.json", "{}"),
        ]);
        let tasks = load_suite(dir.path().join("suite").to_str().unwrap(), dir.path()).unwrap();
        assert_eq!(tasks.len(), 1);
    }

    #[test]
    fn bad_records_name_their_file_and_line() {
        let good = r#"{"problem": "p", "answer": "1"}"#;
        for (line, says) in [
            (
                r#"{"problem": "p", "solution": "no box here"}"#,
                "no complete `\\boxed{...}`",
            ),
            (
                r#"{"problem": "p", "solution": "$\\boxed{\\frac{1}{2}$"}"#,
                "no complete",
            ),
            (r#"{"problem": "p", "answer": ""}"#, "`answer` is empty"),
            (r#"{"problem": "p", "answer": [1]}"#, "must be LaTeX text"),
            (
                r#"{"problem": "p", "answer": "1", "level": [5]}"#,
                "`level` must be",
            ),
            (r#"{"problem": 3, "answer": "1"}"#, "problem"),
        ] {
            let text = format!("{good}\n{line}\n");
            let (shown, err) = load_err(&[("m.jsonl", &text)], "m.jsonl");
            let (file, at, message) = parse_line_of(&err);
            assert_eq!((file.as_str(), at), ("m.jsonl", 2), "{shown}");
            assert!(message.contains(says), "{line}: {message}");
        }
    }

    #[test]
    fn the_last_boxed_answer_is_read_with_nested_braces() {
        for (text, want) in [
            ("so $\\boxed{\\frac{14}{3}}$.", Some("\\frac{14}{3}")),
            (
                "\\boxed{1} then \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}",
                Some("\\left( 3, \\frac{\\pi}{2} \\right)"),
            ),
            ("\\boxed{\\{1, 2\\}}", Some("\\{1, 2\\}")),
            ("\\boxed{\\text{Evelyn}}", Some("\\text{Evelyn}")),
            ("$\\boxed 5$", Some("5")),
            ("\\fbox{7}", Some("7")),
            ("\\boxed{\\frac{1}{2}", None),
            ("no answer", None),
        ] {
            assert_eq!(last_boxed(text).as_deref(), want, "{text}");
        }
    }
}
