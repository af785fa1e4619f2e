//! Dataset loaders: JSONL files of tasks in three shapes, detected per line.
//!
//! - **native**: the [`Task`] serde shape (`id`, `question`, `expected`,
//!   optional `files`, `reference`, `packages`, `tags`). `files` are relative
//!   to the JSONL file's directory and become absolute; a missing file, or
//!   one the dataset may not name (see `files.rs`: outside the dataset's
//!   folder, not a regular file, over `--max-task-file-bytes`, two of one
//!   name), is an error. A numeric `id` is accepted and turned into text.
//! - **GSM8K-style**: `{"question": .., "answer": "...\n#### 72"}` (optional
//!   `id`, else `<file stem>-<line>`): a number with abs_tol 1e-3.
//!   PAL/GSM-Hard `{"input": .., "target": 72}` is read the same way.
//! - **DABench-style**: `{"id", "question", "constraints"?, "concepts"?,
//!   "format": "@name[...]", "file_name"}` with labels in the line
//!   (`answers` / `common_answers`: `[["name", "value"], ...]`) or in a
//!   labels file next to it (`<stem>_labels.jsonl`, or `<x>-labels.jsonl`
//!   for `<x>-questions.jsonl`) matched by `id`: a multi-answer of numbers
//!   (abs_tol 1e-6) and texts.
//!
//! Blank lines and lines starting with `//` or `#` are skipped. Every error
//! names the dataset file and the 1-based line. A flawed record (a line
//! that is not UTF-8 included) stops the load unless invalid records are
//! skipped ([`load_suite_with`]); then each one is listed as a [`Skipped`]
//! with its file, line and reason. Suite files are untrusted input too
//! (`lines.rs`): only regular files of at most
//! [`MAX_SUITE_FILE_BYTES`](crate::util::input_file::MAX_SUITE_FILE_BYTES)
//! are read, a line at a time.

mod dabench;
mod fields;
mod files;
mod gsm;
mod lines;
mod math;
mod native;
mod parquet_rows;
mod sample;
mod skipped;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod props;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use walkdir::WalkDir;

use super::{Task, TaskError};
use crate::util::builtin;
use crate::util::home::retrace_home;
use crate::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;
use dabench::{dabench_task, is_labels_file};
use fields::{field_list, json_object};
use gsm::{gsm, pal};
use lines::{is_json, json_lines, json_records, Numbered};
use math::{is_math, math_task};
use native::native;
use parquet_rows::{is_parquet, parquet_rows};

pub use dabench::DABENCH_ABS_TOL;
pub use gsm::GSM_ABS_TOL;
pub use sample::{select, TagQuota};
pub use skipped::Skipped;

/// The suites that live under the datasets directory.
/// `competition`: MATH-style problems with LaTeX answers, written here;
/// `resource`: tasks whose natural first attempt presses a limit.
pub const SUITES: [&str; 5] = ["math", "tabular", "packages", "competition", "resource"];

/// How a suite is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// `--skip-invalid`: a flawed record is listed in [`Loaded::skipped`]
    /// instead of stopping the load.
    pub skip_invalid: bool,
    /// `--max-task-file-bytes`: a task file larger than this is refused.
    pub max_task_file_bytes: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            skip_invalid: false,
            max_task_file_bytes: DEFAULT_MAX_TASK_FILE_BYTES,
        }
    }
}

/// Loads every task of one JSONL file.
pub fn load_file(path: &Path) -> Result<Vec<Task>, TaskError> {
    let (located, _) = load_located(path, &LoadOptions::default())?;
    Ok(located.into_iter().map(|l| l.task).collect())
}

/// Loads a named suite (`math`, `tabular`, `packages`: every `*.jsonl`
/// under `<datasets_dir>/<name>/`, sorted, labels files skipped), a JSONL
/// file, or a directory of them. Task ids must be unique in the suite.
pub fn load_suite(name_or_path: &str, datasets_dir: &Path) -> Result<Vec<Task>, TaskError> {
    Ok(load_suite_with(name_or_path, datasets_dir, &LoadOptions::default())?.tasks)
}

