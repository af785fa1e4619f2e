//! File operations of the root harness in directories a kernel can write
//! to (its runtime directory; its whole layout when it runs unconfined):
//! a symlink planted there is never followed out of the directory, a file
//! is created anew rather than opened if something is already there, and
//! only regular files are read.
//!
//! `O_NOFOLLOW` guards the last path component; the callers build paths
//! under directories the harness itself created.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path` with `mode`; fails if anything (a symlink included)
/// already has that name.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens a regular file for reading; a symlink, a FIFO, a socket or a
/// device is refused (`O_NONBLOCK` so a FIFO cannot block the open).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Copies the regular file `from` to the new file `to`; returns the new
/// file, so its owner can be set through the descriptor.
pub fn copy(from: &Path, to: &Path, mode: u32) -> io::Result<File> {
    let mut source = open_regular(from)?;
    let mut dest = create_new(to, mode)?;
    io::copy(&mut source, &mut dest)?;
    Ok(dest)
}

/// Removes whatever has this name, never what a symlink points to: a link,
/// file, socket or FIFO is unlinked, a directory removed with its contents
/// (std's `remove_dir_all` does not follow links either). A missing entry is
/// not an error.
pub fn remove_entry(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// Empties a directory in place (its owner and mode stay) without following
/// any link inside it.
pub fn empty_dir(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        remove_entry(&entry?.path())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn planted_links_are_neither_followed_nor_removed_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "host data").unwrap();
        let inside = dir.path().join("inside");
        fs::create_dir(&inside).unwrap();

        // create_new refuses a name held by a link; open_regular refuses to read through it.
        let link = inside.join("kernel.json");
        symlink(&secret, &link).unwrap();
        assert!(create_new(&link, 0o600).is_err());
        assert!(open_regular(&link).is_err());
        assert!(copy(&link, &dir.path().join("copied"), 0o644).is_err());
        assert!(!dir.path().join("copied").exists());

        // A link to a directory, and a directory holding links: removal
        // takes the links, never what they point to.
        symlink(outside.path(), inside.join("dir-link")).unwrap();
        fs::create_dir(inside.join("sub")).unwrap();
        symlink(&secret, inside.join("sub").join("file-link")).unwrap();
        symlink(outside.path(), inside.join("sub").join("dir-link")).unwrap();
        empty_dir(&inside).unwrap();
        assert_eq!(fs::read_dir(&inside).unwrap().count(), 0);
        assert_eq!(fs::read_to_string(&secret).unwrap(), "host data");

        symlink(outside.path(), dir.path().join("top-link")).unwrap();
        remove_entry(&dir.path().join("top-link")).unwrap();
        remove_entry(&dir.path().join("missing")).unwrap();
        fs::remove_dir_all(dir.path()).unwrap();
        assert_eq!(fs::read_to_string(&secret).unwrap(), "host data");
    }

    #[test]
    fn regular_files_copy_and_fifos_do_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("a");
        fs::write(&from, "data").unwrap();
        copy(&from, &dir.path().join("b"), 0o644).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("b")).unwrap(), "data");
        assert!(
            copy(&from, &dir.path().join("b"), 0o644).is_err(),
            "never overwritten"
        );
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(open_regular(&fifo).is_err());
    }
}
