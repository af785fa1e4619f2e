//! The local models' server environment and store, under
//! `$RETRACE_HOME/models/`:
//!
//! - `llama-cpp-server/`: a venv with the pinned llama.cpp server
//!   (`images/llm-server.lock`) and `complete.json`, shared by every model;
//! - `weights/<name>/`: one catalogued model's GGUF (see `weights`), each
//!   prepared on its own, so preparing one model never fetches another.
//!
//! Both are recipes of the builder the images use (`pyenv::recipe`):
//! everything happens in a private `.tmp-*` directory under a file lock, the
//! marker is written last and the directory is renamed into place, so a
//! half-prepared environment is never seen under the final name. The marker
//! records what went in; a marker that no longer matches (lock edited, other
//! base interpreter) makes the next prepare start over.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::progress::{Phase, Progress, Total};
use crate::pyenv::recipe::{self, count_collecting, Recipe, Site, Workspace};
use crate::pyenv::step::BuildLog;
use crate::pyenv::{marker, normalize, venv, ImageStore, Interpreter, Lock, LockEntry};

use super::catalog::{Catalog, CatalogModel, Choice};
use super::weights::{self, Weights};
use super::LocalError;

/// The server's lock file, compiled in so an installed `retrace` needs no
/// checkout.
pub const SERVER_LOCK: &str = include_str!("../../../images/llm-server.lock");
const SERVER_PACKAGE: &str = "llama-cpp-python";
/// The server environment's directory under `models/`, and its label.
const SERVER_DIR: &str = "llama-cpp-server";

/// Bumped when the layout of the environment or the way it is built
/// changes (3: llama.cpp compiled without AMX, see [`BUILD_FLAGS`]).
const FORMAT: u32 = 3;

/// How pip's build of llama-cpp-python compiles llama.cpp: for this CPU
/// (`-march=native`, llama.cpp's default) but without Intel AMX. On hosts
/// whose CPU reports AMX but whose kernel or hypervisor does not let
/// processes use it, the AMX matrix code faults (`ldtilecfg`: general
/// protection fault) on the first completion; the AVX-512 and AVX2 paths
/// serve these small models as well. GCC keeps explicit `-mno-` flags over
/// what `-march` implies, whatever their order; CMake starts its compiler
/// flags from `CFLAGS` and `CXXFLAGS`.
const BUILD_FLAGS: &str = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
/// `complete.json`: what makes the directory a prepared environment, and
/// what went into it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub format: u32,
    pub prepared_at: DateTime<Utc>,
    pub retrace_version: String,
    /// The base interpreter the venv points at.
    pub python: Interpreter,
    /// SHA-256 of `images/llm-server.lock` as compiled in.
    pub lock_sha256: String,
    pub packages: Vec<LockEntry>,
    /// `llama_cpp.__version__`, asked from the installed package.
    pub server_version: String,
}

impl Marker {
    /// The same `complete.json` as an image's, with other contents.
    fn read(dir: &Path) -> Option<Marker> {
        marker::read(dir)
    }

    /// Why this marker does not describe what this binary would prepare
    /// with `python`, if it does not.
    fn mismatch(&self, python: &Interpreter) -> Option<String> {
        if self.format != FORMAT {
            return Some(format!(
                "prepared by another retrace layout (format {})",
                self.format
            ));
        }
        if self.lock_sha256 != lock_sha256() {
            return Some("prepared from another version of images/llm-server.lock".into());
        }
        // The venv links to its base interpreter: another path or another
        // minor version breaks it (a patch update does not).
        if self.python.path != python.path || self.python.tag != python.tag {
            return Some(format!(
                "prepared with {} ({}), now {} ({})",
                self.python.path.display(),
                self.python.tag,
                python.path.display(),
                python.tag
            ));
        }
        None
    }
}

pub fn lock_sha256() -> String {
    hex::encode(Sha256::digest(SERVER_LOCK.as_bytes()))
}

