//! Suites published as Parquet load as their JSONL twins do: the same
//! tasks from GSM8K- and DABench-shaped rows, in one file or a folder of
//! shards, under each compression Hugging Face files use; a missing column
//! or a file that is not Parquet is an error naming the file. The Parquet
//! files are written here by pyarrow (tests cannot reach the Hub), from a
//! venv installed from `tests/tools/pyarrow.lock` on first use.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use retrace::task::load::{load_file, load_suite};
use retrace::task::TaskError;

use crate::common::venv::{Install, PinnedVenv};

const LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/pyarrow.lock");
const WRITER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/write_parquet.py");
const PYARROW_VERSION: &str = "26.0.1";

fn pyarrow_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let venv = PinnedVenv {
            name: "pyarrow",
            package: "pyarrow",
            version: PYARROW_VERSION,
            install: Install::Lock {
                path: LOCK,
                pip_args: &[],
            },
            probe: "import pyarrow.parquet\nprint(pyarrow.__version__)",
            after: |_| Vec::new(),
        }
        .ensure();
        eprintln!("pyarrow {PYARROW_VERSION}");
        venv
    })
    .clone()
}

/// `jsonl`'s rows as a Parquet file at `parquet`, written by pyarrow.
fn write_parquet(jsonl: &Path, parquet: &Path, compression: &str) {
    let out = Command::new(pyarrow_venv().join("bin").join("python"))
        .arg(WRITER)
        .arg(jsonl)
        .arg(parquet)
        .arg(compression)
        .output()
        .expect("running the venv's python");
    assert!(
        out.status.success(),
        "pyarrow could not write {}: {}",
        parquet.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GSM8K test rows as published: a question and a rationale ending in
/// `#### n` (one with thousands separators, one with non-ASCII text).
fn gsm8k_lines() -> String {
    let mut lines: Vec<String> = (1..=15)
        .map(|i| {
            serde_json::json!({
                "question": format!("Tom has {i} boxes of 3 apples. How many apples?"),
                "answer": format!("{i} * 3 = <<{i}*3={}>>{}\n#### {}", i * 3, i * 3, i * 3),
            })
            .to_string()
        })
        .collect();
    lines.push(
        serde_json::json!({
            "question": "Janet’s ducks lay 1,600 eggs. How many dozen? (≈)",
            "answer": "1600 / 12 = 133.33\n#### 1,600",
        })
        .to_string(),
    );
    lines.join("\n") + "\n"
}

#[test]
fn gsm8k_rows_in_parquet_are_the_tasks_of_their_jsonl_twin() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("test.jsonl");
    std::fs::write(&jsonl, gsm8k_lines()).unwrap();
    let twin = load_file(&jsonl).unwrap();
    assert_eq!(twin.len(), 16);
    for compression in ["snappy", "zstd", "gzip", "none"] {
        let sub = dir.path().join(compression);
        std::fs::create_dir(&sub).unwrap();
        let parquet = sub.join("test.parquet");
        write_parquet(&jsonl, &parquet, compression);
        let tasks = load_file(&parquet).unwrap_or_else(|e| panic!("{compression}: {e}"));
        assert_eq!(tasks, twin, "{compression}");
    }
}

#[test]
fn a_folder_of_parquet_shards_is_a_suite() {
    let dir = tempfile::tempdir().unwrap();
    let lines = gsm8k_lines();
    let all: Vec<&str> = lines.lines().collect();
    let suite = dir.path().join("gsm8k");
    std::fs::create_dir(&suite).unwrap();
    for (i, part) in all.chunks(8).enumerate() {
        let jsonl = dir.path().join(format!("part{i}.jsonl"));
        std::fs::write(&jsonl, part.join("\n") + "\n").unwrap();
        let shard = suite.join(format!("test-{i:05}-of-00002.parquet"));
        write_parquet(&jsonl, &shard, "snappy");
    }
    let tasks = load_suite(suite.to_str().unwrap(), dir.path()).unwrap();
    assert_eq!(tasks.len(), 16);
    let mut ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 16, "ids are unique across shards: {ids:?}");
}

