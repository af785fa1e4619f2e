//! Charts of a run (plotters), written into the run directory as SVG and
//! PNG and embedded by the Markdown and HTML reports.
//!
//! Each chart is built from the summary and the journal first (nothing to
//! show: no chart), then drawn twice from the same code, once per backend.

mod budget;
mod chart;
mod curves;
mod glyphs;
mod kills;
mod latency;
mod strategies;
mod theme;
mod transitions;
mod verdicts;

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::error::RenderError;
use super::error::ReportError;
use super::metrics::ArmSummary;
use super::Summary;
use crate::record::AttemptRecord;
use crate::util::atomic_write::write_atomically;
use crate::util::fault::Point;
use chart::Chart;
use theme::{Area, Drawn};

/// One chart, drawn.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File stem, e.g. `recovery`.
    pub name: String,
    /// What it shows, for captions and alt text.
    pub title: String,
    /// The SVG text (inlined by the HTML report).
    pub svg: String,
    /// The files written (SVG and PNG), inside the run directory.
    pub files: Vec<PathBuf>,
}

/// Draws every chart that applies to the run into `dir/plots/`: a chart
/// without data is left out, never an error.
pub fn draw(
    summary: &Summary,
    records: &[AttemptRecord],
    dir: &Path,
) -> Result<Vec<Plot>, ReportError> {
    let arms = arms(summary);
    let mut plots = Vec::new();
    if let Some(c) = curves::Curves::recovery(summary) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = budget::Budget::tokens(summary) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = budget::Budget::wall_time(summary) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = kills::Kills::of(summary) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = verdicts::Verdicts::of(&arms, records) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = latency::Latency::of(&arms, records) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = transitions::Transitions::of(summary) {
        plots.push(render(&c, dir)?);
    }
    if let Some(c) = strategies::Strategies::of(summary) {
        plots.push(render(&c, dir)?);
    }
    Ok(plots)
}

/// The chart of `retrace compare`: accuracy by round of each run with its
/// 95% band, `runs` being (label, summary) pairs, written into
/// `dir/plots/comparison.{svg,png}` (none when no run has a task).
pub fn draw_comparison(runs: &[(&str, &ArmSummary)], dir: &Path) -> Result<Vec<Plot>, ReportError> {
    match curves::Curves::comparison(runs) {
        Some(c) => Ok(vec![render(&c, dir)?]),
        None => Ok(Vec::new()),
    }
}

/// The arms whose records a chart splits: none when the run has one
/// strategy (every record is its own then, whatever strategy it names).
fn arms(summary: &Summary) -> Vec<String> {
    summary
        .arms
        .iter()
        .map(|a| a.header.strategy.clone())
        .collect()
}

/// Draws `chart` as SVG and PNG into `dir/plots/`.
fn render(chart: &impl Chart, dir: &Path) -> Result<Plot, ReportError> {
    let name = chart.name();
    let failed = |source: RenderError| ReportError::Plot { name, source };
    theme::register_font().map_err(|e| failed(Box::new(e)))?;
    let font = theme::font().map_err(|e| failed(Box::new(e)))?;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, theme::SIZE).into_drawing_area();
        paint(chart, &root).map_err(|e| failed(Box::new(e)))?;
    }
    let (w, h) = theme::SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let bitmap = BitMapBackend::with_buffer(&mut rgb, theme::SIZE);
        let root = glyphs::Glyphs::new(bitmap, font).into_drawing_area();
        paint(chart, &root).map_err(|e| failed(Box::new(e)))?;
    }
    let png = encode_png(&rgb, w, h).map_err(|e| failed(Box::new(e)))?;

    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(|source| ReportError::Write {
        path: plots.clone(),
        source,
    })?;
    let mut files = Vec::new();
    for (ext, bytes) in [("svg", svg.as_bytes()), ("png", png.as_slice())] {
        let path = plots.join(format!("{name}.{ext}"));
        write_atomically(&path, bytes, Point::DuringSummary).map_err(|source| {
            ReportError::Write {
                path: path.clone(),
                source,
            }
        })?;
        files.push(path);
    }
    Ok(Plot {
        name: name.to_owned(),
        title: chart.title(),
        svg,
        files,
    })
}

fn paint<DB: DrawingBackend>(chart: &impl Chart, root: &Area<DB>) -> Drawn<DB> {
    theme::card(root)?;
    chart.draw(root)?;
    root.present()
}

