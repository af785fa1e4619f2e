//! The run as a library: configuration and setup ([`Run`]), the scheduler,
//! one task's rounds (an episode), the journal and resume, progress, and
//! reference validation. Records are defined in `crate::record`.

mod answer;
mod episode;
pub mod journal;
pub mod packages;
pub mod progress;
pub mod rescore;
mod run;
pub mod runner;
pub mod validate;

pub use rescore::{rescore_run, RescoreResult};
pub use run::{
    cancel_on_ctrl_c, read_config, run_tasks, write_reports, ResumeOptions, Run, RunOptions,
    RunResult,
};
pub use runner::{Arm, Runner};

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
    #[error("journal: {0}")]
    Journal(String),
    #[error(transparent)]
    Prompt(#[from] crate::repair::prompt::PromptError),
    /// The run was asked for something that cannot be (a bad suite, a
    /// directory that already holds a run, a changed dataset on resume).
    #[error("{0}")]
    Config(String),
    /// What the run needs could not be set up (image, model, sandbox).
    #[error("{0}")]
    Setup(String),
    #[error("writing reports")]
    Report(#[from] crate::report::ReportError),
    #[error("a task failed inside the harness: {0}")]
    Task(String),
    #[error("interrupted")]
    Interrupted,
}

impl HarnessError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io(crate::util::IoError::new(context, source))
    }

    /// The user asked for something impossible (exit code 2), as opposed
    /// to the harness failing to do its job (exit code 3).
    pub fn is_usage(&self) -> bool {
        matches!(self, HarnessError::Config(_) | HarnessError::Prompt(_))
    }
}
