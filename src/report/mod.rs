//! Reports of a run: metrics from the journal, and one exporter per output
//! format behind one small trait; [`write_all`] loops over them.
//!
//! - `metrics/` computes each arm's summary (a header and metric
//!   sections, each from its own small function; `metrics/list.rs` names
//!   every value), with `environment` and `installs` as the sections of
//!   their own; `stats` holds every statistic once; `summary` makes a
//!   run's [`Summary`] of them, each other arm paired with the baseline
//!   by `compare/`.
//! - `export` is the [`Exporter`] trait and the loop that writes files:
//!   `json`, `csv`, `markdown` and `html` for a run ([`exporters`]),
//!   `compare/` for two runs (or two arms), `task_cases` for the run's JUnit.
//! - `document/` is the one document model (headings, paragraphs, lists,
//!   tables, figures) with a Markdown and an HTML backend; `run_document`
//!   builds a run's (report.md and report.html), `compare/document.rs` a
//!   comparison's; `repair_tables` lays out the self-repair views.
//! - `plots/` draws the charts the documents embed; `markup` escapes text
//!   for Markdown, HTML and XML; `labels` holds the phrases every output shares.

mod cells;
pub mod compare;
mod csv;
pub mod document;
pub mod eee;
pub mod environment;
pub mod episode;
mod error;
pub mod export;
pub mod false_alarm;
#[cfg(test)]
mod hostile;
mod html;
pub mod inspect;
pub mod installs;
mod json;
pub mod junit;
mod labels;
mod markdown;
pub mod markup;
pub mod metrics;
pub mod model_identity;
pub mod plots;
#[cfg(test)]
mod props;
mod repair_tables;
pub mod rescore;
mod run_document;
pub mod stats;
mod summary;
pub mod task_cases;
mod task_rounds;
#[cfg(test)]
pub(crate) mod testing;
mod view;

use std::path::{Path, PathBuf};

use crate::record::{artifacts, AttemptRecord, RunConfig};
use crate::util::atomic_write::write_atomically;
use crate::util::fault::Point;

pub use error::{RenderError, ReportError};
pub use export::Exporter;
pub use installs::InstallMetrics;
pub use labels::{labels, limits_line, percent, power_sentence};
pub use metrics::{ArmOrigin, ArmSummary, Authorship, CodeOrigin};
pub use plots::Plot;
pub use stats::McNemar;
pub use summary::{summarize, Summary};
pub use view::RunView;

/// Every exporter of a run, in the order their files are written.
pub fn exporters<'a>() -> Vec<Box<dyn Exporter<RunView<'a>>>> {
    vec![
        Box::new(json::JsonExporter),
        Box::new(csv::CsvExporter),
        Box::new(markdown::MarkdownExporter),
        Box::new(html::HtmlExporter),
    ]
}

/// Summarises the journal and writes every report file (plots first,
/// since the documents embed them) into `dir`; returns the summary and the
/// paths written.
pub fn write_all(
    config: &RunConfig,
    records: &[AttemptRecord],
    dir: &Path,
) -> Result<(Summary, Vec<PathBuf>), ReportError> {
    let mut summary = summarize(config, records);
    let controls = false_alarm::read(dir)?;
    summary.false_alarm = false_alarm::FalseAlarm::of(config, records, &controls);
    let plots = plots::draw(&summary, records, dir)?;
    let mut written: Vec<PathBuf> = plots.iter().flat_map(|p| p.files.clone()).collect();
    let view = RunView {
        dir,
        config,
        records,
        summary: &summary,
        plots: &plots,
    };
    written.extend(export::write_each(&exporters(), &view, dir)?);
    written.extend(write_artifact_index(config, records, dir)?);
    Ok((summary, written))
}

/// `artifacts/index.json`, which task and arm each image directory holds
/// (see [`crate::record::artifacts`]), when the run saved any image.
fn write_artifact_index(
    config: &RunConfig,
    records: &[AttemptRecord],
    dir: &Path,
) -> Result<Option<PathBuf>, ReportError> {
    let index = artifacts::index(records, config.arm_names().len() > 1);
    if index.is_empty() {
        return Ok(None);
    }
    let path = dir.join(artifacts::INDEX);
    let mut text = serde_json::to_string_pretty(&index).expect("the index serialises");
    text.push('\n');
    let write = || {
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        write_atomically(&path, text.as_bytes(), Point::DuringSummary)
    };
    write().map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Some(path))
}
