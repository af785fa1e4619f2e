//! Run metrics from the journal, with the definitions of DESIGN.md:
//! Acc@r with the answer carried forward after a task stops, recovery and
//! regression rates, exec-success@r, parse@r, kill rate by reason, infra
//! errors, latency percentiles and tokens. Proportions carry a 95% Wilson
//! interval. No task is ever dropped from a denominator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::environment::{self, MemoryPeak};
use super::installs::{self, InstallMetrics};
use super::stats::{Percentiles, Rate};
use super::strategies::{self, StrategyComparison};
use super::task_rounds::{self, TaskRounds};
use crate::kernel::ExecutorInfo;
use crate::record::{AttemptRecord, FeedbackKind, RunConfig, StopOn, SCHEMA_VERSION};
use crate::sandbox::{SandboxLimits, Verdict};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillRate {
    /// Killed executions over all executions.
    pub total: Option<Rate>,
    /// Per reason (verdict), as a fraction of all executions.
    pub by_reason: BTreeMap<String, f64>,
    pub counts: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub model: Percentiles,
    pub exec: Percentiles,
    pub total: Percentiles,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub per_task_mean: f64,
    /// Completion tokens per second of model time, per round.
    pub per_second: Percentiles,
}

/// Round-0 failures of one kind, and what became of them by round K.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailureFate {
    /// Tasks whose round 0 ended this way.
    pub tasks: u64,
    /// Of those, correct at round K.
    pub fixed: u64,
    /// Of those, with a clean execution at some later round.
    pub ran_clean_later: u64,
}

/// Accuracy of the tasks that got one injected fault kind (`oracle:faults`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultAccuracy {
    pub tasks: u64,
    pub round0: Option<Rate>,
    pub final_round: Option<Rate>,
}

/// What happened after review prompts (`--stop-on never`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reviews {
    /// Review prompts sent.
    pub prompts: u64,
    /// Replies that kept the answer (the keep token).
    pub kept: u64,
    /// Replies that sent code instead.
    pub revised: u64,
    /// Revisions that turned a right answer wrong / a wrong answer right.
    pub right_to_wrong: u64,
    pub wrong_to_right: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    pub suite: String,
    pub model: String,
    /// The model is a deterministic stand-in (oracle, replay), not a model.
    pub synthetic_model: bool,
    pub model_info: serde_json::Value,
    /// `clean`, `never` or `correct`.
    pub stop_on: String,
    /// `--stop-on correct`: stopping used ground truth.
    pub oracle_feedback: bool,
    /// `parsed`, `parsed+state`, `raw`, `minimal` or `none`.
    pub feedback: String,
    pub strategy: String,
    /// Kernels ran without confinement (`--unsafe-no-sandbox`).
    pub unconfined: bool,
    pub limits: SandboxLimits,
    /// Where the kernels ran; absent for local kernels.
    #[serde(default, skip_serializing_if = "ExecutorInfo::is_local")]
    pub executor: ExecutorInfo,
    pub tasks: usize,
    /// Tasks with every round recorded (the rest were interrupted).
    pub tasks_finished: usize,
    pub rounds: u32,
    /// Acc@r for r = 0..=rounds, over all tasks, the answer carried forward.
    pub accuracy_by_round: Vec<Rate>,
    /// Acc@r − Acc@(r−1); the first entry is Acc@0.
    pub delta_by_round: Vec<f64>,
    /// Correct at any round ≤ r (an upper bound, oracle-like).
    pub solved_by_round: Vec<f64>,
    /// Wrong at round 0 and right at K, over all tasks wrong at round 0.
    pub recovery_rate: Option<Rate>,
    /// The same over the tasks wrong at round 0 that got a repair round
    /// (under `clean`, a clean wrong answer stops a task unrepaired).
    pub recovery_rate_repaired: Option<Rate>,
    /// Right at round 0 and wrong at K, over all tasks right at round 0.
    pub regression_rate: Option<Rate>,
    /// Tasks whose latest execution by round r ran cleanly, over all tasks.
    pub exec_success_by_round: Vec<Rate>,
    /// Tasks with an answer the checker could read by round r, over all tasks.
    pub parse_by_round: Vec<Rate>,
    /// Round-0 failure kind (exception name, verdict, `no_code`,
    /// `no_answer`, `unsupported_answer`, `wrong_answer`) → fate by K.
    pub round0_failures: BTreeMap<String, FailureFate>,
    /// Accuracy by injected fault kind (synthetic `oracle:faults` runs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accuracy_by_fault: BTreeMap<String, FaultAccuracy>,
    /// Multi-answer tasks: parts correct over all parts, by round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multi_part_accuracy_by_round: Vec<Rate>,
    pub reviews: Reviews,
    /// Repair rounds whose code is the previous round's code unchanged
    /// (line-end whitespace and blank lines aside), over repair rounds that
    /// followed a round with code and sent code.
    #[serde(default)]
    pub resent_code: Option<Rate>,
    pub executions: u64,
    pub kill_rate: KillRate,
    pub verdicts: BTreeMap<String, u64>,
    pub infra_error_rate: Option<Rate>,
    pub latency_ms: Latency,
    pub tokens: Tokens,
    pub rounds_used_mean: f64,
    /// Executed rounds lost to the environment: the outcome is a
    /// `ModuleNotFoundError` / `ImportError` or `policy_denied`, or an
    /// install request of the round was denied; over executed rounds.
    #[serde(default)]
    pub environment_error_rounds: Option<Rate>,
    /// What the dynamic installer did (arms that install on demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installs: Option<InstallMetrics>,
    /// Kernel start time (ms), one value per kernel start recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_start_ms: Option<Percentiles>,
    /// Peak memory per kernel (one kernel per task), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<MemoryPeak>,
    /// The arm's image size on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
    /// Every arm (the baseline first) of a run with several strategies;
    /// empty with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<Summary>,
    /// The non-baseline arms against the baseline on their shared tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<StrategyComparison>,
}

