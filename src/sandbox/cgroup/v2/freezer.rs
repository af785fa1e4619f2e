//! v2's `cgroup.freeze`, for kernels that lack `cgroup.kill` (before
//! Linux 5.14): frozen processes cannot fork while they are killed.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::sandbox::cgroup::{fs, unified};

/// `1` requests freezing; `cgroup.events` `frozen 1` confirms it.
pub(crate) const FREEZE: &str = "cgroup.freeze";

const POLL: Duration = Duration::from_millis(1);

/// Requests freezing and waits up to `budget` for the kernel to confirm it.
pub(crate) fn freeze(dir: &Path, budget: Duration) -> bool {
    if fs::write(&dir.join(FREEZE), "1").is_err() {
        return false;
    }
    let events = dir.join(unified::EVENTS);
    let deadline = Instant::now() + budget;
    loop {
        if fs::read_keyed(&events, "frozen") == 1 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Thaws `dir` and every group below it.
pub(crate) fn thaw(dir: &Path) {
    for d in fs::bottom_up(dir) {
        let _ = fs::write(&d.join(FREEZE), "0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_waits_for_frozen_event() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FREEZE), "0\n").unwrap();
        std::fs::write(d.path().join(unified::EVENTS), "populated 1\nfrozen 0\n").unwrap();
        // The fixture never reports frozen: bounded wait, then false.
        assert!(!freeze(d.path(), Duration::from_millis(5)));
        std::fs::write(d.path().join(unified::EVENTS), "populated 1\nfrozen 1\n").unwrap();
        assert!(freeze(d.path(), Duration::from_millis(5)));
        thaw(d.path());
        assert_eq!(std::fs::read_to_string(d.path().join(FREEZE)).unwrap(), "0");
    }
}
