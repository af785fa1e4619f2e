//! The memory controller: hard limit, no swap, group OOM kill, OOM counters,
//! limit hits and peak usage, in its v1 and v2 spellings.

use std::io;
use std::path::Path;

use super::fs::{self, cgroup_err};
use crate::sandbox::SandboxError;

/// v1 hard limit.
pub(super) const V1_LIMIT: &str = "memory.limit_in_bytes";
/// v1 memory+swap limit: only present with swap accounting (`swapaccount=1`).
pub(super) const V1_MEMSW: &str = "memory.memsw.limit_in_bytes";
/// v1 OOM switch and counter (`oom_kill_disable`, `under_oom`, `oom_kill`).
pub(super) const V1_OOM_CONTROL: &str = "memory.oom_control";
pub(super) const V1_PEAK: &str = "memory.max_usage_in_bytes";
/// v1 count of charges that hit the limit (each one reclaims or OOM-kills).
pub(super) const V1_FAILCNT: &str = "memory.failcnt";

pub(super) const V2_MAX: &str = "memory.max";
/// v2 swap limit (swap only, not memory+swap like v1 memsw).
pub(super) const V2_SWAP_MAX: &str = "memory.swap.max";
pub(super) const V2_OOM_GROUP: &str = "memory.oom.group";
pub(super) const V2_EVENTS: &str = "memory.events";
pub(super) const V2_PEAK: &str = "memory.peak";

const SWAP_FIX: &str = "swap is on but swap accounting is off, so the group could swap \
                        past its memory limit; boot with swapaccount=1 or turn swap off";

/// Writes the v1 limit and an equal memory+swap limit (no swap at all), and
/// keeps the OOM killer enabled.
pub(super) fn apply_v1(dir: &Path, bytes: u64, host_has_swap: bool) -> Result<(), SandboxError> {
    let limit = dir.join(V1_LIMIT);
    let memsw = dir.join(V1_MEMSW);
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
        return Err(cgroup_err(&memsw, format!("missing: {SWAP_FIX}")));
    } else {
        fs::write_checked(&limit, &value, &value)?;
    }
    // With the killer disabled, v1 tasks at the limit hang in D state. New
    // groups inherit the flag from their parent, so check and repair it.
    let oom = dir.join(V1_OOM_CONTROL);
    let disabled = || {
        fs::read(&oom)
            .ok()
            .and_then(|t| fs::keyed(&t, "oom_kill_disable"))
    };
    if disabled() != Some(0) {
        fs::write_file(&oom, "0")?;
        if disabled() != Some(0) {
            return Err(cgroup_err(&oom, "the OOM killer is still disabled"));
        }
    }
    Ok(())
}

/// Writes the v2 limit, no swap, and whole-group OOM kill (otherwise one
/// victim dies and the rest of the kernel limps on).
pub(super) fn apply_v2(dir: &Path, bytes: u64, host_has_swap: bool) -> Result<(), SandboxError> {
    let value = bytes.to_string();
    fs::write_checked(&dir.join(V2_MAX), &value, &value)?;
    let swap = dir.join(V2_SWAP_MAX);
    match fs::write(&swap, "0") {
        Ok(()) => fs::check(&swap, "0")?,
        // Without swap there is nothing to limit.
        Err(e) if e.kind() == io::ErrorKind::NotFound && !host_has_swap => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(cgroup_err(&swap, format!("missing: {SWAP_FIX}")))
        }
        Err(e) => return Err(cgroup_err(&swap, format!("writing \"0\": {e}"))),
    }
    fs::write_checked(&dir.join(V2_OOM_GROUP), "1", "1")
}

pub(super) fn limit_v1(dir: &Path) -> u64 {
    fs::read_limit(&dir.join(V1_LIMIT)).unwrap_or(0)
}

pub(super) fn limit_v2(dir: &Path) -> u64 {
    fs::read_limit(&dir.join(V2_MAX)).unwrap_or(0)
}

pub(super) fn oom_kills_v1(dir: &Path) -> u64 {
    fs::read_keyed(&dir.join(V1_OOM_CONTROL), "oom_kill")
}

/// `oom_kill` counts every process killed, a group kill included, while
/// `oom_group_kill` counts group kills: adding them would count a group kill
/// twice, and the max still shows a group kill whose members were already exiting.
pub(super) fn oom_kills_v2(dir: &Path) -> u64 {
    let text = fs::read(&dir.join(V2_EVENTS)).unwrap_or_default();
    let kills = fs::keyed(&text, "oom_kill").unwrap_or(0);
    let group = fs::keyed(&text, "oom_group_kill").unwrap_or(0);
    kills.max(group)
}

/// Times the group's usage reached its limit: evidence that an allocation
/// could have failed because of it (page cache reclaim counts too).
pub(super) fn limit_hits_v1(dir: &Path) -> u64 {
    fs::read_u64(&dir.join(V1_FAILCNT)).unwrap_or(0)
}

/// The `max` line of `memory.events`: the v2 spelling of `failcnt`.
pub(super) fn limit_hits_v2(dir: &Path) -> u64 {
    fs::read_keyed(&dir.join(V2_EVENTS), "max")
}

pub(super) fn peak_v1(dir: &Path) -> Option<u64> {
    fs::read_u64(&dir.join(V1_PEAK))
}

