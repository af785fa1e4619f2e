//! What the executions did and what the rounds cost: verdicts, the kill
//! rate by reason, infrastructure errors; latency by phase, tokens and
//! rounds per task.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::record::AttemptRecord;
use crate::report::stats::{Percentiles, Rate};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Executions {
    pub executions: u64,
    pub kill_rate: KillRate,
    pub verdicts: BTreeMap<String, u64>,
    pub infra_error_rate: Option<Rate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KillRate {
    /// Killed executions over all executions.
    pub total: Option<Rate>,
    /// Per reason (verdict), as a fraction of all executions.
    pub by_reason: BTreeMap<String, f64>,
    pub counts: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    pub latency_ms: Latency,
    pub tokens: Tokens,
    pub rounds_used_mean: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    pub model: Percentiles,
    pub exec: Percentiles,
    pub total: Percentiles,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub per_task_mean: f64,
    /// Completion tokens per second of model time, per round.
    pub per_second: Percentiles,
}

impl Executions {
    pub(super) fn of(arm: &Arm) -> Executions {
        let outcomes: Vec<_> = arm
            .records
            .iter()
            .filter_map(|r| r.outcome.as_ref())
            .collect();
        let executions = outcomes.len() as u64;
        let mut verdicts: BTreeMap<String, u64> = BTreeMap::new();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for o in &outcomes {
            *verdicts.entry(o.verdict.to_string()).or_default() += 1;
            if o.verdict.is_kill() {
                *counts.entry(o.verdict.to_string()).or_default() += 1;
            }
        }
        let killed: u64 = counts.values().sum();
        let kill_rate = KillRate {
            total: Rate::new(killed, executions),
            by_reason: counts
                .iter()
                .map(|(k, v)| (k.clone(), *v as f64 / executions.max(1) as f64))
                .collect(),
            counts,
        };
        let infra_tasks = arm.count(|t| t.records.iter().any(|r| r.infra_error.is_some()));
        Executions {
            executions,
            kill_rate,
            verdicts,
            infra_error_rate: Rate::new(infra_tasks, arm.n()),
        }
    }
}

impl Cost {
    /// Over the records of the run's own tasks.
    pub(super) fn of(arm: &Arm) -> Cost {
        let ours = arm.ours();
        let n = arm.n().max(1) as f64;
        let sum = |count: fn(&crate::model::Usage) -> u64| {
            ours.iter()
                .fold(0u64, |sum, r| sum.saturating_add(count(&r.tokens)))
        };
        let (prompt, completion) = (sum(|u| u.prompt()), sum(|u| u.completion()));
        Cost {
            latency_ms: Latency::of(&ours),
            tokens: Tokens {
                prompt,
                completion,
                per_task_mean: prompt.saturating_add(completion) as f64 / n,
                per_second: Percentiles::of(
                    ours.iter()
                        .filter(|r| r.timings_ms.model > 0.0 && r.tokens.completion() > 0)
                        .map(|r| r.tokens.completion() as f64 / (r.timings_ms.model / 1e3))
                        .collect(),
                ),
            },
            rounds_used_mean: ours.len() as f64 / n,
        }
    }
}

impl Latency {
    fn of(records: &[&AttemptRecord]) -> Latency {
        let phase = |f: fn(&AttemptRecord) -> Option<f64>| {
            Percentiles::of(records.iter().filter_map(|r| f(r)).collect())
        };
        Latency {
            model: phase(|r| Some(r.timings_ms.model)),
            exec: phase(|r| r.executed().then_some(r.timings_ms.exec)),
            total: phase(|r| Some(r.timings_ms.total)),
        }
    }
}
