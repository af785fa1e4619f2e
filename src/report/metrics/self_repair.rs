//! The self-repair section of an arm: the views the literature measures
//! self-repair by — accuracy against cumulative budget, pass@k over the
//! attempts drawn, round-to-round transitions, the failure-class matrix
//! and repair after kills — each computed by its own file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use super::budget::{self, BudgetPoint};
use super::failure_classes::{self, ClassRow};
use super::kills::{self, KillRecovery};
use super::pass_at_k::{self, PassAtK};
use super::transitions::{self, Transition};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SelfRepair {
    /// Per round r = 0..=K: mean cumulative tokens and time per task over
    /// rounds 0..=r, and Acc@r.
    #[serde(default)]
    pub budget_curve: Vec<BudgetPoint>,
    /// pass@k for k = 1..=K+1 over each task's attempts drawn.
    #[serde(default)]
    pub pass_at_k: Vec<PassAtK>,
    /// Per round r = 1..=K: correct/incorrect at r−1 → at r.
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// Round-0 class → class at round K and the repair rate.
    #[serde(default)]
    pub failure_classes: BTreeMap<String, ClassRow>,
    /// Kill class (`memory`, `cpu`, `wall`, `output`, `recursion`, …) →
    /// its tasks, recovery and repairs that ran within the limits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kill_recovery: BTreeMap<String, KillRecovery>,
}

impl SelfRepair {
    pub(super) fn of(arm: &Arm) -> SelfRepair {
        SelfRepair {
            budget_curve: budget::curve(arm),
            pass_at_k: pass_at_k::of(arm),
            transitions: transitions::of(arm),
            failure_classes: failure_classes::of(arm),
            kill_recovery: kills::of(arm),
        }
    }
}
