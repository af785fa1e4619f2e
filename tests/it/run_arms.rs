//! Arms of one run on real kernels: feedback modes, repair vs resample and
//! repair temperatures sharing round 0, the synthetic models that must
//! order them, temperatures on the wire, products of arms, and resume per
//! arm.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::run::{captured, execute as run, options, TestRun};
use common::scripted_http::{ok, Server};
use retrace::harness::{journal, Run};
use retrace::record::{AfterFailure, AttemptRecord, FeedbackKind, FeedbackMode, StopOn};
use retrace::report::ArmSummary;

const TASKS: usize = 20;

fn math(model: &str, out: &Path) -> TestRun {
    let mut opts = options("math", model, out);
    opts.spec.tasks.selection.limit_tasks = Some(TASKS);
    opts
}

fn arm<'a>(arms: &'a [ArmSummary], name: &str) -> &'a ArmSummary {
    arms.iter()
        .find(|a| a.header.strategy == name)
        .unwrap_or_else(|| panic!("no arm {name}"))
}

/// The run's arms by name, baseline first.
fn arm_names(summary: &retrace::report::Summary) -> Vec<&str> {
    summary
        .arms
        .iter()
        .map(|a| a.header.strategy.as_str())
        .collect()
}

/// Acc@K of an arm, in tasks.
fn solved(a: &ArmSummary) -> u64 {
    a.answers
        .accuracy_by_round
        .last()
        .expect("rounds")
        .successes
}

/// Round 0 per task of `arm`.
fn round0s<'a>(records: &'a [AttemptRecord], arm: &str) -> HashMap<&'a str, &'a AttemptRecord> {
    records
        .iter()
        .filter(|r| r.round == 0 && r.arm_name() == arm)
        .map(|r| (r.task_id.as_str(), r))
        .collect()
}

fn assert_same_round0(records: &[AttemptRecord], base: &str, other: &str) {
    let (a, b) = (round0s(records, base), round0s(records, other));
    assert_eq!(a.len(), TASKS);
    assert_eq!(b.len(), TASKS);
    for (task, x) in &a {
        let y = b[task];
        assert_eq!((&x.reply, &x.code), (&y.reply, &y.code), "{task}");
        assert_eq!(x.outcome, y.outcome, "{task}");
        assert_eq!(
            (&x.check, x.correct, x.tokens),
            (&y.check, y.correct, y.tokens)
        );
        assert_eq!(x.shared_from, None, "{task}: the baseline did round 0");
        assert_eq!(y.shared_from.as_deref(), Some(base), "{task}");
    }
}

#[tokio::test]
async fn feedback_arms_share_round_0_and_parsed_feedback_repairs_more() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = math("oracle:faults", dir.path());
    opts.spec.arms.feedback = vec![FeedbackMode::Parsed, FeedbackMode::None];
    let result = run(opts).await;
    let names = arm_names(&result.summary);
    assert_eq!(names, ["parsed", "none"]);
    assert_same_round0(&result.records, "parsed", "none");
    let (parsed, none) = (
        arm(&result.summary.arms, "parsed"),
        arm(&result.summary.arms, "none"),
    );
    assert!(
        solved(parsed) > solved(none),
        "parsed {} vs none {}",
        solved(parsed),
        solved(none)
    );
    // Every record names its arm and the arm's own feedback mode.
    for r in &result.records {
        let mode = if r.arm == "parsed" {
            FeedbackMode::Parsed
        } else {
            FeedbackMode::None
        };
        assert_eq!(r.feedback, mode, "{} {}", r.arm, r.task_id);
    }
}

