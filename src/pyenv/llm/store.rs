use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::pyenv::progress::{Progress, Total};
use crate::pyenv::recipe::{self, NotCurrent, Site};
use crate::pyenv::{ImageStore, Interpreter};
use crate::util::IoContext;

use super::catalog::{Catalog, CatalogModel, Choice};
use super::llama_build;
use super::server_env::{
    env_at, server_lock, sources_pin, Marker, ModelEnv, ServerRecipe, SERVER_DIR,
};
use super::weights::{self, Weights};
use super::LlmError;

/// What a server loads: a GGUF file and what is known about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    /// `local:<name>` or `local:<absolute path>`.
    pub spec: String,
    /// The catalogue entry, `None` for a user's own file.
    pub catalog: Option<CatalogModel>,
    /// Absolute.
    pub path: PathBuf,
    pub sha256: String,
    pub size_bytes: u64,
    pub n_ctx: u32,
}

/// Server environment and model file: all a server needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub env: ModelEnv,
    pub model: ModelFile,
    /// The model that drafts tokens for `model` (speculative decoding).
    pub draft: Option<ModelFile>,
}

/// What `retrace model status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub server: ServerStatus,
    pub models: Vec<ModelStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    pub prepared: bool,
    pub dir: PathBuf,
    /// Why it is not usable, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What is on disk, when a marker was found (also when stale);
    /// flattened into the JSON object.
    #[serde(flatten)]
    pub details: Option<StatusDetails>,
    pub prepare_log: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusDetails {
    pub venv: PathBuf,
    pub base_python: PathBuf,
    pub python_version: String,
    /// The source release whose llama.cpp was compiled.
    pub llama_cpp_sources: String,
    /// `bin/llama-server`, the server, and its build.
    pub llama_server: PathBuf,
    pub llama_server_version: String,
    pub prepared_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelStatus {
    /// `local:<name>`.
    pub model: String,
    pub default: bool,
    pub title: String,
    pub license: String,
    pub prepared: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub dir: PathBuf,
    /// `package==version` of each wheel, in join order.
    pub wheels: Vec<String>,
    pub gguf_size_bytes: u64,
    pub gguf_sha256: String,
    /// Where the file is, when prepared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gguf_path: Option<PathBuf>,
    pub prepare_log: PathBuf,
}

/// Where the local models live: `$RETRACE_HOME/models/`, next to the images.
#[derive(Debug, Clone)]
pub struct ModelStore {
    home: PathBuf,
}

impl ModelStore {
    pub fn new(home: PathBuf) -> Self {
        let home = std::path::absolute(&home).unwrap_or(home);
        ModelStore { home }
    }

    /// The same `$RETRACE_HOME` the images use.
    pub fn from_env() -> Self {
        Self::new(ImageStore::from_env().home().to_path_buf())
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    fn models_dir(&self) -> PathBuf {
        self.home.join("models")
    }

    /// The server environment's final directory.
    pub fn dir(&self) -> PathBuf {
        self.models_dir().join(SERVER_DIR)
    }

    fn weights_dir(&self) -> PathBuf {
        self.models_dir().join("weights")
    }

    /// Where a catalogued model's weights go.
    pub fn weights_dir_of(&self, name: &str) -> PathBuf {
        self.weights_dir().join(name)
    }

    /// Where the `llama-server` compiled from the pinned sources is kept:
    /// a binary there is used instead of compiling llama.cpp again.
    pub fn cached_llama_server(&self) -> Result<PathBuf, LlmError> {
        let lock = server_lock()?;
        Ok(llama_build::cached_binary(
            &self.models_dir(),
            sources_pin(&lock),
        ))
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.home.join("logs")
    }

    pub fn prepare_log(&self) -> PathBuf {
        self.logs_dir()
            .join(format!("model-{SERVER_DIR}-prepare.log"))
    }

    pub fn weights_log(&self, name: &str) -> PathBuf {
        self.logs_dir().join(format!("model-{name}-prepare.log"))
    }

    /// The prepared environment, if it is current for `python`.
    fn current_for(&self, python: &Interpreter) -> Result<ModelEnv, NotCurrent> {
        env_at(self.dir(), python)
    }

    /// The prepared server environment, or `NotPrepared` with the reason.
    pub fn current(&self) -> Result<ModelEnv, LlmError> {
        let python = Interpreter::discover()?;
        self.current_for(&python)
            .map_err(|reason| LlmError::NotPrepared { reason })
    }

    /// The server environment and every catalogued model.
    pub fn status(&self) -> Status {
        let dir = self.dir();
        let (prepared, reason) = match Interpreter::discover() {
            Ok(python) => match self.current_for(&python) {
                Ok(_) => (true, None),
                Err(reason) => (false, Some(reason.to_string())),
            },
            Err(e) => (false, Some(e.to_string())),
        };
        let details = Marker::read(&dir).map(|m| StatusDetails {
            venv: dir.join("venv"),
            base_python: m.python.path.clone(),
            python_version: m.python.version.clone(),
            llama_cpp_sources: m.sources(),
            llama_server: dir.join("bin").join("llama-server"),
            llama_server_version: m.llama_server_version.clone(),
            prepared_at: m.prepared_at,
        });
        let server = ServerStatus {
            prepared,
            dir,
            reason,
            details,
            prepare_log: self.prepare_log(),
        };
        let catalog = Catalog::builtin();
        let models = catalog
            .models
            .iter()
            .map(|m| {
                let dir = self.weights_dir_of(&m.name);
                let current = Weights::current(dir.clone(), m);
                ModelStatus {
                    model: m.spec(),
                    default: m.name == catalog.default,
                    title: m.title.clone(),
                    license: m.license.clone(),
                    prepared: current.is_ok(),
                    reason: current.as_ref().err().map(ToString::to_string),
                    dir,
                    wheels: m
                        .wheels
                        .iter()
                        .map(|w| format!("{}=={}", w.package, w.version))
                        .collect(),
                    gguf_size_bytes: m.size_bytes,
                    gguf_sha256: m.sha256.clone(),
                    gguf_path: current.ok().map(|w| w.gguf()),
                    prepare_log: self.weights_log(&m.name),
                }
            })
            .collect();
        Status { server, models }
    }

    /// Everything `choice` needs: the server environment, then the model's
    /// weights (catalogued) or the hash of the user's file. Idempotent.
    pub fn prepare(&self, choice: &Choice, progress: bool) -> Result<Prepared, LlmError> {
        self.prepare_with_draft(choice, None, progress)
    }

    /// [`ModelStore::prepare`], and the draft model served beside it
    /// (fetched, joined and checked as the main one is).
    pub fn prepare_with_draft(
        &self,
        choice: &Choice,
        draft: Option<&Choice>,
        progress: bool,
    ) -> Result<Prepared, LlmError> {
        let env = self.prepare_server(progress)?;
        let model = self.model_file(&env, choice, progress)?;
        let draft = match draft {
            Some(d) => Some(self.model_file(&env, d, progress)?),
            None => None,
        };
        Ok(Prepared { env, model, draft })
    }

    /// The GGUF `choice` names: a catalogued model's weights, fetched and
    /// checked, or the hash of the user's file.
    fn model_file(
        &self,
        env: &ModelEnv,
        choice: &Choice,
        progress: bool,
    ) -> Result<ModelFile, LlmError> {
        Ok(match choice {
            Choice::Catalog(m) => {
                let w = self.prepare_weights(env, m, progress)?;
                ModelFile {
                    spec: m.spec(),
                    catalog: Some(m.clone()),
                    path: w.gguf(),
                    sha256: w.marker.gguf.sha256.clone(),
                    size_bytes: w.marker.gguf.size_bytes,
                    n_ctx: m.n_ctx,
                }
            }
            Choice::File(path) => {
                // Not pinned, but recorded: a run says which bytes it used.
                let size = fs::metadata(path).at("reading", path)?.len();
                let p = Progress::new(&choice.spec(), progress);
                let phase = p.phase("sha256 of the model file", Total::Bytes(size));
                let (sha256, size_bytes) =
                    weights::sha256_file(path, |n| phase.inc(n)).at("reading", path)?;
                phase.finish();
                ModelFile {
                    spec: choice.spec(),
                    catalog: None,
                    path: path.clone(),
                    sha256,
                    size_bytes,
                    n_ctx: choice.n_ctx(),
                }
            }
        })
    }

    /// One catalogued model's weights (the server environment provides the
    /// pip that downloads them).
    pub fn prepare_weights(
        &self,
        env: &ModelEnv,
        model: &CatalogModel,
        progress: bool,
    ) -> Result<Weights, LlmError> {
        weights::prepare(
            &self.weights_dir(),
            model,
            &env.python(),
            &self.weights_log(&model.name),
            progress,
        )
    }

    /// The llama.cpp server's venv. Idempotent (returns at once when
    /// prepared) and safe to run concurrently, in threads or processes: one
    /// preparer at a time, the others wait for its lock and then find the
    /// environment complete.
    pub fn prepare_server(&self, progress: bool) -> Result<ModelEnv, LlmError> {
        let python = Interpreter::discover()?;
        if let Ok(env) = self.current_for(&python) {
            return Ok(env);
        }
        let site = Site {
            parent: self.models_dir(),
            key: SERVER_DIR.into(),
            label: SERVER_DIR.into(),
            what: "the server".into(),
            log: self.prepare_log(),
            header: format!(
                "retrace model prepare: {SERVER_DIR} with {} ({}, {})",
                python.path.display(),
                python.version,
                python.tag
            ),
        };
        let recipe = ServerRecipe {
            python,
            lock: server_lock()?,
            site,
        };
        recipe::prepare(&recipe, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyenv::marker;

    fn python() -> Interpreter {
        Interpreter::example()
    }

    #[test]
    fn store_reports_missing_and_incomplete_environments() {
        let home = tempfile::tempdir().unwrap();
        let store = ModelStore::new(home.path().to_path_buf());
        assert_eq!(
            store.current_for(&python()).unwrap_err().to_string(),
            "not prepared"
        );
        let dir = store.dir();
        fs::create_dir_all(&dir).unwrap();
        marker::write(&dir, &Marker::example()).unwrap();
        let why = store.current_for(&python()).unwrap_err().to_string();
        assert!(why.contains("venv/bin/python is missing"), "{why}");
        fs::create_dir_all(dir.join("venv/bin")).unwrap();
        fs::write(dir.join("venv/bin/python"), "").unwrap();
        let why = store.current_for(&python()).unwrap_err().to_string();
        assert!(why.contains("bin/llama-server is missing"), "{why}");
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::write(dir.join("bin/llama-server"), "").unwrap();
        let env = store.current_for(&python()).unwrap();
        assert_eq!(env.python(), dir.join("venv/bin/python"));
        assert_eq!(env.llama_server(), dir.join("bin/llama-server"));

        let status = store.status();
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json["server"]["llama_cpp_sources"], "llama-cpp-python 0.3.36 sdist",
            "{json}"
        );
        assert_eq!(
            json["server"]["llama_server_version"], "7310 (abc1234)",
            "{json}"
        );
        // Every catalogued model is listed, none prepared, the default marked.
        let models = json["models"].as_array().unwrap();
        assert_eq!(models.len(), Catalog::builtin().models.len());
        assert!(models.iter().all(|m| m["prepared"] == false));
        let defaults: Vec<_> = models.iter().filter(|m| m["default"] == true).collect();
        assert_eq!(defaults.len(), 1);
        assert_eq!(defaults[0]["model"], "local:qwen2.5-coder-1.5b-instruct");
        assert_eq!(defaults[0]["wheels"].as_array().unwrap().len(), 22);
    }
}
