//! The commit `retrace --version` names: `RETRACE_COMMIT` is the short hash
//! of HEAD (`-dirty` when tracked files differ from it), or `unknown` when
//! the sources are not a git checkout (a crates.io package, a tarball) or
//! git is missing.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&root);
    // Only this checkout's own .git: git would otherwise find any
    // repository above an unpacked package (a home directory under git).
    let commit = if root.join(".git").exists() {
        watch_refs(root);
        commit(root)
    } else {
        None
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
