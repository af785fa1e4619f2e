//! The run as a library, driven in-process: real confined kernels, the
//! journal, stop rules, resume, and what reaches a model's endpoint.

use crate::common;

use std::path::Path;

use common::run::{captured, execute as run, options, two_tasks};
use common::scripted_http::{ok, Server};
use retrace::harness::{Run, RunContext, RunResult};
use retrace::pyenv::{ImageName, Strategy};
use retrace::record::{AttemptRecord, FeedbackKind, FeedbackMode, Selection, StopOn};
use retrace::task::load::{datasets_dir, load_suite};

fn records(dir: &Path) -> Vec<AttemptRecord> {
    retrace::harness::journal::read(&dir.join("results.jsonl")).unwrap()
}

fn replay(dir: &Path, replies: &[(&str, u32, &str)]) -> String {
    let path = dir.join("replies.jsonl");
    let lines: Vec<String> = replies
        .iter()
        .map(|(t, r, code)| {
            serde_json::json!({"task_id": t, "round": r, "reply": format!("```python\n{code}\n```")})
                .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    format!("replay:{}", path.display())
}

/// Requests to a model carry the conversation only: no reference solution,
/// no expected value, no task id reaches the wire.
#[tokio::test(flavor = "multi_thread")]
async fn no_ground_truth_reaches_the_endpoint() {
    if common::lacks_root() {
        return;
    }
    let server = Server::start_with_default(vec![], ok("```python\nanswer = 1\n```")).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = captured("math", server.base_url(), &dir.path().join("run"));
    opts.spec.tasks.selection = Selection {
        limit_tasks: Some(8),
        ..Default::default()
    };
    opts.spec.policy.stop_on = StopOn::Never;
    opts.spec.policy.rounds = 1;
    let result = run(opts).await;
    assert_eq!(result.summary.header.tasks, 8);
    assert_eq!(result.infra_tasks, 0);

    let bodies: Vec<String> = server.requests().into_iter().map(|s| s.body).collect();
    assert_eq!(bodies.len(), 16, "two rounds of eight tasks");
    let tasks = load_suite("math", &datasets_dir("math").unwrap()).unwrap();
    for task in tasks.iter().take(8) {
        let reference = task.reference.as_deref().unwrap();
        let expected = serde_json::to_string(&task.expected).unwrap();
        for body in &bodies {
            // Bodies are JSON: compare against the JSON-escaped forms too.
            let escaped = serde_json::to_string(reference).unwrap();
            let escaped = escaped.trim_matches('"');
            assert!(
                !body.contains(escaped),
                "{}: reference on the wire",
                task.id
            );
            assert!(
                !body.contains(&expected),
                "{}: expected on the wire",
                task.id
            );
            assert!(
                !body.contains(&format!("\"{}\"", task.id)),
                "task id on the wire"
            );
        }
    }
}

/// Repair rounds sample at `repair_temperature`; every request carries a
/// seed fixed by its conversation; `run.json` records the setting.
#[tokio::test(flavor = "multi_thread")]
async fn repair_rounds_use_their_temperature_and_a_seed_per_conversation() {
    if common::lacks_root() {
        return;
    }
    let server = Server::start_with_default(vec![], ok("```python\nanswer = 1\n```")).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut opts = captured("math", server.base_url(), &out);
    opts.spec.tasks.selection = Selection {
        limit_tasks: Some(3),
        ..Default::default()
    };
    opts.spec.model.generation.repair_temperature = Some(0.7);
    opts.spec.policy.stop_on = StopOn::Never;
    opts.spec.policy.rounds = 1;
    run(opts).await;

    let bodies: Vec<serde_json::Value> = server
        .requests()
        .into_iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 6, "two rounds of three tasks");
    let mut seeds = std::collections::BTreeSet::new();
    for body in &bodies {
        // Round 0 sends system + task; a repair round adds reply + feedback.
        let repair = body["messages"].as_array().unwrap().len() > 2;
        let temperature = body["temperature"].as_f64().unwrap();
        let want = if repair { 0.7 } else { 0.0 };
        assert!((temperature - want).abs() < 1e-6, "{body}");
        seeds.insert(body["seed"].as_i64().expect("a seed in every request"));
    }
    assert_eq!(seeds.len(), 6, "one seed per conversation");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let recorded = config["spec"]["model"]["generation"]["repair_temperature"]
        .as_f64()
        .unwrap();
    assert!((recorded - 0.7).abs() < 1e-6, "{config}");
}

/// Under `never`, a replayed model that is right at round 0, keeps it at
/// round 1 and breaks it at round 2 regresses; every round runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_right_answer_is_a_regression() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = two_tasks(dir.path());
    let model = replay(
        dir.path(),
        &[
            ("t1", 0, "answer = 6 * 7"),
            ("t1", 1, "answer = 42"),
            ("t1", 2, "answer = 41"),
            ("t2", 0, "answer = 5"),
            ("t2", 1, "answer = 2 + 2"),
            ("t2", 2, "answer = 4"),
        ],
    );
    let mut opts = options(&suite, &model, &dir.path().join("run"));
    opts.spec.policy.stop_on = StopOn::Never;
    let result = run(opts).await;
    let s = &result.summary;
    let acc: Vec<u64> = s
        .answers
        .accuracy_by_round
        .iter()
        .map(|r| r.successes)
        .collect();
    assert_eq!(acc, [1, 2, 1]);
    let reg = s.answers.regression_rate.unwrap();
    assert_eq!((reg.successes, reg.n), (1, 1));
    let rec = s.answers.recovery_rate.unwrap();
    assert_eq!((rec.successes, rec.n), (1, 1));
    let recs = records(&result.dir);
    assert_eq!(recs.len(), 6, "never stops early");
    let reviews = recs
        .iter()
        .filter(|r| r.feedback_kind == Some(FeedbackKind::Review))
        .count();
    assert_eq!(reviews, 4);
    assert_eq!(s.repairs.reviews.right_to_wrong, 1);
    assert_eq!(s.repairs.reviews.wrong_to_right, 1);
}

