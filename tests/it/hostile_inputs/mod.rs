//! The hostile corpus's second section: inputs outside the cell. The cell
//! cases (`datasets/hostile/`, `retrace sandbox check`) attack the kernel
//! from inside; these attack the harness from everything else a run trusts
//! less than the user's own command line: dataset folders, the model
//! endpoint and its replies, the values a kernel leaves as answers, and the
//! reports people open and share (docs/sandbox.md, "Inputs outside the
//! cell", lists every case).
//!
//! Each case runs the real `retrace` binary through [`run_case`], which
//! fails a case that hangs, measures the harness's peak memory, holds it to
//! [`HARNESS_PEAK_BOUND`] and reports it: a line on stderr and one in
//! `hostile-inputs-memory.tsv` under cargo's test temporary directory.
//! One module per area; every case is a test named after its class.

mod dataset;
mod endpoint;
mod names;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use retrace::pyenv::ImageName;

use crate::common::cli::Cli;
use crate::common::Ran;

/// The most a harness may hold, at its peak, while a hostile input runs
/// (the whole process, oracle model and kernels' own memory excluded).
/// An idle oracle run peaks well under a tenth of it; the inputs that
/// failed before this section existed took it to 919 MiB and 2 GiB.
pub const HARNESS_PEAK_BOUND: u64 = 256 << 20;

/// Longest a case may run before it counts as a hang (far above what a
/// loaded machine needs: the slowest case is one small oracle run).
pub const HANG_LIMIT: Duration = Duration::from_secs(300);

/// Runs one case's command line: a hang fails the case, the harness's peak
/// memory is recorded and must stay under [`HARNESS_PEAK_BOUND`].
pub fn run_case(case: &str, cli: Cli) -> Ran {
    let ran = match cli.run_within(HANG_LIMIT) {
        Ok(ran) => ran,
        Err(ran) => panic!("{case}: retrace still ran after {HANG_LIMIT:?} (a hang)\n{ran}"),
    };
    record_peak(case, ran.peak_bytes);
    assert!(
        ran.peak_bytes > 0,
        "{case}: the harness's peak memory was never read"
    );
    assert!(
        ran.peak_bytes <= HARNESS_PEAK_BOUND,
        "{case}: the harness peaked at {} MiB, over the bound of {} MiB\n{ran}",
        ran.peak_bytes >> 20,
        HARNESS_PEAK_BOUND >> 20
    );
    ran
}

fn record_peak(case: &str, bytes: u64) {
    eprintln!(
        "hostile input {case}: harness peak {} MiB (bound {} MiB)",
        bytes >> 20,
        HARNESS_PEAK_BOUND >> 20
    );
    let table = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-inputs-memory.tsv");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(table)
    {
        let _ = writeln!(f, "{case}\t{bytes}");
    }
}

/// Every regular file under `dir` (links not followed), sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    out.sort();
    out
}

/// The files under `dir` that contain `needle` anywhere in their bytes.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|f| {
            std::fs::read(f)
                .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
        })
        .collect()
}

/// The records of a run directory's journal, one JSON value per line.
pub fn records(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .expect("a journal")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect()
}

/// Writes `lines` (one JSON value each) as `<dir>/<name>` and returns its path.
pub fn write_suite(dir: &Path, name: &str, lines: &[serde_json::Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).expect("suite written");
    path
}

#[test]
fn the_harness_peak_is_read_for_a_plain_run() {
    // The measurement itself: an ordinary oracle run on one built-in-style
    // task reads a peak above zero and far under the bound.
    if crate::common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(
        dir.path(),
        "tasks.jsonl",
        &[serde_json::json!({
            "id": "plain",
            "question": "What is 6 * 7?",
            "expected": {"type": "number", "value": 42.0},
            "reference": "answer = 6 * 7\n",
        })],
    );
    let out = dir.path().join("run");
    let ran = run_case(
        "baseline/plain_oracle_run",
        crate::common::retrace([
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--model",
            "oracle",
            "--out",
            out.to_str().unwrap(),
        ])
        .image(ImageName::Fat),
    );
    assert!(ran.success(), "{ran}");
    assert!(ran.peak_bytes < HARNESS_PEAK_BOUND / 4, "{ran:?}");
    // The helpers the cases grep run directories with see its files.
    let files = files_under(&out);
    assert!(
        files.iter().any(|f| f.ends_with("results.jsonl")),
        "{files:?}"
    );
    assert!(!files_containing(&out, b"\"id\":\"plain\"").is_empty());
}

mod text;
