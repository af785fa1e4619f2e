//! The suites and the hostile corpus travel inside the binary: a copy of it
//! run from an empty directory, with no `$RETRACE_DATASETS`, finds them;
//! a `./datasets` holding a suite, or `$RETRACE_DATASETS`, overrides them.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use retrace::pyenv::{ImageName, ImageStore};
use retrace::task::load::{load_suite, SUITES};
use walkdir::WalkDir;

fn repo_datasets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets")
}

/// A copy of the built binary in a directory of its own, as `cargo
/// install` or a copy to another machine leaves it. Outside /tmp: a
/// confined process has its own /tmp and runs this binary as its init.
struct Installed {
    _dir: tempfile::TempDir,
    exe: PathBuf,
}

impl Installed {
    fn new() -> Self {
        let dir = common::outside_tmp();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.path().join("retrace");
        fs::copy(env!("CARGO_BIN_EXE_retrace"), &exe).unwrap();
        Installed { _dir: dir, exe }
    }

    /// Runs the copy in `cwd` with `home` as `$RETRACE_HOME` and
    /// `$RETRACE_DATASETS` as given (removed when `None`).
    fn run(
        &self,
        cwd: &Path,
        home: &Path,
        datasets: Option<&Path>,
        args: &[&str],
    ) -> (i32, String, String) {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(cwd)
            .env("RETRACE_HOME", home)
            .env_remove("RETRACE_DATASETS");
        if let Some(dir) = datasets {
            cmd.env("RETRACE_DATASETS", dir);
        }
        let out = cmd.output().expect("run the copied retrace");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The files of `datasets/` a binary must carry, by path under it: every
/// hostile case, every suite's task files and every file their tasks name.
fn required() -> BTreeMap<String, Vec<u8>> {
    // Canonical, as the loader makes task files.
    let root = repo_datasets().canonicalize().unwrap();
    let mut paths: Vec<PathBuf> = Vec::new();
    // The corpora: case files, and the benign one's README (its sources'
    // licence notices travel with the notebooks).
    for corpus in ["hostile", "benign"] {
        for entry in fs::read_dir(root.join(corpus)).unwrap() {
            let path = entry.unwrap().path();
            let notices = corpus == "benign" && path.ends_with("README.md");
            assert!(
                path.extension().is_some_and(|x| x == "toml") || notices,
                "{path:?}"
            );
            paths.push(path);
        }
    }
    for suite in SUITES {
        for entry in WalkDir::new(root.join(suite)) {
            let path = entry.unwrap().into_path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                paths.push(path);
            }
        }
        for task in load_suite(suite, &root).unwrap() {
            paths.extend(task.files);
        }
    }
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap().to_str().unwrap().to_string();
            (rel, fs::read(&p).unwrap())
        })
        .collect()
}

/// Every file under `dir`, by path under it.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_str().unwrap();
            (rel.to_string(), fs::read(e.path()).unwrap())
        })
        .collect()
}

/// The one written-out `datasets/` under a `$RETRACE_HOME`.
fn written_out(home: &Path) -> PathBuf {
    let dirs: Vec<_> = fs::read_dir(home.join("builtin"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "one complete copy, no temporary left: {dirs:?}"
    );
    dirs[0].join("datasets")
}

#[test]
fn suites_come_from_the_binary_anywhere() {
    let bin = Installed::new();
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();

    let (code, stdout, stderr) = bin.run(cwd.path(), home.path(), None, &["tasks", "list", "math"]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let math = load_suite("math", &repo_datasets()).unwrap();
    assert!(
        stdout.contains(&format!("{} tasks", math.len())),
        "{stdout}"
    );
    assert!(stdout.contains(&math[0].id), "{stdout}");

    // The tree written out is exactly what a run needs, byte for byte.
    let dir = written_out(home.path());
    assert!(dir.starts_with(home.path().join("builtin")));
    let (written, required) = (tree(&dir), required());
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&written), names(&required));
    for (rel, bytes) in &required {
        assert!(written[rel] == *bytes, "{rel} differs from datasets/{rel}");
    }

    // Task files resolve to the written-out copies.
    let (code, stdout, stderr) = bin.run(
        cwd.path(),
        home.path(),
        None,
        &["tasks", "list", "tabular", "--json"],
    );
    assert_eq!(code, 0, "{stderr}");
    let tasks: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let files: Vec<PathBuf> = tasks
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["files"].as_array().unwrap())
        .map(|f| PathBuf::from(f.as_str().unwrap()))
        .collect();
    assert!(!files.is_empty());
    for file in &files {
        assert!(file.starts_with(&dir) && file.is_file(), "{file:?}");
    }
    assert_eq!(written_out(home.path()), dir, "the copy is reused");
    assert!(
        fs::read_dir(cwd.path()).unwrap().next().is_none(),
        "cwd untouched"
    );
}

#[test]
fn local_datasets_and_retrace_datasets_override_the_binary() {
    let bin = Installed::new();
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let own = r#"{"id": "own-1", "question": "1+1?", "expected": {"type": "number", "value": 2}}"#;
    fs::create_dir_all(cwd.path().join("datasets/math")).unwrap();
    fs::write(cwd.path().join("datasets/math/tasks.jsonl"), own).unwrap();

    let (code, stdout, stderr) = bin.run(cwd.path(), home.path(), None, &["tasks", "list", "math"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("own-1") && stdout.contains("1 tasks"),
        "{stdout}"
    );
    assert!(!home.path().join("builtin").exists(), "nothing written out");

    // ./datasets without the suite asked for: the built-in one.
    let (code, stdout, stderr) = bin.run(
        cwd.path(),
        home.path(),
        None,
        &["tasks", "list", "packages"],
    );
    assert_eq!(code, 0, "{stderr}");
    let packages = load_suite("packages", &repo_datasets()).unwrap();
    assert!(
        stdout.contains(&format!("{} tasks", packages.len())),
        "{stdout}"
    );

    // $RETRACE_DATASETS wins over both.
    let mine = tempfile::tempdir().unwrap();
    fs::create_dir_all(mine.path().join("math")).unwrap();
    let other = own.replace("own-1", "env-1");
    fs::write(mine.path().join("math/tasks.jsonl"), other).unwrap();
    let (code, stdout, stderr) = bin.run(
        cwd.path(),
        home.path(),
        Some(mine.path()),
        &["tasks", "list", "math"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("env-1") && !stdout.contains("own-1"),
        "{stdout}"
    );
}

/// Validation and the sandbox check run kernels: they use the shared image
/// store (`$RETRACE_HOME` as the other tests see it), so nothing is built
/// again; the built-in tree is written out there beside the images.
#[test]
fn validate_and_sandbox_check_use_the_built_in_files() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let home = ImageStore::from_env().home().to_path_buf();
    let bin = Installed::new();
    let cwd = tempfile::tempdir().unwrap();

    let (code, stdout, stderr) = bin.run(
        cwd.path(),
        &home,
        None,
        &["tasks", "validate", "tabular", "--jobs", "2"],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let tabular = load_suite("tabular", &repo_datasets()).unwrap();
    let line = format!("{0} of {0} references check correct", tabular.len());
    assert!(stdout.contains(&line), "{stdout}");

    let (code, stdout, stderr) = bin.run(
        cwd.path(),
        &home,
        None,
        &["sandbox", "check", "--filter", "crash_abort", "--jobs", "1"],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("from the built-in corpus ("), "{stderr}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}
