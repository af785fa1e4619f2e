//! Hostile inputs of the text area: what a kernel sends that is not valid
//! Unicode (class 7), code too large to run (class 12) and code that
//! nests past the masking check's parser (class 13). Each case is a
//! `retrace run` whose model replays the given code (`replay:`), checked
//! in the run directory's `results.jsonl`.

use std::path::PathBuf;

use retrace::pyenv::ImageName;
use serde_json::{json, Value};

use super::{records, run_case, write_suite};
use crate::common;

/// A one-task suite asking for 42, whose model replies `codes` (one per
/// round, each in a python block), run for `codes.len()` rounds; the
/// records of the run.
fn replayed(case: &str, codes: &[&str]) -> (Vec<Value>, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        "tasks.jsonl",
        &[json!({
            "id": "t",
            "question": "What is 6 * 7?",
            "expected": {"type": "number", "value": 42.0},
            "reference": "answer = 6 * 7\n",
        })],
    );
    let replies: Vec<Value> = codes
        .iter()
        .enumerate()
        .map(|(round, code)| {
            json!({"task_id": "t", "round": round, "reply": format!("```python\n{code}\n```")})
        })
        .collect();
    let replay = write_suite(dir.path(), "replies.jsonl", &replies);
    let out = dir.path().join("run");
    let rounds = (codes.len() - 1).to_string();
    let ran = run_case(
        case,
        common::retrace([
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--model",
            &format!("replay:{}", replay.display()),
            "--rounds",
            &rounds,
            "--stop-on",
            "never",
            "--out",
            out.to_str().unwrap(),
        ])
        .image(ImageName::Fat),
    );
    assert!(ran.success(), "{ran}");
    (records(&out), out, dir)
}

#[test]
fn text_lone_surrogate_in_stdout_is_kept_and_no_earlier_line_is_the_answer() {
    // The flush holding the surrogate was lost, and the earlier `42` was
    // read as the answer (and scored correct).
    if common::lacks_root() {
        return;
    }
    let code = "import sys\nprint('42')\nsys.stdout.flush()\nprint('x\\udcff')\nprint('ok\\ud800')";
    let (records, _, _dir) = replayed("text/lone_surrogate_in_stdout", &[code]);
    let outcome = &records[0]["outcome"];
    assert_eq!(outcome["verdict"], "ok", "{outcome}");
    assert_eq!(
        outcome["stdout"], "42\nx\u{FFFD}\nok\u{FFFD}\n",
        "{outcome}"
    );
    assert_eq!(outcome["text_replacements"], 2, "{outcome}");
    assert_eq!(outcome["answer"]["value"], "ok\u{FFFD}", "{outcome}");
    assert_eq!(outcome["answer"]["rule"], "last_stdout_line");
    assert_eq!(records[0]["correct"], false, "a garbled line is not 42");
}

#[test]
fn text_lone_surrogate_in_answer_is_read_never_no_answer() {
    // The reader's report failed to parse: the answer was lost with no
    // reason, and the printed `42` scored instead.
    if common::lacks_root() {
        return;
    }
    let code = "print('42')\nanswer = '42\\ud800'";
    let (records, _, _dir) = replayed("text/lone_surrogate_in_answer", &[code]);
    let outcome = &records[0]["outcome"];
    let answer = &outcome["answer"];
    assert_eq!(answer["rule"], "answer_variable", "{outcome}");
    assert_eq!(answer["value"], "'42\u{FFFD}'", "{outcome}");
    assert_eq!(outcome["text_replacements"], 1, "{outcome}");
    assert_eq!(records[0]["answered"], true);
    assert_eq!(records[0]["correct"], false, "{}", records[0]["check"]);
}

#[test]
fn code_too_large_is_refused_before_it_runs() {
    // 4 MiB + 1 of code was killed as output_limit with nothing printed
    // (the kernel's echo of the code was past the message cap).
    if common::lacks_root() {
        return;
    }
    let head = "open('ran.txt', 'w').write('x')\nprint('ran')\n";
    // 4 MiB + 1 as extracted (the block's code ends with its newline).
    let size = (4 << 20) + 1;
    let big = format!("{head}{}", "#".repeat(size - 1 - head.len()));
    let check = "import os\nprint(os.path.exists('ran.txt'))\nanswer = 42";
    let (records, _, _dir) = replayed("code/too_large", &[&big, check]);
    let code = records[0]["code"].as_str().unwrap_or_default();
    assert_eq!(code.len(), size);
    let refused = &records[0]["outcome"];
    assert_eq!(
        refused["verdict"], "code_too_large",
        "{}",
        refused["verdict"]
    );
    assert_eq!(refused["code_too_large"]["bytes"], size);
    assert_eq!(refused["code_too_large"]["limit"], 1 << 20);
    assert_eq!(refused["stdout"], "");
    assert_eq!(records[0]["feedback_kind"], "error");
    let prompt = records[1]["prompt"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        prompt
            .contains("Your code is 4194305 bytes, 3145729 bytes over the limit of 1048576 bytes"),
        "{prompt}"
    );
    // The kernel never ran it: no file, and its state was kept.
    assert_eq!(records[1]["outcome"]["stdout"], "False\n");
    assert_eq!(records[1]["outcome"]["state_lost"], false);
}

#[test]
fn masking_check_on_deeply_nested_code_records_why_it_was_not_checked() {
    // The checker's parser raised on the repair's nesting and the round
    // was recorded "not checked" without a reason.
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Slim);
    let nested = format!("answer = {}42{}", "(".repeat(100_000), ")".repeat(100_000));
    let (records, out, _dir) =
        replayed("masking/deeply_nested_repair", &["answer = 1 / 0", &nested]);
    assert_eq!(records[0]["outcome"]["verdict"], "error");
    let repair = &records[1];
    assert!(repair.get("masking").is_none(), "{}", repair["masking"]);
    let why = &repair["masking_unchecked"];
    assert_eq!(why["reason"], "parser_limit", "{why}");
    let detail = why["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("SyntaxError"), "{why}");
    assert!(detail.chars().count() <= 303, "{why}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["masking_unchecked"],
        json!({"parser_limit": 1}),
        "{}",
        summary["masking_unchecked"]
    );
}
