//! Kill rate by reason: one bar per reason (per arm, side by side), as a
//! share of all executions, with the count on each bar.

use std::collections::BTreeSet;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::Chart;
use super::theme::{self, Area, Drawn, Swatch};
use crate::report::metrics::ArmSummary;
use crate::report::Summary;

/// Per reason: (% of executions, count).
type Bars = Vec<(f64, u64)>;

pub(super) struct Kills {
    reasons: Vec<String>,
    /// (label, executions, bars).
    series: Vec<(String, u64, Bars)>,
}

impl Kills {
    /// None when nothing ran or nothing was killed.
    pub(super) fn of(s: &Summary) -> Option<Kills> {
        let arms: Vec<(&str, &ArmSummary)> = if s.arms.is_empty() {
            vec![(s.header.model.as_str(), &s.baseline)]
        } else {
            s.arms
                .iter()
                .map(|a| (a.header.strategy.as_str(), a))
                .collect()
        };
        let reasons: Vec<String> = arms
            .iter()
            .flat_map(|(_, a)| a.execution.kill_rate.counts.keys().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if reasons.is_empty() {
            return None;
        }
        let series = arms
            .iter()
            .map(|(label, a)| {
                let bars = reasons
                    .iter()
                    .map(|reason| {
                        let share = a
                            .execution
                            .kill_rate
                            .by_reason
                            .get(reason)
                            .copied()
                            .unwrap_or(0.0);
                        let count = a
                            .execution
                            .kill_rate
                            .counts
                            .get(reason)
                            .copied()
                            .unwrap_or(0);
                        (100.0 * share, count)
                    })
                    .collect();
                ((*label).to_owned(), a.execution.executions, bars)
            })
            .collect();
        Some(Kills { reasons, series })
    }
}

impl Chart for Kills {
    fn name(&self) -> &'static str {
        "kills"
    }

    fn title(&self) -> String {
        "Kill rate by reason".into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title())?;
        let (area, legend_area) = theme::with_legend(&body);
        let top = self
            .series
            .iter()
            .flat_map(|(_, _, bars)| bars.iter().map(|b| b.0))
            .fold(0.0, f64::max);
        let ymax = theme::nice_ceiling(top * 1.15);
        let n = self.reasons.len() as f64;
        let mut chart = theme::frame(&area, 0.0..n, 0.0..ymax, 52, 64)?;
        theme::mesh(&mut chart, 14)
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_label_formatter(&|y| format!("{y:.1}%"))
            .x_desc("kill reason (verdict)")
            .y_desc("killed executions (% of executions)")
            .draw()?;

        let arms = self.series.len() as f64;
        let slot = 0.8 / arms;
        let count_style = theme::text(12).pos(Pos::new(HPos::Center, VPos::Bottom));
        let mut entries = Vec::new();
        for (j, (label, executions, bars)) in self.series.iter().enumerate() {
            let c = theme::color(j);
            for (i, (share, count)) in bars.iter().enumerate() {
                let x0 = i as f64 + 0.1 + j as f64 * slot;
                let x1 = x0 + slot * 0.9;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x1, *share)],
                    c.filled(),
                )))?;
                let (px, py) = chart.backend_coord(&((x0 + x1) / 2.0, *share));
                let (bx, by) = area.get_base_pixel();
                area.draw(&Text::new(
                    count.to_string(),
                    (px - bx, py - by - 3),
                    count_style.clone(),
                ))?;
            }
            let label = theme::short(label, 13);
            entries.push((format!("{label} (n={executions})"), c, Swatch::Box));
        }
        for (i, reason) in self.reasons.iter().enumerate() {
            theme::label_below(&area, &chart, i as f64 + 0.5, 6, reason, &theme::text(13))?;
        }
        theme::legend(&legend_area, Some("executions (count on bar)"), &entries)
    }
}
