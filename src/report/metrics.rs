//! Run metrics from the journal, with the definitions of DESIGN.md:
//! Acc@r with the answer carried forward after a task stops, recovery and
//! regression rates, exec-success@r, parse@r, kill rate by reason, infra
//! errors, latency percentiles and tokens. Proportions carry a 95% Wilson
//! interval. No task is ever dropped from a denominator.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::harness::{AttemptRecord, RunConfig, StopOn, SCHEMA_VERSION};
use crate::sandbox::{SandboxLimits, Verdict};

/// A proportion with its 95% Wilson interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub successes: u64,
    pub n: u64,
}

impl Rate {
    pub fn new(successes: u64, n: u64) -> Option<Rate> {
        if n == 0 {
            return None;
        }
        let (lo, hi) = wilson(successes, n);
        Some(Rate {
            value: successes as f64 / n as f64,
            ci_low: lo,
            ci_high: hi,
            successes,
            n,
        })
    }
}

/// Wilson score interval at 95%.
pub fn wilson(successes: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let denom = 1.0 + z * z / n_f;
    let centre = (p + z * z / (2.0 * n_f)) / denom;
    let half = z * ((p * (1.0 - p) / n_f + z * z / (4.0 * n_f * n_f)).sqrt()) / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub n: usize,
}

impl Percentiles {
    pub fn of(mut values: Vec<f64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let idx = ((values.len() as f64 - 1.0) * q).round() as usize;
            values[idx]
        };
        Percentiles {
            p50: at(0.5),
            p95: at(0.95),
            n: values.len(),
        }
    }
}

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    pub suite: String,
    pub model: String,
    /// The model is a deterministic stand-in (oracle, replay), not a model.
    pub synthetic_model: bool,
    pub model_info: serde_json::Value,
    /// `--stop-on correct`: stopping used ground truth.
    pub oracle_feedback: bool,
    pub strategy: String,
    /// Kernels ran without confinement (`--unsafe-no-sandbox`).
    pub unconfined: bool,
    pub limits: SandboxLimits,
    pub tasks: usize,
    /// Tasks with every round recorded (the rest were interrupted).
    pub tasks_finished: usize,
    pub rounds: u32,
    /// Acc@r for r = 0..=rounds.
    pub accuracy_by_round: Vec<Rate>,
    /// Acc@r − Acc@(r−1); the first entry is Acc@0.
    pub delta_by_round: Vec<f64>,
    /// Correct at any round ≤ r (an upper bound, oracle-like).
    pub solved_by_round: Vec<f64>,
    pub recovery_rate: Option<Rate>,
    pub regression_rate: Option<Rate>,
    pub exec_success_by_round: Vec<Option<Rate>>,
    pub parse_by_round: Vec<Option<Rate>>,
    pub executions: u64,
    pub kill_rate: KillRate,
    pub verdicts: BTreeMap<String, u64>,
    pub infra_error_rate: Option<Rate>,
    pub latency_ms: Latency,
    pub tokens: Tokens,
    pub rounds_used_mean: f64,
}

