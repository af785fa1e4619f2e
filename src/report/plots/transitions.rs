//! Error transitions: each round-0 failure kind against the task's state
//! at round K (fixed, the same failure, another failure), as a matrix of
//! task counts shaded by their share of the row; the summary's
//! failure-class matrix, folded to three columns.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::Chart;
use super::theme::{self, Area, Drawn};
use crate::report::metrics::{CORRECT, NOT_RECORDED};
use crate::report::Summary;

const STATES: [&str; 3] = ["fixed", "same failure", "other failure"];
/// Rows beyond this are merged into one, so labels stay readable.
const MAX_ROWS: usize = 14;

struct Row {
    label: String,
    /// Tasks by state, in [`STATES`] order.
    counts: [u64; 3],
}

impl Row {
    fn tasks(&self) -> u64 {
        self.counts.iter().sum()
    }
}

pub(super) struct Transitions {
    k: u32,
    rows: Vec<Row>,
}

impl Transitions {
    /// None when no task failed at round 0. Read from each arm's
    /// failure-class matrix: fixed is `correct` at K, the same failure is
    /// the row's own class at K, any other class is another failure.
    pub(super) fn of(summary: &Summary) -> Option<Transitions> {
        let k = summary.header.rounds;
        let named = !summary.arms.is_empty();
        let mut rows = Vec::new();
        for arm in summary.each_arm() {
            let mut arm_rows: Vec<Row> = arm
                .self_repair
                .failure_classes
                .iter()
                .filter(|(kind, _)| *kind != CORRECT && *kind != NOT_RECORDED)
                .map(|(kind, row)| {
                    let at = |class: &str| row.at_k.get(class).copied().unwrap_or(0);
                    let (fixed, same) = (at(CORRECT), at(kind));
                    Row {
                        label: if named {
                            format!("{}: {kind}", theme::short(&arm.header.strategy, 9))
                        } else {
                            kind.clone()
                        },
                        counts: [fixed, same, row.tasks - fixed - same],
                    }
                })
                .collect();
            // Most frequent first; ties keep the name order.
            arm_rows.sort_by_key(|r| std::cmp::Reverse(r.tasks()));
            rows.extend(arm_rows);
        }
        if rows.is_empty() {
            return None;
        }
        if rows.len() > MAX_ROWS {
            let rest = rows.split_off(MAX_ROWS - 1);
            let mut counts = [0; 3];
            for r in &rest {
                for (c, add) in counts.iter_mut().zip(r.counts) {
                    *c += add;
                }
            }
            let label = format!("{} other kinds", rest.len());
            rows.push(Row { label, counts });
        }
        Some(Transitions { k, rows })
    }

    /// (label, tasks by state) per row, top to bottom.
    #[cfg(test)]
    pub(super) fn rows(&self) -> impl Iterator<Item = (String, [u64; 3])> + '_ {
        self.rows.iter().map(|r| (r.label.clone(), r.counts))
    }
}

/// White to the palette's blue as `share` goes from 0 to 1.
fn shade(share: f64) -> RGBColor {
    let to = theme::color(0);
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * share * 0.9) as u8;
    RGBColor(mix(246, to.0), mix(248, to.1), mix(250, to.2))
}

impl Chart for Transitions {
    fn name(&self) -> &'static str {
        "transitions"
    }

    fn title(&self) -> String {
        format!("Round-0 failures and their state at round {}", self.k)
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let area = theme::titled(root, &self.title())?;
        let widest = self.rows.iter().map(|r| r.label.chars().count() + 8);
        let left = (widest.max().unwrap_or(10) as u32 * 8 + 20).clamp(100, 320);
        let n = self.rows.len() as f64;
        let mut chart = theme::frame(&area, 0.0..3.0, 0.0..n, 52, left)?;
        theme::mesh(&mut chart, 14)
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .x_desc(format!(
                "state at round {} (cell: tasks, share of the row)",
                self.k
            ))
            .y_desc("round-0 failure (tasks)")
            .draw()?;

        let centre = Pos::new(HPos::Center, VPos::Center);
        for (i, row) in self.rows.iter().enumerate() {
            let y1 = n - i as f64;
            let y0 = y1 - 1.0;
            let tasks = row.tasks().max(1) as f64;
            for (j, count) in row.counts.iter().enumerate() {
                let share = *count as f64 / tasks;
                let (x0, x1) = (j as f64, j as f64 + 1.0);
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (x1, y1)],
                    shade(share).filled(),
                )))?;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (x1, y1)],
                    theme::BACKGROUND.stroke_width(2),
                )))?;
                let ink = if share > 0.55 {
                    theme::BACKGROUND
                } else {
                    theme::TEXT
                };
                let label = if *count == 0 {
                    "0".to_owned()
                } else {
                    format!("{count} ({:.0}%)", 100.0 * share)
                };
                let (px, py) = chart.backend_coord(&(j as f64 + 0.5, y0 + 0.5));
                let (bx, by) = area.get_base_pixel();
                let style = (theme::FONT, 13).into_font().color(&ink).pos(centre);
                area.draw(&Text::new(label, (px - bx, py - by), style))?;
            }
            let label = format!("{} ({})", row.label, row.tasks());
            theme::label_left(&area, &chart, y0 + 0.5, 0, &label, &theme::text(13))?;
        }
        for (j, state) in STATES.iter().enumerate() {
            theme::label_below(&area, &chart, j as f64 + 0.5, 6, state, &theme::text(13))?;
        }
        Ok(())
    }
}
