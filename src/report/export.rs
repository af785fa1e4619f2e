//! One small trait for every output file, and the loop that writes them.
//! An exporter renders a view that is already computed (summary, plots,
//! comparisons); it never recomputes. A run's reports, `retrace compare`'s
//! files and the run's JUnit document are each a list of exporters over
//! their own view.

use std::path::{Path, PathBuf};

use super::error::{RenderError, ReportError};

/// One output format of a view `V`.
pub trait Exporter<V> {
    /// File name inside the output directory.
    fn file_name(&self) -> &'static str;
    fn render(&self, view: &V) -> Result<String, RenderError>;
}

/// Renders `exporter` and writes it to `path`.
pub fn write_one<V>(exporter: &dyn Exporter<V>, view: &V, path: &Path) -> Result<(), ReportError> {
    let file = exporter.file_name();
    let text = exporter
        .render(view)
        .map_err(|source| ReportError::Render { file, source })?;
    write_file(path, text.as_bytes())
}

/// Writes an output file atomically: a crash while writing leaves the old
/// file or the new one, never half of one.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    crate::util::atomic_write::write_atomically(
        path,
        bytes,
        crate::util::fault::Point::DuringSummary,
    )
    .map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Creates an output directory and its parents.
pub fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes every exporter's file into `dir`, in order; returns the paths.
pub fn write_each<V>(
    exporters: &[Box<dyn Exporter<V>>],
    view: &V,
    dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    exporters
        .iter()
        .map(|exporter| {
            let path = dir.join(exporter.file_name());
            write_one(exporter.as_ref(), view, &path).map(|()| path)
        })
        .collect()
}
