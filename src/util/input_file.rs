//! An input file a dataset brings, opened the one way every reader uses.
//! A dataset is untrusted input (a benchmark downloaded from the internet),
//! so its files are opened
//!
//! - only if they are regular files: the type is read from an `O_PATH`
//!   handle before anything opens the file for reading, so a FIFO never
//!   blocks and no device is ever opened (a link to `/dev/zero`, a
//!   watchdog);
//! - only up to a size bound, checked before the read and again while
//!   reading (a file that grows is cut off with an error, never read
//!   without end).
//!
//! Two kinds:
//!
//! - **suite files** ([`open_suite_file`]: a JSONL file of tasks or
//!   labels), which the user named on the command line or which lie in the
//!   folder they named: links are followed, the bound is
//!   [`MAX_SUITE_FILE_BYTES`];
//! - **task files** ([`open_task_file`]: the files a task copies into its
//!   kernel), which the dataset names: no symbolic link is followed in any
//!   component of the path (the loader hands over canonical paths, so a
//!   link found here was planted after the load), the bound is
//!   `--max-task-file-bytes`, and for a confined kernel the file is opened
//!   with the kernel user's file-system ids ([`ReadAs::User`]): a file that
//!   user could not read is refused, so the harness's root never carries a
//!   private host file into a kernel. Only the file's own permissions
//!   count, not its folders' (datasets may live under a private home, as
//!   the built-in ones do under `$RETRACE_HOME`). The loader's check, the
//!   resume hash, the copy into a local kernel and the upload to a
//!   gateway's kernel all open task files here.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

/// The largest suite file (a dataset's or labels JSONL) read: 256 MiB,
/// sixty times GSM8K's whole training set; the loader holds one line at a
/// time, so this bounds the time a load takes more than its memory.
pub const MAX_SUITE_FILE_BYTES: u64 = 256 << 20;

/// The default `--max-task-file-bytes`: 64 MiB, a quarter of a kernel's
/// default working directory (`--disk 256M`), far above the tables of the
/// public benchmarks (DABench's largest is under 10 MiB).
pub const DEFAULT_MAX_TASK_FILE_BYTES: u64 = 64 << 20;

/// How the two bounds are named in messages.
const TASK_FILE_BOUND: &str = "--max-task-file-bytes";
const SUITE_FILE_BOUND: &str = "the bound on suite files";

/// Whose rights a task file is opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAs {
    /// The harness's own (an unconfined kernel runs as the harness; a
    /// gateway's kernel gets the bytes the harness sends).
    Harness,
    /// A confined kernel's user: the open happens on a short-lived thread
    /// whose file-system ids are the kernel's and which has no
    /// supplementary groups, as the kernel has none.
    User { uid: u32, gid: u32 },
}

/// Why an input file was refused. The messages leave out the file's path:
/// every caller names it (and the dataset line) around them.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    #[error("`{}` is a symbolic link (task files are opened without following links)", at.display())]
    Link { at: PathBuf },
    #[error("is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    #[error("is {size} bytes, over the bound of {max} bytes ({bound})")]
    TooLarge {
        size: u64,
        max: u64,
        bound: &'static str,
    },
    #[error("grew past the bound of {max} bytes while it was read")]
    Grew { max: u64 },
    #[error(
        "the kernel's user (uid {uid}) may not read it: {cause}; make the file readable \
         by all (chmod a+r) if the kernel should have it"
    )]
    NotForKernel { uid: u32, cause: io::Error },
    #[error("is not an absolute path")]
    Relative,
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl InputFileError {
    fn io(cause: nix::errno::Errno) -> Self {
        InputFileError::Io(cause.into())
    }
}

/// An open input file: its size when opened, and a reader that fails once
/// more than the bound has been read.
#[derive(Debug)]
pub struct InputFile {
    file: File,
    pub size: u64,
    left: u64,
    max: u64,
}

impl InputFile {
    fn new(file: File, size: u64, max: u64) -> Self {
        InputFile {
            file,
            size,
            left: max,
            max,
        }
    }
}

