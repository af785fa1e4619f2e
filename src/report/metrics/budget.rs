//! What the rounds cost, cumulatively (Olausson et al.'s pass@t view):
//! each task's tokens and time up to round r, the arm's accuracy against
//! the mean of those, accuracy at a given budget by interpolation, and
//! the table of accuracy at budgets every arm can be compared at.

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use super::summary::ArmSummary;
use crate::record::AttemptRecord;
use crate::report::stats::median;

/// What a task spent on its rounds 0..=r (a stopped task spends nothing
/// more: its later rounds carry the same budget).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Spent {
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) model_ms: f64,
    pub(super) exec_ms: f64,
    /// The rounds' `total` time (model, execution and the harness between).
    pub(super) wall_ms: f64,
}

/// The budget of `records` (one task's) over their rounds ≤ `round`.
pub(super) fn spent(records: &[&AttemptRecord], round: usize) -> Spent {
    let mut s = Spent::default();
    for r in records.iter().filter(|r| r.round as usize <= round) {
        s.prompt_tokens = s.prompt_tokens.saturating_add(r.tokens.prompt());
        s.completion_tokens = s.completion_tokens.saturating_add(r.tokens.completion());
        s.model_ms += r.timings_ms.model;
        s.exec_ms += r.timings_ms.exec;
        s.wall_ms += r.timings_ms.total;
    }
    s
}

/// One point of an arm's accuracy-vs-budget curve: the means over all
/// tasks of the arm of what they spent on rounds 0..=r, and Acc@r.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetPoint {
    pub round: usize,
    /// Prompt + completion tokens.
    pub tokens: f64,
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub model_ms: f64,
    pub exec_ms: f64,
    pub wall_ms: f64,
    /// Acc@r (the answer carried forward), over all tasks.
    pub accuracy: f64,
}

/// The arm's points for r = 0..=K (none without tasks).
pub(super) fn curve(arm: &Arm) -> Vec<BudgetPoint> {
    if arm.tasks.is_empty() {
        return Vec::new();
    }
    let n = arm.n() as f64;
    (0..=arm.k())
        .map(|r| {
            let all: Vec<Spent> = arm.tasks.iter().map(|t| spent(&t.records, r)).collect();
            let mean = |f: fn(&Spent) -> f64| all.iter().map(f).sum::<f64>() / n;
            let prompt = mean(|s| s.prompt_tokens as f64);
            let completion = mean(|s| s.completion_tokens as f64);
            BudgetPoint {
                round: r,
                tokens: prompt + completion,
                prompt_tokens: prompt,
                completion_tokens: completion,
                model_ms: mean(|s| s.model_ms),
                exec_ms: mean(|s| s.exec_ms),
                wall_ms: mean(|s| s.wall_ms),
                accuracy: arm.count(|t| t.correct_at(r)) as f64 / n,
            }
        })
        .collect()
}

/// Accuracy at mean budget `tokens` along `points` (in round order, so
/// their budgets never decrease): linear between the two points around
/// it, the later point's accuracy where several sit at the budget. None
/// below the first point (the arm never ran that cheaply); beyond the last
/// its final accuracy: every task had stopped by then, so a larger budget
/// bought the arm nothing more under the run's rounds (the table's note
/// says so; rounds it did not run are never invented).
pub fn accuracy_at(points: &[BudgetPoint], tokens: f64) -> Option<f64> {
    let i = points.iter().rposition(|p| p.tokens <= tokens)?;
    let below = &points[i];
    let Some(above) = points.get(i + 1) else {
        return Some(below.accuracy);
    };
    // `above.tokens > tokens ≥ below.tokens`, so the span is not empty.
    let share = (tokens - below.tokens) / (above.tokens - below.tokens);
    Some(below.accuracy + share * (above.accuracy - below.accuracy))
}

/// One row of the comparable-budgets table: a budget and each arm's
/// accuracy there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetRow {
    /// The round whose budget this is.
    pub round: usize,
    /// The median over arms of the round's mean cumulative tokens.
    pub tokens: f64,
    /// Each arm's accuracy at `tokens`, in arm order.
    pub accuracy: Vec<ArmAccuracy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmAccuracy {
    pub arm: String,
    /// None when the budget is outside the arm's curve.
    pub accuracy: Option<f64>,
}

/// Some point of some arm spent tokens: synthetic models (oracle, replay)
/// report none, and a budget of 0 tokens compares nothing.
pub fn tokens_recorded<'a>(curves: impl IntoIterator<Item = &'a [BudgetPoint]>) -> bool {
    curves
        .into_iter()
        .any(|points| points.iter().any(|p| p.tokens > 0.0))
}

/// Accuracy of every arm at the budgets where arms can be compared: for
/// each round r, the median over arms of their round-r mean cumulative
/// tokens. `arms` are (name, summary) in arm order. None when no record
/// counted tokens.
pub fn comparable(arms: &[(&str, &ArmSummary)]) -> Vec<BudgetRow> {
    let curves = arms
        .iter()
        .map(|(_, a)| a.self_repair.budget_curve.as_slice());
    if !tokens_recorded(curves) {
        return Vec::new();
    }
    let rounds = arms
        .iter()
        .map(|(_, a)| a.self_repair.budget_curve.len())
        .max()
        .unwrap_or(0);
    (0..rounds)
        .filter_map(|r| {
            let at_r: Vec<f64> = arms
                .iter()
                .filter_map(|(_, a)| a.self_repair.budget_curve.get(r).map(|p| p.tokens))
                .collect();
            let tokens = median(at_r)?;
            let accuracy = arms
                .iter()
                .map(|(name, a)| ArmAccuracy {
                    arm: (*name).to_owned(),
                    accuracy: accuracy_at(&a.self_repair.budget_curve, tokens),
                })
                .collect();
            Some(BudgetRow {
                round: r,
                tokens,
                accuracy,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(round: usize, tokens: f64, accuracy: f64) -> BudgetPoint {
        BudgetPoint {
            round,
            tokens,
            prompt_tokens: tokens,
            completion_tokens: 0.0,
            model_ms: 0.0,
            exec_ms: 0.0,
            wall_ms: 0.0,
            accuracy,
        }
    }

    #[test]
    fn accuracy_at_a_budget_interpolates_between_the_points_around_it() {
        let points = [
            point(0, 100.0, 0.2),
            point(1, 300.0, 0.6),
            point(2, 400.0, 0.5),
        ];
        assert_eq!(accuracy_at(&points, 100.0), Some(0.2));
        assert_eq!(accuracy_at(&points, 200.0), Some(0.4));
        assert!((accuracy_at(&points, 250.0).unwrap() - 0.5).abs() < 1e-12);
        assert!((accuracy_at(&points, 350.0).unwrap() - 0.55).abs() < 1e-12);
        assert_eq!(accuracy_at(&points, 400.0), Some(0.5));
        // Never that cheap; beyond the last round, the final accuracy.
        assert_eq!(accuracy_at(&points, 99.9), None);
        assert_eq!(accuracy_at(&points, 400.1), Some(0.5));
        assert_eq!(accuracy_at(&[], 1.0), None);
        // Rounds that cost nothing more: the later point's accuracy.
        let flat = [point(0, 0.0, 0.0), point(1, 0.0, 1.0)];
        assert_eq!(accuracy_at(&flat, 0.0), Some(1.0));
        let tie = [
            point(0, 10.0, 0.1),
            point(1, 10.0, 0.3),
            point(2, 20.0, 0.5),
        ];
        assert!((accuracy_at(&tie, 15.0).unwrap() - 0.4).abs() < 1e-12);
    }
}
