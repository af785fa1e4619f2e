//! The run: configuration, the round loop, the journal and resume, progress.

pub mod config;
pub mod journal;
pub mod progress;
pub mod record;
pub mod runner;
pub mod validate;

pub use config::{RunConfig, Selection, StopOn};
pub use record::{AttemptRecord, RecordKind, StopReason, SCHEMA_VERSION};
pub use runner::Runner;

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("journal: {0}")]
    Journal(String),
    #[error(transparent)]
    Prompt(#[from] crate::repair::prompt::PromptError),
    #[error("a task failed inside the harness: {0}")]
    Task(String),
    #[error("interrupted")]
    Interrupted,
}

impl HarnessError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io {
            context: context.into(),
            source,
        }
    }
}
