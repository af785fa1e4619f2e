//! The v2 memory controller: hard limit, no swap, whole-group OOM kill,
//! OOM counters, limit hits and peak usage.

use std::io;
use std::path::Path;

use crate::sandbox::cgroup::{fs, CgroupError};

pub(crate) const MAX: &str = "memory.max";
/// Swap limit (swap only, not memory+swap like v1 memsw).
pub(crate) const SWAP_MAX: &str = "memory.swap.max";
pub(crate) const OOM_GROUP: &str = "memory.oom.group";
pub(crate) const EVENTS: &str = "memory.events";
pub(crate) const PEAK: &str = "memory.peak";

/// Writes the limit, no swap, and whole-group OOM kill (otherwise one
/// victim dies and the rest of the kernel limps on).
pub(crate) fn apply(dir: &Path, bytes: u64, host_has_swap: bool) -> Result<(), CgroupError> {
    let value = bytes.to_string();
    fs::write_checked(&dir.join(MAX), &value, &value)?;
    let swap = dir.join(SWAP_MAX);
    match fs::write(&swap, "0") {
        Ok(()) => fs::check(&swap, "0")?,
        // Without swap there is nothing to limit.
        Err(e) if e.kind() == io::ErrorKind::NotFound && !host_has_swap => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CgroupError::NoSwapLimit { file: swap })
        }
        Err(cause) => {
            return Err(CgroupError::Write {
                file: swap,
                value: "0".into(),
                cause,
            })
        }
    }
    fs::write_checked(&dir.join(OOM_GROUP), "1", "1")
}

pub(crate) fn limit(dir: &Path) -> u64 {
    fs::read_limit(&dir.join(MAX)).unwrap_or(0)
}

/// `oom_kill` counts every process killed, a group kill included, while
/// `oom_group_kill` counts group kills: adding them would count a group kill
/// twice, and the max still shows a group kill whose members were already exiting.
pub(crate) fn oom_kills(dir: &Path) -> u64 {
    let text = fs::read(&dir.join(EVENTS)).unwrap_or_default();
    let kills = fs::keyed(&text, "oom_kill").unwrap_or(0);
    let group = fs::keyed(&text, "oom_group_kill").unwrap_or(0);
    kills.max(group)
}

/// The `max` line of `memory.events`: the v2 spelling of `failcnt`.
pub(crate) fn limit_hits(dir: &Path) -> u64 {
    fs::read_keyed(&dir.join(EVENTS), "max")
}

/// `memory.peak` exists from Linux 5.19.
pub(crate) fn peak(dir: &Path) -> Option<u64> {
    fs::read_u64(&dir.join(PEAK))
}

/// Whether swap can be limited in the group at `dir`.
pub(crate) fn swap_accounting(dir: &Path) -> bool {
    dir.join(SWAP_MAX).exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::cgroup::fs::testing::{content, files};

    #[test]
    fn writes_max_no_swap_and_group_kill() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[(MAX, "max"), (SWAP_MAX, "max"), (OOM_GROUP, "0")],
        );
        apply(d.path(), 64 << 20, true).unwrap();
        assert_eq!(content(d.path(), MAX), "67108864");
        assert_eq!(content(d.path(), SWAP_MAX), "0");
        assert_eq!(content(d.path(), OOM_GROUP), "1");
        assert_eq!(limit(d.path()), 64 << 20);
    }

    #[test]
    fn missing_swap_max_is_fatal_only_with_swap() {
        let d = tempfile::tempdir().unwrap();
        files(d.path(), &[(MAX, "max"), (OOM_GROUP, "0")]);
        apply(d.path(), 64 << 20, false).unwrap();
        let err = apply(d.path(), 64 << 20, true).unwrap_err();
        assert!(err.to_string().contains(SWAP_MAX), "{err}");
    }

    #[test]
    fn limit_that_does_not_stick_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        files(d.path(), &[(SWAP_MAX, "max"), (OOM_GROUP, "0")]);
        std::os::unix::fs::symlink("/dev/null", d.path().join(MAX)).unwrap();
        let err = apply(d.path(), 64 << 20, false).unwrap_err();
        match err {
            CgroupError::Mismatch { file, .. } => assert_eq!(file, d.path().join(MAX)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn oom_counters_limit_hits_and_peak() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[(
                EVENTS,
                "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 1\n",
            )],
        );
        assert_eq!(oom_kills(d.path()), 1);
        assert_eq!(limit_hits(d.path()), 3);
        assert_eq!(peak(d.path()), None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(oom_kills(empty.path()), 0);
        assert_eq!(limit_hits(empty.path()), 0);
    }
}