/// Computes the summary of a run from its records. With several package
/// strategies (`fat,dynamic`), every arm is summarized over its own records
/// and the top level is the first arm's (the baseline), with every arm in
/// `arms` and the paired comparison in `comparison`.
pub fn summarize(config: &RunConfig, records: &[AttemptRecord]) -> Summary {
    let names = arm_names(config);
    if names.len() == 1 {
        // One arm: every record is its own, whatever strategy it names.
        let all: Vec<&AttemptRecord> = records.iter().collect();
        let tasks = task_rounds::by_task(config, &all);
        return summarize_arm(config, &names[0], &all, &tasks);
    }
    let mut arms = Vec::with_capacity(names.len());
    let mut arm_tasks = Vec::with_capacity(names.len());
    for name in &names {
        let mine: Vec<&AttemptRecord> = records.iter().filter(|r| &r.strategy == name).collect();
        let tasks = task_rounds::by_task(config, &mine);
        arms.push(summarize_arm(config, name, &mine, &tasks));
        arm_tasks.push((name.clone(), tasks));
    }
    let comparison = strategies::compare(config.spec.policy.rounds as usize, &arm_tasks);
    let mut top = arms[0].clone();
    top.arms = arms;
    top.comparison = Some(comparison);
    top
}

/// The run's arms in `--strategy` order: `fat,dynamic` → `fat`, `dynamic`.
pub fn arm_names(config: &RunConfig) -> Vec<String> {
    config.arm_names()
}

