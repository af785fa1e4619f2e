//! The clean but wrong answer of `oracle:wrong`: the reference solution,
//! then lines that replace its answer with a plausible value of the expected
//! type that the checker rejects. The value is chosen here, from the task's
//! expected answer, and verified with the real checker, so round 0 is wrong
//! whatever the reference computes at run time.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::task::check::check;
use crate::task::Expected;

/// Code that runs as cleanly as the reference and answers wrongly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongAnswer {
    pub code: String,
    /// E.g. "answer replaced by 43".
    pub note: String,
}

/// A value in two spellings: a Python literal, and as printed inside
/// `@name[...]`.
#[derive(Debug, Clone)]
struct Spelled {
    python: String,
    shown: String,
}

/// The wrong variant of `reference` for `expected`; `None` only when no
/// candidate value is both parsed and rejected by the checker.
pub fn wrong_answer(reference: &str, expected: &Expected) -> Option<WrongAnswer> {
    let mut code = reference.to_string();
    if !code.is_empty() && !code.ends_with('\n') {
        code.push('\n');
    }
    code.push_str("# oracle:wrong: a clean but wrong answer\n");
    match expected {
        Expected::Multi { answers } => {
            let parts: BTreeMap<&str, Spelled> = answers
                .iter()
                .map(|(name, sub)| Some((name.as_str(), wrong_single(sub)?)))
                .collect::<Option<_>>()?;
            let lines: Vec<String> = parts
                .iter()
                .map(|(name, v)| format!("@{name}[{}]", v.shown))
                .collect();
            let verdict = check(expected, None, &lines.join("\n"));
            if !verdict.parsed || verdict.parts.iter().any(|p| p.correct) {
                return None;
            }
            for line in &lines {
                code.push_str(&format!("print({})\n", py_string(line)));
            }
            // A reference that also leaves `answer` must not outvote the
            // printed parts.
            if mentions_answer(reference) {
                let items: Vec<String> = parts
                    .iter()
                    .map(|(name, v)| format!("{}: {}", py_string(name), v.python))
                    .collect();
                code.push_str(&format!("answer = {{{}}}\n", items.join(", ")));
            }
            Some(WrongAnswer {
                code,
                note: format!("printed wrong parts {}", lines.join(" ")),
            })
        }
        single => {
            let v = wrong_single(single)?;
            code.push_str(&format!("answer = {}\n", v.python));
            Some(WrongAnswer {
                code,
                note: format!("answer replaced by {}", v.python),
            })
        }
    }
}

/// The first candidate the checker parses as the expected type and rejects.
fn wrong_single(expected: &Expected) -> Option<Spelled> {
    let candidates = match expected {
        Expected::Number { value, exact, .. } => numbers(*value, exact.as_deref()),
        Expected::Text { value, .. } => texts(value),
        Expected::List {
            values, ordered, ..
        } => lists(values, *ordered),
        Expected::Multi { .. } | Expected::Math { .. } => return None,
    };
    candidates.into_iter().find(|c| {
        let verdict = check(expected, Some(&c.python), "");
        verdict.parsed && !verdict.correct
    })
}

fn number(text: String) -> Spelled {
    Spelled {
        python: text.clone(),
        shown: text,
    }
}

/// Near the expected value first (`v + 1`), then further away, keeping an
/// integer an integer.
fn numbers(value: f64, exact: Option<&str>) -> Vec<Spelled> {
    let mut out = Vec::new();
    if let Some(digits) = exact.and_then(bump_integer) {
        out.push(number(digits));
    }
    if !value.is_finite() {
        return out;
    }
    let integral = value.fract() == 0.0 && value.abs() < 9.0e15;
    let mut push = |x: f64| {
        if x.is_finite() {
            out.push(number(if integral {
                format!("{}", x as i64)
            } else {
                format!("{x:?}")
            }));
        }
    };
    push(value + 1.0);
    push(2.0 * value + 1.0);
    for k in 1..=15 {
        push(value + 10f64.powi(k));
    }
    push(-value - 1.0);
    out
}

