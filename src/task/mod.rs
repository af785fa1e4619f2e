//! Tasks: one question with its files and expected answer; suites of them;
//! loaders for the native JSONL format, GSM8K-style and DABench-style files;
//! answer checkers.

pub mod check;
pub mod load;
pub mod score;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One question with its files and expected answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub question: String,
    /// Input files copied into the kernel's working directory (absolute
    /// after loading; relative to the dataset file in JSONL).
    #[serde(default)]
    pub files: Vec<PathBuf>,
    pub expected: Expected,
    /// A reference solution: Python that leaves the answer the checker
    /// accepts (in `answer`, or as `@name[value]` lines for multi answers).
    #[serde(default)]
    pub reference: Option<String>,
    /// Packages the task needs beyond the standard library.
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The scoring rule the dataset's publishers ship, applied beside
    /// retrace's own (`None`: the dataset has none, or it is implied by
    /// the answer's type, as MATH's checkers are by [`Expected::Math`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
}

/// A dataset's own published scoring rule (docs/math-checking.md,
/// "Published rules").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Published {
    /// GSM8K as lm-evaluation-harness scores it: the reference's `#### n`
    /// text and the answer, with `,`, `$` and a final `.` removed, equal as
    /// strings.
    Gsm8k { answer: String },
    /// InfiAgent-DABench's closed-form evaluation: every `@name[value]`
    /// part tagged in the answer or output, each equal as a string or
    /// within 1e-6 as numbers.
    Dabench,
}

/// The expected answer and how to compare with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Expected {
    /// A number, within `abs_tol` or `rel_tol` (either suffices).
    Number {
        value: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        abs_tol: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rel_tol: Option<f64>,
        /// Also accept `12.5%` for 0.125 and `0.125` for 12.5 (percent tasks).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_percent: bool,
        /// All digits of an integer answer too big for an f64.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exact: Option<String>,
    },
    /// Text, compared after normalisation (case, whitespace, quotes).
    Text {
        value: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        case_sensitive: bool,
    },
    /// A list (ordered) or set (unordered) of numbers or strings.
    List {
        values: Vec<serde_json::Value>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        abs_tol: Option<f64>,
    },
    /// Several named answers, written `@name[value]` (DABench style),
    /// scored per sub-answer and as all-correct.
    Multi { answers: BTreeMap<String, Expected> },
    /// A competition-math answer in LaTeX (`\frac{14}{3}`, `3\sqrt{13}`,
    /// `\left( 3, \frac{\pi}{2} \right)`), decided by the symbolic
    /// checker in a kernel of its own (docs/math-checking.md).
    Math { latex: String },
}

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{file}:{line}: {message}")]
    Parse {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    File { file: PathBuf, message: String },
    #[error(
        "unknown suite `{0}`: use math, tabular, packages, competition, resource or a path to a .jsonl, .json or .parquet file or a directory"
    )]
    UnknownSuite(String),
    /// The built-in suites could not be written out under `$RETRACE_HOME`.
    #[error("writing out the built-in suites: {0}")]
    Builtin(crate::util::IoError),
}
