//! Latency by phase (model, exec, install when present) as distributions:
//! one row per phase (and arm) with every round as a point, the quartile
//! box, the median and Tukey whiskers, on a log time axis since phases
//! differ by orders of magnitude.

use plotters::prelude::*;

use super::chart::{arm_groups, Chart};
use super::theme::{self, Area, Drawn, Swatch};
use crate::record::AttemptRecord;
use crate::util::stats::percentile;

/// Points drawn per row at most (evenly spaced in value order), so a
/// large run keeps a small SVG; the box uses every value.
const MAX_POINTS: usize = 400;
/// The shortest time the axis shows (values below sit on its edge).
const FLOOR_MS: f64 = 0.01;

struct Row {
    phase: &'static str,
    arm: Option<String>,
    color: RGBColor,
    /// Milliseconds, sorted.
    values: Vec<f64>,
}

impl Row {
    fn q(&self, p: f64) -> f64 {
        percentile(&self.values, p).unwrap_or(0.0)
    }

    /// Tukey whiskers: the extreme values within 1.5 IQR of the box.
    fn whiskers(&self) -> (f64, f64) {
        let (q1, q3) = (self.q(25.0), self.q(75.0));
        let reach = 1.5 * (q3 - q1);
        let lo = self.values.iter().copied().find(|v| *v >= q1 - reach);
        let hi = self.values.iter().rev().copied().find(|v| *v <= q3 + reach);
        (lo.unwrap_or(q1), hi.unwrap_or(q3))
    }
}

pub(super) struct Latency {
    rows: Vec<Row>,
}

impl Latency {
    /// None when no round has a timing (nothing was recorded).
    pub(super) fn of(arms: &[String], records: &[AttemptRecord]) -> Option<Latency> {
        type Pick = fn(&AttemptRecord) -> Option<f64>;
        let phases: [(&'static str, Pick); 3] = [
            ("model", |r| r.reply.as_ref().map(|_| r.timings_ms.model)),
            ("exec", |r| r.executed().then_some(r.timings_ms.exec)),
            ("install", |r| r.timings_ms.install),
        ];
        let groups = arm_groups(arms, records);
        let mut rows = Vec::new();
        for (p, (phase, pick)) in phases.iter().enumerate() {
            for (arm, recs) in &groups {
                let mut values: Vec<f64> = recs.iter().filter_map(|r| pick(r)).collect();
                if values.is_empty() {
                    continue;
                }
                values.sort_by(f64::total_cmp);
                rows.push(Row {
                    phase,
                    arm: arm.map(str::to_owned),
                    color: theme::color(p),
                    values,
                });
            }
        }
        (!rows.is_empty()).then_some(Latency { rows })
    }

    /// The axis in log10(ms): whole decades around every value.
    fn decades(&self) -> (f64, f64) {
        let all = self.rows.iter().flat_map(|r| r.values.iter().copied());
        let (min, max) = all.fold((f64::INFINITY, 0f64), |(lo, hi), v| {
            (if v > 0.0 { lo.min(v) } else { lo }, hi.max(v))
        });
        let lo = min.max(FLOOR_MS).log10().floor();
        let hi = max.max(FLOOR_MS).log10().ceil();
        (lo.min(hi - 1.0), hi.max(lo + 1.0))
    }
}

/// log10 of a time in ms, kept on the axis.
fn log_ms(v: f64, lo: f64) -> f64 {
    v.max(FLOOR_MS).log10().max(lo)
}

/// A decade as a time with its unit: 0.01 ms … 100 ms, 1 s, 10 s ….
pub(super) fn decade_label(exp: f64) -> String {
    let e = exp.round() as i32;
    match e {
        i32::MIN..=-1 => format!("{} ms", 10f64.powi(e)),
        0..=2 => format!("{} ms", 10i64.pow(e as u32)),
        _ => format!("{} s", 10i64.pow((e - 3) as u32)),
    }
}

fn millis(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

impl Chart for Latency {
    fn name(&self) -> &'static str {
        "latency"
    }

    fn title(&self) -> String {
        "Latency per round by phase (distribution)".into()
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let body = theme::titled(root, &self.title())?;
        let (area, legend_area) = theme::with_legend(&body);
        let (lo, hi) = self.decades();
        let n = self.rows.len() as f64;
        let mut chart = theme::frame(&area, lo..hi, 0.0..n, 48, 130)?;
        theme::mesh(&mut chart, 14)
            .disable_y_mesh()
            .y_labels(0)
            .x_labels((hi - lo) as usize + 1)
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    decade_label(*x)
                } else {
                    String::new()
                }
            })
            .x_desc("time per round (log scale)")
            .draw()?;

        for (i, row) in self.rows.iter().enumerate() {
            // The first row at the top.
            let yc = n - i as f64 - 0.5;
            let c = row.color;
            let stride = row.values.len().div_ceil(MAX_POINTS);
            let points = row.values.iter().step_by(stride).enumerate().map(|(k, v)| {
                // Golden-ratio jitter: spread, deterministic.
                let jitter = ((k as f64 * 0.618_034).fract() - 0.5) * 0.6;
                Circle::new((log_ms(*v, lo), yc + jitter), 2, c.mix(0.35).filled())
            });
            chart.draw_series(points)?;

            let (q1, q2, q3) = (row.q(25.0), row.q(50.0), row.q(75.0));
            let (w0, w1) = row.whiskers();
            let x = |v: f64| log_ms(v, lo);
            let h = 0.15;
            let line = |a: (f64, f64), b: (f64, f64), w: u32| {
                PathElement::new(vec![a, b], theme::TEXT.stroke_width(w))
            };
            chart.draw_series([
                line((x(w0), yc), (x(q1), yc), 1),
                line((x(q3), yc), (x(w1), yc), 1),
                line((x(w0), yc - h / 2.0), (x(w0), yc + h / 2.0), 1),
                line((x(w1), yc - h / 2.0), (x(w1), yc + h / 2.0), 1),
            ])?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x(q1), yc - h), (x(q3), yc + h)],
                c.mix(0.25).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x(q1), yc - h), (x(q3), yc + h)],
                c.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(line((x(q2), yc - h), (x(q2), yc + h), 3)))?;

            let name = match &row.arm {
                Some(a) => format!("{} · {}", row.phase, theme::short(a, 9)),
                None => row.phase.to_owned(),
            };
            let stats = format!("n={} · p50 {}", row.values.len(), millis(q2));
            theme::label_left(&area, &chart, yc, -9, &name, &theme::text(13))?;
            theme::label_left(&area, &chart, yc, 9, &stats, &theme::muted(11))?;
        }
        let mut entries: Vec<(String, RGBColor, Swatch)> = Vec::new();
        for row in &self.rows {
            if !entries.iter().any(|(p, _, _)| p == row.phase) {
                entries.push((row.phase.to_owned(), row.color, Swatch::Box));
            }
        }
        theme::legend(&legend_area, Some("phase"), &entries)?;
        let note = [
            "box: quartiles, bar: median,",
            "whiskers: 1.5 IQR,",
            "dots: rounds",
        ];
        for (k, line) in note.iter().enumerate() {
            let y = 30 + 22 * (entries.len() as i32 + 1) + 16 * k as i32;
            legend_area.draw_text(line, &theme::muted(11), (8, y))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_read_as_times() {
        assert_eq!(decade_label(-2.0), "0.01 ms");
        assert_eq!(decade_label(0.0), "1 ms");
        assert_eq!(decade_label(2.0), "100 ms");
        assert_eq!(decade_label(3.0), "1 s");
        assert_eq!(decade_label(4.0), "10 s");
    }
}
