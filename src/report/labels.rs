//! The phrases every output shares: labels that say what kind of run it
//! was, proportions with their interval, the limits line.

use super::metrics::ArmSummary;
use super::stats::Rate;
use crate::kernel::ExecutorInfo;

/// A proportion as a percentage with its interval, for humans.
pub fn percent(rate: Option<&Rate>) -> String {
    match rate {
        Some(r) => format!(
            "{:.1}% [{:.1}, {:.1}]",
            100.0 * r.value,
            100.0 * r.ci_low,
            100.0 * r.ci_high
        ),
        None => "n/a".into(),
    }
}

/// Task ids joined with commas, or `none`.
pub fn id_list(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

/// How to read a paired comparison of `n` tasks that found no difference:
/// its minimum detectable difference ([`super::stats::min_detectable_difference`]).
pub fn power_sentence(mdd: Option<f64>, n: u64) -> String {
    match mdd {
        Some(x) => format!(
            "minimum detectable difference {:.1} points at 80% power ({n} paired tasks, \
             two-sided α = 0.05): \"no difference\" means no difference larger than {:.1} \
             points could be seen",
            100.0 * x,
            100.0 * x
        ),
        None => format!("{n} paired tasks are too few to see any difference at 80% power"),
    }
}

/// The labels every output carries when they apply.
pub fn labels(s: &ArmSummary) -> Vec<&'static str> {
    let mut labels = Vec::new();
    if s.header.synthetic_model {
        labels.push("SYNTHETIC MODEL (deterministic stand-in, not a real model)");
    }
    if s.header.oracle_feedback {
        labels.push("ORACLE FEEDBACK (--stop-on correct used ground truth)");
    }
    if s.header.unconfined {
        labels.push("UNCONFINED (--unsafe-no-sandbox: kernels ran without confinement)");
    }
    match &s.header.executor {
        ExecutorInfo::Gateway(g) if g.retrace_launcher => labels.push(
            "GATEWAY EXECUTOR (kernels ran on the gateway's hosts, each confined there by \
             retrace's launcher, which reported the hosts' evidence)",
        ),
        ExecutorInfo::Gateway(_) => labels.push(
            "GATEWAY EXECUTOR (kernels ran on a Jupyter gateway: memory, CPU, processes, disk \
             and network were the gateway's limits, not retrace's)",
        ),
        ExecutorInfo::Local => {}
    }
    labels
}

/// The run's limits as reports state them: with a gateway, which of them
/// retrace enforced and where the kernels ran.
pub fn limits_line(s: &ArmSummary) -> String {
    match &s.header.executor {
        ExecutorInfo::Local => s.header.limits.describe(),
        gateway @ ExecutorInfo::Gateway(g) if g.retrace_launcher => format!(
            "{}; each host's retrace confined its kernels with the kernelspec's limits or those \
             the run asked for ({})",
            gateway.describe(),
            s.header.limits.describe()
        ),
        gateway => format!(
            "{}; retrace enforced the wall timeout ({:?}) and the output cap ({} bytes), the \
             rest is the kernelspec's",
            gateway.describe(),
            s.header.limits.timeout,
            s.header.limits.output_cap_bytes
        ),
    }
}
