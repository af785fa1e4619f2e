//! The last step of a build: its private temporary directory takes the final
//! name in one rename, so the final name only ever holds a complete build.

use std::fs::{self, File};
use std::path::Path;

use super::PyenvError;
use crate::util::IoContext;

/// Renames `tmp` to `dest` (which must not exist) and makes the rename
/// durable. The caller has written the marker into `tmp` first.
pub(crate) fn publish(tmp: &Path, dest: &Path) -> Result<(), PyenvError> {
    fs::rename(tmp, dest)
        .io_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
    // Best effort: the directory entry, not only the data, must survive a
    // crash for the build to count as done.
    if let Some(parent) = dest.parent() {
        let _ = File::open(parent).and_then(|d| d.sync_all());
    }
    Ok(())
}
