//! Python and the build tools: the interpreter images are built from, a
//! real venv made from it, the C/C++ compilers the local model's first
//! build needs, and the package index as pip's own configuration reaches it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check::Check;
use crate::pyenv::{find_program, venv, ImageName, Interpreter, Lock, PyenvError};
use crate::util::bounded;

/// The locks pin ipython 9, numpy 2.4 and pandas 3.
const MIN_PYTHON: (u32, u32) = (3, 11);
const FIX_PYTHON: &str = "install Python 3.11 or newer with venv (Debian/Ubuntu: \
     `apt-get install python3 python3-venv`), or point RETRACE_PYTHON at one";
const FIX_VENV: &str = "install Debian's python3-venv (`apt-get install python3-venv`), or point \
     RETRACE_PYTHON at a Python 3.11+ that has the venv and ensurepip modules";
/// The smallest pin of the fat image's lock: downloading it proves the
/// index answers without fetching much.
const INDEX_PROBE_PACKAGE: &str = "cycler";
const VENV_LIMIT: Duration = Duration::from_secs(120);
const INDEX_LIMIT: Duration = Duration::from_secs(45);

/// What the Python checks found, for the checks that need an interpreter.
pub struct Found {
    pub python: Option<Interpreter>,
    /// A throwaway venv's python (the pip that image builds use).
    pub venv_python: Option<PathBuf>,
}

pub fn interpreter_check() -> (Check, Option<Interpreter>) {
    match Interpreter::discover() {
        Ok(python) => {
            let shown = format!(
                "{} {} ({})",
                python.path.display(),
                python.version,
                python.tag
            );
            match new_enough(&python.version) {
                Some(true) => (Check::ok("python", shown), Some(python)),
                _ => (
                    Check::error(
                        "python",
                        format!("{shown} is older than 3.11 (the image locks need 3.11+)"),
                        FIX_PYTHON,
                    ),
                    None,
                ),
            }
        }
        Err(PyenvError::NoInterpreter { detail }) => {
            let fix = if lacks_venv(&detail) {
                FIX_VENV
            } else {
                FIX_PYTHON
            };
            (
                Check::error("python", format!("no usable interpreter: {detail}"), fix),
                None,
            )
        }
        Err(e) => (Check::error("python", e.to_string(), FIX_PYTHON), None),
    }
}

/// `3.11.2` → at least [`MIN_PYTHON`]; `None` when not a version.
fn new_enough(version: &str) -> Option<bool> {
    let mut parts = version.trim().split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor) >= MIN_PYTHON)
}

/// The discovery's probe imports venv and ensurepip: Debian's python3
/// without python3-venv fails there.
fn lacks_venv(detail: &str) -> bool {
    detail.contains("ensurepip") || detail.contains("No module named 'venv'")
}

/// Makes a real venv (with pip, as image builds do) in `scratch`.
pub fn venv_check(python: Option<&Interpreter>, scratch: &Path) -> (Check, Option<PathBuf>) {
    let Some(python) = python else {
        return (
            Check::info("venv", "not checked: no usable interpreter (see `python`)"),
            None,
        );
    };
    let dir = scratch.join("venv");
    let made = bounded::run(venv::create(python, &dir), VENV_LIMIT);
    let venv_python = dir.join("bin").join("python");
    match made {
        Ok(done) if done.status.success() && venv_python.exists() => (
            Check::ok(
                "venv",
                format!(
                    "`{} -m venv` makes a venv with pip (ensurepip works)",
                    python.path.display()
                ),
            ),
            Some(venv_python),
        ),
        Ok(done) => {
            let line = done.last_line();
            let fix = if line.contains("ensurepip") {
                FIX_VENV
            } else {
                FIX_PYTHON
            };
            (
                Check::error("venv", format!("`python3 -m venv` fails: {line}"), fix),
                None,
            )
        }
        Err(e) => (
            Check::error("venv", format!("`python3 -m venv`: {e}"), FIX_VENV),
            None,
        ),
    }
}

/// llama.cpp is compiled from source the first time `--model local`
/// prepares its server (pip fetches cmake and ninja itself; the compilers
/// must be on the host).
pub fn compiler_check(server_prepared: bool) -> Check {
    let cxx = compiler("CXX", &["c++", "g++", "clang++"]);
    let cc = compiler("CC", &["cc", "gcc", "clang"]);
    let cmake = match find_program(OsStr::new("cmake")) {
        Some(path) => format!("cmake at {}", path.display()),
        None => "no cmake (not needed: pip fetches it for the build)".into(),
    };
    match (cxx, cc) {
        (Some(cxx), Some(cc)) => Check::ok(
            "compiler",
            format!("C++ {}, C {}; {cmake}", cxx.display(), cc.display()),
        ),
        (cxx, cc) => {
            let missing: Vec<&str> = [
                (cxx.is_none(), "C++ (c++, g++, clang++)"),
                (cc.is_none(), "C (cc, gcc, clang)"),
            ]
            .into_iter()
            .filter(|(gone, _)| *gone)
            .map(|(_, name)| name)
            .collect();
            let detail = format!("no {} compiler on PATH", missing.join(" or "));
            if server_prepared {
                Check::info(
                    "compiler",
                    format!("{detail}; not needed now: the local model's server is prepared"),
                )
            } else {
                Check::warn(
                    "compiler",
                    format!(
                        "{detail}: needed for `--model local` (the default), whose first use \
                         compiles llama.cpp; a remote `--model` does not need it"
                    ),
                    "install Debian's build-essential (`apt-get install build-essential`)",
                )
            }
        }
    }
}

