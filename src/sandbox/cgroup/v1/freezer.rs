//! The v1 `freezer` controller: frozen processes cannot fork, so a group
//! can be killed without racing forks.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::sandbox::cgroup::fs;

/// `THAWED`, `FREEZING` or `FROZEN` (reads the effective state).
pub(crate) const STATE: &str = "freezer.state";

const POLL: Duration = Duration::from_millis(1);

/// Requests FROZEN and waits for it, re-writing while the state reads
/// FREEZING (a freeze can stall there; runc re-writes too). Returns whether
/// the group froze within `budget`; killing proceeds either way.
pub(crate) fn freeze(dir: &Path, budget: Duration) -> bool {
    let state = dir.join(STATE);
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
pub(crate) fn thaw(dir: &Path) {
    for d in fs::bottom_up(dir) {
        let _ = fs::write(&d.join(STATE), "THAWED");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_and_thaw_tree() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(d.path().join(STATE), "THAWED\n").unwrap();
        std::fs::write(sub.join(STATE), "FROZEN\n").unwrap();
        assert!(freeze(d.path(), Duration::from_millis(10)));
        thaw(d.path());
        for dir in [d.path(), sub.as_path()] {
            assert_eq!(std::fs::read_to_string(dir.join(STATE)).unwrap(), "THAWED");
        }
    }

    #[test]
    fn freeze_without_freezer_fails() {
        let d = tempfile::tempdir().unwrap();
        assert!(!freeze(d.path(), Duration::from_millis(10)));
    }
}
