//! Repair after kills: for each kill class (memory, cpu, wall, output,
//! recursion, …), the tasks a round of that class ended in, and of those
//! that got a next round, how many were correct by round K and how many
//! ran that next round within the limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::kernel::Outcome;
use crate::report::stats::Rate;
use crate::report::task_rounds::TaskRounds;
use crate::sandbox::Verdict;

/// The tasks of one kill class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KillRecovery {
    /// Rounds whose execution ended in this class, over all tasks.
    pub executions: u64,
    /// Tasks with at least one such round.
    pub tasks: u64,
    /// Of those, the tasks whose first such round was followed by another
    /// round: the denominator of both rates.
    pub repaired: u64,
    /// Of `repaired`, correct at round K (the answer carried forward).
    pub recovery: Option<Rate>,
    /// Of `repaired`, the round right after the first kill of this class
    /// ran code to verdict `ok` (a next round without code counts as not).
    pub within_limits: Option<Rate>,
}

/// The kill class of an execution: the limit that ended it, by OS
/// evidence (the verdict); or, for two exceptions the sandbox sees as
/// plain errors, `recursion` (a `RecursionError`: Python's own limit) and
/// `memory_unconfirmed` (a `MemoryError` no OS evidence confirms: one
/// allocation refused outright, typically larger than the machine). `None`
/// for a clean run, another exception, and refusals that are not about
/// resources (network, package policy, code size).
pub fn kill_class(o: &Outcome) -> Option<&'static str> {
    Some(match o.verdict {
        Verdict::OomKilled | Verdict::MemoryError => "memory",
        Verdict::TimeoutCpu => "cpu",
        Verdict::TimeoutWall => "wall",
        Verdict::OutputLimit => "output",
        Verdict::PidsLimit => "processes",
        Verdict::DiskLimit => "disk",
        Verdict::FdLimit => "files",
        Verdict::LockLimit => "locks",
        Verdict::Crash => "crash",
        Verdict::Error => match o.error.as_ref().map(|e| e.ename.as_str()) {
            Some("RecursionError") => "recursion",
            Some("MemoryError") => "memory_unconfirmed",
            _ => return None,
        },
        _ => return None,
    })
}

/// Kill class → its tasks, over all tasks of the arm; classes no round
/// ended in are left out.
pub(super) fn of(arm: &Arm) -> BTreeMap<String, KillRecovery> {
    let mut rows: BTreeMap<String, KillRecovery> = BTreeMap::new();
    let mut fixed: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for t in arm.tasks {
        for (class, first) in first_kills(t, &mut rows) {
            let row = rows.get_mut(class).expect("counted by first_kills");
            row.tasks += 1;
            let Some(next) = t.records.iter().find(|r| r.round > first) else {
                continue;
            };
            row.repaired += 1;
            let ok = next
                .outcome
                .as_ref()
                .is_some_and(|o| o.verdict == Verdict::Ok);
            let (recovered, within) = fixed.entry(class.to_string()).or_default();
            *recovered += t.correct_at(arm.k()) as u64;
            *within += ok as u64;
        }
    }
    for (class, row) in rows.iter_mut() {
        let (recovered, within) = fixed.get(class).copied().unwrap_or_default();
        row.recovery = Rate::new(recovered, row.repaired);
        row.within_limits = Rate::new(within, row.repaired);
    }
    rows
}

