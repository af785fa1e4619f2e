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
    use super::*;

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