/// The lock's pins. The file spells the server with its extra
/// (`llama-cpp-python[server]`) for readers; the extra changes nothing under
/// `--no-deps` (its dependencies are pinned below it), so it is dropped
/// before the exact-pin check that image locks get.
pub fn server_lock() -> Result<Lock, LocalError> {
    let text: String = SERVER_LOCK
        .lines()
        .map(|line| match (line.find('['), line.find(']')) {
            (Some(open), Some(close)) if open < close && !line.trim_start().starts_with('#') => {
                format!("{}{}\n", &line[..open], &line[close + 1..])
            }
            _ => format!("{line}\n"),
        })
        .collect();
    let lock = Lock::parse(&text).map_err(|e| LocalError::Lock(e.to_string()))?;
    if !lock.contains(SERVER_PACKAGE) {
        return Err(LocalError::Lock(format!("{SERVER_PACKAGE} is not pinned")));
    }
    Ok(lock)
}

/// The pinned server version (from the lock).
fn server_pin(lock: &Lock) -> &str {
    lock.get(SERVER_PACKAGE)
        .map(|e| e.version.as_str())
        .unwrap_or_default()
}

/// A prepared server environment, ready to serve from.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEnv {
    /// Absolute.
    pub dir: PathBuf,
    pub marker: Marker,
}

impl ModelEnv {
    pub fn venv(&self) -> PathBuf {
        self.dir.join("venv")
    }

    pub fn python(&self) -> PathBuf {
        self.venv().join("bin").join("python")
    }

    pub fn server_version(&self) -> &str {
        &self.marker.server_version
    }

