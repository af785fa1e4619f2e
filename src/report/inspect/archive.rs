//! The `.eval` file: a zip of JSON entries laid out as Inspect's own
//! recorder writes them (`_journal/start.json`, one `samples/<id>_epoch_1.json`
//! per sample, `summaries.json`, then `header.json`), deflated.

use std::io::{Cursor, Write};

use serde_json::{json, Value};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

/// The whole `.eval` archive in memory (written atomically by the caller).
pub(super) fn eval_zip(
    header: &Value,
    samples: &[(String, Value)],
    summaries: &[Value],
) -> std::io::Result<Vec<u8>> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    // A fixed modification time: the same run exports byte for byte the same.
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default());
    let start = json!({
        "version": header["version"],
        "eval": header["eval"],
        "plan": header["plan"],
    });
    let mut entry = |name: &str, value: &Value| -> std::io::Result<()> {
        zip.start_file(name, options)
            .map_err(std::io::Error::other)?;
        zip.write_all(&serde_json::to_vec(value).expect("a JSON value always serialises"))
    };
    entry("_journal/start.json", &start)?;
    for (id, sample) in samples {
        entry(&format!("samples/{id}_epoch_1.json"), sample)?;
    }
    entry("summaries.json", &Value::Array(summaries.to_vec()))?;
    entry("header.json", header)?;
    let cursor = zip.finish().map_err(std::io::Error::other)?;
    Ok(cursor.into_inner())
}