/// `digits` (an integer, maybe signed) with its magnitude increased by one.
fn bump_integer(digits: &str) -> Option<String> {
    let (sign, magnitude) = match digits.trim().strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", digits.trim()),
    };
    if magnitude.is_empty() || !magnitude.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut bytes = magnitude.as_bytes().to_vec();
    let mut i = bytes.len();
    loop {
        if i == 0 {
            bytes.insert(0, b'1');
            break;
        }
        i -= 1;
        if bytes[i] == b'9' {
            bytes[i] = b'0';
        } else {
            bytes[i] += 1;
            break;
        }
    }
    Some(format!("{sign}{}", String::from_utf8(bytes).ok()?))
}

fn text(value: String) -> Spelled {
    Spelled {
        python: py_string(&value),
        shown: value,
    }
}

/// A changed digit (`2024-01` → `2024-02`), the words reversed, a suffix.
fn texts(value: &str) -> Vec<Spelled> {
    let mut out = Vec::new();
    if let Some(at) = value.rfind(|c: char| c.is_ascii_digit()) {
        let d = value.as_bytes()[at] - b'0';
        let bumped = (b'0' + (d + 1) % 10) as char;
        out.push(text(format!(
            "{}{bumped}{}",
            &value[..at],
            &value[at + 1..]
        )));
    }
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.len() > 1 {
        let reversed: Vec<&str> = words.iter().rev().copied().collect();
        out.push(text(reversed.join(" ")));
    }
    out.push(text(format!("{} North", value.trim())));
    out.push(text("unknown".into()));
    out
}

/// Reversed (ordered lists), one element short, the last element wrong.
fn lists(values: &[Value], ordered: bool) -> Vec<Spelled> {
    let mut out = Vec::new();
    let list = |items: &[Value]| {
        let python = format!(
            "[{}]",
            items.iter().map(py_literal).collect::<Vec<_>>().join(", ")
        );
        Spelled {
            shown: python.clone(),
            python,
        }
    };
    if ordered {
        let reversed: Vec<Value> = values.iter().rev().cloned().collect();
        out.push(list(&reversed));
    }
    if values.len() >= 2 {
        out.push(list(&values[..values.len() - 1]));
    }
    if let Some(last) = values.last() {
        let replaced: Vec<Value> = match last {
            Value::Number(n) => numbers(n.as_f64().unwrap_or(0.0), None)
                .into_iter()
                .filter_map(|s| serde_json::from_str::<Value>(&s.python).ok())
                .take(1)
                .collect(),
            Value::String(s) => texts(s)
                .into_iter()
                .take(1)
                .map(|s| Value::String(s.shown))
                .collect(),
            _ => Vec::new(),
        };
        for r in replaced {
            let mut items = values.to_vec();
            *items.last_mut().expect("not empty") = r;
            out.push(list(&items));
        }
    }
    out.push(list(&[Value::from(0)]));
    out
}

