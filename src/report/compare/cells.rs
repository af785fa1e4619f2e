//! The cells of the comparison's document.

use super::comparison::Comparison;
use super::decision::Judged;
use super::statistics::RoundComparison;
pub(super) use crate::report::labels::id_list as ids;
use crate::report::labels::{percent, power_sentence};
use crate::report::metrics::KillRate;
use crate::report::stats::Percentiles;

/// One round of the comparison table, cell by cell (Markdown and HTML).
pub(super) fn round_cells(r: &RoundComparison) -> [String; 7] {
    [
        r.round.to_string(),
        percent(Some(&r.base)),
        percent(Some(&r.new)),
        pp(r.difference),
        format!("[{}, {}]", pp(r.difference_ci.0), pp(r.difference_ci.1)),
        format!("{} / {}", r.mcnemar.b, r.mcnemar.c),
        format!("{:.4}", r.mcnemar.p_value),
    ]
}

fn pp(x: f64) -> String {
    format!("{:+.1}", 100.0 * x)
}

/// `p50 / p95`, or a dash when the round had no such time.
pub(super) fn p50_p95(p: &Percentiles) -> String {
    if p.n == 0 {
        "–".into()
    } else {
        format!("{:.0} / {:.0}", p.p50, p.p95)
    }
}

fn kill_reasons(c: &Comparison) -> Vec<(String, u64, u64)> {
    let mut reasons: Vec<&String> = c
        .base_kill_rate
        .counts
        .keys()
        .chain(c.new_kill_rate.counts.keys())
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons
        .into_iter()
        .map(|r| {
            let get = |k: &KillRate| k.counts.get(r).copied().unwrap_or(0);
            (r.clone(), get(&c.base_kill_rate), get(&c.new_kill_rate))
        })
        .collect()
}

/// The metric rows both documents print (metric, BASE, NEW): recovery,
/// the kill rate and the kills by reason.
pub(super) fn metric_rows(c: &Comparison) -> Vec<(String, String, String)> {
    let mut rows = vec![
        (
            "recovery rate".to_string(),
            percent(c.base_recovery.as_ref()),
            percent(c.new_recovery.as_ref()),
        ),
        (
            "kill rate".to_string(),
            percent(c.base_kill_rate.total.as_ref()),
            percent(c.new_kill_rate.total.as_ref()),
        ),
    ];
    for (reason, b, n) in kill_reasons(c) {
        rows.push((format!("kills: {reason}"), b.to_string(), n.to_string()));
    }
    rows
}

/// Where the two sides' kernels ran, when either was not local: the
/// comparison then also compares executors (their limits differ).
pub(super) fn executors(c: &Comparison) -> Option<String> {
    if c.base_executor.is_local() && c.new_executor.is_local() {
        return None;
    }
    Some(format!(
        "Executors: {} → {}.",
        c.base_executor.describe(),
        c.new_executor.describe()
    ))
}

/// The last round's minimum detectable difference, as a sentence.
pub(super) fn power(c: &Comparison) -> String {
    let line = power_sentence(
        c.last().min_detectable_difference,
        c.shared_tasks.len() as u64,
    );
    format!("Power (Acc@{}): {line}.", c.last().round)
}

/// The protocol fields that differ: field, BASE, NEW, and whether the
/// difference was declared.
pub(super) fn protocol_rows(c: &Comparison) -> Vec<[String; 4]> {
    c.protocol_differences
        .iter()
        .map(|d| {
            let declared = !c.undeclared_differences.iter().any(|u| u.name == d.name);
            [
                d.name.clone(),
                d.left.clone(),
                d.right.clone(),
                if declared { "yes" } else { "NO" }.to_string(),
            ]
        })
        .collect()
}

/// The warning both documents open with when a comparison compares more
/// than was declared (written only with `--allow-differences`).
pub(super) fn undeclared_banner(judged: &[Judged]) -> Option<String> {
    let mut names: Vec<&str> = judged
        .iter()
        .flat_map(|j| &j.comparison.undeclared_differences)
        .map(|d| d.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    (!names.is_empty()).then(|| {
        format!(
            "UNDECLARED PROTOCOL DIFFERENCES (--allow-differences): the runs also differ in {}, \
             which --vary did not name; the numbers below compare those too.",
            names.join(", ")
        )
    })
}
