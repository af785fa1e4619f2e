//! The false-alarm control (`--false-alarm N`) against a scripted endpoint
//! that keeps or abandons a right answer when told it is wrong, and
//! oscillation reported from a replayed model's rounds. Real confined
//! kernels run every round.

use crate::common;

use std::path::Path;

use common::run::{captured, execute, options, replayed_task, two_tasks};
use common::scripted_http::{ok, Server};
use retrace::harness::RunResult;
use retrace::record::{false_alarm, AttemptRecord, FeedbackKind, StopOn};

/// An endpoint that answers each question right, and after the false
/// alarm resends its code (`keeps`) or changes the answer (else).
async fn endpoint(keeps: bool) -> Server {
    Server::start_fn(move |request| {
        let value = if request.body.contains("6 times 7") {
            42
        } else {
            4
        };
        let alarmed = request.body.contains("Your answer is wrong");
        let answer = if alarmed && !keeps { value + 1 } else { value };
        ok(&format!("```python\nanswer = {answer}\n```"))
    })
    .await
}

/// A run of both tasks (one round after round 0) with `false_alarm`.
async fn run(dir: &Path, name: &str, keeps: bool, false_alarm: Option<u32>) -> RunResult {
    let server = endpoint(keeps).await;
    let mut opts = captured(&two_tasks(dir), server.base_url(), &dir.join(name));
    opts.spec.policy.rounds = 1;
    opts.spec.false_alarm = false_alarm;
    execute(opts).await
}

fn controls(dir: &Path) -> Vec<AttemptRecord> {
    retrace::harness::journal::read(&dir.join(false_alarm::JOURNAL)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_keeps_its_answer_is_never_harmed() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let result = run(dir.path(), "keep", true, Some(1)).await;
    let f = result.summary.false_alarm.clone().expect("a control");
    assert_eq!((f.asked, f.eligible, f.tasks), (1, 2, 1));
    let harm = f.harm_rate.unwrap();
    assert_eq!((harm.successes, harm.n), (0, 1));
    assert_eq!(f.replies["resent_code"], 1, "{:?}", f.replies);
    // One task, round 0 shared and round 1 after the alarm, in the
    // control's own journal.
    let c = controls(&result.dir);
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c.iter().all(|r| r.arm_name() == "fat/false-alarm"));
    assert_eq!(c[0].feedback_kind, Some(FeedbackKind::FalseAlarm));
    assert!(c[0].shared_from.is_some());
    let told = serde_json::to_string(&c[1].prompt).unwrap();
    assert!(told.contains("Your answer is wrong"), "{told}");
    assert!(!told.contains("Traceback"), "{told}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_abandons_its_answer_is_always_harmed_and_acc_is_unmoved() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // N above the tasks right at round 0: all of them, said so.
    let with = run(dir.path(), "with", false, Some(5)).await;
    let f = with.summary.false_alarm.clone().expect("a control");
    assert!(f.short());
    assert_eq!((f.eligible, f.tasks), (2, 2));
    let harm = f.harm_rate.unwrap();
    assert_eq!((harm.successes, harm.n), (2, 2));
    assert_eq!(f.harmed_task_ids, ["t1", "t2"]);
    let report = std::fs::read_to_string(with.dir.join("report.md")).unwrap();
    assert!(report.contains("## False-alarm control"), "{report}");
    assert!(report.contains("all 2 were used"), "{report}");
    let page = std::fs::read_to_string(with.dir.join("report.html")).unwrap();
    assert!(
        page.contains("False-alarm control"),
        "the page has the section"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(with.dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["false_alarm"]["harm_rate"]["successes"], 2);

    // The same endpoint without the control: every arm number the same.
    let without = run(dir.path(), "without", false, None).await;
    assert!(without.summary.false_alarm.is_none());
    let (a, b) = (&with.summary.answers, &without.summary.answers);
    assert_eq!(a.accuracy_by_round, b.accuracy_by_round);
    assert_eq!(a.recovery_rate, b.recovery_rate);
    assert_eq!(a.regression_rate, b.regression_rate);
    assert_eq!(with.summary.header.tasks, without.summary.header.tasks);
    assert!(with.records.iter().all(|r| r.arm_name() == "fat"));
    assert_eq!(with.records.len(), without.records.len());
    assert!(!without.dir.join(false_alarm::JOURNAL).exists());

    // compare --max-harm-rise: a model that keeps as BASE, this one as NEW.
    let keep = run(dir.path(), "keep", true, Some(5)).await;
    let compare = |base: &Path, max: &str| {
        let (base, new) = (base.display().to_string(), with.dir.display().to_string());
        let args = [
            "compare",
            &base,
            &new,
            "--allow-differences",
            "--max-harm-rise",
            max,
        ];
        common::cli::retrace(args).run()
    };
    let o = compare(&keep.dir, "50");
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stdout
            .contains("harm rate rose 100.0 points (allowed 50)"),
        "{o:?}"
    );
    assert_eq!(compare(&keep.dir, "100").code, 0);
    let o = compare(&without.dir, "50");
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("has no false-alarm control"), "{o:?}");
}

/// A replayed task whose rounds send `codes` (each raising), under
/// `--stop-on never` so that every round runs.
async fn replayed(dir: &Path, codes: &[&str]) -> RunResult {
    let replies: Vec<(u32, String)> = (codes.iter().enumerate())
        .map(|(r, c)| (r as u32, format!("```python\n{c}\n```")))
        .collect();
    let borrowed: Vec<(u32, &str)> = replies.iter().map(|(r, c)| (*r, c.as_str())).collect();
    std::fs::create_dir_all(dir).unwrap();
    let (suite, model) = replayed_task(dir, &borrowed);
    let mut opts = options(&suite, &model, &dir.join("run"));
    opts.spec.policy.rounds = codes.len() as u32 - 1;
    opts.spec.policy.stop_on = StopOn::Never;
    execute(opts).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_alternates_two_codes_oscillates_and_one_that_converges_does_not() {
    if common::lacks_root() {
        return;
    }
    let (a, b) = ("answer = no_such_a", "answer = no_such_b");
    let a_again = "# once more\nanswer  =  no_such_a   # the first idea";
    let dir = tempfile::tempdir().unwrap();
    let flip = replayed(&dir.path().join("flip"), &[a, b, a_again, b]).await;
    let r = &flip.summary.repairs;
    let o = r.oscillating.unwrap();
    assert_eq!((o.successes, o.n), (2, 2));
    assert_eq!(r.cycling_task_ids, ["a"]);
    let report = std::fs::read_to_string(flip.dir.join("report.md")).unwrap();
    assert!(report.contains("oscillating"), "{report}");

    let c = "answer = no_such_c";
    let converge = replayed(&dir.path().join("converge"), &[a, b, c, c]).await;
    let r = &converge.summary.repairs;
    assert_eq!(r.oscillating.unwrap().successes, 0);
    assert_eq!(r.cycling_tasks.unwrap().successes, 0);
    assert!(r.cycling_task_ids.is_empty());
    assert_eq!(r.resent_code.unwrap().successes, 1);
}
