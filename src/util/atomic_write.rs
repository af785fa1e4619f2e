//! Files replaced whole or not at all: written beside their final name,
//! synced and renamed over it, so a crash (or a full disk) leaves the old
//! file or the new one, never half of either.

use std::path::{Path, PathBuf};

use super::fault::{self, Point};

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

/// Writes `bytes` to `path` atomically: a temporary file beside it,
/// synced, then renamed over it, so a crash leaves the old file or the
/// new one, never half of either. `point` dies halfway through the
/// temporary file. A path that is there and not a regular file (a user's
/// `--junit /dev/stdout`, a fifo) is written in place: it cannot be
/// replaced.
pub fn write_atomically(path: &Path, bytes: &[u8], point: Point) -> std::io::Result<()> {
    use std::io::Write;
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return std::fs::write(path, bytes);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
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
}
