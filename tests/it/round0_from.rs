//! `--round0-from`: a run that takes every task's round 0 from a recorded
//! run, on real kernels. Each arm's round 0 is the recorded one, record for
//! record; an arm of the recording model repairs its own code, any other
//! arm foreign code; the source is named in run.json and the fingerprints;
//! a source that does not hold the run's tasks or arm is refused.

use crate::common;

use std::path::Path;

use common::run::{execute as run, options, TestRun};
use retrace::harness::Run;
use retrace::record::{AttemptRecord, Round0From, RunConfig};
use retrace::report::{Authorship, Summary};

const TASKS: usize = 12;

fn math(model: &str, out: &Path) -> TestRun {
    let mut opts = options("math", model, out);
    opts.spec.tasks.selection.limit_tasks = Some(TASKS);
    opts
}

fn round0<'a>(records: &'a [AttemptRecord], arm: &str, task: &str) -> &'a AttemptRecord {
    records
        .iter()
        .find(|r| r.round == 0 && r.arm_name() == arm && r.task_id == task)
        .unwrap_or_else(|| panic!("no round 0 of {task} in arm {arm}"))
}

fn read_config(dir: &Path) -> RunConfig {
    retrace::harness::read_config(dir).unwrap()
}

/// Every arm's round 0 is the source arm's: the same reply, code, outcome,
/// judgement and tokens, marked as coming from `RUN_ID:ARM`.
pub fn assert_round0_is_the_sources(
    source: &[AttemptRecord],
    source_arm: &str,
    label: &str,
    records: &[AttemptRecord],
    arms: &[&str],
) {
    let tasks: Vec<&str> = (source.iter())
        .filter(|r| r.round == 0 && r.arm_name() == source_arm)
        .map(|r| r.task_id.as_str())
        .collect();
    assert!(!tasks.is_empty());
    for arm in arms {
        for task in &tasks {
            let (x, y) = (round0(source, source_arm, task), round0(records, arm, task));
            assert_eq!((&x.reply, &x.code), (&y.reply, &y.code), "{arm} {task}");
            assert_eq!(x.outcome, y.outcome, "{arm} {task}");
            assert_eq!(
                (&x.check, x.correct, x.answered, x.tokens),
                (&y.check, y.correct, y.answered, y.tokens),
                "{arm} {task}"
            );
            assert_eq!(y.shared_from.as_deref(), Some(label), "{arm} {task}");
        }
    }
}

fn authorship(summary: &Summary, arm: &str) -> Authorship {
    let origin = summary.code_origin.as_ref().expect("a code origin");
    origin
        .arms
        .iter()
        .find(|a| a.arm == arm)
        .unwrap_or_else(|| panic!("no arm {arm} in {origin:?}"))
        .code
}

#[tokio::test]
async fn a_recorded_round_0_is_repaired_as_own_and_foreign_code() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("source"), dir.path().join("repairs"));
    let source = run(math("oracle:faults", &first)).await;
    let wrong0 = (source.records.iter())
        .filter(|r| r.round == 0 && !r.correct)
        .count();
    assert!(wrong0 >= 3, "the faults model fails some tasks at round 0");

    let mut opts = math("oracle:faults", &second);
    opts.spec.arms.model = ["oracle:faults", "oracle"]
        .map(|m| m.parse().unwrap())
        .to_vec();
    opts.spec.policy.round0_from = Some(Round0From::parse(first.to_str().unwrap()));
    let result = run(opts).await;

    // A one-arm run's arm is its package strategy.
    let label = format!("{}:fat", source.config.provenance.run_id);
    assert_round0_is_the_sources(
        &source.records,
        "fat",
        &label,
        &result.records,
        &["oracle:faults", "oracle"],
    );
    // No model was asked for round 0: the recorded replies are the only ones.
    for r in result.records.iter().filter(|r| r.round == 0) {
        assert_eq!(r.model, r.arm_name(), "records name their arm's model");
    }
    let s = &result.summary;
    assert_eq!(authorship(s, "oracle:faults"), Authorship::Own);
    assert_eq!(authorship(s, "oracle"), Authorship::Foreign);
    let origin = s.code_origin.as_ref().unwrap();
    assert_eq!(
        (origin.source.as_str(), origin.model.as_str()),
        (label.as_str(), "oracle:faults")
    );
    // The oracle repairs with the reference: every foreign task recovers,
    // over the same tasks wrong at round 0 as the own arm's.
    let recovery = |arm: &str| {
        let a = origin.arms.iter().find(|a| a.arm == arm).unwrap();
        a.recovery_rate.expect("tasks wrong at round 0")
    };
    let (own, foreign) = (recovery("oracle:faults"), recovery("oracle"));
    assert_eq!(own.n, wrong0 as u64);
    assert_eq!(foreign.n, wrong0 as u64);
    assert_eq!(foreign.successes, foreign.n);

    // run.json names the source with its fingerprint; each arm's
    // fingerprint says where its round 0 came from.
    let config = read_config(&second);
    let recorded = config.provenance.round0_source.as_ref().expect("a source");
    assert_eq!(recorded.label(), label);
    assert_eq!(
        Some(&recorded.fingerprint),
        read_config(&first).fingerprint("fat").as_ref()
    );
    for arm in ["oracle:faults", "oracle"] {
        let print = config.fingerprint(arm).unwrap();
        assert_eq!(print.policy.round0_from.as_deref(), Some(label.as_str()));
    }
    let md = std::fs::read_to_string(second.join("report.md")).unwrap();
    assert!(md.contains("## Own and foreign code"), "{md}");
    assert!(md.contains("| oracle | oracle | foreign |"), "{md}");
}

#[tokio::test]
async fn a_source_without_the_runs_tasks_or_arm_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("source");
    let mut small = math("oracle", &first);
    small.spec.tasks.selection.limit_tasks = Some(2);
    run(small).await;
    let from = first.to_str().unwrap();

    let refused = |from: String, tasks: usize| {
        let mut opts = math(
            "oracle",
            &dir.path().join(format!("r{tasks}{}", from.len())),
        );
        opts.spec.tasks.selection.limit_tasks = Some(tasks);
        opts.spec.policy.round0_from = Some(Round0From::parse(&from));
        async move {
            match Run::create(opts.spec, Some(opts.out), opts.ctx).await {
                Ok(_) => panic!("--round0-from {from} was accepted"),
                Err(e) => format!("{e:#}"),
            }
        }
    };
    let more = refused(from.to_string(), 3).await;
    assert!(
        more.contains("--round0-from") && more.contains("is not one of its tasks"),
        "{more}"
    );
    let arm = refused(format!("{from}:nope"), 2).await;
    assert!(
        arm.contains("no arm `nope`") && arm.contains("its arms: fat"),
        "{arm}"
    );
    let missing = refused(dir.path().join("none").display().to_string(), 2).await;
    assert!(missing.contains("run.json"), "{missing}");
}
