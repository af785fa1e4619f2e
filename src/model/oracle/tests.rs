use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::fault::tests::{FUNCS, STATS, TABLE};
use super::*;
use crate::model::{Message, Role, REVIEW_MARKER};
use crate::repair::extract::extract_code;
use crate::repair::prompt::{TemplateName, Templates};
use crate::task::check::check;

/// The Python the unit tests run code with (Debian's, else the first on PATH).
pub(super) fn python() -> &'static str {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("-c")
                .arg("pass")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("these tests need a python3")
}

/// Runs `code` from a file (so tracebacks show the source lines) in `dir`.
fn run_file(dir: &Path, code: &str) -> Output {
    let file = dir.join("cell.py");
    std::fs::write(&file, code).unwrap();
    Command::new(python())
        .arg(&file)
        .current_dir(dir)
        .output()
        .expect("python runs")
}

fn task(id: &str, question: &str, reference: Option<&str>, expected: Expected) -> Task {
    Task {
        id: id.into(),
        question: question.into(),
        files: vec![],
        expected,
        reference: reference.map(str::to_string),
        packages: vec![],
        tags: vec![],
        published: None,
    }
}

fn number(value: f64) -> Expected {
    Expected::Number {
        value,
        abs_tol: Some(1e-3),
        rel_tol: None,
        allow_percent: false,
        exact: None,
    }
}

fn prompt(question: &str) -> String {
    Templates::default()
        .render(
            TemplateName::Task,
            &[
                ("question", question),
                ("files", "(none)"),
                ("packages", "the Python standard library only"),
            ],
        )
        .unwrap()
}

/// The conversation after `replies`, each followed by the user message
/// paired with it.
fn conversation(question: &str, turns: &[(&str, &str)]) -> ChatRequest {
    let mut messages = vec![
        Message::text(Role::System, "You write Python."),
        Message::text(Role::User, prompt(question)),
    ];
    for (reply, user) in turns {
        messages.push(Message::text(Role::Assistant, *reply));
        messages.push(Message::text(Role::User, *user));
    }
    ChatRequest {
        messages,
        round: turns.len() as u32,
        temperature: 0.0,
    }
}

const Q1: &str = "Compute a statistic of the values 3, 1, 4, 1, 5, 9, 2, 6.";
const Q2: &str = "Which question has no reference?";

fn stats_tasks() -> Vec<Task> {
    vec![
        task("t1", Q1, Some(STATS), number(6.0)),
        task("t2", Q2, None, number(1.0)),
    ]
}

