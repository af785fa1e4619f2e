//! A pinned Python venv a test fixture runs a tool from (a Jupyter Kernel
//! Gateway, an Enterprise Gateway, Inspect AI, Every Eval Ever, maturin), built once
//! per machine under `$RETRACE_HOME/test-gateway/<name>-<version>/` beside
//! the images and reused by every test and run after. A venv installed from
//! a lock file has a short hash of the lock in its name
//! (`<name>-<version>-<hash>`), so editing the lock builds a new one.
//!
//! A file lock keeps concurrent test binaries to one build; the marker
//! file is written last, so a build cut short is redone; a venv whose probe
//! no longer prints the pinned version (its interpreter gone, a package
//! broken) is built anew. Packages come from the index pip is configured for.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use retrace::pyenv::Interpreter;

/// Lines of the install log shown when a step fails.
const LOG_TAIL_LINES: usize = 60;

/// What to install and how to tell it works.
pub struct PinnedVenv {
    /// Short name: the venv is `<name>-<version>`.
    pub name: &'static str,
    /// The PyPI package the venv is for, installed as `package==version`.
    pub package: &'static str,
    /// The version `probe` must print.
    pub version: &'static str,
    /// How the packages are chosen.
    pub install: Install,
    /// Python code run by the venv's interpreter that prints the installed
    /// version, and fails when the venv is not usable.
    pub probe: &'static str,
    /// Steps after the install (files the fixture needs beside the
    /// packages), given the venv's directory.
    pub after: fn(&Path) -> Vec<(&'static str, Command)>,
}

/// How a venv's packages are chosen.
pub enum Install {
    /// `package==version` and these other pinned requirements, resolved by
    /// pip in one go.
    Resolve(&'static [&'static str]),
    /// Exactly what a fully resolved lock file (`name==version` lines, one
    /// of them `package==version`) lists: `pip install --only-binary :all:
    /// --no-deps -r LOCK`, then `pip check`.
    Lock {
        /// The lock's path, e.g. `concat!(env!("CARGO_MANIFEST_DIR"),
        /// "/tests/tools/inspect.lock")`.
        path: &'static str,
        /// More flags of that `pip install` (`--ignore-requires-python`
        /// for a package that declares a newer Python than it needs).
        pip_args: &'static [&'static str],
    },
}

impl PinnedVenv {
    /// The venv's directory, built first if it is missing or broken.
    /// Panics with the failed step and the install log's tail.
    pub fn ensure(&self) -> PathBuf {
        let root = root();
        let requirement = format!("{}=={}", self.package, self.version);
        let (id, pins) = match &self.install {
            Install::Resolve(with) => {
                let pins: Vec<&str> = std::iter::once(requirement.as_str())
                    .chain(with.iter().copied())
                    .collect();
                (
                    format!("{}-{}", self.name, self.version),
                    pins.join("\n") + "\n",
                )
            }
            Install::Lock { path, .. } => {
                let text = read_lock(Path::new(path), self.package, self.version);
                let hash = hex::encode(&Sha256::digest(text.as_bytes())[..4]);
                (format!("{}-{}-{hash}", self.name, self.version), text)
            }
        };
        let venv = root.join(&id);
        let lock_path = root.join(format!("{id}.lock"));
        let lock = File::create(&lock_path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
        lock.lock()
            .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
        let marker = venv.join("retrace-installed");
        if marker.exists() && self.installed_version(&venv).as_deref() == Some(self.version) {
            return venv;
        }
        // Missing, half-installed or broken (its interpreter gone): anew.
        if venv.exists() {
            fs::remove_dir_all(&venv)
                .unwrap_or_else(|e| panic!("removing the broken {}: {e}", venv.display()));
        }
        let log_path = root.join(format!("{id}-install.log"));
        let python = Interpreter::discover()
            .unwrap_or_else(|e| panic!("no Python for the venv {}: {e}", venv.display()))
            .path;
        let venv_python = venv.join("bin").join("python");
        let pip = |args: &[&str]| {
            let mut c = Command::new(&venv_python);
            c.args(["-m", "pip"]).args(args);
            c
        };
        let mut steps: Vec<(&str, Command)> = vec![("create the venv", {
            let mut c = Command::new(&python);
            c.args(["-m", "venv"]).arg(&venv);
            c
        })];
        match &self.install {
            Install::Resolve(with) => {
                let mut install = pip(&["install", "--no-input", &requirement]);
                install.args(*with);
                steps.push(("pip install the package", install));
            }
            Install::Lock { path, pip_args } => {
                let mut install = pip(&["install", "--no-input", "--only-binary", ":all:"]);
                install.args(["--no-deps", "-r", path]).args(*pip_args);
                steps.push(("pip install the lock file", install));
                steps.push(("pip check the lock's packages", pip(&["check"])));
            }
        }
        steps.extend((self.after)(&venv));
        run_logged(steps, &log_path, &venv);
        let version = self.installed_version(&venv);
        assert_eq!(
            version.as_deref(),
            Some(self.version),
            "{requirement} installed into {} but its probe does not print version {} (log {})",
            venv.display(),
            self.version,
            log_path.display()
        );
        fs::write(&marker, pins).unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
        venv
    }

    /// What the probe prints, if the venv works at all.
    fn installed_version(&self, venv: &Path) -> Option<String> {
        let out = Command::new(venv.join("bin").join("python"))
            .args(["-c", self.probe])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// The text of the lock file at `path`; panics unless it pins `package` at
/// `version` (names compared as pip does: case and `-_.` runs aside).
fn read_lock(path: &Path, package: &str, version: &str) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let normal = |name: &str| {
        name.to_ascii_lowercase()
            .split(['-', '_', '.'])
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    };
    let pinned = text
        .lines()
        .filter_map(|line| line.split('#').next()?.trim().split_once("=="))
        .any(|(name, v)| normal(name.trim()) == normal(package) && v.trim() == version);
    assert!(
        pinned,
        "{} does not pin {package}=={version}: update the lock with the package",
        path.display()
    );
    text
}

/// `$RETRACE_HOME/test-gateway`, created.
pub fn root() -> PathBuf {
    let root = retrace::util::home::retrace_home().join("test-gateway");
    fs::create_dir_all(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
    root
}

/// Runs each step with its output appended to `log_path`; panics naming
/// the first that fails, with the log's tail.
pub fn run_logged(steps: Vec<(&str, Command)>, log_path: &Path, target: &Path) {
    let log =
        File::create(log_path).unwrap_or_else(|e| panic!("creating {}: {e}", log_path.display()));
    for (what, mut cmd) in steps {
        let status = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cloning the install log"))
            .stderr(log.try_clone().expect("cloning the install log"))
            .status();
        let failed = match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(s.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            panic!(
                "building {}: could not {what} ({why}); full log {}\n--- last lines ---\n{}",
                target.display(),
                log_path.display(),
                tail(log_path, LOG_TAIL_LINES)
            );
        }
    }
}

/// The last `lines` lines of a text file (empty when it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
