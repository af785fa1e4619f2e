//! One task's records of one arm, in round order, and the per-round state
//! read from them: what every metric of a run is computed over.

use std::collections::HashMap;

use crate::record::{AttemptRecord, FeedbackKind, RunConfig};
use crate::sandbox::Verdict;

/// One task's records in round order, with the per-round state carried
/// forward from its last record (a stopped task keeps its final state).
pub(super) struct TaskRounds<'a> {
    pub(super) records: Vec<&'a AttemptRecord>,
}

impl<'a> TaskRounds<'a> {
    /// The record in force at round r: the latest at or before r.
    pub(super) fn at(&self, round: usize) -> Option<&'a AttemptRecord> {
        self.records
            .iter()
            .rev()
            .find(|r| r.round as usize <= round)
            .copied()
    }

    pub(super) fn correct_at(&self, round: usize) -> bool {
        self.at(round).is_some_and(|r| r.correct)
    }

    pub(super) fn parsed_at(&self, round: usize) -> bool {
        self.at(round).is_some_and(|r| r.parsed)
    }

    /// The latest execution by round r ran cleanly.
    pub(super) fn exec_ok_at(&self, round: usize) -> bool {
        self.records
            .iter()
            .rev()
            .filter(|r| r.round as usize <= round)
            .find_map(|r| r.outcome.as_ref())
            .is_some_and(|o| o.verdict == Verdict::Ok)
    }

    pub(super) fn repaired(&self) -> bool {
        self.records.iter().any(|r| r.round >= 1)
    }

    /// How round 0 went wrong, when it did.
    pub(super) fn round0_failure(&self) -> Option<String> {
        let r = self.records.first().filter(|r| r.round == 0)?;
        failure(r)
    }

    /// How the state in force at round r is wrong, when it is (the same
    /// kinds as [`Self::round0_failure`]).
    pub(super) fn failure_at(&self, round: usize) -> Option<String> {
        failure(self.at(round)?)
    }
}

/// How a round's state is wrong: exception name, kill verdict, `no_code`,
/// `no_answer`, `unsupported_answer`, `wrong_answer`, `infra_error`.
fn failure(r: &AttemptRecord) -> Option<String> {
    if r.correct {
        return None;
    }
    // A kept answer ran nothing: it is the earlier (wrong) answer.
    if r.kept_answer {
        return Some("wrong_answer".into());
    }
    if r.infra_error.is_some() {
        return Some("infra_error".into());
    }
    let Some(o) = &r.outcome else {
        return Some("no_code".into());
    };
    Some(match o.verdict {
        Verdict::Error => o
            .error
            .as_ref()
            .map(|e| e.ename.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "error".into()),
        Verdict::Ok if r.answered => "wrong_answer".into(),
        Verdict::Ok if r.feedback_kind == Some(FeedbackKind::Unsupported) => {
            "unsupported_answer".into()
        }
        Verdict::Ok => "no_answer".into(),
        other => other.to_string(),
    })
}

impl TaskRounds<'_> {
    /// The task has its last record (it was not interrupted).
    pub(super) fn finished(&self) -> bool {
        self.records.iter().any(|r| r.is_final())
    }
}

/// The records of each arm of the run, the arms in run order. With one
/// arm every record is its own, whatever strategy it names (journals older
/// than arm names).
pub(super) fn by_arm<'a>(
    config: &RunConfig,
    records: &'a [AttemptRecord],
) -> Vec<(String, Vec<&'a AttemptRecord>)> {
    let names = config.arm_names();
    let one_arm = names.len() == 1;
    names
        .into_iter()
        .map(|name| {
            let mine = records
                .iter()
                .filter(|r| one_arm || r.arm_name() == name)
                .collect();
            (name, mine)
        })
        .collect()
}

/// The run's tasks in `task_ids` order, each with its records among
/// `records` (a task without any gets none); records of other tasks are
/// left out.
pub(super) fn by_task<'a>(
    config: &RunConfig,
    records: &[&'a AttemptRecord],
) -> Vec<TaskRounds<'a>> {
    let mut grouped: HashMap<&str, Vec<&AttemptRecord>> = HashMap::new();
    for r in records {
        grouped.entry(r.task_id.as_str()).or_default().push(r);
    }
    config
        .provenance
        .task_ids
        .iter()
        .map(|id| {
            let mut rs = grouped.remove(id.as_str()).unwrap_or_default();
            rs.sort_by_key(|r| r.round);
            TaskRounds { records: rs }
        })
        .collect()
}
