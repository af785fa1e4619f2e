//! Dataset loaders: JSONL files of tasks in three shapes, detected per line.
//!
//! - **native**: the [`Task`] serde shape (`id`, `question`, `expected`,
//!   optional `files`, `reference`, `packages`, `tags`). `files` are relative
//!   to the JSONL file's directory and become absolute; a missing file is an
//!   error. A numeric `id` is accepted and turned into text.
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
//! names the dataset file and the 1-based line.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::check::{parse_number_literal, F64_EXACT_INT};
use super::{Expected, Task, TaskError};

/// The suites that live under the datasets directory.
pub const SUITES: [&str; 3] = ["math", "tabular", "packages"];

/// Tolerance for GSM8K-style answers.
pub const GSM_ABS_TOL: f64 = 1e-3;
/// Tolerance for DABench-style numeric sub-answers.
pub const DABENCH_ABS_TOL: f64 = 1e-6;

/// Loads every task of one JSONL file.
pub fn load_file(path: &Path) -> Result<Vec<Task>, TaskError> {
    Ok(load_located(path)?.into_iter().map(|l| l.task).collect())
}

/// Loads a named suite (`math`, `tabular`, `packages`: every `*.jsonl`
/// under `<datasets_dir>/<name>/`, sorted, labels files skipped), a JSONL
/// file, or a directory of them. Task ids must be unique in the suite.
pub fn load_suite(name_or_path: &str, datasets_dir: &Path) -> Result<Vec<Task>, TaskError> {
    let (root, files) = suite_files(name_or_path, datasets_dir)?;
    let mut seen: HashMap<String, (PathBuf, usize)> = HashMap::new();
    let mut tasks = Vec::new();
    for file in files {
        for loc in load_located(&file)? {
            if let Some((first_file, first_line)) = seen.get(&loc.task.id) {
                return Err(TaskError::Parse {
                    file: loc.file,
                    line: loc.line,
                    message: format!(
                        "duplicate task id `{}` (first defined at {}:{first_line})",
                        loc.task.id,
                        first_file.display()
                    ),
                });
            }
            seen.insert(loc.task.id.clone(), (loc.file.clone(), loc.line));
            tasks.push(loc.task);
        }
    }
    if tasks.is_empty() {
        return Err(TaskError::File {
            file: root,
            message: "no tasks found".into(),
        });
    }
    Ok(tasks)
}

/// Where suites live: `$RETRACE_DATASETS` if set, else `./datasets` if it
/// exists, else the crate's own `datasets/`.
pub fn datasets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RETRACE_DATASETS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let local = Path::new("datasets");
    if local.is_dir() {
        return std::path::absolute(local).unwrap_or_else(|_| local.to_path_buf());
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/datasets"))
}

/// `--sample N --seed S` then `--limit-tasks N`.
///
/// Sampling is a seeded shuffle keyed by task id (each task's rank is a hash
/// of the seed and its id), keeping the N lowest ranks in their original
/// order. The same seed picks the same tasks on every machine, and a task
/// stays picked when other tasks are added to or removed from the suite.
/// The limit then keeps the first N.
pub fn select(
    tasks: Vec<Task>,
    limit: Option<usize>,
    sample: Option<usize>,
    seed: u64,
) -> Vec<Task> {
    let mut tasks = tasks;
    if let Some(n) = sample.filter(|&n| n < tasks.len()) {
        let seed_key = splitmix64(seed);
        let mut ranked: Vec<(u64, usize)> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (splitmix64(seed_key ^ fnv1a(t.id.as_bytes())), i))
            .collect();
        ranked.sort_unstable();
        let mut keep = vec![false; tasks.len()];
        for &(_, i) in &ranked[..n] {
            keep[i] = true;
        }
        let mut k = keep.into_iter();
        tasks.retain(|_| k.next().unwrap_or(false));
    }
    if let Some(n) = limit {
        tasks.truncate(n);
    }
    tasks
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
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
    if path.is_file() {
        return Ok((path.clone(), vec![path]));
    }
    if path.is_dir() {
        let files = jsonl_under(&path)?;
        return Ok((path, files));
    }
    let looks_like_path = name_or_path.contains(['/', '\\'])
        || name_or_path.starts_with('.')
        || name_or_path.ends_with(".jsonl");
    if looks_like_path {
        return Err(TaskError::File {
            file: path,
            message: "no such file or directory".into(),
        });
    }
    Err(TaskError::UnknownSuite(name_or_path.to_string()))
}

