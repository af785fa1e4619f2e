//! The base interpreter images are built from. A venv keeps pointing at it, so
//! it must be one that an unprivileged kernel user can execute: a system
//! Python, not a pyenv build under a 0700 `/root`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::PyenvError;

/// Preferred when present: world-executable, and Debian ships venv for it.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// Prints what identifies the interpreter; importing `ensurepip` fails on
/// Debian without python3-venv, where `-m venv` would fail later anyway.
const PROBE: &str = "import json, platform, sys, venv, ensurepip\n\
ensurepip.version()\n\
print(json.dumps({'version': platform.python_version(), \
'implementation': sys.implementation.name, \
'major': sys.version_info[0], 'minor': sys.version_info[1], \
'machine': platform.machine()}))";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interpreter {
    /// Absolute path as chosen (not symlink-resolved: `/usr/bin/python3`
    /// stays valid across Debian's 3.11.x updates).
    pub path: PathBuf,
    /// Full version, e.g. `3.11.2`.
    pub version: String,
    /// What a venv built from it is compatible with, e.g.
    /// `cpython-3.11-x86_64`.
    pub tag: String,
}

#[derive(Deserialize)]
struct ProbeOutput {
    version: String,
    implementation: String,
    major: u32,
    minor: u32,
    machine: String,
}

impl Interpreter {
    /// Debian 12's python3, for tests that need an interpreter to record
    /// but never run it.
    #[cfg(test)]
    pub(crate) fn example() -> Interpreter {
        Interpreter {
            path: "/usr/bin/python3".into(),
            version: "3.11.2".into(),
            tag: "cpython-3.11-x86_64".into(),
        }
    }

    /// `RETRACE_PYTHON` if set (no fallback: an explicit choice that does not
    /// work is an error), else `/usr/bin/python3`, else `python3` on `PATH`.
    pub fn discover() -> Result<Interpreter, PyenvError> {
        Self::find().map_err(PyenvError::from)
    }

    /// [`Self::discover`], with an error a cache can keep.
    pub(crate) fn find() -> Result<Interpreter, NoInterpreter> {
        if let Some(chosen) = std::env::var_os("RETRACE_PYTHON").filter(|v| !v.is_empty()) {
            let shown = Path::new(&chosen).display().to_string();
            let path = resolve(&chosen).ok_or_else(|| NoInterpreter {
                detail: format!("RETRACE_PYTHON={shown}: not found"),
            })?;
            return Self::probe(&path).map_err(|e| NoInterpreter {
                detail: format!("RETRACE_PYTHON={shown}: {e}"),
            });
        }
        let mut tried = Vec::new();
        if Path::new(SYSTEM_PYTHON).exists() {
            match Self::probe(Path::new(SYSTEM_PYTHON)) {
                Ok(found) => return Ok(found),
                Err(e) => tried.push(format!("{SYSTEM_PYTHON}: {e}")),
            }
        }
        match resolve(OsStr::new("python3")) {
            Some(path) if path != Path::new(SYSTEM_PYTHON) => match Self::probe(&path) {
                Ok(found) => return Ok(found),
                Err(e) => tried.push(format!("{}: {e}", path.display())),
            },
            Some(_) => {}
            None => tried.push("python3: not found on PATH".into()),
        }
        Err(NoInterpreter {
            detail: tried.join("; "),
        })
    }

    /// Runs the interpreter once to learn its version and check that it can
    /// make venvs. The error prints as a one-line reason.
    pub fn probe(path: &Path) -> Result<Interpreter, ProbeError> {
        let out = Command::new(path)
            .args(["-I", "-c", PROBE])
            .output()
            .map_err(ProbeError::CannotRun)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            return Err(ProbeError::Failed {
                last_line: last.map(|l| l.trim().to_string()),
                status: out.status,
            });
        }
        let probe: ProbeOutput = serde_json::from_slice(&out.stdout).map_err(ProbeError::Output)?;
        Ok(Interpreter {
            path: path.to_path_buf(),
            version: probe.version,
            tag: format!(
                "{}-{}.{}-{}",
                probe.implementation, probe.major, probe.minor, probe.machine
            ),
        })
    }
}

/// What every candidate interpreter failed with, joined (the detail of
/// [`PyenvError::NoInterpreter`]); `Clone`, so a store can cache it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoInterpreter {
    pub detail: String,
}

impl From<NoInterpreter> for PyenvError {
    fn from(e: NoInterpreter) -> Self {
        PyenvError::NoInterpreter { detail: e.detail }
    }
}

/// Why a program is not a usable base interpreter.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    // Causes are in the messages, not `source()`: this error is flattened
    // into `NoInterpreter`'s one-line detail.
    #[error("cannot run: {0}")]
    CannotRun(std::io::Error),
    /// It ran and failed: its last line of stderr says why (a missing
    /// `venv` or `ensurepip` module, usually).
    #[error("{}", match .last_line {
        Some(line) => format!("{line} ({status})"),
        None => status.to_string(),
    })]
    Failed {
        last_line: Option<String>,
        status: std::process::ExitStatus,
    },
    #[error("unexpected probe output: {0}")]
    Output(serde_json::Error),
}

/// A command name through `PATH`, or a path made absolute.
pub(crate) fn resolve(program: &OsStr) -> Option<PathBuf> {
    let as_path = Path::new(program);
    if as_path.components().count() > 1 || as_path.is_absolute() {
        return std::path::absolute(as_path).ok().filter(|p| p.is_file());
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_through_path_and_absolutizes() {
        let sh = resolve(OsStr::new("sh")).expect("sh on PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"));
        assert_eq!(resolve(OsStr::new("no-such-program-retrace")), None);
        assert_eq!(resolve(OsStr::new("/no/such/python3")), None);
    }

    #[test]
    fn probe_reports_a_non_python_clearly() {
        let err = Interpreter::probe(Path::new("/no/such/python3")).unwrap_err();
        assert!(err.to_string().starts_with("cannot run"), "{err}");
        let err = Interpreter::probe(Path::new("/bin/false")).unwrap_err();
        assert!(err.to_string().contains("exit status"), "{err}");
    }

    #[test]
    fn probes_the_system_interpreter_when_present() {
        let Ok(found) = Interpreter::probe(Path::new(SYSTEM_PYTHON)) else {
            return; // machine without a usable system python
        };
        assert!(found.tag.starts_with("cpython-3."), "{found:?}");
        assert!(found.version.starts_with('3'), "{found:?}");
    }
}
