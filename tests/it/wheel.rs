//! The Python wheel (`pyproject.toml`: maturin, `bindings = "bin"`), built
//! from this checkout with the maturin pinned in `tests/tools/maturin.lock`,
//! installed into a fresh venv without a package index (so it has no Python
//! dependencies), and run from a directory outside the checkout: its binary
//! names the same version and commit as the test's own, `python -m retrace`
//! runs it, it carries its built-in datasets, and as root `retrace doctor`
//! passes and an oracle run scores every task.
//!
//! The wheel is built with cargo's dev profile: the real maturin packaging
//! (scripts, metadata, strip, platform tag) of the real binary (same
//! sources, features and Cargo.lock) at a fraction of a release build's
//! cost; the release profile and the manylinux_2_17 tag are the release
//! workflow's (`.github/workflows/release.yml`, docs/install.md). maturin
//! compiles into a target directory of its own: in the test's, its
//! (stripped) build would replace the binary the other tests run.

use crate::common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::host::{lacks, Need};
use common::venv::{Install, PinnedVenv};
use retrace::pyenv::{ImageName, Interpreter};
use serde_json::Value;

const MATURIN_LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/maturin.lock");
/// The maturin `tests/tools/maturin.lock` pins (checked against it).
const MATURIN_VERSION: &str = "1.16.0";
/// Lines of maturin's output shown when it fails.
const OUTPUT_TAIL_LINES: usize = 80;

/// The venv the lock file describes, under `$RETRACE_HOME/test-gateway/`
/// (an edited lock makes a new venv: `common::venv`).
fn maturin_venv() -> PathBuf {
    PinnedVenv {
        name: "maturin",
        package: "maturin",
        version: MATURIN_VERSION,
        install: Install::Lock {
            path: MATURIN_LOCK,
            pip_args: &[],
        },
        probe: "import importlib.metadata as m\nprint(m.version('maturin'))",
        after: |_| Vec::new(),
    }
    .ensure()
}

/// Builds the wheel into `out` and returns its path. Fails the test with
/// maturin's output when maturin cannot build it.
/// The wheel, built once per test process (the tests only read it).
fn wheel() -> &'static Path {
    static WHEEL: OnceLock<(File, PathBuf)> = OnceLock::new();
    &WHEEL.get_or_init(build_wheel).1
}

/// Builds the wheel into the target's `wheel-dist/`, and the lock that
/// keeps it there: one build at a time in that directory (test binaries
/// too), and no other process replaces the wheel while this one installs
/// it (the lock is held until the process ends). maturin moves the binary
/// cargo linked out of its target, so a second build finishing meanwhile
/// would find nothing to package.
fn build_wheel() -> (File, PathBuf) {
    let venv = maturin_venv();
    let maturin = venv.join("bin").join("maturin");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wheel-target");
    let lock_path = target.with_extension("lock");
    let lock = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
    let out = target.with_file_name("wheel-dist");
    if out.exists() {
        fs::remove_dir_all(&out).unwrap_or_else(|e| panic!("emptying {}: {e}", out.display()));
    }
    let out = out.as_path();
    let built = Command::new(&maturin)
        .args(["build", "--profile", "dev", "--locked", "--out"])
        .arg(out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target)
        // `.ci/timed` gives test binaries RUSTC_BOOTSTRAP (libtest's
        // per-test times); the wheel is a stable build all the same.
        .env_remove("RUSTC_BOOTSTRAP")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", maturin.display()));
    let stderr = String::from_utf8_lossy(&built.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        built.status.success(),
        "maturin could not build the wheel ({}); its last lines:\n{}\n{}",
        built.status,
        lines[lines.len().saturating_sub(OUTPUT_TAIL_LINES)..].join("\n"),
        String::from_utf8_lossy(&built.stdout)
    );
    let wheels: Vec<PathBuf> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel expected in {}", out.display());
    (lock, wheels.into_iter().next().unwrap())
}

