//! The golden run: `retrace run` of a fixed deterministic configuration
//! (`oracle:faults` on 10 math tasks, `--feedback parsed+state`, 2 repair
//! rounds, confined fat kernels) must give, record for record and field
//! for field, the journal and summary that retrace gave before its
//! restructuring (`tests/fixtures/golden_run/`). Only what measures the
//! machine is left out: run ids, timings (the budget curve's too),
//! latencies, kernel uids, memory peaks and the image's size on disk. `RETRACE_BLESS=1` rewrites the fixture from this run,
//! for a change that is meant to change behaviour. The run's run.json,
//! records and summary.json must also match docs/schemas/ (`fast::schemas`).

use crate::common;
use crate::fast::schemas;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/golden_run"
    ))
}

/// The golden run's command line, but its `--out`.
pub(crate) const ARGS: &[&str] = &[
    "run",
    "--suite",
    "math",
    "--model",
    "oracle:faults",
    "--rounds",
    "2",
    "--feedback",
    "parsed+state",
    "--limit-tasks",
    "10",
];

/// The fixture's records (by arm, task and round) and summary.
pub(crate) fn expected() -> (BTreeMap<(String, String, u64), Value>, Value) {
    let read = |name: &str| std::fs::read_to_string(fixture().join(name)).unwrap();
    // Normalized like the run's: a key left out later is left out of both.
    let want = summary(serde_json::from_str(&read("summary.json")).unwrap());
    (records(&read("results.jsonl")), want)
}

/// A record without what measures the machine.
fn record(mut r: Value) -> Value {
    let o = r.as_object_mut().expect("a record is an object");
    o.remove("run_id");
    o.remove("timings_ms");
    if let Some(spent) = o.get_mut("cumulative").and_then(Value::as_object_mut) {
        spent.remove("model_ms");
        spent.remove("exec_ms");
    }
    if let Some(outcome) = o.get_mut("outcome").and_then(Value::as_object_mut) {
        for key in ["kernel_uid", "memory_peak_bytes", "timings_ms"] {
            outcome.remove(key);
        }
    }
    r
}

/// A summary (and its arms) without what measures the machine.
pub(crate) fn summary(mut s: Value) -> Value {
    let o = s.as_object_mut().expect("a summary is an object");
    for key in [
        "run_id",
        "latency_ms",
        "kernel_start_ms",
        "memory_peak_bytes",
        // The image's size on this machine's disk (bytecode Python wrote
        // into it, the filesystem's blocks).
        "image_bytes",
    ] {
        o.remove(key);
    }
    // The budget curve's times are the machine's; its tokens and accuracy stay.
    if let Some(points) = o.get_mut("budget_curve").and_then(Value::as_array_mut) {
        for p in points.iter_mut().filter_map(Value::as_object_mut) {
            for key in ["model_ms", "exec_ms", "wall_ms"] {
                p.remove(key);
            }
        }
    }
    // Where the time went is the machine's; what the server reported stays.
    if let Some(time) = o.get_mut("time").and_then(Value::as_object_mut) {
        time.retain(|k, _| !k.ends_with("_ms") && !k.ends_with("_share"));
    }
    // Tokens per second divide by the machine's time.
    if let Some(tokens) = o.get_mut("tokens").and_then(Value::as_object_mut) {
        tokens.remove("per_second");
    }
    // So are the latencies of each arm's comparison with the baseline.
    if let Some(all) = o.get_mut("comparisons").and_then(Value::as_array_mut) {
        for c in all.iter_mut().filter_map(Value::as_object_mut) {
            c.retain(|k, _| !k.contains("latency"));
        }
    }
    if let Some(arms) = o.get_mut("arms").and_then(Value::as_array_mut) {
        for arm in arms {
            *arm = summary(arm.take());
        }
    }
    s
}

/// Records by (arm, task, round): concurrency decides the journal's order.
pub(crate) fn records(text: &str) -> BTreeMap<(String, String, u64), Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r = record(serde_json::from_str(l).expect("a record"));
            // `arm` since arms; older journals name the arm `strategy`.
            let arm = r.get("arm").unwrap_or(&r["strategy"]);
            let key = (
                arm.as_str().unwrap_or_default().to_string(),
                r["task_id"].as_str().unwrap_or_default().to_string(),
                r["round"].as_u64().unwrap_or_default(),
            );
            (key, r)
        })
        .collect()
}

#[test]
fn a_deterministic_run_gives_the_golden_records_and_summary() {
    if common::lacks_root() {
        return;
    }
    common::image(retrace::pyenv::ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let ran = common::retrace(ARGS.iter().copied().chain(["--out", out.to_str().unwrap()])).run();
    assert_eq!(ran.code, 0, "{ran}");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    schemas::assert_valid("run", "run.json", &read("run.json"));
    for (i, line) in read("results.jsonl").lines().enumerate() {
        schemas::assert_valid("record", &format!("results.jsonl:{}", i + 1), line);
    }
    schemas::assert_valid("summary", "summary.json", &read("summary.json"));
    let got_records = records(&std::fs::read_to_string(out.join("results.jsonl")).unwrap());
    let got_summary = summary(
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap(),
    );
    if std::env::var_os("RETRACE_BLESS").is_some() {
        let lines: Vec<String> = got_records.values().map(|r| r.to_string()).collect();
        std::fs::write(fixture().join("results.jsonl"), lines.join("\n") + "\n").unwrap();
        let text = serde_json::to_string_pretty(&got_summary).unwrap();
        std::fs::write(fixture().join("summary.json"), text + "\n").unwrap();
        return;
    }
    let (want_records, want_summary) = expected();
    assert_eq!(
        got_records.keys().collect::<Vec<_>>(),
        want_records.keys().collect::<Vec<_>>(),
        "the same (arm, task, round) records"
    );
    for (key, want) in &want_records {
        assert_eq!(&got_records[key], want, "record {key:?}");
    }
    assert_eq!(got_summary, want_summary, "summary.json");
}
