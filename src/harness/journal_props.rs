//! Properties of the journal: a record written and read back is equal, and
//! a damaged line is named by file and line.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::kernel::{Answer, ErrorInfo, Outcome};
use crate::record::SCHEMA_VERSION;
use crate::repair::extract::extract_code;
use crate::sandbox::Verdict;
use crate::task::check::check;
use crate::task::Expected;
use crate::util::props::{hostile_lines, hostile_text};

/// What a round may carry from a model and a kernel, all of it generated.
#[derive(Debug, Clone)]
struct Round {
    task_id: String,
    reply: String,
    stdout: String,
    error: Option<(String, String, Vec<String>)>,
    answer: Option<(String, Option<serde_json::Value>)>,
    times: (f64, f64),
}

fn round() -> impl Strategy<Value = Round> {
    let error = proptest::option::of((
        hostile_text(4),
        hostile_text(10),
        proptest::collection::vec(hostile_lines(3), 0..4),
    ));
    let json = prop_oneof![
        Just(None),
        Just(Some(serde_json::Value::Null)),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| Some(json!(x))),
        hostile_text(5).prop_map(|s| Some(json!([s, 1, {"k": null}]))),
    ];
    (
        hostile_text(6),
        hostile_lines(10),
        hostile_lines(5),
        error,
        proptest::option::of((hostile_text(8), json)),
        (0.0f64..1e9, 0.0f64..1e9),
    )
        .prop_map(|(task_id, reply, stdout, error, answer, times)| Round {
            task_id,
            reply,
            stdout,
            error,
            answer,
            times,
        })
}

fn record(r: &Round) -> AttemptRecord {
    let mut rec: AttemptRecord = serde_json::from_value(json!({
        "schema_version": SCHEMA_VERSION, "run_id": "t", "task_id": r.task_id,
        "round": 0, "model": "m", "synthetic_model": false, "strategy": "fat",
        "stop_on": "clean", "feedback": "parsed", "kind": "attempt",
        "prompt": [], "reply": r.reply, "extraction": null, "code": null,
        "outcome": null, "check": null, "correct": false, "answered": false,
        "stop": null, "infra_error": null,
        "timings_ms": {"model": r.times.0, "exec": r.times.1, "total": r.times.0 + r.times.1},
        "tokens": {"prompt_tokens": 1, "completion_tokens": 2}
    }))
    .expect("a record");
    let extraction = extract_code(&r.reply);
    rec.code = extraction.code.clone();
    rec.extraction = Some(extraction);
    let mut outcome = Outcome::ended(Verdict::Ok, r.times.1);
    outcome.stdout = r.stdout.clone();
    outcome.error = r.error.clone().map(|(ename, evalue, traceback)| ErrorInfo {
        ename,
        evalue,
        traceback,
    });
    outcome.answer = r.answer.clone().map(|(value, json)| {
        serde_json::from_value::<Answer>(json!({"value": value, "rule": "answer_variable"}))
            .map(|mut a| {
                a.json = json;
                a
            })
            .expect("an answer")
    });
    if let Some(a) = &outcome.answer {
        let expected = Expected::Text {
            value: "x".into(),
            case_sensitive: false,
        };
        rec.check = Some(check(&expected, Some(&a.value), &r.stdout));
    }
    rec.outcome = Some(outcome);
    rec
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn records_come_back_from_the_journal_equal(rounds in proptest::collection::vec(round(), 1..6)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let journal = Journal::open(&path).unwrap();
        let records: Vec<AttemptRecord> = rounds.iter().map(record).collect();
        for r in &records {
            journal.append(r).unwrap();
        }
        prop_assert_eq!(read(&path).unwrap(), records);
    }

    #[test]
    fn a_damaged_line_is_named(rounds in proptest::collection::vec(round(), 2..5), bad in hostile_text(20)) {
        prop_assume!(serde_json::from_str::<AttemptRecord>(&bad).is_err() && !bad.trim().is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut text = String::new();
        for (i, r) in rounds.iter().enumerate() {
            let line = if i == 0 { bad.replace(['\n', '\r'], " ") } else { serde_json::to_string(&record(r)).unwrap() };
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        match read(&path) {
            Err(HarnessError::JournalLine { path: p, line, .. }) => {
                prop_assert_eq!(p, path);
                prop_assert_eq!(line, 1);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }
}
