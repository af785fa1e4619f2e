//! The run as its exporters see it.

use std::path::Path;

use super::plots::Plot;
use super::Summary;
use crate::record::{AttemptRecord, RunConfig};

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