impl Read for InputFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the bound is asked for, so growth is seen.
        let want = buf
            .len()
            .min(usize::try_from(self.left + 1).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(io::Error::other(InputFileError::Grew { max: self.max }));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Opens the task file at the absolute `path` for reading (see the module's
/// doc for what is refused).
pub fn open_task_file(
    path: &Path,
    max_bytes: u64,
    read_as: ReadAs,
) -> Result<InputFile, InputFileError> {
    let handle = path_handle(path)?;
    let size = regular_size(&handle, max_bytes, TASK_FILE_BOUND)?;
    let file = match read_as {
        ReadAs::Harness => reopen(&handle)?,
        ReadAs::User { uid, gid } => {
            as_user(uid, gid, || reopen(&handle)).map_err(|e| match e {
                InputFileError::Io(cause) if cause.kind() == io::ErrorKind::PermissionDenied => {
                    InputFileError::NotForKernel { uid, cause }
                }
                other => other,
            })?
        }
    };
    Ok(InputFile::new(file, size, max_bytes))
}

/// Opens a suite file (links followed) for reading, if it is a regular
/// file of at most [`MAX_SUITE_FILE_BYTES`].
pub fn open_suite_file(path: &Path) -> Result<InputFile, InputFileError> {
    let handle = nix::fcntl::open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(InputFileError::io)?;
    let size = regular_size(&handle, MAX_SUITE_FILE_BYTES, SUITE_FILE_BOUND)?;
    Ok(InputFile::new(reopen(&handle)?, size, MAX_SUITE_FILE_BYTES))
}

/// The size of the regular file behind `handle`, if within `max_bytes`.
fn regular_size(
    handle: &OwnedFd,
    max_bytes: u64,
    bound: &'static str,
) -> Result<u64, InputFileError> {
    let meta = File::from(handle.try_clone()?).metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(InputFileError::NotRegular {
            kind: kind_name(&kind),
        });
    }
    if meta.len() > max_bytes {
        return Err(InputFileError::TooLarge {
            size: meta.len(),
            max: max_bytes,
            bound,
        });
    }
    Ok(meta.len())
}

/// An `O_PATH` handle on `path`, walked one component at a time with
/// `O_NOFOLLOW`: a link anywhere on the way is refused and named.
fn path_handle(path: &Path) -> Result<OwnedFd, InputFileError> {
    if !path.is_absolute() {
        return Err(InputFileError::Relative);
    }
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = PathBuf::from("/");
    let mut dir = nix::fcntl::open("/", flags | OFlag::O_DIRECTORY, Mode::empty())
        .map_err(InputFileError::io)?;
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::RootDir | Component::CurDir => None,
            Component::ParentDir | Component::Prefix(_) => Some(Err(())),
        })
        .collect::<Result<_, ()>>()
        .map_err(|()| InputFileError::Relative)?;
    for (i, name) in names.iter().enumerate() {
        at.push(name);
        let next = openat(&dir, *name, flags, Mode::empty()).map_err(InputFileError::io)?;
        let kind = File::from(next.try_clone()?).metadata()?.file_type();
        if kind.is_symlink() {
            return Err(InputFileError::Link { at });
        }
        if i + 1 < names.len() && !kind.is_dir() {
            return Err(InputFileError::Io(io::Error::from_raw_os_error(
                libc::ENOTDIR,
            )));
        }
        dir = next;
    }
    Ok(dir)
}

/// The file behind an `O_PATH` handle, opened for reading through
/// `/proc/self/fd`: the permission check is the file's own, with the
/// calling thread's file-system ids (the folders on its path were passed
/// when the handle was made).
fn reopen(handle: &OwnedFd) -> Result<File, InputFileError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))?;
    // The handle was a regular file; so is what it reopened.
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(InputFileError::NotRegular {
            kind: kind_name(&kind),
        });
    }
    Ok(file)
}

/// Runs `open` on a thread of its own with file-system ids `uid`/`gid` and
/// no supplementary groups. Linux keeps these per thread (the raw
/// `setgroups` syscall too; libc's wrapper would change every thread), and
/// the thread ends with the call, so no other work ever runs with them.
/// The one process-wide effect, the kernel clearing the process's
/// "dumpable" flag on an id change, is undone.
fn as_user(
    uid: u32,
    gid: u32,
    open: impl FnOnce() -> Result<File, InputFileError> + Send,
) -> Result<File, InputFileError> {
    let dumpable = nix::sys::prctl::get_dumpable().unwrap_or(false);
    let opened = std::thread::scope(|scope| {
        scope
            .spawn(move || {
                drop_groups()?;
                let (uid, gid) = (
                    nix::unistd::Uid::from_raw(uid),
                    nix::unistd::Gid::from_raw(gid),
                );
                nix::unistd::setfsgid(gid);
                nix::unistd::setfsuid(uid);
                // Each call returns the ids in force before it: a second
                // call says whether the first took.
                if nix::unistd::setfsgid(gid) != gid || nix::unistd::setfsuid(uid) != uid {
                    return Err(InputFileError::Io(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "cannot take the kernel user's file-system ids (is the harness root?)",
                    )));
                }
                open()
            })
            .join()
            .unwrap_or_else(|_| {
                Err(InputFileError::Io(io::Error::other(
                    "the opening thread panicked",
                )))
            })
    });
    if dumpable {
        let _ = nix::sys::prctl::set_dumpable(true);
    }
    opened
}