/// Under `clean`, a clean answer of the wrong type still stops the task
/// (the checker alone judges it); an answer from an earlier round is not
/// this round's answer.
#[tokio::test(flavor = "multi_thread")]
async fn clean_stops_on_any_value_and_answers_are_per_round() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = two_tasks(dir.path());
    let model = replay(
        dir.path(),
        &[
            ("t1", 0, "answer = 'Central'"),
            ("t2", 0, "answer = 4\nraise ValueError('late')"),
            ("t2", 1, "x = 1"),
            ("t2", 2, "print('the result is', 2 + 3)"),
        ],
    );
    let result = run(options(&suite, &model, &dir.path().join("run"))).await;
    let recs = records(&result.dir);
    let t1: Vec<&AttemptRecord> = recs.iter().filter(|r| r.task_id == "t1").collect();
    assert_eq!(t1.len(), 1, "a clean wrong-typed answer stops the task");
    assert!(t1[0].answered && !t1[0].correct && !t1[0].parsed);
    let t2: Vec<&AttemptRecord> = recs.iter().filter(|r| r.task_id == "t2").collect();
    assert_eq!(t2.len(), 3);
    assert_eq!(t2[0].feedback_kind, Some(FeedbackKind::Error));
    // Round 1 assigned no answer and printed nothing: the 4 left in the
    // kernel by round 0 is not its answer.
    assert!(!t2[1].answered, "stale answer read: {:?}", t2[1].check);
    assert_eq!(t2[1].feedback_kind, Some(FeedbackKind::NoAnswer));
    assert!(!t2[1].correct);
    // Round 2 printed its result: read from its own output, and wrong.
    assert!(t2[2].answered);
    assert!(!t2[2].correct);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_existing_run_is_never_appended_to_and_resume_uses_the_given_directory() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = two_tasks(dir.path());
    let model = replay(
        dir.path(),
        &[("t1", 0, "answer = 42"), ("t2", 0, "answer = 4")],
    );
    let first = dir.path().join("first");
    run(options(&suite, &model, &first)).await;
    let before = records(&first).len();

    let opts = options(&suite, &model, &first);
    let again = match Run::create(opts.spec, Some(opts.out), opts.ctx).await {
        Ok(_) => panic!("a second run was created in an existing run directory"),
        Err(e) => e,
    };
    assert!(again.is_usage());
    let msg = again.to_string();
    assert!(msg.contains("--resume"), "{msg}");
    assert_eq!(records(&first).len(), before, "nothing appended");

    // A moved run resumes where it is, replay model included.
    let moved = dir.path().join("moved");
    std::fs::rename(&first, &moved).unwrap();
    std::fs::remove_file(moved.join("summary.json")).unwrap();
    let resume = RunContext {
        kernel_start: Some(Default::default()),
        ..common::run::context(&suite)
    };
    let run = Run::resume(&moved, resume.clone()).await.unwrap();
    assert_eq!(run.counts(), (0, 2));
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let result = run.execute(rx).await.unwrap();
    assert_eq!(result.dir, moved);
    assert!(moved.join("summary.json").exists());
    assert!(!first.exists(), "nothing written where the run used to be");
    assert_eq!(result.summary.answers.accuracy_by_round[0].successes, 2);

    // A changed dataset is refused, naming the tasks.
    let path = suite.clone();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("6 times 7", "six times seven")).unwrap();
    let err = match Run::resume(&moved, resume.clone()).await {
        Ok(_) => panic!("resumed over a changed dataset"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("changed") && err.contains("t1"), "{err}");
    let first_line = text.lines().next().unwrap().to_string();
    std::fs::write(&path, format!("{first_line}\n")).unwrap();
    let err = match Run::resume(&moved, resume).await {
        Ok(_) => panic!("resumed over a changed selection"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("t2"), "{err}");
}

fn limited(mut opts: common::run::TestRun, n: usize) -> common::run::TestRun {
    opts.spec.tasks.selection = Selection {
        limit_tasks: Some(n),
        ..Default::default()
    };
    opts
}

/// `oracle:wrong` answers cleanly but wrongly at round 0: under `never` it
/// is asked to review and recovers; under `clean` it stops unrepaired;
/// under `correct` (oracle feedback) it is told the answer is wrong.
#[tokio::test(flavor = "multi_thread")]
async fn clean_but_wrong_answers_under_each_stop_rule() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for stop_on in [StopOn::Never, StopOn::Clean, StopOn::Correct] {
        let out = dir.path().join(stop_on.name());
        let mut opts = limited(options("math", "oracle:wrong", &out), 6);
        opts.spec.policy.stop_on = stop_on;
        results.push((stop_on, run(opts).await));
    }
    for (stop_on, result) in &results {
        let s = &result.summary;
        let recs = records(&result.dir);
        assert_eq!(s.answers.accuracy_by_round[0].successes, 0, "{stop_on:?}");
        assert!(recs.iter().all(|r| r.stop_on == *stop_on));
        match stop_on {
            StopOn::Never => {
                assert_eq!(recs.len(), 18, "every task runs all rounds");
                assert_eq!(s.answers.accuracy_by_round[2].successes, 6);
                assert_eq!(s.answers.recovery_rate.unwrap().value, 1.0);
                assert!(s.repairs.reviews.prompts >= 6, "{:?}", s.repairs.reviews);
                let review = recs
                    .iter()
                    .find(|r| r.round == 1)
                    .map(|r| r.prompt[0].joined_text())
                    .unwrap();
                assert!(
                    review.starts_with(retrace::model::REVIEW_MARKER),
                    "{review}"
                );
            }
            StopOn::Clean => {
                assert_eq!(recs.len(), 6, "a clean answer stops the task");
                assert_eq!(s.answers.recovery_rate.unwrap().successes, 0);
                assert!(
                    s.answers.recovery_rate_repaired.is_none(),
                    "no task was repaired"
                );
                assert_eq!(s.answers.round0_failures["wrong_answer"].tasks, 6);
            }
            StopOn::Correct => {
                assert!(s.header.oracle_feedback);
                assert_eq!(s.answers.accuracy_by_round[1].successes, 6);
                let told = recs
                    .iter()
                    .find(|r| r.round == 1)
                    .map(|r| r.prompt[0].joined_text())
                    .unwrap();
                assert!(told.contains("not correct"), "{told}");
            }
        }
    }
}

