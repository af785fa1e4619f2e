//! GSM8K-style lines (`question` and an `answer` ending in `#### <number>`)
//! and PAL / GSM-Hard lines (`input`, `target`).

use serde_json::{Map, Value};

use super::fields::{
    dataset_number, json_number_expected, kind, numeral_expected, opt_id, req_str, string_list,
};
use super::{Ctx, LineResult};
use crate::task::{Published, Task};

/// Tolerance for GSM8K-style answers.
pub const GSM_ABS_TOL: f64 = 1e-3;

/// GSM8K: `{"question": .., "answer": "...\n#### 72"}`.
pub(super) fn gsm(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<Task> {
    let question = req_str(obj, "question")?;
    let mut published = None;
    let expected = match obj.get("answer") {
        Some(Value::String(answer)) => {
            let last = answer
                .lines()
                .rev()
                .map(str::trim)
                .find_map(|l| l.strip_prefix("####"))
                .ok_or("answer has no `#### <number>` line")?
                .trim();
            let n = dataset_number(last).ok_or_else(|| format!("`#### {last}` is not a number"))?;
            published = Some(Published::Gsm8k {
                answer: last.to_string(),
            });
            numeral_expected(&n, GSM_ABS_TOL)?
        }
        Some(Value::Number(n)) => json_number_expected(n, GSM_ABS_TOL)?,
        Some(other) => {
            return Err(format!(
                "field `answer` must be a string ending in `#### <number>`, found {}",
                kind(other)
            ))
        }
        None => return Err("missing field `answer`".into()),
    };
    Ok(Task {
        id: opt_id(ctx, obj, line)?,
        question: question.to_string(),
        files: Vec::new(),
        expected,
        reference: None,
        packages: string_list(obj, "packages")?,
        tags: string_list(obj, "tags")?,
        published,
    })
}

/// PAL / GSM-Hard: `{"input": .., "target": 72}`.
pub(super) fn pal(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<Task> {
    let question = req_str(obj, "input")?;
    let expected = match obj.get("target") {
        Some(Value::Number(n)) => json_number_expected(n, GSM_ABS_TOL)?,
        Some(Value::String(s)) => {
            let n = dataset_number(s).ok_or_else(|| format!("`target` `{s}` is not a number"))?;
            numeral_expected(&n, GSM_ABS_TOL)?
        }
        Some(other) => {
            return Err(format!(
                "field `target` must be a number, found {}",
                kind(other)
            ))
        }
        None => return Err("missing field `target`".into()),
    };
    Ok(Task {
        id: opt_id(ctx, obj, line)?,
        question: question.to_string(),
        files: Vec::new(),
        expected,
        reference: obj.get("code").and_then(Value::as_str).map(str::to_string),
        packages: Vec::new(),
        tags: string_list(obj, "tags")?,
        published: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dir_with, number};
    use super::super::load_file;
    use super::*;

    const GSM: &str = r#####"{"question": "A baker fills 3 trays with 12 rolls each and sells 30 rolls. How many rolls are left?", "answer": "3 trays hold 3 * 12 = <<3*12=36>>36 rolls.\nAfter selling, 36 - 30 = <<36-30=6>>6 remain.\n#### 6"}
{"id": "fence", "question": "A fence costs $1,000 per side for 2 sides plus a $250 gate. Total?", "answer": "2 * 1000 + 250 = 2250\n#### 2,250"}

// a comment line
# another comment
{"question": "The temperature drops from 3 to -4 degrees. What is it now?", "answer": "#### -4"}
"#####;

    #[test]
    fn gsm_lines() {
        let dir = dir_with(&[("grade.jsonl", GSM)]);
        let tasks = load_file(&dir.path().join("grade.jsonl")).unwrap();
        assert_eq!(tasks.len(), 3);
        assert_eq!(tasks[0].id, "grade-1");
        assert!(tasks[0].question.starts_with("A baker fills"));
        assert_eq!(number(&tasks[0].expected), (6.0, Some(GSM_ABS_TOL)));
        assert_eq!(tasks[1].id, "fence");
        assert_eq!(number(&tasks[1].expected).0, 2250.0);
        // Line numbers count blank and comment lines.
        assert_eq!(tasks[2].id, "grade-6");
        assert_eq!(number(&tasks[2].expected).0, -4.0);
        assert!(tasks.iter().all(|t| t.files.is_empty()));
    }

    #[test]
    fn gsm_big_integer_keeps_digits() {
        let line = r#####"{"question": "q", "answer": "#### 123456789012345678901"}"#####;
        let dir = dir_with(&[("big.jsonl", line)]);
        let tasks = load_file(&dir.path().join("big.jsonl")).unwrap();
        assert_eq!(number(&tasks[0].expected).0, 123456789012345678901.0);
        // Carried as `exact` once `Expected::Number` has that field.
        let v = serde_json::to_value(&tasks[0].expected).unwrap();
        if let Some(exact) = v.get("exact") {
            assert_eq!(exact, "123456789012345678901");
        }
    }

    #[test]
    fn pal_lines() {
        let line = r#"{"input": "Twice 21?", "target": 42.0, "code": "answer = 2 * 21"}"#;
        let dir = dir_with(&[("hard.jsonl", line)]);
        let t = &load_file(&dir.path().join("hard.jsonl")).unwrap()[0];
        assert_eq!(t.id, "hard-1");
        assert_eq!(number(&t.expected), (42.0, Some(GSM_ABS_TOL)));
        assert_eq!(t.reference.as_deref(), Some("answer = 2 * 21"));
    }
}