/// Computes the summary of a run from its records.
pub fn summarize(config: &RunConfig, records: &[AttemptRecord]) -> Summary {
    let k = config.rounds as usize;
    let mut by_task: HashMap<&str, Vec<&AttemptRecord>> = HashMap::new();
    for r in records {
        by_task.entry(r.task_id.as_str()).or_default().push(r);
    }
    for rounds in by_task.values_mut() {
        rounds.sort_by_key(|r| r.round);
    }
    let n = config.task_ids.len() as u64;

    // correct_i(r), carrying the last state forward after a task stopped;
    // a task without records counts as wrong.
    let correct_at = |id: &str, round: usize| -> bool {
        by_task
            .get(id)
            .and_then(|rs| rs.iter().rev().find(|r| r.round as usize <= round))
            .is_some_and(|r| r.correct)
    };
    let mut accuracy = Vec::new();
    let mut solved = Vec::new();
    for round in 0..=k {
        let right = config
            .task_ids
            .iter()
            .filter(|id| correct_at(id, round))
            .count() as u64;
        accuracy.push(Rate::new(right, n.max(1)).expect("n ≥ 1"));
        let any = config
            .task_ids
            .iter()
            .filter(|id| (0..=round).any(|r| correct_at(id, r)))
            .count();
        solved.push(any as f64 / n.max(1) as f64);
    }
    let delta = accuracy
        .iter()
        .enumerate()
        .map(|(i, a)| a.value - if i == 0 { 0.0 } else { accuracy[i - 1].value })
        .collect();
    let wrong0: Vec<&String> = config
        .task_ids
        .iter()
        .filter(|id| !correct_at(id, 0))
        .collect();
    let right0: Vec<&String> = config
        .task_ids
        .iter()
        .filter(|id| correct_at(id, 0))
        .collect();
    let recovered = wrong0.iter().filter(|id| correct_at(id, k)).count() as u64;
    let regressed = right0.iter().filter(|id| !correct_at(id, k)).count() as u64;

    let mut exec_success = Vec::new();
    let mut parse = Vec::new();
    for round in 0..=k {
        let at: Vec<&&AttemptRecord> = records_at(&by_task, round);
        let ok = at
            .iter()
            .filter(|r| r.outcome.as_ref().is_some_and(|o| o.verdict == Verdict::Ok))
            .count() as u64;
        exec_success.push(Rate::new(ok, at.len() as u64));
        let answered = at.iter().filter(|r| r.answered).count() as u64;
        parse.push(Rate::new(answered, at.len() as u64));
    }

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

    let infra_tasks = config
        .task_ids
        .iter()
        .filter(|id| {
            by_task
                .get(id.as_str())
                .is_some_and(|rs| rs.iter().any(|r| r.infra_error.is_some()))
        })
        .count() as u64;
    let finished = config
        .task_ids
        .iter()
        .filter(|id| {
            by_task
                .get(id.as_str())
                .is_some_and(|rs| rs.iter().any(|r| r.is_final()))
        })
        .count();
    let tokens_prompt: u64 = records.iter().map(|r| r.tokens.prompt_tokens).sum();
    let tokens_completion: u64 = records.iter().map(|r| r.tokens.completion_tokens).sum();

    Summary {
        schema_version: SCHEMA_VERSION,
        run_id: config.run_id.clone(),
        suite: config.suite.clone(),
        model: config.model.clone(),
        synthetic_model: config.synthetic_model,
        model_info: config.model_info.clone(),
        oracle_feedback: config.stop_on == StopOn::Correct,
        strategy: config.strategy.clone(),
        unconfined: !config.sandbox.confined,
        limits: config.limits,
        tasks: config.task_ids.len(),
        tasks_finished: finished,
        rounds: config.rounds,
        accuracy_by_round: accuracy,
        delta_by_round: delta,
        solved_by_round: solved,
        recovery_rate: Rate::new(recovered, wrong0.len() as u64),
        regression_rate: Rate::new(regressed, right0.len() as u64),
        exec_success_by_round: exec_success,
        parse_by_round: parse,
        executions,
        kill_rate,
        verdicts,
        infra_error_rate: Rate::new(infra_tasks, n),
        latency_ms: Latency {
            model: Percentiles::of(records.iter().map(|r| r.timings_ms.model).collect()),
            exec: Percentiles::of(
                records
                    .iter()
                    .filter(|r| r.executed())
                    .map(|r| r.timings_ms.exec)
                    .collect(),
            ),
            total: Percentiles::of(records.iter().map(|r| r.timings_ms.total).collect()),
        },
        tokens: Tokens {
            prompt: tokens_prompt,
            completion: tokens_completion,
            per_task_mean: (tokens_prompt + tokens_completion) as f64 / n.max(1) as f64,
            per_second: Percentiles::of(
                records
                    .iter()
                    .filter(|r| r.timings_ms.model > 0.0 && r.tokens.completion_tokens > 0)
                    .map(|r| r.tokens.completion_tokens as f64 / (r.timings_ms.model / 1e3))
                    .collect(),
            ),
        },
        rounds_used_mean: records.len() as f64 / n.max(1) as f64,
    }
}

fn records_at<'a>(
    by_task: &'a HashMap<&str, Vec<&'a AttemptRecord>>,
    round: usize,
) -> Vec<&'a &'a AttemptRecord> {
    by_task
        .values()
        .filter_map(|rs| rs.iter().find(|r| r.round as usize == round))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values() {
        // 8 of 10: the textbook interval is about [0.490, 0.943].
        let (lo, hi) = wilson(8, 10);
        assert!((lo - 0.4902).abs() < 1e-3, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-3, "{hi}");
        let (lo, hi) = wilson(0, 5);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.4 && hi < 0.5);
        assert!(Rate::new(1, 0).is_none());
    }

    #[test]
    fn percentiles() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!(p.p50, 51.0);
        assert_eq!(p.p95, 95.0);
        assert_eq!(Percentiles::of(vec![]).n, 0);
    }
}
