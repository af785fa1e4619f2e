//! A file system that filled up while retrace wrote to it: how a failure
//! is recognised as one (ENOSPC in an error or a tool's output, or almost
//! nothing left free), and the error that says where, how much is free,
//! about how much was needed and what to do.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Less than this left free when a write failed: the file system was full
/// (pip and compilers do not always say so, and the log they would say it
/// in may be on the same full file system).
pub const NEARLY_FULL: u64 = 1 << 20;

/// What an out-of-space failure prints, whichever tool hit it: strerror,
/// Python's `OSError` and Rust's `io::Error`.
const FULL_TEXTS: [&str; 3] = ["No space left on device", "[Errno 28]", "os error 28"];

/// Bytes an unprivileged writer may still use on the file system holding
/// `path` (or its nearest existing ancestor).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let s = nix::sys::statvfs::statvfs(existing).ok()?;
    // The field types differ between targets; the product fits in u64.
    #[allow(clippy::unnecessary_cast)]
    Some((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}

/// The mount point of the file system holding `path`: its topmost
/// ancestor on the same device.
pub fn mount_point(path: &Path) -> PathBuf {
    let Some(existing) = path.ancestors().find(|p| p.exists()) else {
        return path.to_path_buf();
    };
    let Ok(dev) = existing.metadata().map(|m| m.dev()) else {
        return existing.to_path_buf();
    };
    existing
        .ancestors()
        .take_while(|p| p.metadata().is_ok_and(|m| m.dev() == dev))
        .last()
        .unwrap_or(existing)
        .to_path_buf()
}

/// Whether an error's text (its whole chain) or a tool's output says that
/// a write found no space.
pub fn says_full(text: &str) -> bool {
    FULL_TEXTS.iter().any(|t| text.contains(t))
}

/// `error` and its sources, one after the other, for [`says_full`].
pub fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a failure while writing under `path` was the file system
/// filling up: the error says so, or almost nothing is left. Asked before
/// the partial output is removed (removing it frees the space).
pub fn ran_out(path: &Path, error_text: &str) -> bool {
    says_full(error_text) || free_bytes(path).is_some_and(|free| free < NEARLY_FULL)
}

/// A write under `$RETRACE_HOME` that found its file system full. The
/// failure it ended is the source.
#[derive(Debug, thiserror::Error)]
#[error(
    "no space left on {mount} while writing {what} ({path}): {free} free{needed}; \
     free space there or set RETRACE_HOME to a directory on another file system",
    mount = .mount.display(),
    path = .path.display(),
    free = human(*.free),
    needed = .needed.map(|n| format!(", about {} needed", human(n))).unwrap_or_default()
)]
pub struct NoSpace {
    /// What was being written (`slim`, `demo-pkg==1.0`).
    pub what: String,
    /// Where it was going.
    pub path: PathBuf,
    /// The file system's mount point.
    pub mount: PathBuf,
    /// Free now, after the partial output was removed (0 if unreadable).
    pub free: u64,
    /// About how much the whole write takes, where known.
    pub needed: Option<u64>,
    #[source]
    pub cause: Box<dyn std::error::Error + Send + Sync>,
}

impl NoSpace {
    /// Measures `path`'s file system now (call it after removing the
    /// partial output).
    pub fn new(
        what: impl Into<String>,
        path: &Path,
        needed: Option<u64>,
        cause: Box<dyn std::error::Error + Send + Sync>,
    ) -> NoSpace {
        NoSpace {
            what: what.into(),
            path: path.to_path_buf(),
            mount: mount_point(path),
            free: free_bytes(path).unwrap_or(0),
            needed,
            cause,
        }
    }
}

/// `1.5 MB`, `312 MB`, `1.2 GB` (decimal units, as pip and `df -H` print).
pub fn human(bytes: u64) -> String {
    let mb = bytes as f64 / 1e6;
    if mb >= 1000.0 {
        format!("{:.1} GB", mb / 1000.0)
    } else if mb >= 10.0 {
        format!("{mb:.0} MB")
    } else {
        format!("{mb:.1} MB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_file_system_the_space_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("images/slim-0123");
        let cause = std::io::Error::from_raw_os_error(28);
        assert!(says_full(&cause.to_string()), "{cause}");
        let e = NoSpace::new("slim", &path, Some(250_000_000), Box::new(cause));
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("no space left on {}", e.mount.display())),
            "{text}"
        );
        assert!(text.contains(&format!("({})", path.display())), "{text}");
        assert!(text.contains("about 250 MB needed"), "{text}");
        assert!(text.contains("set RETRACE_HOME"), "{text}");
        assert!(path.starts_with(&e.mount), "{}", e.mount.display());
        assert!(chain_text(&e).ends_with("No space left on device (os error 28)"));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(1_500_000), "1.5 MB");
        assert_eq!(human(312_400_000), "312 MB");
        assert_eq!(human(1_230_000_000), "1.2 GB");
        assert!(!says_full("Permission denied (os error 13)"));
        assert!(says_full(
            "OSError: [Errno 28] No space left on device: '/x/site'"
        ));
    }
}
