//! The pids controller: a cap on processes and threads, and the count of
//! forks it refused. v1 and v2 use the same file names.

use std::path::Path;

use super::fs;
use super::CgroupError;

pub(super) const MAX: &str = "pids.max";
/// `max N`: forks refused because of the limit (sticky).
pub(super) const EVENTS: &str = "pids.events";

/// Threads count too, and zombies until reaped.
pub(super) fn apply(dir: &Path, pids: u64) -> Result<(), CgroupError> {
    let value = pids.to_string();
    fs::write_checked(&dir.join(MAX), &value, &value)
}

pub(super) fn limit(dir: &Path) -> u64 {
    fs::read_limit(&dir.join(MAX)).unwrap_or(0)
}

pub(super) fn max_events(dir: &Path) -> u64 {
    fs::read_keyed(&dir.join(EVENTS), "max")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_max() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(MAX), "max\n").unwrap();
        assert_eq!(limit(d.path()), u64::MAX);
        apply(d.path(), 16).unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join(MAX)).unwrap(), "16");
        assert_eq!(limit(d.path()), 16);
    }

    #[test]
    fn missing_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let err = apply(d.path(), 16).unwrap_err();
        assert!(err.to_string().contains(MAX), "{err}");
    }

    #[test]
    fn events_count_refused_forks() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(max_events(d.path()), 0);
        std::fs::write(d.path().join(EVENTS), "max 13054\n").unwrap();
        assert_eq!(max_events(d.path()), 13054);
    }
}