/// `memory.peak` exists from Linux 5.19.
pub(super) fn peak_v2(dir: &Path) -> Option<u64> {
    fs::read_u64(&dir.join(V2_PEAK))
}

/// Whether swap can be limited in the group at `dir`.
pub(super) fn swap_accounting_v1(dir: &Path) -> bool {
    dir.join(V1_MEMSW).exists()
}

pub(super) fn swap_accounting_v2(dir: &Path) -> bool {
    dir.join(V2_SWAP_MAX).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, files: &[(&str, &str)]) {
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    fn content(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    const UNLIMITED_V1: &str = "9223372036854771712\n";
    const OOM_ENABLED: &str = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";

    #[test]
    fn v1_writes_limit_memsw_and_keeps_killer() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (V1_LIMIT, UNLIMITED_V1),
                (V1_MEMSW, UNLIMITED_V1),
                (V1_OOM_CONTROL, OOM_ENABLED),
            ],
        );
        apply_v1(d.path(), 64 << 20, false).unwrap();
        assert_eq!(content(d.path(), V1_LIMIT), "67108864");
        assert_eq!(content(d.path(), V1_MEMSW), "67108864");
        assert_eq!(limit_v1(d.path()), 64 << 20);
    }

    #[test]
    fn v1_raises_memsw_before_limit() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (V1_LIMIT, "1048576"),
                (V1_MEMSW, "1048576"),
                (V1_OOM_CONTROL, OOM_ENABLED),
            ],
        );
        apply_v1(d.path(), 2 << 20, false).unwrap();
        assert_eq!(content(d.path(), V1_MEMSW), "2097152");
        assert_eq!(content(d.path(), V1_LIMIT), "2097152");
    }

    #[test]
    fn v1_missing_memsw_is_fatal_only_with_swap() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[(V1_LIMIT, UNLIMITED_V1), (V1_OOM_CONTROL, OOM_ENABLED)],
        );
        apply_v1(d.path(), 64 << 20, false).unwrap();
        let err = apply_v1(d.path(), 64 << 20, true).unwrap_err();
        assert!(err.to_string().contains(V1_MEMSW), "{err}");
        assert!(err.to_string().contains("swapaccount=1"), "{err}");
    }

    #[test]
    fn v1_disabled_oom_killer_is_repaired_or_refused() {
        let d = tempfile::tempdir().unwrap();
        let disabled = "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n";
        files(
            d.path(),
            &[(V1_LIMIT, UNLIMITED_V1), (V1_OOM_CONTROL, disabled)],
        );
        // A real kernel would now read "oom_kill_disable 0"; the fixture
        // reads back "0", which is not the expected format.
        let err = apply_v1(d.path(), 64 << 20, false).unwrap_err();
        assert!(err.to_string().contains("still disabled"), "{err}");
        assert_eq!(content(d.path(), V1_OOM_CONTROL), "0");
    }

    #[test]
    fn v2_writes_max_no_swap_and_group_kill() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[(V2_MAX, "max"), (V2_SWAP_MAX, "max"), (V2_OOM_GROUP, "0")],
        );
        apply_v2(d.path(), 64 << 20, true).unwrap();
        assert_eq!(content(d.path(), V2_MAX), "67108864");
        assert_eq!(content(d.path(), V2_SWAP_MAX), "0");
        assert_eq!(content(d.path(), V2_OOM_GROUP), "1");
        assert_eq!(limit_v2(d.path()), 64 << 20);
    }

    #[test]
    fn v2_missing_swap_max_is_fatal_only_with_swap() {
        let d = tempfile::tempdir().unwrap();
        files(d.path(), &[(V2_MAX, "max"), (V2_OOM_GROUP, "0")]);
        apply_v2(d.path(), 64 << 20, false).unwrap();
        let err = apply_v2(d.path(), 64 << 20, true).unwrap_err();
        assert!(err.to_string().contains(V2_SWAP_MAX), "{err}");
    }

    #[test]
    fn v2_limit_that_does_not_stick_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        files(d.path(), &[(V2_SWAP_MAX, "max"), (V2_OOM_GROUP, "0")]);
        std::os::unix::fs::symlink("/dev/null", d.path().join(V2_MAX)).unwrap();
        let err = apply_v2(d.path(), 64 << 20, false).unwrap_err();
        match err {
            SandboxError::Cgroup { path, .. } => assert_eq!(path, d.path().join(V2_MAX)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn oom_counters_v1_and_v2() {
        let d = tempfile::tempdir().unwrap();
        files(
            d.path(),
            &[
                (
                    V1_OOM_CONTROL,
                    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
                ),
                (
                    V2_EVENTS,
                    "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 1\n",
                ),
                (V1_PEAK, "1234\n"),
                (V1_FAILCNT, "17\n"),
            ],
        );
        assert_eq!(oom_kills_v1(d.path()), 2);
        assert_eq!(oom_kills_v2(d.path()), 1);
        assert_eq!(limit_hits_v1(d.path()), 17);
        assert_eq!(limit_hits_v2(d.path()), 3);
        assert_eq!(peak_v1(d.path()), Some(1234));
        assert_eq!(peak_v2(d.path()), None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(oom_kills_v1(empty.path()), 0);
        assert_eq!(oom_kills_v2(empty.path()), 0);
        assert_eq!(limit_hits_v1(empty.path()), 0);
        assert_eq!(limit_hits_v2(empty.path()), 0);
    }
}
