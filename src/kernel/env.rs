//! The environment a user gives kernels (`--env KEY=VALUE`, the run
//! spec's `env` table): an explicit list added to the environment retrace
//! makes for every kernel. Nothing of the harness's own environment is
//! ever copied; only these names reach the kernel, on every start path
//! (cold, forked by the zygote, restarted, through a gateway).
//!
//! Names that would change how the kernel starts or what retrace relies
//! on are refused ([`RESERVED`], the BLAS thread caps). Values of names
//! that say they are secret ([`redact::secret_name`]) are registered with
//! the redactor, written as [`redact::REPLACEMENT`] and fingerprinted by
//! a hash only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::THREAD_VARS;
use crate::util::redact;

/// Names a user may not give a kernel, with the reason; `*` ends a
/// prefix. Variables read when a process starts (the loader's, the
/// interpreter's) would also not be honoured by a kernel the zygote
/// forks, which never execs; the others are retrace's own settings of
/// the kernel, or a gateway's channel for its limits.
pub const RESERVED: [(&str, &str); 16] = [
    ("LD_*", "the dynamic loader reads it when the kernel starts"),
    (
        "GLIBC_TUNABLES",
        "the C library reads it when the kernel starts",
    ),
    ("GCONV_PATH", "the C library loads code from it"),
    ("PYTHON*", "the interpreter reads it when the kernel starts"),
    ("PATH", "retrace sets it: the image's programs come first"),
    ("HOME", "retrace sets it: the kernel's private home"),
    ("TMPDIR", "retrace sets it: the kernel's private /tmp"),
    ("LANG", "retrace sets it (C.UTF-8)"),
    ("LC_*", "retrace sets the locale (C.UTF-8)"),
    ("IPYTHON*", "retrace sets IPython's configuration"),
    ("JUPYTER_*", "Jupyter's configuration and runtime paths"),
    (
        "JPY_*",
        "ipykernel's own (JPY_PARENT_PID makes the kernel exit)",
    ),
    (
        "MPL*",
        "retrace sets matplotlib's backend and configuration",
    ),
    ("PYDEVD_*", "retrace sets the debugger's settings"),
    ("KERNEL_*", "a gateway passes the kernel's limits in these"),
    ("RETRACE_*", "retrace's own"),
];

/// The most bytes the variables may take (`KEY=VALUE` and a NUL each):
/// a forked kernel's environment must fit the room the zygote keeps.
pub const MAX_ENV_BYTES: usize = 4096;

/// The variable that carries the environment through a gateway to
/// retrace's launcher (gateways pass `KERNEL_*` variables on).
pub const GATEWAY_VAR: &str = "KERNEL_RETRACE_ENV";

/// A variable that cannot be given to a kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("`{entry}`: expected KEY=VALUE")]
    NoEquals { entry: String },
    #[error("`{key}`: a variable name is letters, digits and `_`, not starting with a digit")]
    BadName { key: String },
    #[error("`{key}` cannot be set for kernels: {why} (reserved: {pattern})")]
    Reserved {
        key: String,
        pattern: &'static str,
        why: &'static str,
    },
    #[error("`{key}`: a value cannot hold a NUL character")]
    Nul { key: String },
    #[error("`{key}` is given twice")]
    Twice { key: String },
    #[error("the kernel variables take {bytes} bytes, more than the {MAX_ENV_BYTES} allowed")]
    TooLarge { bytes: usize },
}

impl EnvError {
    /// The variable the error is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            EnvError::BadName { key }
            | EnvError::Reserved { key, .. }
            | EnvError::Nul { key }
            | EnvError::Twice { key } => Some(key),
            EnvError::NoEquals { .. } | EnvError::TooLarge { .. } => None,
        }
    }
}

/// The variables every kernel of a run gets, by name. Serialized as a
/// table with secret values replaced by [`redact::REPLACEMENT`] (such a
/// value is given again when the run resumes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct KernelEnv(BTreeMap<String, String>);

impl KernelEnv {
    /// `KEY=VALUE`, checked.
    pub fn parse_pair(entry: &str) -> Result<(String, String), EnvError> {
        let (key, value) = entry.split_once('=').ok_or_else(|| EnvError::NoEquals {
            entry: entry.to_string(),
        })?;
        check(key, value)?;
        Ok((key.to_string(), value.to_string()))
    }

    /// The variables `pairs` give, each checked; a name given twice is an
    /// error.
    pub fn from_pairs(
        pairs: impl IntoIterator<Item = (String, String)>,
    ) -> Result<KernelEnv, EnvError> {
        let mut map = BTreeMap::new();
        for (key, value) in pairs {
            check(&key, &value)?;
            if map.contains_key(&key) {
                return Err(EnvError::Twice { key });
            }
            map.insert(key, value);
        }
        let env = KernelEnv(map);
        env.check()?;
        Ok(env)
    }

    /// Checks every variable and the total size (a table read from a file
    /// rather than from flags).
    pub fn check(&self) -> Result<(), EnvError> {
        for (key, value) in &self.0 {
            check(key, value)?;
        }
        let bytes: usize = self.0.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        if bytes > MAX_ENV_BYTES {
            return Err(EnvError::TooLarge { bytes });
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The variables as (name, value), sorted by name.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Registers the secret values with the process's redactor, so no
    /// file or log line retrace writes holds them (a kernel that prints
    /// one included).
    pub fn register_secrets(&self) {
        for (key, value) in &self.0 {
            if redact::secret_name(key) {
                redact::register(value);
            }
        }
    }

    /// Secret variables whose value is not known (read back from a
    /// `run.json`, where it is redacted).
    pub fn missing_secrets(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, v)| redact::secret_name(k) && v.as_str() == redact::REPLACEMENT)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// What a fingerprint records: the values, each secret one as a hash
    /// of it (`sha256:` and 16 hex digits), never in clear.
    pub fn print(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| {
                let shown = if redact::secret_name(k) {
                    let digest = Sha256::digest(v.as_bytes());
                    format!("sha256:{}", &hex::encode(digest)[..16])
                } else {
                    v.clone()
                };
                (k.clone(), shown)
            })
            .collect()
    }

