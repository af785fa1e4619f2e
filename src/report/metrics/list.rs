//! Every metric of an arm as a named value, in one registry: a list of
//! small functions, each naming the values of one part of the summary.
//! `summary.csv` is this list row by row; a new metric that belongs in
//! the table is one line here.

use super::summary::ArmSummary;
use crate::report::stats::{Percentiles, Rate};

/// One value of an arm's metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    pub name: String,
    /// The round it is at; `None` for a value of the whole arm.
    pub round: Option<usize>,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A proportion with its interval and denominator; `None` when the
    /// denominator is empty.
    Rate(Option<Rate>),
    /// A count, mean, size or time.
    Plain(f64),
}

type Metrics = Vec<MetricValue>;

/// The registry, in the order the values are listed.
const REGISTRY: &[fn(&ArmSummary, &mut Metrics)] = &[
    by_round,
    rates,
    faults,
    failures,
    reviews,
    kills,
    latency,
    tokens,
    budget,
    pass_at_k,
    transitions,
    failure_classes,
    environment,
    installs,
    kernels,
    kernel_state,
];

/// Every metric value of one arm.
pub fn values(s: &ArmSummary) -> Vec<MetricValue> {
    let mut out = Vec::new();
    for part in REGISTRY {
        part(s, &mut out);
    }
    out
}

fn rate(out: &mut Metrics, name: &str, round: Option<usize>, r: Option<&Rate>) {
    out.push(MetricValue {
        name: name.into(),
        round,
        value: Value::Rate(r.copied()),
    });
}

fn plain(out: &mut Metrics, name: String, value: f64) {
    plain_at(out, name, None, value);
}

fn plain_at(out: &mut Metrics, name: String, round: Option<usize>, value: f64) {
    out.push(MetricValue {
        name,
        round,
        value: Value::Plain(value),
    });
}

fn p50_p95(out: &mut Metrics, prefix: &str, suffix: &str, p: &Percentiles) {
    plain(out, format!("{prefix}_p50{suffix}"), p.p50);
    plain(out, format!("{prefix}_p95{suffix}"), p.p95);
}

fn by_round(s: &ArmSummary, out: &mut Metrics) {
    let a = &s.answers;
    for (name, rates) in [
        ("accuracy", &a.accuracy_by_round),
        ("exec_success", &a.exec_success_by_round),
        ("parse", &a.parse_by_round),
        ("multi_part_accuracy", &a.multi_part_accuracy_by_round),
    ] {
        for (i, r) in rates.iter().enumerate() {
            rate(out, name, Some(i), Some(r));
        }
    }
}

fn rates(s: &ArmSummary, out: &mut Metrics) {
    for (name, r) in [
        ("recovery_rate", &s.answers.recovery_rate),
        ("recovery_rate_repaired", &s.answers.recovery_rate_repaired),
        ("regression_rate", &s.answers.regression_rate),
        ("resent_code", &s.repairs.resent_code),
        ("oscillating", &s.repairs.oscillating),
        ("cycling_tasks", &s.repairs.cycling_tasks),
        ("masked_repairs", &s.repairs.masked),
        ("repeated_error", &s.repairs.repeated_error),
        ("kill_rate", &s.execution.kill_rate.total),
        ("infra_error_rate", &s.execution.infra_error_rate),
    ] {
        rate(out, name, None, r.as_ref());
    }
}

fn faults(s: &ArmSummary, out: &mut Metrics) {
    for (fault, a) in &s.answers.accuracy_by_fault {
        let name = format!("accuracy_by_fault:{fault}");
        rate(out, &name, Some(0), a.round0.as_ref());
        rate(
            out,
            &name,
            Some(s.header.rounds as usize),
            a.final_round.as_ref(),
        );
    }
}

fn failures(s: &ArmSummary, out: &mut Metrics) {
    for (kind, fate) in &s.answers.round0_failures {
        plain(out, format!("round0_failures:{kind}"), fate.tasks as f64);
        plain(
            out,
            format!("round0_failures_fixed:{kind}"),
            fate.fixed as f64,
        );
    }
}

fn reviews(s: &ArmSummary, out: &mut Metrics) {
    let r = &s.repairs.reviews;
    plain(out, "review_prompts".into(), r.prompts as f64);
    plain(out, "review_kept".into(), r.kept as f64);
    plain(out, "review_revised".into(), r.revised as f64);
}

fn kills(s: &ArmSummary, out: &mut Metrics) {
    for (reason, v) in &s.execution.kill_rate.by_reason {
        plain(out, format!("kill_rate:{reason}"), *v);
    }
    for (class, row) in &s.self_repair.kill_recovery {
        plain(out, format!("kill_tasks:{class}"), row.tasks as f64);
        let recovery = format!("kill_recovery:{class}");
        rate(out, &recovery, None, row.recovery.as_ref());
        let within = format!("kill_repair_within_limits:{class}");
        rate(out, &within, None, row.within_limits.as_ref());
    }
}

