//! The hostile-code corpus: one TOML file per case (`datasets/hostile/`),
//! each naming the code to run, the verdict the confined executor must give
//! and optional limit overrides. `retrace sandbox check` runs it in CI so a
//! regressed limit fails the build.
//!
//! ```toml
//! id = "cpu_busy_loop"
//! category = "cpu_time"
//! description = "Pure-Python busy loop."
//! expect = "timeout_cpu"
//! code = '''
//! while True:
//!     pass
//! '''
//! # All optional, besides the verdict:
//! flags = []                      # flags that must be present
//! fired = []                      # limits that must be among those that fired
//! not_fired = []                  # limits that must not be among them
//! exception = "PermissionError"   # the error's exception name
//! errno = 1                       # the error's text starts with `[Errno 1]`
//! stdout_contains = []            # text the cell must (not) print
//! stdout_lacks = []
//! stderr_contains = []
//! stderr_lacks = []
//! answer = "42"                   # the answer read from the cell
//! max_harness_mb = 64             # the harness's RSS may grow this much
//! setup = '''...'''               # a cell run first in the same kernel
//! setup_expect = "ok"             # its verdict, when it matters
//! restart_before = false          # restart the kernel between setup and code
//! next_code = "print(1)"          # the follow-up cell in the same kernel
//! next_stdout = "1\n"             # exactly what it must print
//! [limits]                        # all optional
//! timeout = "3s"
//! cpu_time = "2s"
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr};

use super::Expectation;
use crate::sandbox::{SandboxLimits, Verdict};

/// What a case attacks (the reference's §3 sections, plus guards).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Display,
    EnumIter,
    EnumString,
    IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = crate::util::names::unknown::<Category>
)]
pub enum Category {
    CpuTime,
    Memory,
    Processes,
    Signals,
    Crashes,
    Output,
    Disk,
    NetworkIpc,
    JupyterProtocol,
    Escape,
    /// Legitimate code that must stay `ok` (no limit may misfire).
    FalsePositive,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Limits a case sets for itself; everything else comes from the command
/// line (or [`SandboxLimits::default`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_time: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_cap_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_cap_messages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
}

impl LimitOverrides {
    /// `base` with this case's overrides applied.
    pub fn apply(&self, base: &SandboxLimits) -> SandboxLimits {
        SandboxLimits {
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
            pids: self.pids.unwrap_or(base.pids),
            cpus: self.cpus.unwrap_or(base.cpus),
            timeout: self.timeout.unwrap_or(base.timeout),
            cpu_time: self.cpu_time.unwrap_or(base.cpu_time),
            output_cap_bytes: self.output_cap_bytes.unwrap_or(base.output_cap_bytes),
            output_cap_messages: self.output_cap_messages.unwrap_or(base.output_cap_messages),
            disk_bytes: self.disk_bytes.unwrap_or(base.disk_bytes),
        }
    }
}

/// One hostile (or guard) case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Case {
    pub id: String,
    pub category: Category,
    pub description: String,
    pub code: String,
    pub expect: Verdict,
    /// What the outcome must show besides its verdict.
    pub expectation: Expectation,
    /// Round 0 in the same kernel: a cell that leaves (hostile) state.
    pub setup: Option<Setup>,
    /// The follow-up cell and exactly what it must print.
    pub next_code: String,
    pub next_stdout: String,
    pub limits: LimitOverrides,
    /// Why the case must not run on a gateway's kernels even where its
    /// category could (it reaches beyond the kernel: the network, the
    /// image's packages); `local_only` in the file.
    pub local_only: Option<String>,
    /// The file the case was read from.
    pub source: PathBuf,
}

/// A cell run before the case's code, in the same kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setup {
    pub code: String,
    /// Its verdict, when the case depends on it.
    pub expect: Option<Verdict>,
    /// Restart the kernel after it (kill and fresh start), so the case's
    /// code runs in a kernel that nothing of the setup may influence.
    pub restart_before: bool,
}

impl Case {
    /// Substring match on id or category.
    pub fn matches(&self, pattern: &str) -> bool {
        self.id.contains(pattern) || self.category.as_str().contains(pattern)
    }
}

