//! The exclusive file lock that keeps concurrent builders of one directory
//! (threads or processes) apart: the first builds, the others wait and then
//! find the result complete.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use super::PyenvError;

/// Locks `path` (created if missing), calling `on_wait` first if another
/// holder makes this wait. Held until the returned file is dropped.
pub(crate) fn acquire(path: &Path, on_wait: impl FnOnce()) -> Result<File, PyenvError> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| PyenvError::io_at("opening", path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            on_wait();
            lock.lock()
                .map_err(|e| PyenvError::io_at("locking", path, e))?;
        }
        Err(TryLockError::Error(e)) => return Err(PyenvError::io_at("locking", path, e)),
    }
    Ok(lock)
}
