//! Whether a private tmpfs of a kernel (working directory, HOME, `/tmp`,
//! `/dev/shm`) is full, read with `statvfs` through
//! `/proc/<pid>/root` of one of its processes: the mounts exist only in the
//! kernel's mount namespace. A full mount is what ENOSPC leaves behind.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Space left below which a mount counts as full: a write of a chunk
/// fails once less than the chunk is free, so "exactly zero" would miss
/// the usual `write(1 MiB)` loop.
const SLACK_BYTES: u64 = 4 << 20;
/// The same for inodes, in case another process freed one since.
const SLACK_INODES: u64 = 4;

// statvfs's field types are 32-bit on some targets; the casts are not
// no-ops everywhere.
#[allow(clippy::unnecessary_cast)]
/// How many of `mounts` (paths inside the kernel's view) are full, seen
/// from process `pid`; `None` if `pid` is gone or shares the harness's
/// root (a reused pid must not report the host's disks).
pub fn full_mounts(pid: i32, mounts: &[PathBuf]) -> Option<u64> {
    let root = Path::new("/proc").join(pid.to_string()).join("root");
    if std::fs::metadata(&root).ok()?.dev() == std::fs::metadata("/").ok()?.dev() {
        return None;
    }
    let mut full = 0;
    for mount in mounts {
        let path = root.join(mount.strip_prefix("/").unwrap_or(mount));
        let Ok(s) = nix::sys::statvfs::statvfs(&path) else {
            continue;
        };
        let fragment = s.fragment_size() as u64;
        if is_full(
            s.blocks() as u64 * fragment,
            s.blocks_available() as u64 * fragment,
            s.files() as u64,
            s.files_available() as u64,
        ) {
            full += 1;
        }
    }
    Some(full)
}

/// A mount of `total` bytes with `free` left, and `inodes` with
/// `free_inodes` left. Slack never exceeds a tenth of a small mount.
fn is_full(total: u64, free: u64, inodes: u64, free_inodes: u64) -> bool {
    let slack = SLACK_BYTES.min(total / 10);
    let inode_slack = SLACK_INODES.min(inodes / 10);
    (total > 0 && free <= slack) || (inodes > 0 && free_inodes <= inode_slack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_by_space_or_by_inodes() {
        const M: u64 = 1 << 20;
        assert!(is_full(64 * M, 0, 20480, 20000));
        assert!(is_full(64 * M, 1 << 19, 20480, 20000), "less than a chunk");
        assert!(!is_full(64 * M, 32 * M, 20480, 20000));
        assert!(is_full(64 * M, 60 * M, 20480, 0), "no inode left");
        assert!(!is_full(0, 0, 0, 0), "nothing to fill");
        // A tiny mount is not full at 90% free.
        assert!(!is_full(8 * M, 7 * M, 100, 90));
    }

    #[test]
    fn the_harness_root_is_not_evidence() {
        let mounts = [PathBuf::from("/tmp")];
        assert_eq!(full_mounts(std::process::id() as i32, &mounts), None);
    }
}
