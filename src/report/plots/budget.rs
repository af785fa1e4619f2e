//! Accuracy against budget (Olausson et al.'s pass@t view): one line per
//! arm through its points (mean cumulative tokens, or wall time, per task
//! after round r, Acc@r), so arms are compared at what they spent, not by
//! round.

use plotters::prelude::*;

use super::chart::Chart;
use super::theme::{self, Area, Drawn, Swatch};
use crate::report::metrics::{tokens_recorded, BudgetPoint};
use crate::report::Summary;

/// What a budget is counted in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Spend {
    Tokens,
    /// Model and execution time, in seconds.
    WallTime,
}

impl Spend {
    fn of(self, p: &BudgetPoint) -> f64 {
        match self {
            Spend::Tokens => p.tokens,
            Spend::WallTime => p.wall_ms / 1e3,
        }
    }
}

pub(super) struct Budget {
    spend: Spend,
    /// (arm, its points in round order), in legend order.
    series: Vec<(String, Vec<BudgetPoint>)>,
}

impl Budget {
    /// Against tokens. None when no arm has a recorded task, or no record
    /// counted tokens: every point would sit at 0.
    pub(super) fn tokens(s: &Summary) -> Option<Budget> {
        let series = series(s);
        let spent = tokens_recorded(series.iter().map(|(_, ps)| ps.as_slice()));
        spent.then_some(Budget {
            spend: Spend::Tokens,
            series,
        })
    }

    /// Against wall time (model + execution), which every round has.
    pub(super) fn wall_time(s: &Summary) -> Option<Budget> {
        let series = series(s);
        let spent = series
            .iter()
            .flat_map(|(_, ps)| ps)
            .any(|p| p.wall_ms > 0.0);
        spent.then_some(Budget {
            spend: Spend::WallTime,
            series,
        })
    }

    fn max_spend(&self) -> f64 {
        self.series
            .iter()
            .flat_map(|(_, ps)| ps.iter().map(|p| self.spend.of(p)))
            .fold(0.0, f64::max)
    }
}

/// Every arm with a recorded task, with its budget points.
fn series(s: &Summary) -> Vec<(String, Vec<BudgetPoint>)> {
    s.each_arm()
        .into_iter()
        .filter(|a| a.cost.rounds_used_mean > 0.0)
        .map(|a| {
            (
                a.header.strategy.clone(),
                a.self_repair.budget_curve.clone(),
            )
        })
        .filter(|(_, points)| !points.is_empty())
        .collect()
}

impl Chart for Budget {
    fn name(&self) -> &'static str {
        match self.spend {
            Spend::Tokens => "budget",
            Spend::WallTime => "budget_time",
        }
    }

    fn title(&self) -> String {
        match self.spend {
            Spend::Tokens => {
                "Accuracy against mean cumulative tokens per task (one point per round)"
            }
            Spend::WallTime => {
                "Accuracy against mean cumulative wall time per task (one point per round)"
            }
        }
        .into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title())?;
        let (area, legend_area) = theme::with_legend(&body);
        let x_max = theme::nice_ceiling(self.max_spend() * 1.05);
        let pad = x_max * 0.02;
        let mut chart = theme::frame(&area, -pad..x_max + pad, 0.0..104.0, 48, 64)?;
        let (x_desc, decimals) = match self.spend {
            Spend::Tokens => ("mean cumulative tokens per task (prompt + completion)", 0),
            Spend::WallTime => (
                "mean cumulative wall time per task, s (model + execution)",
                1,
            ),
        };
        theme::mesh(&mut chart, 14)
            .x_labels(6)
            .x_label_formatter(&|x| {
                if *x < 0.0 {
                    String::new()
                } else {
                    format!("{x:.decimals$}")
                }
            })
            .y_labels(6)
            .y_label_formatter(&theme::percent_tick)
            .x_desc(x_desc)
            .y_desc("Acc@r (% of tasks)")
            .draw()?;
        let mut entries = Vec::new();
        for (i, (arm, points)) in self.series.iter().enumerate() {
            let c = theme::color(i);
            let xy: Vec<(f64, f64)> = points
                .iter()
                .map(|p| (self.spend.of(p), 100.0 * p.accuracy))
                .collect();
            chart.draw_series(LineSeries::new(xy.clone(), c.stroke_width(3)))?;
            chart.draw_series(xy.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
            let k = points.len() - 1;
            entries.push((format!("{arm} (r = 0..{k})"), c, Swatch::Line));
        }
        theme::legend(&legend_area, Some("arm"), &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summarize;
    use crate::report::testing::two_arms;

    #[test]
    fn one_series_per_arm_through_its_budget_points() {
        let (cfg, records) = two_arms();
        let s = summarize(&cfg, &records);
        let b = Budget::tokens(&s).unwrap();
        let series: Vec<(&str, Vec<(f64, f64)>)> = b
            .series
            .iter()
            .map(|(arm, ps)| {
                let xy = ps.iter().map(|p| (p.tokens, p.accuracy)).collect();
                (arm.as_str(), xy)
            })
            .collect();
        assert_eq!(
            series,
            [
                ("fat", vec![(120.0, 0.5), (140.0, 4.0 / 6.0)]),
                ("dynamic", vec![(120.0, 0.5), (180.0, 5.0 / 6.0)]),
            ]
        );
        assert_eq!(b.max_spend(), 180.0);
        let t = Budget::wall_time(&s).unwrap();
        assert_eq!((t.name(), b.name()), ("budget_time", "budget"));
        let walls: Vec<f64> = t.series[1].1.iter().map(|p| t.spend.of(p)).collect();
        assert_eq!(
            walls,
            [0.016, 0.024],
            "dynamic's mean wall time, in seconds"
        );
    }

    #[test]
    fn no_chart_when_no_record_counted_tokens() {
        let (cfg, mut records) = two_arms();
        for r in &mut records {
            r.tokens = crate::model::Usage::ZERO;
        }
        let s = summarize(&cfg, &records);
        assert!(Budget::tokens(&s).is_none());
        assert!(
            Budget::wall_time(&s).is_some(),
            "time is measured all the same"
        );
        assert!(s.accuracy_at_budget.is_empty());
        // The curve itself stays: its times and accuracy are measured.
        assert_eq!(s.self_repair.budget_curve.len(), 2);
    }
}
