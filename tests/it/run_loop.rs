//! `retrace run` end to end: real model stand-ins, real confined kernels,
//! the journal, resume and the summary. Runs whose results are the subject,
//! not the binary, are made in process (`common::run`).

use crate::common::{self, retrace};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use retrace::pyenv::ImageName;

fn records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

fn accuracy(s: &serde_json::Value, round: usize) -> f64 {
    s["accuracy_by_round"][round]["value"].as_f64().unwrap()
}

/// Every task has its rounds 0..=last with no gap or duplicate, a reply per
/// round, and exactly one final record.
fn assert_consistent(recs: &[serde_json::Value], tasks: usize) {
    let mut by_task: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in recs {
        by_task
            .entry(r["task_id"].as_str().unwrap().to_string())
            .or_default()
            .push(r["round"].as_u64().unwrap());
        assert!(r["reply"].is_string(), "a round without a reply: {r}");
    }
    assert_eq!(by_task.len(), tasks);
    for (task, rounds) in &by_task {
        let want: Vec<u64> = (0..rounds.len() as u64).collect();
        assert_eq!(rounds, &want, "rounds of {task}");
    }
    let finals = recs.iter().filter(|r| !r["stop"].is_null()).count();
    assert_eq!(finals, tasks);
}

/// `oracle:faults` on `suite` with 2 rounds: every fault is repaired by
/// round 2, and the journal and reports say so.
fn assert_faults_repaired(dir: &Path) {
    let s = summary(dir);
    let tasks = s["tasks"].as_u64().unwrap() as usize;
    assert!(accuracy(&s, 0) < accuracy(&s, 2), "{s}");
    assert_eq!(accuracy(&s, 2), 1.0, "every fault is repaired: {s}");
    assert_eq!(s["synthetic_model"], true);
    assert_eq!(s["schema_version"], 2);
    assert_consistent(&records(dir), tasks);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("SYNTHETIC MODEL"));
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.starts_with("metric,round,value,ci_low,ci_high,n"));
}

/// In process: the binary is not what these suites test.
fn run_suite(suite: &str) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let mut opts = common::run::options(suite, "oracle:faults", &dir);
    // Room for a cold pandas import on a loaded machine: a round-0
    // timeout costs `oracle:faults` a round (it never saw its fault raise).
    opts.spec.execution.limits.timeout = Duration::from_secs(60);
    common::run::blocking(opts);
    assert_faults_repaired(&dir);
}

/// The math suite through `retrace run`, whose last line is checked too.
#[test]
fn oracle_faults_math_recovers_everything() {
    if common::lacks_root() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        "math",
        "--model",
        "oracle:faults",
        "--rounds",
        "2",
        // Room for a cold pandas import on a loaded machine: a round-0
        // timeout costs `oracle:faults` a round (it never saw its fault raise).
        "--timeout",
        "60s",
        "--out",
        dir.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert!(o.success(), "{}", o.stderr);
    assert_faults_repaired(&dir);
    let stdout = &o.stdout;
    assert!(stdout.contains("Acc@2 100.0%"), "{stdout}");
}

/// `--sample-tagged`: the share of the sample drawn from a tag, recorded in
/// run.json; without `--sample` it is refused before anything runs.
#[test]
fn a_tagged_sample_takes_its_share_from_the_tag() {
    if common::lacks_root() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let refused = retrace([
        "run",
        "--model",
        "oracle",
        "--sample-tagged",
        "organic-error=2",
    ])
    .run();
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--sample"), "{}", refused.stderr);
    let o = retrace([
        "run",
        "--suite",
        "math",
        "--model",
        "oracle",
        "--sample",
        "4",
        "--sample-tagged",
        "organic-error=3",
        "--seed",
        "5",
        "--out",
        dir.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert!(o.success(), "{}", o.stderr);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        run["spec"]["tasks"]["selection"]["sample_tagged"],
        serde_json::json!({"tag": "organic-error", "count": 3})
    );
    let ids: BTreeSet<String> = records(&dir)
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("math-org-")).count(),
        3,
        "{ids:?}"
    );
}