/// `oracle:faults` repairs only what the feedback lets it repair: with no
/// feedback budget it cannot, and accuracy drops; faults are recorded.
#[tokio::test(flavor = "multi_thread")]
async fn broken_feedback_lowers_oracle_faults_accuracy() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let full = run(limited(
        options("math", "oracle:faults", &dir.path().join("full")),
        8,
    ))
    .await;
    let mut starved = limited(
        options("math", "oracle:faults", &dir.path().join("starved")),
        8,
    );
    starved.spec.policy.feedback_budget = 0;
    let starved = run(starved).await;
    let last = |r: &RunResult| r.summary.answers.accuracy_by_round[2].successes;
    assert_eq!(last(&full), 8, "full feedback repairs every fault");
    assert!(
        last(&starved) < last(&full),
        "{} vs {}",
        last(&starved),
        last(&full)
    );
    assert!(!full.summary.answers.accuracy_by_fault.is_empty());
    let faults: u64 = full
        .summary
        .answers
        .accuracy_by_fault
        .values()
        .map(|f| f.tasks)
        .sum();
    assert_eq!(faults, 8);
    // Starved of feedback, the stand-in resends its faulty code, as a weak
    // model would.
    let recs = records(&starved.dir);
    for r in recs.iter().filter(|r| r.round > 0) {
        let first = recs
            .iter()
            .find(|x| x.task_id == r.task_id && x.round == 0)
            .unwrap();
        assert_eq!(
            r.code, first.code,
            "{}: the faulty code is resent",
            r.task_id
        );
    }
    // `minimal` names the exception but not the line: not enough either.
    let mut minimal = limited(
        options("math", "oracle:faults", &dir.path().join("minimal")),
        8,
    );
    minimal.spec.policy.feedback = FeedbackMode::Minimal;
    let minimal = run(minimal).await;
    assert!(last(&minimal) < last(&full));
    let recs = records(&minimal.dir);
    let bare = recs.iter().find(|r| r.round == 1).unwrap().prompt[0].joined_text();
    assert!(bare.starts_with("Your code "), "{bare}");
    assert!(!bare.contains("Output of your code"), "{bare}");
}

