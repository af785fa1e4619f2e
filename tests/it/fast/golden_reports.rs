//! Golden files: every exporter (summary.json, summary.csv, report.md),
//! the JUnit document and compare.md rendered from a fixed journal of two
//! arms (tests/fixtures/golden/) must match the files under `expected/`.
//! `RETRACE_BLESS=1 cargo test --test it golden_reports` rewrites them. The
//! inputs carry their own timestamps and relative paths, and plots are
//! left out, so nothing of the machine or the clock reaches the outputs.

use std::path::{Path, PathBuf};

use retrace::harness::journal;
use retrace::record::RunConfig;
use retrace::report::compare::{self, regressions, Judged, Side, Thresholds};
use retrace::report::{exporters, summarize, task_cases, RunView};
use retrace::task::load::load_file;

pub(super) fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

fn bless() -> bool {
    std::env::var_os("RETRACE_BLESS").is_some_and(|v| v == "1")
}

/// Compares `actual` with `expected/<name>`, or writes it when blessing.
fn golden(name: &str, actual: &str) {
    let path = fixture().join("expected").join(name);
    if bless() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; create it with RETRACE_BLESS=1", path.display()));
    if actual != want {
        let line = actual
            .lines()
            .zip(want.lines())
            .position(|(a, w)| a != w)
            .unwrap_or(actual.lines().count().min(want.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}:\n  got:  {:?}\n  want: {:?}\n\
             (if the change is intended, rerun with RETRACE_BLESS=1 and review the diff)",
            line + 1,
            actual.lines().nth(line),
            want.lines().nth(line)
        );
    }
}

/// The fixed journal: its run.json (read as retrace reads one) and its 24
/// records.
pub(super) fn load() -> (RunConfig, Vec<retrace::record::AttemptRecord>) {
    let text = std::fs::read_to_string(fixture().join("run.json")).unwrap();
    let config = RunConfig::from_json(&text).unwrap();
    let records = journal::read(&fixture().join("results.jsonl")).unwrap();
    assert_eq!(records.len(), 24);
    (config, records)
}

/// The journal's `slim` arm compared against its `fat` arm, judged with the
/// default thresholds.
pub(super) fn fat_against_slim() -> [Judged; 1] {
    let (config, records) = load();
    let base = Side::new("BASE", &config, &records, "fat");
    let new = Side::new("NEW", &config, &records, "slim");
    let (c, summaries) = compare::compare(&base, &new).unwrap();
    [Judged {
        regressions: regressions(&c, &Thresholds::default()),
        comparison: c,
        summaries,
    }]
}

#[test]
fn every_exporter_matches_its_golden_file() {
    let (config, records) = load();
    let summary = summarize(&config, &records);
    let dir = fixture();
    let view = RunView {
        dir: &dir,
        config: &config,
        records: &records,
        summary: &summary,
        plots: &[],
    };
    let mut names = Vec::new();
    for exporter in exporters() {
        let text = exporter.render(&view).unwrap();
        golden(exporter.file_name(), &text);
        names.push(exporter.file_name());
    }
    assert_eq!(
        names,
        ["summary.json", "summary.csv", "report.md", "report.html"]
    );
}

#[test]
fn junit_matches_its_golden_file() {
    let (config, records) = load();
    let tasks = load_file(&fixture().join("tasks.jsonl")).unwrap();
    let xml = task_cases::render(&config, &records, &tasks);
    // The journal has one wrong answer (fat) and one timeout (slim).
    assert_eq!(xml.matches("<testcase ").count(), 12);
    assert_eq!(xml.matches("<failure ").count(), 2);
    golden("junit.xml", &xml);
}

#[test]
fn compare_markdown_matches_its_golden_file() {
    let judged = fat_against_slim();
    golden(
        "compare.md",
        &compare::markdown(&judged, &[], Path::new(".")),
    );
}
