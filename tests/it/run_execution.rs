//! Execution modes as arms on real kernels (`--execution
//! live,replay,fresh`): one shared round 0, and `oracle:faults`' two
//! kinds of fault ordering the modes: a fault whose repair is
//! self-contained recovers in every mode; a two-cell task whose repair
//! reads what its first cell defined recovers where the kernel kept that
//! state (`live`) or replayed it (`replay`), and fails with a `NameError`
//! for lack of it in `fresh`.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::run::{execute as run, options};
use retrace::record::{AttemptRecord, ExecutionMode, FeedbackKind};
use retrace::repair::prompt::{TemplateName, Templates};

/// Two tasks whose references are one cell and two whose references are
/// two cells (`# %%`), the second reading what the first defined.
fn suite(dir: &Path) -> String {
    let task = |id: &str, question: &str, value: f64, reference: &str| {
        serde_json::json!({
            "id": id, "question": question,
            "expected": {"type": "number", "value": value, "abs_tol": 1e-6},
            "reference": reference,
        })
        .to_string()
    };
    let lines = [
        task(
            "plain-factorial",
            "What is 6 factorial plus one?",
            721.0,
            "import math\nfactorial = math.factorial(6)\nanswer = factorial + 1\n",
        ),
        task(
            "plain-range",
            "What is the range (max minus min) of 2, 7, 1, 8?",
            7.0,
            "values = [2, 7, 1, 8]\nlargest = max(values)\nanswer = largest - min(values)\n",
        ),
        task(
            "state-squares",
            "What is the sum of the squares of 1 to 10, plus 5?",
            390.0,
            "squares = [i * i for i in range(1, 11)]\ntotal = sum(squares)\n# %%\nanswer = total + 5\n",
        ),
        task(
            "state-stats",
            "What is the mean plus the population standard deviation of 3, 1, 4, 1, 5, 9, 2, 6, to 3 places?",
            6.446,
            "import statistics\nvalues = [3, 1, 4, 1, 5, 9, 2, 6]\n# %%\nmean = sum(values) / len(values)\nspread = statistics.pstdev(values)\nanswer = round(mean + spread, 3)\n",
        ),
    ];
    let path = dir.join("tasks.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

/// The records of one arm, by task, in round order.
fn by_task<'a>(
    records: &'a [AttemptRecord],
    arm: &str,
) -> HashMap<&'a str, Vec<&'a AttemptRecord>> {
    let mut tasks: HashMap<&str, Vec<&AttemptRecord>> = HashMap::new();
    for r in records.iter().filter(|r| r.arm_name() == arm) {
        tasks.entry(r.task_id.as_str()).or_default().push(r);
    }
    for rounds in tasks.values_mut() {
        rounds.sort_by_key(|r| r.round);
    }
    tasks
}

#[tokio::test]
async fn execution_modes_share_round_0_and_only_kept_or_replayed_state_repairs_a_two_cell_task() {
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path());
    let mut opts = options(&suite, "oracle:faults", &dir.path().join("run"));
    opts.spec.arms.execution = vec![
        ExecutionMode::Live,
        ExecutionMode::Replay,
        ExecutionMode::Fresh,
    ];
    let result = run(opts).await;
    let names: Vec<&str> = result
        .summary
        .arms
        .iter()
        .map(|a| a.header.strategy.as_str())
        .collect();
    assert_eq!(names, ["live", "replay", "fresh"]);
    assert_eq!(result.infra_tasks, 0);

    let arms: HashMap<&str, _> = names
        .iter()
        .map(|&a| (a, by_task(&result.records, a)))
        .collect();
    let templates = Templates::default();
    let sentence = |name| templates.text(name).trim_end().to_string();
    let (replay_text, fresh_text) = (
        sentence(TemplateName::ExecutionReplay),
        sentence(TemplateName::ExecutionFresh),
    );
    for task in [
        "plain-factorial",
        "plain-range",
        "state-squares",
        "state-stats",
    ] {
        let staged = task.starts_with("state");
        // One round 0, shared: the same reply, code, outcome and check.
        let base = arms["live"][task][0];
        assert_eq!(base.shared_from, None, "{task}");
        assert_eq!(
            base.fault.as_deref() == Some("needs_state"),
            staged,
            "{task}"
        );
        for arm in ["replay", "fresh"] {
            let r0 = arms[arm][task][0];
            assert_eq!((&r0.reply, &r0.code), (&base.reply, &base.code), "{task}");
            assert_eq!(r0.outcome, base.outcome, "{task}");
            assert_eq!((&r0.check, r0.correct), (&base.check, base.correct));
            assert_eq!(r0.shared_from.as_deref(), Some("live"), "{task}");
        }
        for (arm, mode) in [
            ("live", ExecutionMode::Live),
            ("replay", ExecutionMode::Replay),
            ("fresh", ExecutionMode::Fresh),
        ] {
            let rounds = &arms[arm][task];
            let last = rounds.last().unwrap();
            let wins = !staged || mode != ExecutionMode::Fresh;
            assert_eq!(last.correct, wins, "{arm} {task}: {:?}", last.outcome);
            assert!(rounds.len() > 1, "{arm} {task}: round 0 fails on purpose");
            for r in rounds {
                assert_eq!(r.execution, mode, "{arm} {task}");
            }
            // The repair messages say what the next kernel holds; live's
            // are as they were.
            let told = rounds[1].prompt[0].joined_text();
            let says = |s: &str| told.contains(s);
            assert_eq!(
                (says(&replay_text), says(&fresh_text)),
                (mode == ExecutionMode::Replay, mode == ExecutionMode::Fresh),
                "{arm} {task}: {told}"
            );
            // The state each repair reads: a two-cell task's repaired
            // second cell reads the first's names; a self-contained repair
            // reads none.
            // (Code that is not Python is not checked.)
            let syntax = |r: &AttemptRecord| {
                let error = r.outcome.as_ref().and_then(|o| o.error.as_ref());
                error.is_some_and(|e| e.ename == "SyntaxError")
            };
            let names: Vec<&Vec<String>> = rounds[1..]
                .iter()
                .filter_map(|r| {
                    assert_eq!(
                        r.state_names.is_none(),
                        syntax(r),
                        "{arm} {task} r{}",
                        r.round
                    );
                    r.state_names.as_ref()
                })
                .collect();
            let used = names.iter().any(|n| !n.is_empty());
            assert_eq!(used, staged, "{arm} {task}: {names:?}");
            // Only replay re-runs the clean cells: a two-cell task's first
            // cell, before every later round; a failed round 0 is not re-run.
            for r in &rounds[1..] {
                match (mode, staged) {
                    (ExecutionMode::Replay, true) => {
                        let replay = r.replay.as_ref().expect("replayed");
                        assert_eq!(replay.rounds, [0], "{task} r{}", r.round);
                        assert!(replay.diverged.is_empty(), "{task}: {replay:?}");
                    }
                    _ => assert_eq!(r.replay, None, "{arm} {task} r{}", r.round),
                }
            }
            // Live keeps its kernel: only round 0 started one. The others
            // start one for every round that ran code.
            let started = rounds
                .iter()
                .filter(|r| r.timings_ms.kernel_start.is_some());
            let expected = match mode {
                ExecutionMode::Live => 1,
                _ => rounds.len() - 1,
            };
            assert_eq!(started.count(), expected, "{arm} {task}");
            // Fresh fails a two-cell task for lack of state: a NameError
            // for a name only the first cell defined.
            let lacked = rounds.iter().any(|r| r.lacked_state());
            assert_eq!(
                lacked,
                staged && mode == ExecutionMode::Fresh,
                "{arm} {task}"
            );
            if lacked {
                assert!(last.lacked_state(), "{task}: {:?}", last.outcome);
            } else if staged {
                assert_eq!(rounds[0].feedback_kind, Some(FeedbackKind::NoAnswer));
            }
        }
    }
    // Per arm: the state the repairs used and the failures for lack of it,
    // with their denominators; kernel and replay time.
    for a in &result.summary.arms {
        let k = a.kernel_state.as_ref().expect("a run comparing modes");
        let used = k.used_state.expect("repairs checked");
        let lacked = k.lacked_state.expect("repairs checked");
        let tasks = k.tasks_lacking_state.expect("tasks");
        assert_eq!(tasks.n, 4);
        assert!(used.successes > 0, "{}: {used:?}", a.header.strategy);
        match a.header.strategy.as_str() {
            "fresh" => {
                assert_eq!(tasks.successes, 2);
                assert!(lacked.successes >= 2, "{lacked:?}");
                assert_eq!(k.replays, 0);
            }
            "replay" => {
                assert_eq!((tasks.successes, lacked.successes), (0, 0));
                assert!(k.replays >= 4, "{k:?}");
                assert_eq!(k.replays_diverged, 0);
            }
            _ => {
                assert_eq!((tasks.successes, lacked.successes), (0, 0));
                assert_eq!(k.replays, 0);
                assert_eq!(k.kernel_starts, 4, "one kernel per task");
            }
        }
    }
    let report = std::fs::read_to_string(result.dir.join("report.md")).unwrap();
    assert!(report.contains("### Execution modes"), "{report}");
}

