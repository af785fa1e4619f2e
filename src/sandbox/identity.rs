//! The identity of one live kernel: a uid and a gid of the same number,
//! claimed from a reserved range so that no two live kernels share one (the
//! per-uid keyring, `kill`, `/proc` inspection all separate them).
//!
//! The range is `RETRACE_KERNEL_UIDS=BASE:COUNT` (default
//! [`DEFAULT_BASE`]`:`[`DEFAULT_COUNT`]), minus every id named in
//! `/etc/passwd` or `/etc/group`. A claim is an exclusive `flock` on
//! `/run/retrace/kernel-ids/<id>` (a root-owned 0700 directory): concurrent
//! retrace processes on one host never hand out the same id, and the lock
//! goes away with the process that held it, even after `kill -9`.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::SandboxError;

/// Above the ranges systemd reserves for containers (524288–1879048191),
/// below 2^31 (some tools treat ids as signed).
pub const DEFAULT_BASE: u32 = 1_900_000_000;
pub const DEFAULT_COUNT: u32 = 4096;
/// Where claims are held; shared by every retrace process of the host.
pub const LOCK_DIR: &str = "/run/retrace/kernel-ids";
/// The variable that moves the range.
pub const RANGE_VAR: &str = "RETRACE_KERNEL_UIDS";

/// The reserved ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub base: u32,
    pub count: u32,
}

impl IdRange {
    /// From `RETRACE_KERNEL_UIDS`, else the default.
    pub fn from_env() -> Result<Self, SandboxError> {
        match std::env::var(RANGE_VAR) {
            Ok(text) if !text.trim().is_empty() => Self::parse(&text),
            _ => Ok(Self {
                base: DEFAULT_BASE,
                count: DEFAULT_COUNT,
            }),
        }
    }

    /// `BASE:COUNT`, neither touching root's or the overflow ids.
    pub fn parse(text: &str) -> Result<Self, SandboxError> {
        let bad = |why: &str| SandboxError::Unavailable {
            reason: format!("{RANGE_VAR}={text}: {why}"),
            fix: format!("set {RANGE_VAR}=BASE:COUNT, e.g. {DEFAULT_BASE}:{DEFAULT_COUNT}"),
        };
        let (base, count) = text.trim().split_once(':').ok_or_else(|| bad("no ':'"))?;
        let base: u32 = base
            .trim()
            .parse()
            .map_err(|_| bad("BASE is not a number"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| bad("COUNT is not a number"))?;
        if base < 1000 || count == 0 {
            return Err(bad("BASE must be at least 1000 and COUNT at least 1"));
        }
        // u32::MAX is (uid_t)-1 ("no change"); 65534 is the overflow id.
        let last = base
            .checked_add(count - 1)
            .ok_or_else(|| bad("the range overflows"))?;
        if last == u32::MAX || (base..=last).contains(&65534) {
            return Err(bad("the range must avoid 65534 and 4294967295"));
        }
        Ok(Self { base, count })
    }

    pub fn describe(&self) -> String {
        format!(
            "{}..{} ({RANGE_VAR}=BASE:COUNT)",
            self.base,
            u64::from(self.base) + u64::from(self.count) - 1
        )
    }

    /// Claims the lowest free id of the range for a new kernel.
    pub fn claim(&self) -> Result<Identity, SandboxError> {
        self.claim_in(Path::new(LOCK_DIR))
    }

    fn claim_in(&self, dir: &Path) -> Result<Identity, SandboxError> {
        ensure_private_dir(dir)?;
        let taken = ids_in_use();
        for id in self.base..=self.base + (self.count - 1) {
            if taken.contains(&id) {
                continue;
            }
            let path = dir.join(id.to_string());
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                // A planted symlink must not be followed as root.
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| SandboxError::io(format!("opening {}", path.display()), e))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(claim) => {
                    return Ok(Identity {
                        uid: id,
                        gid: id,
                        _claim: claim,
                    })
                }
                Err((_, Errno::EWOULDBLOCK)) => continue,
                Err((_, e)) => {
                    return Err(SandboxError::io(
                        format!("locking {}", path.display()),
                        e.into(),
                    ))
                }
            }
        }
        Err(SandboxError::Unavailable {
            reason: format!(
                "every kernel id of {} is in use (by live kernels or by /etc/passwd, /etc/group)",
                self.describe()
            ),
            fix: format!("give {RANGE_VAR} a larger COUNT or another BASE"),
        })
    }
}

/// A claimed uid/gid; the claim ends when this is dropped.
#[derive(Debug)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    _claim: Flock<fs::File>,
}

/// The lock directory must be root's own and private, not a symlink.
fn ensure_private_dir(dir: &Path) -> Result<(), SandboxError> {
    let io =
        |what: &str, e: std::io::Error| SandboxError::io(format!("{what} {}", dir.display()), e);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io("creating", e))?;
    let meta = fs::symlink_metadata(dir).map_err(|e| io("reading", e))?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(SandboxError::io(
            format!("checking {}", dir.display()),
            std::io::Error::other("not a directory owned by retrace's user (symlink or foreign)"),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| io("chmod", e))?;
    }
    Ok(())
}

/// Ids named in the host's user and group databases.
fn ids_in_use() -> HashSet<u32> {
    let mut ids = HashSet::new();
    for file in ["/etc/passwd", "/etc/group"] {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines() {
            let mut fields = line.split(':');
            // name:password:id:... in both files.
            if let Some(id) = fields.nth(2).and_then(|f| f.parse().ok()) {
                ids.insert(id);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_variable_is_checked() {
        assert_eq!(
            IdRange::parse("2000000:16").unwrap(),
            IdRange {
                base: 2_000_000,
                count: 16
            }
        );
        for bad in [
            "",
            "5",
            "0:10",
            "2000000:0",
            "x:1",
            "65000:1000",
            "4294967290:10",
        ] {
            assert!(IdRange::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn two_claims_get_different_ids_and_a_released_id_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let range = IdRange {
            base: 1_900_100_000,
            count: 4,
        };
        let a = range.claim_in(&dir.path().join("ids")).unwrap();
        let b = range.claim_in(&dir.path().join("ids")).unwrap();
        assert_ne!(a.uid, b.uid);
        assert_eq!(a.uid, a.gid);
        let freed = a.uid;
        drop(a);
        let c = range.claim_in(&dir.path().join("ids")).unwrap();
        assert_eq!(c.uid, freed);
    }

    #[test]
    fn an_exhausted_range_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let range = IdRange {
            base: 1_900_200_000,
            count: 1,
        };
        let _held = range.claim_in(dir.path()).unwrap();
        assert!(range.claim_in(dir.path()).is_err());
    }
}
