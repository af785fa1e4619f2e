//! The local models' server environment and store, under
//! `$RETRACE_HOME/models/`:
//!
//! - `llama-cpp-server/`: a venv with the pinned llama.cpp server
//!   (`images/llm-server.lock`), `bin/llama-server` compiled from the same
//!   llama.cpp (see `llama_build`) and `complete.json`, shared by every
//!   model;
//! - `weights/<name>/`: one catalogued model's GGUF (see `weights`), each
//!   prepared on its own, so preparing one model never fetches another.
//!
//! Both are recipes of the builder the images use (`pyenv::recipe`):
//! everything happens in a private `.tmp-*` directory under a file lock, the
//! marker is written last and the directory is renamed into place, so a
//! half-prepared environment is never seen under the final name. The marker
//! records what went in; a marker that no longer matches (lock edited, other
//! base interpreter) makes the next prepare start over.

use std::path::{Path, PathBuf};
use std::process::Command;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::progress::{Phase, Total};
use crate::pyenv::recipe::{count_collecting, NotCurrent, Recipe, Site, Workspace};
use crate::pyenv::step::BuildLog;
use crate::pyenv::{marker, normalize, venv, Interpreter, Lock, LockEntry};

use super::{llama_build, LlmError};

/// The server's lock file, compiled in so an installed `retrace` needs no
/// checkout.
pub const SERVER_LOCK: &str = include_str!("../../../images/llm-server.lock");
pub(super) const SERVER_PACKAGE: &str = "llama-cpp-python";
/// The server environment's directory under `models/`, and its label.
pub(super) const SERVER_DIR: &str = "llama-cpp-server";

/// Bumped when the layout of the environment or the way it is built
/// changes (3: llama.cpp compiled without AMX, see [`BUILD_FLAGS`]; 4:
/// `bin/llama-server`).
const FORMAT: u32 = 4;
/// The pip cache of the built llama-cpp-python wheel: its own number, so
/// that a new environment layout does not compile the wheel again.
const WHEEL_CACHE_FORMAT: u32 = 3;

/// How pip's build of llama-cpp-python compiles llama.cpp: for this CPU
/// (`-march=native`, llama.cpp's default) but without Intel AMX. On hosts
/// whose CPU reports AMX but whose kernel or hypervisor does not let
/// processes use it, the AMX matrix code faults (`ldtilecfg`: general
/// protection fault) on the first completion; the AVX-512 and AVX2 paths
/// serve these small models as well. GCC keeps explicit `-mno-` flags over
/// what `-march` implies, whatever their order; CMake starts its compiler
/// flags from `CFLAGS` and `CXXFLAGS`.
pub const BUILD_FLAGS: &str = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
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
    /// What `bin/llama-server --version` says (build number and commit).
    #[serde(default)]
    pub llama_server_version: String,
}

impl Marker {
    /// The same `complete.json` as an image's, with other contents.
    pub(super) fn read(dir: &Path) -> Option<Marker> {
        marker::read(dir)
    }