/// A replayed cell that ran without error and fails when re-run is flagged
/// (`replay.diverged`): the first cell asserts the clock is before a
/// deadline set when round 0 was asked for, and the repair is sent after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_replayed_cell_that_fails_where_it_once_ran_is_flagged_diverged() {
    use common::scripted_http::{ok, Act, Server};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (suite, _) = common::run::replayed_task(dir.path(), &[]);
    // Round 0 runs well within the margin; round 1 is sent after it.
    const MARGIN: Duration = Duration::from_secs(20);
    let deadline: Arc<Mutex<Option<SystemTime>>> = Arc::default();
    let server = Server::start_fn(move |_| {
        let mut deadline = deadline.lock().unwrap();
        match *deadline {
            None => {
                let at = SystemTime::now() + MARGIN;
                *deadline = Some(at);
                let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
                ok(&format!(
                    "```python\nimport time\nassert time.time() < {secs}\nsix = 6\n```"
                ))
            }
            Some(at) => {
                let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
                let reply = ok("```python\nanswer = six * 7\n```");
                Act::Delay(wait + Duration::from_secs(1), Box::new(reply))
            }
        }
    })
    .await;
    let mut opts = common::run::captured(&suite, server.base_url(), &dir.path().join("run"));
    opts.spec.policy.rounds = 1;
    opts.spec.policy.execution = ExecutionMode::Replay;
    let result = run(opts).await;
    let round = |n: u32| {
        result
            .records
            .iter()
            .find(|r| r.round == n)
            .unwrap_or_else(|| panic!("no round {n}: {:#?}", result.records))
    };
    let first = round(0);
    assert_eq!(
        first.outcome.as_ref().map(|o| o.verdict),
        Some(retrace::sandbox::Verdict::Ok),
        "{first:#?}"
    );
    let repair = round(1);
    let replay = repair.replay.as_ref().expect("round 0 was replayed");
    assert_eq!(replay.rounds, [0]);
    assert_eq!(replay.diverged, [0], "{replay:?}");
    // What the replay failed to define is missing in the repair.
    let error = repair.outcome.as_ref().and_then(|o| o.error.as_ref());
    assert_eq!(
        error.map(|e| e.ename.as_str()),
        Some("NameError"),
        "{repair:#?}"
    );
    assert!(!repair.correct);
}