/// A JSON value as a Python literal.
fn py_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_string(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_string(k), py_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A Python string literal (JSON string syntax is valid Python).
fn py_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn mentions_answer(code: &str) -> bool {
    code.match_indices("answer").any(|(at, _)| {
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(code[..at].chars().next_back()) && !ident(code[at + 6..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn num(value: f64) -> Expected {
        Expected::Number {
            value,
            abs_tol: None,
            rel_tol: None,
            allow_percent: false,
            exact: None,
        }
    }

    fn last_line(code: &str) -> &str {
        code.trim_end().lines().last().unwrap()
    }

    #[test]
    fn numbers_stay_numbers_and_are_wrong() {
        let w = wrong_answer("answer = 42", &num(42.0)).unwrap();
        assert_eq!(last_line(&w.code), "answer = 43");
        assert!(w.code.starts_with("answer = 42\n"));
        let w = wrong_answer("answer = 2.5\n", &num(2.5)).unwrap();
        assert_eq!(last_line(&w.code), "answer = 3.5");
        // A tolerance wider than 1 pushes the value further out.
        let wide = Expected::Number {
            value: 100.0,
            abs_tol: Some(5.0),
            rel_tol: None,
            allow_percent: false,
            exact: None,
        };
        let w = wrong_answer("answer = 100", &wide).unwrap();
        assert_eq!(last_line(&w.code), "answer = 201");
        // Percent tasks: neither 0.125 nor 12.5.
        let pct = Expected::Number {
            value: 0.125,
            abs_tol: None,
            rel_tol: None,
            allow_percent: true,
            exact: None,
        };
        let w = wrong_answer("answer = 0.125", &pct).unwrap();
        let v = last_line(&w.code).trim_start_matches("answer = ");
        assert!(!check(&pct, Some(v), "").correct, "{v}");
        // Exact big integers are bumped digit by digit.
        let big = Expected::Number {
            value: 1e30,
            abs_tol: None,
            rel_tol: None,
            allow_percent: false,
            exact: Some("999999999999999999999999999999".into()),
        };
        let w = wrong_answer("answer = 10**30 - 1", &big).unwrap();
        assert_eq!(
            last_line(&w.code),
            "answer = 1000000000000000000000000000000"
        );
        assert_eq!(bump_integer("-19").as_deref(), Some("-20"));
    }

    #[test]
    fn texts_and_lists_keep_their_type() {
        let t = Expected::Text {
            value: "2024-01".into(),
            case_sensitive: false,
        };
        let w = wrong_answer("answer = '2024-01'", &t).unwrap();
        assert_eq!(last_line(&w.code), "answer = \"2024-02\"");
        let t = Expected::Text {
            value: "Central".into(),
            case_sensitive: false,
        };
        let w = wrong_answer("answer = 'Central'", &t).unwrap();
        assert_eq!(last_line(&w.code), "answer = \"Central North\"");
        let l = Expected::List {
            values: serde_json::from_str("[1, 2, 3]").unwrap(),
            ordered: true,
            abs_tol: None,
        };
        let w = wrong_answer("answer = [1, 2, 3]", &l).unwrap();
        assert_eq!(last_line(&w.code), "answer = [3, 2, 1]");
        let set = Expected::List {
            values: serde_json::from_str(r#"["a", "b"]"#).unwrap(),
            ordered: false,
            abs_tol: None,
        };
        let w = wrong_answer("answer = ['b', 'a']", &set).unwrap();
        assert_eq!(last_line(&w.code), "answer = [\"a\"]");
        let one = Expected::List {
            values: serde_json::from_str("[true]").unwrap(),
            ordered: false,
            abs_tol: None,
        };
        let w = wrong_answer("answer = [True]", &one).unwrap();
        assert_eq!(last_line(&w.code), "answer = [0]");
    }

    #[test]
    fn multi_answers_print_wrong_parts() {
        let multi: Expected = serde_json::from_value(serde_json::json!({
            "type": "multi",
            "answers": {
                "region": {"type": "text", "value": "East"},
                "growth_pct": {"type": "number", "value": 16.86, "abs_tol": 0.005}
            }
        }))
        .unwrap();
        let reference = "print('@region[East]')\nprint('@growth_pct[16.86]')";
        let w = wrong_answer(reference, &multi).unwrap();
        assert!(
            w.code.contains("print(\"@region[East North]\")"),
            "{}",
            w.code
        );
        assert!(
            w.code.contains("print(\"@growth_pct[17.86]\")"),
            "{}",
            w.code
        );
        assert!(!w.code.contains("answer ="), "{}", w.code);
        // With `answer` in the reference, `answer` is replaced too.
        let w = wrong_answer("answer = 'x'\nprint('@region[East]')", &multi).unwrap();
        assert!(
            w.code
                .contains("answer = {\"growth_pct\": 17.86, \"region\": \"East North\"}"),
            "{}",
            w.code
        );
    }

    /// Every built-in task has a wrong variant the checker parses and
    /// rejects.
    #[test]
    fn every_builtin_task_has_a_wrong_answer() {
        let datasets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets");
        let mut n = 0;
        for suite in ["math", "tabular", "packages", "resource"] {
            for t in crate::task::load::load_suite(suite, &datasets).unwrap() {
                let reference = t.reference.as_deref().unwrap();
                let w = wrong_answer(reference, &t.expected);
                assert!(w.is_some(), "{}: {:?}", t.id, t.expected);
                n += 1;
            }
        }
        assert!(n >= 150, "{n}");
    }
}