/// 8-bit RGB rows as a PNG file.
fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, task, two_arms, R};
    use super::*;
    use crate::record::StopOn;
    use crate::report::summarize;
    use crate::sandbox::Verdict;

    /// Tasks that fail at round 0 in several ways, some fixed, one killed.
    fn journal() -> (crate::record::RunConfig, Vec<AttemptRecord>) {
        use R::*;
        let (k, s) = (2, StopOn::Clean);
        let mut records = Vec::new();
        records.extend(task("a", &[Right], s, k));
        records.extend(task("b", &[Raised("KeyError"), Right], s, k));
        let key = Raised("KeyError");
        records.extend(task("c", &[key, key, key], s, k));
        records.extend(task("d", &[key, Raised("ValueError"), Wrong], s, k));
        records.extend(task("e", &[Killed(Verdict::TimeoutWall), Right], s, k));
        records.extend(task("f", &[Wrong], s, k));
        let mut g = task("g", &[Raised("ModuleNotFoundError"), Right], s, k);
        g[0].timings_ms.install = Some(900.0);
        records.extend(g);
        for (i, r) in records.iter_mut().enumerate() {
            // Spread the timings so the distributions have a shape.
            r.timings_ms.model = 200.0 + 37.0 * i as f64;
            r.timings_ms.exec = 3.0 + 11.0 * (i % 5) as f64;
        }
        let ids = ["a", "b", "c", "d", "e", "f", "g"];
        (config(&ids, k, s), records)
    }

    /// The texts of an SVG's `<text>` elements, trimmed.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

    fn names(plots: &[Plot]) -> Vec<&str> {
        plots.iter().map(|p| p.name.as_str()).collect()
    }

    /// Both files exist, the SVG is one with the texts wanted in it, the PNG is a
    /// full-size image that is not blank.
    fn assert_drawn(plot: &Plot, dir: &Path, texts_wanted: &[&str]) {
        let svg_path = dir.join("plots").join(format!("{}.svg", plot.name));
        let png_path = dir.join("plots").join(format!("{}.png", plot.name));
        assert_eq!(plot.files, [svg_path.clone(), png_path.clone()]);
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert_eq!(svg, plot.svg);
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.trim_end().ends_with("</svg>"));
        let labels = texts(&svg);
        for t in texts_wanted {
            assert!(labels.contains(t), "{}: no `{t}` in {labels:?}", plot.name);
        }
        let png = std::fs::read(&png_path).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", plot.name);
        assert!(png.len() > 4000, "{}: {} bytes", plot.name, png.len());
        let mut reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), theme::SIZE);
        // Mostly the light card, with a fair share of ink (text, marks).
        let inked = pixels
            .chunks(3)
            .filter(|p| p.iter().any(|c| *c < 200))
            .count();
        let total = (info.width * info.height) as usize;
        assert!(inked > total / 100, "{}: {inked} inked pixels", plot.name);
        assert!(inked < total / 2, "{}: {inked} inked pixels", plot.name);
    }

    #[test]
    fn a_run_gets_every_chart_that_applies_as_svg_and_png() {
        let (cfg, records) = journal();
        let summary = summarize(&cfg, &records);
        let dir = tempfile::tempdir().unwrap();
        let plots = draw(&summary, &records, dir.path()).unwrap();
        assert_eq!(
            names(&plots),
            [
                "recovery",
                "budget",
                "budget_time",
                "kills",
                "verdicts",
                "latency",
                "transitions"
            ]
        );
        let by = |n: &str| plots.iter().find(|p| p.name == n).unwrap();
        let d = dir.path();
        assert_drawn(
            by("recovery"),
            d,
            &[
                "Acc@r (% of tasks)",
                "round r (0 = first attempt, then repair rounds)",
                "m (n=7)",
            ],
        );
        assert_drawn(
            by("budget"),
            d,
            &[
                "Acc@r (% of tasks)",
                "mean cumulative tokens per task (prompt + completion)",
                "fat (r = 0..2)",
            ],
        );
        assert_drawn(
            by("budget_time"),
            d,
            &[
                "mean cumulative wall time per task, s (model + execution)",
                "fat (r = 0..2)",
            ],
        );
        assert_drawn(
            by("kills"),
            d,
            &["killed executions (% of executions)", "timeout_wall"],
        );
        assert_drawn(
            by("verdicts"),
            d,
            &["executions (count)", "round r", "timeout_wall", "error"],
        );
        assert_drawn(
            by("latency"),
            d,
            &[
                "time per round (log scale)",
                "model",
                "exec",
                "install",
                "100 ms",
                "1 s",
            ],
        );
        assert_drawn(
            by("transitions"),
            d,
            &[
                "state at round 2 (cell: tasks, share of the row)",
                "round-0 failure (tasks)",
                "KeyError (3)",
            ],
        );
        for p in &plots {
            assert!(!p.title.is_empty());
        }
    }

    #[test]
    fn two_arms_get_a_strategies_chart_and_one_arm_none() {
        let (cfg, records) = two_arms();
        let summary = summarize(&cfg, &records);
        let dir = tempfile::tempdir().unwrap();
        let plots = draw(&summary, &records, dir.path()).unwrap();
        assert!(names(&plots).contains(&"strategies"), "{:?}", names(&plots));
        let strategies = plots.iter().find(|p| p.name == "strategies").unwrap();
        assert_drawn(
            strategies,
            dir.path(),
            &["Acc@K (% of tasks, 95% CI)", "fat (baseline)", "dynamic"],
        );
        // One line per arm, labelled by strategy.
        let recovery = plots.iter().find(|p| p.name == "recovery").unwrap();
        assert!(recovery.svg.contains("fat (n=6)") && recovery.svg.contains("dynamic (n=6)"));

        let (cfg, records) = journal();
        let plots = draw(&summarize(&cfg, &records), &records, dir.path()).unwrap();
        assert!(!names(&plots).contains(&"strategies"));
    }

    #[test]
    fn no_data_gives_no_chart_and_no_error() {
        let dir = tempfile::tempdir().unwrap();
        // Tasks selected, nothing recorded (interrupted before round 0).
        let cfg = config(&["a", "b"], 2, StopOn::Clean);
        let plots = draw(&summarize(&cfg, &[]), &[], dir.path()).unwrap();
        assert!(plots.is_empty(), "{:?}", names(&plots));
        // No task at all.
        let cfg = config(&[], 1, StopOn::Clean);
        assert!(draw(&summarize(&cfg, &[]), &[], dir.path())
            .unwrap()
            .is_empty());
        assert!(!dir.path().join("plots").exists());
        assert!(draw_comparison(&[], dir.path()).unwrap().is_empty());

        // Replies without code: nothing ran, so no execution charts; the
        // curve and the model latency remain.
        let records = task("a", &[R::NoCode, R::NoCode], StopOn::Clean, 1);
        let cfg = config(&["a"], 1, StopOn::Clean);
        let plots = draw(&summarize(&cfg, &records), &records, dir.path()).unwrap();
        assert_eq!(
            names(&plots),
            [
                "recovery",
                "budget",
                "budget_time",
                "latency",
                "transitions"
            ]
        );
        let latency = plots.iter().find(|p| p.name == "latency").unwrap();
        let labels = texts(&latency.svg);
        assert!(
            labels.contains(&"model") && !labels.contains(&"exec"),
            "{labels:?}"
        );

        // Every task right at once: no kill, no failure to follow.
        let records = task("a", &[R::Right], StopOn::Clean, 1);
        let plots = draw(&summarize(&cfg, &records), &records, dir.path()).unwrap();
        assert_eq!(
            names(&plots),
            ["recovery", "budget", "budget_time", "verdicts", "latency"]
        );
    }

    #[test]
    fn transitions_follow_each_round0_failure_to_round_k() {
        let (cfg, records) = journal();
        let summary = summarize(&cfg, &records);
        let t = transitions::Transitions::of(&summary).unwrap();
        let rows: Vec<(String, [u64; 3])> = t.rows().collect();
        // KeyError: b fixed, c still KeyError, d ends on a wrong answer.
        assert_eq!(
            rows,
            [
                ("KeyError".to_owned(), [1, 1, 1]),
                ("ModuleNotFoundError".to_owned(), [1, 0, 0]),
                ("timeout_wall".to_owned(), [1, 0, 0]),
                ("wrong_answer".to_owned(), [0, 1, 0]),
            ]
        );
        // The same tasks as the summary's round-0 failures.
        for (kind, counts) in &rows {
            let fate = &summary.answers.round0_failures[kind];
            assert_eq!(counts.iter().sum::<u64>(), fate.tasks, "{kind}");
            assert_eq!(counts[0], fate.fixed, "{kind}");
        }
    }

    #[test]
    fn verdicts_are_counted_by_round() {
        let (cfg, records) = journal();
        let _ = cfg;
        let v = verdicts::Verdicts::of(&[], &records).unwrap();
        let ok = |round: usize| v.count(round, 0, Verdict::Ok);
        let error = |round: usize| v.count(round, 0, Verdict::Error);
        // Round 0: a f ok; b c d g raised; e killed.
        assert_eq!(
            (ok(0), error(0), v.count(0, 0, Verdict::TimeoutWall)),
            (2, 4, 1)
        );
        // Round 1: b e g ok; c d raised. Round 2: d ok, c raised.
        assert_eq!((ok(1), error(1)), (3, 2));
        assert_eq!((ok(2), error(2)), (1, 1));
    }

    #[test]
    fn the_comparison_draws_one_line_per_run() {
        let (cfg, records) = journal();
        let base = summarize(&cfg, &records);
        let (cfg, records) = two_arms();
        let new = summarize(&cfg, &records);
        let dir = tempfile::tempdir().unwrap();
        let plots = draw_comparison(
            &[("base", &base.baseline), ("new", &new.baseline)],
            dir.path(),
        )
        .unwrap();
        assert_eq!(names(&plots), ["comparison"]);
        assert_drawn(
            &plots[0],
            dir.path(),
            &["Acc@r (% of tasks)", "base (n=7)", "new (n=6)"],
        );
    }
}
