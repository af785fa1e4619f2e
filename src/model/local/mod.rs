//! `local[:<name>|:<path.gguf>]`: models embedded in retrace. A GGUF served
//! by llama.cpp's `llama-server` on 127.0.0.1 and reached through the same async-openai client as any
//! remote model, so a local run exercises the real request path.
//!
//! - [`Catalog`] (`images/llm-models.toml`) lists the models retrace can
//!   fetch: Qwen2.5-Coder-1.5B-Instruct (the default), Qwen2.5-Coder-0.5B
//!   and SmolLM2-135M; [`ModelStore::prepare`] builds `$RETRACE_HOME/models/`
//!   once. Both are environments, and live with the others in
//!   [`crate::pyenv::llm`]; they are re-exported here;
//! - [`LocalServer`] runs one server (see `server`);
//! - [`LocalModel`] is the [`ModelClient`]: an [`OpenAiClient`] pointed at
//!   the server, owning it, so dropping the model stops the server. One
//!   per run, shared by all tasks in flight.

pub mod bench;
mod cpus;
mod server;

use crate::pyenv::LogTail;
use std::path::{Path, PathBuf};

pub use crate::pyenv::llm::{
    join_chunks, lock_sha256, looks_like_path, server_lock, Catalog, CatalogModel, Choice,
    GgufRecord, LlmError, Marker, ModelEnv, ModelFile, ModelStatus, ModelStore, Prepared,
    ServerStatus, Status, StatusDetails, Weights, WeightsMarker, Wheel, CATALOG_TOML, NO_DRAFT,
    SERVER_LOCK,
};
pub use cpus::DEFAULT_NICE;
pub use server::{LocalServer, ServerOptions, Serving, SERVED_MODEL};

use super::openai::{OpenAiClient, OpenAiSettings};
use super::{ChatRequest, Generation, ModelClient, ModelError, Reply};

/// Defaults for `retrace run` with the default local model
/// (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) on the math suite, chosen so that a
/// prepared run finishes in about 4 minutes on 2 cores with a repair round
/// on about half of its tasks: every `organic-error` math task (13, built
/// so that a competent first attempt raises) and 2 others, seeded. The
/// tag says what a task is, not how a model did on it. Measured on an idle
/// 2-core machine (llama-server, 4 slots, 2 threads): 12 tasks of which 6
/// tagged gave 4 a repair round, 16 of which 10 tagged gave 5; 15 of which
/// 13 tagged gave 7 in 3.8 minutes (benches/README.md).
pub const DEFAULT_SAMPLE: usize = 15;
pub const DEFAULT_SAMPLE_TAG: &str = "organic-error";
pub const DEFAULT_SAMPLE_TAGGED: usize = 13;
/// Completion budget per reply: a fenced code answer for a math task took
/// 11-216 tokens; the cap keeps a rare rambling reply to about a minute at
/// the loaded speed.
pub const DEFAULT_MAX_TOKENS: u32 = 512;
/// Repair-round temperature of the default local run: greedy, the 1.5B
/// model resent the failing code unchanged on 12 of 14 repair rounds of the
/// default sample and repaired nothing; at 0.7 it resent 6 of 11 and one
/// repair turned a wrong task right.
pub const DEFAULT_REPAIR_TEMPERATURE: f32 = 0.7;
/// Request timeout of local runs: a 512-token reply at the 2-3 tokens/s
/// measured on 2 busy cores takes up to about 4 minutes, and a retry after
/// a timeout only queues behind the abandoned request, which the server
/// finishes anyway.
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Tasks in flight for a local run at least, whatever its slots: a second
/// task in flight overlaps one task's kernel work with another's
/// generation. The default is the server's slot count.
pub const DEFAULT_CONCURRENCY: usize = 2;

/// What serves local models, as run.json names it.
pub const SERVER_NAME: &str = "llama-server";

