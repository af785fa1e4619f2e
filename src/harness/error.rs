//! What can go wrong in a run, each with its cause kept: the CLI prints
//! the chain, and the exit code follows from the kind (usage 2, the
//! harness failing its job 3), never from how the message was worded.

use std::path::PathBuf;

use crate::kernel::KernelError;
use crate::model::ModelError;
use crate::pyenv::dynamic::{AllowlistError, InstallError};
use crate::pyenv::PyenvError;
use crate::record::RunConfigError;
use crate::sandbox::SandboxError;
use crate::task::TaskError;
use crate::util::IoError;

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Io(#[from] IoError),
    /// A journal line in the middle of the file that is not a record (a
    /// torn last line is dropped, not an error).
    #[error("{}:{line}: not a record", path.display())]
    JournalLine {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("encoding {what}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Prompt(#[from] crate::repair::prompt::PromptError),
    /// The run was asked for something that cannot be.
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Suite(#[from] TaskError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("image {name}")]
    Image {
        name: String,
        #[source]
        source: Box<PyenvError>,
    },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Gateway(#[from] KernelError),
    #[error("strategy {strategy}")]
    Installer {
        strategy: String,
        #[source]
        source: InstallError,
    },
    #[error("strategy {strategy}")]
    Allowlist {
        strategy: String,
        #[source]
        source: AllowlistError,
    },
    #[error("writing reports")]
    Report(#[from] crate::report::ReportError),
    #[error("a task failed inside the harness")]
    Task(#[from] tokio::task::JoinError),
    #[error("interrupted")]
    Interrupted,
}

/// Asked for something that cannot be: a bad suite, a directory that
/// already holds a run, a run directory that is not one, a changed
/// dataset on resume. Each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("suite `{suite}` selected no tasks")]
    NoTasks { suite: String },
    #[error("a run needs at least one strategy")]
    NoStrategy,
    #[error(
        "{} each give several values: that is one arm per combination; \
         add --arms-product to run them all, or vary one flag at a time",
        flags.join(" and ")
    )]
    ArmsProduct { flags: Vec<&'static str> },
    #[error("arm {name} is asked for twice; give each value of a varied flag once")]
    DuplicateArm { name: String },
    #[error(
        "{} already holds a run; continue it with `retrace run --resume {}` or choose another --out",
        dir.display(),
        dir.display()
    )]
    ExistingRun { dir: PathBuf },
    #[error("{}; expected a run directory made by `retrace run`", path.display())]
    NotARun {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", path.display())]
    BadRunJson {
        path: PathBuf,
        #[source]
        source: RunConfigError,
    },
    #[error("{}: no records to re-score", path.display())]
    NoRecords { path: PathBuf },
    #[error(
        "the prompt templates ({dir}) changed since the run started; \
         a resumed run must use the same prompts"
    )]
    PromptsChanged { dir: String },
    #[error(
        "suite `{suite}` no longer gives this run's tasks ({detail}); \
         a resumed run must see the same tasks"
    )]
    TasksChanged { suite: String, detail: String },
    #[error(
        "--round0-from {}: the run has no arm `{arm}` (its arms: {})",
        dir.display(),
        arms.join(", ")
    )]
    Round0Arm {
        dir: PathBuf,
        arm: String,
        arms: Vec<String>,
    },
    #[error("--round0-from {}: task {task} {why}", dir.display())]
    Round0Task {
        dir: PathBuf,
        task: String,
        why: &'static str,
    },
    #[error(
        "--round0-from {}: that directory now holds run {now}, not {then} whose round 0 this run \
         started from; a resumed run must start from the same round 0",
        dir.display()
    )]
    Round0Changed {
        dir: PathBuf,
        then: String,
        now: String,
    },
    #[error("{0}")]
    Gateway(&'static str),
    #[error("--env: {0}")]
    Env(#[from] crate::kernel::EnvError),
    #[error(
        "the run gives kernels the secret `{key}`, which run.json keeps redacted; \
         give the run's variables again with --env KEY=VALUE when resuming"
    )]
    EnvSecretMissing { key: String },
    #[error(
        "--env: `{key}` differs from the run's ({then} then, {now} now); \
         a resumed run must give its kernels the same variables"
    )]
    EnvChanged {
        key: String,
        then: String,
        now: String,
    },
}

impl HarnessError {
    /// The user asked for something impossible (exit code 2), as opposed
    /// to the harness failing to do its job (exit code 3).
    pub fn is_usage(&self) -> bool {
        match self {
            HarnessError::Usage(_) | HarnessError::Prompt(_) | HarnessError::Suite(_) => true,
            HarnessError::Model(e) => matches!(e, ModelError::Config(_)),
            _ => false,
        }
    }
}