#[tokio::test]
async fn oracle_replies() {
    let tasks = stats_tasks();
    let plain = Oracle::new(OracleKind::Reference, &tasks).unwrap();
    assert_eq!(plain.name(), "oracle");
    assert!(plain.is_synthetic());
    let r = plain.chat(&conversation(Q1, &[])).await.unwrap();
    assert!(r.text.contains(&format!("```python\n{STATS}```")));
    assert_eq!(r.fault, None);

    let faulty = Oracle::new(OracleKind::Faults, &tasks).unwrap();
    assert_eq!(faulty.name(), "oracle:faults");
    let r0 = faulty.chat(&conversation(Q1, &[])).await.unwrap();
    assert!(!r0.text.contains(STATS));
    let injected = inject_fault(STATS, "t1");
    assert_eq!(r0.fault.as_deref(), Some(injected.kind.as_str()));
    // Feedback with the exception and the failing line: repaired.
    let feedback = format!(
        "Your code failed.\n\n{}: boom\n\nline 3 of your code:\n--> 3 | {}\n",
        injected.kind.raises()[0],
        injected.lines[0]
    );
    let r1 = faulty
        .chat(&conversation(Q1, &[(&r0.text, &feedback)]))
        .await
        .unwrap();
    assert!(r1.text.contains(&format!("```python\n{STATS}```")));
    assert_eq!(r1.fault, None);

    for oracle in [&plain, &faulty] {
        match oracle.chat(&conversation(Q2, &[])).await {
            Err(ModelError::Config(m)) => assert!(m.contains("t2"), "{m}"),
            other => panic!("{other:?}"),
        }
        match oracle.chat(&conversation("an unknown question", &[])).await {
            Err(ModelError::UnknownTask(m)) => assert!(m.contains(&oracle.name()), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn review_prompts_are_kept_by_oracle_and_answered_by_wrong() {
    let tasks = stats_tasks();
    let review = format!("{REVIEW_MARKER} below. It ran cleanly.\nanswer = 6");
    let reference_reply = markdown(STATS);
    for kind in [OracleKind::Reference, OracleKind::Faults] {
        let oracle = Oracle::new(kind, &tasks).unwrap();
        let turn = oracle
            .respond(&conversation(Q1, &[(&reference_reply, &review)]))
            .unwrap();
        assert!(turn.text.contains(KEEP_TOKEN), "{kind:?}: {}", turn.text);
        assert_eq!(turn.code, None);
        // Without the marker at its start, a message is no review.
        let other = format!("Your code failed.\n{REVIEW_MARKER}");
        let turn = oracle
            .respond(&conversation(Q1, &[(&reference_reply, &other)]))
            .unwrap();
        assert_eq!(turn.code.as_deref(), Some(STATS), "{kind:?}");
    }
    let wrong = Oracle::new(OracleKind::Wrong, &tasks).unwrap();
    let r0 = wrong.respond(&conversation(Q1, &[])).unwrap();
    assert_ne!(r0.code.as_deref(), Some(STATS));
    assert!(r0.code.as_deref().unwrap().starts_with(STATS));
    for turns in 1..=3 {
        let history: Vec<(&str, &str)> = (0..turns)
            .map(|_| (r0.text.as_str(), review.as_str()))
            .collect();
        let turn = wrong.respond(&conversation(Q1, &history)).unwrap();
        assert_eq!(turn.code.as_deref(), Some(STATS));
        assert!(!turn.text.contains(KEEP_TOKEN));
    }
}

/// Round 1 of `oracle:faults` after `feedback`: repaired or not.
fn repaired_after(oracle: &Oracle, question: &str, feedback: &str) -> Turn {
    let r0 = oracle.respond(&conversation(question, &[])).unwrap();
    let turn = oracle
        .respond(&conversation(question, &[(&r0.text, feedback)]))
        .unwrap();
    if turn.fault.is_some() {
        // Not repaired: the same faulty code, as a weak model would.
        assert_eq!(turn.code, r0.code);
        assert_eq!(turn.fault, r0.fault);
        assert!(turn.note.starts_with("resent"), "{}", turn.note);
    }
    turn
}

/// The real contract of `oracle:faults`, with tracebacks from a real
/// Python: the full traceback gets a repair; the exception line alone, the
/// traceback without the exception's name, or nothing, get the faulty code
/// again.
#[test]
fn faults_repair_only_from_feedback_with_exception_and_line() {
    let extra = "import json\nimport os.path as p\nrecords = json.loads('[{\"k\": 1}, {\"k\": 2}]')\nks = [r['k'] for r in records]\nname = p.basename('/a/b.txt')\nanswer = ks[-1] + len(name) + records[0]['k']\n";
    let multiline = "values = [3, 1, 4]\ntotal = sum(\n    values\n)\nmean = round(total /\n    len(values), 2)\nanswer = mean\n";
    // Only the fallback (an undefined helper) applies to a bare constant.
    let bare = "answer = 42\n";
    let references = [STATS, TABLE, FUNCS, extra, multiline, bare];
    let dir = tempfile::tempdir().unwrap();
    let mut kinds = HashSet::new();
    let mut cases = 0;
    for (r, reference) in references.iter().enumerate() {
        assert!(
            run_file(dir.path(), reference).status.success(),
            "{reference}"
        );
        // Many ids, so every kind of fault each reference admits is drawn.
        let tasks: Vec<Task> = (0..24)
            .map(|i| {
                let q = format!("Reference {r}, variant {i}: compute the answer.");
                task(&format!("r{r}-{i}"), &q, Some(reference), number(0.0))
            })
            .collect();
        let oracle = Oracle::new(OracleKind::Faults, &tasks).unwrap();
        let mut seen = HashSet::new();
        for t in &tasks {
            let fault = inject_fault(reference, &t.id);
            if !seen.insert(fault.code.clone()) {
                continue;
            }
            cases += 1;
            kinds.insert(fault.kind);
            let out = run_file(dir.path(), &fault.code);
            assert!(!out.status.success(), "{:?} ran cleanly", fault.kind);
            let traceback = String::from_utf8_lossy(&out.stderr).into_owned();
            let full = format!("Your code failed.\n\n{traceback}");
            let turn = repaired_after(&oracle, &t.question, &full);
            assert_eq!(
                turn.code.as_deref(),
                Some(*reference),
                "{:?} not repaired from:\n{traceback}\nlines {:?}",
                fault.kind,
                fault.lines
            );
            assert!(turn.note.starts_with("repaired"), "{}", turn.note);

            let last = traceback.trim_end().lines().last().unwrap().to_string();
            let ename = fault
                .kind
                .raises()
                .iter()
                .find(|e| traceback.contains(*e))
                .unwrap();
            let nameless = traceback.replace(ename, "Error");
            for (what, feedback) in [
                ("exception line only", last.as_str()),
                ("no exception name", nameless.as_str()),
                ("empty (budget 0)", ""),
                ("minimal", &format!("Your code failed with {ename}.")),
            ] {
                let turn = repaired_after(&oracle, &t.question, feedback);
                assert!(
                    turn.fault.is_some(),
                    "{:?} repaired from feedback with {what}: {feedback}",
                    fault.kind
                );
            }
        }
    }
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    assert!(cases >= 20, "{cases}");
}

/// `oracle:wrong` at round 0 on the built-in math suite: the code runs
/// cleanly in a real Python and the checker parses its answer and rejects
/// it; the reference (round 1) is right.
#[test]
fn wrong_runs_cleanly_and_is_wrong() {
    let datasets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets");
    let mut tasks = crate::task::load::load_suite("math", &datasets).unwrap();
    // A multi-answer task printed with `@name[value]`, standard library only.
    let multi: Expected = serde_json::from_value(serde_json::json!({
        "type": "multi",
        "answers": {
            "mean": {"type": "number", "value": 2.5, "abs_tol": 0.01},
            "mode": {"type": "text", "value": "b"},
            "sorted": {"type": "list", "values": [1, 2, 3, 4], "ordered": true}
        }
    }))
    .unwrap();
    let multi_ref = "import statistics\nxs = [4, 1, 3, 2]\nprint(f\"@mean[{statistics.mean(xs)}]\")\nprint('@mode[b]')\nprint(f\"@sorted[{sorted(xs)}]\")\n";
    tasks.push(task(
        "multi-1",
        "Report mean, mode and order.",
        Some(multi_ref),
        multi,
    ));
    let oracle = Oracle::new(OracleKind::Wrong, &tasks).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let answer_of = |code: &str| {
        let out = run_file(
            dir.path(),
            &format!("{code}\nprint(repr(globals().get('answer')))\n"),
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stdout, stderr)
    };
    let mut ran = 0;
    for t in &tasks {
        let reference = t.reference.as_deref().unwrap();
        let (ok, _, stderr) = answer_of(reference);
        if !ok && stderr.contains("ModuleNotFoundError") {
            continue; // needs a package the system Python lacks
        }
        assert!(ok, "{}: reference failed: {stderr}", t.id);
        let r0 = oracle.respond(&conversation(&t.question, &[])).unwrap();
        let code = extract_code(&r0.text).code.unwrap();
        assert_eq!(r0.code.as_deref(), Some(code.as_str()));
        let (ok, stdout, stderr) = answer_of(&code);
        assert!(
            ok,
            "{}: wrong code did not run cleanly: {stderr}\n{code}",
            t.id
        );
        let value = stdout.trim_end().lines().last().unwrap();
        let value = (value != "None").then_some(value);
        let verdict = check(&t.expected, value, &stdout);
        assert!(verdict.parsed, "{}: {verdict:?}\n{code}", t.id);
        assert!(
            !verdict.correct,
            "{}: right answer {verdict:?}\n{code}",
            t.id
        );
        if let Expected::Multi { .. } = t.expected {
            assert!(verdict.parts.iter().all(|p| !p.correct), "{verdict:?}");
        }
        let r1 = oracle
            .respond(&conversation(
                &t.question,
                &[(&r0.text, "Review your answer.")],
            ))
            .unwrap();
        let (ok, stdout, _) = answer_of(r1.code.as_deref().unwrap());
        let value = stdout.trim_end().lines().last().unwrap();
        let value = (value != "None").then_some(value);
        assert!(ok && check(&t.expected, value, &stdout).correct, "{}", t.id);
        ran += 1;
    }
    assert!(ran >= 60, "only {ran} tasks ran");
}

#[tokio::test]
async fn a_two_cell_reference_is_sent_a_cell_at_a_time_and_its_repair_needs_the_first() {
    const FIRST: &str = "values = [3, 1, 4, 1, 5, 9, 2, 6]\ntotal = sum(values)\n";
    const SECOND: &str = "mean = total / len(values)\nanswer = round(mean, 3)\n";
    let reference = format!("{FIRST}# %%\n{SECOND}");
    assert_eq!(two_cells(&reference), Some((FIRST, SECOND)));
    assert_eq!(two_cells(STATS), None);
    assert_eq!(two_cells("# %%\nanswer = 1\n"), None, "an empty first cell");
    let tasks = vec![task("s1", Q1, Some(&reference), number(3.875))];
    let oracle = Oracle::new(OracleKind::Faults, &tasks).unwrap();

    let r0 = oracle.chat(&conversation(Q1, &[])).await.unwrap();
    assert_eq!(extract_code(&r0.text).code.as_deref(), Some(FIRST));
    assert_eq!(r0.fault.as_deref(), Some("needs_state"));

    let no_answer = "Your code ran but did not set `answer`.";
    let r1 = oracle
        .chat(&conversation(Q1, &[(&r0.text, no_answer)]))
        .await
        .unwrap();
    let injected = inject_fault(SECOND, "s1");
    assert_eq!(extract_code(&r1.text).code, Some(injected.code.clone()));
    assert_eq!(r1.fault.as_deref(), Some(injected.kind.as_str()));

    // Feedback that explains the fault: the second cell alone, which
    // reads `total` and `values` from the first.
    let feedback = format!(
        "Your code failed.\n\n{}: boom\n\n--> 1 | {}\n",
        injected.kind.raises()[0],
        injected.lines[0]
    );
    let r2 = oracle
        .chat(&conversation(
            Q1,
            &[(&r0.text, no_answer), (&r1.text, &feedback)],
        ))
        .await
        .unwrap();
    assert_eq!(extract_code(&r2.text).code.as_deref(), Some(SECOND));
    // Feedback that does not: the faulty cell again.
    let r2 = oracle
        .chat(&conversation(
            Q1,
            &[(&r0.text, no_answer), (&r1.text, "That did not work.")],
        ))
        .await
        .unwrap();
    assert_eq!(extract_code(&r2.text).code, Some(injected.code));
}
