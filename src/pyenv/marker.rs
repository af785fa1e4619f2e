//! `complete.json`: written last (see `recipe`), it is what makes a prepared
//! directory complete, and it records what went into it. [`Marker`] is an
//! image's; other recipes write their own through the same functions.

use std::fs;
use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{ImageName, Interpreter, LockEntry};

pub(crate) const MARKER_FILE: &str = "complete.json";
const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Marker {
    pub format: u32,
    pub name: ImageName,
    pub lock_hash: String,
    pub python: Interpreter,
    pub built_at: DateTime<Utc>,
    pub retrace_version: String,
    /// Whether `mplconfig/` holds a prebuilt font cache.
    pub mpl_cache: bool,
    pub packages: Vec<LockEntry>,
}

impl Marker {
    pub fn new(
        name: ImageName,
        lock_hash: &str,
        python: &Interpreter,
        packages: &[LockEntry],
        mpl_cache: bool,
    ) -> Marker {
        Marker {
            format: FORMAT,
            name,
            lock_hash: lock_hash.to_string(),
            python: python.clone(),
            built_at: Utc::now(),
            retrace_version: env!("CARGO_PKG_VERSION").to_string(),
            mpl_cache,
            packages: packages.to_vec(),
        }
    }

    /// The marker of `dir` if it is a complete image of `name` with `hash`;
    /// anything unreadable or mismatched means "not built".
    pub fn read(dir: &Path, name: ImageName, hash: &str) -> Option<Marker> {
        let marker: Marker = read(dir)?;
        (marker.format == FORMAT && marker.name == name && marker.lock_hash == hash)
            .then_some(marker)
    }
}

/// The `complete.json` of `dir`, whatever kind of marker it is (the local
/// model's environment has its own); unreadable means none.
pub(crate) fn read<T: DeserializeOwned>(dir: &Path) -> Option<T> {
    let text = fs::read(dir.join(MARKER_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Durable before the directory is renamed into place, so a crash can never
/// leave a "complete" directory with a truncated marker.
pub(crate) fn write<T: Serialize>(dir: &Path, marker: &T) -> std::io::Result<()> {
    let mut file = fs::File::create(dir.join(MARKER_FILE))?;
    let mut text = serde_json::to_vec_pretty(marker).map_err(std::io::Error::other)?;
    text.push(b'\n');
    file.write_all(&text)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> Interpreter {
        Interpreter::example()
    }

    #[test]
    fn round_trips_and_checks_identity() {
        let dir = tempfile::tempdir().unwrap();
        let packages = vec![LockEntry {
            name: "ipykernel".into(),
            version: "7.4.0".into(),
        }];
        let marker = Marker::new(
            ImageName::Slim,
            "0123456789abcdef",
            &python(),
            &packages,
            false,
        );
        write(dir.path(), &marker).unwrap();
        assert_eq!(
            Marker::read(dir.path(), ImageName::Slim, "0123456789abcdef"),
            Some(marker)
        );
        assert_eq!(
            Marker::read(dir.path(), ImageName::Fat, "0123456789abcdef"),
            None
        );
        assert_eq!(
            Marker::read(dir.path(), ImageName::Slim, "fedcba9876543210"),
            None
        );
    }

    #[test]
    fn missing_or_garbled_marker_is_not_built() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Marker::read(dir.path(), ImageName::Slim, "x"), None);
        fs::write(
            dir.path().join(MARKER_FILE),
            b"{\"format\": 1, \"name\": \"sl",
        )
        .unwrap();
        assert_eq!(Marker::read(dir.path(), ImageName::Slim, "x"), None);
    }
}
