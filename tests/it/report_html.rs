//! `report.html` in a real headless Chromium: a run made by the oracle
//! model through the CLI, and a synthetic 1,000-task × 3-round journal.
//! Chromium's `--dump-dom` gives the page after its script ran (rows,
//! filters from the URL hash), `--enable-logging=stderr` its console, and
//! `--screenshot` what it looks like.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::json;

use retrace::pyenv::ImageName;
use retrace::record::{AttemptRecord, RunConfig, SCHEMA_VERSION};
use retrace::sandbox::SandboxLimits;

/// What headless Chromium saw of a page.
pub(crate) struct Load {
    pub(crate) dom: String,
    /// Console messages (`…:CONSOLE…] "message", source: …`).
    console: Vec<String>,
}

impl Load {
    /// The DOM without the script element (whose source names the same
    /// markup it builds).
    pub(crate) fn markup(&self) -> String {
        let start = self.dom.find("<script>").expect("the script element");
        let end = start + self.dom[start..].find("</script>").expect("its end");
        format!("{}{}", &self.dom[..start], &self.dom[end..])
    }

    fn count(&self, needle: &str) -> usize {
        self.markup().matches(needle).count()
    }

    /// Task rows in the DOM (rows not matching the filter are not built).
    pub(crate) fn rows(&self) -> usize {
        self.count("<details class=\"task-row\"")
    }

    /// Rounds shown (built when a task is opened).
    pub(crate) fn rounds(&self) -> usize {
        self.count("<div class=\"round ")
    }

    pub(crate) fn assert_clean(&self) {
        assert!(
            self.console.is_empty(),
            "console messages: {:#?}",
            self.console
        );
        assert!(
            self.dom.contains("data-ready=\"1\""),
            "the page's script did not finish"
        );
    }
}

