//! Builders of expected answers and the table runner shared by the
//! checkers' tests.

use serde_json::Value;

use super::{check, Expected};

/// Built through serde so the tests compile with or without
/// `Expected::Number::exact`.
pub(super) fn number(
    value: f64,
    abs_tol: Option<f64>,
    rel_tol: Option<f64>,
    pct: bool,
) -> Expected {
    serde_json::from_value(serde_json::json!({
        "type": "number", "value": value, "abs_tol": abs_tol,
        "rel_tol": rel_tol, "allow_percent": pct,
    }))
    .unwrap()
}

pub(super) fn num(value: f64) -> Expected {
    if value.is_infinite() {
        // JSON has no infinity.
        let mut e = number(0.0, None, None, false);
        if let Expected::Number { value: v, .. } = &mut e {
            *v = value;
        }
        return e;
    }
    number(value, None, None, false)
}

pub(super) fn num_tol(value: f64, abs_tol: Option<f64>, rel_tol: Option<f64>) -> Expected {
    number(value, abs_tol, rel_tol, false)
}

pub(super) fn pct(value: f64) -> Expected {
    number(value, Some(1e-6), None, true)
}

pub(super) fn text(value: &str) -> Expected {
    Expected::Text {
        value: value.into(),
        case_sensitive: false,
    }
}

pub(super) fn list(values: Value, ordered: bool) -> Expected {
    Expected::List {
        values: values.as_array().unwrap().clone(),
        ordered,
        abs_tol: None,
    }
}

/// (expected, answer, correct, parsed, rule prefix, normalized)
pub(super) type Row = (
    Expected,
    &'static str,
    bool,
    bool,
    &'static str,
    Option<&'static str>,
);

pub(super) fn run_table(rows: Vec<Row>) {
    let mut failures = Vec::new();
    for (expected, answer, correct, parsed, rule, normalized) in rows {
        let c = check(&expected, Some(answer), "");
        let ok = c.correct == correct
            && c.parsed == parsed
            && c.rule.starts_with(rule)
            && normalized.is_none_or(|n| c.normalized.as_deref() == Some(n));
        if !ok {
            failures.push(format!(
                "{answer:?} vs {expected:?}: want correct={correct} parsed={parsed} \
                 rule={rule} normalized={normalized:?}, got {c:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
