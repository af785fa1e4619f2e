//! The verdict mix by round: how each round's executions ended, stacked
//! (one bar per round, per arm side by side).

use std::collections::HashMap;

use plotters::prelude::*;
use strum::IntoEnumIterator;

use super::chart::{arm_groups, Chart};
use super::theme::{self, Area, Drawn, Swatch};
use crate::record::AttemptRecord;
use crate::sandbox::Verdict;

pub(super) struct Verdicts {
    /// Verdicts that occur, in the order of [`Verdict`] (stacking order).
    verdicts: Vec<Verdict>,
    /// Arm names (empty for a one-arm run).
    arms: Vec<String>,
    /// Per round, per arm: executions by verdict.
    rounds: Vec<Vec<HashMap<Verdict, u64>>>,
}

impl Verdicts {
    /// None when no round executed anything.
    pub(super) fn of(arms: &[String], records: &[AttemptRecord]) -> Option<Verdicts> {
        let groups = arm_groups(arms, records);
        let last = records
            .iter()
            .filter(|r| r.executed())
            .map(|r| r.round as usize)
            .max()?;
        let mut rounds = vec![vec![HashMap::new(); groups.len()]; last + 1];
        for (j, (_, recs)) in groups.iter().enumerate() {
            for r in recs {
                if let Some(o) = &r.outcome {
                    *rounds[r.round as usize][j].entry(o.verdict).or_insert(0) += 1;
                }
            }
        }
        let verdicts = Verdict::iter()
            .filter(|v| rounds.iter().flatten().any(|m| m.contains_key(v)))
            .collect();
        Some(Verdicts {
            verdicts,
            arms: arms.to_vec(),
            rounds,
        })
    }

    /// Executions of `round` in arm `arm` that ended as `verdict`.
    #[cfg(test)]
    pub(super) fn count(&self, round: usize, arm: usize, verdict: Verdict) -> u64 {
        self.rounds[round][arm].get(&verdict).copied().unwrap_or(0)
    }
}

/// A fixed colour per verdict: clean runs green, exceptions orange, each
/// kind of kill its own.
fn verdict_color(v: Verdict) -> RGBColor {
    match v {
        Verdict::Ok => RGBColor(0, 158, 115),
        Verdict::Error => RGBColor(230, 159, 0),
        Verdict::TimeoutWall => RGBColor(213, 94, 0),
        Verdict::TimeoutCpu => RGBColor(204, 121, 167),
        Verdict::OomKilled => RGBColor(120, 60, 150),
        Verdict::MemoryError => RGBColor(166, 118, 29),
        Verdict::PidsLimit => RGBColor(0, 114, 178),
        Verdict::OutputLimit => RGBColor(86, 180, 233),
        Verdict::DiskLimit => RGBColor(102, 166, 30),
        Verdict::FdLimit => RGBColor(27, 158, 158),
        Verdict::LockLimit => RGBColor(140, 86, 75),
        Verdict::Crash => RGBColor(50, 50, 50),
        Verdict::KernelExit => RGBColor(140, 140, 140),
        Verdict::NetworkBlocked => RGBColor(90, 90, 160),
        Verdict::PolicyDenied => RGBColor(177, 89, 40),
        Verdict::CodeTooLarge => RGBColor(110, 110, 40),
        Verdict::InternalError => RGBColor(200, 30, 40),
    }
}

impl Chart for Verdicts {
    fn name(&self) -> &'static str {
        "verdicts"
    }

    fn title(&self) -> String {
        "Verdict mix by round".into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title())?;
        let (area, legend_area) = theme::with_legend(&body);
        let top = self
            .rounds
            .iter()
            .flatten()
            .map(|m| m.values().sum::<u64>())
            .max()
            .unwrap_or(0) as f64;
        let ymax = theme::nice_ceiling(top * 1.05).max(1.0);
        let n = self.rounds.len() as f64;
        let several = !self.arms.is_empty();
        let below = if several { 66 } else { 48 };
        let mut chart = theme::frame(&area, 0.0..n, 0.0..ymax, below, 64)?;
        theme::mesh(&mut chart, 14)
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_label_formatter(&|y| {
                if (y - y.round()).abs() < 1e-6 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc("round r")
            .y_desc("executions (count)")
            .draw()?;

        let per_round = self.rounds.first().map_or(1, Vec::len) as f64;
        let slot = 0.8 / per_round;
        for (i, arms) in self.rounds.iter().enumerate() {
            for (j, counts) in arms.iter().enumerate() {
                let x0 = i as f64 + 0.1 + j as f64 * slot;
                let x1 = x0 + slot * 0.9;
                let mut base = 0.0;
                for v in &self.verdicts {
                    let Some(&c) = counts.get(v) else { continue };
                    let topv = base + c as f64;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, topv)],
                        verdict_color(*v).filled(),
                    )))?;
                    // A hairline between segments keeps equal colours apart.
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, topv)],
                        theme::BACKGROUND.stroke_width(1),
                    )))?;
                    base = topv;
                }
                if several {
                    let arm = theme::short(&self.arms[j], 9);
                    let mid = (x0 + x1) / 2.0;
                    theme::label_below(&area, &chart, mid, 6, &arm, &theme::muted(11))?;
                }
            }
            let dy = if several { 24 } else { 6 };
            let label = format!("{i}");
            theme::label_below(&area, &chart, i as f64 + 0.5, dy, &label, &theme::text(13))?;
        }
        let entries: Vec<_> = self
            .verdicts
            .iter()
            .map(|v| (v.to_string(), verdict_color(*v), Swatch::Box))
            .collect();
        theme::legend(&legend_area, Some("verdict"), &entries)
    }
}
