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

/// A number as models write one: sign, currency, thousands separators,
/// cents, percent; its text and value (percent as written).
fn written_number() -> impl Strategy<Value = (String, f64, bool)> {
    (
        0u64..10_000_000,
        proptest::option::of(0u64..100),
        any::<bool>(),
        prop_oneof![Just(""), Just("$"), Just("€"), Just("£")],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(whole, cents, negative, currency, grouped, percent)| {
            let percent = percent && currency.is_empty();
            let digits = whole.to_string();
            let int_part = if grouped {
                let mut groups: Vec<&str> = Vec::new();
                let mut end = digits.len();
                while end > 3 {
                    groups.push(&digits[end - 3..end]);
                    end -= 3;
                }
                groups.push(&digits[..end]);
                groups.reverse();
                groups.join(",")
            } else {
                digits
            };
            let mut text = format!("{}{currency}{int_part}", if negative { "-" } else { "" });
            let mut value = whole as f64;
            if let Some(c) = cents {
                text.push_str(&format!(".{c:02}"));
                value += c as f64 / 100.0;
            }
            if percent {
                text.push('%');
            }
            (text, if negative { -value } else { value }, percent)
        })
}

/// Words around a number: none hold a digit or an `=`.
fn filler(max: usize) -> impl Strategy<Value = Vec<&'static str>> {
    const WORDS: [&str; 18] = [
        "The",
        "answer",
        "is",
        "so",
        "she",
        "has",
        "in",
        "total",
        "about",
        "Therefore,",
        "we",
        "get",
        "Total:",
        "result",
        "left",
        "(rounded)",
        "**",
        "overall",
    ];
    proptest::collection::vec(proptest::sample::select(&WORDS[..]), 0..=max)
}

/// A unit after a number: apart, written onto it, or none.
fn unit() -> impl Strategy<Value = String> {
    const UNITS: [&str; 9] = [
        "weeks",
        "hours",
        "dollars",
        "gallons",
        "kg",
        "apples",
        "miles per hour",
        "cm",
        "eggs",
    ];
    (proptest::sample::select(&UNITS[..]), 0..3u8).prop_map(|(unit, how)| match how {
        0 => String::new(),
        1 => format!(" {unit}"),
        _ => unit.split(' ').next().unwrap_or(unit).to_string(),
    })
}

fn sentence(parts: &[String]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_sole_number_is_read_whatever_its_format_units_and_words(
        (number, value, percent) in written_number(),
        unit in unit(),
        before in filler(6),
        after in filler(3),
        end in prop_oneof![Just(""), Just("."), Just("!"), Just(",")],
    ) {
        let text = sentence(&[before.join(" "), number + &unit, after.join(" ")]) + end;
        match number_reading::read_number(&text) {
            number_reading::Reading::Read { num, .. } => {
                prop_assert!((num.value - value).abs() < 1e-9, "{text:?} read as {}", num.value);
                prop_assert_eq!(num.percent, percent, "{}", text);
            }
            other => prop_assert!(false, "{text:?} -> {other:?}"),
        }
    }

    #[test]
    fn two_different_numbers_are_ambiguous(
        (first, a, a_percent) in written_number(),
        (second, b, b_percent) in written_number(),
        units in (unit(), unit()),
        words in (filler(4), filler(3), filler(3)),
    ) {
        prop_assume!(a != b || a_percent != b_percent);
        let text = sentence(&[
            words.0.join(" "),
            first + &units.0,
            words.1.join(" "),
            second + &units.1,
            words.2.join(" "),
        ]);
        let reading = number_reading::read_number(&text);
        prop_assert_eq!(&reading, &number_reading::Reading::Ambiguous, "{}", text);
        let c = check(&num_expected(a, None), Some(&text), "");
        prop_assert_eq!((c.correct, c.parsed, c.rule.as_str()), (false, false, "number:ambiguous"));
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
    // Too deep for a literal: read as text, whose only number it is.
    assert_eq!(c.rule, "number:unit:abs_tol");
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
