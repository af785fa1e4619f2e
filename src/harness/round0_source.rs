//! `--round0-from RUN_DIR[:ARM]`: every task's round 0 taken from a
//! recorded run (the reply, code and outcome of that run's arm), so that
//! each arm's own model repairs a fixed set of first attempts: its own
//! code when it is the model that wrote them, foreign code otherwise.

use std::collections::HashMap;

use super::error::{HarnessError, UsageError};
use super::journal;
use super::run_dir::{read_config, task_hash};
use crate::record::{AttemptRecord, Round0From, Round0Source};
use crate::task::Task;

/// The recorded round 0 of every task of the run, by task id, and what
/// `run.json` records of where it came from.
#[derive(Debug, Default)]
pub(super) struct Round0s {
    pub(super) by_task: HashMap<String, AttemptRecord>,
    pub(super) source: Option<Round0Source>,
}

impl Round0s {
    /// The recorded round 0 of task `id`.
    pub(super) fn get(&self, id: &str) -> Option<&AttemptRecord> {
        self.by_task.get(id)
    }
}

/// Reads the recorded run `from` for `tasks` (each with its hash as the
/// run computes it): each task must be one of the recorded run's, unchanged,
/// with a round 0 in its arm.
pub(super) fn load(
    from: &Round0From,
    tasks: &[Task],
    max_file_bytes: u64,
) -> Result<Round0s, HarnessError> {
    let config = read_config(&from.run)?;
    let arms = config.arm_names();
    let arm = from.arm.clone().unwrap_or_else(|| arms[0].clone());
    if !arms.contains(&arm) {
        return Err(UsageError::Round0Arm {
            dir: from.run.clone(),
            arm,
            arms,
        }
        .into());
    }
    let source = Round0Source {
        run_id: config.provenance.run_id.clone(),
        model: config.model_of(&arm),
        fingerprint: config.fingerprint(&arm).unwrap_or_default(),
        arm: arm.clone(),
    };
    let label = source.label();
    let mut recorded: HashMap<String, AttemptRecord> =
        journal::read(&from.run.join("results.jsonl"))?
            .into_iter()
            .filter(|r| r.round == 0 && r.arm_name() == arm)
            .map(|mut r| {
                r.shared_from = Some(label.clone());
                (r.task_id.clone(), r)
            })
            .collect();
    let mut by_task = HashMap::new();
    for task in tasks {
        let hashes = &config.provenance.task_hashes;
        let why = if !config.provenance.task_ids.contains(&task.id) {
            Some("is not one of its tasks")
        } else if hashes
            .get(&task.id)
            .is_some_and(|h| *h != task_hash(task, max_file_bytes))
        {
            Some("differs from its task of that id (the task's hash changed)")
        } else {
            None
        };
        let record = recorded.remove(&task.id);
        let why = why.or(record
            .is_none()
            .then_some("has no round 0 there (the recorded run did not reach it)"));
        if let Some(why) = why {
            return Err(UsageError::Round0Task {
                dir: from.run.clone(),
                task: task.id.clone(),
                why,
            }
            .into());
        }
        by_task.insert(task.id.clone(), record.expect("checked above"));
    }
    Ok(Round0s {
        by_task,
        source: Some(source),
    })
}
