//! Why a report could not be written: the file and the cause.

use std::path::PathBuf;

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
    #[error("drawing plot {name}")]
    Plot {
        name: &'static str,
        #[source]
        source: RenderError,
    },
    #[error(transparent)]
    Control(#[from] super::false_alarm::ControlError),
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