/// `parsed+state`: after a KeyError on a guessed column the repair message
/// shows the DataFrame's real columns, read from the live kernel.
#[tokio::test(flavor = "multi_thread")]
async fn parsed_state_feedback_shows_the_real_columns() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("countries.csv"),
        "country,gdp_per_capita_usd,population\nA,100,5\nB,300,7\n",
    )
    .unwrap();
    let task = serde_json::json!({
        "id": "t1", "question": "What is the mean GDP per capita in countries.csv?",
        "files": ["countries.csv"],
        "expected": {"type": "number", "value": 200.0},
        "reference": "import pandas as pd\nanswer = pd.read_csv('countries.csv')['gdp_per_capita_usd'].mean()",
    });
    std::fs::write(dir.path().join("t.jsonl"), format!("{task}\n")).unwrap();
    let model = replay(
        dir.path(),
        &[
            ("t1", 0, "import pandas as pd\ndf = pd.read_csv('countries.csv')\nanswer = df['GDP per capita'].mean()"),
            ("t1", 1, "answer = float(df['gdp_per_capita_usd'].mean())"),
        ],
    );
    let suite = dir.path().join("t.jsonl").display().to_string();
    let mut plain = options(&suite, &model, &dir.path().join("plain"));
    plain.spec.policy.feedback = FeedbackMode::Parsed;
    let mut state = options(&suite, &model, &dir.path().join("state"));
    state.spec.policy.feedback = FeedbackMode::ParsedState;
    let plain = run(plain).await;
    let state = run(state).await;
    let repair = |r: &RunResult| {
        records(&r.dir)
            .iter()
            .find(|r| r.round == 1)
            .unwrap()
            .prompt[0]
            .joined_text()
    };
    let with_state = repair(&state);
    assert!(with_state.contains("gdp_per_capita_usd"), "{with_state}");
    assert!(with_state.contains("KeyError"), "{with_state}");
    assert!(!repair(&plain).contains("gdp_per_capita_usd"));
    assert_eq!(state.summary.answers.accuracy_by_round[1].successes, 1);
    assert_eq!(state.summary.header.feedback, "parsed+state");
}

/// `--strategy fat,dynamic`: both arms run every task with the same model,
/// in one run directory; the dynamic arm installs what the references
/// import (recorded per round) and both reach 100%.
#[tokio::test]
async fn fat_and_dynamic_arms_both_solve_the_packages_suite() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut opts = options("packages", "oracle", &out);
    opts.spec.packages.strategies = vec![Strategy::Fat, Strategy::Dynamic];
    common::image(ImageName::Slim);
    let result = run(opts).await;
    let recs = records(&out);
    let tasks = load_suite("packages", &datasets_dir("packages").unwrap())
        .unwrap()
        .len();
    for arm in ["fat", "dynamic"] {
        let finals: Vec<&AttemptRecord> = recs
            .iter()
            .filter(|r| r.strategy == arm && r.is_final())
            .collect();
        assert_eq!(finals.len(), tasks, "arm {arm}");
        let wrong: Vec<&str> = finals
            .iter()
            .filter(|r| !r.correct)
            .map(|r| r.task_id.as_str())
            .collect();
        assert!(wrong.is_empty(), "arm {arm}: wrong {wrong:?}");
    }
    let dynamic: Vec<&AttemptRecord> = recs.iter().filter(|r| r.strategy == "dynamic").collect();
    assert!(dynamic.iter().all(|r| !r.installs.is_empty()));
    assert!(recs
        .iter()
        .filter(|r| r.strategy == "fat")
        .all(|r| r.installs.is_empty()));
    // Every kernel's start time is recorded once, on its first round.
    let started = recs
        .iter()
        .filter(|r| r.timings_ms.kernel_start.is_some())
        .count();
    assert_eq!(started, 2 * tasks);
    let config: retrace::record::RunConfig =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(config.arm_names(), ["fat", "dynamic"]);
    assert!(config.provenance.images["fat"].bytes > config.provenance.images["dynamic"].bytes);
    assert_eq!(result.summary.header.strategy, "fat");
    assert_eq!(result.summary.arms.len(), 2);
    let comparison = result.summary.comparisons.first().expect("a comparison");
    assert_eq!(
        (comparison.base.as_str(), comparison.new.as_str()),
        ("fat", "dynamic")
    );
    assert_eq!(comparison.shared_tasks.len(), tasks);
    let mcnemar = comparison.last().mcnemar;
    assert_eq!(mcnemar.b + mcnemar.c, 0);
    let dynamic_arm = &result.summary.arms[1];
    let installs = dynamic_arm
        .environment
        .installs
        .as_ref()
        .expect("install metrics");
    assert!(installs.installs_per_task >= 1.0);
    assert_eq!(installs.denials, 0);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Strategies"), "{report}");
}

