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
    /// The image's size on disk, its marker aside (`du -s`); absent in
    /// images built before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
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
            size_bytes: None,
        }
    }

    /// The size of the complete image `dir` on disk: recorded in its marker
    /// at build time, so a run does not walk the image's tens of thousands of
    /// files. An older image is walked once and the size recorded in its
    /// marker (replaced whole; an image whose marker cannot be written is
    /// walked each time).
    pub fn image_size(dir: &Path, name: ImageName, hash: &str) -> u64 {
        let marker = Marker::read(dir, name, hash);
        if let Some(size) = marker.as_ref().and_then(|m| m.size_bytes) {
            return size;
        }
        let size = super::disk_usage(dir);
        if let Some(mut marker) = marker {
            marker.size_bytes = Some(size);
            if let Err(e) = replace(dir, &marker) {
                tracing::debug!(dir = %dir.display(), error = %e, "the image's size was not recorded");
            }
        }
        size
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
    write_file(&dir.join(MARKER_FILE), marker)
}

fn write_file<T: Serialize>(path: &Path, marker: &T) -> std::io::Result<()> {
    let mut file = fs::File::create(path)?;
    let mut text = serde_json::to_vec_pretty(marker).map_err(std::io::Error::other)?;
    text.push(b'\n');
    file.write_all(&text)?;
    file.sync_all()
}

/// `write`, for a directory already in place: the new marker is renamed
/// over the old, so a reader sees one or the other, never a partial file.
fn replace<T: Serialize>(dir: &Path, marker: &T) -> std::io::Result<()> {
    let staged = dir.join(format!(".{MARKER_FILE}.{}", std::process::id()));
    let written =
        write_file(&staged, marker).and_then(|()| fs::rename(&staged, dir.join(MARKER_FILE)));
    if written.is_err() {
        let _ = fs::remove_file(&staged);
    }
    written
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
    fn image_size_is_recorded_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("payload"), vec![7u8; 64 << 10]).unwrap();
        let marker = Marker::new(ImageName::Slim, "0123456789abcdef", &python(), &[], false);
        write(dir.path(), &marker).unwrap();
        let walked = Marker::image_size(dir.path(), ImageName::Slim, "0123456789abcdef");
        assert!(walked >= 64 << 10, "{walked}");
        let recorded = Marker::read(dir.path(), ImageName::Slim, "0123456789abcdef").unwrap();
        assert_eq!(recorded.size_bytes, Some(walked));
        // Read from the marker from now on, not walked again.
        fs::write(dir.path().join("more"), vec![7u8; 64 << 10]).unwrap();
        let again = Marker::image_size(dir.path(), ImageName::Slim, "0123456789abcdef");
        assert_eq!(again, walked);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 3, "no staged marker left: {names:?}");
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
