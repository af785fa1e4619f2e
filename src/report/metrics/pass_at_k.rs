//! pass@k, the unbiased estimator of Chen et al. (2021) over the attempts
//! each task drew: the chance that k of its attempts, drawn without
//! replacement, hold at least one that answered correctly in its own
//! round.

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use crate::report::task_rounds::TaskRounds;

/// pass@k of an arm for one k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PassAtK {
    pub k: usize,
    /// Mean over all tasks of the arm.
    pub value: f64,
    /// Tasks that drew fewer than k attempts (they stopped early): each
    /// counts 1 if one of its attempts was correct, else 0.
    pub tasks_short: u64,
}

/// `1 − C(n−c, k) / C(n, k)` for `n` attempts with `c` correct, as the
/// product `1 − Π_{i=n−c+1..=n} (1 − k/i)` (no factorials, so no
/// overflow). With `n < k` it is 1 if `c > 0`, else 0: the attempts
/// drawn are all there is.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    if c == 0 {
        return 0.0;
    }
    if n < k || n - c < k {
        return 1.0;
    }
    let none = (n - c + 1..=n).fold(1.0, |p, i| p * (1.0 - k as f64 / i as f64));
    1.0 - none
}

/// Attempts a task drew (records with a reply) and those that answered
/// correctly in their own round.
fn draws(t: &TaskRounds) -> (u64, u64) {
    let drawn = t.records.iter().filter(|r| r.reply.is_some());
    let (mut n, mut c) = (0, 0);
    for r in drawn {
        n += 1;
        c += u64::from(r.answered && r.correct);
    }
    (n, c)
}

/// pass@k for k = 1..=K+1, over all tasks of the arm (none without tasks).
pub(super) fn of(arm: &Arm) -> Vec<PassAtK> {
    if arm.tasks.is_empty() {
        return Vec::new();
    }
    let all: Vec<(u64, u64)> = arm.tasks.iter().map(draws).collect();
    (1..=arm.k() as u64 + 1)
        .map(|k| PassAtK {
            k: k as usize,
            value: all.iter().map(|(n, c)| pass_at_k(*n, *c, k)).sum::<f64>() / all.len() as f64,
            tasks_short: all.iter().filter(|(n, _)| *n < k).count() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `1 − C(n−c, k)/C(n, k)` from the binomials themselves.
    fn direct(n: u64, c: u64, k: u64) -> f64 {
        let choose = |n: u64, k: u64| -> f64 {
            if k > n {
                return 0.0;
            }
            (0..k).fold(1.0, |p, i| p * (n - i) as f64 / (i + 1) as f64)
        };
        1.0 - choose(n - c, k) / choose(n, k)
    }

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        // 5 attempts, 2 correct: pass@1 = 2/5; pass@2 = 1 − C(3,2)/C(5,2) = 1 − 3/10.
        assert!((pass_at_k(5, 2, 1) - 0.4).abs() < 1e-12);
        assert!((pass_at_k(5, 2, 2) - 0.7).abs() < 1e-12);
        // pass@3 = 1 − C(3,3)/C(5,3) = 0.9; pass@4 = 1 (only 3 wrong).
        assert!((pass_at_k(5, 2, 3) - 0.9).abs() < 1e-12);
        assert_eq!(pass_at_k(5, 2, 4), 1.0);
        assert_eq!(pass_at_k(5, 0, 3), 0.0);
        assert_eq!(pass_at_k(3, 3, 1), 1.0);
        for (n, c, k) in [(10, 3, 4), (20, 1, 5), (200, 7, 10), (6, 5, 1)] {
            assert!(
                (pass_at_k(n, c, k) - direct(n, c, k)).abs() < 1e-9,
                "{n} {c} {k}"
            );
        }
        // Large n stays finite (no factorials).
        let big = pass_at_k(10_000, 10, 100);
        assert!(big.is_finite() && big > 0.09 && big < 0.10, "{big}");
        // Fewer draws than k: whether any was right.
        assert_eq!(pass_at_k(2, 1, 3), 1.0);
        assert_eq!(pass_at_k(2, 0, 3), 0.0);
    }
}
