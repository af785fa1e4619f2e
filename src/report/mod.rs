//! Reports of a run: metrics from the journal, and one exporter per output
//! format behind one small trait; [`write_all`] loops over them.

pub mod compare;
mod csv;
pub mod environment;
pub mod export;
mod html;
pub mod installs;
mod json;
pub mod junit;
mod markdown;
pub mod markup;
pub mod metrics;
pub mod plots;
pub mod rescore;
pub mod stats;
pub mod strategies;
pub mod task_cases;
mod task_rounds;
#[cfg(test)]
mod testing;

use std::path::{Path, PathBuf};

use crate::record::{AttemptRecord, RunConfig};

pub use export::{Exporter, RenderError};
pub use installs::InstallMetrics;
pub use metrics::{summarize, ArmSummary, Summary};
pub use plots::Plot;
pub use stats::McNemar;
pub use strategies::{ArmComparison, StrategyComparison};

/// Everything a report is made from: the run's configuration, its
/// journal, the metrics and the plots already drawn into the run directory.
pub struct RunView<'a> {
    /// The run directory (where artifacts are read from); `config.provenance.out_dir`
    /// is where the run was created and may be stale for a moved run.
    pub dir: &'a Path,
    pub config: &'a RunConfig,
    pub records: &'a [AttemptRecord],
    pub summary: &'a Summary,
    pub plots: &'a [Plot],
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("rendering {file}")]
    Render {
        file: &'static str,
        #[source]
        source: RenderError,
    },
    #[error("drawing plot {name}")]
    Plot {
        name: &'static str,
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
    let summary = summarize(config, records);
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
    Ok((summary, written))
}

/// A proportion as a percentage with its interval, for humans.
pub fn percent(rate: Option<&stats::Rate>) -> String {
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
    if s.header.synthetic_model {
        labels.push("SYNTHETIC MODEL (deterministic stand-in, not a real model)");
    }
    if s.header.oracle_feedback {
        labels.push("ORACLE FEEDBACK (--stop-on correct used ground truth)");
    }
    if s.header.unconfined {
        labels.push("UNCONFINED (--unsafe-no-sandbox: kernels ran without confinement)");
    }
    if !s.header.executor.is_local() {
        labels.push(
            "GATEWAY EXECUTOR (kernels ran on a Jupyter gateway: memory, CPU, processes, disk \
             and network were the gateway's limits, not retrace's)",
        );
    }
    labels
}

/// The run's limits as reports state them: with a gateway, which of them
/// retrace enforced and where the kernels ran.
pub fn limits_line(s: &Summary) -> String {
    match &s.header.executor {
        crate::kernel::ExecutorInfo::Local => s.header.limits.describe(),
        gateway => format!(
            "{}; retrace enforced the wall timeout ({:?}) and the output cap ({} bytes), the \
             rest is the kernelspec's",
            gateway.describe(),
            s.header.limits.timeout,
            s.header.limits.output_cap_bytes
        ),
    }
}