/// A fresh venv with the wheel installed, and a working directory outside
/// the checkout; both removed when dropped.
struct Installed {
    venv: PathBuf,
    cwd: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

impl Installed {
    /// Builds the wheel and installs it with pip, without an index: a
    /// wheel with a Python dependency fails here.
    fn new() -> Installed {
        let dir = tempfile::tempdir().unwrap();
        let wheel = wheel();
        let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
        // py3-none: a binary for any Python, tagged for this platform.
        let prefix = concat!("retrace-", env!("CARGO_PKG_VERSION"), "-py3-none-");
        let arch = format!("_{}.whl", std::env::consts::ARCH);
        assert!(
            name.starts_with(prefix) && name.ends_with(&arch) && name.contains("linux"),
            "{name}: not {prefix}<linux tag>{arch}"
        );
        let venv = dir.path().join("venv");
        let python = Interpreter::discover()
            .unwrap_or_else(|e| panic!("no Python for the venv {}: {e}", venv.display()))
            .path;
        let log = dir.path().join("install.log");
        common::venv::run_logged(
            vec![
                ("create the venv", {
                    let mut c = Command::new(python);
                    c.args(["-m", "venv"]).arg(&venv);
                    c
                }),
                ("install the wheel without an index", {
                    let mut c = Command::new(venv.join("bin").join("python"));
                    c.args(["-m", "pip", "install", "--no-input", "--no-index"])
                        .arg(wheel);
                    c
                }),
            ],
            &log,
            &venv,
        );
        Installed {
            venv,
            cwd: tempfile::tempdir().unwrap(),
            _dir: dir,
        }
    }

    /// `program` of the venv's `bin/`, run with `args` from the directory
    /// outside the checkout.
    fn run(&self, program: &str, args: &[&str]) -> common::Ran {
        self.command(program, args).output().unwrap().into()
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new(self.venv.join("bin").join(program));
        c.args(args)
            .current_dir(self.cwd.path())
            .stdin(Stdio::null());
        c
    }
}

/// What the test's own binary prints for `args`.
fn own(args: &[&str]) -> common::Ran {
    let ran = common::retrace(args).run();
    assert!(ran.success(), "{ran}");
    ran
}

#[test]
fn the_wheel_installs_a_retrace_that_works_outside_the_checkout() {
    let installed = Installed::new();
    let version = own(&["--version"]).stdout;

    let ran = installed.run("retrace", &["--version"]);
    assert!(ran.success(), "{ran}");
    assert_eq!(ran.stdout, version, "the wheel's binary is another build");

    let ran = installed.run("python", &["-m", "retrace", "--version"]);
    assert!(ran.success(), "{ran}");
    assert_eq!(ran.stdout, version);

    // The built-in suites come from the binary: written into a new
    // $RETRACE_HOME, and listed as the test's own binary lists them.
    let home = tempfile::tempdir().unwrap();
    let ran = installed
        .command("retrace", &["tasks", "list", "tabular"])
        .env("RETRACE_HOME", home.path())
        .output()
        .unwrap();
    let ran = common::Ran::from(ran);
    assert!(ran.success(), "{ran}");
    assert_eq!(ran.stdout, own(&["tasks", "list", "tabular"]).stdout);
    assert!(home.path().join("builtin").is_dir(), "{ran}");

    // Without its binary, `python -m retrace` says so and how to fix it.
    fs::remove_file(installed.venv.join("bin").join("retrace")).unwrap();
    let ran = installed.run("python", &["-m", "retrace", "--version"]);
    assert_eq!(ran.code, 3, "{ran}");
    assert!(
        ran.stderr.contains("retrace binary is not installed")
            && ran.stderr.contains("pip install --force-reinstall retrace"),
        "{ran}"
    );
}

#[test]
fn the_installed_retrace_passes_doctor_and_scores_an_oracle_run() {
    if lacks(&[Need::Root]) {
        return;
    }
    let installed = Installed::new();

    let ran = installed.run("retrace", &["doctor", "--json"]);
    let doctor: Value = serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran}"));
    assert_eq!(ran.code, 0, "{ran}");
    assert_eq!(doctor["can_run"], true, "{doctor:#}");

    // Built here first, so that parallel tests do not race to build it.
    common::image(ImageName::Fat);
    let out = installed.cwd.path().join("run");
    let ran = installed.run(
        "retrace",
        &[
            "run",
            "--model",
            "oracle",
            "--suite",
            "tabular",
            "--limit-tasks",
            "4",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(ran.success(), "{ran}");
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["tasks"], 4, "{summary:#}");
    assert_eq!(summary["tasks_finished"], 4, "{summary:#}");
    assert_eq!(summary["unconfined"], false, "{summary:#}");
    // The oracle answers with the reference: every task right from round 0.
    let rounds = summary["accuracy_by_round"].as_array().unwrap();
    assert!(!rounds.is_empty(), "{summary:#}");
    for round in rounds {
        assert_eq!(round["successes"], 4, "{summary:#}");
        assert_eq!(round["n"], 4, "{summary:#}");
    }
}