/// Why the local model cannot answer: its environment could not be had,
/// or its server did not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Prepare(#[from] LlmError),
    #[error("the local model server failed to start: {detail}\n{log}")]
    ServerFailed { detail: String, log: LogTail },
    #[error("preparing the local model: the preparing thread failed")]
    Preparer(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

impl From<crate::pyenv::PyenvError> for LocalError {
    fn from(e: crate::pyenv::PyenvError) -> Self {
        LocalError::Prepare(e.into())
    }
}

impl From<LocalError> for ModelError {
    /// A wrong name or file is the user's; anything else is the harness
    /// failing to provide the model (infrastructure, not a usage error).
    fn from(e: LocalError) -> Self {
        match e {
            LocalError::Prepare(ref p) if p.is_usage() => ModelError::Config(e.to_string()),
            other => ModelError::Unavailable(other.to_string()),
        }
    }
}

/// What `local` followed by `arg` (the text after `local:`, if any) means,
/// checked against the built-in catalogue; a path is checked to be a GGUF.
pub fn resolve(arg: Option<&str>) -> Result<Choice, LocalError> {
    Ok(Catalog::builtin().resolve(arg)?)
}

/// How many times a local server that died is started again in one run;
/// past that every request fails as the model being unavailable.
pub const MAX_SERVER_RESTARTS: u32 = 3;

/// How long a failed request waits for the server's exit to be seen
/// before the failure is taken as the server's answer.
const SERVER_EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The local model: a running server and a client for it. A server that
/// dies mid-run is started again (at most [`MAX_SERVER_RESTARTS`] times)
/// and the request that found it dead is sent again.
pub struct LocalModel {
    live: std::sync::Mutex<std::sync::Arc<Live>>,
    /// Held while a dead server is replaced, so only one task does it.
    restarting: tokio::sync::Mutex<()>,
    restarts: std::sync::atomic::AtomicU32,
    generation: Generation,
    options: ServerOptions,
    logs: PathBuf,
    prepared: Prepared,
    /// The first server's speeds alone, measured at start: the run's model
    /// floor is its token counts at these speeds.
    idle: Option<bench::IdleSpeed>,
}

/// One server and the client pointed at it.
struct Live {
    // Declared before the server: the client goes first on drop.
    client: OpenAiClient,
    server: LocalServer,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("model", &self.prepared.model.spec)
            .field("server", &self.current().server)
            .field("restarts", &self.restarts())
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Prepares `choice` if needed (showing progress on stderr when
    /// `progress`), starts its server as `serving` asks and connects.
    pub async fn start(
        choice: Choice,
        generation: Generation,
        serving: &Serving,
        progress: bool,
    ) -> Result<LocalModel, LocalError> {
        let options = serving.options(choice.n_ctx());
        let draft = Catalog::builtin().draft_for(&choice, serving.draft.as_deref())?;
        Self::start_with(
            ModelStore::from_env(),
            choice,
            draft,
            generation,
            options,
            progress,
        )
        .await
    }

    /// Serves `choice`, with `draft` drafting its tokens when given.
    pub async fn start_with(
        store: ModelStore,
        choice: Choice,
        draft: Option<Choice>,
        generation: Generation,
        options: ServerOptions,
        progress: bool,
    ) -> Result<LocalModel, LocalError> {
        let prep = store.clone();
        // Minutes of pip and a compiler on the first run: off the runtime.
        let prepared = tokio::task::spawn_blocking(move || {
            prep.prepare_with_draft(&choice, draft.as_ref(), progress)
        })
        .await
        .map_err(LocalError::Preparer)??;
        let logs = store.logs_dir();
        let live = Live::start(&prepared, &logs, &options, &generation).await?;
        let idle = match bench::Bench::new(&live.server).idle_speed(0).await {
            Ok(speed) => Some(speed),
            Err(e) => {
                let error = crate::util::disk::chain_text(&e);
                tracing::warn!(%error, "the model server's idle speed was not measured");
                None
            }
        };
        Ok(LocalModel {
            idle,
            live: std::sync::Mutex::new(std::sync::Arc::new(live)),
            restarting: tokio::sync::Mutex::new(()),
            restarts: std::sync::atomic::AtomicU32::new(0),
            generation,
            options,
            logs,
            prepared,
        })
    }

    fn current(&self) -> std::sync::Arc<Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The pid of the server answering now.
    pub fn server_pid(&self) -> u32 {
        self.current().server.pid()
    }

    /// The base URL of the server answering now.
    pub fn base_url(&self) -> String {
        self.current().server.base_url().to_string()
    }

    /// How many times a dead server was started again.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn env(&self) -> &ModelEnv {
        &self.prepared.env
    }

    pub fn model_file(&self) -> &ModelFile {
        &self.prepared.model
    }

    /// Replaces `dead` (the server a request found dead) by a fresh one,
    /// unless another task already did; `Err` once the restarts are spent
    /// or the new server does not start.
    async fn replace(&self, dead: &std::sync::Arc<Live>) -> Result<(), ModelError> {
        let _one = self.restarting.lock().await;
        if !std::sync::Arc::ptr_eq(&self.current(), dead) {
            return Ok(());
        }
        let done = self.restarts();
        if done >= MAX_SERVER_RESTARTS {
            return Err(ModelError::Unavailable(format!(
                "the local model server died ({}) and was already restarted {done} times; \
                 its log: {}",
                describe_exit(&dead.server),
                dead.server.log_path().display()
            )));
        }
        tracing::warn!(
            pid = dead.server.pid(),
            exit = %describe_exit(&dead.server),
            restarts = done + 1,
            log = %dead.server.log_path().display(),
            "the local model server died; starting it again"
        );
        let live = Live::start(&self.prepared, &self.logs, &self.options, &self.generation)
            .await
            .map_err(ModelError::from)?;
        self.restarts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(live);
        Ok(())
    }
}

fn describe_exit(server: &LocalServer) -> String {
    match server.exit_status() {
        Some(status) => status.to_string(),
        None => "still running".into(),
    }
}

impl Live {
    async fn start(
        prepared: &Prepared,
        logs: &Path,
        options: &ServerOptions,
        generation: &Generation,
    ) -> Result<Live, LocalError> {
        let server = LocalServer::start(prepared, logs, options.clone()).await?;
        let client = OpenAiClient::new(
            OpenAiSettings {
                model: SERVED_MODEL.into(),
                base_url: Some(server.base_url().into()),
                // Always explicit: an empty key would make the client fall
                // back to OPENAI_API_KEY and hand a real key to the server.
                api_key: Some(server.api_key().unwrap_or("none").into()),
                vision: false,
            },
            generation.clone(),
        )
        .map_err(|e| LocalError::ServerFailed {
            detail: format!("cannot make a client for it: {e}"),
            log: LogTail {
                log: server.log_path().to_path_buf(),
                tail: String::new(),
            },
        })?;
        Ok(Live { client, server })
    }
}

#[async_trait::async_trait]
impl ModelClient for LocalModel {
    /// `local:<name>`, or `local:<absolute path>` for a user's file: a
    /// spec that resolves to the same model again (resume).
    fn name(&self) -> String {
        self.prepared.model.spec.clone()
    }

    fn is_synthetic(&self) -> bool {
        false
    }

    fn vision(&self) -> bool {
        false
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        loop {
            let live = self.current();
            let result = live.client.chat(request).await;
            if result.is_ok() || !live.server.died_within(SERVER_EXIT_WAIT).await {
                return result;
            }
            // The server died under this request: a fresh one gets it again.
            self.replace(&live).await?;
        }
    }

    /// Flat, for run.json: what was served (the file's sha256 always, its
    /// pins when catalogued), by what, and how.
    fn info(&self) -> serde_json::Value {
        let m = &self.prepared.model;
        let o = &self.options;
        let catalog = m.catalog.as_ref();
        serde_json::json!({
            "model": m.spec,
            "title": catalog.map(|c| c.title.clone()),
            "license": catalog.map(|c| c.license.clone()),
            "gguf_file": m.path.file_name().map(|f| f.to_string_lossy()),
            "gguf_sha256": m.sha256,
            "gguf_size_bytes": m.size_bytes,
            // A user's own file is recorded, not checked against a pin.
            "gguf_pinned": catalog.is_some(),
            "weights": catalog.map(|c| c
                .wheels
                .iter()
                .map(|w| format!("{}=={}", w.package, w.version))
                .collect::<Vec<_>>()),
            "server": SERVER_NAME,
            "server_version": self.prepared.env.marker.llama_server_version,
            "llama_cpp_sources": self.prepared.env.marker.sources(),
            "slots": o.slots,
            "build_flags": crate::pyenv::llm::BUILD_FLAGS,
            "base_url": self.base_url(),
            "model_restarts": self.restarts(),
            "n_ctx": o.n_ctx,
            "threads": o.threads,
            // What the server got (without root it keeps retrace's own).
            "nice": self.current().server.nice(),
            "batch_threads": o.batch_threads,
            "prompt_cache_bytes": o.prompt_cache_bytes,
            "idle_prompt_tps": self.idle.map(|s| s.prompt_tps),
            "idle_generation_tps": self.idle.map(|s| s.generation_tps),
            // Speculative decoding (each reply's record holds its drafted
            // and accepted tokens).
            "draft": self.prepared.draft.as_ref().map(|d| serde_json::json!({
                "model": d.spec,
                "gguf_file": d.path.file_name().map(|f| f.to_string_lossy()),
                "gguf_sha256": d.sha256,
                "gguf_size_bytes": d.size_bytes,
                "gguf_pinned": d.catalog.is_some(),
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_errors() {
        assert_eq!(
            resolve(None).unwrap().spec(),
            "local:qwen2.5-coder-1.5b-instruct"
        );
        assert_eq!(
            resolve(Some("smollm2-135m-instruct")).unwrap().spec(),
            "local:smollm2-135m-instruct"
        );
        let e = resolve(Some("llama-70b")).unwrap_err();
        assert!(matches!(e, LocalError::Prepare(LlmError::Unknown { .. })));
        let m = match ModelError::from(e) {
            ModelError::Config(m) => m,
            other => panic!("{other:?}"),
        };
        for name in Catalog::builtin().names() {
            assert!(m.contains(name), "{m}");
        }
        assert!(m.contains("local:/path/to/file.gguf"), "{m}");
        let e = resolve(Some("/nonexistent/mine.gguf")).unwrap_err();
        assert!(
            matches!(ModelError::from(e), ModelError::Config(m) if m.contains("/nonexistent/mine.gguf"))
        );
        let e = ModelError::from(LocalError::Prepare(LlmError::NotPrepared {
            reason: crate::pyenv::recipe::NotCurrent::Absent { done: "prepared" },
        }));
        assert!(matches!(e, ModelError::Unavailable(ref m) if m.contains("retrace model prepare")));
    }
}
