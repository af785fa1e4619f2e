//! A run in the formats other tools read, checked by those tools: the
//! Inspect logs of an arms run read by Inspect's reader and shown by its
//! viewer in headless Chromium, its Every Eval Ever records validated by
//! EEE's schemas and validator, every number equal to `summary.json`; and
//! an interrupted run, resumed, exports what its journal then says.
//! (The real-model run's export is checked in `local_model`.)

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{self, eee, inspect};
use retrace::pyenv::ImageName;

/// Tasks of the math suite the arms run on.
const TASKS: usize = 6;

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `--model oracle:faults --feedback parsed,none` on six math tasks, with
/// `--inspect-log`: run once per test binary. `None` without root.
fn arms_run() -> Option<&'static Path> {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    if common::lacks_root() {
        return None;
    }
    let (_, dir) = RUN.get_or_init(|| {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("run");
        let tasks = TASKS.to_string();
        let ran = common::retrace([
            "run",
            "--suite",
            "math",
            "--model",
            "oracle:faults",
            "--feedback",
            "parsed,none",
            "--limit-tasks",
            &tasks,
            "--rounds",
            "2",
            "--timeout",
            "60s",
            "--inspect-log",
            "--out",
            dir.to_str().unwrap(),
        ])
        .image(ImageName::Fat)
        .run();
        assert!(ran.success(), "{}", ran.stderr);
        (out, dir)
    });
    Some(dir)
}

/// A copy of the run directory `from` at `to` (files and folders).
fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file of `dir` with the extension `ext`, sorted.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    found.sort();
    found
}

/// The arm of `summary.json` named `arm`.
fn arm_summary<'a>(summary: &'a Value, arm: &str) -> &'a Value {
    summary["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["strategy"] == arm)
        .unwrap_or_else(|| panic!("no arm {arm} in summary.json"))
}