#[test]
fn dabench_rows_in_parquet_are_the_tasks_of_their_jsonl_twin() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"id": 0, "question": "What is the mean of the price column?", "concepts": ["Summary Statistics"], "constraints": "Round to two decimal places.", "format": "@mean_price[mean_value]", "file_name": "shop.csv", "level": "easy"}"#,
        r#"{"id": 1, "question": "Which city has the most customers?", "concepts": ["Counting"], "constraints": "", "format": "@top_city[city_name]", "file_name": "shop.csv", "level": "hard"}"#,
    ];
    let labels = [
        r#"{"id": 0, "common_answers": [["mean_price", "12.35"]]}"#,
        r#"{"id": 1, "common_answers": [["top_city", "Colden"]]}"#,
    ];
    let mut tasks_of = Vec::new();
    for kind in ["jsonl", "parquet"] {
        let sub = dir.path().join(kind);
        std::fs::create_dir_all(sub.join("tables")).unwrap();
        std::fs::write(sub.join("tables/shop.csv"), "price,city\n12.35,Colden\n").unwrap();
        std::fs::write(sub.join("da_labels.jsonl"), labels.join("\n") + "\n").unwrap();
        let jsonl = sub.join("da.jsonl");
        std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
        let path = if kind == "parquet" {
            let parquet = sub.join("da.parquet");
            write_parquet(&jsonl, &parquet, "snappy");
            std::fs::remove_file(&jsonl).unwrap();
            parquet
        } else {
            jsonl
        };
        let mut tasks = load_file(&path).unwrap_or_else(|e| panic!("{kind}: {e}"));
        // The table is found beside each file: compare the file's name.
        for t in &mut tasks {
            for f in &mut t.files {
                *f = f.strip_prefix(&sub).unwrap().to_path_buf();
            }
        }
        tasks_of.push(tasks);
    }
    assert_eq!(tasks_of[0].len(), 2);
    assert_eq!(tasks_of[0], tasks_of[1]);
}

#[test]
fn a_missing_column_or_a_file_that_is_not_parquet_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("rows.jsonl");
    std::fs::write(&jsonl, "{\"prompt\": \"1+1?\", \"solution\": \"2\"}\n").unwrap();
    let parquet = dir.path().join("rows.parquet");
    write_parquet(&jsonl, &parquet, "snappy");
    let err = load_file(&parquet).unwrap_err();
    let TaskError::Parse {
        file,
        line,
        message,
    } = &err
    else {
        panic!("a row's error: {err}");
    };
    assert_eq!((file.as_path(), *line), (parquet.as_path(), 1));
    assert!(
        message.starts_with("missing column `expected`"),
        "{message}"
    );
    assert!(
        message.contains("found columns: `prompt`, `solution`"),
        "{message}"
    );

    let fake = dir.path().join("fake.parquet");
    std::fs::write(&fake, "id,question\n1,what?\n").unwrap();
    let err = load_file(&fake).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TaskError::File { .. }), "{text}");
    assert!(
        text.contains("fake.parquet") && text.contains("not a Parquet file"),
        "{text}"
    );
}

/// MATH-500 rows as published (`problem`, `solution`, `answer`,
/// `subject`, `level` as an integer, `unique_id`): LaTeX tasks, tagged.
#[test]
fn math500_rows_in_parquet_are_the_tasks_of_their_jsonl_twin() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        (r"\left( 3, \frac{\pi}{2} \right)", "Precalculus", 2),
        (r"\frac{14}{3}", "Algebra", 3),
        (r"p - q", "Intermediate Algebra", 5),
        (r"\text{Evelyn}", "Algebra", 2),
    ];
    let lines: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, (answer, subject, level))| {
            serde_json::json!({
                "problem": format!("Problem {i}: find it."),
                "solution": format!("So it is $\\boxed{{{answer}}}$."),
                "answer": answer,
                "subject": subject,
                "level": level,
                "unique_id": format!("test/{}/{i}.json", subject.to_lowercase()),
            })
            .to_string()
        })
        .collect();
    let jsonl = dir.path().join("test.jsonl");
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let twin = load_file(&jsonl).unwrap();
    assert_eq!(twin.len(), 4);
    assert_eq!(twin[0].tags, ["subject:Precalculus", "level:2"]);
    let parquet = dir.path().join("test-00000-of-00001.parquet");
    write_parquet(&jsonl, &parquet, "snappy");
    assert_eq!(load_file(&parquet).unwrap(), twin);
}
