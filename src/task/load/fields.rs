//! Fields of a dataset line: typed reads with messages that name the field
//! and what was found, and expected numbers built from them.

use serde_json::{json, Map, Value};

use super::{Ctx, LineResult};
use crate::task::check::{parse_number_literal, Num, F64_EXACT_INT};
use crate::task::Expected;

/// A line's JSON object.
pub(super) fn json_object(text: &str) -> LineResult<Map<String, Value>> {
    match serde_json::from_str(text).map_err(|e| json_error(&e))? {
        Value::Object(obj) => Ok(obj),
        other => Err(format!("expected a JSON object, found {}", kind(&other))),
    }
}

fn json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg.split(" at line ").next().unwrap_or(&msg);
    format!("invalid JSON at column {}: {msg}", e.column())
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn field_list(obj: &Map<String, Value>) -> String {
    if obj.is_empty() {
        return "none".into();
    }
    obj.keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn req_str<'a>(obj: &'a Map<String, Value>, key: &str) -> LineResult<&'a str> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("field `{key}` is empty")),
        Some(other) => Err(format!(
            "field `{key}` must be a string, found {}",
            kind(other)
        )),
        None => Err(format!("missing field `{key}`")),
    }
}

/// An id given as text or a number.
pub(super) fn id_value(v: &Value) -> LineResult<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::String(_) => Err("field `id` is empty".into()),
        other => Err(format!(
            "field `id` must be a string or a number, found {}",
            kind(other)
        )),
    }
}

pub(super) fn opt_id(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<String> {
    match obj.get("id").or_else(|| obj.get("task_id")) {
        Some(v) => id_value(v),
        None => Ok(format!("{}-{line}", ctx.stem)),
    }
}

pub(super) fn string_list(obj: &Map<String, Value>, key: &str) -> LineResult<Vec<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "field `{key}` must hold strings, found {}",
                    kind(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "field `{key}` must be a list of strings, found {}",
            kind(other)
        )),
    }
}

/// An `Expected::Number`, carrying exact digits for integers beyond 2^53.
///
/// Built through serde so `exact` reaches `Expected::Number` once it has
/// that field (ignored until then).
fn number_expected(value: f64, abs_tol: f64, int_digits: Option<&str>) -> LineResult<Expected> {
    if !value.is_finite() {
        return Err(format!("expected answer {value} is not a finite number"));
    }
    let mut v = json!({ "type": "number", "value": value, "abs_tol": abs_tol });
    if let Some(d) = int_digits.filter(|_| value.abs() >= F64_EXACT_INT) {
        v["exact"] = Value::String(d.to_string());
    }
    serde_json::from_value(v).map_err(|e| format!("internal: cannot build expected number: {e}"))
}

/// A number a dataset writes as text: finite and not a percentage.
pub(super) fn dataset_number(s: &str) -> Option<Num> {
    parse_number_literal(s).filter(|n| !n.percent && n.value.is_finite())
}

/// An `Expected::Number` from a number read from text.
pub(super) fn numeral_expected(n: &Num, abs_tol: f64) -> LineResult<Expected> {
    number_expected(n.value, abs_tol, n.int_digits.as_deref())
}

/// An `Expected::Number` from a JSON number, its digits kept.
pub(super) fn json_number_expected(n: &serde_json::Number, abs_tol: f64) -> LineResult<Expected> {
    number_expected(
        n.as_f64().unwrap_or(f64::NAN),
        abs_tol,
        Some(n.to_string().as_str()),
    )
}
