//! The v1 memory controller: hard limit, an equal memory+swap limit, the
//! OOM killer kept on, OOM counters, limit hits and peak usage.

use std::path::Path;

use crate::sandbox::cgroup::{fs, CgroupError};

/// Hard limit.
pub(crate) const LIMIT: &str = "memory.limit_in_bytes";
/// Memory+swap limit: only present with swap accounting (`swapaccount=1`).
pub(crate) const MEMSW: &str = "memory.memsw.limit_in_bytes";
/// OOM switch and counter (`oom_kill_disable`, `under_oom`, `oom_kill`).
pub(crate) const OOM_CONTROL: &str = "memory.oom_control";
pub(crate) const PEAK: &str = "memory.max_usage_in_bytes";
/// Count of charges that hit the limit (each one reclaims or OOM-kills).
pub(crate) const FAILCNT: &str = "memory.failcnt";

/// Writes the limit and an equal memory+swap limit (no swap at all), and
/// keeps the OOM killer enabled.
pub(crate) fn apply(dir: &Path, bytes: u64, host_has_swap: bool) -> Result<(), CgroupError> {
    let limit = dir.join(LIMIT);
    let memsw = dir.join(MEMSW);
    let value = bytes.to_string();
    if memsw.exists() {
        // The kernel requires memsw >= limit at every moment: lower the
        // limit first, but raise memsw first.
        let current_memsw = fs::read_limit(&memsw).unwrap_or(u64::MAX);
        if bytes > current_memsw {
            fs::write_checked(&memsw, &value, &value)?;
            fs::write_checked(&limit, &value, &value)?;
        } else {
            fs::write_checked(&limit, &value, &value)?;
            fs::write_checked(&memsw, &value, &value)?;
        }
    } else if host_has_swap {
        return Err(CgroupError::NoSwapLimit { file: memsw });
    } else {
        fs::write_checked(&limit, &value, &value)?;
    }
    // With the killer disabled, v1 tasks at the limit hang in D state. New
    // groups inherit the flag from their parent, so check and repair it.
    let oom = dir.join(OOM_CONTROL);
    let disabled = || {
        fs::read(&oom)
            .ok()
            .and_then(|t| fs::keyed(&t, "oom_kill_disable"))
    };
    if disabled() != Some(0) {
        fs::write_file(&oom, "0")?;
        if disabled() != Some(0) {
            return Err(CgroupError::OomKillerDisabled { file: oom });
        }
    }
    Ok(())
}

pub(crate) fn limit(dir: &Path) -> u64 {
    fs::read_limit(&dir.join(LIMIT)).unwrap_or(0)
}

pub(crate) fn oom_kills(dir: &Path) -> u64 {
    fs::read_keyed(&dir.join(OOM_CONTROL), "oom_kill")
}

/// Times the group's usage reached its limit: evidence that an allocation
/// could have failed because of it (page cache reclaim counts too).
pub(crate) fn limit_hits(dir: &Path) -> u64 {
    fs::read_u64(&dir.join(FAILCNT)).unwrap_or(0)
}

pub(crate) fn peak(dir: &Path) -> Option<u64> {
    fs::read_u64(&dir.join(PEAK))
}

/// Whether swap can be limited in the group at `dir`.
pub(crate) fn swap_accounting(dir: &Path) -> bool {
    dir.join(MEMSW).exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::cgroup::fs::testing::{content, files};

    const UNLIMITED: &str = "9223372036854771712\n";
    const OOM_ENABLED: &str = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";

    #[test]
    fn writes_limit_memsw_and_keeps_killer() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (LIMIT, UNLIMITED),
                (MEMSW, UNLIMITED),
                (OOM_CONTROL, OOM_ENABLED),
            ],
        );
        apply(d.path(), 64 << 20, false).unwrap();
        assert_eq!(content(d.path(), LIMIT), "67108864");
        assert_eq!(content(d.path(), MEMSW), "67108864");
        assert_eq!(limit(d.path()), 64 << 20);
    }

    #[test]
    fn raises_memsw_before_limit() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (LIMIT, "1048576"),
                (MEMSW, "1048576"),
                (OOM_CONTROL, OOM_ENABLED),
            ],
        );
        apply(d.path(), 2 << 20, false).unwrap();
        assert_eq!(content(d.path(), MEMSW), "2097152");
        assert_eq!(content(d.path(), LIMIT), "2097152");
    }

    #[test]
    fn missing_memsw_is_fatal_only_with_swap() {
        let d = tempfile::tempdir().unwrap();
        files(d.path(), &[(LIMIT, UNLIMITED), (OOM_CONTROL, OOM_ENABLED)]);
        apply(d.path(), 64 << 20, false).unwrap();
        let err = apply(d.path(), 64 << 20, true).unwrap_err();
        assert!(err.to_string().contains(MEMSW), "{err}");
        assert!(err.to_string().contains("swapaccount=1"), "{err}");
    }

    #[test]
    fn disabled_oom_killer_is_repaired_or_refused() {
        let d = tempfile::tempdir().unwrap();
        let disabled = "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n";
        files(d.path(), &[(LIMIT, UNLIMITED), (OOM_CONTROL, disabled)]);
        // A real kernel would now read "oom_kill_disable 0"; the fixture
        // reads back "0", which is not the expected format.
        let err = apply(d.path(), 64 << 20, false).unwrap_err();
        assert!(err.to_string().contains("still disabled"), "{err}");
        assert_eq!(content(d.path(), OOM_CONTROL), "0");
    }

    #[test]
    fn oom_counters_limit_hits_and_peak() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (OOM_CONTROL, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),
                (PEAK, "1234\n"),
                (FAILCNT, "17\n"),
            ],
        );
        assert_eq!(oom_kills(d.path()), 2);
        assert_eq!(limit_hits(d.path()), 17);
        assert_eq!(peak(d.path()), Some(1234));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(oom_kills(empty.path()), 0);
        assert_eq!(limit_hits(empty.path()), 0);
    }
}
