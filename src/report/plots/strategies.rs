//! Package strategies side by side (runs with several arms): final
//! accuracy and the share of executed rounds lost to the environment, each
//! arm with its 95% interval.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::Chart;
use super::theme::{self, Area, Drawn};
use crate::report::stats::Rate;
use crate::report::Summary;

struct Panel {
    title: &'static str,
    y_desc: &'static str,
    /// Per arm, in `--strategy` order.
    rates: Vec<Option<Rate>>,
}

pub(super) struct Strategies {
    arms: Vec<String>,
    baseline: String,
    panels: [Panel; 2],
}

impl Strategies {
    /// None unless the run has several arms.
    pub(super) fn of(s: &Summary) -> Option<Strategies> {
        if s.arms.len() < 2 {
            return None;
        }
        Some(Strategies {
            arms: s.arms.iter().map(|a| a.header.strategy.clone()).collect(),
            baseline: s.header.strategy.clone(),
            panels: [
                Panel {
                    title: "final accuracy",
                    y_desc: "Acc@K (% of tasks, 95% CI)",
                    rates: s
                        .arms
                        .iter()
                        .map(|a| a.answers.accuracy_by_round.last().copied())
                        .collect(),
                },
                Panel {
                    title: "rounds lost to the environment",
                    y_desc: "env-error rounds (% of executed, 95% CI)",
                    rates: s
                        .arms
                        .iter()
                        .map(|a| a.environment.environment_error_rounds)
                        .collect(),
                },
            ],
        })
    }

    fn panel<DB: DrawingBackend>(&self, area: &Area<DB>, p: &Panel) -> Drawn<DB> {
        let area = area.titled(p.title, theme::text(15))?;
        let n = self.arms.len() as f64;
        // Headroom above 100% for the value printed over a full bar.
        let mut chart = theme::frame(&area, 0.0..n, 0.0..112.0, 40, 64)?;
        theme::mesh(&mut chart, 13)
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_label_formatter(&theme::percent_tick)
            .y_desc(p.y_desc)
            .draw()?;
        let value_style = theme::text(12).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, (arm, rate)) in self.arms.iter().zip(&p.rates).enumerate() {
            let c = theme::color(i);
            let (x0, x1) = (i as f64 + 0.2, i as f64 + 0.8);
            let mid = i as f64 + 0.5;
            let label = if *arm == self.baseline {
                format!("{} (baseline)", theme::short(arm, 10))
            } else {
                theme::short(arm, 14)
            };
            theme::label_below(&area, &chart, mid, 6, &label, &theme::text(13))?;
            let Some(r) = rate else {
                theme::label_below(&area, &chart, mid, -24, "n/a", &theme::muted(12))?;
                continue;
            };
            let (v, lo, hi) = (100.0 * r.value, 100.0 * r.ci_low, 100.0 * r.ci_high);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, v)],
                c.mix(0.8).filled(),
            )))?;
            let whisker = |a: (f64, f64), b: (f64, f64)| {
                PathElement::new(vec![a, b], theme::TEXT.stroke_width(2))
            };
            chart.draw_series([
                whisker((mid, lo), (mid, hi)),
                whisker((mid - 0.08, lo), (mid + 0.08, lo)),
                whisker((mid - 0.08, hi), (mid + 0.08, hi)),
            ])?;
            let (px, py) = chart.backend_coord(&(mid + 0.1, v));
            let (bx, by) = area.get_base_pixel();
            let text = format!("{v:.0}% ({}/{})", r.successes, r.n);
            area.draw(&Text::new(
                text,
                (px - bx, py - by - 8),
                value_style.clone(),
            ))?;
        }
        Ok(())
    }
}

impl Chart for Strategies {
    fn name(&self) -> &'static str {
        "strategies"
    }

    fn title(&self) -> String {
        "Strategies side by side".into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title())?;
        let halves = body.split_evenly((1, 2));
        for (half, panel) in halves.iter().zip(&self.panels) {
            self.panel(half, panel)?;
        }
        Ok(())
    }
}
