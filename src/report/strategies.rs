//! Package strategies side by side: each non-baseline arm against the
//! baseline (the first `--strategy`) on the tasks both finished, with
//! McNemar's exact test on the paired final correctness.

use serde::{Deserialize, Serialize};

use super::metrics::Rate;
use super::task_rounds::TaskRounds;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyComparison {
    /// The first strategy of the run.
    pub baseline: String,
    /// One per other arm, in `--strategy` order.
    pub arms: Vec<ArmComparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmComparison {
    pub strategy: String,
    /// Tasks finished in both arms (an interrupted task is not paired).
    pub shared_tasks: u64,
    /// Acc@K of the baseline on the shared tasks.
    pub baseline_accuracy: Option<Rate>,
    /// Acc@K of this arm on the shared tasks.
    pub accuracy: Option<Rate>,
    /// Acc@r of both arms on the shared tasks, r = 0..=K (empty when no
    /// task is shared).
    pub accuracy_by_round: Vec<PairedAccuracy>,
    pub mcnemar: McNemar,
}

/// Acc@r of the baseline and of the arm on the same tasks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedAccuracy {
    pub round: u32,
    pub baseline: Rate,
    pub arm: Rate,
}

/// McNemar's exact test on the discordant pairs of final correctness.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    /// Baseline right, arm wrong.
    pub b: u64,
    /// Baseline wrong, arm right.
    pub c: u64,
    /// Two-sided exact binomial p-value: min(1, 2·P[X ≤ min(b, c)]) with
    /// X ~ Bin(b + c, ½); 1 when there is no discordant pair.
    pub p_value: f64,
}

impl McNemar {
    pub fn new(b: u64, c: u64) -> McNemar {
        McNemar {
            b,
            c,
            p_value: exact_p(b, c),
        }
    }
}

/// min(1, 2·P[X ≤ min(b, c)]), X ~ Bin(b + c, ½). Terms are summed in log
/// space so that large counts neither overflow nor underflow.
fn exact_p(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let n_f = n as f64;
    // ln(C(n, i) / 2^n), from i = 0 upward.
    let mut ln_term = -n_f * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for i in 0..=b.min(c) {
        if i > 0 {
            ln_term += ((n - i + 1) as f64 / i as f64).ln();
        }
        tail += ln_term.exp();
    }
    (2.0 * tail).min(1.0)
}

/// Each arm after the first against the first. `arms` are in `--strategy`
/// order, each arm's tasks in the run's `task_ids` order.
pub(super) fn compare(k: usize, arms: &[(String, Vec<TaskRounds>)]) -> StrategyComparison {
    let (baseline_name, baseline) = &arms[0];
    let compared = arms[1..]
        .iter()
        .map(|(name, tasks)| {
            let shared: Vec<(&TaskRounds, &TaskRounds)> = baseline
                .iter()
                .zip(tasks)
                .filter(|(a, b)| a.finished() && b.finished())
                .collect();
            let n = shared.len() as u64;
            let count = |pick: &dyn Fn(&TaskRounds, &TaskRounds) -> bool| {
                shared.iter().filter(|(a, o)| pick(a, o)).count() as u64
            };
            let base_at = |r: usize| count(&|a, _| a.correct_at(r));
            let arm_at = |r: usize| count(&|_, o| o.correct_at(r));
            let accuracy_by_round = if n == 0 {
                Vec::new()
            } else {
                (0..=k)
                    .map(|r| PairedAccuracy {
                        round: r as u32,
                        baseline: Rate::new(base_at(r), n).expect("n > 0"),
                        arm: Rate::new(arm_at(r), n).expect("n > 0"),
                    })
                    .collect()
            };
            let b = count(&|a, o| a.correct_at(k) && !o.correct_at(k));
            let c = count(&|a, o| !a.correct_at(k) && o.correct_at(k));
            ArmComparison {
                strategy: name.clone(),
                shared_tasks: n,
                baseline_accuracy: Rate::new(base_at(k), n),
                accuracy: Rate::new(arm_at(k), n),
                accuracy_by_round,
                mcnemar: McNemar::new(b, c),
            }
        })
        .collect();
    StrategyComparison {
        baseline: baseline_name.clone(),
        arms: compared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_values() {
        let close = |b, c, want: f64| {
            let p = McNemar::new(b, c).p_value;
            assert!((p - want).abs() < 1e-12, "b={b} c={c}: {p} ≠ {want}");
        };
        // 2 · (1/64)
        close(0, 6, 0.031_25);
        close(6, 0, 0.031_25);
        // 2 · (1 + 10 + 45) / 1024
        close(2, 8, 0.109_375);
        // 2 · (1 + 5) / 32
        close(1, 4, 0.375);
        close(0, 0, 1.0);
        // Symmetric and capped at 1.
        close(5, 5, 1.0);
        close(3, 4, 1.0);
        // Large counts stay finite: 2·P[X ≤ 0] with n = 2000 underflows to 0.
        let p = McNemar::new(0, 2000).p_value;
        assert!((0.0..1e-300).contains(&p), "{p}");
        let p = McNemar::new(900, 1100).p_value;
        assert!(p > 0.0 && p < 1e-5, "{p}");
    }
}
