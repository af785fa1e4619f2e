//! The statistics every report uses, one copy each: proportions with a
//! 95% Wilson interval, nearest-rank percentiles, McNemar's exact test, a
//! paired bootstrap interval, the minimum detectable difference of a
//! paired comparison, and [`PairedDifference`], which bundles the paired
//! ones for `compare` and the run's arm comparison alike.

use serde::{Deserialize, Serialize};

use crate::util::rng::SplitMix64;
use crate::util::stats::percentile;

/// A proportion with its 95% Wilson interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

    /// The standard error of the mean of the 0/1 outcomes (sample standard
    /// deviation, n − 1 in its denominator, over √n): the `stderr` other
    /// harnesses print beside an accuracy; 0 with one outcome.
    pub fn stderr(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let p = self.value;
        (p * (1.0 - p) / (self.n - 1) as f64).sqrt()
    }
}

/// The normal quantile of a two-sided α = 0.05 (z of 0.975).
const Z_ALPHA: f64 = 1.959_963_984_540_054;
/// The normal quantile of 80 % power (z of 0.8).
const Z_POWER: f64 = 0.841_621_233_572_914_3;

/// Bootstrap resamples, and the seed that makes the interval reproducible.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
pub const BOOTSTRAP_SEED: u64 = 0x5eed_c0de;

/// Wilson score interval at 95%.
pub fn wilson(successes: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = Z_ALPHA;
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let denom = 1.0 + z * z / n_f;
    let centre = (p + z * z / (2.0 * n_f)) / denom;
    let half = z * ((p * (1.0 - p) / n_f + z * z / (4.0 * n_f * n_f)).sqrt()) / denom;
    // At the edges the interval touches 0 or 1 exactly; the formula only
    // gets there up to rounding.
    let lo = if successes == 0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let hi = if successes >= n {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    (lo, hi)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub n: usize,
}

impl Percentiles {
    /// Nearest-rank p50 and p95 ([`percentile`]); all zero when there are no values.
    pub fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        let at = |p: f64| percentile(&values, p).unwrap_or(0.0);
        Percentiles {
            p50: at(50.0),
            p95: at(95.0),
            n: values.len(),
        }
    }
}

