//! `summary.json`: the whole summary; its schema is documented in the README.

use super::{Exporter, Summary};

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn render(&self, summary: &Summary) -> Result<String, String> {
        serde_json::to_string_pretty(summary).map_err(|e| e.to_string())
    }
}
