//! `--false-alarm N`: the control arm. Once the run's arms are done, N
//! tasks right at round 0 in the first arm (those of lowest rank in a
//! shuffle seeded by the run's `--seed`, keyed by task id) run once more
//! in a control arm that shares that round 0 (replayed into its own kernel
//! as any arm sharing round 0 is) and then gets one message, the fixed
//! `false_alarm.md`, saying the answer is wrong; the model's reply is the
//! control's round 1 and last. Its records go to `false_alarm.jsonl`, never
//! to `results.jsonl`, so that no arm metric can count them.

use std::sync::Arc;

use tokio::sync::watch;

use super::arm::Arm;
use super::error::HarnessError;
use super::journal::{self, Journal};
use super::progress::Progress;
use super::runner::Runner;
use super::schedule::{self, Job};
use crate::record::{false_alarm, AfterFailure, AttemptRecord, StopOn};
use crate::task::Task;
use crate::util::rng::seeded_rank;

impl Arm {
    /// This arm's false-alarm control: the same model, kernels and round 0;
    /// one round after it, whatever round 0's stop rule would say.
    fn false_alarm_control(&self) -> Arm {
        let mut spec = self.spec.clone();
        spec.policy.rounds = 1;
        // `never` keeps a right round 0 going (and its code run again in
        // the control's kernel); its review prompt is then replaced.
        spec.policy.stop_on = StopOn::Never;
        spec.policy.after_failure = AfterFailure::Repair;
        spec.policy.max_task_tokens = None;
        Arm {
            name: false_alarm::arm_name(&self.name),
            spec,
            model: self.model.clone(),
            kernels: self.kernels.clone(),
            round0_key: self.round0_key.clone(),
            masking: self.masking.clone(),
            math: self.math.clone(),
            false_alarm: true,
        }
    }
}

/// The round-0 records the control starts from: `n` of the first arm's
/// right ones, by seeded rank (all of them when fewer), in task order.
pub(super) fn draw(
    records: Vec<AttemptRecord>,
    arm: &str,
    one_arm: bool,
    n: u32,
    seed: u64,
) -> Vec<AttemptRecord> {
    let mut right: Vec<AttemptRecord> = records
        .into_iter()
        .filter(|r| r.round == 0 && r.correct && (one_arm || r.arm_name() == arm))
        .collect();
    right.sort_by_key(|r| (seeded_rank(seed, &r.task_id), r.task_id.clone()));
    right.truncate(n as usize);
    right
}

/// Runs the control after the run's arms (none without `--false-alarm`).
/// Resumable: tasks the control finished are kept, others are redone.
pub(super) async fn run(
    runner: &Runner,
    tasks: &[Task],
    cancel: watch::Receiver<bool>,
) -> Result<(), HarnessError> {
    let Some(n) = runner.config.spec.false_alarm else {
        return Ok(());
    };
    let dir = &runner.out_dir;
    let base = &runner.arms[0];
    let records = journal::read(&dir.join("results.jsonl"))?;
    let seed = runner.config.spec.tasks.selection.seed;
    let drawn = draw(records, &base.name, runner.arms.len() == 1, n, seed);
    if drawn.len() < n as usize {
        tracing::warn!(
            asked = n,
            right_at_round0 = drawn.len(),
            "--false-alarm: fewer tasks than asked were right at round 0; using all of them"
        );
    }
    let path = dir.join(false_alarm::JOURNAL);
    let (finished, _) = journal::compact(&path)?;
    let control = base.false_alarm_control();
    let jobs: Vec<Job> = drawn
        .into_iter()
        .filter(|r| {
            !finished.contains(&journal::ArmTask {
                arm: control.name.clone(),
                task_id: r.task_id.clone(),
            })
        })
        .filter_map(|r| {
            let task = tasks.iter().find(|t| t.id == r.task_id)?.clone();
            Some(Job::from_round0(0, task, r))
        })
        .collect();
    if jobs.is_empty() {
        return Ok(());
    }
    let controls = Runner {
        config: runner.config.clone(),
        out_dir: dir.clone(),
        model: runner.model.clone(),
        sandbox: runner.sandbox.clone(),
        executor: runner.executor.clone(),
        arms: vec![control],
        kernel_options: runner.kernel_options.clone(),
        templates: runner.templates.clone(),
        journal: Arc::new(Journal::open(&path)?),
        progress: Arc::new(Progress::new(jobs.len() as u64, 0, false)),
    };
    schedule::run_all(Arc::new(controls), jobs, cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StopOn;
    use crate::report::testing::{task, R};

    #[test]
    fn the_draw_is_seeded_among_the_right_tasks_and_takes_all_when_short() {
        let ids = ["a", "b", "c", "d", "e", "f"];
        let records: Vec<AttemptRecord> = ids
            .iter()
            .enumerate()
            .flat_map(|(i, id)| {
                let how = if i % 3 == 2 { R::Wrong } else { R::Right };
                task(id, &[how], StopOn::Clean, 2)
            })
            .collect();
        let ids_of = |v: Vec<AttemptRecord>| -> Vec<String> {
            let mut ids: Vec<String> = v.into_iter().map(|r| r.task_id).collect();
            ids.sort();
            ids
        };
        // c and f were wrong: never drawn.
        let two = ids_of(draw(records.clone(), "fat", true, 2, 7));
        assert_eq!(two.len(), 2);
        assert!(two.iter().all(|id| id != "c" && id != "f"), "{two:?}");
        assert_eq!(two, ids_of(draw(records.clone(), "fat", true, 2, 7)));
        let all = ids_of(draw(records.clone(), "fat", true, 10, 7));
        assert_eq!(all, ["a", "b", "d", "e"]);
        // Another seed may draw others, from the same right tasks.
        let other = ids_of(draw(records, "fat", true, 2, 8));
        assert!(other.iter().all(|id| id != "c" && id != "f"));
    }
}