#[test]
fn oracle_faults_tabular_recovers_everything() {
    if common::lacks_root() {
        return;
    }
    run_suite("tabular");
}

#[test]
fn oracle_faults_packages_recovers_everything() {
    if common::lacks_root() {
        return;
    }
    run_suite("packages");
}

const HOSTILE_REPLIES: [(&str, &str, &str); 3] = [
    (
        "loop",
        "```python\nwhile True:\n    pass\n```",
        "timeout_cpu",
    ),
    (
        "oom",
        "```python\nblocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2**20))\n```",
        "oom_killed",
    ),
    (
        "bomb",
        "```python\nimport os\nwhile True:\n    os.fork()\n```",
        "pids_limit",
    ),
];

#[test]
fn hostile_replies_are_killed_classified_and_repaired() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut tasks = String::new();
    let mut replies = String::new();
    for (id, hostile, _) in HOSTILE_REPLIES {
        tasks.push_str(
            &serde_json::json!({
                // Distinct questions: replay recognises a task by its question.
                "id": id, "question": format!("What is 6 times 7? ({id})"),
                "expected": {"type": "number", "value": 42},
                "reference": "answer = 6 * 7",
            })
            .to_string(),
        );
        tasks.push('\n');
        for (round, reply) in [(0, hostile), (1, "```python\nanswer = 6 * 7\n```")] {
            replies.push_str(
                &serde_json::json!({"task_id": id, "round": round, "reply": reply}).to_string(),
            );
            replies.push('\n');
        }
    }
    let suite = dir.path().join("tasks.jsonl");
    let replay = dir.path().join("replies.jsonl");
    std::fs::write(&suite, tasks).unwrap();
    std::fs::write(&replay, replies).unwrap();
    let out = dir.path().join("run");
    let model = format!("replay:{}", replay.display());
    let mut opts = common::run::options(suite.to_str().unwrap(), &model, &out);
    opts.spec.execution.limits.memory_bytes = 256 << 20;
    opts.spec.execution.limits.pids = 64;
    // The wall limit far above the CPU limit, so that the busy loop
    // ends on CPU time even when it gets a fraction of a core.
    opts.spec.execution.limits.cpu_time = Duration::from_secs(2);
    opts.spec.execution.limits.timeout = Duration::from_secs(60);
    opts.spec.execution.concurrency = 1;
    common::run::blocking(opts);
    let recs = records(&out);
    for (id, _, verdict) in HOSTILE_REPLIES {
        let round = |n: u64| {
            recs.iter()
                .find(|r| r["task_id"] == id && r["round"] == n)
                .unwrap_or_else(|| panic!("{id} round {n} missing"))
        };
        let r0 = round(0);
        assert_eq!(r0["outcome"]["verdict"], verdict, "{id}: {}", r0["outcome"]);
        assert_eq!(r0["correct"], false);
        let r1 = round(1);
        let repair = r1["prompt"][0]["parts"][0]["text"].as_str().unwrap();
        assert!(!repair.is_empty());
        if verdict != "timeout_cpu" {
            assert!(
                repair.contains("variables are gone"),
                "{id}: the repair prompt says the kernel was restarted: {repair}"
            );
        }
        assert_eq!(r1["outcome"]["verdict"], "ok");
        assert_eq!(r1["correct"], true, "{id} recovers");
        assert_eq!(r1["stop"], "clean_answer");
    }
    let s = summary(&out);
    assert_eq!(accuracy(&s, 0), 0.0);
    assert_eq!(accuracy(&s, 1), 1.0);
    assert_eq!(
        s["kill_rate"]["counts"].as_object().unwrap().len(),
        3,
        "{s}"
    );
}