    /// Why this marker does not describe what this binary would prepare
    /// with `python`, if it does not.
    fn mismatch(&self, python: &Interpreter) -> Option<NotCurrent> {
        if self.format != FORMAT {
            return Some(NotCurrent::Layout {
                name: None,
                format: self.format,
            });
        }
        if self.lock_sha256 != lock_sha256() {
            return Some(NotCurrent::Pins {
                what: "another version of images/llm-server.lock",
            });
        }
        // The venv links to its base interpreter: another path or another
        // minor version breaks it (a patch update does not).
        if self.python.path != python.path || self.python.tag != python.tag {
            return Some(NotCurrent::Python {
                was: self.python.path.clone(),
                was_tag: self.python.tag.clone(),
                now: python.path.clone(),
                now_tag: python.tag.clone(),
            });
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
pub fn server_lock() -> Result<Lock, LlmError> {
    let text: String = SERVER_LOCK
        .lines()
        .map(|line| match (line.find('['), line.find(']')) {
            (Some(open), Some(close)) if open < close && !line.trim_start().starts_with('#') => {
                format!("{}{}\n", &line[..open], &line[close + 1..])
            }
            _ => format!("{line}\n"),
        })
        .collect();
    let lock = Lock::parse(&text).map_err(LlmError::Lock)?;
    if !lock.contains(SERVER_PACKAGE) {
        return Err(LlmError::ServerUnpinned {
            package: SERVER_PACKAGE,
        });
    }
    Ok(lock)
}

/// The pinned server version (from the lock).
fn server_pin(lock: &Lock) -> &str {
    lock.get(SERVER_PACKAGE)
        .map(|e| e.version.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
impl Marker {
    /// A current marker for [`Interpreter::example`].
    pub(super) fn example() -> Marker {
        Marker {
            format: FORMAT,
            prepared_at: Utc::now(),
            retrace_version: "0".into(),
            python: Interpreter::example(),
            lock_sha256: lock_sha256(),
            packages: server_lock().unwrap().entries,
            server_version: "0.3.36".into(),
            llama_server_version: "7310 (abc1234)".into(),
        }
    }
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

    /// llama.cpp's own server binary.
    pub fn llama_server(&self) -> PathBuf {
        llama_build::binary_in(&self.dir)
    }

    fn files_present(&self) -> Option<NotCurrent> {
        [self.python(), self.llama_server()]
            .into_iter()
            .find(|p| !p.exists())
            .map(NotCurrent::Missing)
    }
}

/// The environment in `dir`, if it is current for `python`.
pub(super) fn env_at(dir: PathBuf, python: &Interpreter) -> Result<ModelEnv, NotCurrent> {
    let Some(marker) = Marker::read(&dir) else {
        return Err(NotCurrent::Absent { done: "prepared" });
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
pub(super) struct ServerRecipe {
    pub python: Interpreter,
    pub lock: Lock,
    pub site: Site,
}

impl Recipe for ServerRecipe {
    type Built = ModelEnv;
    type Marker = Marker;
    type Error = LlmError;

    fn site(&self) -> &Site {
        &self.site
    }

    fn current(&self, dir: &Path) -> Result<ModelEnv, NotCurrent> {
        env_at(dir.to_path_buf(), &self.python)
    }

    fn steps(&self, work: &Workspace<'_, Self>) -> Result<Marker, LlmError> {
        // Kept in the environment: the record of what its venv was made from.
        let lock_file = work.write("llm-server.lock", SERVER_LOCK)?;
        let python = work.create_venv(&self.python)?;
        self.install(work, &python, &lock_file)?;
        let server_version = self.check(work, &python)?;
        let llama_server_version =
            llama_build::install(work, &python, &server_version, &self.site.parent)?;
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
            llama_server_version,
        })
    }

    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> LlmError {
        LlmError::prepare_failed(log, step, detail)
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
    ) -> Result<(), LlmError> {
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
        let cache = self
            .site
            .parent
            .join(format!(".pip-cache-format-{WHEEL_CACHE_FORMAT}"));
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
    fn check(&self, work: &Workspace<'_, Self>, python: &Path) -> Result<String, LlmError> {
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
    use std::fs;

    fn python() -> Interpreter {
        Interpreter::example()
    }

    fn marker() -> Marker {
        Marker::example()
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
        assert!(m.mismatch(&python()).is_none());
        // A patch update of the base interpreter keeps the venv valid.
        let patched = Interpreter {
            version: "3.11.9".into(),
            ..python()
        };
        assert!(m.mismatch(&patched).is_none());
        let other = Interpreter {
            tag: "cpython-3.12-x86_64".into(),
            ..python()
        };
        let why = |m: &Marker, p: &Interpreter| m.mismatch(p).unwrap().to_string();
        assert!(why(&m, &other).contains("3.12"));
        let old_lock = Marker {
            lock_sha256: "0".repeat(64),
            ..m.clone()
        };
        assert!(why(&old_lock, &python()).contains("lock"));
        let old_layout = Marker {
            format: 1,
            ..m.clone()
        };
        assert!(why(&old_layout, &python()).contains("layout"));
        fs::write(dir.path().join(marker::MARKER_FILE), b"{\"format\": 2").unwrap();
        assert_eq!(Marker::read(dir.path()), None);
    }
}