/// What is wrong with one case file: the file, the key at fault and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct CaseError {
    pub file: PathBuf,
    /// The key at fault (`limits.memory`, `fired`, ...); `None` when the
    /// text is not a case at all (TOML syntax, unknown or missing keys).
    pub key: Option<&'static str>,
    /// What the case's author reads after the file name.
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("corpus directory {dir}: {cause}")]
    Dir { dir: PathBuf, cause: std::io::Error },
    #[error("corpus directory {0} holds no *.toml case files")]
    Empty(PathBuf),
    #[error("{}: {cause}", file.display())]
    Read {
        file: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error("duplicate case id `{id}` in {first} and {second}")]
    Duplicate {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// One entry of a corpus directory: a hostile [`Case`] or a benign
/// notebook. Both corpora load, sort and reject duplicates the same way.
pub trait Entry: Sized {
    /// Parses one `*.toml` file.
    fn parse(text: &str, source: &Path) -> Result<Self, CaseError>;
    fn id(&self) -> &str;
    /// The file it was read from.
    fn source(&self) -> &Path;
}

impl Entry for Case {
    fn parse(text: &str, source: &Path) -> Result<Case, CaseError> {
        Case::parse(text, source)
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn source(&self) -> &Path {
        &self.source
    }
}

/// Loads every `*.toml` case file of each directory (not recursive),
/// sorted by id.
pub fn load_dirs(dirs: &[PathBuf]) -> Result<Vec<Case>, CorpusError> {
    load_entries(dirs)
}

/// Loads every `*.toml` file of each directory (not recursive), sorted by
/// id. Unreadable directories, files that do not parse and duplicate ids
/// are errors.
pub fn load_entries<T: Entry>(dirs: &[PathBuf]) -> Result<Vec<T>, CorpusError> {
    let mut entries: Vec<T> = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for dir in dirs {
        for entry in load_dir_entries::<T>(dir)? {
            if let Some(first) = seen.get(entry.id()) {
                return Err(CorpusError::Duplicate {
                    id: entry.id().to_string(),
                    first: first.clone(),
                    second: entry.source().to_path_buf(),
                });
            }
            seen.insert(entry.id().to_string(), entry.source().to_path_buf());
            entries.push(entry);
        }
    }
    entries.sort_by(|a, b| a.id().cmp(b.id()));
    Ok(entries)
}

/// Loads the `*.toml` case files of one directory, in file-name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, CorpusError> {
    load_dir_entries(dir)
}

fn load_dir_entries<T: Entry>(dir: &Path) -> Result<Vec<T>, CorpusError> {
    let dir_err = |cause| CorpusError::Dir {
        dir: dir.to_path_buf(),
        cause,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(dir_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(dir_err)?
        .into_iter()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    if files.is_empty() {
        return Err(CorpusError::Empty(dir.to_path_buf()));
    }
    files.sort();
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).map_err(|cause| CorpusError::Read {
                file: file.clone(),
                cause,
            })?;
            Ok(T::parse(&text, file)?)
        })
        .collect()
}