#[tokio::test]
async fn repair_beats_resampling_for_faults_and_loses_to_it_for_flaky() {
    for (model, repair_wins) in [("oracle:faults", true), ("oracle:flaky", false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = math(model, dir.path());
        opts.spec.arms.after_failure = vec![AfterFailure::Repair, AfterFailure::Resample];
        let result = run(opts).await;
        assert_same_round0(&result.records, "repair", "resample");
        let arms = &result.summary.arms;
        let (repair, resample) = (solved(arm(arms, "repair")), solved(arm(arms, "resample")));
        assert_eq!(
            repair > resample,
            repair_wins,
            "{model}: repair {repair}, resample {resample}"
        );
        assert_ne!(repair, resample, "{model}");
        // The budget view: a plot with a line per arm, and both arms
        // measured at round 1's comparable budget, in the same order.
        let plot = std::fs::read_to_string(result.dir.join("plots/budget.svg")).unwrap();
        assert!(
            plot.contains("repair") && plot.contains("resample"),
            "{plot}"
        );
        let plot = std::fs::read_to_string(result.dir.join("plots/budget_time.svg")).unwrap();
        assert!(plot.contains("mean cumulative wall time"), "{plot}");
        let at_1 = &result.summary.accuracy_at_budget[1];
        assert!(at_1.tokens > 0.0, "{at_1:?}");
        let acc: Vec<f64> = at_1
            .accuracy
            .iter()
            .map(|a| a.accuracy.expect("measured"))
            .collect();
        assert_eq!(acc[0] > acc[1], repair_wins, "{model}: {at_1:?}");
        let report = std::fs::read_to_string(result.dir.join("report.md")).unwrap();
        assert!(report.contains("### Accuracy at comparable budgets"));
        assert!(report.contains("### pass@k of the resampling arms"));
        assert!(
            report.contains("| Acc@(k−1) | Acc@(k−1) of repair |"),
            "pass@k stands beside the repair arm's accuracy: {report}"
        );
        // A resampled round starts over: the opening messages, no feedback.
        let opening = |r: &AttemptRecord| r.prompt.len() == 2 && r.round > 0;
        for r in result.records.iter().filter(|r| r.arm == "resample") {
            if r.round > 0 {
                assert!(
                    opening(r),
                    "{model} {} round {}: {:?}",
                    r.task_id,
                    r.round,
                    r.prompt
                );
            }
            if !r.is_final() {
                assert_eq!(r.feedback_kind, Some(FeedbackKind::Resample));
            }
        }
        // Cumulative spending only grows along a task's rounds.
        for r in &result.records {
            assert!(r.cumulative.model_ms >= r.timings_ms.model - 1e-9);
            assert!(r.cumulative.exec_ms >= r.timings_ms.exec - 1e-9);
        }
    }
}

#[tokio::test]
async fn two_varied_flags_need_a_product_which_names_each_combination() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = math("oracle:faults", dir.path());
    opts.spec.tasks.selection.limit_tasks = Some(3);
    opts.spec.arms.feedback = vec![FeedbackMode::Parsed, FeedbackMode::None];
    opts.spec.arms.after_failure = vec![AfterFailure::Repair, AfterFailure::Resample];
    let err = match Run::create(opts.spec.clone(), Some(opts.out.clone()), opts.ctx.clone()).await {
        Ok(_) => panic!("a product of arms without --arms-product"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("--feedback and --after-failure") && err.contains("--arms-product"),
        "{err}"
    );
    opts.spec.arms.product = true;
    let result = run(opts).await;
    let names = arm_names(&result.summary);
    assert_eq!(
        names,
        [
            "parsed/repair",
            "parsed/resample",
            "none/repair",
            "none/resample"
        ]
    );
    let shared = result
        .records
        .iter()
        .filter(|r| r.round == 0 && r.shared_from.is_some());
    assert_eq!(
        shared.count(),
        3 * 3,
        "three arms reuse the baseline's round 0 on 3 tasks"
    );
}

#[tokio::test]
async fn a_resumed_arm_reuses_the_round_0_its_group_finished() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = math("oracle:faults", dir.path());
    opts.spec.arms.feedback = vec![FeedbackMode::Parsed, FeedbackMode::None];
    let ctx = opts.ctx.clone();
    let full = run(opts).await;
    // The `none` arm loses its records of half the tasks, as if the run
    // had stopped before them.
    let path = dir.path().join("results.jsonl");
    let dropped: Vec<String> = full
        .records
        .iter()
        .filter(|r| r.round == 0 && r.arm == "parsed")
        .map(|r| r.task_id.clone())
        .take(TASKS / 2)
        .collect();
    let kept: Vec<AttemptRecord> = full
        .records
        .iter()
        .filter(|r| !(r.arm == "none" && dropped.contains(&r.task_id)))
        .cloned()
        .collect();
    journal::rewrite(&path, &kept).unwrap();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let resumed = Run::resume(dir.path(), ctx).await.unwrap();
    assert_eq!(resumed.counts(), (TASKS / 2, 2 * TASKS - TASKS / 2));
    let result = resumed.execute(rx).await.unwrap();
    assert_same_round0(&result.records, "parsed", "none");
    let arms = |s: &retrace::report::Summary| s.arms.iter().map(solved).collect::<Vec<_>>();
    assert_eq!(arms(&result.summary), arms(&full.summary));
}

