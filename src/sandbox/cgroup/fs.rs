//! Plain file access to cgroupfs: writes that are read back, keyed counter
//! files, process lists, and rmdir with retries.
//!
//! Interface files are opened without `O_CREAT`: on cgroupfs a missing file
//! means a missing feature (ENOENT), and `O_CREAT` would turn that into a
//! misleading EACCES.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use walkdir::WalkDir;

use super::CgroupError;

/// First rmdir retry delay; doubled after each EBUSY.
const RMDIR_FIRST_WAIT: Duration = Duration::from_millis(1);

/// One write(2) of `value`: cgroupfs parses each write call as a whole.
pub(super) fn write(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).truncate(true).open(path)?;
    let n = file.write(value.as_bytes())?;
    if n != value.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
    }
    Ok(())
}

/// [`write`] with an error that names the file.
pub(super) fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    write(path, value).map_err(|cause| CgroupError::Write {
        file: path.to_path_buf(),
        value: value.to_string(),
        cause,
    })
}

/// Writes `value`, then checks that the file reads `expect`: the kernel may
/// round or ignore a value, and a limit that did not stick must not pass for one.
pub(super) fn write_checked(path: &Path, value: &str, expect: &str) -> Result<(), CgroupError> {
    write_file(path, value)?;
    check(path, expect)
}

/// Fails unless the file's trimmed content is `expect`.
pub(super) fn check(path: &Path, expect: &str) -> Result<(), CgroupError> {
    let got = read(path).map_err(|cause| CgroupError::ReadBack {
        file: path.to_path_buf(),
        cause,
    })?;
    if got.trim() != expect {
        return Err(CgroupError::Mismatch {
            file: path.to_path_buf(),
            got: got.trim().to_string(),
            expected: expect.to_string(),
        });
    }
    Ok(())
}

pub(super) fn read(path: &Path) -> io::Result<String> {
    fs::read_to_string(path)
}

/// The value of `key` in a "key value" file (memory.events, cpu.stat, ...).
pub(super) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut it = line.split_whitespace();
        if it.next()? != key {
            return None;
        }
        it.next()?.parse().ok()
    })
}

/// [`keyed`] on a file; a missing file or key reads as 0 (counters start at 0).
pub(super) fn read_keyed(path: &Path, key: &str) -> u64 {
    read(path).ok().and_then(|t| keyed(&t, key)).unwrap_or(0)
}

pub(super) fn read_u64(path: &Path) -> Option<u64> {
    read(path).ok()?.trim().parse().ok()
}

/// A limit value: v2 writes "max" for none, v1 a number near `i64::MAX`;
/// both become `u64::MAX`.
pub(super) fn parse_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return Some(u64::MAX);
    }
    let v: u64 = text.parse().ok()?;
    Some(if v >= 1 << 62 { u64::MAX } else { v })
}

pub(super) fn read_limit(path: &Path) -> Option<u64> {
    parse_limit(&read(path).ok()?)
}

/// Pids listed in a `cgroup.procs` file (zombies are not listed).
pub(super) fn read_pids(procs: &Path) -> Vec<i32> {
    read(procs)
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// `dir` and every directory below it, deepest first, so that child
/// cgroups are removed before their parents. Symlinks are not followed.
pub(super) fn bottom_up(dir: &Path) -> Vec<PathBuf> {
    WalkDir::new(dir)
        .contents_first(true)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_dir())
        .map(walkdir::DirEntry::into_path)
        .collect()
}

/// Names of the subdirectories (child cgroups) of `dir`.
pub(super) fn child_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// Lets unit tests stand in for the kernel: a real cgroupfs fills a new
/// directory with interface files and ignores them on rmdir.
#[cfg(test)]
pub(super) trait Simulator: Send + Sync {
    fn populate(&self, dir: &Path);
    fn depopulate(&self, dir: &Path);
}

/// Directory operations on a cgroup tree (real, or simulated in unit tests).
#[derive(Clone, Default)]
pub(super) struct Fs {
    #[cfg(test)]
    pub(super) sim: Option<std::sync::Arc<dyn Simulator>>,
}

impl std::fmt::Debug for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fs")
    }
}

impl Fs {
    pub(super) fn mkdir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)?;
        #[cfg(test)]
        if let Some(sim) = &self.sim {
            sim.populate(dir);
        }
        Ok(())
    }

    /// mkdir that accepts an existing directory.
    pub(super) fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        match self.mkdir(dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    pub(super) fn rmdir(&self, dir: &Path) -> io::Result<()> {
        #[cfg(test)]
        if let Some(sim) = &self.sim {
            if dir.is_dir() {
                sim.depopulate(dir);
            }
        }
        fs::remove_dir(dir)
    }

    /// rmdir, retrying EBUSY (a just-killed group stays busy for a few ms)
    /// from 1 ms, doubling, until `deadline`. A missing directory is success,
    /// so removal is idempotent.
    pub(super) fn rmdir_retry(&self, dir: &Path, deadline: Instant) -> io::Result<()> {
        let mut wait = RMDIR_FIRST_WAIT;
        loop {
            match self.rmdir(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(e);
                    }
                    std::thread::sleep(wait.min(deadline - now));
                    wait *= 2;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Fixture files for controller tests.
#[cfg(test)]
pub(super) mod testing {
    use std::path::Path;

    /// Writes each `(name, content)` into `dir`.
    pub(crate) fn files(dir: &Path, files: &[(&str, &str)]) {
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    pub(crate) fn content(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_reads_counter_lines() {
        let text = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 1\n";
        assert_eq!(keyed(text, "max"), Some(3));
        assert_eq!(keyed(text, "oom_kill"), Some(2));
        assert_eq!(keyed(text, "oom"), Some(1));
        assert_eq!(keyed(text, "missing"), None);
    }

    #[test]
    fn limits_parse_max_and_v1_unlimited() {
        assert_eq!(parse_limit("max\n"), Some(u64::MAX));
        assert_eq!(parse_limit("9223372036854771712\n"), Some(u64::MAX));
        assert_eq!(parse_limit("67108864\n"), Some(67108864));
        assert_eq!(parse_limit("junk"), None);
    }

    #[test]
    fn write_never_creates_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("memory.swap.max");
        let err = write(&missing, "0").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!missing.exists());
    }

    #[test]
    fn write_checked_names_the_file_on_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        // /dev/null accepts the write and reads back empty, like a kernel
        // that silently ignored the value.
        let file = dir.path().join("pids.max");
        std::os::unix::fs::symlink("/dev/null", &file).unwrap();
        let err = write_checked(&file, "16", "16").unwrap_err();
        assert!(err.to_string().contains("expected \"16\""), "{err}");
        match err {
            CgroupError::Mismatch { file: path, .. } => assert_eq!(path, file),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn bottom_up_lists_children_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir_all(a.join("b/c")).unwrap();
        std::fs::write(a.join("cgroup.procs"), "").unwrap();
        let order = bottom_up(&a);
        assert_eq!(order, vec![a.join("b/c"), a.join("b"), a.clone()]);
    }

    #[test]
    fn rmdir_retry_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::create_dir(&a).unwrap();
        let fs = Fs::default();
        let deadline = Instant::now() + Duration::from_millis(10);
        fs.rmdir_retry(&a, deadline).unwrap();
        fs.rmdir_retry(&a, deadline).unwrap();
        assert!(!a.exists());
    }
}
