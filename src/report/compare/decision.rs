//! The CI decision: whether NEW is worse than BASE beyond the thresholds.

use serde::Serialize;

use super::comparison::Comparison;
use super::compute::Summaries;
use crate::report::metrics::KillRate;

/// When NEW counts as worse than BASE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Largest allowed drop of last-round accuracy, in percentage points.
    /// Unset: a statistically significant drop fails (McNemar p < `alpha`
    /// with b > c).
    pub max_acc_drop: Option<f64>,
    /// Largest allowed rise of the kill rate, in percentage points.
    pub max_kill_rate_rise: Option<f64>,
    /// Largest allowed rise of the p50 round time, as a fraction of BASE's
    /// (0.2: NEW may be 20% slower).
    pub max_latency_rise: Option<f64>,
    pub alpha: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_acc_drop: None,
            max_kill_rate_rise: None,
            max_latency_rise: None,
            alpha: 0.05,
        }
    }
}

/// Why NEW is worse than BASE beyond the thresholds; empty when it is not.
pub fn regressions(c: &Comparison, t: &Thresholds) -> Vec<String> {
    let mut why = Vec::new();
    let last = c.last();
    let drop_pp = -100.0 * last.difference;
    match t.max_acc_drop {
        Some(max) if drop_pp > max + 1e-9 => why.push(format!(
            "Acc@{} dropped {drop_pp:.1} points (allowed {max})",
            last.round
        )),
        Some(_) => {}
        None if last.mcnemar.b > last.mcnemar.c && last.mcnemar.p_value < t.alpha => {
            why.push(format!(
                "Acc@{} dropped {drop_pp:.1} points, significantly (McNemar b={} c={} p={:.4} < {})",
                last.round, last.mcnemar.b, last.mcnemar.c, last.mcnemar.p_value, t.alpha
            ))
        }
        None => {}
    }
    if let Some(max) = t.max_kill_rate_rise {
        let rate = |k: &KillRate| k.total.map_or(0.0, |r| r.value);
        let rise = 100.0 * (rate(&c.new_kill_rate) - rate(&c.base_kill_rate));
        if rise > max + 1e-9 {
            why.push(format!("kill rate rose {rise:.1} points (allowed {max})"));
        }
    }
    if let Some(max) = t.max_latency_rise {
        let (b, n) = (c.base_latency_total.p50, c.new_latency_total.p50);
        if b > 0.0 && (n - b) / b > max + 1e-9 {
            why.push(format!(
                "p50 round time rose from {b:.0} ms to {n:.0} ms (+{:.0}%, allowed +{:.0}%)",
                100.0 * (n - b) / b,
                100.0 * max
            ));
        }
    }
    why
}

/// A comparison with its decision, as written and printed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Judged {
    #[serde(flatten)]
    pub comparison: Comparison,
    /// Empty: NEW is not worse beyond the thresholds.
    pub regressions: Vec<String>,
    /// Both sides summarized over the shared tasks (for the chart).
    #[serde(skip)]
    pub summaries: Summaries,
}
