//! One finding of `retrace doctor`: what was checked, how it stands, and
//! what to do about it.

use serde::Serialize;

/// How a finding stands. Ordered by severity: a report is as bad as its
/// worst check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Worth knowing, nothing to fix (e.g. an image the first run builds).
    Info,
    /// A run can work, but something is missing or degraded.
    Warn,
    /// A confined run cannot work until this is fixed.
    Error,
}

/// One check and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable name, e.g. `cgroups` (the JSON key scripts look for).
    pub name: &'static str,
    pub status: Status,
    /// The fact, one line.
    pub detail: String,
    /// What to do about it, when something is to be done.
    pub fix: Option<String>,
}

impl Check {
    pub fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Ok, detail, None)
    }

    pub fn info(name: &'static str, detail: impl Into<String>) -> Check {
        Check::new(name, Status::Info, detail, None)
    }

    pub fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(name, Status::Warn, detail, Some(fix.into()))
    }

    pub fn error(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(name, Status::Error, detail, Some(fix.into()))
    }

    pub fn new(
        name: &'static str,
        status: Status,
        detail: impl Into<String>,
        fix: Option<String>,
    ) -> Check {
        Check {
            name,
            status,
            detail: detail.into(),
            fix,
        }
    }
}
