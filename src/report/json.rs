//! `summary.json`: the whole summary; its schema is documented in docs/outputs.md.

use super::error::RenderError;
use super::export::Exporter;
use super::view::RunView;

pub struct JsonExporter;

impl<'a> Exporter<RunView<'a>> for JsonExporter {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn render(&self, run: &RunView<'a>) -> Result<String, RenderError> {
        Ok(serde_json::to_string_pretty(run.summary)?)
    }
}