/// Every `*.jsonl` under `dir` (recursively, sorted, hidden entries and
/// labels files skipped); an error if there are none.
fn jsonl_under(dir: &Path) -> Result<Vec<PathBuf>, TaskError> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    if out.is_empty() {
        return Err(TaskError::File {
            file: dir.to_path_buf(),
            message: "no .jsonl files in this directory".into(),
        });
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), TaskError> {
    let io_err = |e: std::io::Error| TaskError::File {
        file: dir.to_path_buf(),
        message: format!("cannot list directory: {e}"),
    };
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io_err)?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if name.ends_with(".jsonl") && !is_labels_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// `x_labels.jsonl`, or `x-labels.jsonl` next to `x-questions.jsonl`.
fn is_labels_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with("_labels.jsonl") {
        return true;
    }
    match name.strip_suffix("-labels.jsonl") {
        Some(prefix) => path
            .with_file_name(format!("{prefix}-questions.jsonl"))
            .is_file(),
        None => false,
    }
}

/// Candidate labels files for a questions file.
fn labels_paths(file: &Path) -> Vec<PathBuf> {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut out = vec![file.with_file_name(format!("{stem}_labels.jsonl"))];
    if let Some(prefix) = stem.strip_suffix("-questions") {
        out.push(file.with_file_name(format!("{prefix}-labels.jsonl")));
    }
    out
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
    /// The JSONL file's directory, absolute.
    dir: PathBuf,
    stem: String,
    /// DABench labels by id, read on first need.
    labels: Option<HashMap<String, (Value, PathBuf, usize)>>,
}

/// A failure on one line, before file and line are attached.
type LineResult<T> = Result<T, String>;

fn load_located(path: &Path) -> Result<Vec<Located>, TaskError> {
    let text = fs::read_to_string(path).map_err(|e| TaskError::File {
        file: path.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut ctx = Ctx {
        file: path,
        dir: abs.parent().map(Path::to_path_buf).unwrap_or_default(),
        stem: path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("task")
            .to_string(),
        labels: None,
    };
    let mut out: Vec<Located> = Vec::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim_start_matches('\u{feff}').trim();
        if trimmed.is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#') {
            continue;
        }
        let task = parse_line(&mut ctx, trimmed, line).map_err(|e| match e {
            LineError::Here(message) => TaskError::Parse {
                file: path.to_path_buf(),
                line,
                message,
            },
            LineError::Elsewhere(err) => err,
        })?;
        if let Some(first_line) = first.get(&task.id) {
            return Err(TaskError::Parse {
                file: path.to_path_buf(),
                line,
                message: format!(
                    "duplicate task id `{}` (first defined at {}:{first_line})",
                    task.id,
                    path.display()
                ),
            });
        }
        first.insert(task.id.clone(), line);
        out.push(Located {
            task,
            file: path.to_path_buf(),
            line,
        });
    }
    Ok(out)
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
    let value: Value = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    let Value::Object(obj) = value else {
        return Err(format!("expected a JSON object, found {}", kind(&value)).into());
    };
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
    if obj.contains_key("answer") {
        return Ok(gsm(ctx, &obj, line)?);
    }
    if obj.contains_key("input") && obj.contains_key("target") {
        return Ok(pal(ctx, &obj, line)?);
    }
    Err(format!(
        "missing field `expected` (a line is a native task with `id`, `question`, `expected`; \
         GSM8K-style with `question` and an `answer` ending in `#### <number>`; or DABench-style \
         with `id`, `question`, `format`, `file_name`); found fields: {}",
        field_list(&obj)
    )
    .into())
}

fn json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg.split(" at line ").next().unwrap_or(&msg);
    format!("invalid JSON at column {}: {msg}", e.column())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn field_list(obj: &Map<String, Value>) -> String {
    if obj.is_empty() {
        return "none".into();
    }
    obj.keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn req_str<'a>(obj: &'a Map<String, Value>, key: &str) -> LineResult<&'a str> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("field `{key}` is empty")),
        Some(other) => Err(format!(
            "field `{key}` must be a string, found {}",
            kind(other)
        )),
        None => Err(format!("missing field `{key}`")),
    }
}

