//! Acc@r by round, one line per series with its 95% Wilson band: the
//! recovery curve of a run (per arm, or the model's) and the chart of
//! `retrace compare` (per run).

use plotters::prelude::*;

use super::chart::Chart;
use super::theme::{self, Area, Drawn, Swatch};
use crate::report::metrics::ArmSummary;
use crate::report::stats::Rate;
use crate::report::Summary;

pub(super) struct Curves {
    name: &'static str,
    title: String,
    /// (label, Acc@r for r = 0..), in legend order.
    series: Vec<(String, Vec<Rate>)>,
}

impl Curves {
    /// One line per arm (labelled by strategy), else the model's.
    pub(super) fn recovery(s: &Summary) -> Option<Curves> {
        let series: Vec<(String, Vec<Rate>)> = if s.arms.is_empty() {
            vec![(s.header.model.clone(), s.answers.accuracy_by_round.clone())]
        } else {
            s.arms
                .iter()
                .map(|a| {
                    (
                        a.header.strategy.clone(),
                        a.answers.accuracy_by_round.clone(),
                    )
                })
                .collect()
        };
        let with_tasks = recorded(s) || s.arms.iter().any(recorded);
        Curves {
            name: "recovery",
            title: "Recovery: Acc@r by round (95% Wilson band)".into(),
            series,
        }
        .non_empty(with_tasks)
    }

    /// One line per run.
    pub(super) fn comparison(runs: &[(&str, &ArmSummary)]) -> Option<Curves> {
        let with_tasks = runs.iter().any(|(_, s)| recorded(s));
        Curves {
            name: "comparison",
            title: "Acc@r by round of each run (95% Wilson band)".into(),
            series: runs
                .iter()
                .map(|(label, s)| ((*label).to_owned(), s.answers.accuracy_by_round.clone()))
                .collect(),
        }
        .non_empty(with_tasks)
    }

    fn non_empty(self, with_tasks: bool) -> Option<Curves> {
        let points = self.series.iter().any(|(_, r)| !r.is_empty());
        (with_tasks && points).then_some(self)
    }

    fn last_round(&self) -> usize {
        self.series
            .iter()
            .map(|(_, r)| r.len().saturating_sub(1))
            .max()
            .unwrap_or(0)
    }
}

/// Some task of the run has a record: a run interrupted before its first
/// round has no curve to show (its zeros would be no measurement).
fn recorded(s: &ArmSummary) -> bool {
    s.header.tasks > 0 && s.cost.rounds_used_mean > 0.0
}

impl Chart for Curves {
    fn name(&self) -> &'static str {
        self.name
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title)?;
        let (area, legend_area) = theme::with_legend(&body);
        let k = self.last_round() as f64;
        let pad = if k == 0.0 { 0.5 } else { 0.2 };
        // Headroom above 100% keeps a perfect score's markers whole.
        let mut chart = theme::frame(&area, -pad..k + pad, 0.0..104.0, 48, 64)?;
        let rounds = self.last_round() + 1;
        theme::mesh(&mut chart, 14)
            .disable_x_mesh()
            .x_labels(rounds.min(12))
            .x_label_formatter(&|x| {
                let r = x.round();
                if (x - r).abs() < 1e-6 && r >= 0.0 {
                    format!("{r:.0}")
                } else {
                    String::new()
                }
            })
            .y_labels(6)
            .y_label_formatter(&theme::percent_tick)
            .x_desc("round r (0 = first attempt, then repair rounds)")
            .y_desc("Acc@r (% of tasks)")
            .draw()?;

        let mut entries = Vec::new();
        for (i, (label, rates)) in self.series.iter().enumerate() {
            let c = theme::color(i);
            // Series side by side around each round, so equal curves
            // stay visible.
            let dodge = (i as f64 - (self.series.len() - 1) as f64 / 2.0) * 0.03;
            let at = |f: &dyn Fn(&Rate) -> f64| -> Vec<(f64, f64)> {
                rates
                    .iter()
                    .enumerate()
                    .map(|(r, rate)| (r as f64 + dodge, 100.0 * f(rate)))
                    .collect()
            };
            let (lo, hi) = (at(&|r| r.ci_low), at(&|r| r.ci_high));
            if rates.len() > 1 {
                let band: Vec<(f64, f64)> = lo.iter().chain(hi.iter().rev()).copied().collect();
                chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.15).filled())))?;
            } else {
                // One round: no band to span, an interval bar instead.
                for (l, h) in lo.iter().zip(&hi) {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![*l, *h],
                        c.stroke_width(2),
                    )))?;
                }
            }
            let value = at(&|r| r.value);
            chart.draw_series(LineSeries::new(value.clone(), c.stroke_width(3)))?;
            chart.draw_series(value.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
            let n = rates.first().map_or(0, |r| r.n);
            entries.push((format!("{label} (n={n})"), c, Swatch::Line));
        }
        theme::legend(&legend_area, Some("series (tasks)"), &entries)
    }
}
