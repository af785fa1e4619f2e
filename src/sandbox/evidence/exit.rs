//! How a kernel process ended, from its wait status.

use serde::{Deserialize, Serialize};

/// How the kernel process ended, from its wait status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Signal name such as `SIGSEGV`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
}

impl ExitInfo {
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let signal = status.signal();
        ExitInfo {
            code: status.code(),
            signal,
            signal_name: signal.map(signal_name),
        }
    }
}

pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}