/// Leaves this thread without supplementary groups.
// The raw syscall is the point: it changes the calling thread only.
#[allow(unsafe_code)]
fn drop_groups() -> Result<(), InputFileError> {
    // SAFETY: setgroups with a count of 0 reads no memory through the
    // null pointer; it only changes this thread's credentials.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) };
    if rc != 0 {
        return Err(InputFileError::Io(io::Error::last_os_error()));
    }
    Ok(())
}

/// What a file that is not regular is, for messages.
pub fn kind_name(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn read_all(path: &Path, max: u64, read_as: ReadAs) -> Result<Vec<u8>, InputFileError> {
        let mut file = open_task_file(path, max, read_as)?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn regular_files_within_the_bound_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("a.csv");
        fs::write(&path, "x\n1\n").unwrap();
        assert_eq!(read_all(&path, 4, ReadAs::Harness).unwrap(), b"x\n1\n");
        let err = read_all(&path, 3, ReadAs::Harness).unwrap_err();
        assert!(
            matches!(
                err,
                InputFileError::TooLarge {
                    size: 4,
                    max: 3,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn links_anywhere_on_the_path_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir(root.join("real")).unwrap();
        fs::write(root.join("real/a.csv"), "x").unwrap();
        symlink(root.join("real"), root.join("linked")).unwrap();
        symlink(root.join("real/a.csv"), root.join("a-link.csv")).unwrap();
        for path in [root.join("linked/a.csv"), root.join("a-link.csv")] {
            let err = read_all(&path, 100, ReadAs::Harness).unwrap_err();
            assert!(
                matches!(err, InputFileError::Link { .. }),
                "{path:?}: {err:?}"
            );
        }
        assert!(read_all(&root.join("real/a.csv"), 100, ReadAs::Harness).is_ok());
        let err = read_all(Path::new("a.csv"), 100, ReadAs::Harness).unwrap_err();
        assert!(matches!(err, InputFileError::Relative), "{err:?}");
    }

    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let fifo = root.join("f.csv");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (root.as_path(), "a directory"),
        ] {
            match read_all(path, 100, ReadAs::Harness) {
                Err(InputFileError::NotRegular { kind: k }) => assert_eq!(k, kind),
                other => panic!("{path:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn suite_files_follow_links_to_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join("real.jsonl"), "{}\n").unwrap();
        symlink(root.join("real.jsonl"), root.join("linked.jsonl")).unwrap();
        symlink("/dev/zero", root.join("zero.jsonl")).unwrap();
        let fifo = root.join("fifo.jsonl");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let mut text = String::new();
        let mut file = open_suite_file(&root.join("linked.jsonl")).unwrap();
        file.read_to_string(&mut text).unwrap();
        assert_eq!((text.as_str(), file.size), ("{}\n", 3));
        for (name, kind) in [
            ("zero.jsonl", "a character device"),
            ("fifo.jsonl", "a FIFO"),
        ] {
            match open_suite_file(&root.join(name)) {
                Err(InputFileError::NotRegular { kind: k }) => assert_eq!(k, kind),
                other => panic!("{name}: {other:?}"),
            }
        }
        // Sparse: the bound is on the size, not on what is stored.
        let big = File::create(root.join("big.jsonl")).unwrap();
        big.set_len(MAX_SUITE_FILE_BYTES + 1).unwrap();
        let err = open_suite_file(&root.join("big.jsonl")).unwrap_err();
        assert!(matches!(err, InputFileError::TooLarge { .. }), "{err:?}");
        assert!(
            err.to_string().contains("the bound on suite files"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_grows_past_the_bound_while_read_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("grows.csv");
        fs::write(&path, "1234").unwrap();
        let mut file = open_task_file(&path, 4, ReadAs::Harness).unwrap();
        fs::write(&path, "123456789").unwrap();
        let mut out = Vec::new();
        let err = file.read_to_end(&mut out).unwrap_err();
        assert!(err.to_string().contains("grew past"), "{err}");
    }
}