    /// The environment as JSON, for [`GATEWAY_VAR`].
    pub fn to_gateway_var(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// The environment [`GATEWAY_VAR`] carried, checked.
    pub fn from_gateway_var(text: &str) -> Result<KernelEnv, GatewayVarError> {
        let map: BTreeMap<String, String> = serde_json::from_str(text)?;
        Ok(KernelEnv::from_pairs(map)?)
    }
}

/// A [`GATEWAY_VAR`] that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GatewayVarError {
    #[error("{GATEWAY_VAR} is not a JSON object of strings")]
    Json(#[from] serde_json::Error),
    #[error("{GATEWAY_VAR}: {0}")]
    Env(#[from] EnvError),
}

impl Serialize for KernelEnv {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let shown: BTreeMap<&str, &str> = self
            .0
            .iter()
            .map(|(k, v)| {
                let v = if redact::secret_name(k) {
                    redact::REPLACEMENT
                } else {
                    v.as_str()
                };
                (k.as_str(), v)
            })
            .collect();
        shown.serialize(s)
    }
}

/// One variable's name and value.
fn check(key: &str, value: &str) -> Result<(), EnvError> {
    let mut chars = key.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(EnvError::BadName { key: key.into() });
    }
    if let Some((pattern, why)) = reserved(key) {
        return Err(EnvError::Reserved {
            key: key.into(),
            pattern,
            why,
        });
    }
    if value.contains('\0') {
        return Err(EnvError::Nul { key: key.into() });
    }
    Ok(())
}

/// The reserved pattern `key` falls under (names compared without case:
/// `ld_preload` is refused like `LD_PRELOAD`).
fn reserved(key: &str) -> Option<(&'static str, &'static str)> {
    let upper = key.to_ascii_uppercase();
    if let Some(var) = THREAD_VARS.iter().find(|v| **v == upper) {
        return Some((var, "retrace caps the BLAS threads to the CPU limit"));
    }
    RESERVED
        .iter()
        .copied()
        .find(|(pattern, _)| match pattern.strip_suffix('*') {
            Some(prefix) => upper.starts_with(prefix),
            None => upper == *pattern,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_reserved_ones_refused_by_name() {
        assert_eq!(
            KernelEnv::parse_pair("TZ=UTC").unwrap(),
            ("TZ".into(), "UTC".into())
        );
        assert_eq!(
            KernelEnv::parse_pair("EMPTY=").unwrap(),
            ("EMPTY".into(), "".into())
        );
        assert_eq!(
            KernelEnv::parse_pair("A=b=c").unwrap(),
            ("A".into(), "b=c".into())
        );
        for bad in ["NOVALUE", "=x", "1A=x", "A-B=x", "A B=x"] {
            assert!(KernelEnv::parse_pair(bad).is_err(), "{bad}");
        }
        for key in [
            "LD_PRELOAD",
            "ld_library_path",
            "PYTHONPATH",
            "PYTHONHOME",
            "PATH",
            "HOME",
            "JPY_PARENT_PID",
            "KERNEL_MEMORY",
            "OMP_NUM_THREADS",
            "MPLBACKEND",
            "LC_ALL",
        ] {
            let err = KernelEnv::parse_pair(&format!("{key}=x")).unwrap_err();
            assert_eq!(err.key(), Some(key), "{err}");
            assert!(err.to_string().contains(key), "{err}");
        }
        let err = KernelEnv::from_pairs([("A".into(), "1".into()), ("A".into(), "2".into())]);
        assert_eq!(err.unwrap_err(), EnvError::Twice { key: "A".into() });
        let big = KernelEnv::from_pairs([("A".into(), "x".repeat(MAX_ENV_BYTES))]);
        assert!(matches!(big, Err(EnvError::TooLarge { .. })));
    }

    #[test]
    fn secret_values_are_written_redacted_and_fingerprinted_by_hash() {
        let env = KernelEnv::from_pairs([
            ("API_TOKEN".into(), "s3cr3t-value".into()),
            ("TZ".into(), "UTC".into()),
        ])
        .unwrap();
        let written = serde_json::to_string(&env).unwrap();
        assert_eq!(written, r#"{"API_TOKEN":"[redacted]","TZ":"UTC"}"#);
        let print = env.print();
        assert_eq!(print["TZ"], "UTC");
        assert!(print["API_TOKEN"].starts_with("sha256:"));
        assert!(!format!("{print:?}").contains("s3cr3t"));
        let read: KernelEnv = serde_json::from_str(&written).unwrap();
        assert_eq!(read.missing_secrets(), ["API_TOKEN"]);
        assert!(env.missing_secrets().is_empty());
        let carried = KernelEnv::from_gateway_var(&env.to_gateway_var()).unwrap();
        assert_eq!(carried, env);
        assert!(KernelEnv::from_gateway_var(r#"{"LD_PRELOAD":"x"}"#).is_err());
    }
}
