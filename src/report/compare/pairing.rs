//! Which arms and which tasks a comparison pairs: arms by pick, by name
//! or as the only ones; tasks by id, when both sides finished them.

use super::super::metrics::arm_names;
use super::super::task_rounds::TaskRounds;
use crate::record::{AttemptRecord, RunConfig};

/// One side of a comparison: one arm of one run.
#[derive(Debug, Clone)]
pub struct Side {
    /// How reports name it, e.g. `BASE 20261201-…-oracle [fat]`.
    pub label: String,
    pub config: RunConfig,
    pub strategy: String,
    /// The arm's records only.
    pub records: Vec<AttemptRecord>,
}

impl Side {
    /// The arm `strategy` of a run (a one-arm run's records are all its own,
    /// whatever strategy they name, as in its summary).
    pub fn new(role: &str, config: &RunConfig, records: &[AttemptRecord], strategy: &str) -> Side {
        let one_arm = arm_names(config).len() == 1;
        Side {
            label: format!("{role} {} [{strategy}]", config.provenance.run_id),
            config: config.clone(),
            strategy: strategy.to_string(),
            records: records
                .iter()
                .filter(|r| one_arm || r.arm_name() == strategy)
                .cloned()
                .collect(),
        }
    }

    /// The same arm restricted to `ids` (config and records), summarized as
    /// a one-arm run.
    pub(super) fn restricted(&self, ids: &[String]) -> (RunConfig, Vec<AttemptRecord>) {
        let mut config = self.config.clone();
        config.provenance.task_ids = ids.to_vec();
        if let Some(arm) = config
            .spec
            .arms()
            .into_iter()
            .find(|a| a.name == self.strategy)
        {
            config.spec = arm.spec;
        }
        let records = self
            .records
            .iter()
            .filter(|r| ids.contains(&r.task_id))
            .cloned()
            .collect();
        (config, records)
    }
}

/// Why two runs' arms cannot be paired.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairingError {
    #[error("{role} has no arm `{arm}` (its arms: {})", arms.join(", "))]
    NoArm {
        role: &'static str,
        arm: String,
        arms: Vec<String>,
    },
    #[error(
        "the runs share no arm (BASE: {}; NEW: {}); pick one each with RUN:ARM or --arm",
        base.join(", "),
        new.join(", ")
    )]
    NoSharedArm { base: Vec<String>, new: Vec<String> },
}

/// Which arms to compare: explicit picks win; else two one-arm runs are
/// compared whatever their strategies; else the arms both runs have, in
/// BASE's order. `Err` says why nothing can be paired.
pub fn pair_arms(
    base: &[String],
    new: &[String],
    base_pick: Option<&str>,
    new_pick: Option<&str>,
) -> Result<Vec<(String, String)>, PairingError> {
    let pick = |arms: &[String], p: Option<&str>, role: &'static str| match p {
        Some(p) if arms.iter().any(|a| a == p) => Ok(vec![p.to_string()]),
        Some(p) => Err(PairingError::NoArm {
            role,
            arm: p.to_string(),
            arms: arms.to_vec(),
        }),
        None => Ok(arms.to_vec()),
    };
    let (b, n) = (pick(base, base_pick, "BASE")?, pick(new, new_pick, "NEW")?);
    if b.len() == 1 && n.len() == 1 {
        return Ok(vec![(b[0].clone(), n[0].clone())]);
    }
    let pairs: Vec<(String, String)> = b
        .iter()
        .filter(|a| n.contains(a))
        .map(|a| (a.clone(), a.clone()))
        .collect();
    if pairs.is_empty() {
        return Err(PairingError::NoSharedArm { base: b, new: n });
    }
    Ok(pairs)
}

/// A task both sides finished: its id and each side's rounds.
pub(super) type Pair<'t, 'r> = (&'t String, &'t TaskRounds<'r>, &'t TaskRounds<'r>);

/// The tasks of `base_ids` (in that order) that both sides finished;
/// `None` when there is none.
pub(super) fn pair_tasks<'t, 'r>(
    base_ids: &'t [String],
    base: &'t [TaskRounds<'r>],
    new_ids: &'t [String],
    new: &'t [TaskRounds<'r>],
) -> Option<Vec<Pair<'t, 'r>>> {
    let finished_new: Vec<&String> = new_ids
        .iter()
        .zip(new)
        .filter(|(_, t)| t.finished())
        .map(|(id, _)| id)
        .collect();
    let mut pairs = Vec::new();
    for (id, bt) in base_ids.iter().zip(base) {
        if !bt.finished() || !finished_new.contains(&id) {
            continue;
        }
        let i = new_ids.iter().position(|x| x == id)?;
        pairs.push((id, bt, &new[i]));
    }
    (!pairs.is_empty()).then_some(pairs)
}

/// Tasks of either side that are not paired.
pub(super) fn unpaired(base_ids: &[String], new_ids: &[String], paired: usize) -> usize {
    let all: std::collections::BTreeSet<&String> = base_ids.iter().chain(new_ids).collect();
    all.len() - paired
}