    fn files_present(&self) -> Option<String> {
        (!self.python().exists()).then(|| format!("{} is missing", self.python().display()))
    }
}

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
    pub server_package: String,
    pub server_version: String,
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
    fn current_for(&self, python: &Interpreter) -> Result<ModelEnv, String> {
        env_at(self.dir(), python)
    }

    /// The prepared server environment, or `NotPrepared` with the reason.
    pub fn current(&self) -> Result<ModelEnv, LocalError> {
        let python = Interpreter::discover()?;
        self.current_for(&python)
            .map_err(|reason| LocalError::NotPrepared { reason })
    }

    /// The server environment and every catalogued model.
    pub fn status(&self) -> Status {
        let dir = self.dir();
        let (prepared, reason) = match Interpreter::discover() {
            Ok(python) => match self.current_for(&python) {
                Ok(_) => (true, None),
                Err(reason) => (false, Some(reason)),
            },
            Err(e) => (false, Some(e.to_string())),
        };
        let details = Marker::read(&dir).map(|m| StatusDetails {
            venv: dir.join("venv"),
            base_python: m.python.path.clone(),
            python_version: m.python.version.clone(),
            server_package: SERVER_PACKAGE.into(),
            server_version: m.server_version.clone(),
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
                    reason: current.as_ref().err().cloned(),
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
    pub fn prepare(&self, choice: &Choice, progress: bool) -> Result<Prepared, LocalError> {
        let env = self.prepare_server(progress)?;
        let model = match choice {
            Choice::Catalog(m) => {
                let w = self.prepare_weights(&env, m, progress)?;
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
                let size = fs::metadata(path)
                    .map_err(|e| LocalError::io_at("reading", path, e))?
                    .len();
                let p = Progress::new(&choice.spec(), progress);
                let phase = p.phase("sha256 of the model file", Total::Bytes(size));
                let (sha256, size_bytes) = weights::sha256_file(path, |n| phase.inc(n))
                    .map_err(|e| LocalError::io_at("reading", path, e))?;
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
        };
        Ok(Prepared { env, model })
    }

    /// One catalogued model's weights (the server environment provides the
    /// pip that downloads them).
    pub fn prepare_weights(
        &self,
        env: &ModelEnv,
        model: &CatalogModel,
        progress: bool,
    ) -> Result<Weights, LocalError> {
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
    pub fn prepare_server(&self, progress: bool) -> Result<ModelEnv, LocalError> {
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

/// The environment in `dir`, if it is current for `python`.
fn env_at(dir: PathBuf, python: &Interpreter) -> Result<ModelEnv, String> {
    let Some(marker) = Marker::read(&dir) else {
        return Err("not prepared".into());
    };
    if let Some(reason) = marker.mismatch(python) {
        return Err(reason);
    }
    let env = ModelEnv { dir, marker };
    match env.files_present() {
        Some(reason) => Err(reason),
        None => Ok(env),
    }
}

/// The server's venv as a recipe: `models/llama-cpp-server/`.
struct ServerRecipe {
    python: Interpreter,
    lock: Lock,
    site: Site,
}

impl Recipe for ServerRecipe {
    type Built = ModelEnv;
    type Marker = Marker;
    type Error = LocalError;

    fn site(&self) -> &Site {
        &self.site
    }

    fn current(&self, dir: &Path) -> Result<ModelEnv, String> {
        env_at(dir.to_path_buf(), &self.python)
    }

    fn steps(&self, work: &Workspace<'_, Self>) -> Result<Marker, LocalError> {
        // Kept in the environment: the record of what its venv was made from.
        let lock_file = work.write("llm-server.lock", SERVER_LOCK)?;
        let python = work.create_venv(&self.python)?;
        self.install(work, &python, &lock_file)?;
        let server_version = self.check(work, &python)?;
        let phase = work.progress.phase("finalize", Total::None);
        work.relocate_venv()?;
        phase.finish();
        Ok(Marker {
            format: FORMAT,
            prepared_at: Utc::now(),
            retrace_version: env!("CARGO_PKG_VERSION").into(),
            python: self.python.clone(),
            lock_sha256: lock_sha256(),
            packages: self.lock.entries.clone(),
            server_version,
        })
    }

    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> LocalError {
        LocalError::prepare_failed(log, step, detail)
    }
}

impl ServerRecipe {
    /// `pip install --no-deps -r llm-server.lock`: wheels only for the
    /// dependencies; llama-cpp-python exists only as an sdist, so pip
    /// compiles it, or takes the wheel it built last time from its cache.
    /// (`--only-binary :all: --no-binary llama-cpp-python` would say the
    /// same, but pip 23.0, which Debian's venv ships, then also bypasses its
    /// wheel cache for that package and recompiles llama.cpp every time.)
    fn install(
        &self,
        work: &Workspace<'_, Self>,
        python: &Path,
        lock_file: &Path,
    ) -> Result<(), LocalError> {
        let binary_only: Vec<&str> = self
            .lock
            .entries
            .iter()
            .filter(|e| normalize(&e.name) != SERVER_PACKAGE)
            .map(|e| e.name.as_str())
            .collect();
        let mut cmd = venv::pip(python, "install");
        // pip's wheel cache does not key on the build flags: a wheel built
        // with other flags (or by another retrace) must not be taken, so
        // the built wheel lives in a cache of this format's own.
        let cache = self.site.parent.join(format!(".pip-cache-format-{FORMAT}"));
        cmd.env("CFLAGS", BUILD_FLAGS)
            .env("CXXFLAGS", BUILD_FLAGS)
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--no-deps")
            .arg("--only-binary")
            .arg(binary_only.join(","))
            .arg("-r")
            .arg(lock_file);

        let total = self.lock.len() as u64;
        let mut phase: Option<Phase> = Some(
            work.progress
                .phase(&format!("fetch {total} packages"), Total::Items(total)),
        );
        let mut stage = Stage::Fetch;
        work.pip_install(
            "install the llama.cpp server (pip install)",
            &mut cmd,
            |line| {
                let next = if line.starts_with("Building wheel") {
                    Some(Stage::Compile)
                } else if line.starts_with("Installing collected packages") {
                    Some(Stage::Install)
                } else {
                    None
                };
                if let Some(next) = next.filter(|n| *n > stage) {
                    if let Some(done) = phase.take() {
                        done.finish();
                    }
                    stage = next;
                    let started = match next {
                        Stage::Compile => {
                            let p = work.progress.phase(
                                "compile llama.cpp (once per machine; 10-20 min on 2 cores)",
                                Total::None,
                            );
                            p.announce("pip is building llama-cpp-python from source");
                            p
                        }
                        _ => work.progress.phase("install packages", Total::None),
                    };
                    phase = Some(started);
                }
                if let Some(p) = &phase {
                    if stage == Stage::Fetch {
                        count_collecting(p, line);
                    } else if !line.is_empty() {
                        p.set_message(line.to_string());
                    }
                }
            },
        )?;
        if let Some(p) = phase {
            p.finish();
        }
        Ok(())
    }

    /// `pip check`, then import the server (which loads the compiled
    /// llama.cpp library); returns the version the package reports.
    fn check(&self, work: &Workspace<'_, Self>, python: &Path) -> Result<String, LocalError> {
        let phase = work.progress.phase("check", Total::None);
        phase.set_message("pip check");
        work.run(
            "check installed requirements (pip check)",
            &mut venv::pip_check(python),
        )?;
        phase.set_message("import llama_cpp.server");
        let step = "import the server (llama_cpp.server.app)";
        let mut cmd = Command::new(python);
        cmd.args([
            "-I",
            "-c",
            "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)",
        ]);
        let out = work
            .log
            .spawn_reading_stdout(&mut cmd)
            .map_err(|e| work.step_error(step, e))?
            .wait_with_output()
            .map_err(|e| work.failed(step, format!("waiting for python: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        work.log.line(stdout.trim_end());
        work.log
            .check_status(out.status)
            .map_err(|_| work.failed(step, format!("python exited with {}", out.status)))?;
        let version = stdout.trim().to_string();
        let pinned = server_pin(&self.lock);
        if version != pinned {
            return Err(work.failed(
                step,
                format!("llama_cpp reports version `{version}`, the lock pins {pinned}"),
            ));
        }
        phase.finish();
        Ok(version)
    }
}

/// Where pip is, for the bars. Ordered: stages only move forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Fetch,
    Compile,
    Install,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> Interpreter {
        Interpreter::example()
    }

    fn marker() -> Marker {
        Marker {
            format: FORMAT,
            prepared_at: Utc::now(),
            retrace_version: "0".into(),
            python: python(),
            lock_sha256: lock_sha256(),
            packages: server_lock().unwrap().entries,
            server_version: "0.3.36".into(),
        }
    }

    #[test]
    fn the_embedded_lock_pins_the_server_and_its_closure() {
        let lock = server_lock().unwrap();
        assert_eq!(server_pin(&lock), "0.3.36");
        for pkg in [
            "fastapi",
            "uvicorn",
            "pydantic-settings",
            "sse-starlette",
            "numpy",
        ] {
            assert!(lock.contains(pkg), "lock lacks {pkg}");
        }
        // The extra is spelled for readers, dropped for the install list.
        assert!(SERVER_LOCK.contains("llama-cpp-python[server]==0.3.36"));
        assert!(lock.entries.iter().all(|e| !e.name.contains('[')));
    }

    #[test]
    fn marker_round_trips_and_mismatches_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let m = marker();
        marker::write(dir.path(), &m).unwrap();
        assert_eq!(Marker::read(dir.path()), Some(m.clone()));
        assert_eq!(m.mismatch(&python()), None);
        // A patch update of the base interpreter keeps the venv valid.
        let patched = Interpreter {
            version: "3.11.9".into(),
            ..python()
        };
        assert_eq!(m.mismatch(&patched), None);
        let other = Interpreter {
            tag: "cpython-3.12-x86_64".into(),
            ..python()
        };
        assert!(m.mismatch(&other).unwrap().contains("3.12"));
        let old_lock = Marker {
            lock_sha256: "0".repeat(64),
            ..m.clone()
        };
        assert!(old_lock.mismatch(&python()).unwrap().contains("lock"));
        let old_layout = Marker {
            format: 1,
            ..m.clone()
        };
        assert!(old_layout.mismatch(&python()).unwrap().contains("layout"));
        fs::write(dir.path().join(marker::MARKER_FILE), b"{\"format\": 2").unwrap();
        assert_eq!(Marker::read(dir.path()), None);
    }

    #[test]
    fn store_reports_missing_and_incomplete_environments() {
        let home = tempfile::tempdir().unwrap();
        let store = ModelStore::new(home.path().to_path_buf());
        assert_eq!(
            store.current_for(&python()).unwrap_err(),
            "not prepared".to_string()
        );
        let dir = store.dir();
        fs::create_dir_all(&dir).unwrap();
        marker::write(&dir, &marker()).unwrap();
        let why = store.current_for(&python()).unwrap_err();
        assert!(why.contains("venv/bin/python is missing"), "{why}");
        fs::create_dir_all(dir.join("venv/bin")).unwrap();
        fs::write(dir.join("venv/bin/python"), "").unwrap();
        let env = store.current_for(&python()).unwrap();
        assert_eq!(env.python(), dir.join("venv/bin/python"));

        let status = store.status();
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["server"]["server_version"], "0.3.36", "{json}");
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
