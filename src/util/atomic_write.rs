//! Files replaced whole or not at all: written beside their final name,
//! synced and renamed over it, so a crash (or a full disk) leaves the old
//! file or the new one, never half of either.

use std::path::{Path, PathBuf};

use super::fault::{self, Point};
use super::redact;

/// What names [`write_atomically`]'s temporary files: `.<name>.tmp-<pid>`.
const TMP_INFIX: &str = ".tmp-";

/// Removes what [`write_atomically`] left in `dir` when its process died
/// mid-write. Only for a directory one process works in at a time (a run
/// directory). Returns the files removed.
pub fn remove_torn_writes(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with('.')
                && name.contains(TMP_INFIX)
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| e.path())
        .filter(|p| std::fs::remove_file(p).is_ok())
        .collect()
}

/// Removes the temporary files of earlier writes of `path` whose process
/// is gone: a file outside any run directory (a `--junit` report) has no
/// resume to clear what a crash left beside it. A write in progress (its
/// process alive) is left alone.
fn remove_torn_writes_of(path: &Path, name: &str) {
    let Some(dir) = path.parent() else { return };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}{TMP_INFIX}");
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file.strip_prefix(&prefix).and_then(|p| p.parse().ok()) else {
            continue;
        };
        if !process_alive(pid) && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` still runs (a zombie has ended).
fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name may hold spaces and ')': the state follows the last ')'.
    stat.rfind(')')
        .and_then(|close| stat[close + 1..].split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// Writes `bytes` to `path` atomically: a temporary file beside it,
/// synced, then renamed over it, so a crash leaves the old file or the
/// new one, never half of either; the next write of the same path removes
/// what the crash left. `point` dies halfway through the temporary file.
/// A path that is there and not a regular file (a user's
/// `--junit /dev/stdout`, a fifo) is written in place: it cannot be
/// replaced. The configured secrets are redacted from what is written
/// (run.json, reports, plots: every file written whole comes here).
pub fn write_atomically(path: &Path, bytes: &[u8], point: Point) -> std::io::Result<()> {
    use std::io::Write;
    let bytes = &*redact::file(path, bytes);
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return std::fs::write(path, bytes);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    remove_torn_writes_of(path, &name);
    let tmp = path.with_file_name(format!(".{name}{TMP_INFIX}{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        let half = bytes.len() / 2;
        file.write_all(&bytes[..half])?;
        file.flush()?;
        fault::reached(point);
        file.write_all(&bytes[half..])?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        std::fs::write(&path, b"old").unwrap();
        write_atomically(&path, b"{\"new\": true}", Point::DuringSummary).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"new\": true}");
        // Nothing but the file itself is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        // What a crash mid-write leaves is recognised and removed; nothing
        // else is.
        let torn = dir.path().join(format!(".summary.json{TMP_INFIX}123"));
        std::fs::write(&torn, b"{\"ha").unwrap();
        std::fs::write(dir.path().join(".hidden"), b"x").unwrap();
        assert_eq!(remove_torn_writes(dir.path()), vec![torn]);
        assert!(dir.path().join(".hidden").exists() && path.exists());
    }

    #[test]
    fn a_write_removes_what_a_dead_writer_of_the_same_file_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.xml");
        // No process has pid u32::MAX - 1 (pid_max is at most 2^22); pid 1
        // is alive, a write in progress; another file's leftovers are not
        // this write's.
        let dead = dir
            .path()
            .join(format!(".report.xml{TMP_INFIX}{}", u32::MAX - 1));
        let alive = dir.path().join(format!(".report.xml{TMP_INFIX}1"));
        let other = dir
            .path()
            .join(format!(".other.xml{TMP_INFIX}{}", u32::MAX - 1));
        for torn in [&dead, &alive, &other] {
            std::fs::write(torn, b"<testsu").unwrap();
        }
        write_atomically(&path, b"<testsuites/>", Point::DuringSummary).unwrap();
        assert!(!dead.exists(), "a dead writer's temporary file stayed");
        assert!(other.exists(), "another file's temporary file went");
        assert!(alive.exists(), "a live writer's temporary file went");
        assert_eq!(std::fs::read(&path).unwrap(), b"<testsuites/>");
    }
}