/// A suite's valid tasks and the invalid records left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    pub tasks: Vec<Task>,
    /// Empty unless invalid records were skipped.
    pub skipped: Vec<Skipped>,
}

/// [`load_suite`] with `options`; with `skip_invalid` every valid record
/// of it: a flawed line (bad JSON, not UTF-8, missing or bad fields, a
/// refused task file, bad labels, a duplicate id) is listed in
/// [`Loaded::skipped`] instead of stopping the load. Unreadable or refused
/// suite files still stop it, and so does a suite with no valid task.
pub fn load_suite_with(
    name_or_path: &str,
    datasets_dir: &Path,
    options: &LoadOptions,
) -> Result<Loaded, TaskError> {
    let skip_invalid = options.skip_invalid;
    let (root, files) = suite_files(name_or_path, datasets_dir)?;
    let mut seen: HashMap<String, (PathBuf, usize)> = HashMap::new();
    let mut out = Loaded::default();
    for file in files {
        let (located, skipped) = load_located(&file, options)?;
        out.skipped.extend(skipped);
        for loc in located {
            if let Some((first_file, first_line)) = seen.get(&loc.task.id) {
                let err = TaskError::Parse {
                    file: loc.file,
                    line: loc.line,
                    message: format!(
                        "duplicate task id `{}` (first defined at {}:{first_line})",
                        loc.task.id,
                        first_file.display()
                    ),
                };
                if !skip_invalid {
                    return Err(err);
                }
                out.skipped
                    .push(Skipped::from_error(err, Some(loc.task.id))?);
                continue;
            }
            seen.insert(loc.task.id.clone(), (loc.file.clone(), loc.line));
            out.tasks.push(loc.task);
        }
    }
    if out.tasks.is_empty() {
        let message = match out.skipped.len() {
            0 => "no tasks found".to_string(),
            n => format!("no valid tasks found ({n} invalid records skipped)"),
        };
        return Err(TaskError::File {
            file: root,
            message,
        });
    }
    Ok(out)
}

/// The datasets directory to find `suite` in, first found of:
///
/// 1. `$RETRACE_DATASETS`, if set (the user's own suites);
/// 2. `./datasets`, if it holds `suite` (a source checkout: edits to its
///    suites take effect), or if `suite` is not a built-in name (a path
///    needs no datasets directory);
/// 3. the suites built into the binary, written out on first use under
///    `$RETRACE_HOME/builtin/<hash>/datasets` ([`crate::util::builtin`]).
pub fn datasets_dir(suite: &str) -> Result<PathBuf, TaskError> {
    if let Some(dir) = std::env::var_os("RETRACE_DATASETS").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let local = Path::new("datasets");
    if !SUITES.contains(&suite) || local.join(suite).is_dir() {
        return Ok(std::path::absolute(local).unwrap_or_else(|_| local.to_path_buf()));
    }
    builtin::datasets(&retrace_home()).map_err(TaskError::Builtin)
}

// ------------------------------------------------------------ suite files

/// The files of a suite, sorted; and the root to name in errors.
fn suite_files(
    name_or_path: &str,
    datasets_dir: &Path,
) -> Result<(PathBuf, Vec<PathBuf>), TaskError> {
    if SUITES.contains(&name_or_path) {
        let dir = datasets_dir.join(name_or_path);
        if !dir.is_dir() {
            return Err(TaskError::File {
                file: dir,
                message: "suite directory not found (set RETRACE_DATASETS or pass a path)".into(),
            });
        }
        let files = jsonl_under(&dir)?;
        return Ok((dir, files));
    }
    let path = PathBuf::from(name_or_path);
    if path.is_dir() {
        let files = jsonl_under(&path)?;
        return Ok((path, files));
    }
    // Whatever else is there (a FIFO, a link to a device) is refused when read.
    if path.exists() {
        return Ok((path.clone(), vec![path]));
    }
    let looks_like_path = name_or_path.contains(['/', '\\'])
        || name_or_path.starts_with('.')
        || name_or_path.ends_with(".jsonl")
        || name_or_path.ends_with(".json")
        || name_or_path.ends_with(".parquet");
    if looks_like_path {
        return Err(TaskError::File {
            file: path,
            message: "no such file or directory".into(),
        });
    }
    Err(TaskError::UnknownSuite(name_or_path.to_string()))
}

