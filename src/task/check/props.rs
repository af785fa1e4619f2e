//! Properties of the answer checkers: any text is judged without a panic
//! in linear time, and a value serialised as the kernel serialises it
//! (Python's repr, or the JSON beside it) gets the verdict of the value.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::util::props::{hostile_text, megabyte_of, within_bound};

/// A plain value as `probe.py` reads it.
#[derive(Debug, Clone)]
enum Py {
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Py>),
}

/// `float.__repr__`: the shortest round-trip digits, positional for
/// exponents -4..16, else `d.ddde+XX`.
fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if x == 0.0 || (-4..16).contains(&exp) {
        let fixed = format!("{x}");
        return if fixed.contains('.') {
            fixed
        } else {
            fixed + ".0"
        };
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// `str.__repr__` for the characters generated here.
fn str_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

impl Py {
    /// The answer text `probe.py` sends.
    fn repr(&self) -> String {
        match self {
            Py::Int(n) => n.to_string(),
            Py::Float(x) => float_repr(*x),
            Py::Str(s) => str_repr(s),
            Py::List(items) => {
                let items: Vec<String> = items.iter().map(Py::repr).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    /// The JSON `probe.py` sends beside it.
    fn json(&self) -> Value {
        match self {
            Py::Int(n) => json!(n),
            Py::Float(x) => json!(x),
            Py::Str(s) => json!(s),
            Py::List(items) => Value::Array(items.iter().map(Py::json).collect()),
        }
    }
}

fn word() -> impl Strategy<Value = String> {
    // Letters, digits, quotes, a backslash, inner whitespace; no brackets or
    // presentation marks, which the checker peels from texts on purpose.
    "[a-zA-Z0-9é][a-zA-Z0-9é '\"\\\\\t\n-]{0,12}[a-zA-Z0-9é]"
}

fn scalar() -> impl Strategy<Value = Py> {
    prop_oneof![
        (-(1i64 << 52)..(1i64 << 52)).prop_map(Py::Int),
        (-1e12f64..1e12).prop_map(Py::Float),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Py::Float),
        word().prop_map(Py::Str),
    ]
}

fn expected_of(v: &Py) -> Expected {
    match v {
        Py::Int(n) => num_expected(*n as f64, None),
        Py::Float(x) => num_expected(*x, None),
        Py::Str(s) => Expected::Text {
            value: s.clone(),
            case_sensitive: true,
        },
        Py::List(items) => Expected::List {
            values: items.iter().map(Py::json).collect(),
            ordered: true,
            abs_tol: None,
        },
    }
}

fn num_expected(value: f64, abs_tol: Option<f64>) -> Expected {
    Expected::Number {
        value,
        abs_tol,
        rel_tol: None,
        allow_percent: false,
        exact: None,
    }
}

/// The parts of a verdict that must not depend on the serialisation.
fn verdict(c: &Check) -> (bool, bool, Option<String>) {
    (c.correct, c.parsed, c.normalized.clone())
}

fn any_expected() -> impl Strategy<Value = Expected> {
    let tol = proptest::option::of(0.0f64..10.0);
    let leaf = prop_oneof![
        (
            any::<f64>(),
            tol.clone(),
            tol.clone(),
            any::<bool>(),
            proptest::option::of("-?[0-9]{1,30}")
        )
            .prop_map(
                |(value, abs_tol, rel_tol, allow_percent, exact)| Expected::Number {
                    value,
                    abs_tol,
                    rel_tol,
                    allow_percent,
                    exact,
                }
            ),
        (hostile_text(6), any::<bool>()).prop_map(|(value, case_sensitive)| Expected::Text {
            value,
            case_sensitive
        }),
        (
            proptest::collection::vec(scalar(), 0..5),
            any::<bool>(),
            tol
        )
            .prop_map(|(items, ordered, abs_tol)| Expected::List {
                values: items.iter().map(Py::json).collect(),
                ordered,
                abs_tol,
            }),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        proptest::collection::btree_map("[a-z]{1,4}", inner, 1..4)
            .prop_map(|answers| Expected::Multi { answers })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_answer_is_judged(
        expected in any_expected(),
        answer in proptest::option::of(hostile_text(30)),
        stdout in hostile_text(30),
    ) {
        let c = check(&expected, answer.as_deref(), &stdout);
        prop_assert!(!c.correct || c.parsed, "correct but not parsed: {c:?}");
    }

    #[test]
    fn a_value_as_the_kernel_writes_it_is_right(v in prop_oneof![
        scalar(),
        proptest::collection::vec(scalar(), 0..6).prop_map(Py::List),
    ]) {
        let expected = expected_of(&v);
        let from_repr = check(&expected, Some(&v.repr()), "");
        prop_assert!(from_repr.correct, "{} -> {from_repr:?}", v.repr());
        let from_json = check(&expected, Some(&v.json().to_string()), "");
        prop_assert_eq!(verdict(&from_repr), verdict(&from_json));
    }

    #[test]
    fn a_number_is_judged_by_its_distance_whatever_its_form(
        want in -1e9f64..1e9,
        got in -1e9f64..1e9,
        tol in 0.0f64..1e3,
    ) {
        let expected = num_expected(want, Some(tol));
        let c = check(&expected, Some(&float_repr(got)), "");
        prop_assert_eq!(c.correct, (want - got).abs() <= tol);
        for form in [
            format!("np.float64({})", float_repr(got)),
            json!(got).to_string(),
            format!("[{}]", float_repr(got)),
        ] {
            prop_assert_eq!(verdict(&check(&expected, Some(&form), "")), verdict(&c), "{}", form);
        }
    }

    #[test]
    fn a_big_integer_is_compared_digit_by_digit(n in (1i128 << 53)..(1i128 << 100)) {
        let expected = Expected::Number {
            value: n as f64,
            abs_tol: None,
            rel_tol: None,
            allow_percent: false,
            exact: Some(n.to_string()),
        };
        prop_assert!(check(&expected, Some(&n.to_string()), "").correct);
        prop_assert!(!check(&expected, Some(&(n + 1).to_string()), "").correct);
    }

    #[test]
    fn a_dict_of_named_parts_is_right(
        parts in proptest::collection::btree_map("[a-z]{1,6}", scalar(), 1..5),
    ) {
        let answers: BTreeMap<String, Expected> =
            parts.iter().map(|(k, v)| (k.clone(), expected_of(v))).collect();
        let expected = Expected::Multi { answers };
        let entries: Vec<String> = parts
            .iter()
            .map(|(k, v)| format!("{}: {}", str_repr(&format!("@{k}")), v.repr()))
            .collect();
        let text = format!("{{{}}}", entries.join(", "));
        let c = check(&expected, Some(&text), "");
        prop_assert!(c.correct, "{text} -> {c:?}");
    }
}

#[test]
fn a_megabyte_answer_is_judged_in_linear_time() {
    let list = Expected::List {
        values: vec![json!(1)],
        ordered: false,
        abs_tol: None,
    };
    let multi = Expected::Multi {
        answers: [("a".to_string(), num_expected(1.0, None))].into(),
    };
    let expectations = [num_expected(1.0, None), list, multi];
    for answer in [
        megabyte_of("["),
        megabyte_of("[1, "),
        megabyte_of("@a["),
        megabyte_of("@a[1]"),
        megabyte_of("float("),
        megabyte_of("'a', "),
        megabyte_of("**"),
        megabyte_of("1,234"),
        megabyte_of("x = 1 "),
        format!("{}1{}", "([".repeat(1 << 18), "])".repeat(1 << 18)),
    ] {
        for expected in &expectations {
            within_bound("check", &answer, |a| check(expected, Some(a), a));
        }
    }
}

#[test]
fn a_megabyte_of_unclosed_tags_is_read_in_linear_time() {
    // Found by the megabyte property: every `@name[` scanned to the end of
    // its line for its `]` (quadratic; hours on a megabyte of stdout).
    let text = megabyte_of("@a[") + "@b[1]";
    let tagged = within_bound("find_tagged", &text, find_tagged);
    assert_eq!(tagged, [("b".to_string(), "1".to_string())]);
    assert_eq!(
        find_tagged("@a[[1, 2]] @b[x\n] @c[@d[3]]"),
        [("a".into(), "[1, 2]".into()), ("c".into(), "@d[3]".into())]
    );
}

#[test]
fn deep_nesting_is_refused_in_linear_time_and_real_depths_still_parse() {
    // Found by the megabyte property: each level of `[[[…` re-read the
    // rest of the text and recursed (quadratic, then a stack overflow).
    let list = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let deep = list(300_000);
    let c = within_bound("check", &deep, |a| {
        check(&num_expected(1.0, None), Some(a), "")
    });
    assert!(!c.correct);
    // Sixteen levels, as deep as the kernel writes, inside a wrapper.
    let mut want = json!(1);
    for _ in 0..15 {
        want = json!([want]);
    }
    let expected = Expected::List {
        values: vec![want],
        ordered: true,
        abs_tol: None,
    };
    let answer = format!("array({})", list(16));
    assert!(check(&expected, Some(&answer), "").correct);
}

#[test]
fn a_one_string_list_with_both_quotes_and_spaces_is_one_string() {
    // Found by the repr property: numpy's `[a b]` split read `\'` as the
    // end of the string and cut it at its spaces.
    let expected = Expected::List {
        values: vec![json!("it's \"x\" y")],
        ordered: true,
        abs_tol: None,
    };
    for answer in [r#"['it\'s "x" y']"#, r#"["it's \"x\" y"]"#] {
        let c = check(&expected, Some(answer), "");
        assert!(c.correct, "{answer}: {c:?}");
    }
}
