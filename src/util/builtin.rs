//! The datasets the binary carries, so an installed or copied binary works
//! from any directory: the built-in suites (`math`, `tabular`, `packages`:
//! task files and the data they name), the hostile and the benign
//! corpus, embedded at build time (build.rs lists them). Task files are copied from disk into a
//! kernel's work dir, so the whole tree is written out once, on first use,
//! under `$RETRACE_HOME/builtin/<content hash>/datasets/`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::nofollow;
use super::IoError;

/// Every embedded file: its path under `datasets/` and its bytes, sorted.
static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// The hostile corpus's directory under `datasets/`.
pub const CORPUS: &str = "hostile";
/// The benign corpus's directory under `datasets/`.
pub const BENIGN_CORPUS: &str = "benign";

/// Every embedded file: its path relative to `datasets/` and its bytes.
pub fn files() -> &'static [(&'static str, &'static [u8])] {
    FILES
}

/// 16 hex digits of the SHA-256 of every path and content: a binary with
/// other datasets writes them to another directory.
pub fn hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        let mut h = Sha256::new();
        for (path, bytes) in FILES {
            // Lengths first, so no two listings hash alike.
            h.update((path.len() as u64).to_le_bytes());
            h.update(path.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        hex::encode(h.finalize())[..16].to_string()
    })
}

/// The built-in `datasets/` directory under `home` (`$RETRACE_HOME`),
/// written out if it is not there yet. It is written into a temporary
/// directory and renamed into place, so a directory found there is
/// complete, and processes racing to write it all succeed (the first
/// rename wins, the others use its result).
pub fn datasets(home: &Path) -> Result<PathBuf, IoError> {
    let root = home.join("builtin");
    let done = root.join(hash());
    if done.is_dir() {
        return Ok(done.join("datasets"));
    }
    fs::create_dir_all(&root)
        .map_err(|e| IoError::new(format!("creating {}", root.display()), e))?;
    let tmp = root.join(format!(".{}-{}", hash(), uuid::Uuid::new_v4().simple()));
    let written = write_tree(&tmp.join("datasets"));
    let renamed = written.and_then(|()| {
        fs::rename(&tmp, &done).map_err(|e| {
            IoError::new(
                format!("renaming {} to {}", tmp.display(), done.display()),
                e,
            )
        })
    });
    match renamed {
        Ok(()) => Ok(done.join("datasets")),
        // Another process renamed its complete copy first.
        Err(_) if done.is_dir() => {
            let _ = nofollow::remove_entry(&tmp);
            Ok(done.join("datasets"))
        }
        Err(e) => {
            let _ = nofollow::remove_entry(&tmp);
            Err(e)
        }
    }
}

/// Every embedded file under `dir` (which must not exist yet).
fn write_tree(dir: &Path) -> Result<(), IoError> {
    for (rel, bytes) in FILES {
        let path = dir.join(rel);
        let write = |path: &Path| -> io::Result<()> {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            nofollow::create_new(path, 0o644)?.write_all(bytes)
        };
        write(&path).map_err(|e| IoError::new(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_datasets() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets")
    }

    #[test]
    fn every_embedded_file_equals_the_repository_file() {
        assert!(files().len() > 100, "only {} files", files().len());
        for (rel, bytes) in files() {
            let on_disk = fs::read(repo_datasets().join(rel)).unwrap();
            assert!(on_disk == *bytes, "{rel} differs from datasets/{rel}");
        }
        let hostile = files()
            .iter()
            .filter(|(rel, _)| rel.starts_with("hostile/"))
            .count();
        let on_disk = fs::read_dir(repo_datasets().join(CORPUS)).unwrap().count();
        assert_eq!(
            hostile, on_disk,
            "every case file of datasets/hostile is embedded"
        );
        let benign = files()
            .iter()
            .filter(|(rel, _)| rel.starts_with("benign/"))
            .count();
        let on_disk = fs::read_dir(repo_datasets().join(BENIGN_CORPUS))
            .unwrap()
            .count();
        assert_eq!(
            benign, on_disk,
            "every notebook of datasets/benign and its README are embedded"
        );
        let scripts: Vec<_> = files()
            .iter()
            .filter(|(rel, _)| rel.ends_with(".py"))
            .collect();
        assert!(scripts.is_empty(), "generator scripts are not embedded");
    }

    #[test]
    fn written_out_once_and_reused() {
        let home = tempfile::tempdir().unwrap();
        let dir = datasets(home.path()).unwrap();
        assert_eq!(
            dir,
            home.path().join("builtin").join(hash()).join("datasets")
        );
        for (rel, bytes) in files() {
            assert!(fs::read(dir.join(rel)).unwrap() == *bytes, "{rel}");
        }
        // A second call finds the complete directory and writes nothing.
        let marker = dir.join("math/tasks.jsonl");
        let before = fs::metadata(&marker).unwrap().modified().unwrap();
        assert_eq!(datasets(home.path()).unwrap(), dir);
        assert_eq!(fs::metadata(&marker).unwrap().modified().unwrap(), before);
        let left: Vec<_> = fs::read_dir(home.path().join("builtin")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary directory is left");
    }

    #[test]
    fn racing_writers_all_succeed() {
        let home = tempfile::tempdir().unwrap();
        let dirs: Vec<_> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..4).map(|_| s.spawn(|| datasets(home.path()))).collect();
            racers
                .into_iter()
                .map(|r| r.join().unwrap().unwrap())
                .collect()
        });
        assert!(dirs.iter().all(|d| *d == dirs[0]));
        assert_eq!(
            fs::read_dir(home.path().join("builtin")).unwrap().count(),
            1
        );
        assert_eq!(
            fs::read(dirs[0].join("math/tasks.jsonl")).unwrap(),
            fs::read(repo_datasets().join("math/tasks.jsonl")).unwrap()
        );
    }
}