#[test]
fn resume_after_kill_9_gives_the_same_results() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let common_args = [
        "--suite",
        "math",
        "--model",
        "oracle:faults",
        "--rounds",
        "2",
        "--limit-tasks",
        "16",
        "--concurrency",
        "2",
    ];
    // An uninterrupted run for reference.
    let full = dir.path().join("full");
    let mut args = vec!["run"];
    args.extend(common_args);
    args.extend(["--out", full.to_str().unwrap()]);
    assert!(retrace(&args).image(ImageName::Fat).run().success());

    // The same run, killed with SIGKILL once a few rounds are in.
    let cut = dir.path().join("cut");
    let mut args = vec!["run".to_string()];
    args.extend(common_args.iter().map(|s| s.to_string()));
    args.extend(["--out".into(), cut.to_str().unwrap().into()]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = cut.join("results.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let lines = std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines >= 7 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = records(&cut).len();
    assert!(before < records(&full).len(), "the run was cut short");

    let o = retrace(["run", "--resume", cut.to_str().unwrap()])
        .image(ImageName::Fat)
        .run();
    assert!(o.success(), "{}", o.stderr);

    let key = |r: &serde_json::Value| {
        (
            r["task_id"].as_str().unwrap().to_string(),
            r["round"].as_u64().unwrap(),
            r["correct"].as_bool().unwrap(),
            r["outcome"]["verdict"].as_str().map(String::from),
            r["code"].as_str().map(String::from),
        )
    };
    let resumed: Vec<_> = records(&cut).iter().map(key).collect();
    let unique: BTreeSet<_> = resumed.iter().map(|k| (k.0.clone(), k.1)).collect();
    assert_eq!(unique.len(), resumed.len(), "no duplicated rounds");
    let a: BTreeSet<_> = resumed.into_iter().collect();
    let b: BTreeSet<_> = records(&full).iter().map(key).collect();
    assert_eq!(a, b, "resumed results equal the uninterrupted run");
    assert_consistent(&records(&cut), 16);
    let (s1, s2) = (summary(&full), summary(&cut));
    assert_eq!(s1["accuracy_by_round"], s2["accuracy_by_round"]);
}

#[test]
fn a_malformed_dataset_line_stops_the_run_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("bad.jsonl");
    std::fs::write(
        &suite,
        "{\"id\": \"a\", \"question\": \"q\", \"expected\": {\"type\": \"number\", \"value\": 1}}\n{\"id\": \"b\", \"question\": \n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        suite.to_str().unwrap(),
        "--model",
        "oracle",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert_eq!(o.code, 2);
    let err = &o.stderr;
    assert!(err.contains("bad.jsonl:2"), "{err}");
    assert!(!out.exists(), "the run did not start");
}

#[test]
fn every_builtin_reference_validates() {
    if common::lacks_root() {
        return;
    }
    for suite in ["math", "tabular", "packages", "competition", "resource"] {
        let o = retrace(["tasks", "validate", suite, "--jobs", "2"])
            .image(ImageName::Fat)
            .run();
        let stdout = &o.stdout;
        assert!(o.success(), "{suite}:\n{stdout}\n{}", o.stderr);
        assert!(stdout.contains("references check correct"));
    }
}

/// The resource suite's references, sent by `oracle`, run in confined fat
/// kernels under the default limits of memory, CPU time and output (the
/// wall time raised: the slowest reference needs 3 s of CPU, which a
/// loaded machine may stretch past 10 s of wall): every task is right at
/// round 0, no round presses a limit (no verdict but `ok`, nothing in
/// `fired`), and the summary has no kill class.
#[test]
fn the_resource_suites_references_run_within_the_default_limits() {
    if common::lacks_root() {
        return;
    }
    let datasets = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets");
    let n = retrace::task::load::load_suite("resource", &datasets)
        .unwrap()
        .len();
    assert!((12..=20).contains(&n), "{n}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        "resource",
        "--model",
        "oracle",
        "--rounds",
        "1",
        "--timeout",
        "60s",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert!(o.success(), "{o}");
    let recs = records(&out);
    assert_eq!(recs.len(), n, "one round each");
    for r in &recs {
        let outcome = &r["outcome"];
        assert_eq!(outcome["verdict"], "ok", "{}: {outcome:#}", r["task_id"]);
        assert!(
            outcome.get("fired").is_none(),
            "{}: {outcome:#}",
            r["task_id"]
        );
        assert_eq!(r["correct"], true, "{}", r["task_id"]);
    }
    let s = summary(&out);
    assert_eq!(s["accuracy_by_round"][0]["successes"], n as u64, "{s:#}");
    assert!(s["kill_recovery"].is_null(), "{s:#}");
}

/// Scripted first attempts at resource tasks, the natural ones that press a
/// limit, then their references: each kill is told with its limit and
/// what was observed, and the summary gives recovery per kill class and
/// the repairs that ran within the limits (an output flood sent twice is
/// a repair that did not).
#[test]
fn kills_on_the_resource_suite_are_reported_per_class() {
    if common::lacks_root() {
        return;
    }
    let datasets = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets");
    let tasks = retrace::task::load::load_suite("resource", &datasets).unwrap();
    let reference = |id: &str| {
        let t = tasks.iter().find(|t| t.id == id).unwrap();
        t.reference.clone().unwrap()
    };
    let naive: [(&str, &[&str]); 5] = [
        (
            "res-mem-001",
            &["import numpy as np\nx = (7919 * np.arange(1, 100001)) % 100003\nanswer = int(np.abs(np.subtract.outer(x, x)).sum())"],
        ),
        (
            "res-mem-004",
            &["nums = list(range(1, 123456790))\nanswer = sum(sum(map(int, str(i))) for i in nums)"],
        ),
        (
            "res-cpu-001",
            &["answer = sum(1 for n in range(1, 10**9 + 1) if (n % 3 == 0 or n % 5 == 0) and n % 7 != 0)"],
        ),
        (
            "res-rec-001",
            &["from functools import lru_cache\n@lru_cache(None)\ndef T(n):\n    return 0 if n == 0 else (T(n - 1) + T(n // 2) + 1) % 1000000007\nanswer = T(100000)"],
        ),
        (
            "res-out-002",
            &[
                "row = [1]\nodd = 0\nfor n in range(20000):\n    print(' '.join(map(str, row)))\n    odd += sum(row)\n    row = [1] + [(a + b) % 2 for a, b in zip(row, row[1:])] + [1]\nanswer = odd",
                "row = [1]\nodd = 0\nfor n in range(20000):\n    print(*row)\n    odd += sum(row)\n    row = [1] + [(a + b) % 2 for a, b in zip(row, row[1:])] + [1]\nanswer = odd",
            ],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    let mut ids = Vec::new();
    for (id, attempts) in naive {
        ids.push(id);
        let fixed = reference(id);
        let codes = attempts.iter().map(|c| c.to_string()).chain([fixed]);
        for (round, code) in codes.enumerate() {
            let reply = format!("```python\n{code}\n```");
            let line = serde_json::json!({"task_id": id, "round": round, "reply": reply});
            lines.push_str(&format!("{line}\n"));
        }
    }
    let replay = dir.path().join("replies.jsonl");
    std::fs::write(&replay, lines).unwrap();
    // These five tasks of the suite (math, no files), as a suite of their own.
    let suite_text = std::fs::read_to_string(datasets.join("resource/tasks.jsonl")).unwrap();
    let mine: Vec<&str> = suite_text
        .lines()
        .filter(|l| {
            ids.iter()
                .any(|id| l.contains(&format!("\"id\": \"{id}\"")))
        })
        .collect();
    assert_eq!(mine.len(), ids.len());
    let suite = dir.path().join("tasks.jsonl");
    std::fs::write(&suite, mine.join("\n") + "\n").unwrap();
    let out = dir.path().join("run");
    let model = format!("replay:{}", replay.display());
    // The default limits but more time: CPU time far above the wall time,
    // so that the loop (it would run for hours) ends on the wall, busy
    // machine or not; and a wall time far above what IPython needs to
    // format the RecursionError's 3000 frames (1.7 s with a core; a
    // quarter of a core took it past 10 s).
    let o = retrace([
        "run",
        "--suite",
        suite.to_str().unwrap(),
        "--model",
        &model,
        "--rounds",
        "2",
        "--timeout",
        "30s",
        "--cpu-time",
        "120s",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert!(o.success(), "{o}");
    let recs = records(&out);
    let round = |id: &str, n: u64| {
        recs.iter()
            .find(|r| r["task_id"] == id && r["round"] == n)
            .unwrap_or_else(|| panic!("{id} round {n} missing"))
    };
    let told = |id: &str, n: u64| {
        round(id, n)["prompt"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (id, verdict, says) in [
        ("res-mem-001", "error", "raised MemoryError (the memory limit is 512M; the kernel's peak memory use was "),
        ("res-mem-004", "oom_killed", "exceeded the memory limit of 512M and was killed (the kernel's peak memory use was "),
        ("res-cpu-001", "timeout_wall", "within 30s of wall time and was stopped (it had run for "),
        ("res-rec-001", "error", "Python's recursion limit (sys.getrecursionlimit()) and raised RecursionError (its traceback shows "),
        ("res-out-002", "output_limit", "printed more than 1M of output (it printed at least "),
    ] {
        assert_eq!(round(id, 0)["outcome"]["verdict"], verdict, "{id}");
        let text = told(id, 1);
        assert!(text.contains(says), "{id}: {text}");
    }
    assert!(
        told("res-cpu-001", 1).contains(" of CPU time)"),
        "the CPU time beside the wall time"
    );
    let s = summary(&out);
    assert_eq!(s["accuracy_by_round"][2]["successes"], 5, "{s:#}");
    let kills = &s["kill_recovery"];
    let rate = |class: &str, field: &str| {
        let r = &kills[class][field];
        (r["successes"].as_u64().unwrap(), r["n"].as_u64().unwrap())
    };
    for class in [
        "memory",
        "memory_unconfirmed",
        "wall",
        "recursion",
        "output",
    ] {
        assert_eq!(kills[class]["tasks"], 1, "{class}: {kills:#}");
        assert_eq!(rate(class, "recovery"), (1, 1), "{class}: {kills:#}");
    }
    for class in ["memory", "memory_unconfirmed", "wall", "recursion"] {
        assert_eq!(rate(class, "within_limits"), (1, 1), "{class}: {kills:#}");
    }
    assert_eq!(kills["output"]["executions"], 2, "{kills:#}");
    assert_eq!(rate("output", "within_limits"), (0, 1), "flooded again");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("### Repair after kills"), "{report}");
}

/// The packages suite's references in slim kernels that get what they
/// import through the dynamic strategy (store hits after the first).
#[test]
fn packages_references_validate_with_dynamic_installs() {
    if common::lacks_root() {
        return;
    }
    let o = retrace([
        "tasks",
        "validate",
        "packages",
        "--strategy",
        "dynamic",
        "--jobs",
        "2",
    ])
    .image(ImageName::Fat)
    .run();
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}\n{}", o.stderr);
    assert!(stdout.contains("references check correct"));
    // Every reference imports something the slim image lacks.
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok ")).collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|l| l.contains("[installed ")), "{stdout}");
}

fn tiny_suite(dir: &Path, ids: &[&str]) -> String {
    let lines: Vec<String> = ids
        .iter()
        .map(|id| {
            serde_json::json!({
                "id": id, "question": format!("What is 6 times 7? ({id})"),
                "expected": {"type": "number", "value": 42},
                "reference": "answer = 6 * 7",
            })
            .to_string()
        })
        .collect();
    let path = dir.join("tiny.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

#[test]
fn infrastructure_errors_exit_3_unless_allowed() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = tiny_suite(dir.path(), &["a", "b"]);
    // A port nothing listens on: every request fails at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let args = |out: &str, allowed: &str| {
        vec![
            "run".to_string(),
            "--suite".into(),
            suite.clone(),
            "--model".into(),
            "openai:down".into(),
            "--base-url".into(),
            url.clone(),
            "--api-key".into(),
            "none".into(),
            "--max-retries".into(),
            "0".into(),
            "--max-infra-errors".into(),
            allowed.into(),
            "--out".into(),
            dir.path().join(out).display().to_string(),
        ]
    };
    let strict: Vec<String> = args("strict", "0");
    let o = retrace(&strict).image(ImageName::Fat).run();
    assert_eq!(o.code, 3, "{}", o.stderr);
    let s = summary(&dir.path().join("strict"));
    assert_eq!(
        s["infra_error_rate"]["successes"], 2,
        "reports are written: {s}"
    );
    assert!(o.stderr.contains("--max-infra-errors"));

    let lenient: Vec<String> = args("lenient", "2");
    let o = retrace(&lenient).image(ImageName::Fat).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn ctrl_c_exits_130_and_the_run_resumes() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = tiny_suite(dir.path(), &["a", "b", "c", "d"]);
    let replies: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| {
            serde_json::json!({"task_id": id, "round": 0,
                "reply": "```python\nimport time\ntime.sleep(2)\nanswer = 42\n```"})
            .to_string()
        })
        .collect();
    let replay = dir.path().join("replies.jsonl");
    std::fs::write(&replay, replies.join("\n") + "\n").unwrap();
    let out = dir.path().join("run");
    common::image(ImageName::Fat);
    let child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "run",
            "--suite",
            &suite,
            "--model",
            &format!("replay:{}", replay.display()),
            "--concurrency",
            "1",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the first task is recorded.
    let journal = out.join("results.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 1 {
        assert!(std::time::Instant::now() < deadline, "no record appeared");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("--resume"), "{err}");
    let done = records(&out).len();
    assert!(
        (1..4).contains(&done),
        "{done} tasks recorded before Ctrl-C"
    );

    let o = retrace(["run", "--resume", out.to_str().unwrap()])
        .image(ImageName::Fat)
        .run();
    assert!(o.success(), "{}", o.stderr);
    assert_consistent(&records(&out), 4);
    assert_eq!(accuracy(&summary(&out), 0), 1.0);
}

/// With stderr piped (a CI log), progress is plain lines instead of a bar:
/// a run this short prints only its final line, with the bar's facts.
#[test]
fn progress_without_a_terminal_is_plain_lines() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = tiny_suite(dir.path(), &["a", "b", "c"]);
    let out = dir.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        &suite,
        "--model",
        "oracle",
        "--rounds",
        "0",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    let err = &o.stderr;
    assert!(o.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" tasks, Acc ")).collect();
    let last = lines
        .last()
        .unwrap_or_else(|| panic!("no progress line in:\n{err}"));
    assert!(last.starts_with('['), "elapsed first: {last}");
    assert!(
        last.ends_with("] 3/3 tasks, Acc 100%, 0 kills"),
        "final line: {last}"
    );
    // Plain text only: no bar, no cursor movement or colour.
    assert!(!err.contains('\u{1b}'), "{err}");
    assert!(!err.contains('\r'), "{err}");
}

/// `--skip-invalid` end to end: the valid records run, the flawed one is
/// named on stderr and recorded in run.json, report.md and report.html.
#[test]
fn skip_invalid_runs_the_valid_records_and_records_the_rest() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = tiny_suite(dir.path(), &["a", "b"]);
    let mut text = std::fs::read_to_string(&suite).unwrap();
    text.push_str("{\"id\": \"c\", \"question\": \"no expected answer\"}\n");
    text.push_str("{\"id\": \"d\", \"question\": \n");
    std::fs::write(&suite, text).unwrap();
    let out = dir.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        &suite,
        "--model",
        "oracle",
        "--rounds",
        "0",
        "--skip-invalid",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    let err = &o.stderr;
    assert!(o.success(), "{err}");
    for line in ["tiny.jsonl:3", "tiny.jsonl:4"] {
        assert!(err.contains(line), "{line} named on stderr: {err}");
    }
    let recs = records(&out);
    assert_consistent(&recs, 2);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["spec"]["tasks"]["skip_invalid"], true, "{run}");
    let skipped = run["provenance"]["skipped"]
        .as_array()
        .expect("skipped records in run.json");
    assert_eq!(skipped.len(), 2, "{run}");
    assert_eq!(
        (&skipped[0]["line"], &skipped[0]["id"]),
        (&3.into(), &"c".into())
    );
    assert_eq!(skipped[1]["line"], 4);
    for report in ["report.md", "report.html"] {
        let text = std::fs::read_to_string(out.join(report)).unwrap();
        for line in ["tiny.jsonl:3", "tiny.jsonl:4"] {
            assert!(text.contains(line), "{report} names {line}");
        }
    }
}