/// An id given as text or a number.
fn id_value(v: &Value) -> LineResult<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::String(_) => Err("field `id` is empty".into()),
        other => Err(format!(
            "field `id` must be a string or a number, found {}",
            kind(other)
        )),
    }
}

fn opt_id(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<String> {
    match obj.get("id").or_else(|| obj.get("task_id")) {
        Some(v) => id_value(v),
        None => Ok(format!("{}-{line}", ctx.stem)),
    }
}

fn string_list(obj: &Map<String, Value>, key: &str) -> LineResult<Vec<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "field `{key}` must hold strings, found {}",
                    kind(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "field `{key}` must be a list of strings, found {}",
            kind(other)
        )),
    }
}

/// An `Expected::Number`, carrying exact digits for integers beyond 2^53.
///
/// Built through serde so `exact` reaches `Expected::Number` once it has
/// that field (ignored until then).
fn number_expected(value: f64, abs_tol: f64, int_digits: Option<&str>) -> LineResult<Expected> {
    if !value.is_finite() {
        return Err(format!("expected answer {value} is not a finite number"));
    }
    let mut v = json!({ "type": "number", "value": value, "abs_tol": abs_tol });
    if let Some(d) = int_digits.filter(|_| value.abs() >= F64_EXACT_INT) {
        v["exact"] = Value::String(d.to_string());
    }
    serde_json::from_value(v).map_err(|e| format!("internal: cannot build expected number: {e}"))
}

/// Resolves an input file against the dataset's directory (and, for
/// DABench layouts, a few table folders); errors name every place tried.
fn resolve_file(ctx: &Ctx, name: &Path, subdirs: &[&str]) -> LineResult<PathBuf> {
    if name.is_absolute() {
        return if name.is_file() {
            Ok(name.to_path_buf())
        } else {
            Err(format!("input file `{}` not found", name.display()))
        };
    }
    let mut tried = Vec::new();
    for sub in std::iter::once("").chain(subdirs.iter().copied()) {
        let candidate = if sub.is_empty() {
            ctx.dir.join(name)
        } else {
            ctx.dir.join(sub).join(name)
        };
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push(candidate.display().to_string());
    }
    Err(format!(
        "input file `{}` not found (looked for {})",
        name.display(),
        tried.join(", ")
    ))
}

// ---------------------------------------------------------------- native

fn native(ctx: &Ctx, mut obj: Map<String, Value>) -> LineResult<Task> {
    match obj.get("id") {
        None => return Err("missing field `id`".into()),
        Some(v) => {
            let id = id_value(v)?;
            obj.insert("id".into(), Value::String(id));
        }
    }
    req_str(&obj, "question")?;
    if let Some(expected) = obj.get_mut("expected") {
        prepare_expected(expected, "expected")?;
    }
    let mut task: Task = serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())?;
    task.files = task
        .files
        .iter()
        .map(|f| resolve_file(ctx, f, &[]))
        .collect::<LineResult<_>>()?;
    Ok(task)
}

/// Checks an `expected` object's `type` (with a clear message), turns
/// numeric strings into numbers and records exact digits of big integers.
fn prepare_expected(v: &mut Value, at: &str) -> LineResult<()> {
    let Value::Object(obj) = v else {
        return Err(format!(
            "`{at}` must be an object with a `type` (number, text, list or multi), found {}",
            kind(v)
        ));
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(format!(
                "`{at}.type` must be a string, found {}",
                kind(other)
            ))
        }
        None => {
            return Err(format!(
                "`{at}`: missing field `type` (number, text, list or multi)"
            ))
        }
    };
    let required = match ty.as_str() {
        "number" | "text" => Some("value"),
        "list" => Some("values"),
        "multi" => Some("answers"),
        _ => None,
    };
    if let Some(field) = required.filter(|f| !obj.contains_key(*f)) {
        return Err(format!("`{at}`: missing field `{field}`"));
    }
    match ty.as_str() {
        "number" => {
            let digits = match obj.get("value") {
                Some(Value::String(s)) => {
                    let n = parse_number_literal(s)
                        .filter(|n| !n.percent && n.value.is_finite())
                        .ok_or_else(|| format!("`{at}.value` `{s}` is not a number"))?;
                    obj.insert("value".into(), json!(n.value));
                    n.int_digits
                }
                Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Some(n.to_string()),
                _ => None,
            };
            let big = obj
                .get("value")
                .and_then(Value::as_f64)
                .is_some_and(|x| x.abs() >= F64_EXACT_INT);
            if let (Some(d), true, false) = (digits, big, obj.contains_key("exact")) {
                obj.insert("exact".into(), Value::String(d));
            }
            Ok(())
        }
        "text" | "list" => Ok(()),
        "multi" => match obj.get_mut("answers") {
            Some(Value::Object(parts)) => {
                for (name, part) in parts.iter_mut() {
                    prepare_expected(part, &format!("{at}.answers.{name}"))?;
                }
                Ok(())
            }
            Some(other) => Err(format!(
                "`{at}.answers` must be an object of name → expected, found {}",
                kind(other)
            )),
            None => Err(format!("`{at}`: missing field `answers`")),
        },
        other => Err(format!(
            "`{at}`: unknown `type` `{other}` (use number, text, list or multi)"
        )),
    }
}