/// `$VAR` if it names a program, else the first of `names` on `PATH`.
fn compiler(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(chosen) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        // CC/CXX may carry flags (`ccache g++`): the program is the first word.
        let text = chosen.to_string_lossy().into_owned();
        let first = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        if let Some(found) = find_program(OsStr::new(&first)) {
            return Some(found);
        }
    }
    names.iter().find_map(|n| find_program(OsStr::new(n)))
}

/// Downloads one small pinned wheel with pip as configured on this host
/// (its index, proxy and CA settings; retrace names no index). Without
/// pip, or when unreachable: a warning while the images exist, an error
/// when they still have to be built.
pub fn index_check(found: &Found, scratch: &Path, images_missing: bool) -> Check {
    let pip_python = found
        .venv_python
        .clone()
        .or_else(|| found.python.as_ref().map(|p| p.path.clone()));
    let Some(pip_python) = pip_python else {
        return Check::info(
            "package-index",
            "not checked: no usable interpreter (see `python`)",
        );
    };
    let Some(pin) = probe_pin() else {
        return Check::info(
            "package-index",
            "not checked: no pin in the fat image's lock",
        );
    };
    let mut cmd = venv::pip(&pip_python, "download");
    cmd.args(["--no-deps", "--only-binary", ":all:", "--no-cache-dir"])
        .args(["--timeout", "15", "--retries", "1", "--dest"])
        .arg(scratch.join("download"))
        .arg(&pin);
    let outcome = match bounded::run(cmd, INDEX_LIMIT) {
        Ok(done) if done.status.success() => Ok(()),
        Ok(done) => Err(Unreachable::Pip(done.last_line())),
        Err(e) => Err(Unreachable::Run(e)),
    };
    index_verdict(&pin, outcome, images_missing)
}

/// `name==version` of [`INDEX_PROBE_PACKAGE`] as the fat lock pins it.
fn probe_pin() -> Option<String> {
    let lock = Lock::parse(ImageName::Fat.lock_text()).ok()?;
    let entry = lock.get(INDEX_PROBE_PACKAGE)?;
    Some(format!("{}=={}", entry.name, entry.version))
}

/// Why pip could not download the probe package.
#[derive(Debug, thiserror::Error)]
enum Unreachable {
    /// pip ran and failed: its last line of output.
    #[error("{0}")]
    Pip(String),
    /// pip did not run to its end.
    #[error(transparent)]
    Run(bounded::BoundedError),
}

/// The severity rule: unreachable is an error only when images still have
/// to be built from the index.
fn index_verdict(pin: &str, outcome: Result<(), Unreachable>, images_missing: bool) -> Check {
    const FIX: &str = "check pip's configuration (`python3 -m pip config list`: index-url, \
         proxy, cert) and the network; retrace uses pip's own settings";
    match outcome {
        Ok(()) => Check::ok(
            "package-index",
            format!("pip downloaded {pin} from its configured index"),
        ),
        Err(why) if images_missing => Check::error(
            "package-index",
            format!("pip cannot download {pin} ({why}) and the images are not built yet"),
            FIX,
        ),
        Err(why) => Check::warn(
            "package-index",
            format!(
                "pip cannot download {pin} ({why}); the built images still run, but `--strategy \
                 dynamic` installs and new builds need the index"
            ),
            FIX,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::check::Status;

    #[test]
    fn python_311_and_later_are_new_enough() {
        assert_eq!(new_enough("3.11.2"), Some(true));
        assert_eq!(new_enough("3.13.0rc1"), Some(true));
        assert_eq!(new_enough("3.14"), Some(true));
        assert_eq!(new_enough("4.0.0"), Some(true));
        assert_eq!(new_enough("3.10.12"), Some(false));
        assert_eq!(new_enough("3.9.2"), Some(false));
        assert_eq!(new_enough("python"), None);
    }

    #[test]
    fn a_missing_ensurepip_points_at_python3_venv() {
        assert!(lacks_venv(
            "/usr/bin/python3: ModuleNotFoundError: No module named 'ensurepip' (exit status: 1)"
        ));
        assert!(!lacks_venv("python3: not found on PATH"));
    }

    #[test]
    fn an_unreachable_index_is_an_error_only_without_images() {
        let down = || Err(Unreachable::Pip("timed out".to_string()));
        assert_eq!(
            index_verdict("cycler==0.12.1", down(), true).status,
            Status::Error
        );
        assert_eq!(
            index_verdict("cycler==0.12.1", down(), false).status,
            Status::Warn
        );
        assert_eq!(
            index_verdict("cycler==0.12.1", Ok(()), true).status,
            Status::Ok
        );
    }

    #[test]
    fn the_index_probe_is_pinned_by_the_fat_lock() {
        let pin = probe_pin().expect("cycler is pinned in images/fat.lock");
        assert!(pin.starts_with("cycler=="), "{pin}");
    }
}
