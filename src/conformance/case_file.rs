//! The case file format: the TOML keys of one case and their checks.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::corpus::{Case, CaseError, Category, LimitOverrides, Setup};
use super::Expectation;
use crate::sandbox::{Flag, Verdict};
use crate::util::units::{duration_from_secs, parse_bytes, parse_duration};

impl Case {
    /// Parses one case file's text; `source` is only recorded.
    pub fn parse(text: &str, source: &Path) -> Result<Case, CaseError> {
        let raw: RawCase = toml::from_str(text).map_err(|e| CaseError {
            file: source.to_path_buf(),
            key: None,
            message: e.to_string(),
        })?;
        raw.into_case(source).map_err(|bad| CaseError {
            file: source.to_path_buf(),
            key: bad.key,
            message: bad.message,
        })
    }
}

/// A key of a case file whose value is wrong (the file is added by
/// [`Case::parse`]).
#[derive(Debug)]
struct BadKey {
    key: Option<&'static str>,
    message: String,
}

impl BadKey {
    fn new(key: &'static str, message: impl Into<String>) -> BadKey {
        BadKey {
            key: Some(key),
            message: message.into(),
        }
    }

    /// `message` as the author reads it, prefixed with the key.
    fn prefixed(key: &'static str, message: impl std::fmt::Display) -> BadKey {
        BadKey::new(key, format!("{key}: {message}"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: String,
    category: String,
    description: String,
    code: String,
    expect: String,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    fired: Vec<String>,
    #[serde(default)]
    not_fired: Vec<String>,
    exception: Option<String>,
    errno: Option<i32>,
    #[serde(default)]
    stdout_contains: Vec<String>,
    #[serde(default)]
    stdout_lacks: Vec<String>,
    #[serde(default)]
    stderr_contains: Vec<String>,
    #[serde(default)]
    stderr_lacks: Vec<String>,
    answer: Option<String>,
    max_artifacts: Option<usize>,
    max_harness_mb: Option<u64>,
    setup: Option<String>,
    setup_expect: Option<String>,
    #[serde(default)]
    restart_before: bool,
    next_code: Option<String>,
    next_stdout: Option<String>,
    #[serde(default)]
    limits: RawLimits,
    local_only: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    memory: Option<Size>,
    pids: Option<u64>,
    cpus: Option<f64>,
    timeout: Option<Span>,
    cpu_time: Option<Span>,
    output_cap: Option<Size>,
    output_messages: Option<u64>,
    disk: Option<Size>,
}

/// `"256M"` or a number of bytes.
#[derive(Deserialize)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

/// `"3s"`, `"500ms"` or a number of seconds.
#[derive(Deserialize)]
#[serde(untagged)]
enum Span {
    Secs(f64),
    Text(String),
}

impl Size {
    fn bytes(&self, key: &'static str) -> Result<u64, BadKey> {
        match self {
            Size::Bytes(n) => Ok(*n),
            Size::Text(t) => parse_bytes(t).map_err(|e| BadKey::prefixed(key, e)),
        }
    }
}

impl Span {
    fn duration(&self, key: &'static str) -> Result<Duration, BadKey> {
        match self {
            Span::Secs(s) => duration_from_secs(*s).map_err(|e| BadKey::prefixed(key, e)),
            Span::Text(t) => parse_duration(t).map_err(|e| BadKey::prefixed(key, e)),
        }
    }
}

impl RawCase {
    fn into_case(self, source: &Path) -> Result<Case, BadKey> {
        let id = self.id.trim().to_string();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(BadKey::new(
                "id",
                format!(
                    "id `{}` must be non-empty and use only letters, digits, `_`, `-` and `.`",
                    self.id
                ),
            ));
        }
        if self.code.trim().is_empty() {
            return Err(BadKey::new("code", format!("case `{id}`: code is empty")));
        }
        let category =
            (self.category.parse::<Category>()).map_err(|e| BadKey::new("category", e))?;
        let expect = (self.expect.parse::<Verdict>()).map_err(|e| BadKey::new("expect", e))?;
        let flags = self
            .flags
            .iter()
            .map(|f| f.parse::<Flag>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BadKey::new("flags", e))?;
        let verdicts = |key: &'static str, names: &[String]| {
            names
                .iter()
                .map(|v| v.parse::<Verdict>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| BadKey::prefixed(key, e))
        };
        let fired = verdicts("fired", &self.fired)?;
        let not_fired = verdicts("not_fired", &self.not_fired)?;
        let limits = self.limits.overrides()?;
        for (key, texts) in [
            ("stdout_contains", &self.stdout_contains),
            ("stdout_lacks", &self.stdout_lacks),
            ("stderr_contains", &self.stderr_contains),
            ("stderr_lacks", &self.stderr_lacks),
        ] {
            if texts.iter().any(|s| s.is_empty()) {
                return Err(BadKey::new(
                    key,
                    format!("case `{id}`: {key} holds an empty string"),
                ));
            }
        }
        let setup = setup(self.setup, self.setup_expect, self.restart_before, &id)?;
        if self.next_stdout.is_some() && self.next_code.is_none() {
            return Err(BadKey::new(
                "next_code",
                format!("case `{id}`: next_stdout needs next_code"),
            ));
        }
        check_positive(&limits)?;
        if self.max_harness_mb == Some(0) {
            return Err(BadKey::new(
                "max_harness_mb",
                format!("case `{id}`: max_harness_mb must be positive (MiB the harness may grow)"),
            ));
        }
        Ok(Case {
            id,
            category,
            description: self.description.trim().to_string(),
            code: self.code,
            expect,
            expectation: Expectation {
                flags,
                fired,
                not_fired,
                exception: self.exception,
                errno: self.errno,
                stdout_contains: self.stdout_contains,
                stdout_lacks: self.stdout_lacks,
                stderr_contains: self.stderr_contains,
                stderr_lacks: self.stderr_lacks,
                answer: self.answer,
                max_artifacts: self.max_artifacts,
                max_harness_mb: self.max_harness_mb,
            },
            setup,
            next_code: self.next_code.unwrap_or_else(|| "print(1)".into()),
            next_stdout: self.next_stdout.unwrap_or_else(|| "1\n".into()),
            limits,
            local_only: self.local_only,
            source: source.to_path_buf(),
        })
    }
}

/// The setup cell, when the case has one.
fn setup(
    code: Option<String>,
    expect: Option<String>,
    restart_before: bool,
    id: &str,
) -> Result<Option<Setup>, BadKey> {
    Ok(match (code, expect, restart_before) {
        (Some(code), expect, restart_before) => Some(Setup {
            code,
            expect: expect
                .map(|v| {
                    v.parse::<Verdict>()
                        .map_err(|e| BadKey::prefixed("setup_expect", e))
                })
                .transpose()?,
            restart_before,
        }),
        (None, None, false) => None,
        (None, _, _) => {
            return Err(BadKey::new(
                "setup",
                format!("case `{id}`: setup_expect and restart_before need a setup cell"),
            ))
        }
    })
}

impl RawLimits {
    fn overrides(&self) -> Result<LimitOverrides, BadKey> {
        Ok(LimitOverrides {
            memory_bytes: self
                .memory
                .as_ref()
                .map(|s| s.bytes("limits.memory"))
                .transpose()?,
            pids: self.pids,
            cpus: self.cpus,
            timeout: self
                .timeout
                .as_ref()
                .map(|s| s.duration("limits.timeout"))
                .transpose()?,
            cpu_time: self
                .cpu_time
                .as_ref()
                .map(|s| s.duration("limits.cpu_time"))
                .transpose()?,
            output_cap_bytes: self
                .output_cap
                .as_ref()
                .map(|s| s.bytes("limits.output_cap"))
                .transpose()?,
            output_cap_messages: self.output_messages,
            disk_bytes: self
                .disk
                .as_ref()
                .map(|s| s.bytes("limits.disk"))
                .transpose()?,
        })
    }
}

/// Limits that would make every kernel fail at once.
fn check_positive(limits: &LimitOverrides) -> Result<(), BadKey> {
    if limits.memory_bytes == Some(0) || limits.pids == Some(0) {
        let key = if limits.pids == Some(0) {
            "limits.pids"
        } else {
            "limits.memory"
        };
        return Err(BadKey::new(
            key,
            "limits.memory and limits.pids must be positive",
        ));
    }
    if limits.cpus.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
        return Err(BadKey::new(
            "limits.cpus",
            "limits.cpus must be a positive number of cores",
        ));
    }
    Ok(())
}