/// Each class's first round in this task, counting every round of a
/// class into `rows`' executions.
fn first_kills(
    t: &TaskRounds,
    rows: &mut BTreeMap<String, KillRecovery>,
) -> BTreeMap<&'static str, u32> {
    let mut first: BTreeMap<&'static str, u32> = BTreeMap::new();
    for r in &t.records {
        if let Some(class) = r.outcome.as_ref().and_then(kill_class) {
            rows.entry(class.to_string()).or_default().executions += 1;
            first.entry(class).or_insert(r.round);
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use crate::record::StopOn;
    use crate::report::summarize;
    use crate::report::testing::{config, outcome, task, R};
    use crate::sandbox::Verdict;

    /// Five tasks: an OOM repaired to a right answer within the limits, a
    /// CPU kill whose repair hit the wall, then was right; a recursion
    /// error repaired into a wrong answer; a MemoryError without OS
    /// evidence, repaired; a wall kill in the last round (no repair).
    #[test]
    fn recovery_and_runs_within_the_limits_per_kill_class() {
        let (k, s) = (2, StopOn::Clean);
        let mut records = task("oom", &[R::Killed(Verdict::OomKilled), R::Right], s, k);
        records.extend(task(
            "cpu",
            &[
                R::Killed(Verdict::TimeoutCpu),
                R::Killed(Verdict::TimeoutWall),
                R::Right,
            ],
            s,
            k,
        ));
        let mut rec = task("rec", &[R::Raised("RecursionError"), R::Wrong], s, k);
        rec[0].outcome = Some(outcome(Verdict::Error, Some("RecursionError")));
        records.extend(rec);
        // numpy's refusal of a 75 GiB array: no OS evidence of the limit.
        records.extend(task("np", &[R::Raised("MemoryError"), R::Right], s, k));
        records.extend(task(
            "late",
            &[
                R::Raised("KeyError"),
                R::Raised("KeyError"),
                R::Killed(Verdict::TimeoutWall),
            ],
            s,
            k,
        ));
        let ids = ["oom", "cpu", "rec", "np", "late"];
        let summary = summarize(&config(&ids, k, s), &records);
        let kills = &summary.each_arm()[0].self_repair.kill_recovery;
        assert_eq!(
            kills.keys().collect::<Vec<_>>(),
            ["cpu", "memory", "memory_unconfirmed", "recursion", "wall"]
        );
        let rate = |r: &Option<crate::report::stats::Rate>| r.map(|r| (r.successes, r.n));
        assert_eq!(kills["memory"].tasks, 1, "the unconfirmed one is apart");
        let unconfirmed = &kills["memory_unconfirmed"];
        assert_eq!(rate(&unconfirmed.recovery), Some((1, 1)));

        let memory = &kills["memory"];
        assert_eq!(
            (memory.executions, memory.tasks, memory.repaired),
            (1, 1, 1)
        );
        assert_eq!(rate(&memory.recovery), Some((1, 1)));
        assert_eq!(rate(&memory.within_limits), Some((1, 1)));

        let cpu = &kills["cpu"];
        assert_eq!((cpu.tasks, cpu.repaired), (1, 1));
        assert_eq!(rate(&cpu.recovery), Some((1, 1)), "right by round K");
        assert_eq!(
            rate(&cpu.within_limits),
            Some((0, 1)),
            "its repair hit the wall"
        );

        let recursion = &kills["recursion"];
        assert_eq!(rate(&recursion.recovery), Some((0, 1)));
        assert_eq!(rate(&recursion.within_limits), Some((1, 1)));

        // Two tasks hit the wall: one was repaired (and right), the other
        // in its last round, with no next round, is out of the rates.
        let wall = &kills["wall"];
        assert_eq!((wall.executions, wall.tasks, wall.repaired), (2, 2, 1));
        assert_eq!(rate(&wall.recovery), Some((1, 1)));
        assert_eq!(rate(&wall.within_limits), Some((1, 1)));
        let w = wall.recovery.unwrap();
        assert!(w.ci_low < 1.0 && w.ci_high == 1.0, "a Wilson interval");
    }

    #[test]
    fn a_run_without_kills_has_no_rows() {
        let (k, s) = (1, StopOn::Clean);
        let mut records = task("a", &[R::Raised("KeyError"), R::Right], s, k);
        records.extend(task("b", &[R::Right], s, k));
        let summary = summarize(&config(&["a", "b"], k, s), &records);
        assert!(summary.each_arm()[0].self_repair.kill_recovery.is_empty());
    }
}
