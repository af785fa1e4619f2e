//! One install request and the allowlist's answer to it, as recorded in
//! the round's record and told to the model.

use serde::{Deserialize, Serialize};

use super::allowlist::{Allowlist, Pin};
use crate::pyenv::normalize;

/// How a request arose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RequestSource {
    /// The model's own install line (`%pip install x`, `!pip install x`),
    /// intercepted before the cell ran; `line` is 1-based in the cell.
    ExplicitLine { line: u32 },
    /// A `ModuleNotFoundError` / `ImportError` for a module the image lacks.
    MissingImport,
}

/// What was asked for: a requirement (explicit line) or a module name
/// (missing import), exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Request {
    pub requested: String,
    pub source: RequestSource,
}

/// Why a request was refused (verdict `policy_denied`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Denial {
    /// A real-looking name that is not on the allowlist (or a hallucinated
    /// one: the two cannot be told apart, and neither is installed).
    NotAllowlisted,
    /// Within two edits of an allowed or well-known name.
    LikelyTyposquat { of: String },
    /// A URL, path, VCS link, requirement file or option, not a name.
    UnsupportedSpec,
    /// An explicit version other than the pinned one.
    VersionNotAllowed { wanted: String, pinned: String },
    /// Only a source distribution exists; build steps never run.
    SdistOnly,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    Allowed {
        request: Request,
        distribution: String,
        version: String,
        /// Every wheel to install, the distribution itself included.
        closure: Vec<Pin>,
    },
    Denied {
        request: Request,
        /// The distribution the request was mapped to, when it names one.
        distribution: Option<String>,
        #[serde(flatten)]
        denial: Denial,
        /// What the model is told.
        message: String,
    },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }
}

/// Characters that make a requirement something other than a name with an
/// optional version: URLs, paths, VCS links, options.
fn unsupported(spec: &str) -> bool {
    spec.starts_with('-')
        || spec.contains("://")
        || spec.contains('/')
        || spec.contains('@')
        || spec.ends_with(".whl")
        || spec.ends_with(".tar.gz")
        || spec.ends_with(".zip")
}

/// `name[extras] <op> version` → (name, `==` version if pinned exactly).
/// Other operators are accepted when the pin satisfies them loosely: the
/// installer always installs the pin.
fn split_requirement(spec: &str) -> (String, Option<String>) {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let name = &spec[..end];
    let rest = spec[end..].trim();
    let rest = match rest.strip_prefix('[') {
        Some(r) => r.split_once(']').map_or("", |(_, after)| after).trim(),
        None => rest,
    };
    let exact = rest
        .strip_prefix("==")
        .map(|v| v.trim().trim_end_matches(".*").to_string())
        .filter(|v| !v.is_empty());
    (name.to_string(), exact)
}

impl Allowlist {
    /// The answer to one request; pure, and the same for every run.
    pub fn decide(&self, request: &Request) -> Decision {
        let spec = request.requested.trim();
        let deny = |distribution: Option<String>, denial: Denial| {
            let message = self.message(spec, &denial);
            Decision::Denied {
                request: request.clone(),
                distribution,
                denial,
                message,
            }
        };
        let (distribution, exact) = match request.source {
            RequestSource::MissingImport => (self.distribution_of_module(spec), None),
            RequestSource::ExplicitLine { .. } => {
                if spec.is_empty() || unsupported(spec) {
                    return deny(None, Denial::UnsupportedSpec);
                }
                let (name, exact) = split_requirement(spec);
                if name.is_empty() {
                    return deny(None, Denial::UnsupportedSpec);
                }
                let dist = self
                    .mapped_requirement(&name)
                    .map(str::to_string)
                    .unwrap_or_else(|| normalize(&name));
                (dist, exact)
            }
        };
        let Some(closure) = self.closure(&distribution) else {
            if self.is_sdist_only(&distribution) {
                return deny(Some(distribution), Denial::SdistOnly);
            }
            let denial = match self.nearest_known(&distribution) {
                Some(of) => Denial::LikelyTyposquat { of },
                None => Denial::NotAllowlisted,
            };
            return deny(Some(distribution), denial);
        };
        let pinned = self.pin(&distribution).map(|p| p.version.clone());
        let pinned = pinned.unwrap_or_default();
        if let Some(wanted) = exact.filter(|w| !pinned.starts_with(w.as_str())) {
            return deny(
                Some(distribution),
                Denial::VersionNotAllowed { wanted, pinned },
            );
        }
        Decision::Allowed {
            request: request.clone(),
            distribution,
            version: pinned,
            closure,
        }
    }

    /// An allowed or well-known name within two edits of `name` (and not
    /// `name` itself), the closest first.
    fn nearest_known(&self, name: &str) -> Option<String> {
        let squashed = |s: &str| s.replace('-', "");
        self.known_names()
            .filter(|k| k != name)
            .map(|k| (edit_distance(&squashed(name), &squashed(&k)), k))
            .filter(|(d, _)| *d <= 2)
            .min()
            .map(|(_, k)| k)
    }

