//! Images a kernel displays become files under the caller's artifact
//! directory; the relative path is the artifact's URI.

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

/// MIME types saved as artifacts, with their file extension.
pub const IMAGE_TYPES: [(&str, &str); 2] = [("image/png", "png"), ("image/svg+xml", "svg")];

/// Writes one image. `payload` is base64 for PNG and text for SVG.
pub fn save(dir: &Path, stem: &str, mime: &str, payload: &str) -> Result<Artifact, KernelError> {
    let ext = IMAGE_TYPES
        .iter()
        .find(|(m, _)| *m == mime)
        .map(|(_, e)| *e)
        .unwrap_or("bin");
    let bytes = if mime == "image/svg+xml" {
        payload.as_bytes().to_vec()
    } else {
        let compact: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|source| KernelError::Base64 {
                mime: mime.to_string(),
                source,
            })?
    };
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\nrest");
        let a = save(dir.path(), "c1-0", "image/png", &png).unwrap();
        assert_eq!(a.path, "c1-0.png");
        assert!(fs::read(dir.path().join("c1-0.png"))
            .unwrap()
            .starts_with(b"\x89PNG"));
        let s = save(dir.path(), "c1-1", "image/svg+xml", "<svg/>").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(&s.path)).unwrap(),
            "<svg/>"
        );
        assert!(save(dir.path(), "bad", "image/png", "!!!").is_err());
    }
}
