//! The package store: one read-only directory per installed wheel,
//! `$RETRACE_HOME/packages/<name>-<version>-<sha256[..16]>/`, shared by all
//! kernels and runs. An entry is named by the wheel's hash, so it never
//! changes once published; a kernel puts an entry's `site/` on `sys.path`.
//!
//! Entries are built in `.work/` (same filesystem, so publishing is one
//! rename), checked by [`super::audit`], marked complete (`complete.json` beside
//! `site/`), owned by root and stripped of
//! write bits before they take their final name. Kernels see the whole
//! store read-only through a bind mount, which also shows entries
//! published after the kernel started.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use walkdir::WalkDir;

use super::allowlist::Pin;
use crate::pyenv::marker;

const WORK_DIR: &str = ".work";

#[derive(Debug, Clone)]
pub struct PackageStore {
    root: PathBuf,
}

/// What the marker of an entry records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub pin: Pin,
    /// Size of `site/` on disk.
    pub bytes: u64,
    pub installed_at: String,
}

impl PackageStore {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// `$RETRACE_HOME/packages` (beside the images).
    pub fn from_env() -> Self {
        Self::new(crate::pyenv::ImageStore::from_env().home().join("packages"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the store (and its work area) if missing; readable by the
    /// kernel user, writable by root only.
    pub fn create(&self) -> std::io::Result<()> {
        fs::create_dir_all(self.work_dir())?;
        fs::set_permissions(&self.root, fs::Permissions::from_mode(0o755))?;
        // Installers get their own 0700 directories in here; nobody lists it.
        fs::set_permissions(self.work_dir(), fs::Permissions::from_mode(0o711))
    }

    /// Removes work directories that no installer can still be using
    /// (left by a retrace that was killed mid-install): those whose
    /// retrace (the pid in `<prefix>-<pid>-<uuid>`) is gone, and any older
    /// than `older_than` (a reused pid, an older naming).
    pub fn reclaim_work(&self, older_than: std::time::Duration) {
        let Ok(entries) = fs::read_dir(self.work_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let maker_gone = maker_pid(&entry.file_name().to_string_lossy())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            let stale = maker_gone
                || entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > older_than);
            if stale {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Where installers build entries before they are published.
    pub fn work_dir(&self) -> PathBuf {
        self.root.join(WORK_DIR)
    }

    /// The directory name of a wheel's entry.
    pub fn key(pin: &Pin) -> String {
        let short = &pin.sha256[..pin.sha256.len().min(16)];
        format!("{}-{}-{short}", pin.name, pin.version)
    }

    /// The `sys.path` directory of a wheel's entry.
    pub fn site(&self, pin: &Pin) -> PathBuf {
        self.root.join(Self::key(pin)).join("site")
    }

    /// The entry of `pin`, if it is complete.
    pub fn entry(&self, pin: &Pin) -> Option<Entry> {
        let entry: Entry = marker::read(&self.root.join(Self::key(pin)))?;
        (entry.pin == *pin).then_some(entry)
    }

    /// Publishes `built` (a directory holding `site/`) as the entry of
    /// `pin`: marker written, ownership and modes fixed, then one rename.
    /// An entry published meanwhile by another installer wins; `built`
    /// is then removed. Returns the entry.
    pub fn publish(&self, pin: &Pin, built: &Path) -> std::io::Result<Entry> {
        let site = built.join("site");
        let entry = Entry {
            pin: pin.clone(),
            bytes: size_of(&site),
            installed_at: chrono::Utc::now().to_rfc3339(),
        };
        crate::util::fault::reached(crate::util::fault::Point::DuringInstall);
        seal(built)?;
        marker::write(built, &entry)?;
        let dest = self.root.join(Self::key(pin));
        match crate::pyenv::publish::publish(built, &dest) {
            Ok(()) => Ok(entry),
            Err(_) if self.entry(pin).is_some() => {
                let _ = fs::remove_dir_all(built);
                Ok(self.entry(pin).expect("checked above"))
            }
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }
}

/// The pid of the retrace that made work directory `name`
/// (`<prefix>-<pid>-<uuid>`).
fn maker_pid(name: &str) -> Option<u32> {
    let mut parts = name.rsplitn(3, '-');
    let (_uuid, pid, _prefix) = (parts.next()?, parts.next()?, parts.next()?);
    pid.parse().ok()
}

/// Root-owned, no write bits for anyone else: the kernel user that
/// installed it can no longer change it.
fn seal(dir: &Path) -> std::io::Result<()> {
    for entry in WalkDir::new(dir) {
        let entry = entry.map_err(std::io::Error::other)?;
        let path = entry.path();
        let meta = fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        std::os::unix::fs::lchown(path, Some(0), Some(0)).or_else(not_root)?;
        let mode = meta.permissions().mode() & 0o7777;
        let sealed = if meta.is_dir() {
            0o755
        } else {
            (mode & 0o111) | 0o644
        };
        fs::set_permissions(path, fs::Permissions::from_mode(sealed & !0o022))?;
    }
    Ok(())
}

/// Without root (`--unsafe-no-sandbox` runs) the files stay the caller's.
fn not_root(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        Ok(())
    } else {
        Err(e)
    }
}

fn size_of(dir: &Path) -> u64 {
    WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin() -> Pin {
        Pin {
            name: "demo".into(),
            version: "1.0".into(),
            sha256: "ab".repeat(32),
        }
    }

    #[test]
    fn work_left_by_a_dead_retrace_is_reclaimed_at_once_and_a_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackageStore::new(dir.path().join("packages"));
        store.create().unwrap();
        let pid_max: u64 = fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Above pid_max: no process can have it.
        let dead = store
            .work_dir()
            .join(format!("install-{}-{}", pid_max + 1, "a".repeat(32)));
        let live =
            store
                .work_dir()
                .join(format!("install-{}-{}", std::process::id(), "b".repeat(32)));
        fs::create_dir_all(&dead).unwrap();
        fs::create_dir_all(&live).unwrap();
        store.reclaim_work(std::time::Duration::from_secs(3600));
        assert!(!dead.exists());
        assert!(live.exists());
        assert_eq!(maker_pid("install-12-abc"), Some(12));
        assert_eq!(maker_pid("x"), None);
    }

    #[test]
    fn a_published_entry_is_found_sealed_and_named_by_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackageStore::new(dir.path().join("packages"));
        store.create().unwrap();
        let p = pin();
        assert!(store.entry(&p).is_none());
        let built = store.work_dir().join("x");
        fs::create_dir_all(built.join("site/demo")).unwrap();
        fs::write(built.join("site/demo/__init__.py"), "X = 1\n").unwrap();
        fs::set_permissions(
            built.join("site/demo/__init__.py"),
            fs::Permissions::from_mode(0o666),
        )
        .unwrap();
        let entry = store.publish(&p, &built).unwrap();
        assert_eq!(entry.bytes, 6);
        assert_eq!(PackageStore::key(&p), "demo-1.0-abababababababab");
        let site = store.site(&p);
        assert!(site.join("demo/__init__.py").is_file());
        let mode = fs::metadata(site.join("demo/__init__.py"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o022, 0, "group/other write bits are removed");
        assert_eq!(store.entry(&p), Some(entry));
        // Another pin with the same name and version is another entry.
        let other = Pin {
            sha256: "cd".repeat(32),
            ..p
        };
        assert!(store.entry(&other).is_none());
    }

    #[test]
    fn publishing_an_entry_twice_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = PackageStore::new(dir.path().join("packages"));
        store.create().unwrap();
        let p = pin();
        for text in ["first", "second"] {
            let built = store.work_dir().join(text);
            fs::create_dir_all(built.join("site")).unwrap();
            fs::write(built.join("site/which.txt"), text).unwrap();
            store.publish(&p, &built).unwrap();
            assert!(!built.exists());
        }
        let text = fs::read_to_string(store.site(&p).join("which.txt")).unwrap();
        assert_eq!(text, "first");
    }
}
