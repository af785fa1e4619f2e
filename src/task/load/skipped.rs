//! A record left out by `--skip-invalid`: where it is, its id when one
//! could be read, and why it was refused.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::id_value;
use crate::task::TaskError;

/// One invalid dataset record that was skipped instead of stopping the load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// The record's id, when the line had a readable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The file holding the flaw (a labels file for a bad label).
    pub file: PathBuf,
    /// 1-based line in `file`.
    pub line: usize,
    pub reason: String,
}

impl Skipped {
    /// A skipped record from a line's parse error; `None` for errors that
    /// are not about one line (an unreadable file), which still stop a load.
    pub(super) fn from_error(err: TaskError, id: Option<String>) -> Result<Skipped, TaskError> {
        match err {
            TaskError::Parse {
                file,
                line,
                message,
            } => Ok(Skipped {
                id,
                file,
                line,
                reason: message,
            }),
            other => Err(other),
        }
    }
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file.display(), self.line)?;
        if let Some(id) = &self.id {
            write!(f, "`{id}`: ")?;
        }
        f.write_str(&self.reason)
    }
}

/// The `id` of a JSON line, if it parses and has one (for naming a skipped
/// record whose other fields are flawed).
pub(super) fn line_id(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    id_value(value.get("id")?).ok()
}