fn latency(s: &ArmSummary, out: &mut Metrics) {
    let l = &s.cost.latency_ms;
    for (name, p) in [("model", &l.model), ("exec", &l.exec), ("total", &l.total)] {
        p50_p95(out, "latency_ms", &format!(":{name}"), p);
    }
}

fn tokens(s: &ArmSummary, out: &mut Metrics) {
    let t = &s.cost.tokens;
    plain(out, "tokens_prompt".into(), t.prompt as f64);
    plain(out, "tokens_completion".into(), t.completion as f64);
    plain(out, "tokens_per_task".into(), t.per_task_mean);
}

/// Mean cumulative tokens and time per task by round (the budget curve).
fn budget(s: &ArmSummary, out: &mut Metrics) {
    for p in &s.self_repair.budget_curve {
        let r = Some(p.round);
        plain_at(out, "budget_tokens".into(), r, p.tokens);
        plain_at(out, "budget_model_ms".into(), r, p.model_ms);
        plain_at(out, "budget_exec_ms".into(), r, p.exec_ms);
        plain_at(out, "budget_wall_ms".into(), r, p.wall_ms);
    }
}

fn pass_at_k(s: &ArmSummary, out: &mut Metrics) {
    for p in &s.self_repair.pass_at_k {
        plain(out, format!("pass_at_k:{}", p.k), p.value);
    }
}

/// Tasks by correctness at r−1 → r, per round r ≥ 1.
fn transitions(s: &ArmSummary, out: &mut Metrics) {
    for t in &s.self_repair.transitions {
        let r = Some(t.round);
        for (name, count) in [
            ("correct_to_correct", t.correct_to_correct),
            ("correct_to_incorrect", t.correct_to_incorrect),
            ("incorrect_to_correct", t.incorrect_to_correct),
            ("incorrect_to_incorrect", t.incorrect_to_incorrect),
        ] {
            plain_at(out, name.into(), r, count as f64);
        }
    }
}

/// Tasks and repair rate per round-0 class.
fn failure_classes(s: &ArmSummary, out: &mut Metrics) {
    for (class, row) in &s.self_repair.failure_classes {
        plain(out, format!("failure_class:{class}"), row.tasks as f64);
        rate(
            out,
            &format!("repair_rate:{class}"),
            None,
            row.repair_rate.as_ref(),
        );
    }
}

fn environment(s: &ArmSummary, out: &mut Metrics) {
    let r = s.environment.environment_error_rounds.as_ref();
    rate(out, "environment_error_rounds", None, r);
}

fn installs(s: &ArmSummary, out: &mut Metrics) {
    let Some(m) = &s.environment.installs else {
        return;
    };
    plain(out, "install_steps".into(), m.steps as f64);
    plain(out, "installs_per_task".into(), m.installs_per_task);
    plain(out, "install_tasks".into(), m.tasks_with_installs as f64);
    plain(out, "install_store_hits".into(), m.store_hits as f64);
    plain(out, "install_downloads".into(), m.downloads as f64);
    for (name, p) in [
        ("store_hit", &m.latency_ms_store_hit),
        ("download", &m.latency_ms_download),
    ] {
        if p.n > 0 {
            p50_p95(out, "install_latency_ms", &format!(":{name}"), p);
        }
    }
    plain(out, "install_failures".into(), m.failures as f64);
    plain(out, "install_denials".into(), m.denials as f64);
    for (reason, count) in &m.denials_by_reason {
        plain(out, format!("install_denials:{reason}"), *count as f64);
    }
    plain(out, "install_store_bytes".into(), m.store_bytes as f64);
}

/// `--execution` arms only.
fn kernel_state(s: &ArmSummary, out: &mut Metrics) {
    let Some(k) = &s.kernel_state else {
        return;
    };
    plain(out, "kernel_starts".into(), k.kernel_starts as f64);
    plain(out, "kernel_start_ms_total".into(), k.kernel_start_ms);
    plain(out, "replays".into(), k.replays as f64);
    plain(out, "replay_ms_total".into(), k.replay_ms);
    plain(out, "replays_diverged".into(), k.replays_diverged as f64);
    rate(out, "used_state", None, k.used_state.as_ref());
    rate(out, "lacked_state", None, k.lacked_state.as_ref());
    rate(
        out,
        "tasks_lacking_state",
        None,
        k.tasks_lacking_state.as_ref(),
    );
}

fn kernels(s: &ArmSummary, out: &mut Metrics) {
    let e = &s.environment;
    if let Some(p) = &e.kernel_start_ms {
        p50_p95(out, "kernel_start_ms", "", p);
    }
    if let Some(m) = &e.memory_peak_bytes {
        plain(out, "memory_peak_bytes_p50".into(), m.p50 as f64);
        plain(out, "memory_peak_bytes_max".into(), m.max as f64);
    }
    if let Some(bytes) = e.image_bytes {
        plain(out, "image_bytes".into(), bytes as f64);
    }
}