/// The summary of one arm: `records` are the arm's, `tasks` the same
/// grouped by task.
fn summarize_arm(
    config: &RunConfig,
    strategy: &str,
    records: &[&AttemptRecord],
    tasks: &[TaskRounds],
) -> Summary {
    let k = config.spec.policy.rounds as usize;
    let n = tasks.len() as u64;
    let count = |f: &dyn Fn(&TaskRounds) -> bool| tasks.iter().filter(|t| f(t)).count() as u64;
    let over_all = |f: &dyn Fn(&TaskRounds, usize) -> bool| -> Vec<Rate> {
        (0..=k)
            .map(|r| Rate::new(count(&|t| f(t, r)), n.max(1)).expect("n ≥ 1"))
            .collect()
    };

    let accuracy = over_all(&|t, r| t.correct_at(r));
    let solved = (0..=k)
        .map(|r| count(&|t| (0..=r).any(|q| t.correct_at(q))) as f64 / n.max(1) as f64)
        .collect();
    let delta = accuracy
        .iter()
        .enumerate()
        .map(|(i, a)| a.value - if i == 0 { 0.0 } else { accuracy[i - 1].value })
        .collect();
    let wrong0 = count(&|t| !t.correct_at(0));
    let recovered = count(&|t| !t.correct_at(0) && t.correct_at(k));
    let wrong0_repaired = count(&|t| !t.correct_at(0) && t.repaired());
    let recovered_repaired = count(&|t| !t.correct_at(0) && t.repaired() && t.correct_at(k));
    let right0 = count(&|t| t.correct_at(0));
    let regressed = count(&|t| t.correct_at(0) && !t.correct_at(k));

    let mut round0_failures: BTreeMap<String, FailureFate> = BTreeMap::new();
    for t in tasks {
        if let Some(kind) = t.round0_failure() {
            let fate = round0_failures.entry(kind).or_default();
            fate.tasks += 1;
            fate.fixed += t.correct_at(k) as u64;
            fate.ran_clean_later += t
                .records
                .iter()
                .skip(1)
                .any(|r| r.outcome.as_ref().is_some_and(|o| o.verdict == Verdict::Ok))
                as u64;
        }
    }
    let mut faults: BTreeMap<String, Vec<&TaskRounds>> = BTreeMap::new();
    for t in tasks {
        if let Some(f) = t.records.first().and_then(|r| r.fault.clone()) {
            faults.entry(f).or_default().push(t);
        }
    }
    let accuracy_by_fault = faults
        .into_iter()
        .map(|(fault, ts)| {
            let m = ts.len() as u64;
            let right = |r: usize| ts.iter().filter(|t| t.correct_at(r)).count() as u64;
            let acc = FaultAccuracy {
                tasks: m,
                round0: Rate::new(right(0), m),
                final_round: Rate::new(right(k), m),
            };
            (fault, acc)
        })
        .collect();
    let multi_part_accuracy_by_round = multi_parts(config, tasks, k);

    let mut reviews = Reviews::default();
    for t in tasks {
        for pair in t.records.windows(2) {
            let (before, reply) = (pair[0], pair[1]);
            if before.feedback_kind != Some(FeedbackKind::Review) {
                continue;
            }
            reviews.prompts += 1;
            if reply.kept_answer {
                reviews.kept += 1;
            } else if reply.code.is_some() {
                reviews.revised += 1;
                reviews.right_to_wrong += (before.correct && !reply.correct) as u64;
                reviews.wrong_to_right += (!before.correct && reply.correct) as u64;
            }
        }
    }

    let (mut resent, mut repairs) = (0, 0);
    for t in tasks {
        for pair in t.records.windows(2) {
            if let (Some(before), Some(now)) = (&pair[0].code, &pair[1].code) {
                repairs += 1;
                resent += u64::from(same_code(before, now));
            }
        }
    }
    let resent_code = Rate::new(resent, repairs);

    let outcomes: Vec<_> = records.iter().filter_map(|r| r.outcome.as_ref()).collect();
    let executions = outcomes.len() as u64;
    let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
    for o in &outcomes {
        *verdicts.entry(o.verdict.to_string()).or_default() += 1;
    }
    let kill_counts: BTreeMap<String, u64> =
        outcomes
            .iter()
            .filter(|o| o.verdict.is_kill())
            .fold(BTreeMap::new(), |mut m, o| {
                *m.entry(o.verdict.to_string()).or_default() += 1;
                m
            });
    let killed: u64 = kill_counts.values().sum();
    let kill_rate = KillRate {
        total: Rate::new(killed, executions),
        by_reason: kill_counts
            .iter()
            .map(|(k, v)| (k.clone(), *v as f64 / executions.max(1) as f64))
            .collect(),
        counts: kill_counts,
    };
    let infra_tasks = count(&|t| t.records.iter().any(|r| r.infra_error.is_some()));
    let finished = count(&|t| t.records.iter().any(|r| r.is_final())) as usize;
    let mine = |r: &&AttemptRecord| config.provenance.task_ids.contains(&r.task_id);
    let ours: Vec<&AttemptRecord> = records.iter().copied().filter(mine).collect();
    let tokens_prompt: u64 = ours.iter().map(|r| r.tokens.prompt_tokens).sum();
    let tokens_completion: u64 = ours.iter().map(|r| r.tokens.completion_tokens).sum();

    Summary {
        schema_version: SCHEMA_VERSION,
        run_id: config.provenance.run_id.clone(),
        suite: config.spec.tasks.suite.clone(),
        model: config.provenance.model.clone(),
        synthetic_model: config.provenance.synthetic_model,
        model_info: config.provenance.model_info.clone(),
        stop_on: config.spec.policy.stop_on.name().into(),
        oracle_feedback: config.spec.policy.stop_on == StopOn::Correct,
        feedback: config.spec.policy.feedback.name().into(),
        strategy: strategy.to_owned(),
        // A gateway's kernels are confined by the gateway, not unconfined.
        unconfined: !config.provenance.sandbox.confined && config.provenance.executor.is_local(),
        limits: config.spec.execution.limits,
        executor: config.provenance.executor.clone(),
        tasks: tasks.len(),
        tasks_finished: finished,
        rounds: config.spec.policy.rounds,
        accuracy_by_round: accuracy,
        delta_by_round: delta,
        solved_by_round: solved,
        recovery_rate: Rate::new(recovered, wrong0),
        recovery_rate_repaired: Rate::new(recovered_repaired, wrong0_repaired),
        regression_rate: Rate::new(regressed, right0),
        exec_success_by_round: over_all(&|t, r| t.exec_ok_at(r)),
        parse_by_round: over_all(&|t, r| t.parsed_at(r)),
        round0_failures,
        accuracy_by_fault,
        multi_part_accuracy_by_round,
        reviews,
        executions,
        kill_rate,
        verdicts,
        infra_error_rate: Rate::new(infra_tasks, n),
        latency_ms: Latency {
            model: Percentiles::of(ours.iter().map(|r| r.timings_ms.model).collect()),
            exec: Percentiles::of(
                ours.iter()
                    .filter(|r| r.executed())
                    .map(|r| r.timings_ms.exec)
                    .collect(),
            ),
            total: Percentiles::of(ours.iter().map(|r| r.timings_ms.total).collect()),
        },
        tokens: Tokens {
            prompt: tokens_prompt,
            completion: tokens_completion,
            per_task_mean: (tokens_prompt + tokens_completion) as f64 / n.max(1) as f64,
            per_second: Percentiles::of(
                ours.iter()
                    .filter(|r| r.timings_ms.model > 0.0 && r.tokens.completion_tokens > 0)
                    .map(|r| r.tokens.completion_tokens as f64 / (r.timings_ms.model / 1e3))
                    .collect(),
            ),
        },
        resent_code,
        rounds_used_mean: ours.len() as f64 / n.max(1) as f64,
        environment_error_rounds: environment::error_rounds(&ours),
        installs: installs::InstallMetrics::of(strategy, tasks),
        kernel_start_ms: environment::kernel_start(&ours),
        memory_peak_bytes: environment::MemoryPeak::of(tasks),
        image_bytes: config.provenance.images.get(strategy).map(|i| i.bytes),
        arms: Vec::new(),
        comparison: None,
    }
}