// ----------------------------------------------------------------- GSM8K

fn gsm(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<Task> {
    let question = req_str(obj, "question")?;
    let expected = match obj.get("answer") {
        Some(Value::String(answer)) => {
            let last = answer
                .lines()
                .rev()
                .map(str::trim)
                .find_map(|l| l.strip_prefix("####"))
                .ok_or("answer has no `#### <number>` line")?
                .trim();
            let n = parse_number_literal(last)
                .filter(|n| !n.percent && n.value.is_finite())
                .ok_or_else(|| format!("`#### {last}` is not a number"))?;
            number_expected(n.value, GSM_ABS_TOL, n.int_digits.as_deref())?
        }
        Some(Value::Number(n)) => number_expected(
            n.as_f64().unwrap_or(f64::NAN),
            GSM_ABS_TOL,
            Some(n.to_string().as_str()),
        )?,
        Some(other) => {
            return Err(format!(
                "field `answer` must be a string ending in `#### <number>`, found {}",
                kind(other)
            ))
        }
        None => return Err("missing field `answer`".into()),
    };
    Ok(Task {
        id: opt_id(ctx, obj, line)?,
        question: question.to_string(),
        files: Vec::new(),
        expected,
        reference: None,
        packages: string_list(obj, "packages")?,
        tags: string_list(obj, "tags")?,
    })
}

/// PAL / GSM-Hard: `{"input": .., "target": 72}`.
fn pal(ctx: &Ctx, obj: &Map<String, Value>, line: usize) -> LineResult<Task> {
    let question = req_str(obj, "input")?;
    let expected = match obj.get("target") {
        Some(Value::Number(n)) => number_expected(
            n.as_f64().unwrap_or(f64::NAN),
            GSM_ABS_TOL,
            Some(n.to_string().as_str()),
        )?,
        Some(Value::String(s)) => {
            let n = parse_number_literal(s)
                .filter(|n| !n.percent && n.value.is_finite())
                .ok_or_else(|| format!("`target` `{s}` is not a number"))?;
            number_expected(n.value, GSM_ABS_TOL, n.int_digits.as_deref())?
        }
        Some(other) => {
            return Err(format!(
                "field `target` must be a number, found {}",
                kind(other)
            ))
        }
        None => return Err("missing field `target`".into()),
    };
    Ok(Task {
        id: opt_id(ctx, obj, line)?,
        question: question.to_string(),
        files: Vec::new(),
        expected,
        reference: obj.get("code").and_then(Value::as_str).map(str::to_string),
        packages: Vec::new(),
        tags: string_list(obj, "tags")?,
    })
}

// --------------------------------------------------------------- DABench

fn dabench_task(ctx: &mut Ctx, obj: &Map<String, Value>) -> Result<Task, LineError> {
    let id = match obj.get("id") {
        Some(v) => id_value(v)?,
        None => return Err(String::from("missing field `id`").into()),
    };
    let question = req_str(obj, "question")?;
    let format = req_str(obj, "format")?;
    let constraints = match obj.get("constraints") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Array(_)) => string_list(obj, "constraints")?.join("\n"),
        Some(other) => {
            return Err(format!(
                "field `constraints` must be a string, found {}",
                kind(other)
            )
            .into())
        }
    };
    let mut text = question.trim().to_string();
    if !constraints.is_empty() {
        text.push_str("\n\nConstraints: ");
        text.push_str(&constraints);
    }
    text.push_str("\n\nFormat: ");
    text.push_str(format.trim());

    let files = match obj.get("file_name") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(name)) => vec![resolve_file(
            ctx,
            Path::new(name),
            &["tables", "da-dev-tables", "data"],
        )?],
        Some(other) => {
            return Err(format!("field `file_name` must be a string, found {}", kind(other)).into())
        }
    };

    let inline = obj.get("answers").or_else(|| obj.get("common_answers"));
    let expected = match inline {
        Some(pairs) => labels_expected(pairs).map_err(|m| format!("labels: {m}"))?,
        None => {
            let (pairs, lfile, lline) = lookup_labels(ctx, &id)?;
            labels_expected(&pairs).map_err(|m| {
                LineError::Elsewhere(TaskError::Parse {
                    file: lfile,
                    line: lline,
                    message: format!("labels for `{id}`: {m}"),
                })
            })?
        }
    };

    let mut tags = string_list(obj, "concepts")?;
    if let Some(level) = obj.get("level").and_then(Value::as_str) {
        tags.push(format!("level:{level}"));
    }
    tags.extend(string_list(obj, "tags")?);
    Ok(Task {
        id,
        question: text,
        files,
        expected,
        reference: None,
        packages: string_list(obj, "packages")?,
        tags,
    })
}