fn chromium_cmd(profile: &Path) -> Command {
    let mut cmd = Command::new(common::chromium::path());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        // Chromium's own clock: the dump waits until the page is idle or
        // this much virtual time has passed, whatever the machine's load.
        "--virtual-time-budget=30000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// Loads `page` with `hash` and returns the DOM after its script ran.
pub(crate) fn load(page: &Path, hash: &str) -> Load {
    let profile = tempfile::tempdir().unwrap();
    let out = chromium_cmd(profile.path())
        .arg("--dump-dom")
        .arg(url(page, hash))
        .output()
        .expect("running chromium");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    Load {
        dom: String::from_utf8(out.stdout).expect("the DOM is UTF-8"),
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}

fn url(page: &Path, hash: &str) -> String {
    let path = page.canonicalize().unwrap();
    format!("file://{}{hash}", path.display())
}

/// A screenshot of the page, decoded: (width, height, RGB pixels).
fn screenshot(page: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let profile = tempfile::tempdir().unwrap();
    let shot = profile.path().join("shot.png");
    let out = chromium_cmd(profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,2000")
        .arg(url(page, ""))
        .output()
        .expect("running chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("a screenshot"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert!(info.bit_depth == png::BitDepth::Eight && channels >= 3);
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, pixels)
}

/// Final correctness, round-0 correctness and "killed" per (arm, task),
/// from the journal: what the filters must show.
fn expected(records: &[AttemptRecord]) -> BTreeMap<(String, String), (bool, bool, bool)> {
    let mut out: BTreeMap<(String, String), Vec<&AttemptRecord>> = BTreeMap::new();
    for r in records {
        out.entry((r.strategy.clone(), r.task_id.clone()))
            .or_default()
            .push(r);
    }
    out.into_iter()
        .map(|(k, mut rs)| {
            rs.sort_by_key(|r| r.round);
            let killed = rs
                .iter()
                .any(|r| r.outcome.as_ref().is_some_and(|o| o.verdict.is_kill()));
            (k, (rs[0].correct, rs.last().unwrap().correct, killed))
        })
        .collect()
}

#[test]
fn an_oracle_run_opens_filters_and_draws_in_chromium() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let status = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "run",
            "--suite",
            "math",
            "--model",
            "oracle:faults",
            "--limit-tasks",
            "12",
            "--out",
        ])
        .arg(&dir)
        .status()
        .expect("running retrace");
    assert!(status.success(), "retrace run failed");
    let page = dir.join("report.html");
    let records = retrace::harness::journal::read(&dir.join("results.jsonl")).unwrap();
    let config: RunConfig =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let expected = expected(&records);
    assert_eq!(expected.len(), 12);

    let all = load(&page, "");
    all.assert_clean();
    assert_eq!(all.rows(), 12);
    assert!(all.dom.contains("12 of 12 shown"));

    let count =
        |f: &dyn Fn(&(bool, bool, bool)) -> bool| expected.values().filter(|v| f(v)).count();
    let filters: [(&str, usize); 4] = [
        ("failed", count(&|v| !v.1)),
        ("killed", count(&|v| v.2)),
        ("recovered", count(&|v| !v.0 && v.1)),
        ("regressed", count(&|v| v.0 && !v.1)),
    ];
    for (filter, n) in filters {
        let shown = load(&page, &format!("#filter={filter}"));
        shown.assert_clean();
        assert_eq!(shown.rows(), n, "#filter={filter}");
        assert!(shown.dom.contains(&format!("{n} of 12 shown")));
    }
    assert!(
        filters.iter().any(|(_, n)| *n != 12),
        "some filter must change what is shown: {filters:?}"
    );

    // A tag of the suite: the rows of the tasks that carry it.
    let tag = config
        .provenance
        .task_tags
        .values()
        .flatten()
        .next()
        .expect("math tasks have tags");
    let tagged = config
        .provenance
        .task_tags
        .values()
        .filter(|tags| tags.contains(tag))
        .count();
    let by_tag = load(&page, &format!("#tag={tag}"));
    by_tag.assert_clean();
    assert_eq!(by_tag.rows(), tagged, "#tag={tag}");

    // Opening a task shows its rounds: prompt, reply, code, verdict.
    let id = &config.provenance.task_ids[0];
    let opened = load(&page, &format!("#open={id}"));
    opened.assert_clean();
    assert_eq!(
        opened.rounds(),
        records.iter().filter(|r| &r.task_id == id).count()
    );
    for part in ["prompt: system", "reply", "extracted code", "verdict"] {
        assert!(
            opened.markup().contains(part),
            "no `{part}` in the opened task"
        );
    }

    let (w, h, pixels) = screenshot(&page);
    assert_eq!((w, h), (1280, 2000));
    let distinct: BTreeSet<[u8; 3]> = pixels.iter().copied().collect();
    let luma: Vec<f64> = pixels
        .iter()
        .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
        .collect();
    let mean = luma.iter().sum::<f64>() / luma.len() as f64;
    let variance = luma.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / luma.len() as f64;
    assert!(
        distinct.len() > 16 && variance > 50.0,
        "the screenshot looks blank: {} colours, luma variance {variance:.1}",
        distinct.len()
    );
}

const HOSTILE: &str =
    "<script>document.title='pwned'</script><img src=x onerror=\"document.body.dataset.pwned=1\">";