/// Parts correct over all parts of the multi-answer tasks, by round (the
/// parts of the answer in force at that round; none counts as wrong).
/// The same program: equal lines once line-end whitespace and blank lines
/// are ignored (a model that resends its code often re-wraps it that way).
fn same_code(a: &str, b: &str) -> bool {
    let lines = |c: &str| {
        c.lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    lines(a) == lines(b)
}

fn multi_parts(config: &RunConfig, tasks: &[TaskRounds], k: usize) -> Vec<Rate> {
    let parts_of = |t: &TaskRounds| -> usize {
        t.records
            .iter()
            .filter_map(|r| r.check.as_ref())
            .map(|c| c.parts.len())
            .max()
            .unwrap_or(0)
    };
    let multi: Vec<(&TaskRounds, usize)> = tasks
        .iter()
        .map(|t| (t, parts_of(t)))
        .filter(|(_, p)| *p > 0)
        .collect();
    let total: usize = multi.iter().map(|(_, p)| p).sum();
    if total == 0 || config.provenance.task_ids.is_empty() {
        return Vec::new();
    }
    (0..=k)
        .map(|r| {
            let right: usize = multi
                .iter()
                .map(|(t, _)| {
                    t.at(r)
                        .and_then(|rec| rec.check.as_ref())
                        .map_or(0, |c| c.parts.iter().filter(|p| p.correct).count())
                })
                .sum();
            Rate::new(right as u64, total as u64).expect("total > 0")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, task, R};
    use super::*;

    #[test]
    fn every_metric_on_a_hand_built_journal() {
        use R::*;
        let k = 2;
        let s = StopOn::Never;
        let mut records = Vec::new();
        // a: right throughout (kept after reviews).
        records.extend(task("a", &[Right, Kept, Kept], s, k));
        // b: raised, then fixed at round 1, kept.
        records.extend(task("b", &[Raised("KeyError"), Right, Kept], s, k));
        // c: right at 0, broken into a wrong answer at 2: a regression.
        records.extend(task("c", &[Right, Kept, Wrong], s, k));
        // d: wrong at 0, still wrong; then an error (carries wrong).
        records.extend(task("d", &[Wrong, Wrong, Raised("ValueError")], s, k));
        // e: killed at 0, no code at 1, right at 2.
        records.extend(task(
            "e",
            &[Killed(Verdict::TimeoutWall), NoCode, Right],
            s,
            k,
        ));
        // f: the endpoint failed at round 0.
        records.extend(task("f", &[Infra], s, k));
        let cfg = config(&["a", "b", "c", "d", "e", "f"], k, s);
        let m = summarize(&cfg, &records);

        let acc: Vec<u64> = m.accuracy_by_round.iter().map(|r| r.successes).collect();
        assert_eq!(acc, [2, 3, 3]); // a c | a b c | a b e
        assert!(m.accuracy_by_round.iter().all(|r| r.n == 6));
        assert!((m.delta_by_round[1] - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(m.solved_by_round, [2.0 / 6.0, 3.0 / 6.0, 4.0 / 6.0]);
        // Wrong at 0: b d e f; right at K among them: b e.
        let rec = m.recovery_rate.unwrap();
        assert_eq!((rec.successes, rec.n), (2, 4));
        // Repaired (got a round ≥ 1) among them: b d e.
        let rep = m.recovery_rate_repaired.unwrap();
        assert_eq!((rep.successes, rep.n), (2, 3));
        // Right at 0: a c; wrong at K: c.
        let reg = m.regression_rate.unwrap();
        assert_eq!((reg.successes, reg.n), (1, 2));

        // Carry-forward, all tasks in every denominator.
        let exec: Vec<u64> = m
            .exec_success_by_round
            .iter()
            .map(|r| r.successes)
            .collect();
        // r0: a c d ok; r1: a b c d (e's r1 had no code, its r0 was a kill);
        // r2: a b c e (d raised).
        assert_eq!(exec, [3, 4, 4]);
        let parse: Vec<u64> = m.parse_by_round.iter().map(|r| r.successes).collect();
        assert_eq!(parse, [3, 4, 5]);
        assert!(m.parse_by_round.iter().all(|r| r.n == 6));

        let f = &m.round0_failures;
        assert_eq!(f.len(), 4, "{f:?}");
        assert_eq!((f["KeyError"].tasks, f["KeyError"].fixed), (1, 1));
        assert_eq!((f["wrong_answer"].tasks, f["wrong_answer"].fixed), (1, 0));
        assert_eq!(f["timeout_wall"].fixed, 1);
        assert_eq!(f["timeout_wall"].ran_clean_later, 1);
        assert_eq!(f["infra_error"].tasks, 1);

        // Reviews: after a's r0 and r1, b's r1, c's r0 and r1, d's r0 and
        // r1; revised by c's r2 and d's r1 and r2.
        let r = &m.reviews;
        assert_eq!(r.prompts, 7, "{r:?}");
        assert_eq!(r.kept, 4);
        assert_eq!(r.revised, 3);
        assert_eq!(r.right_to_wrong, 1);
        assert_eq!(r.wrong_to_right, 0);

        // Kept answers and replies without code run nothing.
        assert_eq!(m.executions, 10);
        let kill = m.kill_rate.total.unwrap();
        assert_eq!((kill.successes, kill.n), (1, 10));
        assert_eq!(m.kill_rate.counts["timeout_wall"], 1);
        assert_eq!(m.verdicts["ok"], 7);
        assert_eq!(m.verdicts["error"], 2);
        let infra = m.infra_error_rate.unwrap();
        assert_eq!((infra.successes, infra.n), (1, 6));
        assert_eq!(m.tasks_finished, 6);
        assert_eq!(m.tokens.prompt, 100 * 16);
        assert_eq!(m.rounds_used_mean, 16.0 / 6.0);
        assert_eq!(m.stop_on, "never");
        assert!(!m.oracle_feedback);
        assert!(m.accuracy_by_fault.is_empty());
        assert!(m.multi_part_accuracy_by_round.is_empty());
    }

    #[test]
    fn a_stopped_task_carries_its_state_and_unfinished_tasks_count_as_wrong() {
        use R::*;
        let k = 3;
        let mut records = task("a", &[Raised("NameError"), Right], StopOn::Clean, k);
        // b: interrupted after round 0 (no final record).
        let mut b = task("b", &[Right], StopOn::Clean, k);
        b[0].stop = None;
        records.extend(b);
        let m = summarize(&config(&["a", "b", "c"], k, StopOn::Clean), &records);
        let acc: Vec<u64> = m.accuracy_by_round.iter().map(|r| r.successes).collect();
        assert_eq!(acc, [1, 2, 2, 2]);
        assert_eq!(m.tasks_finished, 1);
        // c has no record: wrong at 0, never repaired.
        let rep = m.recovery_rate_repaired.unwrap();
        assert_eq!((rep.successes, rep.n), (1, 1));
        let rec = m.recovery_rate.unwrap();
        assert_eq!((rec.successes, rec.n), (1, 2));
        assert_eq!(m.regression_rate.unwrap().successes, 0);
    }

    #[test]
    fn faults_and_multi_parts() {
        use R::*;
        let k = 1;
        let mut records = task("a", &[Raised("NameError"), Right], StopOn::Clean, k);
        records[0].fault = Some("undefined_name".into());
        let mut b = task(
            "b",
            &[Raised("NameError"), Raised("NameError")],
            StopOn::Clean,
            k,
        );
        b[0].fault = Some("undefined_name".into());
        records.extend(b);
        let mut c = task("c", &[Wrong, Right], StopOn::Correct, k);
        let part = |ok| crate::task::check::PartCheck {
            name: "x".into(),
            correct: ok,
            extracted: None,
            normalized: None,
            rule: "r".into(),
            tolerance: None,
        };
        c[0].check.as_mut().unwrap().parts = vec![part(true), part(false)];
        c[1].check.as_mut().unwrap().parts = vec![part(true), part(true)];
        records.extend(c);
        let m = summarize(&config(&["a", "b", "c"], k, StopOn::Correct), &records);
        let f = &m.accuracy_by_fault["undefined_name"];
        assert_eq!(f.tasks, 2);
        assert_eq!(f.round0.unwrap().successes, 0);
        assert_eq!(f.final_round.unwrap().successes, 1);
        let parts: Vec<(u64, u64)> = m
            .multi_part_accuracy_by_round
            .iter()
            .map(|r| (r.successes, r.n))
            .collect();
        assert_eq!(parts, [(1, 2), (2, 2)]);
        assert!(m.oracle_feedback);
    }

    #[test]
    fn resent_code_counts_repairs_that_change_nothing() {
        use R::*;
        let k = 2;
        let s = StopOn::Clean;
        let mut records = Vec::new();
        // a: raised, resent (re-wrapped only), then changed and right.
        let mut a = task("a", &[Raised("KeyError"), Raised("KeyError"), Right], s, k);
        a[0].code = Some("x = 1\nanswer = x\n".into());
        a[1].code = Some("x = 1   \n\nanswer = x".into());
        a[2].code = Some("x = 2\nanswer = x".into());
        records.extend(a);
        // b: raised, then no code: not a repair with code.
        records.extend(task("b", &[Raised("TypeError"), NoCode], s, k));
        let m = summarize(&config(&["a", "b"], k, s), &records);
        let resent = m.resent_code.unwrap();
        assert_eq!((resent.successes, resent.n), (1, 2));
        assert!(same_code("a\n\n b", "a\n b  \n"));
        assert!(!same_code("a\n b", "a\nb"));
    }
}