    fn message(&self, spec: &str, denial: &Denial) -> String {
        let why = match denial {
            Denial::NotAllowlisted => format!("`{spec}` is not on the allowlist"),
            Denial::LikelyTyposquat { of } => {
                format!("`{spec}` looks like a misspelling of `{of}` and is not on the allowlist")
            }
            Denial::UnsupportedSpec => format!(
                "`{spec}` is not a package name: URLs, paths, VCS links, requirement files and options are never installed"
            ),
            Denial::VersionNotAllowed { wanted, pinned } => format!(
                "version {wanted} was asked for, but only {pinned} is available: install or import it without a version"
            ),
            Denial::SdistOnly => format!(
                "`{spec}` exists only as source code, and build steps never run here"
            ),
        };
        format!(
            "Nothing was installed: {why}. Packages that can be installed (ask with `%pip install NAME`, or just import them): {}. Everything else must come from the standard library.",
            self.available().join(", ")
        )
    }
}

/// Levenshtein distance with adjacent transpositions (optimal string
/// alignment), on characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowlist() -> Allowlist {
        Allowlist::embedded().unwrap()
    }

    fn explicit(spec: &str) -> Decision {
        allowlist().decide(&Request {
            requested: spec.into(),
            source: RequestSource::ExplicitLine { line: 1 },
        })
    }

    fn missing(module: &str) -> Decision {
        allowlist().decide(&Request {
            requested: module.into(),
            source: RequestSource::MissingImport,
        })
    }

    fn denial(d: &Decision) -> &Denial {
        match d {
            Decision::Denied { denial, .. } => denial,
            other => panic!("allowed: {other:?}"),
        }
    }

    #[test]
    fn allowed_requests_carry_the_whole_pinned_closure() {
        for d in [
            explicit("scipy"),
            explicit("scipy==1.17.1"),
            explicit("scipy>=1.0"),
            missing("scipy.stats"),
        ] {
            let Decision::Allowed {
                distribution,
                version,
                closure,
                ..
            } = &d
            else {
                panic!("{d:?}")
            };
            assert_eq!(
                (distribution.as_str(), version.as_str()),
                ("scipy", "1.17.1")
            );
            let names: Vec<&str> = closure.iter().map(|p| p.name.as_str()).collect();
            assert!(
                names.contains(&"numpy") && names.contains(&"scipy"),
                "{names:?}"
            );
        }
        // Import names are mapped, on both paths.
        for d in [
            missing("sklearn"),
            explicit("sklearn"),
            explicit("scikit_learn[all]"),
        ] {
            assert!(
                matches!(&d, Decision::Allowed { distribution, .. } if distribution == "scikit-learn"),
                "{d:?}"
            );
        }
    }

    #[test]
    fn typosquats_and_hallucinations_are_denied_with_what_is_available() {
        assert_eq!(
            denial(&explicit("scipyy")),
            &Denial::LikelyTyposquat { of: "scipy".into() }
        );
        assert_eq!(
            denial(&explicit("nunpy")),
            &Denial::LikelyTyposquat { of: "numpy".into() }
        );
        assert_eq!(
            denial(&explicit("scikitlearn")),
            &Denial::LikelyTyposquat {
                of: "scikit-learn".into()
            }
        );
        assert_eq!(
            denial(&explicit("pandas-profiling-pro")),
            &Denial::NotAllowlisted
        );
        assert_eq!(denial(&missing("cv2")), &Denial::NotAllowlisted);
        let Decision::Denied {
            message,
            distribution,
            ..
        } = explicit("torch")
        else {
            panic!()
        };
        assert_eq!(distribution.as_deref(), Some("torch"));
        assert!(message.contains("not on the allowlist"), "{message}");
        assert!(
            message.contains("scipy") && message.contains("pandas"),
            "{message}"
        );
    }

    #[test]
    fn specs_that_are_not_names_and_other_versions_are_denied() {
        for spec in [
            "git+https://example.invalid/x.git",
            "./local_pkg",
            "https://example.invalid/x-1.0-py3-none-any.whl",
            "-r",
            "pkg @ file:///tmp/x",
            "",
        ] {
            assert_eq!(denial(&explicit(spec)), &Denial::UnsupportedSpec, "{spec}");
        }
        assert_eq!(
            denial(&explicit("numpy==1.26.4")),
            &Denial::VersionNotAllowed {
                wanted: "1.26.4".into(),
                pinned: "2.4.6".into()
            }
        );
    }

    #[test]
    fn decisions_serialize_for_the_record() {
        let v = serde_json::to_value(explicit("scipyy")).unwrap();
        assert_eq!(v["decision"], "denied");
        assert_eq!(v["reason"], "likely_typosquat");
        assert_eq!(v["of"], "scipy");
        assert_eq!(v["request"]["source"]["kind"], "explicit_line");
        let v = serde_json::to_value(missing("sympy")).unwrap();
        assert_eq!(v["decision"], "allowed");
        assert!(v["closure"][0]["sha256"].as_str().unwrap().len() == 64);
    }

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("numpy", "nupmy"), 1);
        assert_eq!(edit_distance("scipy", "scipyy"), 1);
        assert_eq!(edit_distance("abc", "xyz"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
