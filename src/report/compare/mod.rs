//! `retrace compare`: two runs (or two arms of runs) paired on the tasks
//! both finished: per-round accuracy with McNemar's exact test and a
//! paired bootstrap interval of the difference and the minimum detectable
//! difference, recovery, kill rate by reason, latency by round, the tasks
//! that flipped, the protocol fingerprint fields that differ; and the CI
//! decision.
//! The type, [`compare`] (which a run's summary calls for its arms too),
//! pairing, statistics, the decision and the document (compare.md and
//! compare.html) live in their own file; the documents are [`Exporter`]s
//! of a [`CompareView`].

mod comparison;
mod compute;
mod decision;
mod document;
mod pairing;
mod protocol;
mod statistics;

use std::path::{Path, PathBuf};

pub use super::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
pub use comparison::Comparison;
pub use compute::{compare, Summaries};
pub use decision::{regressions, Judged, Thresholds};
pub use document::{html, markdown};
pub use pairing::{pair_arms, Side};
pub use protocol::{UnknownField, Vary};
pub use statistics::{LatencyRound, RoundComparison};

use super::error::RenderError;
use super::error::ReportError;
use super::export::{self, Exporter};
use super::metrics::ArmSummary;
use super::plots;
use super::plots::Plot;

/// Everything the compare documents are made from.
pub struct CompareView<'a> {
    /// Where the documents and the chart go.
    pub dir: &'a Path,
    pub judged: &'a [Judged],
    pub plots: &'a [Plot],
}

struct JsonExporter;
struct MarkdownExporter;
struct HtmlExporter;

impl<'a> Exporter<CompareView<'a>> for JsonExporter {
    fn file_name(&self) -> &'static str {
        "compare.json"
    }

    fn render(&self, view: &CompareView<'a>) -> Result<String, RenderError> {
        Ok(serde_json::to_string_pretty(view.judged)?)
    }
}

impl<'a> Exporter<CompareView<'a>> for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "compare.md"
    }

    fn render(&self, view: &CompareView<'a>) -> Result<String, RenderError> {
        Ok(markdown(view.judged, view.plots, view.dir))
    }
}

impl<'a> Exporter<CompareView<'a>> for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "compare.html"
    }

    fn render(&self, view: &CompareView<'a>) -> Result<String, RenderError> {
        Ok(html(view.judged, view.plots))
    }
}

/// Every compare document, in the order their files are written.
pub fn exporters<'a>() -> Vec<Box<dyn Exporter<CompareView<'a>>>> {
    vec![
        Box::new(JsonExporter),
        Box::new(MarkdownExporter),
        Box::new(HtmlExporter),
    ]
}

/// Writes `compare.json`, `compare.md` and `compare.html` (with the chart
/// inlined) into `dir`; returns the files written.
pub fn write(dir: &Path, judged: &[Judged]) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let runs: Vec<(String, &ArmSummary)> = judged
        .iter()
        .flat_map(|j| {
            // Short legend labels (run ids are long): side, model, arm.
            let c = &j.comparison;
            let (b, n) = (&j.summaries.0, &j.summaries.1);
            [
                (format!("BASE {} ({})", c.base_model, b.header.strategy), b),
                (format!("NEW {} ({})", c.new_model, n.header.strategy), n),
            ]
        })
        .collect();
    let labelled: Vec<(&str, &ArmSummary)> = runs.iter().map(|(l, s)| (l.as_str(), *s)).collect();
    let plots = plots::draw_comparison(&labelled, dir)?;
    let mut written: Vec<PathBuf> = plots.iter().flat_map(|p| p.files.clone()).collect();
    let view = CompareView {
        dir,
        judged,
        plots: &plots,
    };
    written.extend(export::write_each(&exporters(), &view, dir)?);
    Ok(written)
}

#[cfg(test)]
mod tests;
