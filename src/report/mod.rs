//! Reports of a run: metrics from the journal, and one exporter per output
//! format behind one small trait; [`write_all`] loops over them.

mod csv;
pub mod environment;
pub mod installs;
mod json;
pub mod junit;
mod markdown;
pub mod metrics;
pub mod strategies;
mod task_rounds;
#[cfg(test)]
mod testing;

use std::path::{Path, PathBuf};

pub use installs::InstallMetrics;
pub use metrics::{summarize, Summary};
pub use strategies::{ArmComparison, McNemar, StrategyComparison};

/// One output format of a run summary.
pub trait Exporter {
    /// File name inside the run directory.
    fn file_name(&self) -> &'static str;
    fn render(&self, summary: &Summary) -> Result<String, RenderError>;
}

/// Why an exporter could not render (a serializer's own error).
pub type RenderError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("rendering {file}")]
    Render {
        file: &'static str,
        #[source]
        source: RenderError,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Every exporter, in the order their files are written.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::JsonExporter),
        Box::new(csv::CsvExporter),
        Box::new(markdown::MarkdownExporter),
    ]
}

/// Writes every report file into `dir`; returns their paths.
pub fn write_all(summary: &Summary, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut written = Vec::new();
    for exporter in exporters() {
        let file = exporter.file_name();
        let path = dir.join(file);
        let text = exporter
            .render(summary)
            .map_err(|source| ReportError::Render { file, source })?;
        std::fs::write(&path, text).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// A proportion as a percentage with its interval, for humans.
pub fn percent(rate: Option<&metrics::Rate>) -> String {
    match rate {
        Some(r) => format!(
            "{:.1}% [{:.1}, {:.1}]",
            100.0 * r.value,
            100.0 * r.ci_low,
            100.0 * r.ci_high
        ),
        None => "n/a".into(),
    }
}

/// The labels every output carries when they apply.
pub fn labels(s: &Summary) -> Vec<&'static str> {
    let mut labels = Vec::new();
    if s.synthetic_model {
        labels.push("SYNTHETIC MODEL (deterministic stand-in, not a real model)");
    }
    if s.oracle_feedback {
        labels.push("ORACLE FEEDBACK (--stop-on correct used ground truth)");
    }
    if s.unconfined {
        labels.push("UNCONFINED (--unsafe-no-sandbox: kernels ran without confinement)");
    }
    labels
}
