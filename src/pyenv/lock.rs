//! Lock files: exact `name==version` pins, one per line, fully resolved so pip
//! can install them with `--no-deps` (no resolver, no surprises).

use serde::{Deserialize, Serialize};

use super::PyenvError;

pub(crate) const SLIM_LOCK: &str = include_str!("../../images/slim.lock");
pub(crate) const FAT_LOCK: &str = include_str!("../../images/fat.lock");
pub(crate) const CHECKER_LOCK: &str = include_str!("../../images/checker.lock");

/// One pinned distribution, spelled as in the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockEntry {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    pub entries: Vec<LockEntry>,
}

impl Lock {
    /// Accepts only exact pins: ranges, markers, extras, options and URLs
    /// would let the installed set drift from what the hash promises.
    pub fn parse(text: &str) -> Result<Lock, PyenvError> {
        let mut entries: Vec<LockEntry> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let err = |reason: String| PyenvError::Lock { line, reason };
            let Some((name, version)) = content.split_once("==") else {
                return Err(err(format!("expected `name==version`, found `{content}`")));
            };
            let (name, version) = (name.trim(), version.trim());
            if !valid_name(name) {
                return Err(err(format!(
                    "`{name}` is not a plain distribution name (only exact `name==version` pins are allowed)"
                )));
            }
            if !valid_version(version) {
                return Err(err(format!(
                    "`{version}` is not an exact version for `{name}` (no ranges, markers or URLs)"
                )));
            }
            let key = normalize(name);
            if entries.iter().any(|e| normalize(&e.name) == key) {
                return Err(err(format!("`{name}` is pinned twice")));
            }
            entries.push(LockEntry {
                name: name.to_string(),
                version: version.to_string(),
            });
        }
        if entries.is_empty() {
            return Err(PyenvError::Lock {
                line: 0,
                reason: "the lock pins no packages".into(),
            });
        }
        Ok(Lock { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Compares names the way pip does (`scikit_learn` is `scikit-learn`).
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The pin of `name`, compared as in [`Lock::contains`].
    pub fn get(&self, name: &str) -> Option<&LockEntry> {
        let key = normalize(name);
        self.entries.iter().find(|e| normalize(&e.name) == key)
    }
}

/// PEP 503 normalization: lowercase, runs of `-`, `_`, `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_separator = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_separator {
                out.push('-');
            }
            in_separator = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_separator = false;
        }
    }
    out
}

/// PEP 508 names: ASCII letters and digits, with `.`, `_`, `-` inside.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Characters of a PEP 440 version (public and local parts); excludes
/// wildcards, commas, markers and whitespace.
fn valid_version(version: &str) -> bool {
    !version.is_empty()
        && version.as_bytes()[0].is_ascii_alphanumeric()
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'!'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pins_comments_and_blank_lines() {
        let lock = Lock::parse(
            "# header\n\nnumpy==2.4.6\n  Pygments == 2.21.0   # inline comment\nscikit-learn==1.9.1\n",
        )
        .unwrap();
        assert_eq!(lock.len(), 3);
        assert_eq!(
            lock.entries[1],
            LockEntry {
                name: "Pygments".into(),
                version: "2.21.0".into()
            }
        );
        assert!(lock.contains("pygments"));
        assert!(lock.contains("scikit_learn"));
        assert!(lock.contains("Scikit.Learn"));
        assert!(!lock.contains("scipy"));
    }

    #[test]
    fn rejects_anything_but_exact_pins() {
        for (text, line) in [
            ("numpy>=2\n", 1),
            ("ok==1\nnumpy\n", 2),
            ("numpy==2.*\n", 1),
            ("numpy==2.0; python_version<'3.12'\n", 1),
            ("numpy[extra]==2.0\n", 1),
            ("--index-url x\n", 1),
            ("pkg @ file:///tmp/x.whl\n", 1),
            ("numpy==\n", 1),
            ("numpy==1\nNumPy==2\n", 2),
        ] {
            match Lock::parse(text) {
                Err(PyenvError::Lock { line: got, .. }) => assert_eq!(got, line, "{text:?}"),
                other => panic!("{text:?} gave {other:?}"),
            }
        }
        assert!(matches!(
            Lock::parse("# only comments\n"),
            Err(PyenvError::Lock { line: 0, .. })
        ));
    }

    #[test]
    fn normalizes_like_pip() {
        assert_eq!(normalize("Typing_Extensions"), "typing-extensions");
        assert_eq!(normalize("zope.interface"), "zope-interface");
        assert_eq!(normalize("a-_.b"), "a-b");
    }
}