/// Each arm's log, read by Inspect: one sample per task, the conversation
/// round by round, and Acc@r, recovery and kill rate as summary.json has them.
#[test]
fn the_logs_of_an_arms_run_read_in_inspect_as_its_summary_says() {
    let Some(run) = arms_run() else { return };
    eprintln!("tools: {}", inspect::tool_versions());
    let summary = read_json(&run.join("summary.json"));
    let task_ids = read_json(&run.join("run.json"))["provenance"]["task_ids"].clone();
    let logs = files(&run.join("inspect"), "eval");
    assert_eq!(logs.len(), 2, "one log per arm: {logs:?}");
    for (log, arm) in logs.iter().zip(["none", "parsed"]) {
        assert!(
            log.to_string_lossy().ends_with(&format!("_{arm}.eval")),
            "{log:?}"
        );
        let digest = inspect::read_with_inspect(log);
        let expected = arm_summary(&summary, arm);
        assert_eq!(digest["status"], "success");
        assert_eq!(digest["eval"]["task"], "math");
        assert_eq!(digest["eval"]["model"], "retrace/oracle-faults");
        assert_eq!(digest["eval"]["dataset"]["sample_ids"], task_ids);
        let metrics = &digest["results"]["scores"][0]["metrics"];
        let accs = expected["accuracy_by_round"].as_array().unwrap();
        assert_eq!(accs.len(), 3);
        for (r, acc) in accs.iter().enumerate() {
            assert_eq!(metrics[format!("Acc@{r}")], acc["value"], "{arm} Acc@{r}");
        }
        assert_eq!(metrics["accuracy"], accs[2]["value"]);
        assert_eq!(metrics["recovery"], expected["recovery_rate"]["value"]);
        assert_eq!(
            metrics["kill_rate"],
            expected["kill_rate"]["total"]["value"]
        );
        let samples = digest["samples"].as_array().unwrap();
        assert_eq!(samples.len(), TASKS);
        let correct = samples
            .iter()
            .filter(|s| s["scores"]["retrace_check"]["value"] == "C")
            .count() as u64;
        assert_eq!(Some(correct), accs[2]["successes"].as_u64(), "{arm}");
        for s in samples {
            let roles: Vec<&str> = s["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(&roles[..3], ["system", "user", "assistant"], "{s}");
            // Every round's reply follows the message the model was given.
            assert!(roles.len() % 2 == 1, "{roles:?}");
            assert!(s["target"].as_str().is_some_and(|t| !t.is_empty()), "{s}");
        }
        // oracle:faults fails round 0 on purpose: each repair message
        // carries the failure with parsed feedback, nothing with none.
        let repaired = samples
            .iter()
            .find(|s| s["message_count"].as_u64() > Some(3));
        let repaired = repaired.expect("a repaired task");
        let feedback = repaired["texts"][3].as_str().unwrap();
        if arm == "parsed" {
            assert!(feedback.contains("Error"), "{feedback}");
        }
    }
}

/// The logs open in Inspect's viewer: the bundle served with byte ranges,
/// the samples list with the metrics, a sample's messages and transcript.
#[test]
fn the_logs_of_an_arms_run_render_in_inspects_viewer() {
    let Some(run) = arms_run() else { return };
    let shown = inspect::view_bundle(&run.join("inspect"));
    assert!(shown.errors.is_empty(), "viewer errors: {:?}", shown.errors);
    assert!(shown.ranges_answered() > 0, "the viewer read no byte range");
    let ids = read_json(&run.join("run.json"))["provenance"]["task_ids"].clone();
    let first = ids[0].as_str().unwrap();
    assert!(shown.samples.text.contains(first), "{}", shown.samples.text);
    // The header's metrics (the viewer shows their names in capitals).
    let header = shown.samples.text.to_lowercase();
    for metric in ["acc@0", "acc@2", "accuracy", "kill_rate"] {
        assert!(header.contains(metric), "{metric}: {}", shown.samples.text);
    }
    assert!(
        shown.sample.text.contains("```python"),
        "the sample's messages show the replies: {}",
        shown.sample.text
    );
    assert!(
        shown.transcript.text.contains("answer"),
        "{}",
        shown.transcript.text
    );
    for page in [&shown.samples, &shown.sample, &shown.transcript] {
        assert!(page.settled, "{} never settled", page.route);
        assert!(page.colours() > 8, "{} looks blank", page.route);
    }
}

/// The run's EEE records validate against EEE's schemas and validator, and
/// their numbers are summary.json's.
#[test]
fn the_eee_records_of_an_arms_run_validate_and_equal_its_summary() {
    let Some(run) = arms_run() else { return };
    let out = tempfile::tempdir().unwrap();
    let export = common::retrace([
        "export",
        "eee",
        run.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
        "--organization",
        "retrace tests",
    ])
    .run();
    assert!(export.success(), "{}", export.stderr);
    let errors = eee::validate_eee(out.path());
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let summary = read_json(&run.join("summary.json"));
    let aggregates = files(out.path(), "json");
    assert_eq!(aggregates.len(), 1, "one model: {aggregates:?}");
    let record = read_json(&aggregates[0]);
    let results = record["evaluation_results"].as_array().unwrap();
    for arm in ["parsed", "none"] {
        let expected = arm_summary(&summary, arm);
        for (r, acc) in expected["accuracy_by_round"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let id = format!("{arm}/acc@{r}");
            let found = results
                .iter()
                .find(|x| x["evaluation_result_id"] == id.as_str())
                .unwrap_or_else(|| panic!("no result {id}"));
            assert_eq!(found["score_details"]["score"], acc["value"], "{id}");
        }
    }
    let instances = files(out.path(), "jsonl");
    let lines = std::fs::read_to_string(&instances[0]).unwrap();
    assert_eq!(lines.lines().count(), 2 * TASKS);
}

/// An interrupted run exports as a cancelled eval with what it finished;
/// resumed, it exports as a finished one with the summary's numbers.
#[test]
fn a_resumed_run_exports_what_its_journal_then_says() {
    let Some(run) = arms_run() else { return };
    let copy = tempfile::tempdir().unwrap();
    let dir = copy.path().join("run");
    copy_dir(run, &dir);
    std::fs::remove_dir_all(dir.join("inspect")).unwrap();
    // Cut the journal after its first half: tasks unfinished.
    let journal = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[..lines.len() / 2].join("\n") + "\n";
    std::fs::write(&journal, kept).unwrap();
    let export = |args: &[&str]| {
        let mut all = vec!["export", "inspect", dir.to_str().unwrap()];
        all.extend(args);
        let ran = common::retrace(all).run();
        assert!(ran.success(), "{}", ran.stderr);
    };
    export(&[]);
    let cut = files(&dir.join("inspect"), "eval");
    let digest = inspect::read_with_inspect(&cut[0]);
    assert_eq!(digest["status"], "cancelled");
    let resumed = common::retrace(["run", "--resume", dir.to_str().unwrap(), "--inspect-log"])
        .image(ImageName::Fat)
        .run();
    assert!(resumed.success(), "{}", resumed.stderr);
    let summary = read_json(&dir.join("summary.json"));
    for (log, arm) in files(&dir.join("inspect"), "eval")
        .iter()
        .zip(["none", "parsed"])
    {
        let digest = inspect::read_with_inspect(log);
        assert_eq!(digest["status"], "success");
        let metrics = &digest["results"]["scores"][0]["metrics"];
        let accs = &arm_summary(&summary, arm)["accuracy_by_round"];
        assert_eq!(metrics["Acc@2"], accs[2]["value"]);
    }
    // The .json format of the same run reads the same.
    export(&[
        "--format",
        "json",
        "--out",
        copy.path().join("json").to_str().unwrap(),
    ]);
    let json_logs = files(&copy.path().join("json"), "json");
    assert_eq!(json_logs.len(), 2);
    let digest = inspect::read_with_inspect(&json_logs[1]);
    assert_eq!(digest["samples"].as_array().unwrap().len(), TASKS);
}

/// A finished run of one arm exported to Inspect and EEE, read by both:
/// one sample per task with the summary's Acc@K, and valid records.
/// Used on the real model's run (`local_model`).
pub fn assert_exports_read(run: &Path) {
    for kind in ["inspect", "eee"] {
        let ran = common::retrace(["export", kind, run.to_str().unwrap()]).run();
        assert!(ran.success(), "export {kind}: {}", ran.stderr);
    }
    let summary = read_json(&run.join("summary.json"));
    let tasks = summary["tasks"].as_u64().unwrap() as usize;
    let logs = files(&run.join("inspect"), "eval");
    assert_eq!(logs.len(), 1, "{logs:?}");
    let digest = inspect::read_with_inspect(&logs[0]);
    assert_eq!(digest["samples"].as_array().unwrap().len(), tasks);
    let accs = summary["accuracy_by_round"].as_array().unwrap();
    let metrics = &digest["results"]["scores"][0]["metrics"];
    assert_eq!(metrics["accuracy"], accs[accs.len() - 1]["value"]);
    let errors = eee::validate_eee(&run.join("eee"));
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// What is not a run, or a record without a publisher, is refused as a
/// usage error naming it.
#[test]
fn exporting_what_is_not_a_run_is_a_usage_error() {
    let empty = tempfile::tempdir().unwrap();
    for kind in ["inspect", "eee"] {
        let ran = common::retrace(["export", kind, empty.path().to_str().unwrap()]).run();
        assert_eq!(ran.code, 2, "{}", ran.stderr);
        assert!(ran.stderr.contains("run.json"), "{}", ran.stderr);
    }
    let ran = common::retrace([
        "export",
        "eee",
        empty.path().to_str().unwrap(),
        "--organization",
        " ",
    ])
    .run();
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("--organization"), "{}", ran.stderr);
}
