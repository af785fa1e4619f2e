//! What the `dynamic` strategy did for a round: each install step, with
//! every decision, wheel and timing, as written into the round's record.

use serde::{Deserialize, Serialize};

use crate::kernel::Outcome;
use crate::pyenv::dynamic::{Decision, Finding};

/// Why an install step happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum InstallTrigger {
    /// The model's own `pip install` lines, intercepted before the cell ran.
    ExplicitLines,
    /// The cell failed on an import of a module the image lacks.
    MissingImport { module: String },
}

/// One wheel of an allowed closure, as it reached the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WheelRecord {
    pub name: String,
    pub version: String,
    pub sha256: String,
    /// Already in the package store: nothing was downloaded.
    pub store_hit: bool,
    /// Its installed size in the store.
    pub bytes: u64,
}

/// One install step of a round. It is not a model round: the model is not
/// asked anything; the cell is run again when the step succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstallStep {
    pub trigger: InstallTrigger,
    /// One per request, allowed or denied (with the reason and the
    /// message the model was given).
    pub decisions: Vec<Decision>,
    /// Every wheel the allowed requests needed.
    pub wheels: Vec<WheelRecord>,
    /// Every wheel came from the store: the network was not used.
    pub store_hit: bool,
    /// From the decision to the kernel seeing the packages: installer
    /// (on a store miss) and activation in the live kernel.
    pub ms: f64,
    /// The installer's part of `ms` (0 on a store hit).
    pub installer_ms: f64,
    /// Why the install failed (installer error, time limit, no index);
    /// `None` when it succeeded or nothing was allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the installer refused what it fetched: a hash mismatch, or
    /// content that runs code at start-up (`findings`). Like a denied
    /// decision, this ends the execution as `policy_denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// What the post-install scan found (the install is then refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The cell ran again after this step; the round's outcome is that run.
    pub rerun: bool,
    /// The execution that failed on the missing import (missing-import
    /// steps only); the round's outcome replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_outcome: Option<Box<Outcome>>,
}

impl InstallStep {
    /// Some request was refused by policy, or what was fetched for it was
    /// refused (verdict `policy_denied`).
    pub fn denied(&self) -> bool {
        self.refused.is_some() || self.decisions.iter().any(|d| !d.is_allowed())
    }

    /// An allowed install that did not reach the kernel for a reason other
    /// than policy (the installer or the index failed).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}
