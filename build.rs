//! Two things the binary carries from its sources:
//!
//! - The commit `retrace --version` names: `RETRACE_COMMIT` is the short
//!   hash of HEAD (`-dirty` when tracked files differ from it); in a
//!   package made by `cargo package`/`cargo publish` (no .git), the commit
//!   cargo recorded in `.cargo_vcs_info.json`; else `unknown` (a plain
//!   tarball, or git missing).
//! - The built-in datasets (`src/util/builtin.rs`): `$OUT_DIR/builtin.rs`
//!   lists every file it embeds as `(path under datasets/, include_bytes!)`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The suites the binary carries: their task files and data, not the
/// scripts that generated them.
const SUITES: [&str; 5] = ["math", "tabular", "packages", "competition", "resource"];
/// The hostile and benign corpora: their case files only (the benign
/// corpus's README with its sources' notices too).
const CORPORA: &[&str] = &["hostile", "benign"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&root);
    embed_datasets(root);
    // Only this checkout's own .git: git would otherwise find any
    // repository above an unpacked package (a home directory under git).
    let commit = if root.join(".git").exists() {
        watch_refs(root);
        commit(root)
    } else {
        packaged_commit(root)
    };
    println!(
        "cargo:rustc-env=RETRACE_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn commit(root: &Path) -> Option<String> {
    let hash = git(root, &["rev-parse", "--short=12", "HEAD"])?;
    let status = git(root, &["status", "--porcelain", "--untracked-files=no"])?;
    Some(if status.is_empty() {
        hash
    } else {
        format!("{hash}-dirty")
    })
}

/// The commit `cargo package` wrote into the package:
/// `{"git": {"sha1": "…", "dirty": true}, …}`.
fn packaged_commit(root: &Path) -> Option<String> {
    let text = fs::read_to_string(root.join(".cargo_vcs_info.json")).ok()?;
    let sha1 = json_string_after(&text, "\"sha1\"")?;
    let short = sha1.get(..12)?;
    let dirty = text.contains("\"dirty\": true") || text.contains("\"dirty\":true");
    Some(if dirty {
        format!("{short}-dirty")
    } else {
        short.to_string()
    })
}

/// The string value after `key` in a small, flat piece of JSON (a build
/// script has no JSON parser; the file's shape is fixed by cargo).
fn json_string_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = &rest[rest.find('"')? + 1..];
    let value = &rest[..rest.find('"')?];
    value
        .chars()
        .all(|c| c.is_ascii_hexdigit())
        .then_some(value)
}

/// Reruns this script when HEAD moves: HEAD itself, the branch it points to
/// (loose or packed) and the index (a commit or `git add` changes it). A
/// worktree's `.git` is a file, so the paths come from git. Only paths that
/// exist: cargo reruns a script that watches a missing file on every build.
fn watch_refs(root: &Path) {
    let path = |name: &str| git(root, &["rev-parse", "--git-path", name]).map(|p| root.join(p));
    let mut watched = vec![path("HEAD"), path("index"), path("packed-refs")];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        // A branch that is only packed yet is written loose into its folder.
        watched.push(path(&branch).and_then(|file| match file.exists() {
            true => Some(file),
            false => file.parent().map(Path::to_path_buf),
        }));
    }
    for file in watched.into_iter().flatten().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
}

/// Writes `$OUT_DIR/builtin.rs`: the embedded files, sorted by path.
fn embed_datasets(root: &Path) {
    // A directory is scanned for any change inside it.
    println!("cargo:rerun-if-changed=datasets");
    let datasets = root.join("datasets");
    let mut files = Vec::new();
    for suite in SUITES {
        suite_files(&datasets.join(suite), &mut files);
    }
    for corpus in CORPORA {
        for entry in read_dir(&datasets.join(corpus)) {
            let kept = entry.extension().is_some_and(|x| x == "toml")
                || entry.file_name().is_some_and(|n| n == "README.md");
            if kept && entry.is_file() {
                files.push(entry);
            }
        }
    }
    files.sort();
    let mut out = String::from("&[\n");
    for file in &files {
        let rel = file.strip_prefix(&datasets).expect("under datasets/");
        let rel = rel.to_str().expect("dataset paths are UTF-8");
        let abs = file.to_str().expect("dataset paths are UTF-8");
        writeln!(out, "    ({rel:?}, include_bytes!({abs:?})),").unwrap();
    }
    out.push_str("]\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(dest.join("builtin.rs"), out).expect("writing builtin.rs");
}

/// Every file of a suite but hidden ones, scripts (`*.py`) and READMEs.
fn suite_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in read_dir(dir) {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name.starts_with("README") || name.ends_with(".py") {
            continue;
        }
        if entry.is_dir() {
            suite_files(&entry, out);
        } else if entry.is_file() {
            out.push(entry);
        }
    }
}

fn read_dir(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("reading a directory entry").path())
        .collect()
}