/// Every `*.jsonl` and `*.parquet` under `dir` (recursively, sorted, hidden
/// entries and labels files skipped); an error if there are none, or if a link in the
/// folder leads out of it (a downloaded dataset must not make the load
/// read the host's files, or walk its whole tree).
fn jsonl_under(dir: &Path) -> Result<Vec<PathBuf>, TaskError> {
    let root = std::fs::canonicalize(dir).map_err(|e| TaskError::File {
        file: dir.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    let outside: RefCell<Option<PathBuf>> = RefCell::new(None);
    let keep = |e: &walkdir::DirEntry| {
        if e.depth() > 0 && e.file_name().as_encoded_bytes().starts_with(b".") {
            return false;
        }
        let out = e.path_is_symlink()
            && std::fs::canonicalize(e.path()).is_ok_and(|real| !real.starts_with(&root));
        if out {
            outside
                .borrow_mut()
                .get_or_insert_with(|| e.path().to_path_buf());
        }
        !out
    };
    let (mut out, mut json) = (Vec::new(), Vec::new());
    // Links inside the folder are followed (walkdir also stops at loops).
    let walk = WalkDir::new(dir).follow_links(true).sort_by_file_name();
    for entry in walk.into_iter().filter_entry(keep) {
        let path = match entry {
            Ok(entry) if entry.file_type().is_dir() => continue,
            Ok(entry) => entry.into_path(),
            // A link whose target cannot be reached counts as a file, so a
            // dangling `.jsonl` is reported when it is loaded.
            Err(e) if e.loop_ancestor().is_none() && e.path().is_some_and(Path::is_symlink) => {
                e.path().unwrap_or(dir).to_path_buf()
            }
            Err(e) => {
                return Err(TaskError::File {
                    file: e.path().unwrap_or(dir).to_path_buf(),
                    message: format!("cannot list directory: {e}"),
                })
            }
        };
        let dataset = path.extension().is_some_and(|x| x == "jsonl") || is_parquet(&path);
        if dataset && !is_labels_file(&path) {
            out.push(path);
        } else if is_json(&path) {
            json.push(path);
        }
    }
    // `.json` files are the suite only in a folder of nothing else (the
    // original MATH release: one problem per file); beside JSONL or
    // Parquet they are task data.
    if out.is_empty() {
        out = json;
    }
    if let Some(link) = outside.into_inner() {
        return Err(TaskError::File {
            file: link,
            message: format!(
                "refused: a link that leads out of the suite's folder `{}`",
                root.display()
            ),
        });
    }
    if out.is_empty() {
        return Err(TaskError::File {
            file: dir.to_path_buf(),
            message: "no .jsonl, .parquet or .json files in this directory".into(),
        });
    }
    Ok(out)
}

// -------------------------------------------------------------- one file

/// A task and where it was defined.
struct Located {
    task: Task,
    file: PathBuf,
    line: usize,
}

/// Per-file reading context.
struct Ctx<'a> {
    file: &'a Path,
    /// The dataset's folder: the JSONL file's directory, canonical. Task
    /// files must resolve inside it.
    dir: PathBuf,
    /// `--max-task-file-bytes`.
    max_file_bytes: u64,
    stem: String,
    /// DABench labels by id, read on first need.
    labels: Option<HashMap<String, (Value, PathBuf, usize)>>,
    /// Flawed lines are skipped (and listed in `skipped`) instead of
    /// stopping the load.
    skip_invalid: bool,
    /// Labels-file lines skipped so far.
    skipped: Vec<Skipped>,
}

/// A failure on one line, before file and line are attached.
type LineResult<T> = Result<T, String>;

/// The tasks of one file and, with `skip_invalid`, the records skipped.
fn load_located(
    path: &Path,
    options: &LoadOptions,
) -> Result<(Vec<Located>, Vec<Skipped>), TaskError> {
    let skip_invalid = options.skip_invalid;
    // A Parquet file's rows are read as the lines of its JSONL twin.
    let lines: Box<dyn Iterator<Item = Numbered>> = if is_parquet(path) {
        Box::new(parquet_rows(path)?.into_iter())
    } else if is_json(path) {
        Box::new(json_records(path)?.into_iter())
    } else {
        Box::new(json_lines(path)?)
    };
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parent = abs.parent().unwrap_or(Path::new("/"));
    let dir = std::fs::canonicalize(parent).map_err(|e| TaskError::File {
        file: path.to_path_buf(),
        message: format!("cannot resolve its folder: {e}"),
    })?;
    let mut ctx = Ctx {
        file: path,
        dir,
        max_file_bytes: options.max_task_file_bytes,
        stem: path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("task")
            .to_string(),
        labels: None,
        skip_invalid,
        skipped: Vec::new(),
    };
    let mut out: Vec<Located> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    for read in lines {
        let (line, trimmed) = match read {
            Ok(read) => read,
            Err(err) if skip_invalid => {
                skipped.push(Skipped::from_error(err, None)?);
                continue;
            }
            Err(err) => return Err(err),
        };
        let parsed = parse_line(&mut ctx, &trimmed, line)
            .map_err(|e| match e {
                LineError::Here(message) => TaskError::Parse {
                    file: path.to_path_buf(),
                    line,
                    message,
                },
                LineError::Elsewhere(err) => err,
            })
            .and_then(|task| match first.get(&task.id) {
                Some(first_line) => Err(TaskError::Parse {
                    file: path.to_path_buf(),
                    line,
                    message: format!(
                        "duplicate task id `{}` (first defined at {}:{first_line})",
                        task.id,
                        path.display()
                    ),
                }),
                None => Ok(task),
            });
        let task = match parsed {
            Ok(task) => task,
            Err(err) if skip_invalid => {
                skipped.push(Skipped::from_error(err, skipped::line_id(&trimmed))?);
                continue;
            }
            Err(err) => return Err(err),
        };
        first.insert(task.id.clone(), line);
        out.push(Located {
            task,
            file: path.to_path_buf(),
            line,
        });
    }
    // Bad labels lines first: they explain the questions left without labels.
    ctx.skipped.append(&mut skipped);
    Ok((out, ctx.skipped))
}

/// A line's failure: about this line, or a complete error elsewhere (a
/// labels file).
enum LineError {
    Here(String),
    Elsewhere(TaskError),
}

impl From<String> for LineError {
    fn from(s: String) -> Self {
        LineError::Here(s)
    }
}

fn parse_line(ctx: &mut Ctx, text: &str, line: usize) -> Result<Task, LineError> {
    let obj = json_object(text)?;
    if obj.contains_key("expected") {
        return Ok(native(ctx, obj)?);
    }
    let dabench = ["format", "file_name", "common_answers"]
        .iter()
        .any(|k| obj.contains_key(*k))
        || obj.get("answers").is_some_and(Value::is_array);
    if dabench {
        return dabench_task(ctx, &obj);
    }
    if is_math(&obj) {
        return Ok(math_task(ctx, &obj, line)?);
    }
    if obj.contains_key("answer") {
        return Ok(gsm(ctx, &obj, line)?);
    }
    if obj.contains_key("input") && obj.contains_key("target") {
        return Ok(pal(ctx, &obj, line)?);
    }
    // A Parquet row's fields are its columns.
    let (record, field) = match is_parquet(ctx.file) {
        true => ("row", "column"),
        false => ("line", "field"),
    };
    Err(format!(
        "missing {field} `expected` (a {record} is a native task with `id`, `question`, `expected`; \
         GSM8K-style with `question` and an `answer` ending in `#### <number>`; MATH-style with \
         `problem` and `answer` or `solution`; or DABench-style with `id`, `question`, `format`, \
         `file_name`); found {field}s: {}",
        field_list(&obj)
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::fixtures::{load_err, parse_line_of};
    use super::*;

    #[test]
    fn error_messages_carry_file_and_line() {
        let ok = r#"{"id": "a", "question": "q", "expected": {"type": "number", "value": 1}}"#;
        let cases: Vec<(&str, &str)> = vec![
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "number", "value": 1}"#,
                "invalid JSON",
            ),
            (r#"[1, 2]"#, "expected a JSON object, found an array"),
            (
                r#"{"id": "b", "question": "q"}"#,
                "missing field `expected`",
            ),
            (
                r#"{"id": "b", "expected": {"type": "number", "value": 1}}"#,
                "missing field `question`",
            ),
            (
                r#"{"question": "q", "expected": {"type": "number", "value": 1}}"#,
                "missing field `id`",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "number"}}"#,
                "`expected`: missing field `value`",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "number", "value": "ten"}}"#,
                "`expected.value` `ten` is not a number",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "list", "values": 3}}"#,
                "invalid type: integer `3`, expected a sequence",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"value": 1}}"#,
                "missing field `type`",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "fraction", "value": 1}}"#,
                "unknown `type` `fraction`",
            ),
            (
                r#"{"id": "b", "question": "q", "expected": {"type": "multi", "answers": {"x": {"type": "nope"}}}}"#,
                "`expected.answers.x`: unknown `type` `nope`",
            ),
            (
                r#"{"question": "q", "answer": "It is 72."}"#,
                "answer has no `#### <number>` line",
            ),
            (
                r#####"{"question": "q", "answer": "#### seventy"}"#####,
                "`#### seventy` is not a number",
            ),
            (
                r#"{"id": "b", "question": "q", "files": ["missing.csv"], "expected": {"type": "number", "value": 1}}"#,
                "input file `missing.csv` not found",
            ),
            (
                r#"{"id": "b", "question": "q", "format": "@x[v]", "file_name": "gone.csv", "answers": [["x", "1"]]}"#,
                "input file `gone.csv` not found",
            ),
            (
                r#"{"id": "b", "question": "q", "format": "@x[v]", "answers": [["x", "1"], ["x", "2"]]}"#,
                "answer `x` is given twice",
            ),
            (ok, "duplicate task id `a` (first defined at"),
        ];
        for (bad, want) in cases {
            let content = format!("{ok}\n\n{bad}\n{ok}\n");
            let (msg, err) = load_err(&[("tasks.jsonl", &content)], "tasks.jsonl");
            let (file, line, message) = parse_line_of(&err);
            assert_eq!((file.as_str(), line), ("tasks.jsonl", 3), "{msg}");
            assert!(message.contains(want), "want {want:?} in {msg:?}");
            assert!(msg.contains("tasks.jsonl:3: "), "{msg}");
        }
    }

    #[test]
    fn missing_input_file_names_the_path_looked_for() {
        let (msg, _) = load_err(
            &[(
                "t.jsonl",
                r#"{"id": "b", "question": "q", "files": ["data/x.csv"], "expected": {"type": "number", "value": 1}}"#,
            )],
            "t.jsonl",
        );
        assert!(msg.contains("data/x.csv"), "{msg}");
        assert!(msg.contains("looked for /"), "{msg}");
    }

    #[test]
    fn unreadable_file_is_a_file_error() {
        let err = load_file(Path::new("/nonexistent/retrace/tasks.jsonl")).unwrap_err();
        assert!(matches!(err, TaskError::File { .. }), "{err:?}");
    }
}
