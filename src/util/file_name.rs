//! A name that came from a dataset or a record (a task id, an arm name, a
//! run id) as one file name inside a directory retrace owns. Every such
//! name reaches the file system through [`file_name`], so no name can
//! climb out of its directory (`..`, `/`), hide (a leading dot) or share
//! a file with another name (`a/b` and `a_b`).

use sha2::{Digest, Sha256};

/// The longest name made, in bytes: well under every file system's 255,
/// with room for the suffixes the writers add (`r12-003.png`).
pub const MAX_BYTES: usize = 80;

/// What separates the readable stem from the hash. Never kept from a name
/// (see [`kept`]), so a name that is its own file name never looks like a
/// coded one.
const MARK: char = '~';

/// Hex digits of SHA-256 kept: 128 bits, so no two names share a file
/// even when someone searches for a collision on purpose.
const HASH_HEX: usize = 32;

/// Whether a byte is kept as it is: ASCII letters, digits, `-`, `_`, `.`.
fn kept(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// Whether `name` is its own file name: only kept bytes, not empty, no
/// leading dot (which also rules out `.` and `..`), at most [`MAX_BYTES`].
pub fn is_plain(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_BYTES && !name.starts_with('.') && name.bytes().all(kept)
}

/// `name` as a file name. A plain name ([`is_plain`]) is kept as it is
/// (so every existing run directory keeps its layout); any other becomes
/// `<stem>~<hash>`: the stem is the name with every other character as
/// `_` and leading dots as `_`, cut to fit [`MAX_BYTES`]; the hash is the
/// first 128 bits of the SHA-256 of the exact name, in hex. Plain names
/// never contain `~`, so the two forms never meet, and two coded names
/// differ whenever the names do.
pub fn file_name(name: &str) -> String {
    if is_plain(name) {
        return name.to_string();
    }
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    let room = MAX_BYTES - MARK.len_utf8() - HASH_HEX;
    let mut stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && kept(c as u8) {
                c
            } else {
                '_'
            }
        })
        .take(room)
        .collect();
    let dots = stem.len() - stem.trim_start_matches('.').len();
    stem.replace_range(..dots, &"_".repeat(dots));
    format!("{stem}{MARK}{}", &digest[..HASH_HEX])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every made name must be, whatever the input.
    fn assert_safe(name: &str) {
        let made = file_name(name);
        assert!(!made.is_empty(), "{name:?}");
        assert!(made.len() <= MAX_BYTES, "{name:?} -> {made:?}");
        assert!(!made.starts_with('.'), "{name:?} -> {made:?}");
        assert!(
            made.bytes().all(|b| kept(b) || b == MARK as u8),
            "{name:?} -> {made:?}"
        );
        let path = std::path::Path::new(&made);
        assert_eq!(path.components().count(), 1, "{name:?} -> {made:?}");
        assert!(
            matches!(
                path.components().next(),
                Some(std::path::Component::Normal(_))
            ),
            "{name:?} -> {made:?}"
        );
    }

    #[test]
    fn plain_names_are_kept_and_others_are_coded() {
        let long = "x".repeat(MAX_BYTES);
        let too_long = "x".repeat(MAX_BYTES + 1);
        let cases: &[(&str, Option<&str>)] = &[
            // Plain: kept exactly (existing run directories keep their layout).
            ("math-001", Some("math-001")),
            ("gsm8k_17", Some("gsm8k_17")),
            ("v1.2", Some("v1.2")),
            (&long, Some(&long)),
            // Coded: the stem that starts the name.
            ("a/b", Some("a_b~")),
            ("..", Some("__~")),
            (".", Some("_~")),
            (".hidden", Some("_hidden~")),
            ("", Some("~")),
            ("a\0b", Some("a_b~")),
            ("ünï", Some("_n_~")),
            (
                "<img src=x onerror=alert(1)>",
                Some("_img_src_x_onerror_alert_1__~"),
            ),
            ("`tick`", Some("_tick_~")),
            ("a\u{1b}]0;t\u{7}\r", Some("a__0_t__~")),
            ("x~y", Some("x_y~")),
            (&too_long, None),
        ];
        for (name, want) in cases {
            assert_safe(name);
            let made = file_name(name);
            match want {
                Some(w) if is_plain(name) => assert_eq!(&made, w),
                Some(w) => {
                    assert!(made.starts_with(w), "{name:?} -> {made:?}");
                    assert_eq!(made.len(), w.len() + HASH_HEX, "{name:?} -> {made:?}");
                }
                None => assert_eq!(made.len(), MAX_BYTES, "{name:?} -> {made:?}"),
            }
        }
    }

    #[test]
    fn different_names_never_share_a_file_name() {
        let long = "y".repeat(500);
        let names = [
            "a/b".to_string(),
            "a_b".to_string(),
            "a\\b".to_string(),
            "a b".to_string(),
            "..".to_string(),
            "__".to_string(),
            ".".to_string(),
            "_".to_string(),
            String::new(),
            "a\0b".to_string(),
            "ä".to_string(),
            "ö".to_string(),
            long.clone(),
            format!("{long}z"),
            // A plain name that looks like another's coded one.
            file_name("a/b").replace('~', "_"),
        ];
        let made: std::collections::BTreeSet<String> = names.iter().map(|n| file_name(n)).collect();
        assert_eq!(made.len(), names.len(), "{made:#?}");
        assert_eq!(
            file_name("a/b"),
            file_name("a/b"),
            "the same name, the same file"
        );
    }

    #[test]
    fn is_plain_refuses_what_a_path_would_read_as_more_than_a_name() {
        for name in ["", ".", "..", ".x", "a/b", "/", "a\\b", "a b", "a\nb", "é"] {
            assert!(!is_plain(name), "{name:?}");
        }
        for name in ["a", "a.b", "a..b", "A-9_z"] {
            assert!(is_plain(name), "{name:?}");
        }
    }
}