/// `[["name", "value"], ...]` → a multi-answer.
fn labels_expected(pairs: &Value) -> LineResult<Expected> {
    let Value::Array(items) = pairs else {
        return Err(format!(
            "answers must be a list of [\"name\", \"value\"] pairs, found {}",
            kind(pairs)
        ));
    };
    if items.is_empty() {
        return Err("answers are empty".into());
    }
    let mut answers = BTreeMap::new();
    for item in items {
        let (name, value) = match item.as_array().map(Vec::as_slice) {
            Some([Value::String(n), v]) => (n.trim(), v),
            _ => {
                return Err(format!(
                    "each answer must be a [\"name\", \"value\"] pair, found {item}"
                ))
            }
        };
        if name.is_empty() {
            return Err("an answer has an empty name".into());
        }
        let expected = match value {
            Value::Number(n) => number_expected(
                n.as_f64().unwrap_or(f64::NAN),
                DABENCH_ABS_TOL,
                Some(n.to_string().as_str()),
            )?,
            Value::String(s) => match parse_number_literal(s)
                .filter(|n| !n.percent && n.value.is_finite() && !s.contains('/'))
            {
                Some(n) => number_expected(n.value, DABENCH_ABS_TOL, n.int_digits.as_deref())?,
                None => Expected::Text {
                    value: s.trim().to_string(),
                    case_sensitive: false,
                },
            },
            Value::Bool(b) => Expected::Text {
                value: if *b { "True" } else { "False" }.into(),
                case_sensitive: false,
            },
            other => {
                return Err(format!(
                    "answer `{name}` must be a string or a number, found {}",
                    kind(other)
                ))
            }
        };
        if answers.insert(name.to_string(), expected).is_some() {
            return Err(format!("answer `{name}` is given twice"));
        }
    }
    Ok(Expected::Multi { answers })
}

/// The labels of DABench task `id` from the labels file next to the
/// questions file.
fn lookup_labels(ctx: &mut Ctx, id: &str) -> Result<(Value, PathBuf, usize), LineError> {
    if ctx.labels.is_none() {
        ctx.labels = Some(read_labels(ctx.file).map_err(LineError::Elsewhere)?);
    }
    let labels = ctx.labels.as_ref().map(|m| m.get(id));
    match labels.flatten() {
        Some(found) => Ok(found.clone()),
        None => {
            let looked: Vec<String> = labels_paths(ctx.file)
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect();
            Err(format!(
                "no labels for DABench task `{id}`: the line has no `answers`/`common_answers` \
                 and there is no entry with this id in {}",
                looked.join(" or ")
            )
            .into())
        }
    }
}

