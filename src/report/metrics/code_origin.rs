//! `--round0-from`: whose code each arm repaired. Every arm of such a run
//! starts from the same recorded round 0; an arm whose model wrote it
//! repairs its own code, any other arm foreign code. Recovery is over the
//! tasks wrong at round 0, the same tasks for every arm (paired by
//! construction).

use serde::{Deserialize, Serialize};

use super::summary::ArmSummary;
use crate::record::RunConfig;
use crate::report::stats::Rate;

/// Where round 0 came from and how each arm repaired it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodeOrigin {
    /// The recorded run and arm (`RUN_ID:ARM`).
    pub source: String,
    /// The model that wrote round 0.
    pub model: String,
    pub arms: Vec<ArmOrigin>,
}

/// One arm's repair of the recorded round 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmOrigin {
    pub arm: String,
    pub model: String,
    /// The arm's model wrote round 0 (`own`) or another did (`foreign`).
    pub code: Authorship,
    /// Tasks right at the last round among those wrong at round 0.
    pub recovery_rate: Option<Rate>,
}

/// Whose code an arm repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Authorship {
    Own,
    Foreign,
}

impl Authorship {
    pub fn name(self) -> &'static str {
        match self {
            Authorship::Own => "own",
            Authorship::Foreign => "foreign",
        }
    }
}

impl CodeOrigin {
    /// For a run made with `--round0-from`; `None` for any other.
    pub fn of(config: &RunConfig, arms: &[&ArmSummary]) -> Option<CodeOrigin> {
        let source = config.provenance.round0_source.as_ref()?;
        let arms = arms
            .iter()
            .map(|a| ArmOrigin {
                arm: a.header.strategy.clone(),
                model: a.header.model.clone(),
                code: if a.header.model == source.model {
                    Authorship::Own
                } else {
                    Authorship::Foreign
                },
                recovery_rate: a.answers.recovery_rate,
            })
            .collect();
        Some(CodeOrigin {
            source: source.label(),
            model: source.model.clone(),
            arms,
        })
    }
}