#[tokio::test]
async fn model_arms_each_draw_their_own_round_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = math("oracle", dir.path());
    opts.spec.tasks.selection.limit_tasks = Some(4);
    opts.spec.arms.model = ["oracle", "oracle:faults"]
        .map(|m| m.parse().unwrap())
        .to_vec();
    let result = run(opts).await;
    let arms = &result.summary.arms;
    let names = arm_names(&result.summary);
    assert_eq!(names, ["oracle", "oracle:faults"]);
    assert_eq!(arms[1].header.model, "oracle:faults");
    for r in &result.records {
        assert_eq!(r.model, r.arm, "each arm's records name its own model");
        assert_eq!(r.shared_from, None, "different models share no round 0");
    }
    let acc0 = |a: &ArmSummary| a.answers.accuracy_by_round[0].successes;
    assert_eq!((acc0(&arms[0]), acc0(&arms[1])), (4, 0));
}

/// Temperature arms draw their own round 0; repair-temperature arms share
/// it; every request goes out at its arm's temperature for its round.
#[tokio::test(flavor = "multi_thread")]
async fn temperature_arms_reach_the_wire_and_repair_temperature_arms_share_round_0() {
    if common::lacks_root() {
        return;
    }
    let server = Server::start_with_default(vec![], ok("```python\nanswer = 1\n```")).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = captured("math", server.base_url(), dir.path());
    opts.spec.tasks.selection.limit_tasks = Some(3);
    opts.spec.policy.stop_on = StopOn::Never;
    opts.spec.policy.rounds = 1;
    opts.spec.arms.temperature = vec![0.0, 0.5];
    opts.spec.arms.repair_temperature = vec![0.2, 0.7];
    opts.spec.arms.product = true;
    let result = run(opts).await;
    assert_eq!(
        arm_names(&result.summary),
        [
            "t=0/repair_t=0.2",
            "t=0/repair_t=0.7",
            "t=0.5/repair_t=0.2",
            "t=0.5/repair_t=0.7"
        ]
    );
    let mut shared: Vec<(&str, Option<&str>)> = result
        .records
        .iter()
        .filter(|r| r.round == 0 && r.task_id == result.records[0].task_id)
        .map(|r| (r.arm_name(), r.shared_from.as_deref()))
        .collect();
    shared.sort();
    assert_eq!(
        shared,
        [
            ("t=0.5/repair_t=0.2", None),
            ("t=0.5/repair_t=0.7", Some("t=0.5/repair_t=0.2")),
            ("t=0/repair_t=0.2", None),
            ("t=0/repair_t=0.7", Some("t=0/repair_t=0.2")),
        ]
    );

    let mut sent: Vec<(bool, String)> = server
        .requests()
        .into_iter()
        .map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            // Round 0 sends system + task; a later round adds reply + feedback.
            let later = body["messages"].as_array().unwrap().len() > 2;
            (
                later,
                format!("{:.1}", body["temperature"].as_f64().unwrap()),
            )
        })
        .collect();
    sent.sort();
    let count = |later: bool, t: &str| sent.iter().filter(|s| **s == (later, t.into())).count();
    assert_eq!((count(false, "0.0"), count(false, "0.5")), (3, 3));
    assert_eq!((count(true, "0.2"), count(true, "0.7")), (6, 6));
    assert_eq!(
        sent.len(),
        18,
        "one round 0 per temperature, one repair per arm"
    );
}
