//! Core files of the unified (v2) hierarchy, used on v2 hosts and in the
//! `unified` tree of hybrid hosts: `cgroup.kill`, `cgroup.events`,
//! `cgroup.procs` (also present in every v1 hierarchy) and controller
//! delegation through `cgroup.subtree_control`.

use std::io;
use std::path::Path;

use super::{fs, CgroupError};

/// Member processes (v1 and v2); zombies are not listed.
pub(super) const PROCS: &str = "cgroup.procs";
/// Writing `1` SIGKILLs the whole subtree, racing forks included (Linux 5.14+).
pub(super) const KILL: &str = "cgroup.kill";
/// `populated 0|1` and `frozen 0|1`.
pub(super) const EVENTS: &str = "cgroup.events";
/// Controllers the children of a group get.
pub(super) const SUBTREE_CONTROL: &str = "cgroup.subtree_control";
/// Controllers a group may hand on (those its parent enabled).
pub(super) const CONTROLLERS: &str = "cgroup.controllers";

/// Controllers every kernel group needs on v2.
pub(super) const NEEDED: [&str; 3] = ["memory", "pids", "cpu"];

pub(super) fn kill(dir: &Path) -> io::Result<()> {
    fs::write(&dir.join(KILL), "1")
}

pub(super) fn has_kill(dir: &Path) -> bool {
    dir.join(KILL).exists()
}

/// `None` when the file is absent (v1 hierarchies).
pub(super) fn populated(dir: &Path) -> Option<bool> {
    let text = fs::read(&dir.join(EVENTS)).ok()?;
    fs::keyed(&text, "populated").map(|v| v != 0)
}

/// Names in a controller list; `+memory` as written to a fixture counts too.
fn names(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|n| n.trim_start_matches('+').to_string())
        .collect()
}

pub(super) fn controllers(dir: &Path) -> Vec<String> {
    names(&fs::read(&dir.join(CONTROLLERS)).unwrap_or_default())
}

/// Enables `wanted` for the children of `dir` and checks that they are on.
/// Fails with EBUSY if `dir` has processes of its own ("no internal
/// processes" rule); the error says so.
pub(super) fn enable_controllers(dir: &Path, wanted: &[&str]) -> Result<(), CgroupError> {
    let file = dir.join(SUBTREE_CONTROL);
    let enabled = |f: &Path| names(&fs::read(f).unwrap_or_default());
    let before = enabled(&file);
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !before.iter().any(|e| e == w))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let request = missing
        .iter()
        .map(|m| format!("+{m}"))
        .collect::<Vec<_>>()
        .join(" ");
    if let Err(cause) = fs::write(&file, &request) {
        let hint = if cause.raw_os_error() == Some(libc::EBUSY) {
            " (the group has processes of its own; move them into a leaf group first)".to_string()
        } else {
            format!(" (available: {})", controllers(dir).join(" "))
        };
        return Err(CgroupError::Delegate {
            file,
            request,
            cause,
            hint,
        });
    }
    let after = enabled(&file);
    let missing: Vec<String> = wanted
        .iter()
        .filter(|w| !after.iter().any(|e| e == *w))
        .map(|w| w.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(CgroupError::NotDelegated { file, missing });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enables_only_missing_controllers_and_checks() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join(SUBTREE_CONTROL);
        std::fs::write(&file, "").unwrap();
        enable_controllers(d.path(), &NEEDED).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "+memory +pids +cpu"
        );
        // Kernel spelling, already enabled: nothing is written.
        std::fs::write(&file, "cpu io memory pids\n").unwrap();
        enable_controllers(d.path(), &NEEDED).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "cpu io memory pids\n"
        );
    }

    #[test]
    fn enabling_that_does_not_stick_fails() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/null", d.path().join(SUBTREE_CONTROL)).unwrap();
        let err = enable_controllers(d.path(), &NEEDED).unwrap_err();
        assert!(err.to_string().contains("memory pids cpu"), "{err}");
    }

    #[test]
    fn populated_and_kill_files() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(populated(d.path()), None);
        assert!(!has_kill(d.path()));
        assert!(kill(d.path()).is_err());
        std::fs::write(d.path().join(EVENTS), "populated 1\nfrozen 0\n").unwrap();
        std::fs::write(d.path().join(KILL), "").unwrap();
        assert_eq!(populated(d.path()), Some(true));
        assert!(has_kill(d.path()));
        kill(d.path()).unwrap();
    }
}
