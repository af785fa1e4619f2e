//! Images a kernel displays, and files a cell wrote into its working
//! directory (published by the kernel, `outputs.py`), become files under
//! the caller's artifact directory; the relative path is the artifact's URI.

use std::fs;
use std::io::Write;
use std::path::Path;

use base64::Engine;

use super::outcome::Artifact;
use super::KernelError;
use crate::util::nofollow;
use crate::util::redact;
use crate::util::IoContext;

/// Images one execution may leave as files. Their bytes are within the
/// output cap already; their number is capped too, because each is a file
/// the harness writes outside the kernel's disk limit.
pub const MAX_PER_EXECUTION: usize = 64;

/// MIME types of displays saved as artifacts, with their file extension.
pub const IMAGE_TYPES: [(&str, &str); 2] = [("image/png", "png"), ("image/svg+xml", "svg")];

/// MIME types of the files a cell writes that are collected, with the
/// extension their artifact gets (`outputs.py` maps a file's extension to
/// these; anything else the kernel sends is not saved).
pub const FILE_TYPES: [(&str, &str); 7] = [
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
    ("image/svg+xml", "svg"),
    ("text/csv", "csv"),
    ("application/json", "json"),
];

/// Whether an artifact of this MIME type is an image retrace saves (the
/// reports show those).
pub fn is_image(mime: &str) -> bool {
    mime.starts_with("image/") && FILE_TYPES.iter().any(|(m, _)| *m == mime)
}

/// The key of a collected file's bundle (`outputs.py`'s `FILE_MIME`):
/// `{"name", "mime", "bytes", "base64"}`.
pub const FILE_KEY: &str = "application/vnd.retrace.file+json";

/// What an execution left to save: a displayed image, or a file the cell
/// wrote (with its name in the working directory).
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub mime: String,
    /// Base64, or an SVG's text when displayed.
    pub payload: String,
    /// The name the cell gave the file; `None` for a display.
    pub name: Option<String>,
}

impl Pending {
    /// A collected file from its bundle entry; `None` unless it is a kind
    /// retrace collects with a base64 payload. The name is kept as a file
    /// name retrace makes from it (`util::file_name`): it came from the
    /// kernel.
    pub fn file(entry: &serde_json::Value) -> Option<Pending> {
        let mime = entry.get("mime")?.as_str()?;
        FILE_TYPES.iter().find(|(m, _)| *m == mime)?;
        let name = entry.get("name")?.as_str()?;
        Some(Pending {
            mime: mime.to_string(),
            payload: entry.get("base64")?.as_str()?.to_string(),
            name: Some(crate::util::file_name::file_name(name)),
        })
    }

    /// The bytes: a displayed SVG is text, everything else base64.
    fn bytes(&self) -> Result<Vec<u8>, KernelError> {
        if self.name.is_none() && self.mime == "image/svg+xml" {
            return Ok(self.payload.as_bytes().to_vec());
        }
        let compact: String = self
            .payload
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|source| KernelError::Base64 {
                mime: self.mime.clone(),
                source,
            })
    }
}

/// Writes one image or file as `<stem>.<extension of its MIME type>`.
pub fn save(dir: &Path, stem: &str, pending: &Pending) -> Result<Artifact, KernelError> {
    let mime = pending.mime.as_str();
    let ext = FILE_TYPES
        .iter()
        .find(|(m, _)| *m == mime)
        .map(|(_, e)| *e)
        .unwrap_or("bin");
    let bytes = pending.bytes()?;
    fs::create_dir_all(dir).at("creating artifact dir", dir)?;
    let name = format!("{stem}.{ext}");
    let path = dir.join(&name);
    // What the model's code displays may hold a configured secret (a
    // reply that echoed the key): redacted like every file of a run.
    let redacted = match redact::file(&path, &bytes) {
        std::borrow::Cow::Owned(redacted) => Some(redacted),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let bytes = redacted.unwrap_or(bytes);
    // Replaced, not opened: a link with this name is never written through.
    nofollow::remove_entry(&path)
        .and_then(|()| nofollow::create_new(&path, 0o644))
        .and_then(|mut file| file.write_all(&bytes))
        .at("writing artifact", &path)?;
    let base64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(Artifact {
        path: name,
        mime: mime.to_string(),
        bytes: bytes.len() as u64,
        base64: Some(base64),
        name: pending.name.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn display(mime: &str, payload: &str) -> Pending {
        Pending {
            mime: mime.into(),
            payload: payload.into(),
            name: None,
        }
    }

    #[test]
    fn writes_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\nrest");
        let a = save(dir.path(), "c1-0", &display("image/png", &png)).unwrap();
        assert_eq!(a.path, "c1-0.png");
        assert!(fs::read(dir.path().join("c1-0.png"))
            .unwrap()
            .starts_with(b"\x89PNG"));
        let s = save(dir.path(), "c1-1", &display("image/svg+xml", "<svg/>")).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(&s.path)).unwrap(),
            "<svg/>"
        );
        assert!(save(dir.path(), "bad", &display("image/png", "!!!")).is_err());
    }

    #[test]
    fn a_file_keeps_a_safe_name_and_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"a,b\n1,2\n");
        let entry = serde_json::json!({"name": "../x.csv", "mime": "text/csv", "base64": b64});
        let file = Pending::file(&entry).unwrap();
        let name = file.name.clone().unwrap();
        assert!(
            crate::util::file_name::is_plain(&name) || name.contains('~'),
            "{name}"
        );
        assert!(!name.contains('/'), "{name}");
        let a = save(dir.path(), "r0-000", &file).unwrap();
        assert_eq!(a.path, "r0-000.csv");
        assert_eq!(
            fs::read(dir.path().join("r0-000.csv")).unwrap(),
            b"a,b\n1,2\n"
        );
        // A kind retrace does not collect, or no payload: nothing saved.
        let html = serde_json::json!({"name": "x.html", "mime": "text/html", "base64": b64});
        assert!(Pending::file(&html).is_none());
        assert!(Pending::file(&serde_json::json!({"name": "x.csv", "mime": "text/csv"})).is_none());
    }
}