/// A journal of `tasks` tasks with rounds 0..=2: every third task fails
/// twice (an exception, then a timeout) and recovers; the others are right.
fn synthetic(tasks: usize) -> (RunConfig, Vec<AttemptRecord>) {
    let ids: Vec<String> = (0..tasks).map(|i| format!("task-{i:04}")).collect();
    let tags: BTreeMap<String, Vec<String>> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.clone(),
                vec![if i % 2 == 0 { "even" } else { "odd" }.into()],
            )
        })
        .collect();
    let config: RunConfig = serde_json::from_value(json!({
        "schema_version": SCHEMA_VERSION, "run_id": "synthetic", "retrace_version": "0",
        "created": "now", "out_dir": "x", "suite": "synthetic",
        "selection": {"limit_tasks": null, "sample": null, "seed": 0},
        "task_ids": ids, "task_tags": tags, "rounds": 2, "stop_on": "never", "concurrency": 1,
        "model": "synthetic", "synthetic_model": true,
        "generation": {"temperature": 0.0, "max_tokens": 1, "request_timeout": 1.0, "max_retries": 0},
        "strategy": "fat", "image_lock_hash": "h", "limits": SandboxLimits::default(),
        "sandbox": {"confined": true, "mode": "test", "notes": []}, "feedback_budget": 4000
    }))
    .unwrap();
    let system = "You are a careful Python programmer. ".repeat(20);
    let mut records = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        for round in 0..3u32 {
            let failing = i % 3 == 0 && round < 2;
            let (verdict, error) = match (failing, round) {
                (true, 0) => (
                    "error",
                    json!({"ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": [
                        "ZeroDivisionError                         Traceback (most recent call last)",
                        "Cell In[1], line 2\n      1 x = 0\n----> 2 answer = 1 / x\n",
                        "ZeroDivisionError: division by zero"]}),
                ),
                (true, _) => ("timeout_wall", serde_json::Value::Null),
                _ => ("ok", serde_json::Value::Null),
            };
            let correct = !failing;
            let prompt = if round == 0 {
                json!([{"role": "system", "parts": [{"type": "text", "text": system}]},
                       {"role": "user", "parts": [{"type": "text", "text": format!("Question {i}?")}]}])
            } else {
                json!([{"role": "user", "parts": [{"type": "text", "text": "It failed; fix it."}]}])
            };
            let reply = if i == 7 && round == 0 {
                HOSTILE.to_string()
            } else {
                format!("```python\nx = {i}\nanswer = 1 / x\n```")
            };
            records.push(serde_json::from_value::<AttemptRecord>(json!({
                "schema_version": SCHEMA_VERSION, "run_id": "synthetic", "task_id": id,
                "round": round, "model": "synthetic", "synthetic_model": true, "strategy": "fat",
                "stop_on": "never", "feedback": "parsed", "kind": "attempt",
                "prompt": prompt, "reply": reply, "extraction": null,
                "code": format!("x = {i}\nanswer = 1 / x"),
                "outcome": {
                    "status": if verdict == "ok" { "ok" } else { "error" },
                    "verdict": verdict, "flags": [], "execution_count": 1,
                    "stdout": "out ".repeat(50), "stderr": "", "results": [], "displays": [],
                    "error": error, "answer": null, "artifacts": [], "truncated": false,
                    "truncation": {"truncated": false, "dropped_bytes": 0, "dropped_messages": 0},
                    "timings_ms": {"total": 5.0}, "state_lost": false
                },
                "check": {"correct": correct, "parsed": true, "extracted": "1", "normalized": "1",
                          "rule": "number:abs_tol", "tolerance": 1e-6},
                "correct": correct, "answered": !failing, "parsed": true,
                "stop": if round == 2 { json!("rounds_exhausted") } else { json!(null) },
                "infra_error": null,
                "timings_ms": {"model": 10.0, "exec": 5.0, "total": 16.0},
                "tokens": {"prompt_tokens": 100, "completion_tokens": 20}
            }))
            .unwrap());
        }
    }
    (config, records)
}

#[test]
fn a_thousand_tasks_of_three_rounds_load_filter_and_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, records) = synthetic(1000);
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    let lines: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    std::fs::write(dir.join("results.jsonl"), lines.join("\n") + "\n").unwrap();
    retrace::report::write_all(&config, &records, dir).unwrap();
    let page = dir.join("report.html");

    // The system prompt is stored once, not a thousand times.
    let bytes = std::fs::metadata(&page).unwrap().len();
    assert!(bytes < 6 << 20, "report.html is {bytes} bytes");

    let all = load(&page, "");
    all.assert_clean();
    assert_eq!(all.rows(), 1000);
    // Rounds are built only when a task is opened.
    assert_eq!(all.rounds(), 0);

    let recovered = load(&page, "#filter=recovered");
    recovered.assert_clean();
    assert_eq!(recovered.rows(), 334);
    let killed_odd = load(&page, "#filter=killed&tag=odd");
    killed_odd.assert_clean();
    assert_eq!(killed_odd.rows(), 167);
    assert_eq!(load(&page, "#filter=failed").rows(), 0);

    // A hostile reply shows as text in the opened task and runs nothing.
    let opened = load(&page, "#open=task-0007");
    opened.assert_clean();
    assert_eq!(opened.rounds(), 3);
    assert!(opened
        .dom
        .contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x"));
    assert!(!opened.dom.contains("data-pwned"));
    assert!(!opened.dom.contains("<title>pwned"));
    assert_eq!(opened.dom.matches("<script").count(), 1);
    assert_eq!(opened.count("<img"), 0);
}