#[tokio::test]
async fn a_value_without_the_named_parts_is_no_answer_and_the_model_is_told_the_parts() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("multi.jsonl");
    let task = serde_json::json!({
        "id": "m1", "question": "Fit the model; give @mse[value] and @r2[value].",
        "expected": {"type": "multi", "answers": {
            "mse": {"type": "number", "value": 0.5},
            "r2": {"type": "number", "value": 0.9},
        }},
    });
    std::fs::write(&suite, format!("{task}\n")).unwrap();
    let model = replay(
        dir.path(),
        &[
            (
                "m1",
                0,
                "try:\n    raise KeyError('category')\nexcept KeyError:\n    print(\"The column 'category' does not exist in the dataset.\")",
            ),
            ("m1", 1, "print('@mse[0.5]')\nprint('@r2[0.9]')"),
        ],
    );
    let suite = suite.display().to_string();
    let result = run(options(&suite, &model, &dir.path().join("run"))).await;
    let recs = records(&result.dir);
    assert_eq!(
        recs.len(),
        2,
        "prose is not an answer in the asked form: {recs:#?}"
    );
    assert!(!recs[0].answered && !recs[0].correct && recs[0].stop.is_none());
    assert_eq!(recs[0].feedback_kind, Some(FeedbackKind::MissingParts));
    let told = recs[1].prompt[0].joined_text();
    assert!(told.contains("`@mse[...]`, `@r2[...]`"), "{told}");
    assert!(told.contains("does not exist in the dataset"), "{told}");
    assert!(recs[1].answered && recs[1].correct, "{:?}", recs[1].check);
}

#[tokio::test]
async fn a_repair_that_prints_the_error_away_is_flagged_and_not_a_clean_answer() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = two_tasks(dir.path());
    let model = replay(
        dir.path(),
        &[
            ("t1", 0, "data = {'volume': 42}\nanswer = data['category']"),
            (
                "t1",
                1,
                "data = {'volume': 42}\ntry:\n    answer = data['category']\nexcept KeyError:\n    print(\"The column 'category' does not exist in the dataset.\")",
            ),
            ("t1", 2, "answer = data['volume']"),
            ("t2", 0, "answer = 2 + 2"),
        ],
    );
    let result = run(options(&suite, &model, &dir.path().join("run"))).await;
    let recs = records(&result.dir);
    let t1: Vec<&AttemptRecord> = recs.iter().filter(|r| r.task_id == "t1").collect();
    assert_eq!(t1.len(), 3, "{t1:#?}");
    assert_eq!(t1[0].masking, None, "round 0 repairs nothing");
    let flags: Vec<&str> = t1[1].masking.iter().flatten().map(|f| f.name()).collect();
    assert!(flags.contains(&"silenced_exception"), "{flags:?}");
    assert!(flags.contains(&"error_message_output"), "{flags:?}");
    // Its printed error is no answer: the task goes on, and is then right.
    assert!(!t1[1].answered && t1[1].stop.is_none(), "{:?}", t1[1]);
    assert_eq!(t1[1].feedback_kind, Some(FeedbackKind::NoAnswer));
    assert!(
        t1[2].correct && t1[2].masking == Some(Vec::new()),
        "{:?}",
        t1[2].masking
    );
    // A task whose round 0 ran cleanly has nothing to compare.
    assert!(recs
        .iter()
        .filter(|r| r.task_id == "t2")
        .all(|r| r.masking.is_none()));
}