/// The cases whose id or category contains `pattern` (all when `None`).
pub fn filter(cases: Vec<Case>, pattern: Option<&str>) -> Vec<Case> {
    match pattern {
        None => cases,
        Some(p) => cases.into_iter().filter(|c| c.matches(p)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Flag;
    use strum::IntoEnumIterator;

    #[test]
    fn category_names_are_the_serde_names() {
        for c in Category::iter() {
            assert_eq!(c.as_str().parse::<Category>().unwrap(), c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert_eq!(c.to_string(), c.as_str());
        }
        assert_eq!(Category::iter().count(), 11);
        assert_eq!(Category::NetworkIpc.as_str(), "network_ipc");
    }

    const GOOD: &str = r#"
id = "busy"
category = "cpu_time"
description = "spin"
expect = "timeout_cpu"
flags = ["restarted"]
code = '''
while True:
    pass
'''
[limits]
memory = "256M"
pids = 64
cpus = 1
timeout = "3s"
cpu_time = 2
output_cap = "64K"
disk = 1048576
"#;

    #[test]
    fn parses_a_case_with_overrides() {
        let case = Case::parse(GOOD, Path::new("busy.toml")).unwrap();
        assert_eq!(case.id, "busy");
        assert_eq!(case.category, Category::CpuTime);
        assert_eq!(case.expect, Verdict::TimeoutCpu);
        assert_eq!(case.expectation.flags, vec![Flag::Restarted]);
        assert!(case.expectation.stdout_contains.is_empty());
        assert_eq!(case.setup, None);
        assert_eq!(
            (case.next_code.as_str(), case.next_stdout.as_str()),
            ("print(1)", "1\n")
        );
        assert!(case.code.contains("while True"));
        let l = case.limits.apply(&SandboxLimits::default());
        assert_eq!(l.memory_bytes, 256 << 20);
        assert_eq!(l.pids, 64);
        assert_eq!(l.cpus, 1.0);
        assert_eq!(l.timeout, Duration::from_secs(3));
        assert_eq!(l.cpu_time, Duration::from_secs(2));
        assert_eq!(l.output_cap_bytes, 64 << 10);
        assert_eq!(l.disk_bytes, 1 << 20);
        assert_eq!(
            l.output_cap_messages,
            SandboxLimits::default().output_cap_messages
        );
    }

    #[test]
    fn parses_stdout_expectations() {
        let text = GOOD.replace(
            "flags = [\"restarted\"]",
            "flags = []\nstdout_contains = [\"pip_failed True\", \"connect_failed True\"]",
        );
        let case = Case::parse(&text, Path::new("x.toml")).unwrap();
        assert_eq!(
            case.expectation.stdout_contains,
            ["pip_failed True", "connect_failed True"]
        );
    }

    #[test]
    fn parses_the_full_schema() {
        let text = GOOD.replace(
            "flags = [\"restarted\"]",
            r#"flags = []
fired = ["oom_killed", "timeout_wall"]
exception = "PermissionError"
errno = 1
stdout_lacks = ["escaped"]
stderr_contains = ["warn"]
stderr_lacks = ["secret"]
answer = "42"
max_harness_mb = 64
setup = "import builtins; builtins.print = None"
setup_expect = "ok"
restart_before = true
next_code = "print(2)"
next_stdout = "2\n""#,
        );
        let case = Case::parse(&text, Path::new("x.toml")).unwrap();
        let e = &case.expectation;
        assert_eq!(e.fired, [Verdict::OomKilled, Verdict::TimeoutWall]);
        assert_eq!(e.exception.as_deref(), Some("PermissionError"));
        assert_eq!(e.errno, Some(1));
        assert_eq!(e.stdout_lacks, ["escaped"]);
        assert_eq!(e.stderr_contains, ["warn"]);
        assert_eq!(e.stderr_lacks, ["secret"]);
        assert_eq!(e.answer.as_deref(), Some("42"));
        assert_eq!((e.max_harness_mb, e.harness_bound_mb()), (Some(64), 64));
        let setup = case.setup.unwrap();
        assert!(setup.code.contains("builtins.print"));
        assert_eq!(setup.expect, Some(Verdict::Ok));
        assert!(setup.restart_before);
        assert_eq!(
            (case.next_code.as_str(), case.next_stdout.as_str()),
            ("print(2)", "2\n")
        );

        let orphan = GOOD.replace("flags = [\"restarted\"]", "restart_before = true");
        let err = Case::parse(&orphan, Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("need a setup cell"), "{err}");
        assert_eq!(err.key, Some("setup"));
        let bad_fired = GOOD.replace("flags = [\"restarted\"]", "fired = [\"boom\"]");
        let err = Case::parse(&bad_fired, Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("fired"), "{err}");
        assert_eq!(err.key, Some("fired"));
    }

    #[test]
    fn rejects_bad_fields() {
        let bad = |from: &str, to: &str| {
            Case::parse(&GOOD.replace(from, to), Path::new("x.toml"))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("\"timeout_cpu\"", "\"slow\"").contains("unknown verdict"));
        assert!(bad("\"cpu_time\"\n", "\"cpu\"\n").contains("unknown category"));
        assert!(bad("[\"restarted\"]", "[\"nope\"]").contains("unknown flag"));
        assert!(bad("\"busy\"", "\"has space\"").contains("id"));
        assert!(bad("pids = 64", "pid = 64").contains("pid"));
        assert!(bad("\"256M\"", "\"lots\"").contains("limits.memory"));
        let no_room = "flags = [\"restarted\"]\nmax_harness_mb = 0";
        assert!(bad("flags = [\"restarted\"]", no_room).contains("max_harness_mb"));
        // Huge numbers are refused with the key's name, never a panic.
        assert!(bad("cpu_time = 2", "cpu_time = 1e300").contains("limits.cpu_time"));
        assert!(bad("\"3s\"", "\"1e300s\"").contains("limits.timeout"));
        assert!(bad("\"256M\"", "\"1e300G\"").contains("limits.memory"));
        let empty_marker = "flags = [\"restarted\"]\nstdout_contains = [\"\"]";
        assert!(bad("flags = [\"restarted\"]", empty_marker).contains("stdout_contains"));
        assert!(Case::parse("id = 1", Path::new("x.toml")).is_err());
    }

    #[test]
    fn loads_sorted_rejects_duplicates_and_names_bad_files() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("1.toml"), GOOD.replace("\"busy\"", "\"zz\"")).unwrap();
        std::fs::write(a.path().join("2.toml"), GOOD.replace("\"busy\"", "\"aa\"")).unwrap();
        std::fs::write(a.path().join("notes.md"), "not a case").unwrap();
        std::fs::write(b.path().join("3.toml"), GOOD).unwrap();
        let cases = load_dirs(&[a.path().into(), b.path().into()]).unwrap();
        let ids: Vec<_> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["aa", "busy", "zz"]);

        let picked = filter(cases.clone(), Some("cpu_t"));
        assert_eq!(picked.len(), 3);
        let picked = filter(cases, Some("zz"));
        assert_eq!(picked.len(), 1);

        std::fs::write(b.path().join("4.toml"), GOOD).unwrap();
        let err = load_dirs(&[b.path().into()]).unwrap_err().to_string();
        assert!(err.contains("duplicate case id `busy`"), "{err}");

        std::fs::write(b.path().join("4.toml"), "id = \"x\"\ncode = '''").unwrap();
        let err = load_dirs(&[b.path().into()]).unwrap_err().to_string();
        assert!(err.contains("4.toml"), "{err}");

        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            load_dirs(&[empty.path().into()]),
            Err(CorpusError::Empty(_))
        ));
        assert!(matches!(
            load_dirs(&[empty.path().join("missing")]),
            Err(CorpusError::Dir { .. })
        ));
    }
}
