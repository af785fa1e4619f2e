//! The exclusive file lock that keeps concurrent builders of one directory
//! (threads or processes) apart: the first builds, the others wait and then
//! find the result complete.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use super::PyenvError;
use crate::util::IoContext;

/// Locks `path` (created if missing), calling `on_wait` first if another
/// holder makes this wait. Held until the returned file is dropped.
pub(crate) fn acquire(path: &Path, on_wait: impl FnOnce()) -> Result<File, PyenvError> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .at("opening", path)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            on_wait();
            lock.lock().at("locking", path)?;
        }
        Err(TryLockError::Error(e)) => Err(e).at("locking", path)?,
    }
    Ok(lock)
}
