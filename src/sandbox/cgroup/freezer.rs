//! Freezing a group so its processes can be killed without racing forks:
//! the v1 `freezer` controller, and v2's `cgroup.freeze` for kernels that
//! lack `cgroup.kill`.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{fs, unified};

/// v1: `THAWED`, `FREEZING` or `FROZEN` (reads the effective state).
pub(super) const V1_STATE: &str = "freezer.state";
/// v2: `1` requests freezing; `cgroup.events` `frozen 1` confirms it.
pub(super) const V2_FREEZE: &str = "cgroup.freeze";

const POLL: Duration = Duration::from_millis(1);

/// Requests FROZEN and waits for it, re-writing while the state reads
/// FREEZING (a freeze can stall there; runc re-writes too). Returns whether
/// the group froze within `budget`; killing proceeds either way.
pub(super) fn freeze_v1(dir: &Path, budget: Duration) -> bool {
    let state = dir.join(V1_STATE);
    let deadline = Instant::now() + budget;
    loop {
        if fs::write(&state, "FROZEN").is_err() {
            return false;
        }
        match fs::read(&state) {
            Ok(s) if s.trim() == "FROZEN" => return true,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => return false,
        }
    }
}

/// Thaws `dir` and every group below it: a sub-group frozen on its own stays
/// frozen when its parent thaws, and its killed tasks could not die.
pub(super) fn thaw_v1(dir: &Path) {
    for d in fs::bottom_up(dir) {
        let _ = fs::write(&d.join(V1_STATE), "THAWED");
    }
}

pub(super) fn freeze_v2(dir: &Path, budget: Duration) -> bool {
    if fs::write(&dir.join(V2_FREEZE), "1").is_err() {
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

pub(super) fn thaw_v2(dir: &Path) {
    for d in fs::bottom_up(dir) {
        let _ = fs::write(&d.join(V2_FREEZE), "0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_freeze_and_thaw_tree() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(d.path().join(V1_STATE), "THAWED\n").unwrap();
        std::fs::write(sub.join(V1_STATE), "FROZEN\n").unwrap();
        assert!(freeze_v1(d.path(), Duration::from_millis(10)));
        thaw_v1(d.path());
        for dir in [d.path(), sub.as_path()] {
            assert_eq!(
                std::fs::read_to_string(dir.join(V1_STATE)).unwrap(),
                "THAWED"
            );
        }
    }

    #[test]
    fn v1_freeze_without_freezer_fails() {
        let d = tempfile::tempdir().unwrap();
        assert!(!freeze_v1(d.path(), Duration::from_millis(10)));
    }

    #[test]
    fn v2_freeze_waits_for_frozen_event() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V2_FREEZE), "0\n").unwrap();
        std::fs::write(d.path().join(unified::EVENTS), "populated 1\nfrozen 0\n").unwrap();
        // The fixture never reports frozen: bounded wait, then false.
        assert!(!freeze_v2(d.path(), Duration::from_millis(5)));
        std::fs::write(d.path().join(unified::EVENTS), "populated 1\nfrozen 1\n").unwrap();
        assert!(freeze_v2(d.path(), Duration::from_millis(5)));
        thaw_v2(d.path());
        assert_eq!(
            std::fs::read_to_string(d.path().join(V2_FREEZE)).unwrap(),
            "0"
        );
    }
}