/// Reads the labels files of a questions file (missing files are fine).
fn read_labels(file: &Path) -> Result<HashMap<String, (Value, PathBuf, usize)>, TaskError> {
    let mut out: HashMap<String, (Value, PathBuf, usize)> = HashMap::new();
    for path in labels_paths(file) {
        if !path.is_file() {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(|e| TaskError::File {
            file: path.clone(),
            message: format!("cannot read: {e}"),
        })?;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim_start_matches('\u{feff}').trim();
            if trimmed.is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#') {
                continue;
            }
            let err = |message: String| TaskError::Parse {
                file: path.clone(),
                line,
                message,
            };
            let value: Value = serde_json::from_str(trimmed).map_err(|e| err(json_error(&e)))?;
            let Value::Object(obj) = value else {
                return Err(err(format!(
                    "expected a JSON object, found {}",
                    kind(&value)
                )));
            };
            let id = obj
                .get("id")
                .ok_or_else(|| err("missing field `id`".into()))
                .and_then(|v| id_value(v).map_err(err))?;
            let pairs = obj
                .get("common_answers")
                .or_else(|| obj.get("answers"))
                .cloned()
                .ok_or_else(|| err("missing field `common_answers`".into()))?;
            if let Some((_, first_file, first)) = out.get(&id) {
                return Err(err(format!(
                    "duplicate labels for `{id}` (first at {}:{first})",
                    first_file.display()
                )));
            }
            out.insert(id, (pairs, path.clone(), line));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (name → content) into a fresh temp dir.
    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        dir
    }

    fn load_err(files: &[(&str, &str)], which: &str) -> (String, TaskError) {
        let dir = dir_with(files);
        let path = dir.path().join(which);
        let err = load_file(&path).expect_err("loading should fail");
        (err.to_string(), err)
    }

    fn parse_line_of(err: &TaskError) -> (String, usize, String) {
        match err {
            TaskError::Parse {
                file,
                line,
                message,
            } => (
                file.file_name().unwrap().to_string_lossy().into_owned(),
                *line,
                message.clone(),
            ),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn number(e: &Expected) -> (f64, Option<f64>) {
        match e {
            Expected::Number { value, abs_tol, .. } => (*value, *abs_tol),
            other => panic!("expected a number, got {other:?}"),
        }
    }

    const GSM: &str = r#####"{"question": "A baker fills 3 trays with 12 rolls each and sells 30 rolls. How many rolls are left?", "answer": "3 trays hold 3 * 12 = <<3*12=36>>36 rolls.\nAfter selling, 36 - 30 = <<36-30=6>>6 remain.\n#### 6"}
{"id": "fence", "question": "A fence costs $1,000 per side for 2 sides plus a $250 gate. Total?", "answer": "2 * 1000 + 250 = 2250\n#### 2,250"}

// a comment line
# another comment
{"question": "The temperature drops from 3 to -4 degrees. What is it now?", "answer": "#### -4"}
"#####;

    #[test]
    fn gsm_lines() {
        let dir = dir_with(&[("grade.jsonl", GSM)]);
        let tasks = load_file(&dir.path().join("grade.jsonl")).unwrap();
        assert_eq!(tasks.len(), 3);
        assert_eq!(tasks[0].id, "grade-1");
        assert!(tasks[0].question.starts_with("A baker fills"));
        assert_eq!(number(&tasks[0].expected), (6.0, Some(GSM_ABS_TOL)));
        assert_eq!(tasks[1].id, "fence");
        assert_eq!(number(&tasks[1].expected).0, 2250.0);
        // Line numbers count blank and comment lines.
        assert_eq!(tasks[2].id, "grade-6");
        assert_eq!(number(&tasks[2].expected).0, -4.0);
        assert!(tasks.iter().all(|t| t.files.is_empty()));
    }

    #[test]
    fn gsm_big_integer_keeps_digits() {
        let line = r#####"{"question": "q", "answer": "#### 123456789012345678901"}"#####;
        let dir = dir_with(&[("big.jsonl", line)]);
        let tasks = load_file(&dir.path().join("big.jsonl")).unwrap();
        assert_eq!(number(&tasks[0].expected).0, 123456789012345678901.0);
        // Carried as `exact` once `Expected::Number` has that field.
        let v = serde_json::to_value(&tasks[0].expected).unwrap();
        if let Some(exact) = v.get("exact") {
            assert_eq!(exact, "123456789012345678901");
        }
    }

    #[test]
    fn pal_lines() {
        let line = r#"{"input": "Twice 21?", "target": 42.0, "code": "answer = 2 * 21"}"#;
        let dir = dir_with(&[("hard.jsonl", line)]);
        let t = &load_file(&dir.path().join("hard.jsonl")).unwrap()[0];
        assert_eq!(t.id, "hard-1");
        assert_eq!(number(&t.expected), (42.0, Some(GSM_ABS_TOL)));
        assert_eq!(t.reference.as_deref(), Some("answer = 2 * 21"));
    }

    #[test]
    fn native_lines_resolve_files() {
        let jsonl = r#"{"id": "n1", "question": "Sum the price column.", "files": ["data/prices.csv"], "expected": {"type": "number", "value": 12.5, "abs_tol": 0.01}, "packages": ["pandas"], "tags": ["sum"]}
{"id": 2, "question": "Capital?", "expected": {"type": "text", "value": "Paris"}}
{"id": "n3", "question": "Parts?", "expected": {"type": "multi", "answers": {"a": {"type": "number", "value": "1,000"}, "b": {"type": "list", "values": [1, 2], "ordered": true}}}}
"#;
        let dir = dir_with(&[
            ("set/native.jsonl", jsonl),
            ("set/data/prices.csv", "price\n12.5\n"),
        ]);
        let tasks = load_file(&dir.path().join("set/native.jsonl")).unwrap();
        assert_eq!(tasks.len(), 3);
        assert!(tasks[0].files[0].is_absolute());
        assert_eq!(tasks[0].files[0], dir.path().join("set/data/prices.csv"));
        assert_eq!(tasks[0].packages, vec!["pandas"]);
        assert_eq!(tasks[1].id, "2");
        let Expected::Multi { answers } = &tasks[2].expected else {
            panic!("multi expected");
        };
        assert_eq!(number(&answers["a"]).0, 1000.0);
    }

    #[test]
    fn native_relative_path_is_made_absolute() {
        // A relative dataset path still yields absolute input files.
        let dir = dir_with(&[
            (
                "d/t.jsonl",
                r#"{"id": "x", "question": "q", "files": ["f.csv"], "expected": {"type": "number", "value": 1}}"#,
            ),
            ("d/f.csv", "a\n1\n"),
        ]);
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(dir.path(), &cwd).join("d/t.jsonl");
        let tasks = load_file(&rel).unwrap();
        assert!(tasks[0].files[0].is_absolute(), "{:?}", tasks[0].files);
        assert!(tasks[0].files[0].is_file());
    }

    /// `target` relative to `base` (enough for temp dirs under `/`).
    fn pathdiff(target: &Path, base: &Path) -> PathBuf {
        let ups = base.components().count() - 1;
        let mut p = PathBuf::new();
        for _ in 0..ups {
            p.push("..");
        }
        p.join(target.strip_prefix("/").unwrap())
    }

    const QUESTIONS: &str = r#"{"id": 0, "question": "What is the mean of the price column?", "concepts": ["Summary Statistics"], "constraints": "Round to two decimal places.", "format": "@mean_price[mean_value] where mean_value is a number rounded to two decimals.", "file_name": "shop.csv", "level": "easy"}
{"id": 1, "question": "Which city has the most customers?", "format": "@top_city[city_name]", "file_name": "shop.csv", "answers": [["top_city", "Colden"]]}
"#;
    const LABELS: &str = r#"{"id": 0, "common_answers": [["mean_price", "12.35"]]}
"#;

    #[test]
    fn dabench_question_and_labels() {
        let dir = dir_with(&[
            ("da.jsonl", QUESTIONS),
            ("da_labels.jsonl", LABELS),
            ("tables/shop.csv", "price,city\n12.35,Colden\n"),
        ]);
        let tasks = load_file(&dir.path().join("da.jsonl")).unwrap();
        assert_eq!(tasks.len(), 2);
        let t = &tasks[0];
        assert_eq!(t.id, "0");
        assert!(t.question.starts_with("What is the mean"));
        assert!(t
            .question
            .contains("Constraints: Round to two decimal places."));
        assert!(t.question.contains("Format: @mean_price[mean_value]"));
        assert_eq!(t.files, vec![dir.path().join("tables/shop.csv")]);
        assert_eq!(t.tags, vec!["Summary Statistics", "level:easy"]);
        let Expected::Multi { answers } = &t.expected else {
            panic!("multi expected");
        };
        assert_eq!(
            number(&answers["mean_price"]),
            (12.35, Some(DABENCH_ABS_TOL))
        );
        let Expected::Multi { answers } = &tasks[1].expected else {
            panic!("multi expected");
        };
        assert_eq!(
            answers["top_city"],
            Expected::Text {
                value: "Colden".into(),
                case_sensitive: false
            }
        );
    }

    #[test]
    fn dabench_without_labels_names_the_places_looked() {
        let (msg, err) = load_err(
            &[("da.jsonl", QUESTIONS), ("tables/shop.csv", "price\n1\n")],
            "da.jsonl",
        );
        let (file, line, message) = parse_line_of(&err);
        assert_eq!((file.as_str(), line), ("da.jsonl", 1));
        assert!(message.contains("no labels for DABench task `0`"), "{msg}");
        assert!(message.contains("da_labels.jsonl"), "{msg}");
    }

    #[test]
    fn dabench_bad_labels_file_is_reported_there() {
        let (msg, err) = load_err(
            &[
                ("da.jsonl", QUESTIONS),
                (
                    "da_labels.jsonl",
                    "{\"id\": 0, \"common_answers\": [[\"mean_price\"]]}\n",
                ),
                ("shop.csv", "price\n1\n"),
            ],
            "da.jsonl",
        );
        let (file, line, message) = parse_line_of(&err);
        assert_eq!((file.as_str(), line), ("da_labels.jsonl", 1), "{msg}");
        assert!(message.contains("pair"), "{msg}");
    }

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

    fn tasks(n: usize) -> Vec<Task> {
        (0..n)
            .map(|i| Task {
                id: format!("t{i:03}"),
                question: format!("question {i}"),
                files: Vec::new(),
                expected: Expected::Text {
                    value: format!("answer {i}"),
                    case_sensitive: false,
                },
                reference: None,
                packages: Vec::new(),
                tags: Vec::new(),
            })
            .collect()
    }

    fn ids(tasks: &[Task]) -> Vec<String> {
        tasks.iter().map(|t| t.id.clone()).collect()
    }

    #[test]
    fn select_samples_deterministically_in_original_order() {
        let a = ids(&select(tasks(100), None, Some(10), 7));
        let b = ids(&select(tasks(100), None, Some(10), 7));
        let c = ids(&select(tasks(100), None, Some(10), 8));
        assert_eq!(a.len(), 10);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(a, sorted, "original order kept");
        // Stable under suite growth: a task picked from the first 100 stays
        // ranked among the lowest when 100 more are added.
        let grown = ids(&select(tasks(200), None, Some(20), 7));
        let kept = a.iter().filter(|id| grown.contains(id)).count();
        assert!(kept >= 5, "{kept} of {a:?} in {grown:?}");
        // Limit after sample; sample ≥ len keeps everything.
        assert_eq!(
            ids(&select(tasks(100), Some(3), Some(10), 7)),
            a[..3].to_vec()
        );
        assert_eq!(select(tasks(5), None, Some(10), 1).len(), 5);
        assert_eq!(
            ids(&select(tasks(5), Some(2), None, 1)),
            vec!["t000", "t001"]
        );
        assert!(select(tasks(5), Some(0), None, 1).is_empty());
        assert!(select(tasks(5), None, Some(0), 1).is_empty());
    }

    #[test]
    fn labels_files_are_recognised() {
        let dir = dir_with(&[
            ("a_labels.jsonl", ""),
            ("da-dev-questions.jsonl", ""),
            ("da-dev-labels.jsonl", ""),
            ("lonely-labels.jsonl", ""),
        ]);
        let p = |n: &str| dir.path().join(n);
        assert!(is_labels_file(&p("a_labels.jsonl")));
        assert!(is_labels_file(&p("da-dev-labels.jsonl")));
        assert!(!is_labels_file(&p("lonely-labels.jsonl")));
        assert!(!is_labels_file(&p("da-dev-questions.jsonl")));
    }
}
