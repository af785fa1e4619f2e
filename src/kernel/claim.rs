//! Directories under the kernel root (a kernel's `k…`, a zygote's `z…`)
//! are claimed by the harness that makes them: a marker `.<id>.harness`
//! beside each holds that harness's pid, written before the directory
//! exists and removed after it. A harness killed with SIGKILL removes
//! nothing; the first claim a later harness makes under the same root
//! removes the directories whose harness is gone (the cgroups of that
//! harness are reclaimed when the sandbox opens, so no kernel of it runs).

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::sandbox::{harness_alive, made_at};

/// A directory with neither marker nor jail spec is older than markers,
/// or its harness died between the two; after this long nobody uses it.
const UNMARKED_AFTER: Duration = Duration::from_secs(3600);

/// Roots this process has already swept.
static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Claims `<root>/<id>` for this process: creates the root (reachable by
/// kernel users, not listable), sweeps it once per process, writes the
/// marker. The caller creates the directory itself.
pub(super) fn claim(root: &Path, id: &str) -> std::io::Result<PathBuf> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(root)?;
    let first = SWEPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(root.to_path_buf());
    if first {
        sweep(root);
    }
    fs::write(marker(root, id), std::process::id().to_string())?;
    Ok(root.join(id))
}

/// Removes a claimed directory and its marker. std's `remove_dir_all`
/// removes a symlink planted inside, never what it points to.
pub(super) fn release(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
    if let (Some(root), Some(id)) = (dir.parent(), dir.file_name()) {
        let _ = fs::remove_file(marker(root, &id.to_string_lossy()));
    }
}

fn marker(root: &Path, id: &str) -> PathBuf {
    root.join(format!(".{id}.harness"))
}

/// Removes the directories (and markers) of harnesses that are gone.
fn sweep(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let own = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".harness"))
            .unwrap_or(&name);
        if !is_claimable(id) {
            continue;
        }
        let gone = match owner(root, id) {
            Some(pid) => pid != own && !harness_alive(pid, made_at(&marker(root, id))),
            None => unmarked_and_old(&root.join(id)),
        };
        if gone {
            release(&root.join(id));
        }
    }
}

/// Names retrace gives kernel and zygote directories.
fn is_claimable(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('k' | 'z'))
        && name.len() > 1
        && chars.all(|c| c.is_ascii_hexdigit())
}

/// The harness that claimed `id`: its marker, or (before markers) the
/// `harness_pid` of a confined kernel's jail spec.
fn owner(root: &Path, id: &str) -> Option<u32> {
    if let Ok(text) = fs::read_to_string(marker(root, id)) {
        return text.trim().parse().ok();
    }
    let spec = fs::read(root.join(id).join("jail.json")).ok()?;
    let spec: serde_json::Value = serde_json::from_slice(&spec).ok()?;
    spec.get("harness_pid")?.as_u64()?.try_into().ok()
}

fn unmarked_and_old(dir: &Path) -> bool {
    fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > UNMARKED_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has: above the kernel's maximum.
    const DEAD: u32 = 4_194_305;

    fn dir_with(root: &Path, id: &str, owner: Option<u32>) {
        fs::create_dir_all(root.join(id).join("rt")).unwrap();
        if let Some(pid) = owner {
            fs::write(marker(root, id), pid.to_string()).unwrap();
        }
    }

    #[test]
    fn a_sweep_removes_only_what_dead_harnesses_claimed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        dir_with(root, "k0dead", Some(DEAD));
        dir_with(root, "z0dead", Some(DEAD));
        dir_with(root, "k01", Some(std::process::id()));
        // The parent of this test lives and started before its marker.
        dir_with(root, "k02", Some(nix::unistd::getppid().as_raw() as u32));
        // Before markers: the jail spec names the harness.
        dir_with(root, "k03", None);
        fs::write(
            root.join("k03/jail.json"),
            format!("{{\"harness_pid\":{DEAD}}}"),
        )
        .unwrap();
        // Unmarked and fresh: a harness may be about to claim it.
        dir_with(root, "k04", None);
        // Not retrace's naming: never touched.
        dir_with(root, "other", Some(DEAD));
        fs::write(marker(root, "k05"), DEAD.to_string()).unwrap();

        sweep(root);

        let mut left: Vec<String> = fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".k01.harness",
                ".k02.harness",
                ".other.harness",
                "k01",
                "k02",
                "k04",
                "other"
            ]
        );
    }

    #[test]
    fn a_claim_is_marked_and_released_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("kernels");
        let dir = claim(&root, "k0abc").unwrap();
        fs::create_dir(&dir).unwrap();
        assert_eq!(owner(&root, "k0abc"), Some(std::process::id()));
        release(&dir);
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }
}
