//! List answers: ordered lists and unordered sets of numbers, strings and
//! nested lists, matched element by element within a tolerance.

use serde_json::Value;

use super::literal::{parse_literal, split_top_level, Lit};
use super::presentation::unwrap_value;
use super::text::normalize_text;
use super::{parse_number_literal, Judged, F64_EXACT_INT};

pub(super) fn judge_list(values: &[Value], ordered: bool, tol: f64, answer: &str) -> Judged {
    let s = unwrap_value(answer);
    let (items, bare) = match parse_literal(&s) {
        Some(Lit::List(items)) => (items, false),
        _ => {
            // A bare `1, 2, 3` / `a, b`.
            let parts = split_top_level(&s, ',');
            let items = (parts.len() > 1)
                .then(|| {
                    parts
                        .iter()
                        .map(|p| parse_literal(p))
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            match items {
                Some(items) => (items, true),
                None => return Judged::failed("list:unparsed".into(), Some(tol)),
            }
        }
    };
    let prefix = if bare { "list:bare" } else { "list" };
    let mut rendered: Vec<String> = items.iter().map(Lit::render).collect();
    if !ordered {
        rendered.sort();
    }
    let normalized = format!("[{}]", rendered.join(", "));
    let (correct, how) = if items.len() != values.len() {
        (false, "length_mismatch")
    } else if ordered {
        let ok = values.iter().zip(&items).all(|(v, l)| lit_eq(v, l, tol));
        (ok, if ok { "ordered" } else { "mismatch" })
    } else {
        let ok = multiset_match(values, &items, tol);
        (ok, if ok { "unordered" } else { "mismatch" })
    };
    Judged {
        correct,
        parsed: true,
        extracted: Some(s),
        normalized: Some(normalized),
        rule: format!("{prefix}:{how}"),
        tolerance: Some(tol),
    }
}

/// One expected JSON value against one parsed element.
fn lit_eq(want: &Value, got: &Lit, tol: f64) -> bool {
    let num_eq = |a: f64, b: f64| a == b || (a - b).abs() <= tol;
    match (want, got) {
        (Value::Number(w), Lit::Num(_, n)) => {
            let big_int = w.is_u64() || w.is_i64();
            match (&n.int_digits, big_int) {
                (Some(d), true) if w.as_f64().is_some_and(|f| f.abs() >= F64_EXACT_INT) => {
                    *d == w.to_string()
                }
                _ => w.as_f64().is_some_and(|w| num_eq(w, n.value)),
            }
        }
        (Value::Number(w), Lit::Str(s)) => parse_number_literal(s)
            .zip(w.as_f64())
            .is_some_and(|(n, w)| num_eq(w, n.value)),
        (Value::String(w), Lit::Num(_, n)) => {
            parse_number_literal(w).is_some_and(|w| num_eq(w.value, n.value))
        }
        (Value::String(w), Lit::Str(s)) => normalize_text(w, false) == normalize_text(s, false),
        (Value::Bool(w), Lit::Bool(b)) => w == b,
        (Value::Null, Lit::None) => true,
        (Value::Array(ws), Lit::List(ls)) => {
            ws.len() == ls.len() && ws.iter().zip(ls).all(|(w, l)| lit_eq(w, l, tol))
        }
        _ => false,
    }
}

/// A perfect matching between expected values and elements (Kuhn's
/// augmenting paths; tolerant equality is not transitive, so sorting
/// would not do).
fn multiset_match(values: &[Value], items: &[Lit], tol: f64) -> bool {
    let n = values.len();
    let adj: Vec<Vec<usize>> = values
        .iter()
        .map(|v| (0..n).filter(|&j| lit_eq(v, &items[j], tol)).collect())
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    fn augment(
        i: usize,
        adj: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &j in &adj[i] {
            if seen[j] {
                continue;
            }
            seen[j] = true;
            if owner[j].is_none_or(|k| augment(k, adj, seen, owner)) {
                owner[j] = Some(i);
                return true;
            }
        }
        false
    }
    (0..n).all(|i| augment(i, &adj, &mut vec![false; n], &mut owner))
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use super::super::fixtures::{list, run_table};

    #[test]
    fn list_table() {
        let nums = || list(serde_json::json!([1, 2, 3]), true);
        let set = || list(serde_json::json!(["a", "b"]), false);
        let floats = || list(serde_json::json!([1.5, 2.25]), false);
        run_table(vec![
            (
                nums(),
                "[1, 2, 3]",
                true,
                true,
                "list:ordered",
                Some("[1, 2, 3]"),
            ),
            (nums(), "(1, 2, 3)", true, true, "list:ordered", None),
            (nums(), "array([1, 2, 3])", true, true, "list:ordered", None),
            (
                nums(),
                "array([1., 2., 3.])",
                true,
                true,
                "list:ordered",
                None,
            ),
            (
                nums(),
                "array([1, 2, 3], dtype=int32)",
                true,
                true,
                "list:ordered",
                None,
            ),
            (
                nums(),
                "[np.int64(1), np.int64(2), np.int64(3)]",
                true,
                true,
                "list:ordered",
                None,
            ),
            (nums(), "[1 2 3]", true, true, "list:ordered", None),
            (nums(), "1, 2, 3", true, true, "list:bare:ordered", None),
            (nums(), "[3, 2, 1]", false, true, "list:mismatch", None),
            (nums(), "[1, 2]", false, true, "list:length_mismatch", None),
            (
                nums(),
                "[1, 2, 3, ...]",
                false,
                false,
                "list:unparsed",
                None,
            ),
            (nums(), "{'a': 1}", false, false, "list:unparsed", None),
            (
                set(),
                "{'b', 'a'}",
                true,
                true,
                "list:unordered",
                Some("[\"a\", \"b\"]"),
            ),
            (set(), "['B', 'a']", true, true, "list:unordered", None),
            (
                set(),
                "Index(['a', 'b'], dtype='object')",
                true,
                true,
                "list:unordered",
                None,
            ),
            (
                set(),
                "array(['b', 'a'], dtype='<U1')",
                true,
                true,
                "list:unordered",
                None,
            ),
            (
                set(),
                "frozenset({'a', 'b'})",
                true,
                true,
                "list:unordered",
                None,
            ),
            (set(), "['a', 'a']", false, true, "list:mismatch", None),
            (
                set(),
                "['a', 'b', 'c']",
                false,
                true,
                "list:length_mismatch",
                None,
            ),
            (
                floats(),
                "[2.2500001, 1.5]",
                true,
                true,
                "list:unordered",
                None,
            ),
            (floats(), "[2.26, 1.5]", false, true, "list:mismatch", None),
            (
                floats(),
                "[np.float64(1.5), np.float64(2.25)]",
                true,
                true,
                "list:unordered",
                None,
            ),
        ]);
        let pairs = list(serde_json::json!([[1, "x"], [2, "y"]]), true);
        let c = check(&pairs, Some("[(1, 'x'), (2, 'y')]"), "");
        assert!(c.correct, "{c:?}");
    }
}