/// The median (the mean of the two middle values of an even count); none
/// of no values.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// McNemar's exact test on the discordant pairs of final correctness.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

    /// The test on paired outcomes: b counts `base` right and `new` wrong.
    pub fn of_pairs(base: &[bool], new: &[bool]) -> McNemar {
        let disc = |x: bool| {
            base.iter()
                .zip(new)
                .filter(|(p, q)| **p == x && **q != x)
                .count() as u64
        };
        McNemar::new(disc(true), disc(false))
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

/// The 95% percentile interval of mean(new) − mean(base) over `resamples`
/// resamples of the task pairs (with replacement), from a fixed seed: the
/// same journals always give the same interval.
pub fn paired_bootstrap(base: &[bool], new: &[bool], resamples: usize, seed: u64) -> (f64, f64) {
    let n = base.len().min(new.len());
    if n == 0 || resamples == 0 {
        return (0.0, 0.0);
    }
    let d: Vec<i64> = (0..n).map(|i| new[i] as i64 - base[i] as i64).collect();
    let mut rng = SplitMix64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: i64 = (0..n).map(|_| d[rng.below(n)]).sum();
            sum as f64 / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (
        percentile(&means, 2.5).unwrap_or(0.0),
        percentile(&means, 97.5).unwrap_or(0.0),
    )
}

/// The smallest accuracy difference |Acc(new) − Acc(base)| that McNemar's
/// test (two-sided α = 0.05) detects with 80 % power on `n` paired tasks,
/// `discordant` of which came out differently on the two sides.
///
/// Normal approximation (Connor 1987): with ψ the discordant proportion
/// and δ the difference, the test detects δ when
/// √n·δ = z₀.₉₇₅·√ψ + z₀.₈·√(ψ − δ²); the MDD is the δ solving it
/// (bisection; the left side grows faster than the right).
/// A difference δ implies at least δ discordance (every discordant pair one
/// way), so ψ is taken as max(ψ̂, δ). That is also the fallback when no pair
/// is discordant (ψ̂ = 0): the MDD is then the most favourable case, a lower
/// bound. `None` when not even a difference of 1 would be seen (n ≤ 3).
pub fn min_detectable_difference(n: u64, discordant: u64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let psi_hat = discordant.min(n) as f64 / n as f64;
    let root_n = (n as f64).sqrt();
    // > 0 when δ is detected at this power.
    let excess = |d: f64| {
        let psi = psi_hat.max(d);
        root_n * d - Z_ALPHA * psi.sqrt() - Z_POWER * (psi - d * d).max(0.0).sqrt()
    };
    if excess(1.0) < 0.0 {
        return None;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if excess(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// Two sides' correctness on the same tasks, compared: the difference of
/// accuracy, its paired bootstrap interval, McNemar's exact test and the
/// minimum detectable difference (what `compare` and the run's arm
/// comparison both report).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// mean(new) − mean(base), as a fraction.
    pub difference: f64,
    /// Paired bootstrap 95% interval of the difference.
    pub difference_ci: (f64, f64),
    /// b: base right and new wrong; c: the reverse.
    pub mcnemar: McNemar,
    /// [`min_detectable_difference`] of these pairs.
    pub min_detectable_difference: Option<f64>,
}

impl PairedDifference {
    /// `base[i]` and `new[i]` are one task's correctness on each side.
    pub fn of(base: &[bool], new: &[bool]) -> PairedDifference {
        let n = base.len().min(new.len());
        let mean = |v: &[bool]| {
            if n == 0 {
                0.0
            } else {
                v[..n].iter().filter(|x| **x).count() as f64 / n as f64
            }
        };
        let mcnemar = McNemar::of_pairs(&base[..n], &new[..n]);
        PairedDifference {
            difference: mean(new) - mean(base),
            difference_ci: paired_bootstrap(base, new, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
            mcnemar,
            min_detectable_difference: min_detectable_difference(n as u64, mcnemar.b + mcnemar.c),
        }
    }
}

/// The ids whose correctness flipped between the sides: to right (wrong
/// in base, right in new) or to wrong. `ids`, `base` and `new` are aligned.
pub fn flipped(ids: &[&str], base: &[bool], new: &[bool], to_right: bool) -> Vec<String> {
    ids.iter()
        .zip(base.iter().zip(new))
        .filter(|(_, (b, o))| **b != to_right && **o == to_right)
        .map(|(id, _)| (*id).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_takes_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 10.0]), Some(3.0));
        assert_eq!(median(vec![]), None);
    }

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
    fn wilson_endpoints_are_exact() {
        for n in 1..200 {
            assert_eq!(wilson(0, n).0, 0.0, "0/{n}");
            assert_eq!(wilson(n, n).1, 1.0, "{n}/{n}");
            assert!(wilson(1, n).0 > 0.0, "1/{n}");
            assert!(wilson(n - 1, n).1 < 1.0 || n == 1, "{}/{n}", n - 1);
        }
    }

    #[test]
    fn percentiles() {
        // Nearest rank, as docs/methodology.md documents: rank ⌈0.5 · 100⌉ = 50.
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!(p.p50, 50.0);
        assert_eq!(p.p95, 95.0);
        assert_eq!(Percentiles::of(vec![]).n, 0);
    }

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
        let pairs = McNemar::of_pairs(&[true, true, false, false], &[false, true, true, true]);
        assert_eq!((pairs.b, pairs.c), (1, 2));
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_difference() {
        let base: Vec<bool> = (0..40).map(|i| i % 2 == 0).collect();
        let new: Vec<bool> = (0..40).map(|i| i % 4 != 3).collect();
        let a = paired_bootstrap(&base, &new, 2000, 7);
        assert_eq!(a, paired_bootstrap(&base, &new, 2000, 7));
        assert_ne!(a, paired_bootstrap(&base, &new, 2000, 8));
        // The observed difference is 30/40 − 20/40 = 0.25.
        assert!(a.0 < 0.25 && 0.25 < a.1, "{a:?}");
        assert!(a.0 > 0.0 && a.1 < 0.5, "{a:?}");
        // No discordant pair: every resample has difference 0.
        assert_eq!(paired_bootstrap(&base, &base, 500, 1), (0.0, 0.0));
        // Every pair says NEW is worse: the interval is the point -1.
        assert_eq!(
            paired_bootstrap(&[true; 5], &[false; 5], 100, 3),
            (-1.0, -1.0)
        );
        assert_eq!(paired_bootstrap(&[], &[], 100, 3), (0.0, 0.0));
    }

    #[test]
    fn minimum_detectable_difference_by_hand() {
        let close = |got: Option<f64>, want: f64| {
            let got = got.expect("detectable");
            assert!((got - want).abs() < 5e-4, "{got} ≠ {want}");
        };
        // n = 100, 20 discordant pairs: ψ = 0.2. At δ = 0.1238:
        // √100·δ = 1.238 and 1.95996·√0.2 + 0.84162·√(0.2 − 0.01533)
        // = 0.8765 + 0.3617 = 1.2382, so the MDD is 12.4 points.
        close(min_detectable_difference(100, 20), 0.1238);
        // n = 20, no discordant pair: ψ = δ (the fallback). At δ = 0.3483:
        // √20·δ = 1.5577 and 1.95996·√0.3483 + 0.84162·√(0.3483 − 0.1213)
        // = 1.1567 + 0.4010 = 1.5577.
        close(min_detectable_difference(20, 0), 0.3483);
        // n = 10 with 3 discordant pairs: the bound ψ ≥ δ binds (δ > 0.3).
        // At δ = 0.6158: √10·δ = 1.9474 and 1.95996·√0.6158
        // + 0.84162·√(0.6158 − 0.3792) = 1.5381 + 0.4094 = 1.9475.
        close(min_detectable_difference(10, 3), 0.6158);
        // More tasks, a smaller MDD; more discordance, a larger one.
        let mdd = |n, d| min_detectable_difference(n, d).unwrap();
        assert!(mdd(400, 80) < mdd(100, 20));
        assert!(mdd(100, 40) > mdd(100, 20));
        // Three tasks cannot show any difference: √3 < 1.96.
        assert_eq!(min_detectable_difference(3, 0), None);
        assert_eq!(min_detectable_difference(0, 0), None);
        assert!(min_detectable_difference(4, 4).is_some());
    }

    #[test]
    fn a_paired_difference_bundles_the_paired_statistics() {
        let base = [true, true, false, false, true];
        let new = [false, true, true, true, true];
        let p = PairedDifference::of(&base, &new);
        assert!((p.difference - 0.2).abs() < 1e-12);
        assert_eq!((p.mcnemar.b, p.mcnemar.c), (1, 2));
        assert_eq!(
            p.difference_ci,
            paired_bootstrap(&base, &new, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
        );
        assert_eq!(p.min_detectable_difference, min_detectable_difference(5, 3));
        let ids = ["a", "b", "c", "d", "e"];
        assert_eq!(flipped(&ids, &base, &new, true), ["c", "d"]);
        assert_eq!(flipped(&ids, &base, &new, false), ["a"]);
    }
}
