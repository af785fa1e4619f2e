//! Properties of what is decoded from a kernel's messages: the reader's
//! report and the answer chosen from it, and captured streams.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::capture::{Capture, OutputCap, Stream};
use super::outcome::{choose_answer, AnswerRule, Bundle, ProbeReport, ENVELOPE_PREFIX};
use crate::util::props::{hostile_lines, hostile_text, megabyte_of, within_bound};

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        hostile_text(6).prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(hostile_text(3), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn bundle(text: &str) -> Bundle {
    let mut data = Map::new();
    data.insert("text/plain".into(), Value::String(text.into()));
    Bundle { data }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_reader_text_is_decoded_or_refused(
        text in prop_oneof![
            hostile_text(30),
            json_value().prop_map(|v| format!("{ENVELOPE_PREFIX}{v}")),
        ],
        stdout in hostile_lines(5),
    ) {
        let report = ProbeReport::parse(&text);
        if let Some(a) = choose_answer(report, &[bundle(&text)], &stdout) {
            // Whatever was chosen, an unsupported value has nothing to check.
            prop_assert_eq!(a.checkable().is_none(), a.unsupported.is_some());
        }
    }

    #[test]
    fn a_value_the_reader_sent_is_the_answer(
        text in hostile_text(20),
        value in json_value(),
        type_name in hostile_text(4),
        variable in any::<bool>(),
    ) {
        let read = json!({"ok": true, "type": type_name, "text": text, "json": value});
        let slot = if variable { "variable" } else { "result" };
        let envelope = format!("{ENVELOPE_PREFIX}{}", json!({"armed": true, slot: read}));
        let a = choose_answer(ProbeReport::parse(&envelope), &[], "ignored\n").unwrap();
        prop_assert_eq!(a.value, text);
        prop_assert_eq!(a.json, Some(value));
        prop_assert_eq!(a.type_name, Some(type_name));
        let rule = if variable { AnswerRule::AnswerVariable } else { AnswerRule::LastResult };
        prop_assert_eq!(a.rule, rule);
    }

    #[test]
    fn captured_streams_stay_within_the_cap_and_are_whole_below_it(
        pushes in proptest::collection::vec((any::<bool>(), hostile_text(40)), 0..40),
        bytes in 0u64..4096,
        messages in 1u64..50,
    ) {
        let cap = OutputCap { bytes, messages };
        let mut c = Capture::new(cap);
        let mut out = String::new();
        for (to_stdout, text) in &pushes {
            if *to_stdout {
                out.push_str(text);
                c.push_stream(Stream::Stdout, text);
            } else {
                c.push_stream(Stream::Stderr, text);
            }
        }
        let stdout = c.stdout();
        // The head, the tail and the line saying how much went between.
        prop_assert!(stdout.len() as u64 <= bytes / 2 + bytes / 4 + 64, "{}", stdout.len());
        let all: u64 = pushes.iter().map(|(_, t)| t.len() as u64).sum();
        if all <= bytes / 2 && pushes.len() as u64 <= messages {
            prop_assert_eq!(stdout, out);
            prop_assert!(!c.truncation().truncated);
        }
    }
}

#[test]
fn a_megabyte_from_the_reader_is_decoded_in_linear_time() {
    for text in [
        format!("{ENVELOPE_PREFIX}{}", megabyte_of("[")),
        format!(
            "{ENVELOPE_PREFIX}{{\"armed\":true,\"variable\":{{\"ok\":true,\"type\":\"str\",\"text\":\"{}\"}}}}",
            megabyte_of("\\u00e9")
        ),
        megabyte_of("retrace:"),
    ] {
        within_bound("choose_answer", &text, |t| {
            choose_answer(ProbeReport::parse(t), &[], t)
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_names_of_a_line_are_identifiers_in_it(line in hostile_text(40)) {
        let names = super::names_in_line(&line);
        for name in &names {
            prop_assert!(line.contains(name.as_str()), "{name} not in {line:?}");
            prop_assert!(name.chars().all(|c| c.is_alphanumeric() || c == '_'), "{}", name);
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), names.len(), "each name once");
    }
}

#[test]
fn a_megabyte_line_of_names_is_read_in_linear_time() {
    let distinct: String = (0..120_000).map(|i| format!("v{i}, ")).collect();
    for line in [
        distinct,
        megabyte_of("a "),
        megabyte_of("f(x="),
        megabyte_of("'''"),
        megabyte_of("x.y."),
    ] {
        within_bound("names_in_line", &line, super::names_in_line);
    }
}

#[test]
fn a_line_of_many_distinct_names_is_read_once_each_in_linear_time() {
    // Found by the megabyte property: each name was looked for in the list
    // of those already found (quadratic on a long line of distinct names).
    let line: String = (0..100_000).map(|i| format!("v{i} + v{i}, ")).collect();
    let names = within_bound("names_in_line", &line, super::names_in_line);
    assert_eq!(names.len(), 100_000);
    assert_eq!(
        (names[0].as_str(), names[99_999].as_str()),
        ("v0", "v99999")
    );
}
