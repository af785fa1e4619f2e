//! `images/dynamic.lock` and `images/import-map.toml`, parsed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{DYNAMIC_LOCK, IMPORT_MAP};
use crate::pyenv::normalize;

/// One pinned wheel of the allowlist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pin {
    /// PEP 503 normalised.
    pub name: String,
    pub version: String,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AllowlistError {
    #[error("{file}:{line}: {reason}")]
    Line {
        file: &'static str,
        line: usize,
        reason: LineProblem,
    },
    #[error("images/import-map.toml: {0}")]
    ImportMap(#[from] toml::de::Error),
    #[error("images/dynamic.lock: `{top}` needs `{missing}`, which has no pin")]
    Unpinned { top: String, missing: String },
}

/// What is wrong with one line of the lock (shown after `file:line:`).
#[derive(Debug, thiserror::Error)]
pub enum LineProblem {
    #[error("`# allow` needs `<name>: <closure>`")]
    AllowWithoutClosure,
    #[error("`{requirement}` is not pinned with `==`")]
    NotPinned { requirement: String },
    #[error("`{requirement}` has no --hash=sha256:")]
    NoHash { requirement: String },
    #[error("`{requirement}`: the sha256 is not 64 hex digits")]
    BadHash { requirement: String },
}

/// What may be installed, and under which names it may be asked for.
#[derive(Debug, Clone)]
pub struct Allowlist {
    pins: BTreeMap<String, Pin>,
    /// Allowed top-level distribution → its closure beyond the slim image.
    allowed: BTreeMap<String, Vec<String>>,
    /// Distributions the generator found without a wheel.
    sdist_only: BTreeSet<String>,
    /// Import name (as written) → distribution (normalised).
    modules: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct ImportMap {
    modules: BTreeMap<String, String>,
}

const LOCK_FILE: &str = "images/dynamic.lock";

impl Allowlist {
    /// The compiled-in allowlist and import map.
    pub fn embedded() -> Result<Allowlist, AllowlistError> {
        Self::parse(DYNAMIC_LOCK, IMPORT_MAP)
    }

    /// `lock` in the format `images/build_dynamic_lock.py` writes:
    /// `# allow <top>: <closure...>` lines, `name==version
    /// --hash=sha256:<hex>` pins, `# sdist-only ...: name==version` notes.
    pub fn parse(lock: &str, import_map: &str) -> Result<Allowlist, AllowlistError> {
        let bad = |line: usize, reason: LineProblem| AllowlistError::Line {
            file: LOCK_FILE,
            line,
            reason,
        };
        let mut pins = BTreeMap::new();
        let mut allowed = BTreeMap::new();
        let mut sdist_only = BTreeSet::new();
        for (i, raw) in lock.lines().enumerate() {
            let n = i + 1;
            let text = raw.trim();
            if let Some(rest) = text.strip_prefix("# allow ") {
                let (top, closure) = rest
                    .split_once(':')
                    .ok_or_else(|| bad(n, LineProblem::AllowWithoutClosure))?;
                let closure: Vec<String> = closure.split_whitespace().map(normalize).collect();
                allowed.insert(normalize(top.trim()), closure);
            } else if let Some(rest) = text.strip_prefix("# sdist-only") {
                if let Some((_, spec)) = rest.split_once(':') {
                    let name = spec.trim().split("==").next().unwrap_or_default();
                    sdist_only.insert(normalize(name));
                }
            } else if !text.is_empty() && !text.starts_with('#') {
                let pin = parse_pin(text).map_err(|reason| bad(n, reason))?;
                pins.insert(pin.name.clone(), pin);
            }
        }
        for (top, closure) in &allowed {
            if let Some(missing) = closure.iter().find(|d| !pins.contains_key(*d)) {
                return Err(AllowlistError::Unpinned {
                    top: top.clone(),
                    missing: missing.clone(),
                });
            }
        }
        let map: ImportMap = toml::from_str(import_map)?;
        let modules = map
            .modules
            .into_iter()
            .map(|(module, dist)| (module, normalize(&dist)))
            .collect();
        Ok(Allowlist {
            pins,
            allowed,
            sdist_only,
            modules,
        })
    }

    /// The top-level distributions a kernel may ask for, sorted.
    pub fn available(&self) -> Vec<&str> {
        self.allowed.keys().map(String::as_str).collect()
    }

    /// The pins of `distribution`'s closure, if it is allowed.
    pub fn closure(&self, distribution: &str) -> Option<Vec<Pin>> {
        let names = self.allowed.get(distribution)?;
        Some(names.iter().map(|n| self.pins[n].clone()).collect())
    }

    pub fn pin(&self, distribution: &str) -> Option<&Pin> {
        self.pins.get(distribution)
    }

    /// The distribution a module is installed by: the import map's entry
    /// (top-level module only), else the module's own normalised name.
    pub fn distribution_of_module(&self, module: &str) -> String {
        let top = module.split('.').next().unwrap_or(module);
        self.modules
            .get(top)
            .cloned()
            .unwrap_or_else(|| normalize(top))
    }

    /// A requirement name that is really an import name (`pip install
    /// sklearn`, `pip install PIL`), mapped to its distribution.
    pub fn mapped_requirement(&self, name: &str) -> Option<&str> {
        self.modules.get(name).map(String::as_str).or_else(|| {
            self.modules
                .iter()
                .find(|(module, _)| normalize(module) == normalize(name))
                .map(|(_, dist)| dist.as_str())
        })
    }

    pub fn is_sdist_only(&self, distribution: &str) -> bool {
        self.sdist_only.contains(distribution)
    }

    /// Every name a request could legitimately mean: pinned and allowed
    /// distributions and mapped import names, normalised.
    pub fn known_names(&self) -> impl Iterator<Item = String> + '_ {
        self.pins
            .keys()
            .cloned()
            .chain(self.modules.keys().map(|m| normalize(m)))
            .chain(self.modules.values().cloned())
    }
}

fn parse_pin(text: &str) -> Result<Pin, LineProblem> {
    let spec = text.split(" #").next().unwrap_or(text);
    let mut words = spec.split_whitespace();
    let requirement = words.next().unwrap_or_default();
    let (name, version) = requirement
        .split_once("==")
        .ok_or_else(|| LineProblem::NotPinned {
            requirement: requirement.into(),
        })?;
    let sha256 = words
        .find_map(|w| w.strip_prefix("--hash=sha256:"))
        .ok_or_else(|| LineProblem::NoHash {
            requirement: requirement.into(),
        })?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(LineProblem::BadHash {
            requirement: requirement.into(),
        });
    }
    Ok(Pin {
        name: normalize(name),
        version: version.to_string(),
        sha256: sha256.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_allowlist_pins_every_closure_by_hash() {
        let a = Allowlist::embedded().unwrap();
        for top in [
            "numpy",
            "pandas",
            "scipy",
            "sympy",
            "scikit-learn",
            "statsmodels",
        ] {
            let closure = a.closure(top).unwrap_or_else(|| panic!("{top} allowed"));
            assert!(closure.iter().any(|p| p.name == top), "{top}");
            assert!(closure.iter().all(|p| p.sha256.len() == 64));
        }
        // What the slim image already has is never reinstalled.
        assert!(a.pin("ipykernel").is_none());
        assert!(a.pin("python-dateutil").is_none());
        assert_eq!(
            a.distribution_of_module("sklearn.linear_model"),
            "scikit-learn"
        );
        assert_eq!(a.distribution_of_module("scipy.stats"), "scipy");
        assert_eq!(a.distribution_of_module("Foo_Bar"), "foo-bar");
        assert_eq!(a.mapped_requirement("sklearn"), Some("scikit-learn"));
        assert_eq!(a.mapped_requirement("pil"), Some("pillow"));
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let lock = "# allow a: a\na==1 --hash=sha256:abc\n";
        let e = Allowlist::parse(lock, "[modules]\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("images/dynamic.lock:2:"), "{e}");
        let lock = "a>=1\n";
        let e = Allowlist::parse(lock, "[modules]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1:") && e.contains("not pinned"), "{e}");
        let hash = "0".repeat(64);
        let lock = format!("# allow a: a b\na==1 --hash=sha256:{hash}\n");
        let e = Allowlist::parse(&lock, "[modules]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`a` needs `b`"), "{e}");
    }
}
